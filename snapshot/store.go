package snapshot

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/baristahq/barista/fsm"
)

// UnusableError reports a snapshot the node refuses to start from. The
// node never falls back to an older snapshot on its own.
type UnusableError struct {
	Path string
	Err  error
}

func (e *UnusableError) Error() string {
	return fmt.Sprintf("snapshot %s is unusable: %v. The node refuses to start rather than fall back to an older snapshot by itself: "+
		"move that snapshot's directory out of snapshots/ to start from the previous one (the node checks that its log still reaches back to it), "+
		"or rebuild the node from the cluster (docs/operations.md, \"A corrupt snapshot stops the node\")", e.Path, e.Err)
}

func (e *UnusableError) Unwrap() error { return e.Err }

// StateFile returns the path of a snapshot's data file in a file snapshot
// store rooted at base.
func StateFile(base, id string) string { return filepath.Join(base, "snapshots", id, "state.bin") }

// LoadNewest validates every snapshot directory's metadata under base (the
// root of a raft.FileSnapshotStore) and decodes the newest snapshot. It
// returns nil metadata when there is no snapshot. Any unreadable metadata,
// checksum failure or undecodable state is an *UnusableError naming the
// file.
func LoadNewest(store *raft.FileSnapshotStore, base string) (*raft.SnapshotMeta, *fsm.FSM, error) {
	dir := filepath.Join(base, "snapshots")
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var newest *raft.SnapshotMeta
	for _, e := range entries {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		metaPath := filepath.Join(dir, e.Name(), "meta.json")
		b, err := os.ReadFile(metaPath)
		var meta raft.SnapshotMeta
		if err == nil {
			err = json.Unmarshal(b, &meta)
		}
		if err == nil && (meta.Version < raft.SnapshotVersionMin || meta.Version > raft.SnapshotVersionMax) {
			err = fmt.Errorf("unsupported snapshot metadata version %d", meta.Version)
		}
		if err != nil {
			return nil, nil, &UnusableError{Path: metaPath, Err: err}
		}
		if newest == nil || newer(&meta, newest) {
			m := meta
			newest = &m
		}
	}
	if newest == nil {
		return nil, nil, nil
	}
	list, err := store.List()
	if err != nil {
		return nil, nil, err
	}
	if len(list) == 0 || list[0].ID != newest.ID {
		return nil, nil, &UnusableError{Path: filepath.Join(dir, newest.ID), Err: fmt.Errorf("the snapshot store does not list it as the newest")}
	}
	return loadID(store, base, newest.ID)
}

// LoadAtOrBefore decodes the newest retained snapshot whose index is at
// most index (replaying to an earlier point of the log); nil metadata
// when none is.
func LoadAtOrBefore(store *raft.FileSnapshotStore, base string, index uint64) (*raft.SnapshotMeta, *fsm.FSM, error) {
	list, err := store.List()
	if err != nil {
		return nil, nil, err
	}
	for _, m := range list { // newest first
		if m.Index <= index {
			return loadID(store, base, m.ID)
		}
	}
	return nil, nil, nil
}

func loadID(store *raft.FileSnapshotStore, base, id string) (*raft.SnapshotMeta, *fsm.FSM, error) {
	path := StateFile(base, id)
	meta, rc, err := store.Open(id) // verifies the store's CRC64
	if err != nil {
		return nil, nil, &UnusableError{Path: path, Err: err}
	}
	defer rc.Close()
	f := fsm.New()
	index, err := Read(rc, f)
	if err != nil {
		return nil, nil, &UnusableError{Path: path, Err: err}
	}
	if index > meta.Index {
		return nil, nil, &UnusableError{Path: path, Err: fmt.Errorf("state is at index %d, past the metadata's %d", index, meta.Index)}
	}
	// A restored backup carries its own, older index: Raft's is the one the
	// log continues from.
	f.SetIndex(meta.Index)
	return meta, f, nil
}

// newer orders snapshots as the file store does: by term, index, then ID.
func newer(a, b *raft.SnapshotMeta) bool {
	if a.Term != b.Term {
		return a.Term > b.Term
	}
	if a.Index != b.Index {
		return a.Index > b.Index
	}
	return a.ID > b.ID
}
