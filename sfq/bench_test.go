package sfq

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
)

// backlogShape says how backlogOf spreads its jobs: over the four classes
// (pseudo-randomly, 5 % of them with a deadline from 1 s to an hour) and
// over ten named groups per tenant (group_order and group_cap as given).
type backlogShape struct {
	classes  bool
	groups   bool
	order    GroupOrder
	groupCap uint32
	// kinds spreads the jobs over function jobs of that many kinds
	// ("kind-0", ...; 0: jobs of any worker).
	kinds int
	// resources declares that many resources ("res-0", ...) of capacity
	// capacity, and half the jobs use one unit of one of them.
	resources int
	capacity  uint32
}

// backlogOf builds a scheduler with the given tenants (tiers cycling through
// all five) and queued jobs of every size spread evenly over them, shaped as
// shape says.
func backlogOf(tb testing.TB, tenants, jobs int, shape backlogShape) *Scheduler {
	tb.Helper()
	s, err := New(DefaultConfig())
	if err != nil {
		tb.Fatal(err)
	}
	names := make([]string, tenants)
	for i := range names {
		names[i] = fmt.Sprintf("tenant-%06d", i)
		spec := TenantSpec{Name: names[i], Tier: Tier(i % NumTiers)}
		if shape.classes {
			spec.MaxClass, spec.AllowDeadlines = ClassCritical, true
		}
		if shape.groups {
			spec.GroupOrder, spec.GroupCap = shape.order, shape.groupCap
		}
		if _, err := s.UpsertTenant(spec); err != nil {
			tb.Fatal(err)
		}
	}
	for r := range shape.resources {
		if _, err := s.SetResource(0, ResourceSpec{Name: fmt.Sprintf("res-%d", r), Capacity: shape.capacity, TenantMax: NoTenantMax}); err != nil {
			tb.Fatal(err)
		}
	}
	var groups [10]string
	for g := range groups {
		groups[g] = fmt.Sprintf("group-%d", g)
	}
	for i := range jobs {
		sub := Submission{Tenant: names[i%tenants], Size: Size(i / tenants % NumSizes), EstCostMs: int64(1000 + i%7*500)}
		h := uint64(i) * 2654435761
		if shape.classes {
			sub.Class = Class(h >> 16 % NumClasses)
			if i%20 == 3 {
				sub.DeadlineMs = 1000 + int64(h>>8%3_599_000)
			}
		}
		if shape.groups {
			sub.Group = groups[(i/tenants+int(h>>24))%len(groups)]
		}
		if shape.kinds > 0 {
			sub.Form, sub.Type = FormFunction, fmt.Sprintf("kind-%d", int(h>>28)%shape.kinds)
		}
		if shape.resources > 0 && h>>20%2 == 0 {
			sub.Uses = []Use{{Resource: fmt.Sprintf("res-%d", int(h>>32)%shape.resources), Units: 1}}
		}
		if _, err := s.Submit(0, sub); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

// backlog is backlogOf with one class, no deadlines and no groups.
func backlog(tb testing.TB, tenants, jobs int) *Scheduler {
	tb.Helper()
	return backlogOf(tb, tenants, jobs, backlogShape{})
}

// backlogClasses is backlog with the jobs spread over the four classes
// and 5 % of them with a deadline.
func backlogClasses(tb testing.TB, tenants, jobs int) *Scheduler {
	tb.Helper()
	return backlogOf(tb, tenants, jobs, backlogShape{classes: true})
}

// backlogGroups is backlogClasses with every tenant's jobs spread over ten
// named groups (group_order and group_cap as given).
func backlogGroups(tb testing.TB, tenants, jobs int, order GroupOrder, groupCap uint32) *Scheduler {
	tb.Helper()
	return backlogOf(tb, tenants, jobs, backlogShape{classes: true, groups: true, order: order, groupCap: groupCap})
}

var workers = [NumSizes]string{"worker-sm", "worker-md", "worker-lg"}

// BenchmarkDispatchSubmit measures one dispatch plus one submit that keeps
// the dispatched tenant's backlog steady, over 1,000,000 queued jobs.
func BenchmarkDispatchSubmit(b *testing.B) {
	for _, tenants := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("tenants=%d", tenants), func(b *testing.B) {
			s := backlog(b, tenants, 1_000_000)
			subs := make([]Submission, tenants)
			for i := range subs {
				subs[i] = Submission{Tenant: s.TenantName(uint32(i)), EstCostMs: 1500}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				a, ok, err := s.Dispatch(Time(i), Size(i%NumSizes), workers[i%NumSizes])
				if err != nil || !ok {
					b.Fatalf("dispatch %d: %v %v", i, ok, err)
				}
				sub := subs[a.Tenant]
				sub.Size = a.Size
				if _, err := s.Submit(Time(i), sub); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchDispatch measures dispatch of large jobs alone from the backlog
// build returns, building it again (off the clock) before it runs dry.
func benchDispatch(b *testing.B, build func() *Scheduler) {
	s := build()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if i >= 900_000 {
			b.StopTimer()
			s = build()
			i = 0
			b.StartTimer()
		}
		if _, ok, err := s.Dispatch(Time(i), LG, workers[LG]); err != nil || !ok {
			b.Fatalf("dispatch %d: %v %v", i, ok, err)
		}
	}
}

// BenchmarkDispatch measures dispatch alone over 1,000,000 queued jobs
// (the backlog shrinks by one per op; b.N stays well under it).
func BenchmarkDispatch(b *testing.B) {
	for _, tenants := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("tenants=%d", tenants), func(b *testing.B) {
			benchDispatch(b, func() *Scheduler { return backlog(b, tenants, 1_000_000) })
		})
	}
}

// BenchmarkDispatchClasses is BenchmarkDispatch with the backlog spread
// over the four priority classes, 5 % of it with deadlines.
func BenchmarkDispatchClasses(b *testing.B) {
	for _, tenants := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("tenants=%d", tenants), func(b *testing.B) {
			benchDispatch(b, func() *Scheduler { return backlogClasses(b, tenants, 1_000_000) })
		})
	}
}

