package rpc

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
)

// TestPoolsOnANode: over gRPC, a worker of an unknown pool is refused with
// NOT_FOUND naming it; a job of pool gpu is no_worker while only workers
// of another pool, or too small, are connected, and says so naming the
// pool; a fitting worker of gpu makes it next; the pool is not deleted
// while its workers are connected (Node.Apply, FAILED_PRECONDITION naming
// the pool and the count), and is once they are gone.
func TestPoolsOnANode(t *testing.T) {
	n := startTestNode(t, nil, nil)
	_, _, err := n.connect("", &pb.Hello{WorkerId: "w-x", Size: pb.Size_MD, Pool: "gpu"})
	if want := `rpc error: code = NotFound desc = hello.pool: unknown pool "gpu" (an admin creates it: barista pool set gpu)`; err == nil || err.Error() != want {
		t.Fatalf("a worker of an unknown pool: %v\nwant %s", err, want)
	}
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD}}}, poolSetCmd("gpu"))
	job := n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_MD, EstCostMs: 1000, Pool: "gpu"}}})[0].Job
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	explain := func() *pb.ExplainJobResponse {
		t.Helper()
		got, err := pb.NewClientClient(n.dial("")).ExplainJob(ctx, &pb.ExplainJobRequest{Tenant: "acme", JobId: uint64(job)})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	noWorker := fmt.Sprintf("Job %d (tenant acme, class normal, size md, pool gpu) could run, but no connected worker of pool gpu fits md: none undrained of size md or larger is there to take it. "+
		"Place in line: 0 jobs go before it on the workers of size md (0 of its own tenant's).", job)
	if got := explain(); got.Reason != "no_worker" || got.Text != noWorker {
		t.Fatalf("no worker at all: %s %q\nwant no_worker %q", got.Reason, got.Text, noWorker)
	}
	// A worker of the pool default, and one of gpu too small: neither fits.
	if _, _, err := n.connect("", &pb.Hello{WorkerId: "w-def", Size: pb.Size_LG}); err != nil {
		t.Fatal(err)
	}
	small, _, err := n.connect("", &pb.Hello{WorkerId: "w-sm", Size: pb.Size_SM, Pool: "gpu"})
	if err != nil {
		t.Fatal(err)
	}
	if got := explain(); got.Reason != "no_worker" || got.Text != noWorker {
		t.Fatalf("with workers of another pool and too small: %s %q\nwant no_worker %q", got.Reason, got.Text, noWorker)
	}
	w, _, err := n.connect("", &pb.Hello{WorkerId: "w-gpu", Size: pb.Size_MD, Pool: "gpu"})
	if err != nil {
		t.Fatal(err)
	}
	next := fmt.Sprintf("Job %d (tenant acme, class normal, size md, pool gpu) is next: nothing goes before it, and every worker that fits it (1 worker of pool gpu of size md or larger) is busy; the first to ask for work takes it.", job)
	if got := explain(); got.Reason != "waiting" || got.FittingWorkers != 1 || got.Text[:len(next)] != next {
		t.Fatalf("with a fitting worker of gpu: %s fitting=%d %q\nwant waiting, 1, %q", got.Reason, got.FittingWorkers, got.Text, next)
	}
	for pool, want := range map[string]int{"gpu": 2, "default": 1, "": 1, "eu": 0} {
		if got, known := n.srv.Workers().ConnectedWorkers(ctx, pool); got != want || !known {
			t.Errorf("ConnectedWorkers(%q) = %d, %v; want %d", pool, got, known, want)
		}
	}
	del := &clusterpb.ApplyRequest{Commands: []*clusterpb.Command{{Cmd: &clusterpb.Command_PoolDelete{PoolDelete: &clusterpb.PoolDelete{Name: "gpu"}}}}}
	_, err = clusterpb.NewNodeClient(n.dial("")).Apply(ctx, del)
	if want := "rpc error: code = FailedPrecondition desc = pool gpu has 2 connected workers (w-gpu, w-sm): stop them, or start them in another pool, before deleting it"; err == nil || err.Error() != want {
		t.Fatalf("deleting a pool with workers: %v\nwant %s", err, want)
	}
	// The admin API refuses it the same way, and lists each worker's pool.
	_, err = pb.NewAdminClient(n.dial("")).PoolDelete(ctx, &pb.PoolDeleteRequest{Name: "gpu"})
	if want := "rpc error: code = FailedPrecondition desc = pool gpu has 2 connected workers (w-gpu, w-sm): stop them, or start them in another pool, before deleting it"; err == nil || err.Error() != want {
		t.Fatalf("PoolDelete of a pool with workers: %v\nwant %s", err, want)
	}
	list, err := pb.NewWorkerClient(n.dial("")).ListWorkers(ctx, &pb.ListWorkersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var pools []string
	for _, wi := range list.Workers {
		pools = append(pools, wi.WorkerId+"@"+wi.Pool)
	}
	if got := strings.Join(pools, " "); got != "w-def@default w-gpu@gpu w-sm@gpu" {
		t.Errorf("ListWorkers: %s", got)
	}
	if a := w.ready(1); a.Job != uint64(job) {
		t.Fatalf("w-gpu was assigned %v, want job %d", a, job)
	}
	// The job ends and the workers of gpu go: the pool is deleted.
	w.send(&pb.WorkerMessage{Msg: &pb.WorkerMessage_Started{Started: &pb.JobStarted{Job: uint64(job), Attempt: 1}}})
	w.send(finished(uint64(job), 1, 10, ""))
	waitFor(t, 10*time.Second, "the job's end", func() bool {
		j, _, _ := n.node.FSM.Job(job)
		return j.State.Terminal()
	})
	w.cancel()
	small.cancel()
	waitFor(t, 10*time.Second, "no worker of gpu", func() bool {
		got, _ := n.srv.Workers().ConnectedWorkers(ctx, "gpu")
		return got == 0
	})
	resp, err := clusterpb.NewNodeClient(n.dial("")).Apply(ctx, del)
	if err != nil || resp.Results[0].Code != clusterpb.Code_CODE_OK {
		t.Fatalf("deleting an idle pool without workers: %v %v", resp, err)
	}
	_, _, err = n.connect("", &pb.Hello{WorkerId: "w-gpu", Size: pb.Size_MD, Pool: "gpu"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("a worker of a deleted pool: %v", err)
	}
}
