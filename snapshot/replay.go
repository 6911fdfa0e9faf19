package snapshot

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/baristahq/barista/fsm"
)

// AppliedFile is the name, in a data directory, of the record of the last
// applied index and state hash, written at every snapshot and at clean
// shutdown (Raft itself persists no commit index).
const AppliedFile = "applied.json"

// LogFile is the name of the Raft log and stable store in a data directory.
const LogFile = "raft.db"

// Applied is the content of AppliedFile.
type Applied struct {
	Index  uint64 `json:"index"`
	Hash   string `json:"hash"`
	Reason string `json:"reason"` // "snapshot" or "shutdown"
	At     string `json:"at"`
}

// WriteApplied records the applied index and hash atomically.
func WriteApplied(dataDir string, index uint64, hash [32]byte, reason string) error {
	b, err := json.MarshalIndent(Applied{Index: index, Hash: hex.EncodeToString(hash[:]), Reason: reason, At: time.Now().UTC().Format(time.RFC3339)}, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dataDir, AppliedFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dataDir, AppliedFile))
}

// ReadApplied reads AppliedFile; it returns nil if there is none.
func ReadApplied(dataDir string) (*Applied, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, AppliedFile))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var a Applied
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("%s: %w", AppliedFile, err)
	}
	return &a, nil
}

// ReplayResult is what Replay rebuilt.
type ReplayResult struct {
	Index        uint64   // the last index applied
	Hash         [32]byte // the state hash there
	SnapshotAt   uint64   // the snapshot it started from (0: none)
	LastLogIndex uint64   // the last entry in the log
	Recorded     *Applied // the recorded applied index, if any
	// Uncommitted is set when entries past the recorded applied index were
	// applied: they may never have been committed.
	Uncommitted bool
}

// ErrInUse reports a data directory locked by a running node.
var ErrInUse = errors.New("the data directory is in use (is the node still running?)")

// Replay rebuilds the state in dataDir from its newest snapshot and its
// log, without starting Raft. It applies entries up to until, or when
// until is 0 up to the recorded applied index (or the whole log if none is
// recorded). With dump set it writes one JSON line per applied entry.
func Replay(dataDir string, until uint64, dump io.Writer) (ReplayResult, error) {
	res, _, err := replay(dataDir, until, dump, nil, false)
	return res, err
}

// ReplayWhole rebuilds the state as Replay does and returns it, starting
// from the empty state at index 1 when the log still reaches back to it
// and no backup was restored in it (snapshots are not read), so that the state machine's fairness report
// covers the whole log; otherwise from a snapshot as Replay does, and
// SnapshotAt says where the report starts.
func ReplayWhole(dataDir string, until uint64) (ReplayResult, *fsm.FSM, error) {
	return replay(dataDir, until, nil, nil, true)
}

