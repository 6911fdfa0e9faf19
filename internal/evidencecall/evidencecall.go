// Package evidencecall is what a node checks of a call for the evidence
// of fairness (SPEC §3, docs/fairness.md) before it replays a window of
// its log: the window the request names (Window) and the replays the
// node and each caller hold at once (Limit). rpc's UsageStatement and
// FairnessCertificate call it, then snapshot.Statement or
// snapshot.Certificate.
package evidencecall

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/internal/text"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/snapshot"
)

// Replays are bounded per node and per caller: each loads a snapshot into
// a state machine of its own (as much memory again as the state) and
// replays the log after it.
const (
	// MaxReplays is how many statements and certificates a node issues
	// at once; MaxReplaysPerCaller how many of them one caller (a
	// token's identity: its tenant, or the admin) may hold.
	MaxReplays          = 2
	MaxReplaysPerCaller = 1
)

// Limit holds the replays in progress; Refused counts the refusals by
// limit (nil: none counted). The zero value is ready.
type Limit struct {
	Refused *prometheus.CounterVec

	mu     sync.Mutex
	n      int
	caller map[string]int
}

func (l *Limit) count(limit string) {
	if l.Refused != nil {
		l.Refused.WithLabelValues(limit).Inc()
	}
}

// Acquire takes a replay's place for caller who, or refuses it as
// RESOURCE_EXHAUSTED (counted under limit caller or node). release
// gives the place back.
func (l *Limit) Acquire(who string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.caller == nil {
		l.caller = map[string]int{}
	}
	if l.caller[who] >= MaxReplaysPerCaller {
		l.count("caller")
		return nil, status.Errorf(codes.ResourceExhausted, "this caller is already being issued %d statement or certificate on this node: ask again when it is done", MaxReplaysPerCaller)
	}
	if l.n >= MaxReplays {
		l.count("node")
		return nil, status.Errorf(codes.ResourceExhausted, "this node is issuing %d statements or certificates: ask again shortly, or ask another node", MaxReplays)
	}
	l.n++
	l.caller[who]++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.n--
		if l.caller[who]--; l.caller[who] == 0 {
			delete(l.caller, who)
		}
	}, nil
}

// Window reads a request's window. Its error is a *text.InvalidError
// naming the field at fault (window, window.by_time, ...).
func Window(w *pb.EvidenceWindow) (snapshot.WindowSpec, error) {
	if w == nil {
		return snapshot.WindowSpec{}, nil
	}
	spec := snapshot.WindowSpec{FromIndex: w.FromIndex, ToIndex: w.ToIndex, ByTime: w.ByTime, FromMs: w.FromMs, ToMs: w.ToMs}
	switch {
	case w.ByTime && (w.FromIndex != 0 || w.ToIndex != 0):
		return spec, text.Invalidf("window", "give indexes or, with by_time, times, not both")
	case !w.ByTime && (w.FromMs != 0 || w.ToMs != 0):
		return spec, text.Invalidf("window.by_time", "from_ms and to_ms need by_time")
	case w.FromMs < 0 || w.ToMs < 0:
		return spec, text.Invalidf("window.from_ms", "negative time")
	case w.ToIndex != 0 && w.ToIndex < w.FromIndex:
		return spec, text.Invalidf("window.to_index", "%d is before from_index %d", w.ToIndex, w.FromIndex)
	case w.ToMs != 0 && w.ToMs <= w.FromMs:
		return spec, text.Invalidf("window.to_ms", "%d is not after from_ms %d", w.ToMs, w.FromMs)
	}
	return spec, nil
}
