package test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/baristahq/barista/client"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/worker"
)

// The kinds of the kinds tests: what a Python worker of the README's
// example registers (digest, resize), and one no worker registers at
// first (thumbnail).
type digestArgs struct {
	Name string `json:"name"`
	Ms   int    `json:"ms"`
}

func (digestArgs) Kind() string { return "digest" }

type resizeArgs struct{ W, H int }

func (resizeArgs) Kind() string { return "resize" }

type thumbnailArgs struct{ Src string }

func (thumbnailArgs) Kind() string { return "thumbnail" }

// kindsRunner registers the kinds named (of digest, resize, thumbnail),
// each completing at once with its worker's ID as output.
func kindsRunner(id string, kinds ...string) *worker.Kinds {
	k := worker.NewKinds()
	for _, kind := range kinds {
		switch kind {
		case "digest":
			worker.Register(k, func(ctx context.Context, j *worker.Job[digestArgs]) error { j.Output(id); return nil })
		case "resize":
			worker.Register(k, func(ctx context.Context, j *worker.Job[resizeArgs]) error { j.Output(id); return nil })
		case "thumbnail":
			worker.Register(k, func(ctx context.Context, j *worker.Job[thumbnailArgs]) error { j.Output(id); return nil })
		}
	}
	return k
}

// submitKind submits a function job of kind (or, with kind "", a command
// job running argv) and returns its ID.
func submitKind(t *testing.T, ctx context.Context, cl *client.Client, kind string, args any, argv ...string) uint64 {
	t.Helper()
	req := &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 100, JobType: kind, Form: pb.JobForm_FUNCTION}
	if kind == "" {
		b, _ := json.Marshal(map[string]any{"argv": argv})
		req.JobType, req.Payload, req.Form = "shell", b, pb.JobForm_COMMAND
	} else {
		req.Payload, _ = json.Marshal(args)
	}
	r, err := cl.Submit(ctx, req)
	if err != nil {
		t.Fatalf("submit %s: %v", kind, err)
	}
	return r.JobId
}

