package test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/test/cluster"
)

// poolCmd creates (or changes) a pool.
func poolCmd(name string) *pb.Command {
	return &pb.Command{Cmd: &pb.Command_PoolSet{PoolSet: &pb.PoolSet{Name: name}}}
}

// subscriptionCmd sets tenant's subscription in pool.
func subscriptionCmd(tenant, pool string, burst uint32) *pb.Command {
	return &pb.Command{Cmd: &pb.Command_SubscriptionSet{SubscriptionSet: &pb.SubscriptionSet{Tenant: tenant, Pool: pool, Burst: &burst}}}
}

// submitInCmd is a keyed submit of a job of pool that runs payload.
func submitInCmd(tenant, key, pool string, payload []byte) *pb.Command {
	return &pb.Command{Cmd: &pb.Command_Submit{Submit: &pb.SubmitJob{Tenant: tenant, IdempotencyKey: key, Size: pb.Size_MD, EstCostMs: 300,
		Payload: payload, Pool: pool}}}
}

// applyOK applies cmds through any node and fails the test unless every
// one is accepted.
func applyOK(t *testing.T, ctx context.Context, c *cluster.Cluster, cmds ...*pb.Command) *pb.ApplyResponse {
	t.Helper()
	resp, err := c.Apply(ctx, cmds...)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range resp.Results {
		if r.Code != pb.Code_CODE_OK {
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
// say so in their log and connect once it does. While they are
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
	// Refused while the pool does not exist, and saying so.
	refusal := `the cluster refuses this worker: it has no pool of this name (an admin creates it: barista pool set NAME); retrying: pool=gpu`
	waitUntil(t, 30*time.Second, "the gpu workers' refusal in their logs", func() bool {
		for _, w := range c.Workers {
			b, _ := os.ReadFile(w.LogPath)
			if !strings.Contains(string(b), refusal) || !strings.Contains(string(b), `unknown pool \"gpu\" (an admin creates it: barista pool set gpu)`) {
				return false
			}
		}
		return true
	})
	applyOK(t, ctx, c,
		&pb.Command{Cmd: &pb.Command_TenantUpsert{TenantUpsert: &pb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD, Caps: &pb.Caps{MaxRunning: 3}}}},
		tenantCmd("beta", pb.Tier_SILVER, 0), poolCmd("gpu"), subscriptionCmd("acme", "gpu", 1))
	for i := 1; i <= 3; i++ {
		w := c.AddWorker(fmt.Sprintf("cpu-%d", i), "md")
		w.Start("")
		poolOf[w.ID] = "default"
	}
	waitUntil(t, 30*time.Second, "six connected workers", func() bool {
		r, err := pb.NewWorkerClient(c.Nodes[0].Conn()).ListWorkers(ctx, &pb.ListWorkersRequest{})
		return err == nil && len(r.Workers) == 6
	})
	// The pool is not deleted while its workers are connected.
	_, err := c.Apply(ctx, &pb.Command{Cmd: &pb.Command_PoolDelete{PoolDelete: &pb.PoolDelete{Name: "gpu"}}})
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
	var cmds []*pb.Command
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
			jobPool[r.Job] = cmp(cmds[i+k].GetSubmit().Pool, "default")
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
	waitUntil(t, 2*time.Minute, "32 completed jobs", func() bool { return ended() >= 32 })
	old := c.WaitLeader(10 * time.Second)
	old.Kill()
	waitUntil(t, 30*time.Second, "a new leader", func() bool {
		for _, n := range c.Running() {
			if st, err := n.Status(); err == nil && st.State == "leader" && n != old {
				return true
			}
		}
		return false
	})
	old.Start()
	waitUntil(t, 3*time.Minute, "every job completed", func() bool { return ended() >= 96 })
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

// cmp returns s, or def when s is empty.
func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// waitUntil polls cond every 50 ms until it holds, failing the test after
// timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
