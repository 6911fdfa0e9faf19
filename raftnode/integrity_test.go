package raftnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/snapshot"
)

func testConfig(t *testing.T, dir string, trailing uint64) Config {
	cfg := DefaultConfig()
	cfg.ID, cfg.DataDir, cfg.RaftAddr, cfg.Bootstrap = "n1", dir, freeAddr(t), true
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
	cfg.SnapshotThreshold, cfg.SnapshotInterval, cfg.TrailingLogs = MaxLogEntries, time.Hour, trailing
	return cfg
}

func waitLeader(t *testing.T, n *Node) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !n.IsLeader() {
		if time.Now().After(deadline) {
			t.Fatal("no leadership within 20s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// buildDataDir runs a one-node cluster in dir: rounds of 200 submits of
// 2 KB, each followed by a snapshot (the store keeps the newest two),
// then 50 cancels and a clean shutdown. It returns the state hash and applied index.
func buildDataDir(t *testing.T, dir string, rounds int, trailing uint64) (string, uint64) {
	t.Helper()
	n, err := New(testConfig(t, dir, trailing))
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	propose := func(c *clusterpb.Command) {
		t.Helper()
		if _, res, err := n.Propose(ctx, []*clusterpb.Command{c}); err != nil || res[0].Err() != nil {
			t.Fatalf("propose: %v %v", err, res)
		}
	}
	propose(&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "a", Tier: pb.Tier_GOLD}}})
	for r := range rounds {
		for i := range 200 {
			propose(&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "a", IdempotencyKey: fmt.Sprintf("k%d-%d", r, i),
				Size: pb.Size_SM, EstCostMs: 100, Payload: make([]byte, 2000)}}})
		}
		if err := n.Snapshot(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 50 { // entries after the newest snapshot
		propose(&clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Job: uint64(1 + i)}}})
	}
	hash, index := n.FSM.Hash()
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", hash), index
}

// snapshotIDs lists dir's snapshots, oldest first.
func snapshotIDs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "snapshots"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.Name())
	}
	sort.Slice(ids, func(i, j int) bool {
		var ti, ii, tj, ij, ms uint64
		fmt.Sscanf(ids[i], "%d-%d-%d", &ti, &ii, &ms)
		fmt.Sscanf(ids[j], "%d-%d-%d", &tj, &ij, &ms)
		return ii < ij
	})
	return ids
}

// moveNewestAside moves the newest snapshot out of snapshots/, as the
// guide says to do with a corrupt one, and returns the remaining one's ID.
func moveNewestAside(t *testing.T, dir string) string {
	t.Helper()
	ids := snapshotIDs(t, dir)
	if len(ids) != 2 {
		t.Fatalf("snapshots %v, want 2", ids)
	}
	q := filepath.Join(dir, "snapshots-quarantine")
	os.MkdirAll(q, 0o755)
	if err := os.Rename(filepath.Join(dir, "snapshots", ids[1]), filepath.Join(q, ids[1])); err != nil {
		t.Fatal(err)
	}
	return ids[0]
}

// startRefused starts a node on dir and expects a *RefusedError whose
// message has every one of want; the data directory's log is left as it
// was.
func startRefused(t *testing.T, dir string, want ...string) {
	t.Helper()
	logPath := filepath.Join(dir, snapshot.LogFile)
	before, _ := os.ReadFile(logPath)
	n, err := New(testConfig(t, dir, 1000))
	if err == nil {
		n.Shutdown()
		t.Fatal("the node started")
	}
	var re *RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("not a refusal: %v", err)
	}
	msg := err.Error()
	want = append(want, "remove-peer n1", "empty "+dir, "--join", `docs/operations.md, "Rebuilding a node from the cluster"`)
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Fatalf("the refusal does not say %q:\n%s", w, msg)
		}
	}
	after, _ := os.ReadFile(logPath)
	if string(after) != string(before) {
		t.Fatalf("the refused start changed %s", logPath)
	}
	t.Logf("refused: %s", msg)
}

// TestRestartChecksLog: an intact data directory restarts; with the
// newest snapshot moved aside it restarts from the older one and replays
// the log after it, when the log still reaches back: the state at the
// old applied index is the one the node had.
func TestRestartChecksLog(t *testing.T) {
	dir := t.TempDir()
	hash, index := buildDataDir(t, dir, 3, 1000)
	n, err := New(testConfig(t, dir, 1000))
	if err != nil {
		t.Fatal(err)
	}
	n.Shutdown()
	older := moveNewestAside(t, dir)
	res, err := snapshot.Replay(dir, index, nil)
	if err != nil || fmt.Sprintf("%x", res.Hash) != hash || !strings.HasPrefix(older, fmt.Sprintf("%d-%d-", 2, res.SnapshotAt)) {
		t.Fatalf("replay from the older snapshot %s: %+v %v, want hash %s", older, res, err, hash)
	}
	n, err = New(testConfig(t, dir, 1000))
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, n)
	if !n.FSM.Configured() {
		t.Fatal("the restarted node did not replay the log")
	}
	// The new leader's setup commands (GrantLeases) follow its election.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, i := n.FSM.Clock(); i > index {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the restarted leader applied nothing new")
		}
	}
	n.Shutdown()
	// Read after the shutdown: nothing applies any more.
	h, i := n.FSM.Hash()
	// The shutdown records Raft's applied index, which counts entries
	// that are not commands too.
	if res, err := snapshot.Replay(dir, 0, nil); err != nil || res.Hash != h || res.Index < i || i <= index {
		t.Fatalf("after the restart: node at %d %x, replay %+v %v", i, h, res, err)
	}
}

