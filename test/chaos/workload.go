package chaos

// The run's client load: submits with retries and their records, and the
// load generators of each kind of tenant and client.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/test/cluster"
	"github.com/baristahq/barista/worker/runner"
)

// groupOf draws a submit's group: the unnamed group one time in five,
// else one of g0-g3.
func groupOf(rng *rand.Rand) string {
	if rng.IntN(5) == 0 {
		return ""
	}
	return fmt.Sprintf("g%d", rng.IntN(4))
}

// classAndDeadline draws a submit's class and deadline for a tenant of
// the mixed and capped work: 30 % of mix-gold's jobs are high, 10 % of
// every tenant's low, 20 % of the mixed tenants' carry a deadline of 2 to
// 10 s.
func classAndDeadline(rng *rand.Rand, tenant string) (pb.Class, int64) {
	class, deadline := pb.Class_CLASS_UNSPECIFIED, int64(0)
	switch d := rng.IntN(10); {
	case d < 3 && tenant == "mix-gold":
		class = pb.Class_HIGH
	case d == 3:
		class = pb.Class_LOW
	}
	if strings.HasPrefix(tenant, "mix-") && rng.IntN(5) == 0 {
		deadline = int64(2000 + rng.IntN(8000))
	}
	return class, deadline
}

// retriable reports errors after which an operation may be retried on
// another node (it may or may not have been applied; every operation of
// the load is idempotent).
func retriable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Aborted, codes.Unknown, codes.Internal:
		return true
	}
	return false
}

