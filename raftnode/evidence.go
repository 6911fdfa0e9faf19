package raftnode

import (
	"path/filepath"

	"github.com/baristahq/barista/snapshot"
)

// EvidenceSource returns the node's own snapshots and log as a source for
// the evidence of fairness (snapshot.Statement, snapshot.Certificate): up
// to the last entry this node applied, from the snapshots it retains and
// the entries its log still holds after them. The replay runs on a state
// machine of its own; Raft may compact the log meanwhile, and a read of an
// entry compacted away fails (ask again).
func (n *Node) EvidenceSource() snapshot.Source {
	_, applied := n.FSM.Clock()
	return &snapshot.StoreSource{Snaps: n.snaps, Base: n.cfg.DataDir, Log: n.store, LogPath: filepath.Join(n.cfg.DataDir, snapshot.LogFile), Applied: applied}
}
