package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/proc"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
	"github.com/baristahq/barista/snapshot"
	"github.com/baristahq/barista/web"
	"github.com/baristahq/barista/worker"
)

type benchOpts struct {
	quick   bool
	json    bool
	dir     string
	pprof   bool
	profile string
}

// benchResult is one measured variant of a scenario.
type benchResult struct {
	Scenario string         `json:"scenario"`
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
	{"dispatch", "1,000 in-process workers (real gRPC streams) running 0-second jobs, with 100 tenants in one pool and in four, and 10,000 in one; then, at 100 tenants, jobs of 125-375 ms (at most 4,000 dispatches/s asked for: the latency below saturation) and, in one pool, of 250-750 ms (at most 2,000/s)", benchDispatch},
	{"latency", "48 idle in-process workers (16 of each size) and single submits, one at a time, through the leader and through a follower: each job's time from its submit's answer to its Assign at a worker", benchLatency},
	{"failover", "kill -9 the leader of a loaded cluster: time to the next accepted submit and the next dispatch", benchFailover},
	{"snapshot", "persist and restore of a large state (in process), a new follower's catch-up by InstallSnapshot, and a follower killed and started again until it has caught up", benchSnapshot},
	{"memory", "resident bytes per queued job of a server, without a payload and with a 34-byte one", benchMemory},
}