// retry calls op on node first, then on the others in turn, until it
// succeeds, fails for good, or ctx ends; it returns the tries made.
func (r *Run) retry(ctx context.Context, first int, op func(ctx context.Context, n *cluster.Node) error) (int, error) {
	tries := 0
	backoff := 50 * time.Millisecond
	for {
		n := r.c.Nodes[(first+tries)%len(r.c.Nodes)]
		tries++
		octx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := op(octx, n)
		cancel()
		if err == nil || !retriable(err) {
			return tries, err
		}
		select {
		case <-ctx.Done():
			return tries, err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// recordCall runs call through retry as op and records op: its tries, its
// result, and its acknowledgement when it succeeded (or, with
// refusalAnswers, when it was refused for good: a refusal is an answer).
func (r *Run) recordCall(ctx context.Context, first int, op Op, refusalAnswers bool, call func(ctx context.Context, n *cluster.Node) error) {
	tries, err := r.retry(ctx, first, call)
	op.Tries, op.Result = tries, resultOf(err)
	if err == nil || (refusalAnswers && !retriable(err)) {
		op.Ack = time.Now()
	}
	r.rec.op(op)
}

func (r *Run) payload(run time.Duration) []byte { return r.payloadExit(run, 0) }

// payloadExit is a job that runs for run and exits with code exit.
func (r *Run) payloadExit(run time.Duration, exit int) []byte {
	b, err := runner.EncodePayload(runner.Spec{Argv: []string{r.attempt, "--journal", r.journal, "--run", run.String(), "--tick", journalTick.String(),
		"--exit", strconv.Itoa(exit)}})
	if err != nil {
		panic(err) // fixed, valid arguments
	}
	return b
}

// formOf is the form of the n-th job of the mixed and capped tenants:
// half are command jobs, half have no form (a client of a build before
// kinds: every worker runs them). Every worker of a run runs commands
// (SPEC §8 rule 12 is checked at each dispatch: no job to a worker that
// does not run it).
func formOf(n int64) pb.JobForm {
	if n%2 == 1 {
		return pb.JobForm_COMMAND
	}
	return pb.JobForm_JOB_FORM_UNSPECIFIED
}

// submit sends one keyed submit of a job of pool ("": the pool default)
// and form until it is acknowledged or ctx ends.
func (r *Run) submit(ctx context.Context, client int, key, tenant, group, pool string, size pb.Size, est int64, run time.Duration, class pb.Class, deadline int64,
	form pb.JobForm) {
	req := &pb.SubmitRequest{Tenant: tenant, IdempotencyKey: &key, Size: size, EstCostMs: est, Payload: r.payload(run), Class: class, DeadlineMs: deadline,
		Group: group, Form: form}
	r.submitIn(ctx, client, req, pool)
}

// submitRequest sends one keyed submit until it is acknowledged or ctx
// ends.
func (r *Run) submitRequest(ctx context.Context, client int, req *pb.SubmitRequest) {
	r.submitIn(ctx, client, req, "")
}

// submitIn sends one keyed submit of a job of pool ("": the pool default)
// until it is acknowledged or ctx ends. A job of another pool goes as the
// admin's Submit command (Node.Apply), under the same idempotency key.
func (r *Run) submitIn(ctx context.Context, client int, req *pb.SubmitRequest, pool string) {
	req.Uses = r.usesOf(req.GetIdempotencyKey())
	op := Op{Kind: "submit", Client: client, Key: req.GetIdempotencyKey(), Tenant: req.Tenant, Invoke: time.Now()}
	tenant := req.Tenant
	tries, err := r.retry(ctx, client, func(ctx context.Context, n *cluster.Node) error {
		if pool != "" {
			job, err := applySubmit(ctx, n, req, pool)
			op.Job = job
			return err
		}
		resp, err := pb.NewClientClient(n.Conn()).Submit(ctx, req)
		if err == nil {
			op.Job = resp.JobId
		}
		return err
	})
	op.Tries = tries
	if err != nil {
		op.Result = err.Error()
	} else {
		op.Ack, op.Result = time.Now(), "ok"
		r.acked.Lock()
		r.acked.jobs = append(r.acked.jobs, op.Job)
		r.acked.tenants = append(r.acked.tenants, tenant)
		r.acked.Unlock()
	}
	r.rec.op(op)
}

// applySubmit proposes req as a Submit command of pool through n, and
// returns its job; a refusal is a FAILED_PRECONDITION error.
func applySubmit(ctx context.Context, n *cluster.Node, req *pb.SubmitRequest, pool string) (uint64, error) {
	cmd := &clusterpb.SubmitJob{Tenant: req.Tenant, IdempotencyKey: req.GetIdempotencyKey(), Size: req.Size, EstCostMs: req.EstCostMs, Payload: req.Payload,
		JobClass: req.Class, DeadlineMs: req.DeadlineMs, Group: req.Group, MaxAttempts: req.MaxAttempts, Pool: pool, Form: req.Form, Uses: req.Uses}
	resp, err := n.Client().Apply(ctx, &clusterpb.ApplyRequest{Commands: []*clusterpb.Command{{Cmd: &clusterpb.Command_Submit{Submit: cmd}}}})
	if err != nil {
		return 0, err
	}
	if res := resp.Results[0]; res.Code != clusterpb.Code_CODE_OK {
		return 0, status.Errorf(codes.FailedPrecondition, "%s: %s", res.Code, res.Message)
	}
	return resp.Results[0].Job, nil
}

// submitFailing sends one keyed submit of an sm job that fails its only
// attempt (exit code 3, max_attempts 1), until it is acknowledged or ctx
// ends.
func (r *Run) submitFailing(ctx context.Context, client int, key, tenant string, est int64, run time.Duration) {
	r.submitRequest(ctx, client, &pb.SubmitRequest{Tenant: tenant, IdempotencyKey: &key, Size: pb.Size_SM, EstCostMs: est,
		Payload: r.payloadExit(run, 3), MaxAttempts: 1})
}

// load runs the clients until ctx ends.
func (r *Run) load(ctx context.Context, wg *sync.WaitGroup) {
	var seq atomic.Int64
	// Submitters of mixed and capped work.
	others := []string{"cap-bronze", "cap-diamond", "mix-bronze", "mix-gold"}
	for c := range r.cfg.Submitters {
		rng := rand.New(rand.NewPCG(r.cfg.Seed, uint64(c)+1))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				tenant := others[rng.IntN(len(others))]
				size := []pb.Size{pb.Size_SM, pb.Size_MD, pb.Size_LG}[rng.IntN(3)]
				n := seq.Add(1)
				key := fmt.Sprintf("c%d-%d", c, n)
				class, deadline := classAndDeadline(rng, tenant)
				// One job in three goes to the pool gpu (sm or md: its
				// workers are md), where the tenant's caps bind with its
				// jobs of the pool default.
				pool := ""
				if r.cfg.GPU > 0 && rng.IntN(3) == 0 {
					pool, size = gpuPool, []pb.Size{pb.Size_SM, pb.Size_MD}[rng.IntN(2)]
				}
				r.submit(ctx, c, key, tenant, groupOf(rng), pool, size, int64(200+rng.IntN(1800)), time.Duration(200+rng.IntN(800))*time.Millisecond, class, deadline,
					formOf(n))
				sleepCtx(ctx, time.Duration(300+rng.IntN(700))*time.Millisecond)
			}
		}()
	}
	// Fairness tenants are kept backlogged: their queue is topped up to 8
	// (sm jobs), in the pool gpu to 6 (md jobs).
	fairs := r.fair
	if r.cfg.GPU > 0 {
		fairs = append(slices.Clone(r.fair), r.gpuFair...)
	}
	for i, tenant := range fairs {
		rng := rand.New(rand.NewPCG(r.cfg.Seed, uint64(100+i)))
		client := 100 + i
		pool, size, backlog := "", pb.Size_SM, 8
		if slices.Contains(r.gpuFair, tenant) {
			pool, size, backlog = gpuPool, pb.Size_MD, 6
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				queued := -1
				r.retry(ctx, client, func(ctx context.Context, n *cluster.Node) error {
					u, err := pb.NewClientClient(n.Conn()).TenantUsage(ctx, &pb.TenantUsageRequest{Tenant: tenant})
					if err == nil {
						queued = int(u.Queued)
					}
					return err
				})
				for q := queued; q >= 0 && q < backlog && ctx.Err() == nil; q++ {
					key := fmt.Sprintf("f%d-%d", client, seq.Add(1))
					r.submit(ctx, client, key, tenant, groupOf(rng), pool, size, int64(300+rng.IntN(500)), time.Duration(150+rng.IntN(300))*time.Millisecond, 0, 0,
						pb.JobForm_COMMAND)
				}
				sleepCtx(ctx, 300*time.Millisecond)
			}
		}()
	}
	// Delayed jobs (0.5 to 3 s), expiring jobs (1 to 3 s: some expire
	// behind the tenant's cap of 2) and failing jobs (exit 3, a backoff of
	// 300 ms doubling, 3 attempts).
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(r.cfg.Seed, 300))
		for ctx.Err() == nil {
			key := fmt.Sprintf("d%d", seq.Add(1))
			req := &pb.SubmitRequest{Tenant: "delay-silver", IdempotencyKey: &key, Size: pb.Size_SM, EstCostMs: int64(200 + rng.IntN(600)),
				Payload: r.payload(time.Duration(200+rng.IntN(600)) * time.Millisecond)}
			switch k := rng.IntN(10); {
			case k < 4:
				req.DelayMs = int64(500 + rng.IntN(2500))
			case k < 7:
				req.ExpireMs = int64(1000 + rng.IntN(2000))
				if rng.IntN(2) == 0 {
					req.DelayMs = int64(100 + rng.IntN(800))
				}
			default:
				req.Payload = r.payloadExit(time.Duration(100+rng.IntN(300))*time.Millisecond, 3)
				req.RetryBackoffMs, req.MaxAttempts = new(int64(300)), 3
			}
			r.submitRequest(ctx, 300, req)
			sleepCtx(ctx, time.Duration(200+rng.IntN(500))*time.Millisecond)
		}
	}()
	// A canceller and a tenant editor.
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(r.cfg.Seed, 200))
		for n := 0; ctx.Err() == nil; n++ {
			sleepCtx(ctx, time.Duration(1500+rng.IntN(2000))*time.Millisecond)
			if n%6 == 5 {
				// A group's cap moves: inherit (2), none or 1.
				req := &pb.SetGroupRequest{Tenant: "cap-diamond", Group: fmt.Sprintf("g%d", rng.IntN(4)), Cap: []string{"inherit", "none", "1"}[rng.IntN(3)]}
				r.recordCall(ctx, n, Op{Kind: "group", Client: 200, Tenant: req.Tenant, Invoke: time.Now()}, false, func(ctx context.Context, nd *cluster.Node) error {
					_, err := pb.NewClientClient(nd.Conn()).SetGroup(ctx, req)
					return err
				})
				continue
			}
			if n%3 == 2 {
				spec := capBronze(uint32(1 + rng.IntN(2)))
				r.recordCall(ctx, n, Op{Kind: "tenant", Client: 200, Tenant: spec.Name, Invoke: time.Now()}, false, func(ctx context.Context, nd *cluster.Node) error {
					_, err := pb.NewAdminClient(nd.Conn()).UpsertTenant(ctx, spec)
					return err
				})
				continue
			}
			r.acked.Lock()
			var job uint64
			var tenant string
			if k := len(r.acked.jobs); k > 0 {
				i := rng.IntN(k)
				job, tenant = r.acked.jobs[i], r.acked.tenants[i]
			}
			r.acked.Unlock()
			if job == 0 {
				continue
			}
			r.recordCall(ctx, n, Op{Kind: "cancel", Client: 200, Job: job, Tenant: tenant, Invoke: time.Now()}, true, func(ctx context.Context, nd *cluster.Node) error {
				_, err := pb.NewClientClient(nd.Conn()).CancelJob(ctx, &pb.CancelJobRequest{Tenant: tenant, JobId: job})
				return err
			})
		}
	}()
	// Dead letters: jobs of the capped and mixed tenants that fail their
	// only attempt, and a redriver that runs a tenant's dead letters
	// again by filter (a keyed call, retried on another node), so that
	// redriven jobs run again under the faults (SPEC §8 rule 9).
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(r.cfg.Seed, 300))
		for n := 0; ctx.Err() == nil; n++ {
			sleepCtx(ctx, time.Duration(1000+rng.IntN(1500))*time.Millisecond)
			tenant := others[rng.IntN(len(others))]
			if n%3 != 2 {
				key := fmt.Sprintf("x-%d", n)
				r.submitFailing(ctx, 300, key, tenant, int64(200+rng.IntN(300)), time.Duration(100+rng.IntN(200))*time.Millisecond)
				continue
			}
			req := &pb.BulkJobsRequest{Tenant: tenant, Filter: &pb.JobFilter{States: []string{"failed", "timed_out", "cancelled"}},
				RequestKey: fmt.Sprintf("rd-%d", n), MaxAttempts: uint32(1 + rng.IntN(2))}
			r.recordCall(ctx, n, Op{Kind: "redrive", Client: 300, Tenant: tenant, Invoke: time.Now()}, false, func(ctx context.Context, nd *cluster.Node) error {
				_, err := pb.NewClientClient(nd.Conn()).Redrive(ctx, req)
				return err
			})
		}
	}()
	// Levers: pauses and resumes of a tenant, a group and all dispatch,
	// and rate limits of a tenant and a group that change as it runs.
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.levers(ctx, rand.New(rand.NewPCG(r.cfg.Seed, 300)))
	}()
	// Watchers, resuming from their cursor on another node after an error.
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var next uint64
			for node := w; ctx.Err() == nil; node++ {
				n := r.c.Nodes[node%len(r.c.Nodes)]
				// Events flow all the time under this load: a stream
				// silent for 3 s is on a node that is down or cut off.
				sctx, cancel := context.WithCancel(ctx)
				idle := time.AfterFunc(3*time.Second, cancel)
				stream, err := pb.NewClientClient(n.Conn()).WatchEvents(sctx, &pb.WatchEventsRequest{FromSeq: next})
				for err == nil {
					var ev *pb.Event
					if ev, err = stream.Recv(); err == nil {
						idle.Reset(3 * time.Second)
						r.rec.event(WatchEvent{Watcher: w, Seq: ev.Seq, Job: ev.JobId, Kind: ev.Kind, Attempt: ev.Attempt})
						next = ev.Seq + 1
						if ev.Kind == "assigned" {
							r.lastAssign.Store(time.Now().UnixNano())
						}
					}
				}
				idle.Stop()
				cancel()
				sleepCtx(ctx, 200*time.Millisecond)
			}
		}()
	}
}

func resultOf(err error) string {
	if err != nil {
		return err.Error()
	}
	return "ok"
}
