package main

// The bench command and its harness: the scenario list, local clusters,
// tenants, preloading, the client load driver and in-process workers.

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
	"github.com/baristahq/barista/worker"
)

type benchOpts struct {
	quick   bool
	json    bool
	dir     string
	pprof   bool
	profile string
	only    string // dispatch: the variants to run, by name, comma-separated
	repeat  int    // dispatch: how many times to run them, in turns
}

// benchResult is one measured variant of a scenario.
type benchResult struct {
	Scenario string         `json:"scenario"`
	Variant  string         `json:"variant,omitempty"`
	OpsPerS  float64        `json:"ops_per_s,omitempty"`
	P50Ms    float64        `json:"p50_ms,omitempty"`
	P99Ms    float64        `json:"p99_ms,omitempty"`
	P999Ms   float64        `json:"p999_ms,omitempty"`
	Params   map[string]any `json:"params"`
	Results  map[string]any `json:"results,omitempty"`
}

type benchScenario struct {
	name string
	help string
	run  func(ctx context.Context, o *benchOpts) ([]benchResult, error)
}

var benchScenarios = []benchScenario{
	{"submit", "single submits from 1, 64 and 256 concurrent clients, through the leader and through a follower; and the read floor (GetJob, no Raft) at 256", benchSubmit},
	{"submit-batch", "SubmitBatch with batches of 100 from 16 clients", benchSubmitBatch},
	{"dispatch", "1,000 in-process workers (real gRPC streams) running 0-second jobs, with 100 tenants in one pool and in four, and 10,000 in one; 100 tenants with half their jobs using one unit of one of 3 resources of capacity 1,000,000 (none binds); 100 tenants' function jobs of 10 kinds, each worker running 2 or 3 of them; then, at 100 tenants, jobs of 125-375 ms (at most 4,000 dispatches/s asked for: the latency below saturation) and, in one pool, of 250-750 ms (at most 2,000/s)", benchDispatch},
	{"slots", "1,000 worker slots as 1,000 workers of one slot (a stream each), 10 of 100 and one of 1,000 (one stream): the leader's gRPC connections and CPU with every slot idle, then 0-second jobs' dispatch rate and latency", benchSlots},
	{"latency", "48 idle in-process workers (16 of each size) and single submits, one at a time, through the leader and through a follower: each job's time from its submit's answer to its Assign at a worker", benchLatency},
	{"failover", "kill -9 the leader of a loaded cluster: time to the next accepted submit and the next dispatch", benchFailover},
	{"snapshot", "persist and restore of a large state (in process), a new follower's catch-up by InstallSnapshot, and a follower killed and started again until it has caught up", benchSnapshot},
	{"memory", "resident bytes per queued job of a server, without a payload and with a 34-byte one", benchMemory},
	{"schedules", "100,000 schedules of 1,000 tenants, every minute at the same second: the leader's memory per schedule, its CPU and entries per minute idle between slots (beside the cluster before them), the lateness of one minute's fires and the entries they took, another tenant's submits before and during them, and the snapshot and restore of a state with them", benchSchedules},
	{"clock", "what clock ticks cost: an idle cluster for a minute with clock_tick 1s and 1h (entries, log bytes and server CPU per minute), and one under one client's submits, whose leader commits no tick", benchIdle},
}

func init() {
	var help strings.Builder
	for _, s := range benchScenarios {
		fmt.Fprintf(&help, "  %-13s %s\n", s.name, s.help)
	}
	register("bench", typed(&spec[benchOpts]{
		synopsis: "Measure throughput, latency, failover and snapshots on a local cluster",
		usage:    "SCENARIO... | all [--quick] [--json] [--profile DIR] [--only VARIANT,...] [--repeat N]",
		help: "Starts a cluster of server processes on loopback (fsync on) and drives it from\n" +
			"this process; prints a table per scenario, or with --json one object per\n" +
			"measured variant (scenario, ops_per_s, p50_ms, p99_ms, p999_ms, params,\n" +
			"results). --quick makes every scenario finish in about 30 s; without it\n" +
			"the sizes of BENCHMARKS.md are used (1,000,000 jobs, 100,000 tenants).\n\n" +
			"To compare two variants of dispatch on a noisy machine, run them in turns\n" +
			"and read the medians printed at the end, e.g.\n" +
			"  barista bench dispatch --quick --only dispatch-100,dispatch-100-resources-3 --repeat 5\n\n" +
			"Scenarios:\n" + help.String(),
		flags: func(fs *flag.FlagSet, o *benchOpts) {
			fs.BoolVar(&o.quick, "quick", false, "small sizes and short runs (about 30 s per scenario)")
			fs.BoolVar(&o.json, "json", false, "print one JSON object per result")
			fs.StringVar(&o.dir, "dir", "", "keep the clusters' data and logs under `DIR` (default: a temporary directory)")
			fs.BoolVar(&o.pprof, "pprof", false, "start the servers with --pprof")
			fs.StringVar(&o.profile, "profile", "", "write CPU profiles of every server and of this process for each measured variant to `DIR` (implies --pprof)")
			fs.StringVar(&o.only, "only", "", "dispatch: run only these variants (`NAMES`, comma-separated: "+strings.Join(dispatchVariantNames(), ", ")+"); no paced phase unless named")
			fs.IntVar(&o.repeat, "repeat", 1, "dispatch: run the variants `N` times, in turns, and print each one's medians")
		},
		run: runBench,
	}))
}

