package sfq

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

var testPools = []string{"default", "gpu", "eu"}

func newPoolWorld(t interface {
	Fatal(...any)
	Fatalf(string, ...any)
}, cfg Config, tenants []TenantSpec, pools []PoolSpec) *Scheduler {
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range tenants {
		if _, err := s.UpsertTenant(ts); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pools {
		if _, err := s.SetPool(p, 0); err != nil {
			t.Fatalf("pool %s: %v", p.Name, err)
		}
	}
	return s
}

// TestPoolsAreIndependent: with no tenant-level limit that can bind, each
// pool's dispatch sequence is the one a scheduler of one pool gives when
// fed only that pool's commands (SPEC §3 "Pools"): the same jobs in the
// same order, at the same start tags and weights, and every job's reason
// the same. Weights of each kind are drawn per pool, and each pool's own
// scheduler gets them as its default pool's.
func TestPoolsAreIndependent(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := DefaultConfig()
		cfg.Clamp = rapid.SampledFrom([]ClampMode{ClampActivation, ClampDispatch}).Draw(t, "clamp")
		if rapid.Bool().Draw(t, "decay") {
			cfg.Decay = &Decay{HalfLifeMs: 5000, NormMs: 4000}
		}
		tenants := []TenantSpec{
			{Name: "a", Tier: Gold, AllowDeadlines: true, MaxClass: ClassHigh},
			{Name: "b", Tier: Free, AllowDeadlines: true, GroupOrder: GroupFair},
			{Name: "c", Tier: Silver, Multiplier: 3},
		}
		weights := map[string]PoolWeights{}
		var specs []PoolSpec
		for _, name := range testPools {
			w := rapid.SampledFrom([]PoolWeights{{}, {Mode: WeightsEqual},
				{Mode: WeightsMap, Map: []TenantWeight{{"a", 1}, {"c", 40}}}}).Draw(t, "weights "+name)
			weights[name] = w
			specs = append(specs, PoolSpec{Name: name, Weights: w})
		}
		s := newPoolWorld(t, cfg, tenants, specs)
		one := map[string]*Scheduler{}
		for _, name := range testPools {
			one[name] = newPoolWorld(t, cfg, tenants, []PoolSpec{{Name: DefaultPoolName, Weights: weights[name]}})
		}
		// ids maps a job of s to its pool and its ID in that pool's own
		// scheduler.
		type ref struct {
			pool string
			id   JobID
		}
		ids := map[JobID]ref{}
		now := Time(0)
		for step := range rapid.IntRange(20, 120).Draw(t, "steps") {
			pool := rapid.SampledFrom(testPools).Draw(t, "pool")
			o := one[pool]
			switch rapid.IntRange(0, 5).Draw(t, "op") {
			case 0, 1:
				sub := Submission{Tenant: rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "tenant"),
					Size:      Size(rapid.IntRange(0, 2).Draw(t, "size")),
					EstCostMs: rapid.SampledFrom([]int64{500, 1000, 2500}).Draw(t, "cost"),
					Group:     rapid.SampledFrom([]string{"", "g1", "g2"}).Draw(t, "group"), MaxAttempts: 2}
				if sub.Tenant == "a" && rapid.IntRange(0, 3).Draw(t, "deadline") == 0 {
					sub.DeadlineMs = rapid.Int64Range(1000, 9000).Draw(t, "deadline_ms")
				}
				id2, err2 := o.Submit(now, sub)
				sub.Pool = pool
				id1, err1 := s.Submit(now, sub)
				if fmt.Sprint(err1) != fmt.Sprint(err2) {
					t.Fatalf("step %d: submit to %s: %v, alone %v", step, pool, err1, err2)
				}
				if err1 == nil {
					ids[id1] = ref{pool, id2}
				}
			case 2, 3:
				ws := Size(rapid.IntRange(0, 2).Draw(t, "worker_size"))
				pid, _ := s.PoolID(pool)
				a1, ok1, err1 := s.DispatchPool(now, pid, ws, "w")
				a2, ok2, err2 := o.Dispatch(now, ws, "w")
				if err1 != nil || err2 != nil || ok1 != ok2 {
					t.Fatalf("step %d: dispatch %s in %s: %v %v, alone %v %v", step, ws, pool, ok1, err1, ok2, err2)
				}
				if !ok1 {
					break
				}
				if ids[a1.Job] != (ref{pool, a2.Job}) || a1.Start != a2.Start || a1.Weight != a2.Weight || a1.Size != a2.Size ||
					a1.Class != a2.Class || s.TenantName(a1.Tenant) != o.TenantName(a2.Tenant) || s.LanePool(a1.Tenant) != pid {
					t.Fatalf("step %d: dispatch in %s gives %+v (job %v), alone %+v", step, pool, a1, ids[a1.Job], a2)
				}
			case 4: // a run ends
				var live []JobID
				s.Jobs(0, func(j *Job) bool {
					if j.State.Live() && ids[j.ID].pool == pool {
						live = append(live, j.ID)
					}
					return true
				})
				if len(live) == 0 {
					break
				}
				id := rapid.SampledFrom(live).Draw(t, "live")
				j, _ := s.Job(id)
				out := rapid.SampledFrom([]FinishOutcome{OutcomeOK, OutcomeFailed}).Draw(t, "outcome")
				cpu := rapid.Int64Range(0, 3000).Draw(t, "cpu")
				_, err1 := s.Finish(now, id, j.Attempt, j.Worker, out, cpu, RunResult{})
				_, err2 := o.Finish(now, ids[id].id, j.Attempt, j.Worker, out, cpu, RunResult{})
				if err1 != nil || err2 != nil {
					t.Fatalf("step %d: finish: %v, alone %v", step, err1, err2)
				}
			case 5:
				now += Time(rapid.Int64Range(1, 2000).Draw(t, "dt"))
			}
			if err := s.Verify(); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			for id, r := range ids {
				r1, e1 := s.Explain(id)
				r2, e2 := one[r.pool].Explain(r.id)
				if r1 != r2 || fmt.Sprint(e1) != fmt.Sprint(e2) {
					t.Fatalf("step %d: explain %d: %s (%v), alone in %s %s (%v)", step, id, r1.Format(), e1, r.pool, r2.Format(), e2)
				}
			}
		}
		r := reloaded(t, s)
		if r.Hash() != s.Hash() {
			t.Fatal("a state with pools restored from its encoding hashes differently")
		}
	})
}

