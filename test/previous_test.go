package test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baristahq/barista/client"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/test/cluster"
	"github.com/baristahq/barista/worker"
)

// The tests of this file run this build beside the previous release's
// binary, named by $BARISTA_PREVIOUS_BIN (make test-upgrade builds it
// from PREVIOUS_REV); without it they skip.

func previousBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("BARISTA_PREVIOUS_BIN")
	if bin == "" {
		t.Skip("BARISTA_PREVIOUS_BIN is not set: make test-upgrade builds the previous release and runs these tests")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("BARISTA_PREVIOUS_BIN: %v", err)
	}
	return bin
}

// TestPreviousWorkerOnThisCluster: a worker of the previous release
// (which knows no job_type or pool in an Assign, no snooze and no cgroup)
// runs the jobs of a three-node cluster of this build, submitted with a
// kind through a follower: every one completes, with its output.
func TestPreviousWorkerOnThisCluster(t *testing.T) {
	prev := previousBin(t)
	c := cluster.Start(t, 3)
	setupTenants(t, c, map[string]pb.Tier{"acme": pb.Tier_GOLD})
	w := c.AddWorker("prev-1", "sm")
	w.Bin = prev
	w.Start("")
	follower := 0
	for i, n := range c.Nodes {
		if n != c.WaitLeader(10*time.Second) {
			follower = i
			break
		}
	}
	cl := pb.NewClientClient(c.Nodes[follower].Conn())
	var ids []uint64
	for _, kind := range []string{"resize", "thumbs", ""} {
		ids = append(ids, submitJob(t, c, follower, &pb.SubmitRequest{Tenant: "acme", JobType: kind, Size: pb.Size_SM, EstCostMs: 100,
			Payload: payload(t, "echo", "ran "+kind)}))
	}
	for i, id := range ids {
		j := waitJob(t, cl, id, time.Minute, "completed", func(j *pb.Job) bool { return j.State == "completed" || j.State == "failed" })
		if want := "ran " + []string{"resize", "thumbs", ""}[i] + "\n"; j.State != "completed" || j.WorkerId != "prev-1" || j.StdoutTail != want {
			t.Errorf("job %d: %s on %q, output %q; want completed on prev-1 with %q", id, j.State, j.WorkerId, j.StdoutTail, want)
		}
	}
}

// TestThisWorkerOnPreviousCluster: on a cluster of the previous release
// (whose Assigns name no kind and which cannot snooze), this build's
// command worker runs jobs; a worker of Go functions routed by kind takes
// nothing (it cannot tell the kinds apart) while a job of its kind waits;
// and a Go function's snooze becomes a failed run that is retried.
func TestThisWorkerOnPreviousCluster(t *testing.T) {
	prev := previousBin(t)
	c := cluster.New(t)
	c.Bin = prev
	c.Boot(1)
	setupTenants(t, c, map[string]pb.Tier{"acme": pb.Tier_GOLD})
	addrs := []string{c.Nodes[0].GRPCAddr}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := client.New(addrs, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pcl := pb.NewClientClient(c.Nodes[0].Conn())

	// A worker routed by kind connects first and is given nothing.
	kinds := worker.NewKinds()
	worker.Register(kinds, func(context.Context, *worker.Job[sumArgs]) error { return nil })
	startSDKWorkerOfSize(t, addrs, "kinds-1", worker.SizeMD, 1, kinds)
	sum, err := cl.Insert(ctx, sumArgs{A: 1, B: 2}, &client.InsertOpts{Tenant: "acme", Size: client.SizeMD, Cost: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if j := waitJob(t, pcl, sum.Job.ID, 5*time.Second, "read", func(*pb.Job) bool { return true }); j.State != "queued" {
		t.Fatalf("a job of kind sum on a leader that names no kinds: %s on %q, want queued and taken by no kinds worker", j.State, j.WorkerId)
	}

	// This build's command worker runs command jobs.
	w := c.AddWorker("this-1", "sm")
	w.Bin = cluster.Binary(t)
	w.Start("")
	id := submitJob(t, c, 0, &pb.SubmitRequest{Tenant: "acme", JobType: "resize", Size: pb.Size_SM, EstCostMs: 100, Payload: payload(t, "echo", "ran")})
	if j := waitJob(t, pcl, id, time.Minute, "completed", func(j *pb.Job) bool { return j.State == "completed" || j.State == "failed" }); j.State != "completed" || j.StdoutTail != "ran\n" {
		t.Fatalf("a command job on the previous leader: %s, output %q", j.State, j.StdoutTail)
	}

	w.Kill()

	// A Go worker of three sm slots (the job of kind sum, md, stays
	// queued): the previous leader does not multiplex a stream, so each
	// slot has a stream and a connection of its own, as before, and the
	// three run at once.
	var held sync.WaitGroup
	held.Add(3)
	release := make(chan struct{})
	sw, counted := startCountedWorker(t, addrs, "slots", worker.SizeSM, 3, worker.Func(func(ctx context.Context, a *pb.Assign) (worker.FuncResult, error) {
		held.Done()
		select {
		case <-release:
			return worker.FuncResult{Output: "held"}, nil
		case <-ctx.Done():
			return worker.FuncResult{}, ctx.Err()
		}
	}))
	var slotJobs []uint64
	for range 3 {
		slotJobs = append(slotJobs, submitJob(t, c, 0, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 100}))
	}
	held.Wait()
	if all, to := counted.held(addrs[0]); all != 3 || to != 3 {
		t.Fatalf("a worker of three slots on the previous leader holds %d connections (%d to it), want 3", all, to)
	}
	close(release)
	for _, id := range slotJobs {
		if j := waitJob(t, pcl, id, time.Minute, "completed", func(j *pb.Job) bool { return j.State == "completed" || j.State == "failed" }); j.State != "completed" || !strings.HasPrefix(j.WorkerId, "slots-") {
			t.Fatalf("a job of the three slots: %s on %q (exit %d, failure %q, stderr %q, stdout %q, attempt %d), want completed on a slot", j.State, j.WorkerId, j.ExitCode, j.Failure, j.StderrTail, j.StdoutTail, j.Attempt)
		}
	}
	if err := sw.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	// A Go function that snoozes: the previous leader gets a failed run
	// and retries it; the second run completes.
	runs := 0
	startSDKWorkerOfSize(t, addrs, "func-1", worker.SizeSM, 1, worker.Func(func(context.Context, *pb.Assign) (worker.FuncResult, error) {
		runs++
		if runs == 1 {
			return worker.FuncResult{}, worker.Snooze(time.Second)
		}
		return worker.FuncResult{Output: "second run"}, nil
	}))
	id = submitJob(t, c, 0, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 100, MaxAttempts: 3})
	j := waitJob(t, pcl, id, time.Minute, "completed", func(j *pb.Job) bool { return j.State == "completed" || j.State == "failed" })
	if j.State != "completed" || j.Attempt != 2 || j.StdoutTail != "second run" {
		t.Fatalf("a snoozed run on the previous leader: %s at attempt %d, output %q; want completed at attempt 2", j.State, j.Attempt, j.StdoutTail)
	}
	if j := waitJob(t, pcl, sum.Job.ID, 5*time.Second, "read", func(*pb.Job) bool { return true }); j.State != "queued" {
		t.Fatalf("the job of kind sum after the others ran: %s on %q, want still queued", j.State, j.WorkerId)
	}
}
