package raftnode

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/baristahq/barista/fsm"
)

// hashicorp/raft logs conditions it expects as warnings and errors: a new
// follower has "no previous log" when the leader first probes it, the
// leader's first append to it is "rejected, sending older logs", and a
// peer that is down fails every heartbeat and append, several lines a
// second for as long as it stays down. At --log-level warn the operator
// is to see what needs a person, once: raftLogger moves the expected
// conditions to debug, and says a peer's failures once per change of its
// state — the first failure (warn), a reminder every peerReminder while
// it lasts (warn, with the count), and its recovery (info, with the
// count) — instead of once per attempt.

// Messages hashicorp/raft logs, by what they are.
var (
	// expectedMessages are normal while a follower catches up: debug.
	expectedMessages = map[string]bool{
		"failed to get previous log":                 true,
		"appendEntries rejected, sending older logs": true,
	}
	// peerFailures are attempts to reach one peer that failed; the value
	// is the key of the argument that names the peer.
	peerFailures = map[string]string{
		"failed to appendEntries to":              "peer",
		"failed to heartbeat to":                  "peer",
		"failed to make requestVote RPC":          "target",
		"failed to contact":                       "server-id",
		"failed to pipeline appendEntries":        "peer",
		"failed to start pipeline replication to": "peer",
		"failed to send snapshot to":              "peer",
		"failed to install snapshot":              "peer",
	}
	// peerRecoveries say a peer answers again.
	peerRecoveries = map[string]string{
		"pipelining replication": "peer",
	}
)

const (
	// peerReminder is how often a peer that stays unreachable is
	// mentioned again.
	peerReminder = 5 * time.Minute
	// peerQuiet is how long a peer must go without a failure for the next
	// one to count as a new outage.
	peerQuiet = 30 * time.Second
)

// peerLog is what raftLogger remembers of one peer's failures.
type peerLog struct {
	failures  int       // since the outage began
	since     time.Time // the first failure of the outage
	last      time.Time // the latest failure
	mentioned time.Time // the latest line said about it
}

// peerFilter is the state raftLogger's copies share.
type peerFilter struct {
	mu    sync.Mutex
	peers map[string]*peerLog
	ids   map[raft.ServerAddress]raft.ServerID // learned from the raft.Server arguments
	now   func() time.Time
	// members, if set, lists the members the replicated state knows (ID
	// and Raft address), for a peer raft names by its address alone.
	members func() []fsm.Member
}

// raftLogger is the logger hashicorp/raft is given (see above).
type raftLogger struct {
	hclog.Logger
	f *peerFilter
}

// newRaftLogger wraps l for hashicorp/raft; members, if not nil, names
// the members a peer's address belongs to.
func newRaftLogger(l hclog.Logger, members func() []fsm.Member) hclog.Logger {
	return &raftLogger{Logger: l, f: &peerFilter{peers: map[string]*peerLog{}, ids: map[raft.ServerAddress]raft.ServerID{}, now: time.Now, members: members}}
}

func (l *raftLogger) wrap(inner hclog.Logger) hclog.Logger { return &raftLogger{Logger: inner, f: l.f} }

func (l *raftLogger) Named(name string) hclog.Logger      { return l.wrap(l.Logger.Named(name)) }
func (l *raftLogger) ResetNamed(name string) hclog.Logger { return l.wrap(l.Logger.ResetNamed(name)) }
func (l *raftLogger) With(args ...any) hclog.Logger       { return l.wrap(l.Logger.With(args...)) }

func (l *raftLogger) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l *raftLogger) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }
func (l *raftLogger) Info(msg string, args ...any)  { l.Log(hclog.Info, msg, args...) }

// Log routes one message of hashicorp/raft.
func (l *raftLogger) Log(level hclog.Level, msg string, args ...any) {
	l.f.learn(args)
	switch {
	case msg == "heartbeat timeout reached, starting election" && argValue(args, "last-leader-id") == "":
		// A node that never knew a leader (a first start) elects one.
		l.Logger.Log(min(level, hclog.Info), msg, args...)
	case expectedMessages[msg]:
		l.Logger.Log(hclog.Debug, msg, args...)
	case peerFailures[msg] != "":
		l.failure(level, msg, l.f.peerName(args, peerFailures[msg]), args)
	case peerRecoveries[msg] != "":
		l.Logger.Log(level, msg, args...)
		l.recovery(l.f.peerName(args, peerRecoveries[msg]))
	default:
		l.Logger.Log(level, msg, args...)
	}
}