// TestPoolLimitsHold drives a scheduler of three pools through random
// commands with tenant caps, group caps, rate limits, subscriptions,
// pauses of tenants and pools, and checks after every step: Verify; no
// dispatch gives a worker a job of another pool; a tenant's running jobs
// in all pools stay within its max_running, its group's within the group
// cap, its jobs in a pool within its subscription burst; nothing is
// dispatched from a paused pool; and a state restored from the lived
// one's encoding answers every later command alike (SPEC §8 rule 11).
func TestPoolLimitsHold(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := DefaultConfig()
		cfg.AckTimeoutMs, cfg.LeaseTimeoutMs = 3000, 6000
		tenants := []TenantSpec{
			{Name: "a", Tier: Gold, Caps: Caps{MaxRunning: 3}, GroupCap: 2},
			{Name: "b", Tier: Free, GroupOrder: GroupFair, Caps: Caps{MaxInflightCPUMs: 3000}, Rate: RateLimit{N: 2, PeriodMs: 1000}},
			{Name: "c", Tier: Silver, Caps: Caps{MaxRunningSize: [NumSizes]uint32{1, 0, 1}}},
		}
		lived := newPoolWorld(t, cfg, tenants, []PoolSpec{{Name: "gpu"}, {Name: "eu", Weights: PoolWeights{Mode: WeightsEqual}}})
		var restored *Scheduler
		on := func(what string, fn func(s *Scheduler) (string, error)) string {
			r1, e1 := fn(lived)
			if restored != nil {
				r2, e2 := fn(restored)
				if r1 != r2 || fmt.Sprint(e1) != fmt.Sprint(e2) {
					t.Fatalf("%s: the lived state gives %q (%v), the restored one %q (%v)", what, r1, e1, r2, e2)
				}
			}
			return r1
		}
		now := Time(0)
		for step := range rapid.IntRange(30, 150).Draw(t, "steps") {
			pool := rapid.SampledFrom(testPools).Draw(t, "pool")
			pid, _ := lived.PoolID(pool)
			switch rapid.IntRange(0, 10).Draw(t, "op") {
			case 0, 1, 2:
				sub := Submission{Tenant: rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "tenant"), Pool: pool,
					Size:      Size(rapid.IntRange(0, 2).Draw(t, "size")),
					EstCostMs: rapid.SampledFrom([]int64{500, 1000, 2500}).Draw(t, "cost"),
					Group:     rapid.SampledFrom([]string{"", "g1", "g2"}).Draw(t, "group"), MaxAttempts: 2}
				on("submit", func(s *Scheduler) (string, error) {
					id, err := s.Submit(now, sub)
					return fmt.Sprint(id), err
				})
			case 3, 4, 5:
				ws := Size(rapid.IntRange(0, 2).Draw(t, "worker_size"))
				worker := fmt.Sprintf("w%d", step)
				paused := lived.PoolPaused(pid)
				got := on("dispatch", func(s *Scheduler) (string, error) {
					a, ok, err := s.DispatchPool(now, pid, ws, worker)
					return fmt.Sprintf("%+v %v", a, ok), err
				})
				if j, ok := jobOn(lived, worker); ok {
					if paused {
						t.Fatalf("step %d: pool %s is paused and dispatched %s", step, pool, got)
					}
					if lived.LanePool(j.Tenant) != pid {
						t.Fatalf("step %d: a worker of pool %s got job %d of pool %d", step, pool, j.ID, lived.LanePool(j.Tenant))
					}
					checkBurst(t, lived, j.Tenant, step)
				}
			case 6: // a run ends
				var live []Job
				lived.Jobs(0, func(j *Job) bool {
					if j.State.Live() {
						live = append(live, *j)
					}
					return true
				})
				if len(live) == 0 {
					break
				}
				j := rapid.SampledFrom(live).Draw(t, "live")
				o := rapid.SampledFrom([]FinishOutcome{OutcomeOK, OutcomeFailed, OutcomeCancelled}).Draw(t, "outcome")
				on("finish", func(s *Scheduler) (string, error) {
					ch, err := s.Finish(now, j.ID, j.Attempt, j.Worker, o, 700, RunResult{})
					return fmt.Sprintf("%+v", ch), err
				})
			case 7:
				var burst *uint32
				if rapid.IntRange(0, 3).Draw(t, "drop") != 0 {
					b := uint32(rapid.IntRange(0, 2).Draw(t, "burst"))
					burst = &b
				}
				tenant := rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "sub_tenant")
				on("subscription", func(s *Scheduler) (string, error) {
					s.SetClock(now)
					ok, err := s.SetSubscription(tenant, pool, burst)
					return fmt.Sprint(ok), err
				})
			case 8:
				pause := rapid.Bool().Draw(t, "pause")
				if rapid.Bool().Draw(t, "pause_pool") {
					on("pause pool", func(s *Scheduler) (string, error) {
						s.SetClock(now)
						ok, err := s.PausePool(pool, pause)
						return fmt.Sprint(ok), err
					})
				} else {
					tenant := rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "pause_tenant")
					on("pause tenant", func(s *Scheduler) (string, error) {
						s.SetClock(now)
						ok, err := s.PauseTenant(tenant, pause, true)
						return fmt.Sprint(ok), err
					})
				}
			case 9:
				now += Time(rapid.Int64Range(1, 1500).Draw(t, "dt"))
			case 10:
				restored = reloaded(t, lived)
			}
			for name, s := range map[string]*Scheduler{"lived": lived, "restored": restored} {
				if s == nil {
					continue
				}
				if err := s.Verify(); err != nil {
					t.Fatalf("step %d, %s: %v", step, name, err)
				}
			}
			checkPoolLimits(t, lived, step)
			if restored != nil && lived.Hash() != restored.Hash() {
				t.Fatalf("step %d: the hashes differ", step)
			}
		}
	})
}

