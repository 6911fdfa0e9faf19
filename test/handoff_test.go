package test

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/baristahq/barista/client"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/test/cluster"
	"github.com/baristahq/barista/worker"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// handoffTries is how many times TestHandoffLeaderKilledAfterAssign kills
// a leader: BARISTA_HANDOFF_TRIES (make handoff: 20), else 1.
func handoffTries() int {
	if n, err := strconv.Atoi(os.Getenv("BARISTA_HANDOFF_TRIES")); err == nil && n > 0 {
		return n
	}
	return 1
}

// TestHandoffLeaderKilledAfterAssign: a job whose Assign died with its
// leader (the Dispatch committed, the Assign black-holed on its way to
// the worker, the leader killed with SIGKILL) runs again as soon as its
// worker reconnects to the next leader — its Hello does not list the job,
// so the job is lost at once, never started: queued again with no
// failure — not after a lease (30 s) or the ack timeout (10 s). With
// BARISTA_HANDOFF_TRIES=N it kills N leaders and logs the p50 and max
// from the kill to the job's second start.
func TestHandoffLeaderKilledAfterAssign(t *testing.T) {
	c, cl, _, ctx := sdkCluster(t, 3)
	tries := handoffTries()
	var took []time.Duration
	for try := range tries {
		leader := c.WaitLeader(30 * time.Second)
		proxy := cluster.NewProxy(t, leader.GRPCAddr)
		servers := []string{proxy.Addr}
		for _, f := range c.Followers(leader) {
			servers = append(servers, f.GRPCAddr)
		}
		id := "handoff-" + strconv.Itoa(try)
		stop := startStoppableWorker(t, servers, id, kindsRunner(id, "digest"))
		waitWorkerIdle(t, ctx, c, id)
		proxy.Block() // the Assign never reaches the worker
		job := submitKind(t, ctx, cl, "digest", digestArgs{Name: "h"})
		waitState(t, ctx, cl, job, "assigned", func(j *client.Job) bool { return j.State == "assigned" })
		leader.Kill()
		killed := time.Now()
		proxy.Close() // the worker's stream breaks: it goes to the next server
		j := waitState(t, ctx, cl, job, "completed", func(j *client.Job) bool { return j.State == "completed" })
		took = append(took, time.Since(killed))
		if j.Attempt != 2 || j.Failures != 0 || j.Worker != id {
			t.Errorf("try %d: the job completed at attempt %d with %d failures on %q; want attempt 2, no failure, on %s", try, j.Attempt, j.Failures, j.Worker, id)
		}
		stop()
		leader.Start() // back as a follower, for the next try
		c.WaitConverged(time.Minute)
	}
	slices.Sort(took)
	p50, worst := took[len(took)/2], took[len(took)-1]
	t.Logf("leader killed after an Assign: the job ran again %s after the kill (p50), %s at most, over %d tries", p50.Round(time.Millisecond), worst.Round(time.Millisecond), tries)
	// The ack timeout is 10 s, a lease 30 s: the reconnect beats both.
	if worst >= 10*time.Second {
		t.Errorf("the job waited %s after its leader was killed (the ack timeout is 10 s)", worst)
	}
}

