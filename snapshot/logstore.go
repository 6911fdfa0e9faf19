package snapshot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	bolt "go.etcd.io/bbolt"
)

// The buckets and stable-store key raft-boltdb and hashicorp/raft use.
var (
	logsBucket     = []byte("logs")
	confBucket     = []byte("conf")
	keyCurrentTerm = []byte("CurrentTerm")
)

// ErrLogDamaged marks a Raft log store that cannot be opened or read.
var ErrLogDamaged = errors.New("the Raft log store is damaged")

// LogError reports a damaged Raft log store, naming the file.
type LogError struct {
	Path string
	Err  error
}

func (e *LogError) Error() string {
	return fmt.Sprintf("Raft log %s is damaged: %v", e.Path, e.Err)
}

func (e *LogError) Unwrap() []error { return []error{ErrLogDamaged, e.Err} }

// LogInfo is what VerifyLogFile learnt of a log store.
type LogInfo struct {
	First, Last uint64 // the first and last index (0, 0: an empty log)
	// Gaps are the runs of indexes missing between First and Last, oldest
	// first. hashicorp/raft leaves one when it restores a backup (barista
	// operator snapshot restore): it installs the snapshot at its last
	// index + 1 and writes no entry there. A gap at or below the index of
	// the snapshot a node starts from is such a jump; one above it is lost
	// entries (GapAfter).
	Gaps []Gap
	// New is set for a store raft-boltdb has not initialised yet (a
	// missing or empty file, or one without its buckets).
	New bool
}

// Gap is a run of missing log indexes, From to To inclusive.
type Gap struct{ From, To uint64 }

// GapIn returns the oldest gap with an index in from..to, if any.
func (i LogInfo) GapIn(from, to uint64) (Gap, bool) {
	for _, g := range i.Gaps {
		if g.To >= from && g.From <= to {
			return g, true
		}
	}
	return Gap{}, false
}

// GapAfter reports, as a *LogError naming path, a gap with an index above
// index: Raft reads every entry after the snapshot it starts from, so
// the log must be whole there. Gaps at or below it are allowed (see
// LogInfo.Gaps).
func (i LogInfo) GapAfter(path string, index uint64) error {
	if g, ok := i.GapIn(index+1, i.Last); ok {
		return &LogError{Path: path, Err: fmt.Errorf("the log jumps from index %d to %d: entries are missing", g.From-1, g.To+1)}
	}
	return nil
}

// VerifyLogFile checks the structure of the Raft log and stable store at
// path without bbolt and without changing it (see verifyBolt): every page
// in the file, reached once, of the right type; log indexes in order, the
// gaps between them listed (whether one is allowed depends on the
// snapshot, see GapAfter); a freelist that agrees with the tree.
// Damage is a *LogError naming the file. Hold the store open read-only
// (OpenLog) meanwhile: that keeps a writer out.
func VerifyLogFile(path string) (LogInfo, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return LogInfo{New: true}, nil
	}
	if err != nil {
		return LogInfo{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return LogInfo{}, err
	}
	if st.Size() == 0 {
		return LogInfo{New: true}, nil
	}
	info, err := verifyBolt(f, st.Size())
	if err != nil {
		return info, &LogError{Path: path, Err: err}
	}
	return info, nil
}

// OpenLog opens the Raft log and stable store at path, returning damage
// (a panic or memory fault of bbolt's included) as a *LogError naming the
// file, and a file lock held elsewhere as ErrInUse. Opening a store for
// writing writes to it, and bbolt trusts what it reads: open it read-only
// and verify it (VerifyLogFile) first.
func OpenLog(path string, readOnly bool) (*raftboltdb.BoltStore, error) {
	var store *raftboltdb.BoltStore
	err := guard(path, func() error {
		var err error
		store, err = raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bolt.Options{Timeout: 2 * time.Second, ReadOnly: readOnly}})
		return err
	})
	if err != nil {
		return nil, err
	}
	return store, nil
}

// guard runs fn, turning a bbolt panic or a memory fault (a truncated,
// memory-mapped file) into a *LogError, and wraps the errors bbolt
// returns for a damaged file into one.
func guard(path string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = &LogError{Path: path, Err: fmt.Errorf("%v", r)}
		}
	}()
	err = fn()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, bolt.ErrTimeout):
		return fmt.Errorf("%s: %w", path, ErrInUse)
	case errors.Is(err, bolt.ErrInvalid), errors.Is(err, bolt.ErrVersionMismatch), errors.Is(err, bolt.ErrChecksum):
		return &LogError{Path: path, Err: err}
	}
	var le *LogError
	if errors.As(err, &le) {
		return err
	}
	if _, statErr := os.Stat(path); statErr == nil && !errors.Is(err, os.ErrPermission) {
		// Any other failure to open or read an existing file is damage
		// too (bbolt's "file size too small", a short read).
		return &LogError{Path: path, Err: err}
	}
	return fmt.Errorf("%s: %w", path, err)
}

// readLog reads one entry through the store, turning a panic or fault into
// a *LogError.
func readLog(store raft.LogStore, path string, index uint64, l *raft.Log) error {
	return guard(path, func() error {
		if err := store.GetLog(index, l); err != nil {
			return &LogError{Path: path, Err: fmt.Errorf("log entry %d: %w", index, err)}
		}
		if l.Index != index {
			return &LogError{Path: path, Err: fmt.Errorf("the entry stored at index %d says it is %d", index, l.Index)}
		}
		return nil
	})
}