func init() {
	var help strings.Builder
	for _, s := range benchScenarios {
		fmt.Fprintf(&help, "  %-13s %s\n", s.name, s.help)
	}
	register("bench", typed(&spec[benchOpts]{
		synopsis: "Measure throughput, latency, failover and snapshots on a local cluster",
		usage:    "SCENARIO... | all [--quick] [--json] [--profile DIR]",
		help: "Starts a cluster of server processes on loopback (fsync on) and drives it from\n" +
			"this process; prints a table per scenario, or with --json one object per\n" +
			"measured variant (scenario, ops_per_s, p50_ms, p99_ms, p999_ms, params,\n" +
			"results). --quick makes every scenario finish in about 30 s; without it\n" +
			"the sizes of BENCHMARKS.md are used (1,000,000 jobs, 100,000 tenants).\n\nScenarios:\n" + help.String(),
		flags: func(fs *flag.FlagSet, o *benchOpts) {
			fs.BoolVar(&o.quick, "quick", false, "small sizes and short runs (about 30 s per scenario)")
			fs.BoolVar(&o.json, "json", false, "print one JSON object per result")
			fs.StringVar(&o.dir, "dir", "", "keep the clusters' data and logs under `DIR` (default: a temporary directory)")
			fs.BoolVar(&o.pprof, "pprof", false, "start the servers with --pprof")
			fs.StringVar(&o.profile, "profile", "", "write CPU profiles of every server and of this process for each measured variant to `DIR` (implies --pprof)")
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

func printBench(env *cmdEnv, r benchResult) {
	var params []string
	for k, v := range r.Params {
		params = append(params, fmt.Sprintf("%s=%v", k, v))
	}
	sort.Strings(params)
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

// latencies collects durations from many goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) { l.mu.Lock(); l.d = append(l.d, d); l.mu.Unlock() }

func (l *latencies) reset() { l.mu.Lock(); l.d = l.d[:0]; l.mu.Unlock() }

func (l *latencies) pct(q float64) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	sort.Slice(l.d, func(i, j int) bool { return l.d[i] < l.d[j] })
	return float64(l.d[int(q*float64(len(l.d)-1))].Microseconds()) / 1000
}

// profileWindow records CPU profiles of every server (name.nX.pprof,
// the target node marked) and of this process (name.bench.pprof) for d,
// when --profile is set; call the returned function before reading them.
func profileWindow(o *benchOpts, lc *localCluster, target int, name string, d time.Duration) func() {
	if o.profile == "" {
		return func() {}
	}
	var wg sync.WaitGroup
	for i, n := range lc.nodes {
		file := name + "." + n.id
		if i == target {
			file += "-target"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", n.http, max(1, int(d.Seconds()))))
			if err != nil {
				return
			}
			defer resp.Body.Close()
			if f, err := os.Create(filepath.Join(o.profile, file+".pprof")); err == nil {
				io.Copy(f, resp.Body)
				f.Close()
			}
		}()
	}
	if f, err := os.Create(filepath.Join(o.profile, name+".bench.pprof")); err == nil {
		if pprof.StartCPUProfile(f) == nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(d)
				pprof.StopCPUProfile()
				f.Close()
			}()
		} else {
			f.Close()
		}
	}
	return wg.Wait
}

func round(v float64) float64 { return float64(int64(v*100+0.5)) / 100 }

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
		var cmds []*pb.Command
		for j := i; j < min(i+1000, count); j++ {
			cmds = append(cmds, &pb.Command{Cmd: &pb.Command_TenantUpsert{TenantUpsert: &pb.TenantUpsert{Name: benchTenant(j), Tier: fsm.TierToPB(sfq.Tier(j % 5)),
				Caps: &pb.Caps{MaxQueued: benchMaxQueued}}}})
		}
		if _, err := pb.NewNodeClient(cc).Apply(ctx, &pb.ApplyRequest{Commands: cmds}); err != nil {
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
					req.Jobs = append(req.Jobs, &pb.SubmitRequest{Tenant: benchTenant(j % tenants), Size: pb.Size_SM, EstCostMs: int64(100 + j%10*100), Payload: payload, Pool: pool})
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
			for i := 0; time.Now().Before(deadline); i++ {
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

func benchSubmit(ctx context.Context, o *benchOpts) ([]benchResult, error) {
	lc, leader, cc, err := benchLeader(ctx, o, "submit", 3, 1)
	if err != nil {
		return nil, err
	}
	defer lc.stop()
	defer cc.Close()
	d := 10 * time.Second
	if o.quick {
		d = 3 * time.Second
	}
	var out []benchResult
	var failed error
	run := func(name string, clients, target int, params map[string]any, op func(cc *grpc.ClientConn, w, i int) error) {
		var conns []*grpc.ClientConn
		for range max(1, clients/32) {
			c, _ := lc.dial(target)
			conns = append(conns, c)
		}
		prof := profileWindow(o, lc, target, fmt.Sprintf("%s-%d-%v", name, clients, params["via"]), d-time.Second)
		before := sampleRaft(lc.nodes[leader].http)
		r, lat := drive(conns, clients, d, op)
		if err := r.check(fmt.Sprintf("%s from %d clients via the %v", name, clients, params["via"])); err != nil && failed == nil {
			failed = err
		}
		ops := round(float64(r.calls) / r.elapsed.Seconds())
		results := map[string]any{}
		if name != "read-floor" {
			sampleRaft(lc.nodes[leader].http).since(before, results)
		}
		prof()
		for _, c := range conns {
			c.Close()
		}
		params["clients"], params["nodes"], params["seconds"] = clients, 3, d.Seconds()
		out = append(out, benchResult{Scenario: name, OpsPerS: ops, P50Ms: lat.pct(0.5), P99Ms: lat.pct(0.99), P999Ms: lat.pct(0.999), Params: params, Results: results})
	}
	stamp := time.Now().UnixNano()
	for _, clients := range []int{1, 64, 256} {
		for _, via := range []string{"leader", "follower"} {
			target := leader
			if via == "follower" {
				target = (leader + 1) % len(lc.nodes)
			}
			run("submit", clients, target, map[string]any{"via": via}, func(cc *grpc.ClientConn, w, i int) error {
				key := fmt.Sprintf("%s-%d-%d-%d-%d", via, clients, w, i, stamp)
				_, err := pb.NewClientClient(cc).Submit(ctx, &pb.SubmitRequest{Tenant: benchTenant(0), IdempotencyKey: &key, Size: pb.Size_SM, EstCostMs: 1000, Payload: benchPayload})
				return err
			})
		}
	}
	// The floor: a local read of one job, the same gRPC round trip with no
	// Raft behind it, from as many clients on the same machine.
	run("read-floor", 256, leader, map[string]any{"via": "leader", "rpc": "GetJob"}, func(cc *grpc.ClientConn, w, i int) error {
		_, err := pb.NewClientClient(cc).GetJob(ctx, &pb.GetJobRequest{Tenant: benchTenant(0), JobId: 1})
		return err
	})
	if failed != nil {
		return nil, failed
	}
	// Each submit figure against the floor of the same run.
	if floor := out[len(out)-1].OpsPerS; floor > 0 {
		for _, r := range out[:len(out)-1] {
			r.Results["ratio_to_read_floor"] = round(r.OpsPerS / floor)
		}
	}
	return out, nil
}

func benchSubmitBatch(ctx context.Context, o *benchOpts) ([]benchResult, error) {
	lc, leader, cc, err := benchLeader(ctx, o, "submit-batch", 3, 100)
	if err != nil {
		return nil, err
	}
	defer lc.stop()
	defer cc.Close()
	d := 10 * time.Second
	if o.quick {
		d = 5 * time.Second
	}
	const clients, size = 16, 100
	prof := profileWindow(o, lc, leader, "submit-batch", d-time.Second)
	cpu0 := lc.serverCPU()
	r, lat := drive([]*grpc.ClientConn{cc}, clients, d, func(cc *grpc.ClientConn, w, i int) error {
		req := &pb.SubmitBatchRequest{}
		for j := range size {
			key := fmt.Sprintf("b-%d-%d-%d", w, i, j)
			req.Jobs = append(req.Jobs, &pb.SubmitRequest{Tenant: benchTenant((w*size + j) % 100), IdempotencyKey: &key, Size: pb.Size_SM, EstCostMs: 1000, Payload: benchPayload})
		}
		resp, err := pb.NewClientClient(cc).SubmitBatch(ctx, req)
		if err != nil {
			return err
		}
		for _, item := range resp.Results {
			if item.Error != "" {
				return fmt.Errorf("an item of the batch was refused: %s", item.Error)
			}
		}
		return nil
	})
	if err := r.check("submit-batch"); err != nil {
		return nil, err
	}
	jobs := r.calls * size
	cpu := lc.serverCPU() - cpu0
	prof()
	return []benchResult{{Scenario: "submit-batch", OpsPerS: round(float64(jobs) / r.elapsed.Seconds()), P50Ms: lat.pct(0.5), P99Ms: lat.pct(0.99),
		Params: map[string]any{"clients": clients, "batch": size, "via": "leader", "seconds": d.Seconds()},
		Results: map[string]any{"unit": "jobs/s; latency per batch; cluster CPU (every server, from /proc) per job",
			"cluster_cpu_us_per_job": cpuPer(cpu, jobs)}}}, nil
}

// fakeWorkers starts n in-process workers whose jobs end at once.
func fakeWorkers(ctx context.Context, servers string, n int, observe func(worker.Observation), plan func(*pb.Assign) worker.FakeSpec, pools ...string) *sync.WaitGroup {
	return fakeFleet(ctx, servers, n, func(int) pb.Size { return pb.Size_SM }, observe, plan, pools...)
}

// fakeFleet is fakeWorkers with worker i of size size(i).
func fakeFleet(ctx context.Context, servers string, n int, size func(int) pb.Size, observe func(worker.Observation), plan func(*pb.Assign) worker.FakeSpec, pools ...string) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := range n {
		pool := ""
		if len(pools) > 0 {
			pool = pools[i%len(pools)]
		}
		a, err := worker.New(worker.Config{ID: fmt.Sprintf("bench-%04d", i), Size: size(i), Pool: pool, Servers: strings.Split(servers, ","),
			Dial: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, Runner: worker.FakeRunner{Plan: plan}, Observer: observe})
		if err != nil {
			panic(err) // fixed, valid arguments
		}
		wg.Add(1)
		go func() { defer wg.Done(); a.Run(ctx) }()
	}
	return &wg
}

// pacedJob is how long a job runs on average in the paced phase of bench
// dispatch: 1,000 workers then ask for at most 4,000 dispatches a second,
// below what the cluster does, so Ready→Assign is the dispatcher's
// latency, not a turn of every worker. The lengths are spread evenly from
// half to one and a half times it, by job ID, so that the workers do not
// finish in waves. A second paced point, at 100 tenants in one pool,
// runs jobs twice as long: half that load.
const pacedJob = 250 * time.Millisecond

// pacedLength is the length of job in a paced phase whose jobs run mean
// on average.
func pacedLength(job uint64, mean time.Duration) time.Duration {
	ms := uint64(mean / time.Millisecond)
	return mean/2 + time.Duration(job%ms)*time.Millisecond
}

func benchDispatch(ctx context.Context, o *benchOpts) ([]benchResult, error) {
	jobs, window := 1_000_000, 20*time.Second
	if o.quick {
		jobs, window = 250_000, 8*time.Second
	}
	var out []benchResult
	// The same load over one pool, and over four (default and three
	// created), with the workers and the jobs dealt evenly among them.
	for _, run := range []struct{ tenants, pools int }{{100, 1}, {100, 4}, {10_000, 1}} {
		tenants := run.tenants
		name := fmt.Sprintf("dispatch-%d", tenants)
		var pools []string
		if run.pools > 1 {
			name += fmt.Sprintf("-pools-%d", run.pools)
			pools = append(pools, sfq.DefaultPoolName)
			for i := 1; i < run.pools; i++ {
				pools = append(pools, fmt.Sprintf("bench-%d", i))
			}
		}
		lc, leader, cc, err := benchLeader(ctx, o, name, 3, tenants)
		if err != nil {
			return nil, err
		}
		for _, p := range pools[min(1, len(pools)):] {
			if _, err := pb.NewAdminClient(cc).PoolSet(ctx, &pb.PoolSetRequest{Name: p}); err != nil {
				lc.stop()
				return nil, fmt.Errorf("pool %s: %w", p, err)
			}
		}
		t0 := time.Now()
		if err := preloadWith(ctx, cc, tenants, jobs, benchPayload, pools...); err != nil {
			return nil, err
		}
		loaded := time.Since(t0)
		var measuring atomic.Bool
		var assigned atomic.Int64
		var lat latencies
		observe := func(ob worker.Observation) {
			if ob.Kind == "assigned" && measuring.Load() {
				assigned.Add(1)
				lat.add(ob.Wait)
			}
		}
		var paced atomic.Int64 // the mean length of a job, or 0: no time
		plan := func(a *pb.Assign) worker.FakeSpec {
			var d time.Duration
			if mean := time.Duration(paced.Load()); mean > 0 {
				d = pacedLength(a.Job, mean)
			}
			return worker.FakeSpec{Duration: d, CPU: max(d, time.Duration(a.EstCostMs)*time.Millisecond)}
		}
		wctx, stop := context.WithCancel(ctx)
		wg := fakeWorkers(wctx, lc.servers(), 1000, observe, plan, pools...)
		time.Sleep(3 * time.Second) // connect and warm up
		// measure runs one window, with jobs of length on average (or of
		// no time).
		measure := func(length time.Duration, name string) benchResult {
			paced.Store(int64(length))
			if length > 0 {
				time.Sleep(2 * time.Second) // every worker on the new lengths
			}
			assigned.Store(0)
			lat.reset()
			measuring.Store(true)
			prof := profileWindow(o, lc, leader, name, window-time.Second)
			before, stages := sampleRaft(lc.nodes[leader].http), sampleStages(lc.nodes[leader].http)
			cpu0 := lc.serverCPU()
			start := time.Now()
			time.Sleep(window)
			measuring.Store(false)
			elapsed := time.Since(start)
			cpu := lc.serverCPU() - cpu0
			results := map[string]any{"unit": "dispatches/s; latency from the worker's Ready (or the Finished that carries it) to its Assign", "preload_jobs_per_s": round(float64(jobs) / loaded.Seconds()),
				"cluster_cpu_us_per_dispatch": cpuPer(cpu, assigned.Load())}
			sampleRaft(lc.nodes[leader].http).since(before, results)
			sampleStages(lc.nodes[leader].http).since(stages, results)
			prof()
			return benchResult{Scenario: "dispatch", OpsPerS: round(float64(assigned.Load()) / elapsed.Seconds()), P50Ms: lat.pct(0.5), P99Ms: lat.pct(0.99),
				Params: map[string]any{"workers": 1000, "tenants": tenants, "pools": max(1, len(pools)), "queued": jobs, "seconds": window.Seconds(), "job_ms": length.Milliseconds()}, Results: results}
		}
		out = append(out, measure(0, name))
		if tenants == 100 {
			lengths := []time.Duration{pacedJob}
			if len(pools) == 0 {
				lengths = append(lengths, 2*pacedJob)
			}
			for _, length := range lengths {
				r := measure(length, fmt.Sprintf("%s-paced-%dms", name, length.Milliseconds()))
				r.Results["offered_at_most_per_s"] = round(1000 / length.Seconds())
				out = append(out, r)
			}
		}
		stop()
		wg.Wait()
		cc.Close()
		lc.stop()
	}
	return out, nil
}

// assignTimes keeps when each job's Assign reached a worker, for one
// waiter at a time.
type assignTimes struct {
	mu   sync.Mutex
	at   map[uint64]time.Time
	wake chan struct{}
}

func (a *assignTimes) observe(ob worker.Observation) {
	if ob.Kind != "assigned" {
		return
	}
	a.mu.Lock()
	a.at[ob.Job] = ob.At
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// wait returns when job's Assign reached a worker, waiting at most d.
func (a *assignTimes) wait(job uint64, d time.Duration) (time.Time, error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		a.mu.Lock()
		at, ok := a.at[job]
		delete(a.at, job)
		a.mu.Unlock()
		if ok {
			return at, nil
		}
		select {
		case <-a.wake:
		case <-timer.C:
			return time.Time{}, fmt.Errorf("job %d: no worker was assigned it within %s", job, d)
		}
	}
}

// benchLatency measures, at a low load where nothing queues, each job's
// time from its submit's answer to its Assign at a worker: the two Raft
// commits (the submit's, then the dispatch's) and the hops between.
func benchLatency(ctx context.Context, o *benchOpts) ([]benchResult, error) {
	jobs, interval := 1000, 20*time.Millisecond
	if o.quick {
		jobs = 300
	}
	const tenants = 10
	lc, leader, cc, err := benchLeader(ctx, o, "latency", 3, tenants)
	if err != nil {
		return nil, err
	}
	defer lc.stop()
	defer cc.Close()
	assigned := &assignTimes{at: map[uint64]time.Time{}, wake: make(chan struct{}, 1)}
	sizes := []pb.Size{pb.Size_SM, pb.Size_MD, pb.Size_LG}
	wctx, stop := context.WithCancel(ctx)
	wg := fakeFleet(wctx, lc.servers(), 16*len(sizes), func(i int) pb.Size { return sizes[i%len(sizes)] }, assigned.observe,
		func(*pb.Assign) worker.FakeSpec { return worker.FakeSpec{} })
	defer func() { stop(); wg.Wait() }()
	time.Sleep(3 * time.Second) // connect and warm up
	var out []benchResult
	for _, via := range []string{"leader", "follower"} {
		node := leader
		if via == "follower" {
			node = (leader + 1) % len(lc.nodes)
		}
		vc, err := lc.dial(node)
		if err != nil {
			return nil, err
		}
		client := pb.NewClientClient(vc)
		var lat latencies
		var stages stageStats
		for j := range jobs + jobs/10 { // the first tenth warms up
			time.Sleep(interval)
			resp, err := client.Submit(ctx, &pb.SubmitRequest{Tenant: benchTenant(j % tenants), Size: sizes[j%len(sizes)], EstCostMs: 100, Payload: benchPayload})
			if err != nil {
				vc.Close()
				return nil, fmt.Errorf("latency via the %s: %w", via, err)
			}
			acked := time.Now()
			at, err := assigned.wait(resp.JobId, 10*time.Second)
			if err != nil {
				vc.Close()
				return nil, fmt.Errorf("latency via the %s: %w", via, err)
			}
			if j == jobs/10 {
				stages = sampleStages(lc.nodes[leader].http)
			}
			if j >= jobs/10 {
				lat.add(max(0, at.Sub(acked)))
			}
		}
		vc.Close()
		results := map[string]any{"unit": "ms from the submit's answer to the Assign's arrival at a worker"}
		sampleStages(lc.nodes[leader].http).since(stages, results)
		out = append(out, benchResult{Scenario: "latency", P50Ms: lat.pct(0.5), P99Ms: lat.pct(0.99), P999Ms: lat.pct(0.999),
			Params:  map[string]any{"via": via, "workers": 16 * len(sizes), "jobs": jobs, "interval_ms": interval.Milliseconds()},
			Results: results})
	}
	return out, nil
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func benchFailover(ctx context.Context, o *benchOpts) ([]benchResult, error) {
	reps := 5
	if o.quick {
		reps = 3
	}
	lc, _, cc, err := benchLeader(ctx, o, "failover", 3, 10)
	if err != nil {
		return nil, err
	}
	defer lc.stop()
	if err := preload(ctx, cc, 10, 20_000); err != nil {
		return nil, err
	}
	cc.Close()
	// Only an assignment whose Ready was sent after the kill counts.
	var lastAssigned atomic.Pointer[[2]time.Time] // ready sent, assigned
	observe := func(ob worker.Observation) {
		if ob.Kind == "assigned" {
			lastAssigned.Store(&[2]time.Time{ob.At.Add(-ob.Wait), ob.At})
		}
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	fakeWorkers(wctx, lc.servers(), 50, observe, func(*pb.Assign) worker.FakeSpec {
		return worker.FakeSpec{Duration: 20 * time.Millisecond, CPU: 20 * time.Millisecond}
	})
	// A prober submits every 5 ms to every live node, recording successes.
	// Only a submit sent after the kill counts: an answer in flight from
	// the old leader says nothing of the failover.
	var lastAccepted atomic.Pointer[[2]time.Time] // sent, acknowledged
	var conns []*grpc.ClientConn
	for i := range lc.nodes {
		c, _ := lc.dial(i)
		conns = append(conns, c)
		defer c.Close()
	}
	for i := range conns {
		go func() {
			client := pb.NewClientClient(conns[i])
			for k := 0; wctx.Err() == nil; k++ {
				sctx, cancel := context.WithTimeout(wctx, 10*time.Second)
				sent := time.Now()
				_, err := client.Submit(sctx, &pb.SubmitRequest{Tenant: benchTenant(0), Size: pb.Size_SM, EstCostMs: 10, Payload: benchPayload})
				cancel()
				if err == nil {
					lastAccepted.Store(&[2]time.Time{sent, time.Now()})
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	var toSubmit, toDispatch []time.Duration
	for range reps {
		time.Sleep(2 * time.Second)
		victim, err := lc.leader(ctx)
		if err != nil {
			return nil, err
		}
		killed := time.Now()
		lc.kill(victim)
		var sub, disp time.Duration
		for sub == 0 || disp == 0 {
			if time.Since(killed) > 30*time.Second {
				return nil, fmt.Errorf("no recovery within 30 s of the leader kill")
			}
			if a := lastAccepted.Load(); sub == 0 && a != nil && a[0].After(killed) {
				sub = a[1].Sub(killed)
			}
			if a := lastAssigned.Load(); disp == 0 && a != nil && a[0].After(killed) {
				disp = a[1].Sub(killed)
			}
			time.Sleep(5 * time.Millisecond)
		}
		toSubmit, toDispatch = append(toSubmit, sub), append(toDispatch, disp)
		if err := lc.startNode(victim); err != nil {
			return nil, err
		}
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err = lc.waitCaughtUp(cctx, victim)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("the restarted node did not catch up: %w", err)
		}
	}
	maxOf := func(d []time.Duration) time.Duration {
		m := d[0]
		for _, x := range d {
			m = max(m, x)
		}
		return m
	}
	ms := func(d time.Duration) float64 { return round(float64(d.Microseconds()) / 1000) }
	return []benchResult{{Scenario: "failover", P50Ms: ms(median(toSubmit)),
		Params: map[string]any{"repetitions": reps, "nodes": 3, "raft_timeouts": "500ms"},
		Results: map[string]any{
			"submit_median_ms": ms(median(toSubmit)), "submit_max_ms": ms(maxOf(toSubmit)),
			"dispatch_median_ms": ms(median(toDispatch)), "dispatch_max_ms": ms(maxOf(toDispatch)),
		}}}, nil
}

// rss is a process's resident set size in bytes.
func rss(pid int) int64 { return procStatus(pid, "VmRSS") }

// clockTick is the unit of /proc/PID/stat's CPU times (USER_HZ, 100 on
// Linux).
const clockTick = 10 * time.Millisecond

// serverCPU is the CPU time (user and system) every server of lc has
// used so far, read from /proc/PID/stat: the cluster's CPU, without the
// load generator's.
func (lc *localCluster) serverCPU() time.Duration {
	var total time.Duration
	for _, n := range lc.nodes {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n.PID()))
		if err != nil {
			continue
		}
		// The fields after the command's ")" start at field 3 (state);
		// utime and stime are fields 14 and 15.
		_, rest, ok := strings.Cut(string(b), ") ")
		f := strings.Fields(rest)
		if !ok || len(f) < 13 {
			continue
		}
		user, _ := strconv.ParseInt(f[11], 10, 64)
		sys, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(user+sys) * clockTick
	}
	return total
}

// cpuPer is CPU time per operation, in µs.
func cpuPer(cpu time.Duration, ops int64) float64 {
	if ops == 0 {
		return 0
	}
	return round(float64(cpu.Microseconds()) / float64(ops))
}

// procStatus reads a kB field of /proc/PID/status, in bytes (0 if absent).
func procStatus(pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func benchSnapshot(ctx context.Context, o *benchOpts) ([]benchResult, error) {
	tenants, jobs := 100_000, 1_000_000
	if o.quick {
		tenants, jobs = 20_000, 200_000
	}
	f := fsm.NewLatest()
	var idx uint64
	apply := func(cmds []*pb.Command) {
		idx++
		f.ApplyEnvelope(idx, &pb.Envelope{Version: fsm.Version, StampMs: int64(idx), Commands: cmds})
	}
	var cmds []*pb.Command
	for i := range tenants {
		cmds = append(cmds, &pb.Command{Cmd: &pb.Command_TenantUpsert{TenantUpsert: &pb.TenantUpsert{Name: benchTenant(i), Tier: fsm.TierToPB(sfq.Tier(i % 5))}}})
		if len(cmds) == 1000 {
			apply(cmds)
			cmds = nil
		}
	}
	for j := range jobs {
		cmds = append(cmds, &pb.Command{Cmd: &pb.Command_Submit{Submit: &pb.SubmitJob{Tenant: benchTenant(j % tenants), Size: pb.Size_SM, EstCostMs: 1000, Payload: benchPayload}}})
		if len(cmds) == 1000 {
			apply(cmds)
			cmds = nil
		}
	}
	runtime.GC()
	base := rss(os.Getpid())
	path := o.dir + "/bench.snap"
	t := time.Now()
	v, err := f.Freeze()
	if err != nil {
		return nil, err
	}
	pause := time.Since(t)
	fh, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	t = time.Now()
	if _, err := snapshot.Write(fh, v); err != nil {
		return nil, err
	}
	fh.Sync()
	fh.Close()
	persist := time.Since(t)
	st, _ := os.Stat(path)
	fh, _ = os.Open(path)
	t = time.Now()
	g := fsm.New()
	if _, err := snapshot.Read(fh, g); err != nil {
		return nil, err
	}
	restore := time.Since(t)
	fh.Close()
	peak := rss(os.Getpid())
	os.Remove(path)
	runtime.KeepAlive(g)
	out := []benchResult{{Scenario: "snapshot",
		Params: map[string]any{"jobs": jobs, "tenants": tenants},
		Results: map[string]any{"freeze_pause_ms": round(float64(pause.Microseconds()) / 1000), "persist_s": round(persist.Seconds()),
			"restore_s": round(restore.Seconds()), "file_mb": round(float64(st.Size()) / 1e6), "rss_before_mb": round(float64(base) / 1e6),
			"rss_after_restore_mb": round(float64(peak) / 1e6)}}}

	// A new follower catches up by InstallSnapshot.
	catch := jobs / 4
	lc, leader, cc, err := benchLeader(ctx, o, "catch-up", 3, tenants/10, "--snapshot-threshold", "16", "--trailing-logs", "8", "--snapshot-interval", "1s")
	if err != nil {
		return nil, err
	}
	defer lc.stop()
	defer cc.Close()
	if err := preload(ctx, cc, tenants/10, catch); err != nil {
		return nil, err
	}
	time.Sleep(3 * time.Second) // let the snapshot happen
	n4, err := freeLocalNode(lc, "n4")
	if err != nil {
		return nil, err
	}
	t = time.Now()
	if err := lc.startNode(n4, "--join", lc.nodes[leader].grpc, "--log-level", "info"); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := lc.waitConverged(cctx, []int{leader, n4}); err != nil {
		return nil, fmt.Errorf("the new follower did not catch up: %w", err)
	}
	took := time.Since(t)
	logText, _ := os.ReadFile(filepath.Join(lc.dir, "n4.log"))
	out = append(out, benchResult{Scenario: "snapshot-catch-up", Params: map[string]any{"jobs": catch, "tenants": tenants / 10},
		Results: map[string]any{"catch_up_s": round(took.Seconds()), "by_install_snapshot": strings.Contains(string(logText), "installed snapshot restored")}})

	// A follower killed and started again: it restores its newest
	// snapshot, replays the log after it, and catches up.
	follower := (leader + 1) % 3
	lc.kill(follower)
	if err := preload(ctx, cc, tenants/10, catch/10); err != nil { // what it missed
		return nil, err
	}
	t = time.Now()
	if err := lc.startNode(follower); err != nil {
		return nil, err
	}
	if err := lc.waitConverged(cctx, []int{leader, follower}); err != nil {
		return nil, fmt.Errorf("the restarted follower did not catch up: %w", err)
	}
	out = append(out, benchResult{Scenario: "snapshot-restart", Params: map[string]any{"jobs": catch + catch/10, "missed_jobs": catch / 10, "tenants": tenants / 10},
		Results: map[string]any{"restart_to_caught_up_s": round(time.Since(t).Seconds())}})
	return out, nil
}

// freeLocalNode adds a node (not started) to the cluster.
func freeLocalNode(lc *localCluster, id string) (int, error) {
	n := &localNode{id: id, dataDir: lc.dir + "/" + id}
	addrs, err := proc.FreeAddrs(3)
	if err != nil {
		return 0, err
	}
	n.grpc, n.raft, n.http = addrs[0], addrs[1], addrs[2]
	n.LogPath = filepath.Join(lc.dir, n.id+".log")
	lc.nodes = append(lc.nodes, n)
	return len(lc.nodes) - 1, nil
}

// scrapeMetrics reads the named unlabelled metrics from one scrape of a
// server's /metrics (0 for a metric it does not find).
func scrapeMetrics(addr string, names ...string) []float64 {
	out := make([]float64, len(names))
	m, _ := web.Scrape(context.Background(), "http://"+addr+"/metrics", "")
	for i, name := range names {
		out[i] = m[name]
	}
	return out
}

// raftStats samples a server's commit counters; since reports the mean
// entry commit time (propose to applied result) and commands per entry
// between two samples.
type raftStats struct {
	at                                         time.Time
	proposeSum, proposeCount, cmdSum, cmdCount float64
}

func sampleRaft(addr string) raftStats {
	m := scrapeMetrics(addr, "barista_raft_propose_seconds_sum", "barista_raft_propose_seconds_count",
		"barista_entry_commands_sum", "barista_entry_commands_count")
	return raftStats{time.Now(), m[0], m[1], m[2], m[3]}
}

func (a raftStats) since(b raftStats, into map[string]any) {
	if n := a.proposeCount - b.proposeCount; n > 0 {
		into["commit_mean_ms"] = round((a.proposeSum - b.proposeSum) / n * 1000)
		into["entries_per_s"] = round(n / a.at.Sub(b.at).Seconds())
	}
	if n := a.cmdCount - b.cmdCount; n > 0 {
		into["cmds_per_entry"] = round((a.cmdSum - b.cmdSum) / n)
	}
}

// stageStats samples a leader's barista_dispatch_stage_seconds: per
// "path/stage", the count, the sum and the cumulative bucket counts by
// upper bound.
type stageStats map[string]*stageHist

type stageHist struct {
	count, sum float64
	buckets    map[float64]float64
}

var stageSeries = regexp.MustCompile(`^barista_dispatch_stage_seconds_(bucket|sum|count)\{path="([a-z]+)",stage="([a-z]+)"(?:,le="([^"]+)")?\}$`)

func sampleStages(addr string) stageStats {
	out := stageStats{}
	m, _ := web.Scrape(context.Background(), "http://"+addr+"/metrics", "")
	for key, v := range m {
		g := stageSeries.FindStringSubmatch(key)
		if g == nil {
			continue
		}
		name := g[2] + "/" + g[3]
		h := out[name]
		if h == nil {
			h = &stageHist{buckets: map[float64]float64{}}
			out[name] = h
		}
		switch g[1] {
		case "count":
			h.count = v
		case "sum":
			h.sum = v
		default:
			if le, err := strconv.ParseFloat(g[4], 64); err == nil {
				h.buckets[le] = v
			}
		}
	}
	return out
}

// since reports, per stage with observations between b and a, their
// count, mean and the bucket bound at or under which 99 % of them fell
// (ms), under into["stages"].
func (a stageStats) since(b stageStats, into map[string]any) {
	stages := map[string]any{}
	for name, h := range a {
		prev := b[name]
		if prev == nil {
			prev = &stageHist{buckets: map[float64]float64{}}
		}
		n := h.count - prev.count
		if n <= 0 {
			continue
		}
		var les []float64
		for le := range h.buckets {
			les = append(les, le)
		}
		sort.Float64s(les)
		p99 := math.Inf(1)
		for _, le := range les {
			if h.buckets[le]-prev.buckets[le] >= 0.99*n {
				p99 = le
				break
			}
		}
		st := map[string]any{"n": n, "mean_ms": round((h.sum - prev.sum) / n * 1000)}
		if !math.IsInf(p99, 1) {
			st["p99_at_most_ms"] = round(p99 * 1000)
		}
		stages[name] = st
	}
	if len(stages) > 0 {
		into["stages"] = stages
	}
}

// benchMemory measures the resident bytes per queued job of a server,
// for jobs without a payload and with benchPayload, each on a cluster of
// its own.
func benchMemory(ctx context.Context, o *benchOpts) ([]benchResult, error) {
	var out []benchResult
	for _, payload := range [][]byte{nil, benchPayload} {
		r, err := benchMemoryOf(ctx, o, payload)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func benchMemoryOf(ctx context.Context, o *benchOpts, payload []byte) (benchResult, error) {
	jobs := 1_000_000
	if o.quick {
		jobs = 200_000
	}
	lc, _, cc, err := benchLeader(ctx, o, "memory", 1, 1000)
	if err != nil {
		return benchResult{}, err
	}
	defer lc.stop()
	defer cc.Close()
	time.Sleep(time.Second)
	pid := lc.nodes[0].PID()
	rss0, heap0 := rss(pid), scrapeMetrics(lc.nodes[0].http, "go_memstats_heap_inuse_bytes")[0]
	anon0 := procStatus(pid, "RssAnon")
	if err := preloadWith(ctx, cc, 1000, jobs, payload); err != nil {
		return benchResult{}, err
	}
	time.Sleep(3 * time.Second)
	rss1, heap1 := rss(pid), scrapeMetrics(lc.nodes[0].http, "go_memstats_heap_inuse_bytes")[0]
	anon1 := procStatus(pid, "RssAnon")
	if o.profile != "" {
		if resp, err := http.Get("http://" + lc.nodes[0].http + "/debug/pprof/heap?gc=1"); err == nil {
			if f, err := os.Create(filepath.Join(o.profile, fmt.Sprintf("memory-payload%d.heap.pprof", len(payload)))); err == nil {
				io.Copy(f, resp.Body)
				f.Close()
			}
			resp.Body.Close()
		}
	}
	return benchResult{Scenario: "memory", Params: map[string]any{"jobs": jobs, "tenants": 1000, "payload_bytes": len(payload)},
		Results: map[string]any{"rss_bytes_per_job": round(float64(rss1-rss0) / float64(jobs)), "heap_bytes_per_job": round((heap1 - heap0) / float64(jobs)),
			"anon_rss_bytes_per_job": round(float64(anon1-anon0) / float64(jobs)),
			"rss_mb":                 round(float64(rss1) / 1e6)}}, nil
}
