package test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/test/cluster"
)

// poolCmd creates (or changes) a pool.
func poolCmd(name string) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_PoolSet{PoolSet: &clusterpb.PoolSet{Name: name}}}
}

// subscriptionCmd sets tenant's subscription in pool.
func subscriptionCmd(tenant, pool string, burst uint32) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_SubscriptionSet{SubscriptionSet: &clusterpb.SubscriptionSet{Tenant: tenant, Pool: pool, Burst: &burst}}}
}

// submitInCmd is a keyed submit of a job of pool that runs payload.
func submitInCmd(tenant, key, pool string, payload []byte) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: tenant, IdempotencyKey: key, Size: pb.Size_MD, EstCostMs: 300,
		Payload: payload, Pool: pool}}}
}

// applyOK applies cmds through any node and fails the test unless every
// one is accepted.
func applyOK(t *testing.T, ctx context.Context, c *cluster.Cluster, cmds ...*clusterpb.Command) *clusterpb.ApplyResponse {
	t.Helper()
	resp, err := c.Apply(ctx, cmds...)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range resp.Results {
		if r.Code != clusterpb.Code_CODE_OK {
			t.Fatalf("command %d (%v) refused: %s %s", i, cmds[i], r.Code, r.Message)
		}
	}
	return resp
}

// eventLog follows the cluster's event stream from its start, resuming
// from its cursor on another node when a node goes away.
type eventLog struct {
	mu     sync.Mutex
	events []*pb.Event
}