// BenchmarkDispatchGroups is BenchmarkDispatchClasses with every tenant's
// backlog spread over ten groups, under group_order fifo and fair.
func BenchmarkDispatchGroups(b *testing.B) {
	for _, order := range []GroupOrder{GroupFIFO, GroupFair} {
		for _, tenants := range []int{1_000, 100_000} {
			b.Run(fmt.Sprintf("order=%s/tenants=%d", order, tenants), func(b *testing.B) {
				benchDispatch(b, func() *Scheduler { return backlogGroups(b, tenants, 1_000_000, order, 0) })
			})
		}
	}
}

// BenchmarkFullLifecycle measures submit, dispatch, start, heartbeat and
// finish of one job against a backlog of 100,000 tenants.
func BenchmarkFullLifecycle(b *testing.B) {
	s := backlog(b, 100_000, 1_000_000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		now := Time(i)
		a, ok, err := s.Dispatch(now, LG, "w")
		if err != nil || !ok {
			b.Fatal(err)
		}
		if _, err := s.Start(now, a.Job, a.Attempt, "w"); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Heartbeat(now, a.Job, a.Attempt, "w", 100); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Finish(now, a.Job, a.Attempt, "w", OutcomeOK, 1200, RunResult{}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Submit(now, Submission{Tenant: s.TenantName(a.Tenant), Size: a.Size, EstCostMs: 1500}); err != nil {
			b.Fatal(err)
		}
		if i%1024 == 0 {
			s.Prune(now, 1<<20)
		}
	}
}

// BenchmarkMemoryPerQueuedJob reports the heap bytes per queued job (no
// payload, no key) at 1,000,000 jobs.
func BenchmarkMemoryPerQueuedJob(b *testing.B) {
	for _, tenants := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("tenants=%d", tenants), func(b *testing.B) {
			for b.Loop() {
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				s := backlog(b, tenants, 1_000_000)
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/1e6, "B/queued-job")
				runtime.KeepAlive(s)
			}
		})
	}
}