// TestKindsOnACluster, on a three-node cluster with the README's command
// worker (a barista worker process) and an SDK worker registering digest
// and resize: a digest job runs only on the SDK worker, a command job
// only on the command worker; a thumbnail job waits, explained
// no_worker kind=thumbnail, until a worker registering thumbnail
// connects, then runs, never failed; a rolling deploy that adds a kind
// fails no job; a kind's retry policy set with the CLI is fixed on a job
// at its submit; barista workers says what each worker runs.
func TestKindsOnACluster(t *testing.T) {
	c, cl, addrs, ctx := sdkCluster(t, 3)
	cmdWorker := c.AddWorker("cmd-1", "sm")
	cmdWorker.Start("")
	startSDKWorkerOfSize(t, addrs, "py-1", worker.SizeSM, 1, kindsRunner("py-1", "digest", "resize"))

	digest := submitKind(t, ctx, cl, "digest", digestArgs{Name: "x", Ms: 50})
	command := submitKind(t, ctx, cl, "", nil, "true")
	thumb := submitKind(t, ctx, cl, "thumbnail", thumbnailArgs{Src: "a.png"})
	resize := submitKind(t, ctx, cl, "resize", resizeArgs{W: 10, H: 10})
	done := func(j *client.Job) bool { return j.State == "completed" || j.State == "failed" }
	for id, worker := range map[uint64]string{digest: "py-1", resize: "py-1", command: "cmd-1"} {
		j := waitState(t, ctx, cl, id, "an end", done)
		if j.State != "completed" || j.Worker != worker || j.Attempt != 1 || j.Failures != 0 {
			t.Errorf("job %d: %s on %q, attempt %d, %d failures; want completed on %s at once", id, j.State, j.Worker, j.Attempt, j.Failures, worker)
		}
	}
	// The thumbnail job waits for a worker of its kind, explained so.
	ex, err := cl.ExplainJob(ctx, &pb.ExplainJobRequest{Tenant: "acme", JobId: thumb})
	if err != nil {
		t.Fatal(err)
	}
	if j, _ := cl.JobGet(ctx, "acme", thumb); j.State != "queued" || j.Attempt != 0 || ex.Reason != "no_worker" || ex.Kind != "thumbnail" ||
		!strings.Contains(ex.Text, `runs its kind "thumbnail"`) {
		t.Fatalf("the thumbnail job: %s at attempt %d, explained %s kind=%q: %s", j.State, j.Attempt, ex.Reason, ex.Kind, ex.Text)
	}
	out, _, err := c.Run("workers", "--server", c.Servers())
	if err != nil || !strings.Contains(out, "kinds: digest, resize") || !strings.Contains(out, "commands") {
		t.Fatalf("barista workers: %v\n%s", err, out)
	}

	// A rolling deploy that adds thumbnail: the new worker connects, the
	// old one stops. The waiting job runs; none failed.
	startSDKWorkerOfSize(t, addrs, "py-2", worker.SizeSM, 1, kindsRunner("py-2", "digest", "resize", "thumbnail"))
	j := waitState(t, ctx, cl, thumb, "an end", done)
	if j.State != "completed" || j.Worker != "py-2" || j.Failures != 0 || j.Attempt != 1 {
		t.Fatalf("the thumbnail job: %s on %q, attempt %d, %d failures", j.State, j.Worker, j.Attempt, j.Failures)
	}

	// A kind's retry policy, set with the CLI, is fixed on a job at its
	// submit; the submit's own value wins.
	if out, errOut, err := c.Run("kind", "set", "acme", "resize", "--max-attempts", "7", "--timeout", "1m", "--server", c.Servers()); err != nil {
		t.Fatalf("kind set: %v %s %s", err, out, errOut)
	}
	if out, _, err := c.Run("kind", "list", "--tenant", "acme", "--server", c.Servers()); err != nil || !strings.Contains(out, "resize") || !strings.Contains(out, "1m0s") {
		t.Fatalf("kind list: %v\n%s", err, out)
	}
	withPolicy := submitKind(t, ctx, cl, "resize", resizeArgs{W: 1, H: 1})
	r, err := cl.Submit(ctx, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 100, JobType: "resize", Form: pb.JobForm_FUNCTION,
		Payload: []byte(`{"W":1,"H":1}`), MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[uint64]int{withPolicy: 7, r.JobId: 2} {
		j := waitState(t, ctx, cl, id, "an end", done)
		if j.MaxAttempts != want || j.State != "completed" {
			t.Errorf("job %d: max_attempts %d, %s; want %d, completed", id, j.MaxAttempts, j.State, want)
		}
	}
}

// declaresMore is a worker whose Hello names a kind its runner cannot
// run yet (a deploy in flight: the kind's code did not load): it ends
// such a run unknown_kind.
type declaresMore struct {
	*worker.Kinds
	extra string
}

func (d declaresMore) Declares() (bool, []string) {
	_, kinds := d.Kinds.Declares()
	return false, append(kinds, d.extra)
}

// TestKindsUnknownKindRequeues: a worker given a job of a kind it does
// not run ends the run unknown_kind; the job goes back to the queue with
// no failure counted (explained no_worker kind=K once the worker is
// offered no job of that kind again in its session), and runs on a
// worker of its kind.
func TestKindsUnknownKindRequeues(t *testing.T) {
	c, cl, addrs, ctx := sdkCluster(t, 1)
	startSDKWorkerOfSize(t, addrs, "flaky", worker.SizeSM, 1, declaresMore{kindsRunner("flaky", "digest"), "thumbnail"})
	thumb := submitKind(t, ctx, cl, "thumbnail", thumbnailArgs{Src: "b.png"})
	var j *client.Job
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if j, err = cl.JobGet(ctx, "acme", thumb); err == nil && j.Attempt >= 1 && j.State == "queued" {
			break
		}
	}
	if j == nil || j.State != "queued" || j.Attempt != 1 || j.Failures != 0 {
		t.Fatalf("after unknown_kind: %+v", j)
	}
	ex, err := cl.ExplainJob(ctx, &pb.ExplainJobRequest{Tenant: "acme", JobId: thumb})
	if err != nil || ex.Reason != "no_worker" || ex.Kind != "thumbnail" {
		t.Fatalf("explain after unknown_kind: %+v %v", ex, err)
	}
	if out, _, err := c.Run("workers", "--server", c.Servers()); err != nil || !strings.Contains(out, "kinds: digest\n") {
		t.Fatalf("barista workers after unknown_kind: %v\n%s", err, out)
	}
	startSDKWorkerOfSize(t, addrs, "thumbs", worker.SizeSM, 1, kindsRunner("thumbs", "thumbnail"))
	j = waitState(t, ctx, cl, thumb, "completed", func(j *client.Job) bool { return j.State == "completed" })
	if j.Worker != "thumbs" || j.Failures != 0 || j.Attempt != 2 {
		t.Fatalf("the thumbnail job: on %q, attempt %d, %d failures", j.Worker, j.Attempt, j.Failures)
	}
}
