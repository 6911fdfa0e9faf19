package test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/test/cluster"
)

// snapshotDirs returns a data directory's snapshot directories, oldest
// (lowest index) first.
func snapshotDirs(t *testing.T, dataDir string) []string {
	t.Helper()
	states, _ := filepath.Glob(filepath.Join(dataDir, "snapshots", "*", "state.bin"))
	var dirs []string
	for len(states) > 0 {
		newest := newestSnapshot(t, states)
		dirs = append([]string{filepath.Dir(newest)}, dirs...)
		for i, s := range states {
			if s == newest {
				states = append(states[:i], states[i+1:]...)
				break
			}
		}
	}
	return dirs
}

// tail returns the end of a log for a failure message.
func tail(log string) string { return log[max(0, len(log)-2500):] }

// TestMovedSnapshotLogTooShort follows the guide's "use the previous
// snapshot" on a node whose log no longer reaches back to it (compacted
// after the newer snapshot): the node refuses to start, exits non-zero,
// names the log and the snapshot and the rebuild procedure, and leaves
// its data directory as it was. It never panics and never starts.
func TestMovedSnapshotLogTooShort(t *testing.T) {
	c := snapshottedNode(t, "5", 21, 3)
	n := c.Nodes[0]
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	dirs := snapshotDirs(t, n.DataDir)
	if len(dirs) != 2 {
		t.Fatalf("%d snapshots retained, want 2: %v", len(dirs), dirs)
	}
	older, newer := dirs[0], dirs[1]
	quarantine := filepath.Join(n.DataDir, "snapshots-quarantine")
	if err := os.MkdirAll(quarantine, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(newer, filepath.Join(quarantine, filepath.Base(newer))); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(n.DataDir, "raft.db")
	before, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	mark := len(n.Log())
	n.Start()
	err, exited := n.Wait(30 * time.Second)
	if ee, ok := err.(*exec.ExitError); !exited || !ok || ee.ExitCode() != 1 {
		t.Fatalf("the node started from a snapshot its log does not continue (exited %v, err %v)", exited, err)
	}
	out := n.Log()[mark:]
	if strings.Contains(out, "panic") {
		t.Fatalf("the node panicked:\n%s", tail(out))
	}
	for _, want := range []string{logPath, older, "remove-peer n1", "--join", "docs/operations.md"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the refusal does not mention %q:\n%s", want, tail(out))
		}
	}
	after, err := os.ReadFile(logPath)
	if err != nil || string(after) != string(before) {
		t.Fatalf("the refused start changed %s (%v)", logPath, err)
	}
	t.Logf("refused: %s", strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]))
}