// jobOn returns the live job of worker.
func jobOn(s *Scheduler, worker string) (Job, bool) {
	var out Job
	found := false
	s.Jobs(0, func(j *Job) bool {
		if j.State.Live() && j.Worker == worker {
			out, found = *j, true
			return false
		}
		return true
	})
	return out, found
}

// checkPoolLimits checks the limits of every tenant against its live jobs
// in every pool: a's max_running 3 and group cap 2, b's in-flight cap
// 3000 ms, c's caps of 1 sm and 1 lg (none of them changes in the test),
// and the counters of each tenant against its jobs.
func checkPoolLimits(t *rapid.T, s *Scheduler, step int) {
	running := map[string]uint32{}
	inflight := map[string]int64{}
	bySize := map[string][NumSizes]uint32{}
	groups := map[[2]string]uint32{}
	s.Jobs(0, func(j *Job) bool {
		if j.State.Live() {
			name := s.TenantName(j.Tenant)
			running[name]++
			inflight[name] += j.EstCostMs
			bs := bySize[name]
			bs[j.Size]++
			bySize[name] = bs
			if j.Group() != "" {
				groups[[2]string{name, j.Group()}]++
			}
		}
		return true
	})
	for _, name := range []string{"a", "b", "c"} {
		tt, _ := s.Tenant(name)
		if tt.Running != running[name] || tt.InflightCPUMs != inflight[name] {
			t.Fatalf("step %d: tenant %s counts %d running (%d ms), its jobs %d (%d ms)", step, name, tt.Running, tt.InflightCPUMs, running[name], inflight[name])
		}
	}
	switch {
	case running["a"] > 3:
		t.Fatalf("step %d: a runs %d jobs over its max_running 3", step, running["a"])
	case groups[[2]string{"a", "g1"}] > 2 || groups[[2]string{"a", "g2"}] > 2:
		t.Fatalf("step %d: a group of a runs over its cap 2: %v", step, groups)
	case inflight["b"] > 3000:
		t.Fatalf("step %d: b has %d ms in flight over its cap", step, inflight["b"])
	case bySize["c"][SM] > 1 || bySize["c"][LG] > 1:
		t.Fatalf("step %d: c runs %v by size over its caps", step, bySize["c"])
	}
}