// ErrInconsistent marks a data directory whose log, snapshot and recorded
// applied index do not fit together.
var ErrInconsistent = errors.New("the data directory is inconsistent")

// InconsistentError reports a data directory Raft must not start from:
// its log does not continue the snapshot, misses entries, or ends before
// the index this node recorded as applied (acknowledged). Starting would
// panic, or would run a voter that has forgotten entries it acknowledged.
type InconsistentError struct {
	Files  []string
	Reason string
}

func (e *InconsistentError) Error() string { return e.Reason }

func (e *InconsistentError) Unwrap() error { return ErrInconsistent }

// StartState is what a node starts Raft from: the log store (checked by
// CheckLogFile, which found Info), the snapshot the state machine was restored
// from (nil: none) and the applied index recorded in the data directory
// (nil: none).
type StartState struct {
	Log     raft.LogStore
	Stable  raft.StableStore
	LogPath string
	Info    LogInfo
	Snap    *raft.SnapshotMeta
	SnapDir string
	Applied *Applied
}

// Check verifies that Raft can start from s without losing anything this
// node acknowledged: the stable store still holds a current term (and so
// the vote cast in it), the log continues the snapshot without a gap,
// agrees with it on the term at its index (unless the snapshot is a
// restored backup's, installed in a gap of the log), every entry after it
// is readable and in term order, and the log (or the snapshot) reaches
// the recorded applied index. Gaps at or below the snapshot's index are
// allowed: Raft never reads there at start, and sends a follower that
// needs a missing entry the snapshot instead. Errors are
// *InconsistentError or *LogError.
func (s StartState) Check() error {
	var snapIndex, snapTerm uint64
	if s.Snap != nil {
		snapIndex, snapTerm = s.Snap.Index, s.Snap.Term
	}
	files := []string{s.LogPath}
	if s.Snap != nil {
		files = append(files, s.SnapDir)
	}
	fail := func(format string, args ...any) error {
		return &InconsistentError{Files: files, Reason: fmt.Sprintf(format, args...)}
	}
	var term uint64
	err := guard(s.LogPath, func() error {
		var err error
		term, err = s.Stable.GetUint64(keyCurrentTerm)
		return err
	})
	if err != nil && !errors.Is(err, raftboltdb.ErrKeyNotFound) {
		return err
	}
	if term == 0 && (s.Info.Last > 0 || s.Snap != nil || s.Applied != nil) {
		return fail("%s holds no current term, yet the node has a log or a snapshot: its term and vote are lost", s.LogPath)
	}
	if term < snapTerm {
		return fail("%s is at term %d, before its snapshot %s (term %d)", s.LogPath, term, s.SnapDir, snapTerm)
	}
	first, last := s.Info.First, s.Info.Last
	if err := s.Info.GapAfter(s.LogPath, snapIndex); err != nil {
		return err
	}
	if last > snapIndex && first > snapIndex+1 {
		from := "an empty state"
		if s.Snap != nil {
			from = fmt.Sprintf("the snapshot %s, which ends at index %d", s.SnapDir, snapIndex)
		}
		return fail("the log %s starts at index %d, but the node would start from %s: entries %d to %d are gone "+
			"(compacted after a newer snapshot that is now missing)", s.LogPath, first, from, snapIndex+1, first-1)
	}
	var l raft.Log
	// A restored backup's snapshot sits in a gap of its own: no entry to
	// compare with.
	_, restored := s.Info.GapIn(snapIndex, snapIndex)
	if last > 0 && first <= snapIndex && snapIndex <= last && !restored {
		if err := readLog(s.Log, s.LogPath, snapIndex, &l); err != nil {
			return err
		}
		if l.Term != snapTerm {
			return fail("the log %s has term %d at index %d, but the snapshot %s ends there in term %d: they come from different histories",
				s.LogPath, l.Term, snapIndex, s.SnapDir, snapTerm)
		}
	}
	if last > 0 {
		// Raft reads every entry after the snapshot at start; the first
		// entry is read as well, since Raft serves it to followers.
		prev := snapTerm
		from := max(snapIndex, first-1) + 1
		if from > first {
			if err := readLog(s.Log, s.LogPath, first, &l); err != nil {
				return err
			}
		}
		for i := from; i <= last; i++ {
			if err := readLog(s.Log, s.LogPath, i, &l); err != nil {
				return err
			}
			if l.Term < prev || l.Term > term {
				return fail("the log %s has term %d at index %d, after term %d and past the current term %d", s.LogPath, l.Term, i, prev, term)
			}
			prev = l.Term
		}
	}
	if s.Applied != nil {
		if end := max(last, snapIndex); s.Applied.Index > end {
			path := filepath.Join(filepath.Dir(s.LogPath), AppliedFile)
			files = append(files, path)
			return fail("%s records index %d as applied, but the log %s ends at index %d (snapshot: %d): entries this node applied, and may have acknowledged, are gone",
				path, s.Applied.Index, s.LogPath, last, snapIndex)
		}
	}
	return nil
}
