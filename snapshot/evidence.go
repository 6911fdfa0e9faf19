package snapshot

// The evidence of fairness (SPEC §3): a tenant's usage statement and its
// certificate of fairness over a window of the log, derived by replaying
// that window on a state machine of its own, from the newest retained
// state before it (a snapshot, or the empty state while the log still
// holds index 1). What the window yields depends only on the state before
// it and its entries, which every node holds alike: every node, and
// barista replay on any node's data directory, issue the same bytes.

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/evidence"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// Source is a log a window is replayed from: the states it may start at
// and the entries after them.
type Source interface {
	// Starts lists the indexes of the states a replay may start from,
	// newest first: each retained snapshot the log continues, and 0 (the
	// empty state) while the log holds index 1.
	Starts() ([]uint64, error)
	// Load returns the state at one of Starts' indexes.
	Load(index uint64) (*fsm.FSM, error)
	// Entry reads entry i.
	Entry(i uint64, l *raft.Log) error
	// Last is the newest entry that may be read: the last one applied.
	Last() uint64
}

// StoreSource is a Source over a snapshot store and a log store: a data
// directory's, or a running node's own.
type StoreSource struct {
	Snaps   *raft.FileSnapshotStore
	Base    string // the snapshot store's root (the data directory)
	Log     raft.LogStore
	LogPath string
	// Applied is the last entry that may be read.
	Applied uint64
	ids     map[uint64]string
}

// Starts implements Source.
func (s *StoreSource) Starts() ([]uint64, error) {
	first, err := s.Log.FirstIndex()
	if err != nil {
		return nil, err
	}
	list, err := s.Snaps.List() // newest first
	if err != nil {
		return nil, err
	}
	s.ids = map[uint64]string{}
	var out []uint64
	for _, m := range list {
		if _, dup := s.ids[m.Index]; dup || (m.Index+1 < first && m.Index < s.Applied) || m.Index > s.Applied {
			continue
		}
		s.ids[m.Index] = m.ID
		out = append(out, m.Index)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] > out[j] })
	if first <= 1 {
		out = append(out, 0)
	}
	return out, nil
}

// Load implements Source.
func (s *StoreSource) Load(index uint64) (*fsm.FSM, error) {
	if index == 0 {
		return fsm.New(), nil
	}
	id, ok := s.ids[index]
	if !ok {
		return nil, fmt.Errorf("no retained snapshot at index %d", index)
	}
	_, f, err := loadID(s.Snaps, s.Base, id)
	return f, err
}

// Entry implements Source.
func (s *StoreSource) Entry(i uint64, l *raft.Log) error { return readLog(s.Log, s.LogPath, i, l) }

// Last implements Source.
func (s *StoreSource) Last() uint64 { return s.Applied }

// WindowSpec is the window a document is asked for: by log index
// (FromIndex..ToIndex; 0: the oldest the source holds, the last applied)
// or, with ByTime, by cluster time (FromMs inclusive .. ToMs exclusive;
// ToMs 0: up to the last applied entry).
type WindowSpec struct {
	FromIndex, ToIndex uint64
	ByTime             bool
	FromMs, ToMs       int64
}

// ErrOutOfRange marks a window the source cannot replay: before its
// oldest retained state, or empty.
var ErrOutOfRange = errors.New("window out of range")

// collector is what a window's replay feeds: the state before the window
// (begin, at the window's start time), each entry of the window, applied
// by entry itself, and the end (at the window's end time).
type collector interface {
	begin(f *fsm.FSM, at sfq.Time) error
	entry(f *fsm.FSM, l *raft.Log) (stop bool, err error)
	end(f *fsm.FSM, at sfq.Time) error
}