// replay applies the log as Replay does; with audit set it starts from an
// empty state at index 1 (ignoring snapshots) and applies every command as
// its own step, reporting facts to audit; with whole set it starts there
// too if the log begins at index 1.
func replay(dataDir string, until uint64, dump io.Writer, audit *auditor, whole bool) (ReplayResult, *fsm.FSM, error) {
	var res ReplayResult
	rec, err := ReadApplied(dataDir)
	if err != nil {
		return res, nil, err
	}
	res.Recorded = rec
	logger := hclog.New(&hclog.LoggerOptions{Output: io.Discard})
	// Replay never writes snapshots; a large retain count makes List show
	// every snapshot on disk.
	store, err := raft.NewFileSnapshotStoreWithLogger(dataDir, 1<<20, logger)
	if err != nil {
		return res, nil, err
	}
	logPath := filepath.Join(dataDir, LogFile)
	if _, err := os.Stat(logPath); err != nil {
		return res, nil, fmt.Errorf("no Raft log at %s: %w", logPath, err)
	}
	// Held open read-only from here: that keeps a writer out while the
	// file is checked and read.
	db, err := OpenLog(logPath, true)
	if err != nil {
		return res, nil, err
	}
	defer db.Close()
	info, err := VerifyLogFile(logPath)
	if err != nil {
		return res, nil, err
	}
	// A gap in the log (a restored backup) replaced the whole state
	// there: the log from index 1 does not lead past it.
	gap, gapped := info.GapIn(1, info.Last)
	fromStart := audit != nil || (whole && info.First <= 1 && (!gapped || (until != 0 && until < gap.From)))
	var meta *raft.SnapshotMeta
	var f *fsm.FSM
	if !fromStart {
		list, err := store.List() // newest first
		if err != nil {
			return res, nil, err
		}
		if until != 0 && len(list) > 0 && until < list[0].Index {
			// An earlier point: start from an older retained snapshot
			// (the newer ones are not read at all).
			// With none at or before it, the replay starts from the empty
			// state, if the log still reaches back to index 1.
			if meta, f, err = LoadAtOrBefore(store, dataDir, until); err != nil {
				return res, nil, err
			}
		} else if meta, f, err = LoadNewest(store, dataDir); err != nil {
			return res, nil, err
		}
	}
	if f == nil {
		f = fsm.New()
	} else {
		res.SnapshotAt = meta.Index
	}
	first, last := info.First, info.Last
	res.LastLogIndex = last
	if audit != nil && first > 1 {
		return res, nil, fmt.Errorf("the log starts at index %d (compacted): an audit needs the whole log, kept by a --trailing-logs above the number of entries", first)
	}
	target := until
	if target == 0 {
		target = last
		if rec != nil {
			target = rec.Index
		}
	}
	if target > last {
		return res, nil, fmt.Errorf("index %d is past the end of the log (%d)", target, last)
	}
	if target < res.SnapshotAt {
		return res, nil, fmt.Errorf("index %d is before the oldest retained snapshot (index %d): the log before it is compacted", target, res.SnapshotAt)
	}
	if start := res.SnapshotAt + 1; start < first && start <= target {
		if res.SnapshotAt == 0 {
			return res, nil, fmt.Errorf("index %d is before every retained snapshot and the log starts at %d (compacted): entries are missing", target, first)
		}
		return res, nil, fmt.Errorf("the log starts at %d but the snapshot ends at %d: entries are missing", first, res.SnapshotAt)
	}
	if g, ok := info.GapIn(res.SnapshotAt+1, target); ok {
		if audit != nil {
			return res, nil, fmt.Errorf("the log has no entries %d to %d, where a backup was restored (barista operator snapshot restore): an audit needs the whole log from index 1; audit up to index %d at most (--until)",
				g.From, g.To, g.From-1)
		}
		from := "the empty state"
		if meta != nil {
			from = fmt.Sprintf("the snapshot at index %d", res.SnapshotAt)
		}
		return res, nil, fmt.Errorf("the log has no entries %d to %d (a backup restored there, whose snapshot is no longer retained, or entries lost), and the replay to index %d would start from %s before them: replay to index %d at most",
			g.From, g.To, target, from, g.From-1)
	}
	res.Uncommitted = rec == nil || target > rec.Index
	res.Index = res.SnapshotAt
	for i := res.SnapshotAt + 1; i <= target; i++ {
		var l raft.Log
		if err := readLog(db, logPath, i, &l); err != nil {
			return res, nil, err
		}
		if l.Type == raft.LogCommand && audit != nil {
			if err := audit.entry(f, &l); err != nil {
				return res, nil, err
			}
		} else if l.Type == raft.LogCommand {
			out := f.Apply(&l)
			if err, ok := out.(error); ok {
				return res, nil, err
			}
			if dump != nil {
				dumpEntry(dump, &l, out)
			}
		}
		res.Index = i
	}
	if audit != nil {
		audit.finish(f)
	}
	res.Hash, _ = f.Hash()
	return res, f, nil
}

func dumpEntry(w io.Writer, l *raft.Log, out any) {
	env, err := fsm.Decode(l.Data)
	if err != nil {
		fmt.Fprintf(w, "{\"index\":%d,\"error\":%q}\n", l.Index, err.Error())
		return
	}
	line := map[string]any{"index": l.Index, "term": l.Term, "stamp_ms": env.StampMs}
	var cmds []json.RawMessage
	for _, c := range env.Commands {
		b, _ := protojson.Marshal(c)
		cmds = append(cmds, b)
	}
	line["commands"] = cmds
	if rs, ok := out.([]fsm.Result); ok {
		var results []json.RawMessage
		for _, r := range rs {
			b, _ := protojson.Marshal(fsm.ResultToPB(r))
			results = append(results, b)
		}
		line["results"] = results
	}
	b, _ := json.Marshal(line)
	fmt.Fprintf(w, "%s\n", b)
}