// TestHandoffWorkerRestarted: a barista worker killed with SIGKILL and
// started again at once under the same ID: the job it held is requeued
// when it reconnects, not after its lease — counted a failure when it had
// started (a lost run), not when it had not (its Assign never reached the
// worker, frozen by SIGSTOP).
func TestHandoffWorkerRestarted(t *testing.T) {
	c, cl, _, ctx := sdkCluster(t, 3)
	w := c.AddWorker("w-restart", "sm")
	w.Start("")
	started := submitKind(t, ctx, cl, "", nil, "sleep", "60")
	waitState(t, ctx, cl, started, "running", func(j *client.Job) bool { return j.State == "running" })
	w.Kill()
	w.Start("")
	restarted := time.Now()
	j := waitState(t, ctx, cl, started, "requeued", func(j *client.Job) bool { return j.Attempt == 2 || j.State == "queued" })
	if wait := time.Since(restarted); wait > 5*time.Second || j.Failures != 1 {
		t.Errorf("a started job: requeued %s after the restart with %d failures; want at once, 1 failure (a lost run)", wait, j.Failures)
	}
	cancelJob(t, ctx, cl, started)
	waitState(t, ctx, cl, started, "cancelled", func(j *client.Job) bool { return j.State == "cancelled" })

	// Frozen, the worker never reads its Assign; killed and started
	// again, its Hello lists nothing.
	waitWorkerIdle(t, ctx, c, "w-restart")
	w.Signal(syscall.SIGSTOP)
	unstarted := submitKind(t, ctx, cl, "", nil, "true")
	waitState(t, ctx, cl, unstarted, "assigned", func(j *client.Job) bool { return j.State == "assigned" })
	w.Kill()
	w.Start("")
	restarted = time.Now()
	j = waitState(t, ctx, cl, unstarted, "completed", func(j *client.Job) bool { return j.State == "completed" })
	if wait := time.Since(restarted); wait > 5*time.Second || j.Failures != 0 || j.Attempt != 2 {
		t.Errorf("an assigned job: completed %s after the restart at attempt %d with %d failures; want at once, attempt 2, no failure", wait, j.Attempt, j.Failures)
	}
}

// waitWorkerIdle waits until worker id is connected to the leader and
// idle.
func waitWorkerIdle(t *testing.T, ctx context.Context, c *cluster.Cluster, id string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		running := c.Running()
		if len(running) == 0 {
			continue
		}
		resp, err := pb.NewWorkerClient(running[0].Conn()).ListWorkers(ctx, &pb.ListWorkersRequest{})
		if err != nil {
			continue
		}
		for _, w := range resp.Workers {
			if w.WorkerId == id && w.Connected && w.State == "idle" {
				return
			}
		}
	}
	t.Fatalf("worker %s never idle on the leader", id)
}

func cancelJob(t *testing.T, ctx context.Context, cl *client.Client, id uint64) {
	t.Helper()
	if _, err := cl.CancelJob(ctx, &pb.CancelJobRequest{Tenant: "acme", JobId: id}); err != nil {
		t.Fatal(err)
	}
}

// startStoppableWorker runs an SDK worker of one slot (size sm) until the
// returned stop is called (or the test ends).
func startStoppableWorker(t *testing.T, servers []string, id string, runner worker.Runner) (stop func()) {
	t.Helper()
	w, err := worker.NewWorker(worker.Config{ID: id, Size: worker.SizeSM, Servers: servers, Runner: runner,
		Dial: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	go func() { w.Run(ctx); close(finished) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-finished }) }
	t.Cleanup(stop)
	return stop
}

type blockArgs struct{}

func (blockArgs) Kind() string { return "block" }

// TestHandoffStopTimesOut: a Go worker whose Stop's context ends while a
// run goes on reports the run failed as it kills it: the cluster retries
// the job at once (one failure), not once its lease expires.
func TestHandoffStopTimesOut(t *testing.T) {
	_, cl, addrs, ctx := sdkCluster(t, 1)
	k := worker.NewKinds()
	worker.Register(k, func(ctx context.Context, j *worker.Job[blockArgs]) error {
		<-ctx.Done()
		time.Sleep(time.Hour)
		return nil
	})
	w, _ := startSDKWorkerOfSize(t, addrs, "stopper", worker.SizeSM, 1, k)
	job := submitKind(t, ctx, cl, "block", blockArgs{})
	waitState(t, ctx, cl, job, "running", func(j *client.Job) bool { return j.State == "running" })
	stopCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	stopped := time.Now()
	if err := w.Stop(stopCtx); err == nil {
		t.Fatal("Stop returned nil with a run still going")
	}
	// Failed once, it backs off (scheduled) before its retry.
	j := waitState(t, ctx, cl, job, "its retry", func(j *client.Job) bool { return j.State == "scheduled" || j.State == "queued" })
	if took := time.Since(stopped); took > 3*time.Second || j.Failures != 1 || !strings.Contains(j.Stderr, "the worker stopped before the run ended") {
		t.Errorf("after Stop timed out: queued %s later, %d failures, stderr %q", took, j.Failures, j.Stderr)
	}
}