func (l *eventLog) follow(ctx context.Context, c *cluster.Cluster) {
	var next uint64 = 1
	for i := 0; ctx.Err() == nil; i++ {
		n := c.Nodes[i%len(c.Nodes)]
		if !n.Running() {
			continue
		}
		s, err := pb.NewClientClient(n.Conn()).WatchEvents(ctx, &pb.WatchEventsRequest{FromSeq: next})
		for err == nil {
			var ev *pb.Event
			if ev, err = s.Recv(); err == nil {
				l.mu.Lock()
				l.events = append(l.events, ev)
				l.mu.Unlock()
				next = ev.Seq + 1
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (l *eventLog) snapshot() []*pb.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*pb.Event(nil), l.events...)
}

// TestPoolsAcrossALeaderKill: three servers, worker processes in two
// pools (three md workers of the pool default, three of the pool gpu),
// tenant acme with a cap of 3 running jobs across both pools and a
// subscription of burst 1 in gpu, and beta without limits in both. The
// gpu workers start before their pool exists: refused (NOT_FOUND), they
// say so in one line and exit 1; started again once it exists, they
// connect. While they are
// connected the pool is not deleted. The leader is killed while the jobs
// run. Every dispatch of the event stream is checked: its worker serves
// the job's pool, and at that point acme runs at most 3 jobs in all and
// 1 in gpu; every job completes, once; every node ends with the same
// state hash.
func TestPoolsAcrossALeaderKill(t *testing.T) {
	c := cluster.Start(t, 3, "--config", configFile(t, workerTimeouts))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	poolOf := map[string]string{} // worker -> pool
	for i := 1; i <= 3; i++ {
		g := c.AddWorker(fmt.Sprintf("gpu-%d", i), "md")
		g.Args = []string{"--pool", "gpu"}
		g.Start("")
		poolOf[g.ID] = "gpu"
	}
	// Refused while the pool does not exist: each exits 1, saying so.
	gpuWorkers := slices.Clone(c.Workers)
	for _, w := range gpuWorkers {
		if !w.Wait(30 * time.Second) {
			t.Fatalf("%s, a worker of a pool that does not exist, still runs:\n%s", w.ID, cluster.Tail(w.LogPath, 5))
		}
		want := `refuses it: hello.pool: unknown pool "gpu" (an admin creates it: barista pool set gpu) (NOT_FOUND)`
		if ee := (*exec.ExitError)(nil); !errors.As(w.ExitErr(), &ee) || ee.ExitCode() != 1 || !strings.Contains(w.Log(), want) {
			t.Fatalf("%s exited %v:\n%s", w.ID, w.ExitErr(), cluster.Tail(w.LogPath, 5))
		}
	}
	applyOK(t, ctx, c,
		&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD, Caps: &pb.Caps{MaxRunning: 3}}}},
		tenantCmd("beta", pb.Tier_SILVER, 0), poolCmd("gpu"), subscriptionCmd("acme", "gpu", 1))
	for _, w := range gpuWorkers {
		w.Start("")
	}
	for i := 1; i <= 3; i++ {
		w := c.AddWorker(fmt.Sprintf("cpu-%d", i), "md")
		w.Start("")
		poolOf[w.ID] = "default"
	}
	waitFor(t, 30*time.Second, "six connected workers", func() (bool, string) {
		r, err := pb.NewWorkerClient(c.Nodes[0].Conn()).ListWorkers(ctx, &pb.ListWorkersRequest{})
		return err == nil && len(r.Workers) == 6, fmt.Sprint(r, err)
	})
	// The pool is not deleted while its workers are connected.
	_, err := c.Apply(ctx, &clusterpb.Command{Cmd: &clusterpb.Command_PoolDelete{PoolDelete: &clusterpb.PoolDelete{Name: "gpu"}}})
	wantStatus(t, "deleting a pool with connected workers", err, codes.FailedPrecondition,
		"pool gpu has 3 connected workers (gpu-1, gpu-2, gpu-3): stop them, or start them in another pool, before deleting it")

	var events eventLog
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); events.follow(wctx, c) }()
	defer func() { stopWatch(); <-watched }()

	// 24 jobs of each tenant in each pool, of 300 ms each, submitted
	// through every node in turn.
	run := payload(t, "sleep", "0.3")
	jobPool := map[uint64]string{}
	var cmds []*clusterpb.Command
	for i := range 24 {
		for _, tenant := range []string{"acme", "beta"} {
			for _, pool := range []string{"", "gpu"} {
				cmds = append(cmds, submitInCmd(tenant, fmt.Sprintf("%s-%s-%d", tenant, pool, i), pool, run))
			}
		}
	}
	for i := 0; i < len(cmds); i += 16 {
		resp := applyOK(t, ctx, c, cmds[i:i+16]...)
		for k, r := range resp.Results {
			jobPool[r.Job] = cmp.Or(cmds[i+k].GetSubmit().Pool, "default")
		}
	}
	if len(jobPool) != 96 {
		t.Fatalf("%d jobs created, want 96", len(jobPool))
	}
	ended := func() int {
		n := 0
		for _, ev := range events.snapshot() {
			if ev.Kind == "completed" {
				n++
			}
		}
		return n
	}
	// Kill the leader once a third of the jobs completed, and start it
	// again once another leads.
	waitFor(t, 2*time.Minute, "32 completed jobs", func() (bool, string) { return ended() >= 32, fmt.Sprint(ended()) })
	old := c.WaitLeader(10 * time.Second)
	old.Kill()
	waitFor(t, 30*time.Second, "a new leader", func() (bool, string) {
		for _, n := range c.Running() {
			if st, err := n.Status(); err == nil && st.State == "leader" && n != old {
				return true, ""
			}
		}
		return false, "none"
	})
	old.Start()
	waitFor(t, 3*time.Minute, "every job completed", func() (bool, string) { return ended() >= 96, fmt.Sprint(ended()) })
	index, hash := c.WaitConverged(time.Minute)

	// Every dispatch against the rules, in log order.
	running := map[uint64]bool{} // acme's assigned or running jobs
	completed := map[uint64]int{}
	dispatches, maxAll, maxGPU := 0, 0, 0
	for _, ev := range events.snapshot() {
		switch ev.Kind {
		case "assigned":
			dispatches++
			if got, want := poolOf[ev.WorkerId], jobPool[ev.JobId]; got != want {
				t.Errorf("event %d: job %d of pool %s assigned to worker %s of pool %s", ev.Seq, ev.JobId, want, ev.WorkerId, got)
			}
			if ev.Tenant != "acme" {
				continue
			}
			running[ev.JobId] = true
			all, gpu := 0, 0
			for j := range running {
				all++
				if jobPool[j] == "gpu" {
					gpu++
				}
			}
			maxAll, maxGPU = max(maxAll, all), max(maxGPU, gpu)
			if all > 3 || gpu > 1 {
				t.Errorf("event %d: assigning job %d (pool %s) makes acme run %d jobs, %d in gpu: over its cap of 3 or its burst of 1 there",
					ev.Seq, ev.JobId, jobPool[ev.JobId], all, gpu)
			}
		case "completed", "failed", "cancelled", "timed_out", "requeued":
			if ev.Kind == "completed" {
				completed[ev.JobId]++
			}
			delete(running, ev.JobId)
		}
	}
	for job := range jobPool {
		if completed[job] != 1 {
			t.Errorf("job %d (pool %s) completed %d times", job, jobPool[job], completed[job])
		}
	}
	// Both limits bound at some point: acme ran 3 jobs at once, and 1 in
	// gpu, never more.
	if maxAll != 3 || maxGPU != 1 || dispatches < 96 {
		t.Errorf("acme ran at most %d jobs and %d in gpu at once over %d dispatches; want 3 and 1 over at least 96", maxAll, maxGPU, dispatches)
	}
	t.Logf("%d dispatches checked; the nodes converged at index %d, hash %.12s", dispatches, index, hash)
}

