package raftnode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/baristahq/barista/snapshot"
)

// RefusedError is a start refused because the data directory is damaged
// or inconsistent: the node's log no longer holds what it applied. The one
// safe way out is to rebuild the node from the cluster; starting it with
// its local state thrown away could make it vote twice in a term or help
// elect a leader that lacks committed entries.
type RefusedError struct {
	NodeID  string
	DataDir string
	Err     error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%v. The node refuses to start: a member that lost entries it applied, or its term and vote, could lose acknowledged jobs. "+
		"Rebuild it from the cluster: run `barista operator raft remove-peer %s` against a live member, empty %s (keep its contents for the post-mortem), "+
		"and start this node with --join; it catches up by InstallSnapshot (docs/operations.md, \"Rebuilding a node from the cluster\")",
		e.Err, e.NodeID, e.DataDir)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// openLog opens the node's log store and checks that Raft can start from it
// and from the snapshot the state machine was restored from (nil: none).
// It never creates a log store for a data directory that already holds
// snapshots or an applied index: a missing raft.db is a lost log, term and
// vote, not a new node.
func (n *Node) openLog(snap *raft.SnapshotMeta) (*raftboltdb.BoltStore, error) {
	start := time.Now()
	dir := n.cfg.DataDir
	refuse := func(err error) error { return &RefusedError{NodeID: n.cfg.ID, DataDir: dir, Err: err} }
	path := filepath.Join(dir, snapshot.LogFile)
	applied, err := snapshot.ReadApplied(dir)
	if err != nil {
		return nil, refuse(fmt.Errorf("%s: %w", filepath.Join(dir, snapshot.AppliedFile), err))
	}
	// Check the store before anything writes to it (a refused start leaves
	// the data directory byte for byte as it was), holding it open
	// read-only meanwhile (which keeps out a node running on it).
	var info snapshot.LogInfo
	if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
		var ro *raftboltdb.BoltStore
		if ro, err = snapshot.OpenLog(path, true); err == nil {
			err = n.checkLog(ro, path, snap, applied, &info)
			ro.Close()
		}
		if errors.Is(err, snapshot.ErrInUse) {
			return nil, err
		}
		if err != nil {
			return nil, refuse(err)
		}
	} else if snap != nil || applied != nil {
		what := "is missing"
		if err == nil {
			what = "is empty"
		}
		return nil, refuse(&snapshot.InconsistentError{Files: []string{path},
			Reason: fmt.Sprintf("%s %s, but %s holds snapshots or an applied index", path, what, dir)})
	}
	store, err := snapshot.OpenLog(path, false)
	if err != nil {
		return nil, refuse(err)
	}
	n.log.Info("log store checked", "first_index", info.First, "last_index", info.Last, "took", time.Since(start))
	return store, nil
}

// newRaft starts Raft, turning a panic while it loads its state (it
// panics on a log entry it cannot read) into an error. Raft starts no
// goroutine before that point.
func newRaft(rc *raft.Config, fsm raft.FSM, store *watchedStore, snaps raft.SnapshotStore, trans raft.Transport) (r *raft.Raft, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("raft could not load its state: %v", p)
		}
	}()
	// Replication reads back what was just stored: the newest entries are
	// kept in memory too, so that it rarely reads and decodes them from
	// BoltDB.
	logs, err := raft.NewLogCache(logCacheEntries, store)
	if err != nil {
		return nil, err
	}
	return raft.NewRaft(rc, fsm, logs, store, snaps, trans)
}

// logCacheEntries is how many of the newest log entries replication reads
// from memory: a follower in step lags a few entries (4 proposals in
// flight); at most 64 entries of at most 4 MiB each are held.
const logCacheEntries = 64

// checkLog verifies an existing log store, open read-only, against the
// snapshot and the applied index.
func (n *Node) checkLog(ro *raftboltdb.BoltStore, path string, snap *raft.SnapshotMeta, applied *snapshot.Applied, info *snapshot.LogInfo) error {
	var err error
	if *info, err = snapshot.VerifyLogFile(path); err != nil {
		return err
	}
	if info.New {
		if snap != nil || applied != nil {
			return &snapshot.InconsistentError{Files: []string{path},
				Reason: fmt.Sprintf("%s holds no log, but %s holds snapshots or an applied index", path, n.cfg.DataDir)}
		}
		return nil
	}
	st := snapshot.StartState{Log: ro, Stable: ro, LogPath: path, Info: *info, Snap: snap, Applied: applied}
	if snap != nil {
		st.SnapDir = filepath.Join(n.cfg.DataDir, "snapshots", snap.ID)
	}
	return st.Check()
}
