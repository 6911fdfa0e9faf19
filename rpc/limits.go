package rpc

import (
	"time"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/sfq"
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
	// RequestBytes bounds the bytes of requests the node holds while it
	// reads them, and RequestBytesPerIdentity those of one caller
	// (requests.go): a unary call reserves MaxMessageBytes before its
	// request is read.
	RequestBytes, RequestBytesPerIdentity int64
	// RequestReadTimeout is how long a request may take to arrive once its
	// call has begun; past it its connection is closed.
	RequestReadTimeout time.Duration
	// StreamsPerConnection bounds the calls and streams one connection
	// has open at once (HTTP/2's MAX_CONCURRENT_STREAMS).
	StreamsPerConnection int
	// WriteRate holds the write calls of one identity (a tenant upsert, a
	// pause, a group's setting, a cancel, a bulk command: not submits,
	// which submit_rate holds, nor worker reports) on the leader to
	// WriteRate.N per WriteRate.PeriodMs in bursts of WriteRate.Burst (a
	// zero N: none; DefaultLimits has DefaultWriteRate).
	WriteRate sfq.RateLimit
	// ConnectionIdle closes a connection that has had no call for this
	// long (connections that made no call with a token are closed
	// sooner: connlimit's Config.UnauthenticatedIdle).
	ConnectionIdle time.Duration
	// CallsPerIdentity bounds the unary calls of one caller in progress
	// on the node (edgeshare.go); more are refused RESOURCE_EXHAUSTED.
	CallsPerIdentity int
	// HeldReadsPerIdentity and HeldReads bound the reads the node holds
	// until it has applied their caller's last write (a stale read or a
	// watch naming an index, up to ReadWait), of one caller and in all.
	HeldReadsPerIdentity, HeldReads int
	// WorkerRecordsPerBinding bounds, on the leader, the worker records
	// of one prefix binding of worker tokens ("gpu-*"): a new ID of such
	// a token (its session, or a drain that would make its record) is
	// refused past it (workerbind.go).
	WorkerRecordsPerBinding int
	// WorkerRecordsUnbound bounds, on the leader, the worker records past
	// which a worker token bound to no ID may make no new one: a session
	// of a new ID is refused while the state holds this many (workerbind.go).
	WorkerRecordsUnbound int
}

// Defaults and bounds of Limits.
const (
	// MinMessageBytes is the smallest MaxMessageBytes.
	MinMessageBytes         = 1 << 20
	DefaultWatchStreams     = 512
	DefaultWatchPerIdentity = 64
	DefaultWatchStall       = 10 * time.Second
	// DefaultRequestBytes and DefaultRequestBytesPerIdentity: 64 and 16
	// requests of the largest size (4 MiB) being read at once.
	DefaultRequestBytes            = 256 << 20
	DefaultRequestBytesPerIdentity = 64 << 20
	DefaultRequestReadTimeout      = 30 * time.Second
	// DefaultStreamsPerConnection is above DefaultWatchStreams: the
	// HTTP/JSON API's watches share the gateway's one connection.
	DefaultStreamsPerConnection = 1024
	DefaultConnectionIdle       = 5 * time.Minute
)

// DefaultWriteRate is the write calls of one identity the leader takes:
// 100 a second, in bursts of 200.
var DefaultWriteRate = sfq.RateLimit{N: 100, PeriodMs: 1000, Burst: 200}

// DefaultLimits returns every limit at its default.
func DefaultLimits() Limits {
	return Limits{MaxMessageBytes: fsm.MaxMessageBytes, WatchStreams: DefaultWatchStreams, WatchStreamsPerIdentity: DefaultWatchPerIdentity, WatchStall: DefaultWatchStall,
		RequestBytes: DefaultRequestBytes, RequestBytesPerIdentity: DefaultRequestBytesPerIdentity, RequestReadTimeout: DefaultRequestReadTimeout,
		StreamsPerConnection: DefaultStreamsPerConnection, ConnectionIdle: DefaultConnectionIdle, WriteRate: DefaultWriteRate,
		CallsPerIdentity: DefaultCallsPerIdentity, HeldReadsPerIdentity: DefaultHeldReadsPerIdentity, HeldReads: DefaultHeldReads,
		WorkerRecordsPerBinding: DefaultWorkerRecordsPerBinding, WorkerRecordsUnbound: DefaultWorkerRecordsUnbound}
}

// withDefaults gives each zero field its default.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	orDefault(&l.MaxMessageBytes, d.MaxMessageBytes)
	orDefault(&l.WatchStreams, d.WatchStreams)
	orDefault(&l.WatchStreamsPerIdentity, d.WatchStreamsPerIdentity)
	orDefault(&l.WatchStall, d.WatchStall)
	orDefault(&l.RequestBytes, d.RequestBytes)
	orDefault(&l.RequestBytesPerIdentity, d.RequestBytesPerIdentity)
	orDefault(&l.RequestReadTimeout, d.RequestReadTimeout)
	orDefault(&l.StreamsPerConnection, d.StreamsPerConnection)
	orDefault(&l.ConnectionIdle, d.ConnectionIdle)
	orDefault(&l.CallsPerIdentity, d.CallsPerIdentity)
	orDefault(&l.HeldReadsPerIdentity, d.HeldReadsPerIdentity)
	orDefault(&l.HeldReads, d.HeldReads)
	orDefault(&l.WorkerRecordsPerBinding, d.WorkerRecordsPerBinding)
	orDefault(&l.WorkerRecordsUnbound, d.WorkerRecordsUnbound)
	l.MaxMessageBytes = min(max(l.MaxMessageBytes, MinMessageBytes), fsm.MaxMessageBytes)
	return l
}

// orDefault sets *p to def unless it is positive.
func orDefault[T int | int64 | time.Duration](p *T, def T) {
	if *p <= 0 {
		*p = def
	}
}