// TestRebuildDamagedNode follows the guide's one way out for a node whose
// log is damaged: on a 3-node cluster with acknowledged keyed jobs, n3's
// raft.db is cut to 64 KiB; n3 refuses to start, naming the file and the
// procedure; it is removed with "barista operator raft remove-peer", its
// data directory emptied, and it is started with --join: it catches up by
// InstallSnapshot, all three nodes hold the same state hash, and every
// acknowledged job is on n3 under its key.
func TestRebuildDamagedNode(t *testing.T) {
	c := cluster.Start(t, 3, "--snapshot-threshold", "64", "--trailing-logs", "16", "--snapshot-interval", "200ms")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := c.Apply(ctx, tenantCmd("acme", pb.Tier_GOLD, 0)); err != nil {
		t.Fatal(err)
	}
	acked := map[string]uint64{} // idempotency key -> job ID
	submit := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			key := fmt.Sprintf("job-%03d", i)
			node := c.Running()[i%len(c.Running())]
			resp, err := pb.NewClientClient(node.Conn()).Submit(ctx, &pb.SubmitRequest{Tenant: "acme", IdempotencyKey: &key,
				Size: pb.Size_SM, EstCostMs: 100, Payload: []byte(key + strings.Repeat(".", 2000))})
			if err != nil {
				t.Fatalf("submit %s via %s: %v", key, node.ID, err)
			}
			acked[key] = resp.JobId
		}
	}
	submit(0, 150)
	c.WaitConverged(30 * time.Second)
	n3 := c.Nodes[2]
	if err := n3.Stop(); err != nil {
		t.Fatal(err)
	}
	// The cluster goes on without n3, and compacts its log past n3's.
	submit(150, 300)
	leader := c.WaitLeader(10 * time.Second)
	waitLogged(t, 30*time.Second, "the leader to compact its log", leader, "compacting logs")

	logPath := filepath.Join(n3.DataDir, "raft.db")
	if err := os.Truncate(logPath, 64<<10); err != nil {
		t.Fatal(err)
	}
	mark := len(n3.Log())
	n3.Start()
	err, exited := n3.Wait(30 * time.Second)
	if ee, ok := err.(*exec.ExitError); !exited || !ok || ee.ExitCode() != 1 {
		t.Fatalf("n3 started on a damaged raft.db (exited %v, err %v)", exited, err)
	}
	out := n3.Log()[mark:]
	if strings.Contains(out, "panic") {
		t.Fatalf("n3 panicked:\n%s", tail(out))
	}
	for _, want := range []string{"Raft log " + logPath + " is damaged: the file is 65536 bytes", "remove-peer n3", "empty " + n3.DataDir, "--join",
		`docs/operations.md, "Rebuilding a node from the cluster"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("the refusal does not say %q:\n%s", want, tail(out))
		}
	}

	if out, errOut, err := c.Run("operator", "raft", "remove-peer", "n3", "--server", c.Nodes[0].GRPCAddr); err != nil || !strings.Contains(out, "removed n3") {
		t.Fatalf("remove-peer: %v %s %s", err, out, errOut)
	}
	removed := time.Now()
	c.WaitVoters(2, 30*time.Second)
	if err := os.RemoveAll(n3.DataDir); err != nil {
		t.Fatal(err)
	}
	n3.Start("--join", c.Nodes[0].GRPCAddr)
	c.WaitVoters(3, 60*time.Second)
	// A removed peer's last replication attempt may install an older
	// snapshot on its new incarnation at the same address, rewinding it
	// until the next commit (hashicorp/raft restores any snapshot it is
	// sent; that attempt waits out the failure backoff first, up to 10 s):
	// the cluster goes on writing, as it would, one job a second until the
	// three nodes agree, from after that attempt's latest time.
	submit(300, 310)
	time.Sleep(time.Until(removed.Add(12 * time.Second)))
	var index uint64
	var hash, report string
	converged := false
	for next, deadline := 310, time.Now().Add(60*time.Second); !converged && time.Now().Before(deadline); next++ {
		submit(next, next+1)
		for settle := time.Now().Add(time.Second); time.Now().Before(settle); time.Sleep(100 * time.Millisecond) {
			if index, hash, converged, report = c.Converged(); converged {
				break
			}
		}
	}
	if !converged {
		t.Fatalf("nodes did not converge within 60s: %s", report)
	}
	if !strings.Contains(n3.Log()[mark:], "installed snapshot restored") {
		t.Fatal("n3 did not catch up by InstallSnapshot")
	}
	t.Logf("n3 rebuilt: all three at index %d hash %.16s", index, hash)
	for key, id := range acked {
		job, err := pb.NewClientClient(n3.Conn()).GetJob(ctx, &pb.GetJobRequest{Tenant: "acme", JobId: id, Read: &pb.ReadOptions{Stale: true}})
		if err != nil || job.IdempotencyKey != key || !strings.HasPrefix(string(job.Payload), key+".") {
			t.Fatalf("acknowledged job %d (%s) on the rebuilt n3: %v %v", id, key, job, err)
		}
	}
	if len(acked) < 311 {
		t.Fatalf("%d jobs acknowledged", len(acked))
	}
}