func runBench(env *cmdEnv, opts *benchOpts, args []string) error {
	if opts.profile != "" {
		opts.pprof = true
		if err := os.MkdirAll(opts.profile, 0o755); err != nil {
			return err
		}
	}
	if len(args) == 0 {
		return usageError("name a scenario (or all)")
	}
	if opts.repeat < 1 || opts.repeat > 100 {
		return usageError("--repeat %d: give 1..100", opts.repeat)
	}
	if err := checkDispatchVariants(opts.only); err != nil {
		return usageError("--only: %v", err)
	}
	var todo []benchScenario
	for _, a := range args {
		found := false
		for _, s := range benchScenarios {
			if a == s.name || a == "all" {
				todo = append(todo, s)
				found = true
			}
		}
		if !found {
			return usageError("unknown scenario %q", a)
		}
	}
	for _, s := range todo {
		if s.name != "dispatch" && (opts.only != "" || opts.repeat > 1) {
			return usageError("--only and --repeat are for the dispatch scenario alone (not %s)", s.name)
		}
	}
	if opts.dir == "" {
		d, err := os.MkdirTemp("", "barista-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		opts.dir = d
	}
	ctx := context.Background()
	for _, s := range todo {
		start := time.Now()
		if !opts.json {
			fmt.Fprintf(env.stdout, "== %s: %s\n", s.name, s.help)
		}
		res, err := s.run(ctx, opts)
		if err != nil {
			return fmt.Errorf("bench %s: %w", s.name, err)
		}
		if opts.repeat > 1 {
			res = append(res, benchMedians(res)...)
		}
		for _, r := range res {
			if opts.json {
				printJSON(env.stdout, r)
			} else {
				printBench(env, r)
			}
		}
		if !opts.json {
			fmt.Fprintf(env.stdout, "   (%s)\n\n", time.Since(start).Round(time.Second))
		}
	}
	return nil
}

// benchMedians gives, for each variant measured more than once, a result
// of the medians of its runs: ops/s, p50, p99 and each numeric result.
// Its params are the first run's, with runs set to how many there were.
func benchMedians(res []benchResult) []benchResult {
	var order []string
	by := map[string][]benchResult{}
	for _, r := range res {
		if r.Variant == "" {
			continue
		}
		if _, ok := by[r.Variant]; !ok {
			order = append(order, r.Variant)
		}
		by[r.Variant] = append(by[r.Variant], r)
	}
	var out []benchResult
	for _, v := range order {
		runs := by[v]
		if len(runs) < 2 {
			continue
		}
		med := func(f func(benchResult) (float64, bool)) (float64, bool) {
			var xs []float64
			for _, r := range runs {
				if x, ok := f(r); ok {
					xs = append(xs, x)
				}
			}
			if len(xs) == 0 {
				return 0, false
			}
			sort.Float64s(xs)
			if len(xs)%2 == 1 {
				return xs[len(xs)/2], true
			}
			return round((xs[len(xs)/2-1] + xs[len(xs)/2]) / 2), true
		}
		m := benchResult{Scenario: runs[0].Scenario + "-median", Variant: v, Params: map[string]any{"runs": len(runs)}, Results: map[string]any{}}
		for k, x := range runs[0].Params {
			m.Params[k] = x
		}
		m.OpsPerS, _ = med(func(r benchResult) (float64, bool) { return r.OpsPerS, true })
		m.P50Ms, _ = med(func(r benchResult) (float64, bool) { return r.P50Ms, true })
		m.P99Ms, _ = med(func(r benchResult) (float64, bool) { return r.P99Ms, true })
		for k, x := range runs[0].Results {
			if _, ok := x.(float64); !ok {
				continue
			}
			if x, ok := med(func(r benchResult) (float64, bool) { f, ok := r.Results[k].(float64); return f, ok }); ok {
				m.Results[k] = x
			}
		}
		out = append(out, m)
	}
	return out
}

func printBench(env *cmdEnv, r benchResult) {
	var params []string
	for k, v := range r.Params {
		params = append(params, fmt.Sprintf("%s=%v", k, v))
	}
	sort.Strings(params)
	if r.Variant != "" {
		params = append([]string{r.Variant}, params...)
	}
	line := fmt.Sprintf("   %-40s", strings.Join(params, " "))
	if r.OpsPerS > 0 {
		line += fmt.Sprintf(" %10.0f ops/s", r.OpsPerS)
	}
	if r.P50Ms > 0 {
		line += fmt.Sprintf("  p50 %7.2f ms", r.P50Ms)
	}
	if r.P99Ms > 0 {
		line += fmt.Sprintf("  p99 %7.2f ms", r.P99Ms)
	}
	if r.P999Ms > 0 {
		line += fmt.Sprintf("  p999 %7.2f ms", r.P999Ms)
	}
	var extra []string
	for k, v := range r.Results {
		extra = append(extra, fmt.Sprintf("%s=%v", k, v))
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		line += "  " + strings.Join(extra, " ")
	}
	fmt.Fprintln(env.stdout, line)
}

// benchCluster starts a fresh cluster for one measurement.
func benchCluster(ctx context.Context, o *benchOpts, name string, n int, extra ...string) (*localCluster, error) {
	dir, err := os.MkdirTemp(o.dir, name+"-")
	if err != nil {
		return nil, err
	}
	if o.pprof {
		extra = append(extra, "--pprof")
	}
	lc, err := newLocalCluster(dir, n, extra...)
	if err != nil {
		return nil, err
	}
	if err := lc.start(ctx); err != nil {
		lc.stop()
		return nil, fmt.Errorf("%w (logs in %s)", err, dir)
	}
	return lc, nil
}

// benchLeader starts a cluster of n nodes with tenants and returns it, its
// leader and a connection to the leader.
func benchLeader(ctx context.Context, o *benchOpts, name string, n, tenants int, extra ...string) (*localCluster, int, *grpc.ClientConn, error) {
	lc, err := benchCluster(ctx, o, name, n, extra...)
	if err != nil {
		return nil, 0, nil, err
	}
	leader, err := lc.leader(ctx)
	if err != nil {
		lc.stop()
		return nil, 0, nil, err
	}
	cc, err := lc.dial(leader)
	if err == nil {
		err = setupTenants(ctx, cc, tenants)
	}
	if err != nil {
		lc.stop()
		return nil, 0, nil, err
	}
	return lc, leader, cc, nil
}

// setupTenants creates count tenants (tiers cycling), 1000 per entry.
// Each may queue benchMaxQueued jobs: the scenarios measure throughput,
// and one tenant takes every submit of the submit scenario, more than
// the cluster's default_max_queued.
func setupTenants(ctx context.Context, cc *grpc.ClientConn, count int) error {
	for i := 0; i < count; i += 1000 {
		var cmds []*clusterpb.Command
		for j := i; j < min(i+1000, count); j++ {
			cmds = append(cmds, &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: benchTenant(j), Tier: fsm.TierToPB(sfq.Tier(j % 5)),
				Caps: &pb.Caps{MaxQueued: benchMaxQueued}}}})
		}
		if _, err := clusterpb.NewNodeClient(cc).Apply(ctx, &clusterpb.ApplyRequest{Commands: cmds}); err != nil {
			return err
		}
	}
	return nil
}

