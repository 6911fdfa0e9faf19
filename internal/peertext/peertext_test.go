package peertext

import (
	"testing"

	"github.com/hashicorp/raft"

	"github.com/baristahq/barista/proto/clusterpb"
)

// TestFactsAndState: each kind of member as a person is shown it.
func TestFactsAndState(t *testing.T) {
	cases := []struct {
		peer  *clusterpb.Peer
		state string
		facts Text
	}{
		{&clusterpb.Peer{Leader: true, Known: true, AppliedKnown: true, AppliedIndex: 42}, "leader", Text{"42", "-", "-"}},
		{&clusterpb.Peer{Known: true, Reachable: true, LastContactMs: 1500, LagKnown: true, Lag: 3, AppliedKnown: true, AppliedIndex: 39}, "follower", Text{"39", "1.5s ago", "3"}},
		{&clusterpb.Peer{Known: true, LastContactMs: 12000}, "unreachable", Text{"unknown", "12s ago", "unknown"}},
		{&clusterpb.Peer{}, "unknown", Text{"unknown", "unknown", "unknown"}},
	}
	for i, c := range cases {
		if got := State(c.peer); got != c.state {
			t.Errorf("%d: State %q, want %q", i, got, c.state)
		}
		if got := Facts(c.peer); got != c.facts {
			t.Errorf("%d: Facts %+v, want %+v", i, got, c.facts)
		}
	}
}

// TestStateNameAndHash: a node's Raft state and its state hash as Status
// answers them.
func TestStateNameAndHash(t *testing.T) {
	for s, want := range map[raft.RaftState]string{raft.Leader: "leader", raft.Follower: "follower", raft.Candidate: "candidate", raft.Shutdown: "shutdown"} {
		if got := StateName(s); got != want {
			t.Errorf("StateName(%v) = %q, want %q", s, got, want)
		}
	}
	var h [32]byte
	h[0], h[31] = 0xab, 0x01
	if got, want := HashText(h, false), "ab"+"000000000000000000000000000000000000000000000000000000000000"+"01"; got != want {
		t.Errorf("HashText = %q, want %q", got, want)
	}
	if got := HashText(h, true); got != "" {
		t.Errorf("HashText skipped = %q, want \"\"", got)
	}
}
