package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/snapshot"
	"github.com/baristahq/barista/test/cluster"
	"github.com/baristahq/barista/worker/runner"
)

// Config is one chaos run.
type Config struct {
	Seed     uint64
	Duration time.Duration // how long faults are injected
	Nodes    int           // 3 or 5
	// Workers by size.
	SM, MD, LG int
	// GPU is the number of md workers of the pool gpu (SPEC §3 "Pools"),
	// beside the workers above, which serve the pool default.
	GPU int
	// Submitters is the number of concurrent submitting clients.
	Submitters int
	// Partitions puts every process in its own network namespace and
	// adds partitions to the fault mix (needs root and iproute2).
	Partitions bool
}

// Timeouts of the chaos cluster: leases outlive a failover with
// reconnects, workers kill their job before the lease expires.
const schedulerConfig = `[scheduler]
heartbeat_interval = "250ms"
self_kill_after = "4s"
lease_timeout = "5s"
ack_timeout = "5s"
cancel_grace = "1s"
`

const (
	leaseTimeout = 5 * time.Second
	journalTick  = 100 * time.Millisecond
)

// Fault is one injected fault.
type Fault struct {
	Kind   string        `json:"kind"`
	Target string        `json:"target"`
	At     time.Time     `json:"at"`
	For    time.Duration `json:"for"`
	// Failover is, for a fault that removed the leader, the time from the
	// fault to the next dispatch a watcher saw committed.
	Failover time.Duration `json:"failover,omitempty"`
}

// Run is a chaos run in progress.
type Run struct {
	t       testing.TB
	cfg     Config
	rng     *rand.Rand
	c       *cluster.Cluster
	net     *Net
	journal string
	attempt string // the job program
	rec     recorder
	faults  []Fault
	fmu     sync.Mutex
	// lastAssign is when a watcher last received an "assigned" event
	// (Unix ns), for failover times.
	lastAssign atomic.Int64
	acked      struct {
		sync.Mutex
		jobs    []uint64
		tenants []string
	}
	fair []string
	// gpuFair are the fairness tenants of the pool gpu.
	gpuFair []string
}

// tenants of a run: three fairness tenants (sm jobs of class normal
// without a deadline only, no caps, in groups without caps: fair-silver's
// in group_order fair), two capped tenants and two of mixed sizes, which
// also submit jobs of classes high (mix-gold, capped) and low, and jobs
// with deadlines (the mixed ones). Every tenant's jobs are spread over
// groups g0-g3 and its unnamed group; the capped and mixed tenants' groups
// are capped (group_cap), in both group orders.
var tenantSpecs = []*pb.UpsertTenantRequest{
	{Name: "fair-free", Tier: pb.Tier_FREE},
	{Name: "fair-silver", Tier: pb.Tier_SILVER, GroupOrder: pb.GroupOrder_GROUP_FAIR},
	{Name: "fair-gold", Tier: pb.Tier_GOLD},
	capBronze(1),
	{Name: "cap-diamond", Tier: pb.Tier_DIAMOND, Caps: &pb.Caps{MaxRunningMd: 1, MaxInflightCpuMs: 1500}, GroupCap: 2, GroupOrder: pb.GroupOrder_GROUP_FAIR},
	{Name: "mix-bronze", Tier: pb.Tier_BRONZE, AllowDeadlines: true, Caps: &pb.Caps{MaxRunningDeadline: 2}, GroupCap: 1, GroupOrder: pb.GroupOrder_GROUP_FAIR},
	{Name: "mix-gold", Tier: pb.Tier_GOLD, MaxClass: pb.Class_HIGH, AllowDeadlines: true, Caps: &pb.Caps{MaxRunningHigh: 2}, GroupCap: 2},
	// Delayed, expiring and failing (backing off) jobs (SPEC §8 rule 9).
	{Name: "delay-silver", Tier: pb.Tier_SILVER, Caps: &pb.Caps{MaxRunning: 2}},
	// The fairness tenants of the pool gpu: md jobs there only, no caps
	// (the pool's weights are equal: they share it 1:1).
	{Name: "gfair-bronze", Tier: pb.Tier_BRONZE},
	{Name: "gfair-gold", Tier: pb.Tier_GOLD},
}

