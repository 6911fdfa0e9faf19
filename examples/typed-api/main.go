// Command typed-api walks the typed Go SDK end to end — no protobuf
// message in sight (it imports neither package proto nor a generated
// type): tenant admin, a worker of Go functions, inserts, a watch, an
// explanation, cancels from both sides, a listing.
//
//	typed-api --server 10.0.0.1:7400,10.0.0.2:7400 --tenant shop
//
// It needs an admin token ($BARISTA_ADMIN_TOKEN) and a worker token
// ($BARISTA_WORKER_TOKEN) whose binding covers tour-1 and tour-2 (a
// cluster started with --insecure-dev takes none). It prints one line
// per step and exits 0, or 1 at the first step that did not go as
// described:
//
//  1. creates (or changes) tenant TENANT — silver, 1,000 queued jobs at
//     most, 600 dispatches a minute — then upgrades it to gold, which
//     keeps the quota, and subscribes it to the pool default;
//  2. starts a worker of two slots that runs the kinds invoice (bills a
//     customer) and cleanup (decides the job is no longer wanted and
//     cancels it: worker.Cancel, through the admin client);
//  3. inserts an invoice (one call: Insert takes the job from the
//     submit's answer), follows its events to its end, reads it back;
//  4. inserts an export, which no connected worker runs, asks why it
//     waits (no_worker) and cancels it;
//  5. inserts a cleanup and follows it to its end: cancelled;
//  6. lists the tenant's jobs by state, says what the worker observed,
//     and stops the worker gracefully.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/baristahq/barista/client"
	"github.com/baristahq/barista/worker"
)

// Invoice bills a customer.
type Invoice struct {
	Customer string `json:"customer"`
	Cents    int    `json:"cents"`
}

func (Invoice) Kind() string { return "invoice" }

// Cleanup is a job its function decides is no longer wanted.
type Cleanup struct {
	Reason string `json:"reason"`
}

func (Cleanup) Kind() string { return "cleanup" }

// Export is a kind no worker of this program runs.
type Export struct {
	Format string `json:"format"`
}

func (Export) Kind() string { return "export" }

func main() { os.Exit(run()) }

// calls counts the unary calls the admin client makes, by method name.
type calls struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *calls) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.mu.Lock()
	c.n[method[strings.LastIndexByte(method, '/')+1:]]++
	c.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (c *calls) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