// TestPoolsRollingUpgrade: a cluster of three voters of a build of
// feature level 5 (--test-feature-level 5), with 12 jobs of which 6
// completed, is upgraded node by node, the leader last. After each node,
// every node holds the same 12 jobs (6 completed, 6 queued) and hash, and
// pool commands are refused, naming the field and both levels; a worker of
// pool gpu is refused (the cluster has no such pool), says so and stops. Once
// the last voter runs this build the leader raises the level to 6: the
// pool, a subscription and a job of gpu are accepted, the gpu worker
// connects and runs that job, and the 6 old jobs run in the pool default.
func TestPoolsRollingUpgrade(t *testing.T) {
	c := cluster.New(t, "--config", configFile(t, workerTimeouts))
	c.BootWith(3, func(_ int, n *cluster.Node) { n.Args = []string{"--test-feature-level", "5"} })
	c.WaitConverged(30 * time.Second)
	if got := levels(c); got != "n1:5/5 n2:5/5 n3:5/5" {
		t.Fatalf("levels (cluster/own): %s", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	run := payload(t, "sleep", "0.1")
	applyOK(t, ctx, c, tenantCmd("acme", pb.Tier_GOLD, 0))
	var jobs []uint64
	submitN := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			jobs = append(jobs, applyOK(t, ctx, c, submitInCmd("acme", fmt.Sprintf("old-%d", i), "", run)).Results[0].Job)
		}
	}
	cpu := c.AddWorker("cpu-1", "md")
	submitN(0, 6)
	cpu.Start("")
	acme := pb.NewClientClient(c.Nodes[0].Conn())
	for _, id := range jobs {
		waitJob(t, acme, id, time.Minute, "completed", func(j *pb.Job) bool { return j.State == "completed" })
	}
	cpu.Kill()
	submitN(6, 6)
	gpu := c.AddWorker("gpu-1", "md")
	gpu.Args = []string{"--pool", "gpu"}
	gpu.Start("")

	// states reads every job from node n's own state: "completed=6
	// queued=6".
	states := func(n *cluster.Node) string {
		count := map[string]int{}
		for _, id := range jobs {
			j, err := pb.NewClientClient(n.Conn()).GetJob(ctx, &pb.GetJobRequest{Tenant: "acme", JobId: id, Read: &pb.ReadOptions{Stale: true}})
			if err != nil {
				return err.Error()
			}
			count[j.State]++
		}
		return fmt.Sprintf("completed=%d queued=%d", count["completed"], count["queued"])
	}
	level5 := func(what string) string {
		return what + ` needs cluster feature level 6; the cluster is at level 5 until every voter runs a build that understands level 6 (docs/operations.md, "Upgrades")`
	}
	refused := []struct {
		cmd  *clusterpb.Command
		what string
	}{
		{poolCmd("gpu"), "PoolSet"},
		{subscriptionCmd("acme", "gpu", 1), "SubscriptionSet"},
		{submitInCmd("acme", "new-gpu", "gpu", run), "pool gpu"},
		{&clusterpb.Command{Cmd: &clusterpb.Command_Pause{Pause: &clusterpb.Pause{Pool: "default"}}}, "pause of pool default"},
	}
	order := append(c.Followers(c.WaitLeader(10*time.Second)), c.WaitLeader(10*time.Second))
	for step, n := range order {
		for _, r := range refused {
			_, err := c.Apply(ctx, r.cmd)
			wantStatus(t, fmt.Sprintf("%s with %d of 3 voters upgraded", r.what, step), err, codes.FailedPrecondition, "commands[0]: "+level5(r.what))
		}
		if err := n.Stop(); err != nil {
			t.Fatalf("stopping %s: %v", n.ID, err)
		}
		n.Args = nil
		n.Start()
		c.WaitConverged(time.Minute)
		for _, m := range c.Nodes {
			if got := states(m); got != "completed=6 queued=6" {
				t.Fatalf("after upgrading %s, %s holds %s", n.ID, m.ID, got)
			}
		}
		if step < 2 {
			if got := levels(c); !strings.HasPrefix(got, "n1:5/") || strings.Count(got, ":5/") != 3 {
				t.Fatalf("with %d of 3 voters upgraded the cluster left level 5: %s", step+1, got)
			}
		}
	}
	top := fsm.MaxFeatureLevel // level 6 and every later one this build understands
	waitFor(t, time.Minute, fmt.Sprintf("the level to be raised to %d", top), func() (bool, string) {
		got := levels(c)
		return got == fmt.Sprintf("n1:%d/%d n2:%d/%d n3:%d/%d", top, top, top, top, top, top), got
	})
	// The gpu worker was refused, said so, and stopped.
	if !gpu.Wait(30 * time.Second) {
		t.Fatal("the gpu worker, refused, still runs")
	}
	if log, _ := os.ReadFile(gpu.LogPath); !strings.Contains(string(log), `refuses it: hello.pool: unknown pool "gpu"`) {
		t.Fatalf("the gpu worker's log does not say its pool is unknown:\n%s", cluster.Tail(gpu.LogPath, 10))
	}
	for _, r := range refused[:2] {
		applyOK(t, ctx, c, r.cmd)
	}
	gpu.Start("") // the pool exists now
	newJob := applyOK(t, ctx, c, submitInCmd("acme", "new-gpu", "gpu", run)).Results[0].Job
	acme = pb.NewClientClient(c.Nodes[0].Conn()) // a stopped node's connection is closed
	j := waitJob(t, acme, newJob, time.Minute, "completed", func(j *pb.Job) bool { return j.State == "completed" })
	if j.WorkerId != "gpu-1" {
		t.Fatalf("the gpu job ran on %q", j.WorkerId)
	}
	cpu.Start("")
	for _, id := range jobs {
		if j := waitJob(t, acme, id, time.Minute, "completed", func(j *pb.Job) bool { return j.State == "completed" }); j.WorkerId != "cpu-1" {
			t.Errorf("job %d ran on %q", id, j.WorkerId)
		}
	}
	c.WaitConverged(time.Minute)
}