// benchMaxQueued is every bench tenant's max_queued.
const benchMaxQueued = 100_000_000

func benchTenant(i int) string { return fmt.Sprintf("tenant-%05d", i) }

var benchPayload = []byte(`{"argv":["render","--frame","42"]}`)

// preload queues jobs over tenants with SubmitBatch, from 4 clients,
// each with benchPayload.
func preload(ctx context.Context, cc *grpc.ClientConn, tenants, jobs int) error {
	return preloadWith(ctx, cc, tenants, jobs, benchPayload)
}

// preloadWith is preload with the payload of every job; with pools, job j
// goes to pools[j % len(pools)].
func preloadWith(ctx context.Context, cc *grpc.ClientConn, tenants, jobs int, payload []byte, pools ...string) error {
	return preloadShaped(ctx, cc, tenants, jobs, payload, nil, pools...)
}

// preloadShaped is preloadWith with shape, when not nil, setting what
// else job j of the preload is (its kind and form).
func preloadShaped(ctx context.Context, cc *grpc.ClientConn, tenants, jobs int, payload []byte, shape func(j int, r *pb.SubmitRequest), pools ...string) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := pb.NewClientClient(cc)
			for {
				start := int(next.Add(1000)) - 1000
				if start >= jobs {
					return
				}
				req := &pb.SubmitBatchRequest{}
				for j := start; j < min(start+1000, jobs); j++ {
					pool := ""
					if len(pools) > 0 {
						pool = pools[j%len(pools)]
					}
					r := &pb.SubmitRequest{Tenant: benchTenant(j % tenants), Size: pb.Size_SM, EstCostMs: int64(100 + j%10*100), Payload: payload, Pool: pool}
					if shape != nil {
						shape(j, r)
					}
					req.Jobs = append(req.Jobs, r)
				}
				resp, err := client.SubmitBatch(ctx, req)
				if err == nil {
					for _, r := range resp.Results {
						if r.Error != "" {
							err = fmt.Errorf("preload: %s", r.Error)
							break
						}
					}
				}
				if err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

// drive runs clients goroutines calling op in a loop for d over conns
// (round robin) and returns the successful calls, the time they took and
// their latencies; the calls that failed are counted in failed, and the
// first failure is kept.
func drive(conns []*grpc.ClientConn, clients int, d time.Duration, op func(cc *grpc.ClientConn, w, i int) error) (driven, *latencies) {
	var lat latencies
	var n, failed atomic.Int64
	var first atomic.Pointer[error]
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cc := conns[w%len(conns)]
			// Each client makes one call at least, however late it starts.
			for i := 0; i == 0 || time.Now().Before(deadline); i++ {
				t := time.Now()
				if err := op(cc, w, i); err != nil {
					failed.Add(1)
					first.CompareAndSwap(nil, &err)
					continue
				}
				lat.add(time.Since(t))
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	r := driven{calls: n.Load(), elapsed: time.Since(start), failed: failed.Load()}
	if e := first.Load(); e != nil {
		r.firstErr = *e
	}
	return r, &lat
}

// driven is what drive measured.
type driven struct {
	calls, failed int64
	elapsed       time.Duration
	firstErr      error
}

// check fails a measured variant whose calls failed: a figure of
// refused calls is no figure.
func (r driven) check(what string) error {
	if r.failed == 0 {
		return nil
	}
	return fmt.Errorf("%s: %d of %d calls failed, the first with: %v", what, r.failed, r.failed+r.calls, r.firstErr)
}

// fakeWorkers starts n in-process workers whose jobs end at once.
func fakeWorkers(ctx context.Context, servers string, n int, observe func(worker.Observation), plan func(*pb.Assign) worker.FakeSpec, pools ...string) *sync.WaitGroup {
	return fakeFleet(ctx, servers, n, func(int) pb.Size { return pb.Size_SM }, observe, plan, pools...)
}

// fakeFleet is fakeWorkers with worker i of size size(i).
func fakeFleet(ctx context.Context, servers string, n int, size func(int) pb.Size, observe func(worker.Observation), plan func(*pb.Assign) worker.FakeSpec, pools ...string) *sync.WaitGroup {
	return fakeFleetOf(ctx, servers, n, size, nil, observe, plan, pools...)
}

// declaring is a fake runner that says it runs the kinds it has (SPEC §3
// "Kinds"): its worker is given jobs of those kinds only.
type declaring struct {
	worker.FakeRunner
	kinds []string
}

func (d declaring) Declares() (bool, []string) { return false, d.kinds }

// fakeFleetOf is fakeFleet with worker i running the kinds kinds(i)
// (kinds nil, or no kinds: every job).
func fakeFleetOf(ctx context.Context, servers string, n int, size func(int) pb.Size, kinds func(int) []string, observe func(worker.Observation), plan func(*pb.Assign) worker.FakeSpec, pools ...string) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := range n {
		pool := ""
		if len(pools) > 0 {
			pool = pools[i%len(pools)]
		}
		var runner worker.Runner = worker.FakeRunner{Plan: plan}
		if kinds != nil {
			if k := kinds(i); len(k) > 0 {
				runner = declaring{worker.FakeRunner{Plan: plan}, k}
			}
		}
		a, err := worker.New(worker.Config{ID: fmt.Sprintf("bench-%04d", i), Size: worker.Size(strings.ToLower(size(i).String())), Pool: pool, Servers: strings.Split(servers, ","), Logger: slog.New(slog.DiscardHandler),
			Dial: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, Runner: runner, Observer: observe})
		if err != nil {
			panic(err) // fixed, valid arguments
		}
		wg.Add(1)
		go func() { defer wg.Done(); a.Run(ctx) }()
	}
	return &wg
}
