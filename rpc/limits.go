package rpc

import (
	"time"

	"github.com/baristahq/barista/fsm"
)

// Limits bound what callers can make a node's gRPC server hold: every
// resource a caller without a token, or a tenant, can grow has one
// (docs/security.md, "Limits"; the HTTP side's are web.Limits). A zero
// field takes its default.
type Limits struct {
	// MaxMessageBytes bounds a gRPC message this node receives and an
	// HTTP/JSON request body, between MinMessageBytes and
	// fsm.MaxMessageBytes (the default).
	MaxMessageBytes int
	// WatchStreams bounds the watch streams the node serves, and
	// WatchStreamsPerIdentity those of one identity; more are refused
	// RESOURCE_EXHAUSTED. A watch whose client has taken no event for
	// WatchStall while more wait (its flow-control window and gRPC's
	// buffer full) is ended RESOURCE_EXHAUSTED: the client resumes from
	// its cursor.
	WatchStreams, WatchStreamsPerIdentity int
	WatchStall                            time.Duration
}

// Defaults and bounds of Limits.
const (
	// MinMessageBytes is the smallest MaxMessageBytes.
	MinMessageBytes         = 1 << 20
	DefaultWatchStreams     = 512
	DefaultWatchPerIdentity = 64
	DefaultWatchStall       = 10 * time.Second
)

// DefaultLimits returns every limit at its default.
func DefaultLimits() Limits {
	return Limits{MaxMessageBytes: fsm.MaxMessageBytes, WatchStreams: DefaultWatchStreams, WatchStreamsPerIdentity: DefaultWatchPerIdentity, WatchStall: DefaultWatchStall}
}

// withDefaults gives each zero field its default.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	orDefault(&l.MaxMessageBytes, d.MaxMessageBytes)
	orDefault(&l.WatchStreams, d.WatchStreams)
	orDefault(&l.WatchStreamsPerIdentity, d.WatchStreamsPerIdentity)
	orDefault(&l.WatchStall, d.WatchStall)
	l.MaxMessageBytes = min(max(l.MaxMessageBytes, MinMessageBytes), fsm.MaxMessageBytes)
	return l
}

// orDefault sets *p to def unless it is positive.
func orDefault[T int | time.Duration](p *T, def T) {
	if *p <= 0 {
		*p = def
	}
}