// gpuPool is the run's second pool (SPEC §3 "Pools"), with its own
// workers (Config.GPU), its own fairness tenants and equal weights. The
// capped and mixed tenants submit some of their jobs there too, so that
// their caps bind across both pools, and cap-diamond has a subscription
// of burst 1 in it (SPEC §8 rule 11).
const gpuPool = "gpu"

// poolSetup is what the run applies before its load: the pool gpu and
// cap-diamond's subscription there.
func poolSetup() []*pb.Command {
	equal, burst := "equal", uint32(1)
	return []*pb.Command{
		{Cmd: &pb.Command_PoolSet{PoolSet: &pb.PoolSet{Name: gpuPool, Weights: &equal}}},
		{Cmd: &pb.Command_SubscriptionSet{SubscriptionSet: &pb.SubscriptionSet{Tenant: "cap-diamond", Pool: gpuPool, Burst: &burst}}},
	}
}

// capBronze is cap-bronze's settings with max_running n: group_cap 1,
// group_order fifo.
func capBronze(n uint32) *pb.UpsertTenantRequest {
	return &pb.UpsertTenantRequest{Name: "cap-bronze", Tier: pb.Tier_BRONZE, Caps: &pb.Caps{MaxRunning: n}, GroupCap: 1}
}

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

// Start boots the cluster, the workers and the network of a run.
func Start(t testing.TB, cfg Config) *Run {
	r := &Run{t: t, cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5eed)), fair: []string{"fair-free", "fair-silver", "fair-gold"},
		gpuFair: []string{"gfair-bronze", "gfair-gold"}}
	r.attempt = cluster.Helper(t, "./test/testdata/attempt")
	cfgPath := filepath.Join(t.TempDir(), "barista.toml")
	if err := os.WriteFile(cfgPath, []byte(schedulerConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	// The whole log is kept (the audit replays it from index 1);
	// snapshots are still taken and installed.
	r.c = cluster.New(t, "--config", cfgPath, "--trailing-logs", "100000000", "--snapshot-threshold", "3000", "--snapshot-interval", "5s")
	r.journal = filepath.Join(r.c.Dir, "journal")
	var n *Net
	if cfg.Partitions {
		var err error
		if n, err = NewNet(); err != nil {
			// Root without the right to make namespaces (a container):
			// run the other faults.
			t.Logf("partitions skipped: network namespaces: %v", err)
		}
	}
	if n != nil {
		r.net = n
		t.Cleanup(n.Close)
		r.c.Host = func(id string) string {
			if a := n.IP(id); a != "" {
				return a
			}
			a, err := n.Add(id)
			if err != nil {
				t.Fatalf("network namespace of %s: %v", id, err)
			}
			return a
		}
		r.c.Wrap = n.Exec
		// Raft without TLS on the namespaces' private addresses.
		r.c.Args = append(r.c.Args, "--insecure-raft")
	}
	for i := 1; i <= cfg.Nodes; i++ {
		node := r.c.Add(fmt.Sprintf("n%d", i))
		if i == 2 {
			// A wall clock off by ten seconds, either way: cluster time
			// must make it harmless.
			off := "10s"
			if r.rng.IntN(2) == 0 {
				off = "-10s"
			}
			node.Args = append(node.Args, "--test-clock-offset", off)
		}
		if i == 1 {
			node.Start("--bootstrap")
			r.c.WaitLeader(20 * time.Second)
		} else {
			node.Start("--join", r.c.Nodes[0].GRPCAddr)
		}
	}
	r.c.WaitVoters(cfg.Nodes, 60*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, spec := range tenantSpecs {
		if _, err := r.retry(ctx, 0, func(ctx context.Context, n *cluster.Node) error {
			_, err := pb.NewAdminClient(n.Conn()).UpsertTenant(ctx, spec)
			return err
		}); err != nil {
			t.Fatalf("tenant %s: %v", spec.Name, err)
		}
	}
	// The pool first (once the cluster's feature level allows it): its
	// workers would be refused until it exists.
	if cfg.GPU > 0 {
		for {
			resp, err := r.c.Apply(ctx, poolSetup()...)
			if err == nil && resp.Results[0].Code == pb.Code_CODE_OK && resp.Results[1].Code == pb.Code_CODE_OK {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("pool %s: %v %v", gpuPool, resp, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for size, count := range map[string]int{"sm": cfg.SM, "md": cfg.MD, "lg": cfg.LG, "gpu-md": cfg.GPU} {
		for i := 1; i <= count; i++ {
			id := fmt.Sprintf("w-%s-%d", size, i)
			if r.net != nil {
				r.net.Add(id)
			}
			if pool, sz, ok := strings.Cut(size, "-"); ok {
				r.c.AddWorker(id, sz).Args = []string{"--pool", pool}
				continue
			}
			r.c.AddWorker(id, size)
		}
	}
	sort.Slice(r.c.Workers, func(i, j int) bool { return r.c.Workers[i].ID < r.c.Workers[j].ID })
	for _, w := range r.c.Workers {
		w.Start("")
	}
	return r
}

// Dir is the run's directory: logs, data directories, the job journal.
func (r *Run) Dir() string { return r.c.Dir }

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

// submit sends one keyed submit of a job of pool ("": the pool default)
// until it is acknowledged or ctx ends.
func (r *Run) submit(ctx context.Context, client int, key, tenant, group, pool string, size pb.Size, est int64, run time.Duration, class pb.Class, deadline int64) {
	req := &pb.SubmitRequest{Tenant: tenant, IdempotencyKey: &key, Size: size, EstCostMs: est, Payload: r.payload(run), Class: class, DeadlineMs: deadline,
		Group: group}
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
	cmd := &pb.SubmitJob{Tenant: req.Tenant, IdempotencyKey: req.GetIdempotencyKey(), Size: req.Size, EstCostMs: req.EstCostMs, Payload: req.Payload,
		JobClass: req.Class, DeadlineMs: req.DeadlineMs, Group: req.Group, MaxAttempts: req.MaxAttempts, Pool: pool}
	resp, err := n.Client().Apply(ctx, &pb.ApplyRequest{Commands: []*pb.Command{{Cmd: &pb.Command_Submit{Submit: cmd}}}})
	if err != nil {
		return 0, err
	}
	if res := resp.Results[0]; res.Code != pb.Code_CODE_OK {
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
				key := fmt.Sprintf("c%d-%d", c, seq.Add(1))
				class, deadline := classAndDeadline(rng, tenant)
				// One job in three goes to the pool gpu (sm or md: its
				// workers are md), where the tenant's caps bind with its
				// jobs of the pool default.
				pool := ""
				if r.cfg.GPU > 0 && rng.IntN(3) == 0 {
					pool, size = gpuPool, []pb.Size{pb.Size_SM, pb.Size_MD}[rng.IntN(2)]
				}
				r.submit(ctx, c, key, tenant, groupOf(rng), pool, size, int64(200+rng.IntN(1800)), time.Duration(200+rng.IntN(800))*time.Millisecond, class, deadline)
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
					r.submit(ctx, client, key, tenant, groupOf(rng), pool, size, int64(300+rng.IntN(500)), time.Duration(150+rng.IntN(300))*time.Millisecond, 0, 0)
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

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// leader returns the index of the node that leads now (-1 if none).
func (r *Run) leader() int {
	for i, n := range r.c.Nodes {
		if !n.Running() {
			continue
		}
		if st, err := n.Status(); err == nil && st.State == "leader" {
			return i
		}
	}
	return -1
}

func (r *Run) record(f Fault) *Fault {
	r.fmu.Lock()
	defer r.fmu.Unlock()
	r.faults = append(r.faults, f)
	return &r.faults[len(r.faults)-1]
}

// term returns the highest term any running node reports.
func (r *Run) term() uint64 {
	var t uint64
	for _, n := range r.c.Nodes {
		if st, err := n.Status(); err == nil {
			t = max(t, st.Term)
		}
	}
	return t
}

// failoverAfter waits (up to 30 s) for a leader of a term above old, then
// for a dispatch a watcher receives after that, and returns the time from
// at to it (never less than the real failover: events committed before
// the fault are excluded by the term change).
func (r *Run) failoverAfter(at time.Time, old uint64) time.Duration {
	deadline := time.Now().Add(30 * time.Second)
	var elected time.Time
	for time.Now().Before(deadline) {
		if elected.IsZero() {
			if l := r.leader(); l >= 0 {
				if st, err := r.c.Nodes[l].Status(); err == nil && st.Term > old {
					elected = time.Now()
				}
			}
		} else if t := time.Unix(0, r.lastAssign.Load()); t.After(elected) {
			return t.Sub(at)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0
}

// faultKinds is the fault mix; the partition kinds need namespaces.
var faultKinds = []string{"kill-leader", "kill-follower", "kill-worker", "pause-worker", "pause-leader", "restart-node",
	"partition-node", "partition-worker", "cut-leader-out"}

// inject runs the seeded fault schedule until ctx ends: one fault at a
// time, each healed before the next.
func (r *Run) inject(ctx context.Context) {
	kinds := faultKinds
	if r.net == nil {
		kinds = kinds[:6]
	}
	for ctx.Err() == nil {
		sleepCtx(ctx, time.Duration(2000+r.rng.IntN(3000))*time.Millisecond)
		if ctx.Err() != nil {
			return
		}
		kind := kinds[r.rng.IntN(len(kinds))]
		hold := time.Duration(1000+r.rng.IntN(3000)) * time.Millisecond
		switch kind {
		case "kill-leader", "pause-leader", "cut-leader-out":
			l := r.leader()
			if l < 0 {
				continue
			}
			n := r.c.Nodes[l]
			old := r.term()
			at := time.Now()
			f := r.record(Fault{Kind: kind, Target: n.ID, At: at, For: hold})
			switch kind {
			case "kill-leader":
				n.Kill()
			case "pause-leader":
				n.Signal(syscall.SIGSTOP)
			case "cut-leader-out":
				for _, m := range append(r.net.Members(), "host") {
					if m != n.ID {
						r.net.Cut(n.ID, m)
					}
				}
			}
			f.Failover = r.failoverAfter(at, old)
			sleepCtx(context.Background(), max(0, hold-time.Since(at)))
			switch kind {
			case "kill-leader":
				n.Start()
			case "pause-leader":
				n.Signal(syscall.SIGCONT)
			case "cut-leader-out":
				r.net.Heal()
			}
		case "kill-follower", "restart-node", "partition-node":
			l := r.leader()
			var cands []int
			for i, n := range r.c.Nodes {
				if i != l && n.Running() {
					cands = append(cands, i)
				}
			}
			if kind != "kill-follower" && l >= 0 && r.rng.IntN(3) == 0 {
				cands = []int{l} // sometimes the leader
			}
			if len(cands) == 0 {
				continue
			}
			n := r.c.Nodes[cands[r.rng.IntN(len(cands))]]
			old := r.term()
			at := time.Now()
			f := r.record(Fault{Kind: kind, Target: n.ID, At: at, For: hold})
			wasLeader := l >= 0 && r.c.Nodes[l] == n
			stopped := make(chan struct{})
			switch kind {
			case "kill-follower":
				n.Kill()
			case "restart-node":
				// The failover clock runs while the node stops.
				go func() { n.Stop(); close(stopped) }()
			case "partition-node":
				r.isolate(n.ID)
			}
			if wasLeader {
				f.Failover = r.failoverAfter(at, old)
			}
			if kind == "restart-node" {
				<-stopped
			}
			sleepCtx(context.Background(), max(0, hold-time.Since(at)))
			if kind == "partition-node" {
				r.net.Heal()
			} else {
				n.Start()
			}
		case "kill-worker", "pause-worker", "partition-worker":
			w := r.c.Workers[r.rng.IntN(len(r.c.Workers))]
			if kind != "kill-worker" {
				hold = leaseTimeout + time.Duration(500+r.rng.IntN(2500))*time.Millisecond
			}
			r.record(Fault{Kind: kind, Target: w.ID, At: time.Now(), For: hold})
			switch kind {
			case "kill-worker":
				w.Kill()
				sleepCtx(context.Background(), hold)
				w.Start("")
			case "pause-worker":
				w.Signal(syscall.SIGSTOP)
				sleepCtx(context.Background(), hold)
				w.Signal(syscall.SIGCONT)
			case "partition-worker":
				r.isolate(w.ID)
				sleepCtx(context.Background(), hold)
				r.net.Heal()
			}
		}
	}
}

// isolate cuts every link of member, both ways.
func (r *Run) isolate(member string) {
	for _, m := range append(r.net.Members(), "host") {
		if m != member {
			r.net.Cut(member, m)
			r.net.Cut(m, member)
		}
	}
}

// Result is a finished run: its history, violations and report.
type Result struct {
	History    *History
	Violations []Violation
	Report     string
}

// Execute runs load and faults for the configured duration, lets the
// cluster settle, stops it, audits the final leader's log and checks the
// history.
func (r *Run) Execute() *Result {
	t := r.t
	loadCtx, stopLoad := context.WithCancel(context.Background())
	var loadWG sync.WaitGroup
	r.load(loadCtx, &loadWG)
	faultCtx, stopFaults := context.WithTimeout(context.Background(), r.cfg.Duration)
	r.inject(faultCtx)
	stopFaults()
	// Everything back: heal the network, resume and restart what is down.
	if r.net != nil {
		r.net.Heal()
	}
	for _, n := range r.c.Nodes {
		n.Signal(syscall.SIGCONT)
		if !n.Running() {
			n.Start()
		}
	}
	for _, w := range r.c.Workers {
		w.Signal(syscall.SIGCONT)
	}
	sleepCtx(context.Background(), 5*time.Second) // a last stretch of load without faults
	stopLoad()
	loadWG.Wait()
	// The workers stop (their running jobs' leases expire and requeue),
	// then the cluster must converge.
	for _, w := range r.c.Workers {
		w.Kill()
	}
	time.Sleep(leaseTimeout + 2*time.Second)
	h := &History{Fair: r.fair, Overlap: journalTick}
	if r.cfg.GPU > 0 {
		h.PoolFair = map[string][]string{gpuPool: r.gpuFair}
	}
	index := r.settle(h)
	fenced := 0.0
	for _, n := range r.c.Nodes {
		fenced += scrapeSum(n.HTTPAddr, "barista_fenced_writes_total")
	}
	leader := r.leader()
	if leader < 0 {
		leader = 0
	}
	for _, n := range r.c.Nodes {
		if err := n.Stop(); err != nil {
			t.Logf("stopping %s: %v", n.ID, err)
		}
	}
	out, errOut, err := r.c.Run("replay", "--data-dir", r.c.Nodes[leader].DataDir, "--audit", "--until", strconv.FormatUint(index, 10))
	if err != nil {
		t.Fatalf("replay --audit of %s: %v\n%s", r.c.Nodes[leader].ID, err, errOut)
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "index="); ok {
			idx, hsh, _ := strings.Cut(v, " hash=")
			h.AuditIndex, _ = strconv.ParseUint(idx, 10, 64)
			h.AuditHash = hsh
			continue
		}
		var f snapshot.AuditFact
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		h.Audit = append(h.Audit, f)
	}
	if h.Attempts, err = ReadJournal(r.journal, journalTick); err != nil {
		t.Fatal(err)
	}
	r.rec.mu.Lock()
	h.Ops, h.Events = r.rec.ops, r.rec.events
	r.rec.mu.Unlock()
	if b, err := json.MarshalIndent(r.faults, "", " "); err == nil {
		os.WriteFile(filepath.Join(r.c.Dir, "faults.json"), b, 0o644)
	}
	res := &Result{History: h, Violations: Check(h)}
	res.Report = r.report(h, fenced)
	return res
}

// settle polls every node's applied index and hash until they agree (up
// to a minute), records the last poll in h and returns the index.
func (r *Run) settle(h *History) uint64 {
	deadline := time.Now().Add(time.Minute)
	for {
		h.Nodes = h.Nodes[:0]
		agree := true
		for _, n := range r.c.Nodes {
			st, err := n.Status()
			if err != nil {
				agree = false
				h.Nodes = append(h.Nodes, NodeFinal{ID: n.ID, Hash: "unreachable: " + err.Error()})
				continue
			}
			h.Nodes = append(h.Nodes, NodeFinal{ID: n.ID, Index: st.AppliedIndex, Hash: st.StateHash})
			if f := h.Nodes[0]; st.AppliedIndex != f.Index || st.StateHash != f.Hash {
				agree = false
			}
		}
		if agree || time.Now().After(deadline) {
			return h.Nodes[0].Index
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// report summarises a run: faults by kind, failovers, operations by
// kind and outcome, jobs, requeues and fenced writes.
func (r *Run) report(h *History, fenced float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos run: seed %d, %d nodes, %d workers, %s of faults, partitions %v\n", r.cfg.Seed, r.cfg.Nodes, len(r.c.Workers), r.cfg.Duration, r.net != nil)
	kinds := map[string]int{}
	var failovers []string
	for _, f := range r.faults {
		kinds[f.Kind]++
		if f.Failover > 0 {
			failovers = append(failovers, fmt.Sprintf("%s %s: %s", f.Kind, f.Target, f.Failover.Round(time.Millisecond)))
		}
	}
	fmt.Fprintf(&b, "faults: %d %s\n", len(r.faults), countLine(kinds))
	fmt.Fprintf(&b, "failovers (fault to next committed dispatch): %s\n", strings.Join(failovers, "; "))
	ops := map[string]int{}
	for _, o := range h.Ops {
		outcome := "acked"
		if !o.Acked() {
			outcome = "not-acked"
		}
		ops[o.Kind+"/"+outcome]++
		if o.Tries > 1 {
			ops[o.Kind+"/retried"]++
		}
	}
	fmt.Fprintf(&b, "operations: %s\n", countLine(ops))
	facts := map[string]int{}
	for _, f := range h.Audit {
		facts[f.Kind]++
	}
	requeued := 0
	seen := map[uint64]bool{}
	for _, e := range h.Events {
		if e.Kind == "requeued" && !seen[e.Seq] {
			requeued++
		}
		seen[e.Seq] = true
	}
	fmt.Fprintf(&b, "log: %d entries, %d jobs, %d dispatches, %d accepted finishes, %d terminal, %d redriven; requeues seen %d; fenced writes rejected %.0f; attempts run %d; watch events %d\n",
		facts["entry"], facts["job"], facts["dispatch"], facts["finish"], facts["terminal"], facts["redrive"], requeued, fenced, len(h.Attempts), len(h.Events))
	classes := map[string]int{}
	for _, f := range h.Audit {
		if f.Kind == "dispatch" {
			k := classOf(f)
			if f.Deadline {
				k += ":deadline"
				if f.DeadlineMissed {
					classes["deadline-missed"]++
				}
			}
			classes[k]++
		}
	}
	fmt.Fprintf(&b, "dispatches by class: %s\n", countLine(classes))
	pools := map[string]int{}
	for _, f := range h.Audit {
		if f.Kind == "dispatch" {
			switch {
			case f.Pool == "":
				pools["default"]++
			case f.Subscribed && f.PoolRunning == f.Burst:
				pools[f.Pool+"-at-burst"]++
			default:
				pools[f.Pool]++
			}
		}
	}
	fmt.Fprintf(&b, "dispatches by pool (at-burst: the dispatch filled its tenant's subscription): %s\n", countLine(pools))
	groups := map[string]int{}
	for _, f := range h.Audit {
		if f.Kind == "dispatch" {
			switch {
			case f.Group == "":
				groups["unnamed"]++
			case f.GroupCap > 0 && f.GroupRunning == f.GroupCap:
				groups["named-at-cap"]++
			case f.GroupCap > 0:
				groups["named-capped"]++
			default:
				groups["named-uncapped"]++
			}
		}
	}
	fmt.Fprintf(&b, "dispatches by group (at-cap: the dispatch filled its group's cap): %s\n", countLine(groups))
	// Delays: how late releases came after their due time (cluster time),
	// and how many jobs expired.
	var late []int64
	expired := 0
	for _, f := range h.Audit {
		switch {
		case f.Kind == "release" && !f.Forced:
			late = append(late, f.At-f.DueAt)
		case f.Kind == "terminal" && f.State == "expired":
			expired++
		}
	}
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	if n := len(late); n > 0 {
		fmt.Fprintf(&b, "delays: %d scheduled, %d released (lateness p50 %d ms, max %d ms of cluster time), %d expired\n",
			facts["scheduled"], n, late[n/2], late[n-1], expired)
	}
	fmt.Fprintf(&b, "levers: %s\n", leverLine(h))
	return b.String()
}

func countLine(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// scrapeSum adds every sample of a metric on a node's /metrics.
func scrapeSum(addr, name string) float64 {
	m, _ := cluster.Scrape("http://" + addr + "/metrics")
	sum := 0.0
	for k, v := range m {
		if cluster.Series(k, name) {
			sum += v
		}
	}
	return sum
}