func run() int {
	servers := flag.String("server", "127.0.0.1:7400", "gRPC ADDR[,ADDR...] of any nodes")
	tenant := flag.String("tenant", "shop", "the tenant to create and use")
	flag.Parse()
	addrs := strings.Split(*servers, ",")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fail := func(step string, err error) int {
		fmt.Fprintf(os.Stderr, "%s: %v\n", step, err)
		return 1
	}

	counted := &calls{n: map[string]int{}}
	admin, err := client.New(addrs, client.Options{Token: os.Getenv("BARISTA_ADMIN_TOKEN"),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(counted.intercept)}})
	if err != nil {
		return fail("client", err)
	}
	defer admin.Close()

	// 1. Tenant admin.
	t, err := admin.TenantUpsert(ctx, *tenant, client.TenantUpdate{Tier: client.Some(client.TierSilver), MaxQueued: client.Some(1000),
		Rate: client.Some(client.Rate{N: 600, Per: time.Minute})})
	if err != nil {
		return fail("tenant", err)
	}
	fmt.Printf("tenant %s: created=%v tier=%s max_queued=%d rate=%s\n", t.Name, t.Created, t.Tier, t.Caps.MaxQueued, t.Rate)
	if t, err = admin.TenantUpsert(ctx, *tenant, client.TenantUpdate{Tier: client.Some(client.TierGold)}); err != nil {
		return fail("upgrade", err)
	}
	fmt.Printf("tenant %s: tier=%s max_queued=%d (kept)\n", t.Name, t.Tier, t.Caps.MaxQueued)
	sub, _, err := admin.SubscriptionSet(ctx, *tenant, "default", 4)
	if err != nil {
		return fail("subscription", err)
	}
	fmt.Printf("subscription %s/%s: burst %d\n", sub.Tenant, sub.Pool, sub.Burst)

	// 2. A worker of Go functions, routed by kind.
	kinds := worker.NewKinds()
	worker.Register(kinds, func(ctx context.Context, j *worker.Job[Invoice]) error {
		j.Output(fmt.Sprintf("billed %s %d cents", j.Args.Customer, j.Args.Cents))
		return nil
	})
	worker.Register(kinds, func(ctx context.Context, j *worker.Job[Cleanup]) error {
		return worker.Cancel(errors.New(j.Args.Reason))
	})
	kinds.CancelWith(admin)
	var obsMu sync.Mutex
	var observed []string
	w, err := worker.NewWorker(worker.Config{ID: "tour", Size: worker.SizeMD, MaxConcurrent: 2, Servers: addrs,
		Dial: client.DialOptions(os.Getenv("BARISTA_WORKER_TOKEN"), nil), Runner: kinds, Logger: slog.New(slog.DiscardHandler),
		Observer: func(o worker.Observation) {
			if o.What == "finished" || o.What == "cancelled" {
				obsMu.Lock()
				observed = append(observed, fmt.Sprintf("%s %s of %s: %s", o.What, o.Kind, o.Tenant, o.Reason))
				obsMu.Unlock()
			}
		}})
	if err != nil {
		return fail("worker", err)
	}
	wctx, stopWorker := context.WithCancel(context.Background())
	defer stopWorker()
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	fmt.Printf("worker %s: runs %s\n", strings.Join(w.IDs(), ", "), strings.Join(kinds.Kinds(), ", "))

	// 3. Insert, watch, read back.
	counted.take()
	r, err := admin.Insert(ctx, Invoice{Customer: "c-17", Cents: 4200}, &client.InsertOpts{Tenant: *tenant, Size: client.SizeMD,
		Cost: 200 * time.Millisecond, Key: "invoice-c-17"})
	if err != nil {
		return fail("insert", err)
	}
	n := counted.take()
	fmt.Printf("inserted job %d: kind %s, form %s, submitted %v ago or less (calls: Submit %d, GetJob %d)\n",
		r.Job.ID, r.Job.Kind, r.Job.Form, time.Since(r.Job.SubmittedAt).Round(time.Minute), n["Submit"], n["GetJob"])
	events, err := watch(ctx, admin, *tenant, r.Job.ID)
	if err != nil {
		return fail("watch", err)
	}
	fmt.Printf("job %d events: %s\n", r.Job.ID, events)
	j, err := admin.JobGet(ctx, *tenant, r.Job.ID)
	if err != nil {
		return fail("get", err)
	}
	fmt.Printf("job %d: %s on %s, attempt %d, output %q\n", j.ID, j.State, workerName(j.Worker), j.Attempt, j.Stdout)
	if j.State != client.JobCompleted {
		return fail("invoice", fmt.Errorf("job %d ended %s", j.ID, j.State))
	}

	// 4. Why a job waits, and a cancel.
	e, err := admin.Insert(ctx, Export{Format: "csv"}, &client.InsertOpts{Tenant: *tenant, Cost: time.Second})
	if err != nil {
		return fail("insert export", err)
	}
	var why *client.Explanation
	for range 100 {
		if why, err = admin.JobExplain(ctx, *tenant, e.Job.ID); err != nil {
			return fail("explain", err)
		}
		if why.Reason == client.WaitNoWorker {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Printf("job %d waits: %s (kind %s)\n", e.Job.ID, why.Reason, why.Kind)
	cr, err := admin.JobCancel(ctx, *tenant, e.Job.ID)
	if err != nil {
		return fail("cancel", err)
	}
	fmt.Printf("job %d: %s\n", e.Job.ID, cr.State)

	// 5. A job its own function cancels.
	c, err := admin.Insert(ctx, Cleanup{Reason: "the order was withdrawn"}, &client.InsertOpts{Tenant: *tenant, Size: client.SizeSM, Cost: 100 * time.Millisecond})
	if err != nil {
		return fail("insert cleanup", err)
	}
	if events, err = watch(ctx, admin, *tenant, c.Job.ID); err != nil {
		return fail("watch cleanup", err)
	}
	if j, err = admin.JobGet(ctx, *tenant, c.Job.ID); err != nil {
		return fail("get cleanup", err)
	}
	fmt.Printf("job %d events: %s\n", c.Job.ID, events)
	fmt.Printf("job %d: %s, failures %d, stderr %q\n", j.ID, j.State, j.Failures, j.Stderr)

	// 6. The tenant's jobs, what the worker saw, and a graceful stop.
	byState := map[client.JobState]int{}
	for j, err := range admin.JobList(ctx, client.JobListOpts{Tenant: *tenant}) {
		if err != nil {
			return fail("list", err)
		}
		byState[j.State]++
	}
	fmt.Printf("jobs of %s: %d cancelled, %d completed\n", *tenant, byState[client.JobCancelled], byState[client.JobCompleted])
	obsMu.Lock()
	slices.Sort(observed)
	for _, o := range observed {
		fmt.Printf("observed: %s\n", o)
	}
	obsMu.Unlock()
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	if err := w.Stop(sctx); err != nil {
		return fail("stop", err)
	}
	if err := <-ran; err != nil {
		return fail("run", err)
	}
	fmt.Println("worker stopped")
	return 0
}

// watch follows job id's events from its first to its last, and returns
// them as "kind[/reason] ...".
func watch(ctx context.Context, c *client.Client, tenant string, id uint64) (string, error) {
	var out []string
	for ev, err := range c.EventWatch(ctx, client.WatchOpts{Tenant: tenant, JobID: id, FromOldest: true}) {
		if err != nil {
			return "", err
		}
		s := string(ev.Kind)
		if ev.Reason != "" {
			s += "/" + string(ev.Reason)
		}
		out = append(out, s)
	}
	return strings.Join(out, " "), nil
}

// workerName is the worker without its slot's number.
func workerName(id string) string {
	if i := strings.LastIndexByte(id, '-'); i > 0 {
		return id[:i]
	}
	return id
}
