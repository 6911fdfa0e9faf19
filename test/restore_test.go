package test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/test/cluster"
)

// TestDisasterRecovery follows docs/operations.md's backup and restore
// to the end: save a snapshot, submit, restore the snapshot, submit, then
// a rolling restart (SIGTERM each node, start it again with the same
// command line, wait until it is back in step) and a full restart of every
// node. Every node then reports the same applied index and state hash
// (barista status), the jobs submitted after the restore are there and
// those submitted between the save and the restore are not. A restore
// never moves job IDs or event seqs back: every job submitted after it
// has an ID above every job the cluster ever made, and every event a seq
// above every event before, across the restarts too (the restored state
// is the backup's, those numbers raised: fsm.FSM.RaiseNumbers). A restore
// leaves a hole in the log (Raft installs the snapshot at its last index
// + 1 with no entry there), which a node must start from.
func TestDisasterRecovery(t *testing.T) {
	for _, nodes := range []int{3, 1} {
		t.Run(fmt.Sprintf("%d nodes", nodes), func(t *testing.T) { disasterRecovery(t, nodes) })
	}
}

func disasterRecovery(t *testing.T, nodes int) {
	// The state hash of the backup is compared with the restored state's:
	// no clock tick may move its clock in between.
	c := cluster.New(t, "--config", configFile(t, quietClock))
	// The command line each node was started with, used again at every
	// restart.
	args := map[*cluster.Node][]string{}
	c.BootWith(nodes, func(i int, n *cluster.Node) {
		args[n] = []string{"--bootstrap"}
		if i > 0 {
			args[n] = []string{"--join", c.Nodes[0].GRPCAddr}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if _, err := c.Apply(ctx, tenantCmd("acme", pb.Tier_GOLD, 0)); err != nil {
		t.Fatal(err)
	}
	// highJob and highSeq are the highest job ID and event seq the
	// cluster has handed out so far; every later one must be above them.
	var highJob, highSeq uint64
	submit := func(prefix string, count int) []string {
		t.Helper()
		var keys []string
		low := highJob
		for i := range count {
			key := fmt.Sprintf("%s-%02d", prefix, i)
			node := c.Running()[i%len(c.Running())]
			r, err := pb.NewClientClient(node.Conn()).Submit(ctx, &pb.SubmitRequest{Tenant: "acme", IdempotencyKey: &key,
				Size: pb.Size_SM, EstCostMs: 100, Payload: []byte("echo " + key)})
			if err != nil {
				t.Fatalf("submit %s via %s: %v", key, node.ID, err)
			}
			if r.JobId <= low {
				t.Fatalf("%s: job %d, an ID the cluster handed out before (up to %d)", key, r.JobId, low)
			}
			highJob = max(highJob, r.JobId)
			keys = append(keys, key)
		}
		// The newest event seq: every event of this round is above the
		// seqs of the rounds before.
		seq := lastSeq(ctx, t, c)
		if seq <= highSeq {
			t.Fatalf("%s: the newest event is seq %d, not above %d, the newest before", prefix, seq, highSeq)
		}
		highSeq = seq
		return keys
	}
	want := submit("before-save", 10)
	c.WaitConverged(30 * time.Second)

	file := filepath.Join(t.TempDir(), "backup.snap")
	last := c.Nodes[len(c.Nodes)-1].GRPCAddr
	out, errOut, err := c.Run("operator", "snapshot", "save", file, "--server", last, "--json")
	if err != nil {
		t.Fatalf("snapshot save: %v %s", err, errOut)
	}
	var saved struct {
		StateHash string `json:"state_hash"`
	}
	if err := json.Unmarshal([]byte(out), &saved); err != nil || saved.StateHash == "" {
		t.Fatalf("snapshot save printed %q (%v)", out, err)
	}
	lost := submit("after-save", 10)
	c.WaitConverged(30 * time.Second)
	if _, errOut, err := c.Run("operator", "snapshot", "restore", file, "--server", last); err != nil {
		t.Fatalf("snapshot restore: %v %s", err, errOut)
	}
	c.WaitConverged(30 * time.Second)
	want = append(want, submit("after-restore", 10)...)
	c.WaitConverged(30 * time.Second)

	// start starts n with the command line it was first started with and
	// waits until it is a running member again, its leader known.
	start := func(n *cluster.Node, mark int) {
		t.Helper()
		n.Start(args[n]...)
		waitFor(t, 60*time.Second, n.ID+" to rejoin", func() (bool, string) {
			if !n.Running() {
				t.Fatalf("%s did not start again (%v):\n%s", n.ID, n.ExitErr(), tail(n.Log()[mark:]))
			}
			st, err := n.Status()
			if err != nil {
				return false, err.Error()
			}
			return st.LeaderId != "", "no leader known"
		})
	}
	for i, n := range c.Nodes {
		if err := n.Stop(); err != nil {
			t.Fatalf("SIGTERM of %s: %v", n.ID, err)
		}
		start(n, len(n.Log()))
		c.WaitConverged(60 * time.Second)
		want = append(want, submit(fmt.Sprintf("rolled-%d", i+1), 2)...)
	}
	marks := map[*cluster.Node]int{}
	for _, n := range c.Nodes {
		if err := n.Stop(); err != nil {
			t.Fatalf("SIGTERM of %s: %v", n.ID, err)
		}
		marks[n] = len(n.Log())
	}
	for _, n := range c.Nodes {
		n.Start(args[n]...)
	}
	for _, n := range c.Nodes {
		waitFor(t, 60*time.Second, n.ID+" to start", func() (bool, string) {
			if !n.Running() {
				t.Fatalf("%s did not start again (%v):\n%s", n.ID, n.ExitErr(), tail(n.Log()[marks[n]:]))
			}
			_, err := n.Status()
			return err == nil, fmt.Sprint(err)
		})
	}
	c.WaitLeader(30 * time.Second)
	want = append(want, submit("restarted", 3)...)
	index, hash := c.WaitConverged(60 * time.Second)

	for _, n := range c.Nodes {
		out, errOut, err := c.Run("status", "--server", n.GRPCAddr, "--json")
		var st struct {
			AppliedIndex uint64 `json:"applied_index"`
			StateHash    string `json:"state_hash"`
		}
		if err != nil || json.Unmarshal([]byte(out), &st) != nil {
			t.Fatalf("barista status of %s: %v %s %s", n.ID, err, out, errOut)
		}
		if st.AppliedIndex != index || st.StateHash != hash {
			t.Fatalf("barista status of %s: applied index %d hash %s, want %d %s", n.ID, st.AppliedIndex, st.StateHash, index, hash)
		}
		page, err := pb.NewClientClient(n.Conn()).ListJobs(ctx, &pb.ListJobsRequest{Tenant: "acme", PageSize: 1000, Read: &pb.ReadOptions{Stale: true}})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, j := range page.Jobs {
			got = append(got, j.IdempotencyKey)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("%s holds the jobs %v\nwant %v", n.ID, got, want)
		}
		for _, k := range lost {
			if slices.Contains(got, k) {
				t.Fatalf("%s holds %s, submitted after the backup and before its restore", n.ID, k)
			}
		}
	}
	t.Logf("%d nodes after the restore and restarts: index %d hash %.16s, %d jobs, none of the %d lost", nodes, index, hash, len(want), len(lost))
}

// lastSeq is the seq of tenant acme's newest event (WatchEvents from the
// oldest, stale, on a running node: its stream's next-seq header).
func lastSeq(ctx context.Context, t *testing.T, c *cluster.Cluster) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stream, err := pb.NewClientClient(c.Running()[0].Conn()).WatchEvents(ctx, &pb.WatchEventsRequest{Tenant: "acme", FromOldest: true})
	if err != nil {
		t.Fatal(err)
	}
	md, err := stream.Header()
	if err != nil {
		t.Fatal(err)
	}
	v := md.Get("x-barista-watch-next")
	if len(v) != 1 {
		t.Fatalf("the watch's header: %v", md)
	}
	next, err := strconv.ParseUint(v[0], 10, 64)
	if err != nil || next == 0 {
		t.Fatalf("the watch's next seq %q: %v", v[0], err)
	}
	return next - 1
}
