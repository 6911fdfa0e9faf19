package raftnode

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/baristahq/barista/fsm"
)

// TestRaftLoggerQuiet: at warn, hashicorp/raft's expected messages of a
// follower catching up are not shown, and a dead peer's failed heartbeats,
// appends and contacts — named by its address in some and its ID in
// others — make one line when it goes away, one reminder every five
// minutes with the count, and one info line when it answers again,
// instead of a line an attempt.
func TestRaftLoggerQuiet(t *testing.T) {
	var out bytes.Buffer
	base := hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Info, DisableTime: true})
	now := time.Unix(1000, 0)
	l := newRaftLogger(base, func() []fsm.Member { return []fsm.Member{{ID: "n3", RaftAddr: "10.0.0.3:7440"}} }).(*raftLogger)
	l.f.now = func() time.Time { return now }
	n3 := raft.Server{ID: "n3", Address: "10.0.0.3:7440", Suffrage: raft.Voter}
	down := errors.New("dial tcp 10.0.0.3:7440: connect: connection refused")

	l.Warn("failed to get previous log", "previous-index", 5, "last-index", 0, "error", "log not found")
	l.Warn("appendEntries rejected, sending older logs", "peer", n3, "next", 1)
	l.Warn("heartbeat timeout reached, starting election", "last-leader-addr", "", "last-leader-id", "")
	for range 3 * 60 { // three minutes of failures, several a second
		l.Error("failed to heartbeat to", "peer", raft.ServerAddress("10.0.0.3:7440"), "backoff time", time.Second, "error", down)
		l.Error("failed to appendEntries to", "peer", n3, "error", down)
		l.Warn("failed to contact", "server-id", raft.ServerID("n3"), "time", time.Second)
		now = now.Add(time.Second)
	}
	for range 3 * 60 {
		l.Error("failed to heartbeat to", "peer", raft.ServerAddress("10.0.0.3:7440"), "backoff time", time.Second, "error", down)
		now = now.Add(time.Second)
	}
	l.Info("pipelining replication", "peer", n3)
	l.Warn("heartbeat timeout reached, starting election", "last-leader-addr", "10.0.0.1:7440", "last-leader-id", "n1")

	var warnings []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if strings.HasPrefix(line, "[WARN]") || strings.HasPrefix(line, "[ERROR]") {
			warnings = append(warnings, line)
		}
	}
	want := []string{
		`[WARN]  cannot reach peer (further failures are counted, not logged, until it answers again): peer=n3 attempt="failed to heartbeat to" error="dial tcp 10.0.0.3:7440: connect: connection refused"`,
		`[WARN]  peer still unreachable: peer=n3 failures=661 for=5m0s error="dial tcp 10.0.0.3:7440: connect: connection refused"`,
		`[WARN]  heartbeat timeout reached, starting election: last-leader-addr=10.0.0.1:7440 last-leader-id=n1`,
	}
	if strings.Join(warnings, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings and errors:\n%s\nwant:\n%s\nall:\n%s", strings.Join(warnings, "\n"), strings.Join(want, "\n"), out.String())
	}
	if !strings.Contains(out.String(), `[INFO]  peer answers again: peer=n3 failures=720 after=6m0s`) {
		t.Errorf("no recovery line:\n%s", out.String())
	}
}