// checkBurst checks, right after lane ti got a job, that its running jobs
// in its pool are within its subscription burst.
func checkBurst(t *rapid.T, s *Scheduler, ti uint32, step int) {
	name, pool := s.TenantName(ti), s.PoolName(s.LanePool(ti))
	if b, ok := s.Subscription(name, pool); ok {
		if l, _ := s.Lane(name, pool); l.Running > b {
			t.Fatalf("step %d: %s runs %d in pool %s over its burst %d", step, name, l.Running, pool, b)
		}
	}
}

// TestPoolCapBindsAcrossPools: a tenant's max_running counts its jobs in
// every pool; while it binds, its jobs in each pool wait with reason cap,
// and a run ending in one pool lets a job of the other start.
func TestPoolCapBindsAcrossPools(t *testing.T) {
	s := newPoolWorld(t, DefaultConfig(), []TenantSpec{{Name: "a", Tier: Gold, Caps: Caps{MaxRunning: 2}}, {Name: "b", Tier: Free}},
		[]PoolSpec{{Name: "gpu"}})
	gpu, _ := s.PoolID("gpu")
	for _, p := range []string{"", "gpu", "", "gpu"} {
		if _, err := s.Submit(0, Submission{Tenant: "a", Pool: p, EstCostMs: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	s.Submit(0, Submission{Tenant: "b", Pool: "gpu", EstCostMs: 1000})
	dispatch := func(pid PoolID) JobID {
		t.Helper()
		a, ok, err := s.DispatchPool(1, pid, SM, "w")
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return 0
		}
		return a.Job
	}
	if got := [2]JobID{dispatch(DefaultPool), dispatch(gpu)}; got != [2]JobID{1, 2} {
		t.Fatalf("dispatched %v", got)
	}
	// Its cap of 2 binds: in default nothing, in gpu only b's job.
	if id := dispatch(DefaultPool); id != 0 {
		t.Fatalf("default dispatched %d past the cap", id)
	}
	if id := dispatch(gpu); id != 5 {
		t.Fatalf("gpu dispatched %d, want b's job 5", id)
	}
	for _, id := range []JobID{3, 4} {
		r, _ := s.Explain(id)
		if got := r.Format(); got != "reason=cap vertex=tenant_running current=2 limit=2" {
			t.Fatalf("job %d: %s", id, got)
		}
	}
	// A run of the pool default ends: the next job of a may start in gpu.
	j, _ := s.Job(1)
	if _, err := s.Finish(2, 1, j.Attempt, j.Worker, OutcomeOK, 1000, RunResult{}); err != nil {
		t.Fatal(err)
	}
	if id := dispatch(gpu); id != 4 {
		t.Fatalf("gpu dispatched %d after the run ended, want 4", id)
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestSubscriptionBurst: a burst caps the tenant's assigned and running
// jobs in its pool alone, as a tenant-level limit (reason cap
// vertex=subscription); burst 0 holds them; a pool that requires
// subscriptions refuses a tenant without one.
func TestSubscriptionBurst(t *testing.T) {
	s := newPoolWorld(t, DefaultConfig(), []TenantSpec{{Name: "a", Tier: Gold}, {Name: "b", Tier: Gold}},
		[]PoolSpec{{Name: "gpu", Required: true}})
	gpu, _ := s.PoolID("gpu")
	if _, err := s.Submit(0, Submission{Tenant: "a", Pool: "gpu", EstCostMs: 1000}); !errors.Is(err, ErrPrecondition) ||
		err.Error() != "tenant a has no subscription in pool gpu, which requires one" {
		t.Fatalf("submit without a subscription: %v", err)
	}
	one, zero := uint32(1), uint32(0)
	if _, err := s.SetSubscription("a", "gpu", &one); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetSubscription("b", "gpu", &zero); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		s.Submit(0, Submission{Tenant: "a", Pool: "gpu", EstCostMs: 1000})
		s.Submit(0, Submission{Tenant: "a", EstCostMs: 1000})
	}
	s.Submit(0, Submission{Tenant: "b", Pool: "gpu", EstCostMs: 1000})
	var got []JobID
	for range 4 {
		if a, ok, _ := s.DispatchPool(1, gpu, SM, "w"); ok {
			got = append(got, a.Job)
		}
	}
	if fmt.Sprint(got) != "[1]" {
		t.Fatalf("gpu dispatched %v, want [1]", got)
	}
	for id, want := range map[JobID]string{3: "reason=cap vertex=subscription current=1 limit=1", 5: "reason=cap vertex=subscription current=0 limit=0"} {
		if r, _ := s.Explain(id); r.Format() != want {
			t.Fatalf("job %d: %s, want %s", id, r.Format(), want)
		}
	}
	// The burst is the pool's alone: a's jobs of default go.
	for range 2 {
		if _, ok, _ := s.Dispatch(1, SM, "w"); !ok {
			t.Fatal("default dispatched nothing")
		}
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestPoolPauseAndDelete: a pool's pause gates its dispatch alone; a pool
// with jobs is not deleted, default never; a deleted pool is unknown to a
// submit and a dispatch, and comes back, with its tags, when created again.
func TestPoolPauseAndDelete(t *testing.T) {
	s := newPoolWorld(t, DefaultConfig(), []TenantSpec{{Name: "a", Tier: Gold}}, []PoolSpec{{Name: "gpu"}})
	gpu, _ := s.PoolID("gpu")
	s.Submit(0, Submission{Tenant: "a", Pool: "gpu", EstCostMs: 1000})
	s.Submit(0, Submission{Tenant: "a", EstCostMs: 1000})
	if _, err := s.PausePool("gpu", true); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.DispatchPool(0, gpu, SM, "w"); ok {
		t.Fatal("a paused pool dispatched")
	}
	if r, _ := s.Explain(1); r.Format() != "reason=paused vertex=pool" {
		t.Fatalf("explain: %s", r.Format())
	}
	if _, ok, _ := s.Dispatch(0, SM, "w"); !ok {
		t.Fatal("the pool default is paused too")
	}
	if err := s.DeletePool("gpu"); err == nil || err.Error() != "pool gpu has 0 scheduled, 1 queued and 0 running jobs" {
		t.Fatalf("delete: %v", err)
	}
	if err := s.DeletePool("default"); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("delete default: %v", err)
	}
	s.Cancel(1, 1)
	if err := s.DeletePool("gpu"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(2, Submission{Tenant: "a", Pool: "gpu", EstCostMs: 1000}); !errors.Is(err, ErrUnknownPool) {
		t.Fatalf("submit to a deleted pool: %v", err)
	}
	if _, _, err := s.DispatchPool(2, gpu, SM, "w"); !errors.Is(err, ErrUnknownPool) {
		t.Fatalf("dispatch in a deleted pool: %v", err)
	}
	if _, err := s.Redrive(2, 1, 0); !errors.Is(err, ErrUnknownPool) {
		t.Fatalf("redrive into a deleted pool: %v", err)
	}
	if created, err := s.SetPool(PoolSpec{Name: "gpu"}, 0); err != nil || !created {
		t.Fatalf("pool again: %v %v", created, err)
	}
	if id, _ := s.PoolID("gpu"); id != gpu {
		t.Fatalf("pool gpu came back as %d, was %d", id, gpu)
	}
	if _, err := s.SetPool(PoolSpec{Name: "eu"}, 2); !errors.Is(err, ErrExhausted) {
		t.Fatalf("a third pool over max_pools 2: %v", err)
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	if r := reloaded(t, s); r.Hash() != s.Hash() {
		t.Fatal("restored state hashes differently")
	}
}

// TestPoolWeights: a pool's weights replace tier and multiplier for the
// lanes in it: equal gives every tenant weight 1, a map the listed ones
// theirs and the others 1; default keeps tier × multiplier.
func TestPoolWeights(t *testing.T) {
	s := newPoolWorld(t, DefaultConfig(), []TenantSpec{{Name: "a", Tier: Gold, Multiplier: 2}, {Name: "b", Tier: Free}},
		[]PoolSpec{{Name: "eq", Weights: PoolWeights{Mode: WeightsEqual}}, {Name: "m", Weights: PoolWeights{Mode: WeightsMap, Map: []TenantWeight{{"b", 7}}}}})
	for _, p := range []string{"", "eq", "m"} {
		for _, tn := range []string{"a", "b"} {
			s.Submit(0, Submission{Tenant: tn, Pool: p, EstCostMs: 1000})
		}
	}
	want := map[string]map[string]Weight{
		"default": {"a": Weight(int64(DefaultConfig().TierWeights[Gold]) * 2 * int64(WeightOne)), "b": Weight(int64(DefaultConfig().TierWeights[Free]) * int64(WeightOne))},
		"eq":      {"a": WeightOne, "b": WeightOne},
		"m":       {"a": WeightOne, "b": 7 * WeightOne},
	}
	for pool, ws := range want {
		pid, _ := s.PoolID(pool)
		for range 2 {
			a, ok, err := s.DispatchPool(0, pid, SM, "w")
			if !ok || err != nil {
				t.Fatalf("%s: %v %v", pool, ok, err)
			}
			if name := s.TenantName(a.Tenant); a.Weight != ws[name] {
				t.Fatalf("pool %s tenant %s: weight %d, want %d", pool, name, a.Weight, ws[name])
			}
		}
	}
	if _, err := ParsePoolWeights("a:0"); err == nil || err.Error() != `weight "0" of tenant "a" (want 1..1000000)` {
		t.Fatalf("weight 0: %v", err)
	}
	if _, err := ParsePoolWeights("a:2,a:3"); err == nil || err.Error() != `tenant "a" is in the weights twice` {
		t.Fatalf("twice: %v", err)
	}
	if w, err := ParsePoolWeights("z:5,b:2"); err != nil || w.String() != "b:2,z:5" {
		t.Fatalf("map: %v %v", w, err)
	}
	if err := ValidatePoolName("GPU"); err == nil || err.Error() != `pool name "GPU" has 'G' at byte 0 (want a-z, 0-9 and -, not starting with -)` {
		t.Fatalf("name: %v", err)
	}
}

// TestEstimatesOfEveryPool: a tenant's cost estimates learn from its runs
// in every pool, and serve its submits to any pool.
func TestEstimatesOfEveryPool(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Estimate = EstimateAuto
	s := newPoolWorld(t, cfg, []TenantSpec{{Name: "a", Tier: Gold}}, []PoolSpec{{Name: "gpu"}})
	gpu, _ := s.PoolID("gpu")
	for i := range 3 {
		id, err := s.Submit(0, Submission{Tenant: "a", Pool: "gpu", Type: "render", EstCostMs: 1000})
		if err != nil {
			t.Fatal(err)
		}
		a, ok, _ := s.DispatchPool(0, gpu, SM, "w")
		if !ok || a.Job != id {
			t.Fatalf("run %d: dispatched %+v", i, a)
		}
		j, _ := s.Job(id)
		if _, err := s.Finish(1, id, j.Attempt, "w", OutcomeOK, 4000, RunResult{}); err != nil {
			t.Fatal(err)
		}
	}
	if st, ok := s.Estimate("a", "render"); !ok || st.Samples != 3 || st.EMAMs != 4000 {
		t.Fatalf("estimate after three runs in gpu: %+v %v", st, ok)
	}
	id, _ := s.Submit(2, Submission{Tenant: "a", Type: "render"})
	if j, _ := s.Job(id); j.EstCostMs != 4000 || j.EstSource != EstFromEMA {
		t.Fatalf("a submit to default: estimate %d from %s", j.EstCostMs, j.EstSource)
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestSubscriptionsCopiedOnlyForAFrozenView: a frozen View (a snapshot
// being written) keeps the subscriptions it was frozen with while they
// change, and between freezes a change is made in place: changing a
// burst allocates nothing, so setting a subscription for every tenant is
// not a copy of the whole table each time.
func TestSubscriptionsCopiedOnlyForAFrozenView(t *testing.T) {
	var tenants []TenantSpec
	for i := range 300 {
		tenants = append(tenants, TenantSpec{Name: fmt.Sprintf("t%03d", i), Tier: Silver})
	}
	s := newPoolWorld(t, DefaultConfig(), tenants, []PoolSpec{{Name: "gpu"}})
	burst := func(n uint32) *uint32 { return &n }
	for i := 0; i < 300; i += 2 {
		if _, err := s.SetSubscription(fmt.Sprintf("t%03d", i), "gpu", burst(uint32(i))); err != nil {
			t.Fatal(err)
		}
	}
	frozen := s.Freeze()
	before := encodeView(frozen)
	for i := range 300 {
		var b *uint32 // every odd tenant subscribed, every even one's removed
		if i%2 == 1 {
			b = burst(7)
		}
		if _, err := s.SetSubscription(fmt.Sprintf("t%03d", i), "gpu", b); err != nil {
			t.Fatal(err)
		}
	}
	if after := encodeView(frozen); !bytes.Equal(before, after) {
		t.Fatal("the frozen view's subscriptions changed with the scheduler's")
	}
	if n, ok := s.Subscription("t001", "gpu"); !ok || n != 7 {
		t.Fatalf("t001: %d %v", n, ok)
	}
	if _, ok := s.Subscription("t000", "gpu"); ok {
		t.Fatal("t000 still subscribed")
	}
	i := uint32(0)
	if allocs := testing.AllocsPerRun(100, func() {
		i++
		if _, err := s.SetSubscription("t151", "gpu", &i); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Fatalf("%v allocations per change of a burst", allocs)
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkSetSubscriptions: a subscription for each of 20,000 tenants in
// one pool, set in reverse order of the tenants (each one inserted first),
// as a script that subscribes every tenant would; per subscription set.
func BenchmarkSetSubscriptions(b *testing.B) {
	const n = 20000
	var tenants []TenantSpec
	for i := range n {
		tenants = append(tenants, TenantSpec{Name: fmt.Sprintf("t%05d", i), Tier: Silver})
	}
	burst := uint32(2)
	for b.Loop() {
		b.StopTimer()
		s := newPoolWorld(b, DefaultConfig(), tenants, []PoolSpec{{Name: "gpu"}})
		b.StartTimer()
		for i := n - 1; i >= 0; i-- {
			if _, err := s.SetSubscription(tenants[i].Name, "gpu", &burst); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/subscription")
}

// TestDeleteTenantKeepsSubscriptionsVerified: a tenant deleted with a
// subscription and a lane in its pool keeps both consistent: the state
// verifies, and a restore of it encodes alike.
func TestDeleteTenantKeepsSubscriptionsVerified(t *testing.T) {
	s := newPoolWorld(t, DefaultConfig(), []TenantSpec{{Name: "a", Tier: Gold}, {Name: "b", Tier: Free}}, []PoolSpec{{Name: "gpu"}})
	two := uint32(2)
	if _, err := s.SetSubscription("b", "gpu", &two); err != nil {
		t.Fatal(err)
	}
	id, err := s.Submit(0, Submission{Tenant: "b", Pool: "gpu", EstCostMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(1, id); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTenant("b"); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(); err != nil {
		t.Fatalf("after deleting a subscribed tenant: %v", err)
	}
	if err := reloaded(t, s).Verify(); err != nil {
		t.Fatalf("restored: %v", err)
	}
}