// failure says a failed attempt to reach peer: the first of an outage at
// warn, then a reminder every peerReminder; every attempt at debug.
func (l *raftLogger) failure(level hclog.Level, msg, peer string, args []any) {
	f := l.f
	now := f.now()
	f.mu.Lock()
	p := f.peers[peer]
	if p == nil || now.Sub(p.last) > peerQuiet {
		p = &peerLog{since: now}
		f.peers[peer] = p
	}
	p.failures++
	p.last = now
	first := p.failures == 1
	remind := !first && now.Sub(p.mentioned) >= peerReminder
	if first || remind {
		p.mentioned = now
	}
	n, since := p.failures, p.since
	f.mu.Unlock()
	l.Logger.Log(hclog.Debug, msg, args...)
	switch {
	case first:
		l.Logger.Log(min(level, hclog.Warn), "cannot reach peer (further failures are counted, not logged, until it answers again)",
			append([]any{"peer", peer, "attempt", msg}, errorArg(args)...)...)
	case remind:
		l.Logger.Log(min(level, hclog.Warn), "peer still unreachable", append([]any{"peer", peer, "failures", n,
			"for", now.Sub(since).Round(time.Second)}, errorArg(args)...)...)
	}
}

// recovery says a peer answers again after failures.
func (l *raftLogger) recovery(peer string) {
	f := l.f
	f.mu.Lock()
	p := f.peers[peer]
	delete(f.peers, peer)
	f.mu.Unlock()
	if p != nil && p.failures > 0 {
		l.Logger.Info("peer answers again", "peer", peer, "failures", p.failures, "after", f.now().Sub(p.since).Round(time.Second))
	}
}

// peerName reads the peer an argument names — a raft.Server, an address
// or an ID — as its ID where it is known (raft names a peer by its ID in
// some messages and by its address in others), else its address.
func (f *peerFilter) peerName(args []any, key string) string {
	for i := 0; i+1 < len(args); i += 2 {
		if k, ok := args[i].(string); !ok || k != key {
			continue
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		switch v := args[i+1].(type) {
		case raft.Server:
			f.ids[v.Address] = v.ID
			return string(v.ID)
		case *raft.Server:
			f.ids[v.Address] = v.ID
			return string(v.ID)
		case raft.ServerAddress:
			if id, ok := f.ids[v]; ok {
				return string(id)
			}
			if f.members != nil {
				for _, m := range f.members() {
					if m.RaftAddr == string(v) {
						return m.ID
					}
				}
			}
			return string(v)
		case raft.ServerID:
			return string(v)
		default:
			return fmt.Sprint(v)
		}
	}
	return "unknown"
}

// learn remembers the ID of every raft.Server an argument names, so that
// a peer named by its address is named by its ID.
func (f *peerFilter) learn(args []any) {
	for i := 1; i < len(args); i += 2 {
		var srv *raft.Server
		switch v := args[i].(type) {
		case raft.Server:
			srv = &v
		case *raft.Server:
			srv = v
		}
		if srv != nil && srv.ID != "" {
			f.mu.Lock()
			f.ids[srv.Address] = srv.ID
			f.mu.Unlock()
		}
	}
}

// argValue returns the text of argument key ("" if absent).
func argValue(args []any, key string) string {
	for i := 0; i+1 < len(args); i += 2 {
		if k, ok := args[i].(string); ok && k == key {
			return fmt.Sprint(args[i+1])
		}
	}
	return ""
}

// errorArg returns the "error" argument of args, if any.
func errorArg(args []any) []any {
	for i := 0; i+1 < len(args); i += 2 {
		if k, ok := args[i].(string); ok && k == "error" {
			return []any{"error", args[i+1]}
		}
	}
	return nil
}
