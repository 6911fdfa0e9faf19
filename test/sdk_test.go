package test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/baristahq/barista/client"
	"github.com/baristahq/barista/internal/workercompat"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/test/cluster"
	"github.com/baristahq/barista/worker"
)

// The job kinds of the SDK tests.
type sumArgs struct{ A, B int }

func (sumArgs) Kind() string { return "sum" }

type shoutArgs struct {
	Text string `json:"text"`
}

func (shoutArgs) Kind() string { return "shout" }

// napOnceArgs snoozes its first run for Ms, then completes.
type napOnceArgs struct{ Ms int }

func (napOnceArgs) Kind() string { return "nap-once" }

// holdArgs blocks until the test releases it (or its context ends).
type holdArgs struct{ N int }

func (holdArgs) Kind() string { return "hold" }

type strayArgs struct{}

func (strayArgs) Kind() string { return "stray" }

type bigArgs struct{ Blob string }

func (bigArgs) Kind() string { return "big" }

// sdkCluster is a cluster with tenant acme and a client of every node.
func sdkCluster(t *testing.T, n int, args ...string) (*cluster.Cluster, *client.Client, []string, context.Context) {
	t.Helper()
	c := cluster.Start(t, n, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	if _, err := c.Apply(ctx, tenantCmd("acme", pb.Tier_GOLD, 0)); err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, node := range c.Nodes {
		addrs = append(addrs, node.GRPCAddr)
	}
	cl, err := client.New(addrs, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return c, cl, addrs, ctx
}

// startSDKWorker runs a worker of slots slots named id against addrs; it
// stops when the test ends (if the test did not stop it).
func startSDKWorker(t *testing.T, addrs []string, id string, slots int, runner worker.Runner) (*worker.Worker, <-chan error) {
	t.Helper()
	return startSDKWorkerOfSize(t, addrs, id, worker.SizeMD, slots, runner)
}

// startSDKWorkerOfSize is startSDKWorker with workers of size size.
func startSDKWorkerOfSize(t *testing.T, addrs []string, id string, size worker.Size, slots int, runner worker.Runner) (*worker.Worker, <-chan error) {
	t.Helper()
	w, err := worker.NewWorker(worker.Config{ID: id, Size: size, Servers: addrs, MaxConcurrent: slots, Runner: runner,
		Dial: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, finished := make(chan error, 1), make(chan struct{})
	go func() { done <- w.Run(ctx); close(finished) }()
	t.Cleanup(func() { cancel(); <-finished })
	return w, done
}

// waitState polls a job until pred holds.
func waitState(t *testing.T, ctx context.Context, cl *client.Client, id uint64, what string, pred func(*client.Job) bool) *client.Job {
	t.Helper()
	var last *client.Job
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		j, err := cl.JobGet(ctx, "acme", id)
		if err == nil {
			last = j
			if pred(j) {
				return j
			}
		}
	}
	t.Fatalf("job %d never got %s (last: %+v)", id, what, last)
	return nil
}

func insert(t *testing.T, ctx context.Context, cl *client.Client, args client.JobArgs, opts *client.InsertOpts) *client.InsertResult {
	t.Helper()
	if opts == nil {
		opts = &client.InsertOpts{}
	}
	if opts.Tenant == "" {
		opts.Tenant = "acme"
	}
	if opts.Cost == 0 {
		opts.Cost = time.Second
	}
	r, err := cl.Insert(ctx, args, opts)
	if err != nil {
		t.Fatalf("insert %T: %v", args, err)
	}
	return r
}

// TestSDKTypedJobsRouteByKind, on a one-node and a three-node cluster:
// typed inserts come back as jobs with wall times; a worker of two slots
// routes each job to the function of its kind with its arguments
// decoded; an inserted job of a kind it has no function for (a function
// job) is never given to it and waits queued, no failure counted, while
// a job of that kind submitted without a form (a client of an earlier
// build) fails at once with no retry, saying so; a run that snoozes is tried again after its snooze
// without a failure counted, and explain says it snoozed.
func TestSDKTypedJobsRouteByKind(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d-node", n), func(t *testing.T) {
			_, cl, addrs, ctx := sdkCluster(t, n)
			kinds := worker.NewKinds()
			worker.Register(kinds, func(_ context.Context, j *worker.Job[sumArgs]) error {
				j.Output(fmt.Sprint(j.Args.A + j.Args.B))
				return nil
			})
			worker.Register(kinds, func(_ context.Context, j *worker.Job[shoutArgs]) error {
				j.Output(strings.ToUpper(j.Args.Text) + " from " + j.Tenant)
				return nil
			})
			worker.Register(kinds, func(_ context.Context, j *worker.Job[napOnceArgs]) error {
				if j.Attempt == 1 {
					return worker.Snooze(time.Duration(j.Args.Ms) * time.Millisecond)
				}
				j.Output("rested")
				return nil
			})
			before := time.Now()
			sum := insert(t, ctx, cl, sumArgs{2, 3}, &client.InsertOpts{Key: "sum-1", Class: client.ClassLow})
			if j := sum.Job; sum.Duplicate || j.Kind != "sum" || j.Class != client.ClassLow || j.Size != client.SizeSM || j.Tenant != "acme" ||
				j.Pool != "default" || j.Cost != time.Second || j.State != "queued" || string(j.Payload) != `{"A":2,"B":3}` {
				t.Fatalf("inserted: %+v", j)
			}
			if at := sum.Job.SubmittedAt; at.Before(before.Add(-5*time.Second)) || at.After(time.Now().Add(5*time.Second)) {
				t.Errorf("submitted at %s, want about %s", at, before)
			}
			if again := insert(t, ctx, cl, sumArgs{2, 3}, &client.InsertOpts{Key: "sum-1", Class: client.ClassLow}); !again.Duplicate || again.Job.ID != sum.Job.ID {
				t.Errorf("the same key again: %+v, want job %d, duplicate", again, sum.Job.ID)
			}
			shout := insert(t, ctx, cl, shoutArgs{"hi"}, nil)
			stray := insert(t, ctx, cl, strayArgs{}, &client.InsertOpts{MaxAttempts: 5})
			nap := insert(t, ctx, cl, napOnceArgs{Ms: 1500}, nil)
			startSDKWorker(t, addrs, "sdk", 2, kinds)

			done := func(j *client.Job) bool { return j.EndedAt.After(time.Time{}) }
			for id, want := range map[uint64]string{sum.Job.ID: "5", shout.Job.ID: "HI from acme"} {
				j := waitState(t, ctx, cl, id, "an end", done)
				if j.State != "completed" || j.Stdout != want || j.Attempt != 1 || (j.Worker != "sdk-1" && j.Worker != "sdk-2") {
					t.Errorf("job %d: %s, output %q, attempt %d, worker %q; want completed, %q, 1, sdk-1 or sdk-2", id, j.State, j.Stdout, j.Attempt, j.Worker, want)
				}
			}
			resp, err := cl.Submit(ctx, &pb.SubmitRequest{Tenant: "acme", JobType: "stray", Size: pb.Size_SM, Payload: []byte(`{}`), EstCostMs: 1000, MaxAttempts: 5})
			if err != nil {
				t.Fatal(err)
			}
			j := waitState(t, ctx, cl, resp.JobId, "an end", done)
			if j.State != "failed" || j.Attempt != 1 || j.Failures != 1 || j.Form != "any" ||
				!strings.Contains(j.Stderr, `is of kind "stray", which this worker has no function for (it runs nap-once, shout, sum)`) {
				t.Errorf("stray job of no form: %s, attempt %d, failures %d, form %s, stderr %q; want failed at once, saying why", j.State, j.Attempt, j.Failures, j.Form, j.Stderr)
			}
			j = waitState(t, ctx, cl, nap.Job.ID, "its snooze", func(j *client.Job) bool { return j.State == "scheduled" || done(j) })
			if j.State != "scheduled" || j.Snoozes != 1 || j.Failures != 0 || j.DueAt.IsZero() {
				t.Fatalf("snoozed job: %s, snoozes %d, failures %d, due %s; want scheduled, 1, 0, a due time", j.State, j.Snoozes, j.Failures, j.DueAt)
			}
			ex, err := cl.ExplainJob(ctx, &pb.ExplainJobRequest{Tenant: "acme", JobId: nap.Job.ID})
			if err == nil && ex.Reason == "scheduled" && !strings.Contains(ex.Text, "its last run snoozed (1 snooze in a row)") {
				t.Errorf("explain of the snoozed job: %q", ex.Text)
			}
			j = waitState(t, ctx, cl, nap.Job.ID, "an end", done)
			if j.State != "completed" || j.Attempt != 2 || j.Failures != 0 || j.Snoozes != 0 || j.Stdout != "rested" {
				t.Errorf("job after its snooze: %s, attempt %d, failures %d, snoozes %d, output %q; want completed at attempt 2, no failure", j.State, j.Attempt, j.Failures, j.Snoozes, j.Stdout)
			}
			// Every other job ended; the inserted stray job, a function
			// job of a kind no worker runs, still waits, never tried.
			if j, err := cl.JobGet(ctx, "acme", stray.Job.ID); err != nil || j.State != "queued" || j.Attempt != 0 || j.Failures != 0 || j.Form != "function" {
				t.Errorf("inserted stray job: %+v, %v; want queued, attempt 0, no failure, form function", j, err)
			}
		})
	}
}