// TestMovedSnapshotLogCompacted: the newest snapshot moved aside, and the
// log compacted past the older one (5 trailing entries): refused, naming
// the log, the snapshot and the missing entries. Raft itself panics
// ("log not found") on such a directory.
func TestMovedSnapshotLogCompacted(t *testing.T) {
	dir := t.TempDir()
	buildDataDir(t, dir, 3, 5)
	older := moveNewestAside(t, dir)
	var term, index, ms uint64
	fmt.Sscanf(older, "%d-%d-%d", &term, &index, &ms)
	startRefused(t, dir, filepath.Join(dir, "raft.db")+" starts at index ",
		fmt.Sprintf("the snapshot %s, which ends at index %d: entries %d to ", filepath.Join(dir, "snapshots", older), index, index+1))
}

// TestDamagedLogRefused damages raft.db in the ways found in the field.
func TestDamagedLogRefused(t *testing.T) {
	src := t.TempDir()
	_, applied := buildDataDir(t, src, 2, 1000)
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string)
		want   []string
	}{
		{"truncated to 64 KiB", func(t *testing.T, path string) { os.Truncate(path, 64<<10) }, []string{" is damaged: "}},
		{"truncated to half", func(t *testing.T, path string) {
			st, _ := os.Stat(path)
			os.Truncate(path, st.Size()/2)
		}, []string{" is damaged: "}},
		{"both meta pages", func(t *testing.T, path string) {
			b, _ := os.ReadFile(path)
			for _, page := range []int{0, 4096} {
				b[page+16] ^= 0xff // the magic number
			}
			os.WriteFile(path, b, 0o600)
		}, []string{" is damaged: invalid database"}},
		{"a zeroed range", func(t *testing.T, path string) {
			b, _ := os.ReadFile(path)
			clear(b[len(b)/4 : len(b)/4+256<<10])
			os.WriteFile(path, b, 0o600)
		}, []string{" is damaged: "}},
		{"removed", func(t *testing.T, path string) { os.Remove(path) }, []string{" is missing, but "}},
		{"emptied", func(t *testing.T, path string) { os.Truncate(path, 0) }, []string{" is empty, but "}},
		{"last entries lost", func(t *testing.T, path string) {
			s, err := raftboltdb.New(raftboltdb.Options{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.DeleteRange(applied-10, applied+10); err != nil {
				t.Fatal(err)
			}
		}, []string{fmt.Sprintf("/applied.json records index %d as applied, but the log ", applied), fmt.Sprintf("ends at index %d", applied-11)}},
		{"term lost", func(t *testing.T, path string) {
			s, err := raftboltdb.New(raftboltdb.Options{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.SetUint64([]byte("CurrentTerm"), 0); err != nil {
				t.Fatal(err)
			}
		}, []string{"holds no current term, yet the node has a log or a snapshot"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, snapshot.LogFile)
			tc.damage(t, path)
			startRefused(t, dir, append([]string{path}, tc.want...)...)
		})
	}
}

// TestLogCheckCost measures the start-up check on a large log (set
// BARISTA_BIG_LOG=1): 200,000 entries of 1 KiB.
func TestLogCheckCost(t *testing.T) {
	if os.Getenv("BARISTA_BIG_LOG") == "" {
		t.Skip("set BARISTA_BIG_LOG=1 to measure")
	}
	path := filepath.Join(t.TempDir(), snapshot.LogFile)
	s, err := raftboltdb.New(raftboltdb.Options{Path: path, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	const entries, batch = 200_000, 256
	for i := uint64(1); i <= entries; i += batch {
		var logs []*raft.Log
		for j := i; j < i+batch && j <= entries; j++ {
			logs = append(logs, &raft.Log{Index: j, Term: 1, Type: raft.LogCommand, Data: make([]byte, 1024)})
		}
		if err := s.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
	}
	s.SetUint64([]byte("CurrentTerm"), 1)
	s.Close()
	st, _ := os.Stat(path)
	for _, after := range []uint64{entries - 18_000, 0} {
		start := time.Now()
		ro, err := snapshot.OpenLog(path, true)
		if err != nil {
			t.Fatal(err)
		}
		info, err := snapshot.VerifyLogFile(path)
		if err != nil {
			t.Fatal(err)
		}
		walk := time.Since(start)
		ss := snapshot.StartState{Log: ro, Stable: ro, LogPath: path, Info: info}
		if after > 0 {
			ss.Snap = &raft.SnapshotMeta{Index: after, Term: 1}
		}
		if err := ss.Check(); err != nil {
			t.Fatal(err)
		}
		ro.Close()
		t.Logf("%d MiB, %d entries, snapshot at %d: structure verified in %v, entries after the snapshot read in %v",
			st.Size()>>20, entries, after, walk.Round(time.Millisecond), (time.Since(start) - walk).Round(time.Millisecond))
	}
}

// TestRestoredBackupRestarts: a backup restored into a running node
// (hashicorp/raft installs it at its last index + 1 and writes no entry
// there) leaves a gap in the log at the snapshot's index; the node starts
// again from it, and barista replay rebuilds its state across it. A gap
// above the snapshot is still refused.
func TestRestoredBackupRestarts(t *testing.T) {
	dir := t.TempDir()
	n, err := New(testConfig(t, dir, 1000))
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	propose := func(n *Node, prefix string, count int) {
		t.Helper()
		for i := range count {
			c := &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "a", IdempotencyKey: fmt.Sprintf("%s-%d", prefix, i),
				Size: pb.Size_SM, EstCostMs: 100, Payload: []byte("x")}}}
			if _, res, err := n.Propose(ctx, []*clusterpb.Command{c}); err != nil || res[0].Err() != nil {
				t.Fatalf("propose: %v %v", err, res)
			}
		}
	}
	if _, res, err := n.Propose(ctx, []*clusterpb.Command{{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "a", Tier: pb.Tier_GOLD}}}}); err != nil || res[0].Err() != nil {
		t.Fatalf("propose: %v %v", err, res)
	}
	propose(n, "saved", 20)
	v, err := n.FSM.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	var backup bytes.Buffer
	if _, err := snapshot.Write(&backup, v); err != nil {
		t.Fatal(err)
	}
	propose(n, "lost", 20)
	beforeRestore := n.Raft().LastIndex()
	if err := n.RestoreBackup(bytes.NewReader(backup.Bytes()), int64(backup.Len())); err != nil {
		t.Fatal(err)
	}
	// The restore waits on a barrier (one entry) before it raises the
	// backup's numbers: the hole is the index after it.
	hole := beforeRestore + 2
	propose(n, "after", 5)
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, snapshot.LogFile)
	info, err := snapshot.VerifyLogFile(path)
	if err != nil || len(info.Gaps) != 1 || info.Gaps[0] != (snapshot.Gap{From: hole, To: hole}) {
		t.Fatalf("the restored node's log: %+v %v, want one gap at %d", info, err, hole)
	}
	recorded, err := snapshot.ReadApplied(dir)
	if err != nil || recorded == nil {
		t.Fatal(recorded, err)
	}
	res, err := snapshot.Replay(dir, 0, nil)
	if err != nil || fmt.Sprintf("%x", res.Hash) != recorded.Hash || res.Index != recorded.Index || res.SnapshotAt != hole {
		t.Fatalf("replay across the gap: %+v %v, recorded %+v", res, err, recorded)
	}
	// Before the gap, the log from index 1 replays; the audit stops there.
	if res, err := snapshot.Replay(dir, hole-1, nil); err != nil || res.SnapshotAt != 0 || res.Index != hole-1 {
		t.Fatalf("replay to just before the gap: %+v %v", res, err)
	}
	if res, err := snapshot.Audit(dir, hole-1, func(snapshot.AuditFact) {}); err != nil || res.Index != hole-1 {
		t.Fatalf("audit to just before the gap: %+v %v", res, err)
	}
	want := fmt.Sprintf("the log has no entries %d to %d, where a backup was restored (barista operator snapshot restore): an audit needs the whole log from index 1; audit up to index %d at most (--until)", hole, hole, hole-1)
	if _, err := snapshot.Audit(dir, 0, func(snapshot.AuditFact) {}); err == nil || err.Error() != want {
		t.Fatalf("audit across the gap: %v\nwant %s", err, want)
	}
	if res, _, err := snapshot.ReplayWhole(dir, 0); err != nil || res.SnapshotAt != hole {
		t.Fatalf("the fairness report's replay across the gap: %+v %v", res, err)
	}

	n, err = New(testConfig(t, dir, 1000))
	if err != nil {
		t.Fatalf("the node does not start after a restored backup: %v", err)
	}
	waitLeader(t, n)
	if jobs, _ := n.FSM.Counts(); jobs != 25 {
		t.Fatalf("%d jobs after the restart, want the 20 saved and the 5 after the restore", jobs)
	}
	propose(n, "restarted", 1)
	n.Shutdown()
	h, _ := n.FSM.Hash()
	if res, err := snapshot.Replay(dir, 0, nil); err != nil || res.Hash != h {
		t.Fatalf("after the restart: node hash %x, replay %+v %v", h, res, err)
	}

	// An entry lost after the snapshot: refused as before.
	s, err := raftboltdb.New(raftboltdb.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(hole+3, hole+3); err != nil {
		t.Fatal(err)
	}
	s.Close()
	startRefused(t, dir, path, fmt.Sprintf(" is damaged: the log jumps from index %d to %d: entries are missing", hole+2, hole+4))
}
