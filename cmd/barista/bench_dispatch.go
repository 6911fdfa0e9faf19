package main

// The dispatch scenario of bench.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
	"github.com/baristahq/barista/worker"
)

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
	// The first load again with half its jobs using one unit of one of
	// three resources, each with room for every job (SPEC §3 "Resources":
	// what using resources costs when none binds), run right after it so
	// that the pair sees the same machine. And the first load as function
	// jobs of 10 kinds, each worker running 2 or 3 of them (SPEC §3
	// "Kinds").
	var runs []dispatchVariant
	for _, v := range dispatchVariants {
		if o.only == "" || slices.ContainsFunc(strings.Split(o.only, ","), func(n string) bool { return n == v.name() || strings.HasPrefix(n, v.name()+"-paced-") }) {
			runs = append(runs, v)
		}
	}
	for i := range o.repeat * len(runs) {
		run := runs[i%len(runs)]
		tenants := run.tenants
		name := run.name()
		var pools []string
		if run.pools > 1 {
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
		for i := range run.resources {
			capacity := uint32(benchResourceCapacity)
			if _, err := pb.NewAdminClient(cc).ResourceSet(ctx, &pb.ResourceSetRequest{Name: benchResource(i), Capacity: &capacity}); err != nil {
				lc.stop()
				return nil, fmt.Errorf("resource %s: %w", benchResource(i), err)
			}
		}
		t0 := time.Now()
		var shape func(int, *pb.SubmitRequest)
		var kindsOf func(int) []string
		if run.kinds > 0 {
			shape, kindsOf = benchKindShape, benchWorkerKinds
		}
		if run.resources > 0 {
			shape = benchResourceShape
		}
		if err := preloadShaped(ctx, cc, tenants, jobs, benchPayload, shape, pools...); err != nil {
			return nil, err
		}
		loaded := time.Since(t0)
		var aw assignWatch
		var paced atomic.Int64 // the mean length of a job, or 0: no time
		plan := func(a *pb.Assign) worker.FakeSpec {
			var d time.Duration
			if mean := time.Duration(paced.Load()); mean > 0 {
				d = pacedLength(a.Job, mean)
			}
			return worker.FakeSpec{Duration: d, CPU: max(d, time.Duration(a.EstCostMs)*time.Millisecond)}
		}
		wctx, stop := context.WithCancel(ctx)
		wg := fakeFleetOf(wctx, lc.servers(), 1000, func(int) pb.Size { return pb.Size_SM }, kindsOf, aw.observe, plan, pools...)
		time.Sleep(3 * time.Second) // connect and warm up
		// measure runs one window, with jobs of length on average (or of
		// no time).
		measure := func(length time.Duration, name string) benchResult {
			paced.Store(int64(length))
			if length > 0 {
				time.Sleep(2 * time.Second) // every worker on the new lengths
			}
			aw.assigned.Store(0)
			aw.lat.reset()
			aw.measuring.Store(true)
			prof := profileWindow(o, lc, leader, name, window-time.Second)
			before, stages := sampleRaft(lc.nodes[leader].http), sampleStages(lc.nodes[leader].http)
			cpu0 := lc.serverCPU()
			start := time.Now()
			time.Sleep(window)
			aw.measuring.Store(false)
			elapsed := time.Since(start)
			cpu := lc.serverCPU() - cpu0
			results := map[string]any{"unit": "dispatches/s; latency from the worker's Ready (or the Finished that carries it) to its Assign", "preload_jobs_per_s": round(float64(jobs) / loaded.Seconds()),
				"cluster_cpu_us_per_dispatch": cpuPer(cpu, aw.assigned.Load())}
			sampleRaft(lc.nodes[leader].http).since(before, results)
			sampleStages(lc.nodes[leader].http).since(stages, results)
			prof()
			return benchResult{Scenario: "dispatch", Variant: name, OpsPerS: round(float64(aw.assigned.Load()) / elapsed.Seconds()), P50Ms: aw.lat.pct(0.5), P99Ms: aw.lat.pct(0.99),
				Params: map[string]any{"workers": 1000, "tenants": tenants, "pools": max(1, len(pools)), "kinds": run.kinds, "resources": run.resources, "queued": jobs, "seconds": window.Seconds(), "job_ms": length.Milliseconds()}, Results: results}
		}
		out = append(out, measure(0, name))
		if tenants == 100 && run.kinds == 0 && run.resources == 0 {
			lengths := []time.Duration{pacedJob}
			if len(pools) == 0 {
				lengths = append(lengths, 2*pacedJob)
			}
			for _, length := range lengths {
				paced := fmt.Sprintf("%s-paced-%dms", name, length.Milliseconds())
				if o.only != "" && !slices.Contains(strings.Split(o.only, ","), paced) {
					continue
				}
				r := measure(length, paced)
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

// dispatchVariant is one load of bench dispatch: tenants in pools, their
// jobs of kinds or using resources.
type dispatchVariant struct{ tenants, pools, kinds, resources int }

// dispatchVariants are bench dispatch's loads, in the order they run.
var dispatchVariants = []dispatchVariant{{100, 1, 0, 0}, {100, 1, 0, benchResources}, {100, 1, benchKinds, 0}, {100, 4, 0, 0}, {10_000, 1, 0, 0}}

// name is the variant's name, as --only takes it.
func (v dispatchVariant) name() string {
	name := fmt.Sprintf("dispatch-%d", v.tenants)
	if v.kinds > 0 {
		name += fmt.Sprintf("-kinds-%d", v.kinds)
	}
	if v.resources > 0 {
		name += fmt.Sprintf("-resources-%d", v.resources)
	}
	if v.pools > 1 {
		name += fmt.Sprintf("-pools-%d", v.pools)
	}
	return name
}

// dispatchVariantNames lists the names --only takes: every variant, and
// the paced phases of the 100-tenant ones.
func dispatchVariantNames() []string {
	var out []string
	for _, v := range dispatchVariants {
		out = append(out, v.name())
	}
	return append(out, fmt.Sprintf("dispatch-100-paced-%dms", pacedJob.Milliseconds()), fmt.Sprintf("dispatch-100-paced-%dms", 2*pacedJob.Milliseconds()),
		fmt.Sprintf("dispatch-100-pools-4-paced-%dms", pacedJob.Milliseconds()))
}

// checkDispatchVariants refuses an --only that names no variant.
func checkDispatchVariants(only string) error {
	if only == "" {
		return nil
	}
	known := dispatchVariantNames()
	for _, n := range strings.Split(only, ",") {
		if !slices.Contains(known, n) {
			return fmt.Errorf("no variant %q (there are %s)", n, strings.Join(known, ", "))
		}
	}
	return nil
}

// benchKinds is how many kinds the kinds run of bench dispatch spreads its
// jobs over.
const benchKinds = 10

// benchKindShape makes job j a function job of kind j mod benchKinds.
func benchKindShape(j int, r *pb.SubmitRequest) {
	r.JobType, r.Form = fmt.Sprintf("kind-%d", j%benchKinds), pb.JobForm_FUNCTION
}

// benchWorkerKinds gives worker i 2 or 3 consecutive kinds (every kind is
// run by about 250 of 1,000 workers).
func benchWorkerKinds(i int) []string {
	n := 2 + i%2
	var out []string
	for k := range n {
		out = append(out, fmt.Sprintf("kind-%d", (i+k)%benchKinds))
	}
	return out
}

// benchResources is how many resources the resources run of bench dispatch
// declares; benchResourceCapacity is the capacity of each, the most a
// resource may have: 1,000 workers never hold that many units, so no
// resource binds and the run measures what using resources costs.
const (
	benchResources        = 3
	benchResourceCapacity = 1_000_000
)

// benchResource names resource i of the resources run.
func benchResource(i int) string { return fmt.Sprintf("bench-r%d", i) }

// benchResourceShape makes every even job use one unit of one of the
// benchResources resources (by turns); odd jobs use none.
func benchResourceShape(j int, r *pb.SubmitRequest) {
	if j%2 == 0 {
		r.Uses = []*pb.ResourceUse{{Resource: benchResource(j / 2 % benchResources), Units: 1}}
	}
}