// holder is the function of kind hold: it counts the runs in progress
// (and their most at once) and holds each until released.
type holder struct {
	running, most atomic.Int32
	mu            sync.Mutex
	release       chan struct{}
}

func newHolder() *holder { return &holder{release: make(chan struct{})} }

func (h *holder) register(k *worker.Kinds) {
	worker.Register(k, func(ctx context.Context, j *worker.Job[holdArgs]) error {
		n := h.running.Add(1)
		defer h.running.Add(-1)
		for m := h.most.Load(); n > m && !h.most.CompareAndSwap(m, n); m = h.most.Load() {
		}
		h.mu.Lock()
		release := h.release
		h.mu.Unlock()
		select {
		case <-release:
			j.Output(fmt.Sprint("held ", j.Args.N))
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// releaseAll lets every held run end, and the next ones at once.
func (h *holder) releaseAll() {
	h.mu.Lock()
	close(h.release)
	h.mu.Unlock()
}

func waitRunning(t *testing.T, h *holder, n int32) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); h.running.Load() != n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d runs in progress, want %d", h.running.Load(), n)
		}
	}
}

// TestSDKSlotsAndStop: a worker of MaxConcurrent 3 runs three jobs at
// once, one per slot (sdk-1 .. sdk-3); Stop lets a running job finish
// and takes no new job meanwhile; StopAndCancel stops a running job now,
// and the job is retried (a failed run).
func TestSDKSlotsAndStop(t *testing.T) {
	_, cl, addrs, ctx := sdkCluster(t, 3)
	h := newHolder()
	kinds := worker.NewKinds()
	h.register(kinds)
	w, runDone := startSDKWorker(t, addrs, "slots", 3, kinds)
	if got := strings.Join(w.IDs(), " "); got != "slots-1 slots-2 slots-3" {
		t.Fatalf("slot IDs %s", got)
	}
	var ids []uint64
	for i := range 3 {
		ids = append(ids, insert(t, ctx, cl, holdArgs{i}, nil).Job.ID)
	}
	waitRunning(t, h, 3)
	workers := map[string]bool{}
	for _, id := range ids {
		j := waitState(t, ctx, cl, id, "running", func(j *client.Job) bool { return j.State == "running" })
		workers[j.Worker] = true
	}
	if len(workers) != 3 || w.Busy() != 3 {
		t.Fatalf("three jobs ran on %v (%d busy), want one per slot", workers, w.Busy())
	}
	h.releaseAll()
	for _, id := range ids {
		waitState(t, ctx, cl, id, "completed", func(j *client.Job) bool { return j.State == "completed" })
	}

	// Stop: the running job finishes, the one inserted meanwhile waits.
	h.mu.Lock()
	h.release = make(chan struct{})
	h.mu.Unlock()
	running := insert(t, ctx, cl, holdArgs{10}, nil).Job.ID
	waitRunning(t, h, 1)
	stopped := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		stopped <- w.Stop(sctx)
	}()
	time.Sleep(300 * time.Millisecond) // Stop is under way
	waiting := insert(t, ctx, cl, holdArgs{11}, nil).Job.ID
	time.Sleep(time.Second)
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned %v while a job ran", err)
	default:
	}
	h.releaseAll()
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := <-runDone; err != nil {
		t.Fatalf("Run after Stop: %v", err)
	}
	if j := waitState(t, ctx, cl, running, "an end", func(j *client.Job) bool { return j.State == "completed" }); j.Stdout != "held 10" {
		t.Errorf("the running job's output %q", j.Stdout)
	}
	if j, err := cl.JobGet(ctx, "acme", waiting); err != nil || j.State != "queued" || j.Attempt != 0 {
		t.Errorf("the job inserted during Stop: %+v %v; want queued, never run", j, err)
	}

	// StopAndCancel: the held job is stopped now and retried.
	h.mu.Lock()
	h.release = make(chan struct{})
	h.mu.Unlock()
	w2, _ := startSDKWorker(t, addrs, "again", 1, kinds)
	waitRunning(t, h, 1)
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := w2.StopAndCancel(sctx); err != nil {
		t.Fatalf("StopAndCancel: %v", err)
	}
	j := waitState(t, ctx, cl, waiting, "its cancelled run reported", func(j *client.Job) bool { return j.HasResult })
	if j.State != "queued" && j.State != "scheduled" || j.Failures != 1 || !strings.Contains(j.Stderr, "context canceled") {
		t.Errorf("the job StopAndCancel stopped: %s, failures %d, stderr %q; want to be retried after one failure", j.State, j.Failures, j.Stderr)
	}
}

