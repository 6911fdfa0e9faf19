// Package peertext says a node's state and the cluster's members as a
// person is shown them, the same on every surface: the status command,
// list-peers, the console's pages.
package peertext

import (
	"encoding/hex"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/baristahq/barista/proto/clusterpb"
)

// HashText is a state hash as Status answers it: hexadecimal, "" when
// it was skipped.
func HashText(hash [32]byte, skipped bool) string {
	if skipped {
		return ""
	}
	return hex.EncodeToString(hash[:])
}

// StateName names a Raft state as Status does: leader, follower,
// candidate or shutdown.
func StateName(s raft.RaftState) string {
	switch s {
	case raft.Leader:
		return "leader"
	case raft.Follower:
		return "follower"
	case raft.Candidate:
		return "candidate"
	}
	return "shutdown"
}

// Text is how a person is shown a member's facts: its applied index,
// last contact and lag, "unknown" where the answering node could not
// learn it ("-" where it does not apply: the leader's own contact and
// lag).
type Text struct{ Applied, Contact, Lag string }

// Facts says a member's facts as Text.
func Facts(p *clusterpb.Peer) Text {
	f := Text{Applied: "unknown", Contact: "unknown", Lag: "unknown"}
	if p.AppliedKnown {
		f.Applied = strconv.FormatUint(p.AppliedIndex, 10)
	}
	switch {
	case p.Leader:
		f.Contact, f.Lag = "-", "-"
	case p.Known:
		f.Contact = (time.Duration(p.LastContactMs) * time.Millisecond).String() + " ago"
		if p.LagKnown {
			f.Lag = strconv.FormatUint(p.Lag, 10)
		}
	}
	return f
}

// State names a peer's state as the leader sees it: leader, follower,
// unreachable (not heard from within the election timeout), or unknown
// (no leader answered, or not heard from since it started).
func State(p *clusterpb.Peer) string {
	switch {
	case p.Leader:
		return "leader"
	case !p.Known:
		return "unknown"
	case !p.Reachable:
		return "unreachable"
	}
	return "follower"
}