// TestDispatchAllocatesNothing pins the zero-allocation dispatch path, with
// one class, with four classes and deadlines, and with ten groups per
// tenant (fifo, fair, and fair with a group cap).
func TestDispatchAllocatesNothing(t *testing.T) {
	for i, clamp := range []ClampMode{ClampActivation, ClampDispatch, ClampActivation, ClampDispatch, ClampActivation, ClampDispatch, ClampActivation} {
		var s *Scheduler
		switch i {
		case 0, 1:
			s = backlog(t, 1000, 50_000)
		case 2, 3:
			s = backlogClasses(t, 1000, 50_000)
		case 4:
			s = backlogGroups(t, 1000, 50_000, GroupFIFO, 0)
		case 5:
			s = backlogGroups(t, 1000, 50_000, GroupFair, 0)
		case 6:
			s = backlogGroups(t, 1000, 50_000, GroupFair, 2)
		}
		cfg := s.Config()
		cfg.Clamp = clamp
		cfg.Decay = &Decay{HalfLifeMs: 3_600_000, NormMs: 100_000}
		if err := s.SetConfig(cfg); err != nil {
			t.Fatal(err)
		}
		for i := range 100 { // warm the heaps
			s.Dispatch(Time(i), Size(i%3), workers[i%3])
		}
		i := 0
		allocs := testing.AllocsPerRun(5000, func() {
			if _, ok, err := s.Dispatch(Time(1000+i), Size(i%3), workers[i%3]); err != nil || !ok {
				t.Fatalf("dispatch: %v %v", ok, err)
			}
			i++
		})
		if allocs != 0 {
			t.Errorf("case %d, %s clamp: %.2f allocations per dispatch, want 0", i, clamp, allocs)
		}
	}
}