// TestSDKSentinels: each cause a caller acts on comes back from the
// cluster's real refusal as its sentinel, which also matches its code's,
// for Insert and for each job of InsertMany.
func TestSDKSentinels(t *testing.T) {
	c, cl, _, ctx := sdkCluster(t, 3, "--config", configFile(t, "[scheduler]\nsubmit_rate = \"5/1h\"\nsubmit_burst = 5\nmax_payload_bytes = 1024\nmax_total_queued_bytes = 4096\n"))
	admin := pb.NewAdminClient(c.Nodes[0].Conn())
	for _, tn := range []*pb.UpsertTenantRequest{
		{Name: "quota", Tier: pb.Tier_FREE.Enum(), Caps: &pb.CapsUpdate{MaxQueued: proto.Uint32(1)}},
		{Name: "rate", Tier: pb.Tier_FREE.Enum()},
	} {
		if _, err := admin.UpsertTenant(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	in := func(tenant string, args client.JobArgs, key string) error {
		_, err := cl.Insert(ctx, args, &client.InsertOpts{Tenant: tenant, Key: key, Cost: time.Second})
		return err
	}
	if err := in("quota", sumArgs{1, 1}, ""); err != nil {
		t.Fatal(err)
	}
	if err := in("acme", sumArgs{1, 1}, "k1"); err != nil {
		t.Fatal(err)
	}
	var rateErr error
	for i := range 6 {
		if rateErr = in("rate", sumArgs{i, i}, ""); rateErr != nil {
			break
		}
	}
	cases := []struct {
		name        string
		err         error
		cause, code error
	}{
		{"unknown tenant", in("ghost", sumArgs{}, ""), client.ErrTenantUnknown, client.ErrNotFound},
		{"quota", in("quota", sumArgs{2, 2}, ""), client.ErrQuotaExceeded, client.ErrResourceExhausted},
		{"rate", rateErr, client.ErrRateLimited, client.ErrResourceExhausted},
		{"key conflict", in("acme", sumArgs{9, 9}, "k1"), client.ErrKeyConflict, client.ErrAlreadyExists},
		{"over max_payload_bytes", in("acme", bigArgs{strings.Repeat("x", 2000)}, ""), client.ErrTooLarge, client.ErrInvalid},
		{"over any request", in("acme", bigArgs{strings.Repeat("x", 5<<20)}, ""), client.ErrTooLarge, client.ErrInvalid},
	}
	for _, k := range cases {
		if !errors.Is(k.err, k.cause) || !errors.Is(k.err, k.code) {
			t.Errorf("%s: %v; want it to match %v and %v", k.name, k.err, k.cause, k.code)
		}
		for _, other := range []error{client.ErrTenantUnknown, client.ErrQuotaExceeded, client.ErrRateLimited, client.ErrKeyConflict, client.ErrTooLarge} {
			if other != k.cause && errors.Is(k.err, other) {
				t.Errorf("%s: %v also matches %v", k.name, k.err, other)
			}
		}
	}
	if d, ok := client.RetryAfter(rateErr); !ok || d <= 0 || d > time.Hour {
		t.Errorf("rate limited: retry after %s (%v), want within the hour", d, ok)
	}
	res, err := cl.InsertMany(ctx, []client.InsertManyParams{
		{Args: sumArgs{3, 3}, Opts: &client.InsertOpts{Tenant: "acme", Cost: time.Second}},
		{Args: sumArgs{4, 4}, Opts: &client.InsertOpts{Tenant: "quota", Cost: time.Second}},
		{Args: sumArgs{5, 5}, Opts: &client.InsertOpts{Tenant: "rate", Cost: time.Second}},
		{Args: sumArgs{6, 6}, Opts: &client.InsertOpts{Tenant: "ghost", Cost: time.Second}},
	})
	if err != nil || len(res) != 4 {
		t.Fatalf("InsertMany: %v, %d results", err, len(res))
	}
	if res[0].Err != nil || res[0].ID == 0 || !errors.Is(res[1].Err, client.ErrQuotaExceeded) || !errors.Is(res[2].Err, client.ErrRateLimited) ||
		!errors.Is(res[3].Err, client.ErrTenantUnknown) || !errors.Is(res[3].Err, client.ErrNotFound) {
		t.Errorf("InsertMany results: %+v", res)
	}
	if d, ok := client.RetryAfter(res[2].Err); !ok || d <= 0 {
		t.Errorf("InsertMany's rate-limited job: retry after %s (%v)", d, ok)
	}
	// Every tenant's payloads together: max_total_queued_bytes (4096),
	// reached by tenants each far within its own quotas.
	var totalErr error
	for i := 0; i < 6 && totalErr == nil; i++ {
		name := fmt.Sprintf("big%d", i)
		if _, err := admin.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: name, Tier: pb.Tier_FREE.Enum()}); err != nil {
			t.Fatal(err)
		}
		totalErr = in(name, bigArgs{strings.Repeat("y", 900)}, "")
	}
	if !errors.Is(totalErr, client.ErrQuotaExceeded) || !strings.Contains(totalErr.Error(), "max_total_queued_bytes of 4096") {
		t.Errorf("payloads past the cluster's total: %v", totalErr)
	}
}

