package test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
	"github.com/baristahq/barista/test/cluster"
	"github.com/baristahq/barista/worker"
)

// TestClockSurvivesLeaderKill: a job is submitted with a 30 s delay, the
// cluster stays idle for 20 s, and the leader is killed (kill -9). The
// new leader's cluster time has lost at most clock_tick (1 s) + 2 s of
// the wall time that passed (before clock ticks it lost all 20 s),
// status says how far cluster time is behind the wall clock, and the
// delayed job is dispatched within 3 s of the wall time it was promised
// for (a worker connects only after the kill, so that nothing but the
// ticks writes while the cluster is idle).
func TestClockSurvivesLeaderKill(t *testing.T) {
	c, ctx := startWithAcme(t, 3, 3*time.Minute)
	leader := c.WaitLeader(20 * time.Second)
	cl := pb.NewClientClient(leader.Conn())
	sub, err := cl.Submit(ctx, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1000, DelayMs: 30_000, Payload: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	job, err := cl.GetJob(ctx, &pb.GetJobRequest{Tenant: "acme", JobId: sub.JobId})
	if err != nil {
		t.Fatal(err)
	}
	// The wall time the job is due at, as the cluster tells it now.
	promised := time.UnixMilli(job.Now.WallMs + job.DueAtMs - job.Now.ClusterMs)
	before := job.Now
	t.Logf("job %d due at %s", sub.JobId, promised.Format(time.RFC3339Nano))

	time.Sleep(20 * time.Second) // the idle period the test is about
	t.Logf("kill -9 leader %s", leader.ID)
	leader.Kill()
	next := c.WaitLeader(30 * time.Second)
	after, err := pb.NewClientClient(next.Conn()).GetJob(ctx, &pb.GetJobRequest{Tenant: "acme", JobId: sub.JobId})
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Duration(after.Now.WallMs-before.WallMs) * time.Millisecond
	clusterMoved := time.Duration(after.Now.ClusterMs-before.ClusterMs) * time.Millisecond
	lost := wall - clusterMoved
	t.Logf("new leader %s: %s of wall time, %s of cluster time: %s lost", next.ID, wall, clusterMoved, lost)
	if lost > 3*time.Second || lost < 0 {
		t.Fatalf("cluster time lost %s over the kill, want at most clock_tick + 2 s = 3s", lost)
	}

	// status says how far behind the wall clock cluster time is.
	stdout, stderr, err := c.Run("status", "--json", "--server", next.GRPCAddr)
	if err != nil {
		t.Fatalf("status: %v: %s", err, stderr)
	}
	var st struct {
		Behind *int64 `json:"cluster_behind_ms"`
	}
	if err := json.Unmarshal([]byte(stdout), &st); err != nil || st.Behind == nil {
		t.Fatalf("status --json: %v: %s", err, stdout)
	}
	if behind := time.Duration(*st.Behind) * time.Millisecond; behind > 4*time.Second {
		t.Fatalf("status: cluster time %s behind wall time", behind)
	}

	leader.Start()
	assigned := make(chan time.Time, 1)
	startFakeWorkers(t, c, 1, sfq.SM, worker.FakeRunner{Plan: func(*pb.Assign) worker.FakeSpec {
		return worker.FakeSpec{Duration: 10 * time.Millisecond, CPU: 10 * time.Millisecond}
	}}, nil)
	go watchAssigned(ctx, next, sub.JobId, assigned)
	select {
	case at := <-assigned:
		late := at.Sub(promised)
		t.Logf("job dispatched at %s: %s after its promised time", at.Format(time.RFC3339Nano), late)
		if late < 0 || late > 3*time.Second {
			t.Fatalf("the job was dispatched %s after its promised time, want 0 .. 3s", late)
		}
	case <-ctx.Done():
		t.Fatal("the delayed job was never dispatched")
	}
}

// quietClock is a [scheduler] section whose clock_tick (1 h) keeps the
// log of an idle cluster still, for tests that compare indexes or state
// hashes taken at different times.
const quietClock = "[scheduler]\nclock_tick = \"1h\"\n"

// watchAssigned sends the wall time of the job's first assigned event.
func watchAssigned(ctx context.Context, n *cluster.Node, job uint64, out chan<- time.Time) {
	stream, err := pb.NewClientClient(n.Conn()).WatchEvents(ctx, &pb.WatchEventsRequest{Tenant: "acme", FromOldest: true})
	if err != nil {
		return
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			return
		}
		if ev.JobId == job && ev.Kind == "assigned" {
			out <- time.UnixMilli(ev.WallMs)
			return
		}
	}
}