// backlogPoolsN builds jobs queued jobs of 10,000 tenants over pools
// pools, each tenant in spread of them (1 to 4): over 64 pools with a
// spread of 4, 40,000 lanes. The jobs are of the three sizes and of costs
// from 1 s to 4 s.
func backlogPoolsN(tb testing.TB, jobs, pools, spread int) *Scheduler {
	tb.Helper()
	const tenants = 10_000
	s := backlog(tb, tenants, 0)
	poolNames := make([]string, pools)
	for p := range poolNames {
		poolNames[p] = DefaultPoolName
		if p > 0 {
			poolNames[p] = fmt.Sprintf("pool-%02d", p)
			if _, err := s.SetPool(PoolSpec{Name: poolNames[p]}, 0); err != nil {
				tb.Fatal(err)
			}
		}
	}
	for i := range jobs {
		t := i % tenants
		p := (t + (i/tenants)%spread*16) % pools
		sub := Submission{Tenant: s.TenantName(uint32(t)), Pool: poolNames[p], Size: Size(i / tenants % NumSizes), EstCostMs: int64(1000 + i%7*500)}
		if _, err := s.Submit(0, sub); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

// BenchmarkDispatchPools measures dispatch of large jobs from 64 pools in
// turn (10,000 tenants, each in four pools, 1,000,000 queued jobs of
// three sizes), beside the same backlog in one pool: SPEC §3 "Pools"
// wants the pick within 1.2x of the one-pool one. lanes=10000: each
// tenant in one pool only. pools=1/tenants: the one-pool backlog of
// BenchmarkDispatch (jobs of one size and cost).
func BenchmarkDispatchPools(b *testing.B) {
	b.Run("pools=1/tenants", func(b *testing.B) {
		benchDispatch(b, func() *Scheduler { return backlog(b, 10_000, 1_000_000) })
	})
	b.Run("pools=1", func(b *testing.B) { benchPools(b, 1, 1, 1) })
	for _, spread := range []int{4, 1} {
		for _, run := range []int{1, 64} {
			name := fmt.Sprintf("pools=64/run=%d", run)
			if spread == 1 {
				name = fmt.Sprintf("pools=64/lanes=10000/run=%d", run)
			}
			b.Run(name, func(b *testing.B) { benchPools(b, 64, run, spread) })
		}
	}
}

// benchPools dispatches from the pools of backlogPoolsN in turn, run
// dispatches in a row from each (run=1: every dispatch from the next
// pool, which finds its heaps cold in the cache).
func benchPools(b *testing.B, pools, run, spread int) {
	s := backlogPoolsN(b, 1_000_000, pools, spread)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if i >= 300_000 {
			b.StopTimer()
			s = backlogPoolsN(b, 1_000_000, pools, spread)
			i = 0
			b.StartTimer()
		}
		if _, ok, err := s.DispatchPool(Time(i), PoolID(i/run%pools), LG, workers[LG]); err != nil || !ok {
			b.Fatalf("dispatch %d: %v %v", i, ok, err)
		}
	}
}

// BenchmarkMemoryPerLane reports what a tenant's lane of a pool costs once
// it has been used (its record, runtime slots and group), and what a
// subscription costs on a pair that was never used.
func BenchmarkMemoryPerLane(b *testing.B) {
	const tenants = 10_000
	for b.Loop() {
		s := backlog(b, tenants, 0)
		if _, err := s.SetPool(PoolSpec{Name: "gpu"}, 0); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		var before, mid, after runtime.MemStats
		runtime.ReadMemStats(&before)
		burst := uint32(2)
		for i := range tenants {
			if _, err := s.SetSubscription(s.TenantName(uint32(i)), "gpu", &burst); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&mid)
		for i := range tenants {
			id, _ := s.Submit(0, Submission{Tenant: s.TenantName(uint32(i)), Pool: "gpu", EstCostMs: 1000})
			s.Cancel(0, id)
		}
		s.Prune(1, tenants)
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(mid.HeapAlloc-before.HeapAlloc)/tenants, "B/subscription")
		b.ReportMetric(float64(after.HeapAlloc-mid.HeapAlloc)/tenants, "B/idle-lane")
		runtime.KeepAlive(s)
	}
}

// BenchmarkDispatchKinds is BenchmarkDispatch with the backlog spread over
// function jobs of ten kinds, dispatched to workers that each run three
// of them (kinds.go): the dispatch of a worker that runs only some jobs.
func BenchmarkDispatchKinds(b *testing.B) {
	for _, tenants := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("tenants=%d", tenants), func(b *testing.B) {
			build := func() *Scheduler { return backlogOf(b, tenants, 1_000_000, backlogShape{kinds: 10}) }
			var runs [10]Runs
			for i := range runs {
				for k := range 3 {
					runs[i].Kinds = append(runs[i].Kinds, fmt.Sprintf("kind-%d", (i+k)%10))
				}
				slices.Sort(runs[i].Kinds)
			}
			s := build()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if i >= 900_000 {
					b.StopTimer()
					s = build()
					i = 0
					b.StartTimer()
				}
				if _, ok, err := s.DispatchFor(Time(i), DefaultPool, LG, workers[LG], &runs[i%10]); err != nil || !ok {
					b.Fatalf("dispatch %d: %v %v", i, ok, err)
				}
			}
		})
	}
}

// BenchmarkDispatchResources is BenchmarkDispatch with half the jobs
// using one unit of one of three resources: with room for every job
// (capacity=1000000), and with resources that fill up after 64 units
// each (capacity=64), after which their jobs are passed over.
func BenchmarkDispatchResources(b *testing.B) {
	for _, capacity := range []uint32{1_000_000, 64} {
		for _, tenants := range []int{1_000, 100_000} {
			b.Run(fmt.Sprintf("capacity=%d/tenants=%d", capacity, tenants), func(b *testing.B) {
				benchDispatch(b, func() *Scheduler {
					return backlogOf(b, tenants, 1_000_000, backlogShape{resources: 3, capacity: capacity})
				})
			})
		}
	}
}