// TestSDKServesAnEarlierWorker: typed inserts are served to a worker that
// speaks as the build before Assign named a job's kind (Ready apart from
// Finished, Started at once) and runs every job as one function of its
// payload: the new fields of Welcome and Assign change nothing for it.
func TestSDKServesAnEarlierWorker(t *testing.T) {
	_, cl, addrs, ctx := sdkCluster(t, 1)
	cfg := worker.Config{ID: "old-1", Size: worker.SizeMD, Servers: addrs, Logger: slog.New(slog.DiscardHandler),
		Dial: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
		Runner: worker.Func(func(_ context.Context, a *pb.Assign) (worker.FuncResult, error) {
			return worker.FuncResult{Output: "payload " + string(a.Payload)}, nil
		})}
	workercompat.Set(&cfg, workercompat.Options{SeparateReady: true, StartedAtOnce: true})
	a, err := worker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); a.Run(actx) }()
	t.Cleanup(func() { cancel(); <-done })
	for i, args := range []client.JobArgs{sumArgs{1, 2}, shoutArgs{"x"}} {
		id := insert(t, ctx, cl, args, nil).Job.ID
		j := waitState(t, ctx, cl, id, "completed", func(j *client.Job) bool { return j.State == "completed" })
		if want := []string{`payload {"A":1,"B":2}`, `payload {"text":"x"}`}[i]; j.Stdout != want {
			t.Errorf("job %d: output %q, want %q", id, j.Stdout, want)
		}
	}
}