// replayWindow resolves spec on src, replays the window into c and
// returns what it covered.
func replayWindow(src Source, spec WindowSpec, c collector) (evidence.Window, error) {
	var w evidence.Window
	last := src.Last()
	starts, err := src.Starts()
	if err != nil {
		return w, err
	}
	if len(starts) == 0 {
		return w, fmt.Errorf("%w: no retained snapshot that the log continues, and the log no longer holds index 1", ErrOutOfRange)
	}
	oldest := starts[len(starts)-1]
	// The start state: the newest before the window.
	var f *fsm.FSM
	var at, from uint64
	switch {
	case !spec.ByTime:
		from = spec.FromIndex
		if from == 0 {
			from = oldest + 1
		}
		if from <= oldest {
			return w, fmt.Errorf("%w: index %d is before the oldest this node can replay from (%d: the log before it is compacted)", ErrOutOfRange, from, oldest+1)
		}
		if spec.ToIndex != 0 && spec.ToIndex < from {
			return w, fmt.Errorf("%w: to_index %d is before from_index %d", ErrOutOfRange, spec.ToIndex, from)
		}
		for _, s := range starts {
			if s < from {
				at = s
				break
			}
		}
		if f, err = src.Load(at); err != nil {
			return w, err
		}
	default:
		if spec.ToMs != 0 && spec.ToMs <= spec.FromMs {
			return w, fmt.Errorf("%w: to %d ms is not after from %d ms", ErrOutOfRange, spec.ToMs, spec.FromMs)
		}
		for _, s := range starts {
			g, err := src.Load(s)
			if err != nil {
				return w, err
			}
			if clock, _ := g.Clock(); int64(clock) < spec.FromMs || s == 0 {
				f, at = g, s
				break
			}
		}
		if f == nil {
			g, _ := src.Load(oldest)
			clock, _ := g.Clock()
			return w, fmt.Errorf("%w: %d ms is before the oldest state this node can replay from (index %d, at %d ms)", ErrOutOfRange, spec.FromMs, oldest, clock)
		}
	}
	// Up to the window.
	var l raft.Log
	idx := at
	peek := func(i uint64) (sfq.Time, error) {
		if err := src.Entry(i, &l); err != nil {
			return 0, err
		}
		clock, _ := f.Clock()
		if l.Type != raft.LogCommand {
			return clock, nil
		}
		env, err := fsm.Decode(l.Data)
		if err != nil {
			return 0, &fsm.FatalError{Index: i, Err: err}
		}
		return max(clock, sfq.Time(env.StampMs)), nil
	}
	apply := func() error {
		if l.Type == raft.LogCommand {
			if err, ok := f.Apply(&l).(error); ok {
				return err
			}
		}
		return nil
	}
	var t0 sfq.Time
	for {
		if idx >= last {
			t0, _ = f.Clock()
			break
		}
		next, err := peek(idx + 1)
		if err != nil {
			return w, err
		}
		if (!spec.ByTime && idx+1 >= from) || (spec.ByTime && int64(next) >= spec.FromMs) {
			t0 = next
			break
		}
		if err := apply(); err != nil {
			return w, err
		}
		idx++
	}
	if spec.ByTime {
		t0 = sfq.Time(spec.FromMs)
	}
	w.FromIndex, w.FromMs = idx+1, int64(t0)
	h, _ := f.Hash()
	w.StartHash = hex.EncodeToString(h[:])
	if err := c.begin(f, t0); err != nil {
		return w, err
	}
	// The window.
	closed := false
	for idx < last {
		if !spec.ByTime && spec.ToIndex != 0 && idx >= spec.ToIndex {
			closed = true
			break
		}
		next, err := peek(idx + 1)
		if err != nil {
			return w, err
		}
		if spec.ByTime && spec.ToMs != 0 && int64(next) >= spec.ToMs {
			closed = true
			break
		}
		if l.Type == raft.LogCommand {
			stop, err := c.entry(f, &l)
			if err != nil {
				return w, err
			}
			if stop {
				closed = true
				break
			}
		}
		idx++
	}
	if !spec.ByTime && spec.ToIndex != 0 && idx >= spec.ToIndex {
		closed = true
	}
	w.ToIndex = idx
	t1, _ := f.Clock()
	if spec.ByTime && closed {
		t1 = sfq.Time(spec.ToMs)
	}
	w.ToMs, w.Open = int64(t1), !closed
	h, _ = f.Hash()
	w.EndHash = hex.EncodeToString(h[:])
	return w, c.end(f, t1)
}

// MemorySource is a Source over entries held in memory (a replay
// script's): entry i is Entries[i-1], replayed from the state New returns
// at index 0.
type MemorySource struct {
	New     func() *fsm.FSM
	Entries []*clusterpb.Envelope
}

// Starts implements Source: the empty state only.
func (m *MemorySource) Starts() ([]uint64, error) { return []uint64{0}, nil }

// Load implements Source.
func (m *MemorySource) Load(index uint64) (*fsm.FSM, error) {
	if index != 0 {
		return nil, fmt.Errorf("no state at index %d", index)
	}
	return m.New(), nil
}

// Entry implements Source.
func (m *MemorySource) Entry(i uint64, l *raft.Log) error {
	if i == 0 || i > uint64(len(m.Entries)) {
		return fmt.Errorf("no entry %d", i)
	}
	data, err := fsm.Encode(m.Entries[i-1])
	if err != nil {
		return err
	}
	*l = raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: data}
	return nil
}

// Last implements Source.
func (m *MemorySource) Last() uint64 { return uint64(len(m.Entries)) }

// OpenDirSource opens a stopped node's data directory as a Source (barista
// replay --statement, --certificate): its snapshots and its log, read
// only, up to the applied index it recorded (or the whole log when it
// recorded none). close releases the log.
func OpenDirSource(dataDir string) (src *StoreSource, close func() error, err error) {
	rec, err := ReadApplied(dataDir)
	if err != nil {
		return nil, nil, err
	}
	logger := hclog.New(&hclog.LoggerOptions{Output: io.Discard})
	store, err := raft.NewFileSnapshotStoreWithLogger(dataDir, 1<<20, logger)
	if err != nil {
		return nil, nil, err
	}
	logPath := filepath.Join(dataDir, LogFile)
	if _, err := os.Stat(logPath); err != nil {
		return nil, nil, fmt.Errorf("no Raft log at %s: %w", logPath, err)
	}
	db, err := OpenLog(logPath, true)
	if err != nil {
		return nil, nil, err
	}
	last, err := db.LastIndex()
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	if rec != nil {
		last = min(last, rec.Index)
	}
	return &StoreSource{Snaps: store, Base: dataDir, Log: db, LogPath: logPath, Applied: last}, db.Close, nil
}
