package fsm

import (
	"bufio"
	"bytes"
	"testing"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

func poolSet(name string, weights *string, required *bool) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_PoolSet{PoolSet: &clusterpb.PoolSet{Name: name, Weights: weights, SubscriptionsRequired: required}}}
}

func submitIn(tenant, pool string) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: tenant, Size: pb.Size_MD, EstCostMs: 1000, Pool: pool}}}
}

func dispatchIn(worker, pool string, credit uint64) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: worker, Size: pb.Size_MD, Credit: credit, Pool: pool}}}
}

func ptr[T any](v T) *T { return &v }

// TestPoolCommands: each bad input is refused with its code and the field
// named, and changes nothing (the hash stays); good ones apply.
func TestPoolCommands(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("a", pb.Tier_GOLD))
	if r := h.one(poolSet("gpu", ptr("a:5,ghost:2"), nil)); r.Code != OK || !r.Created {
		t.Fatalf("pool gpu (weights may name a tenant that does not exist yet): %+v", r)
	}
	before, _ := h.f.Hash()
	for _, c := range []struct {
		cmd  *clusterpb.Command
		code Code
		msg  string
	}{
		{poolSet("GPU", nil, nil), Invalid, `pool name "GPU" has 'G' at byte 0 (want a-z, 0-9 and -, not starting with -)`},
		{poolSet("gpu", ptr("a:0"), nil), Invalid, `weights: weight "0" of tenant "a" (want 1..1000000)`},
		{poolSet("gpu", ptr("a:2000000"), nil), Invalid, `weights: weight "2000000" of tenant "a" (want 1..1000000)`},
		{submitIn("a", "cpu"), NotFound, `unknown pool "cpu"`},
		{submitIn("ghost", "cpu"), NotFound, `unknown pool "cpu"`},
		{dispatchIn("w1", "cpu", 1), NotFound, `unknown pool "cpu"`},
		{&clusterpb.Command{Cmd: &clusterpb.Command_PoolDelete{PoolDelete: &clusterpb.PoolDelete{Name: "default"}}}, FailedPrecondition, "the pool default is never deleted"},
		{&clusterpb.Command{Cmd: &clusterpb.Command_PoolDelete{PoolDelete: &clusterpb.PoolDelete{Name: "cpu"}}}, NotFound, `unknown pool "cpu"`},
		{&clusterpb.Command{Cmd: &clusterpb.Command_SubscriptionSet{SubscriptionSet: &clusterpb.SubscriptionSet{Tenant: "a", Pool: "cpu", Burst: ptr(uint32(1))}}}, NotFound, `unknown pool "cpu"`},
		{&clusterpb.Command{Cmd: &clusterpb.Command_SubscriptionSet{SubscriptionSet: &clusterpb.SubscriptionSet{Tenant: "b", Pool: "gpu", Burst: ptr(uint32(1))}}}, NotFound, `unknown tenant "b"`},
		{redriveCmd(&clusterpb.BulkJobs{Tenant: "a", Filter: &pb.JobFilter{Pool: "cpu"}}), NotFound, `unknown pool "cpu"`},
		{redriveCmd(&clusterpb.BulkJobs{Tenant: "a", Filter: &pb.JobFilter{Pool: "Cpu"}}), Invalid, `filter.pool: pool name "Cpu" has 'C' at byte 0 (want a-z, 0-9 and -, not starting with -)`},
		{&clusterpb.Command{Cmd: &clusterpb.Command_Pause{Pause: &clusterpb.Pause{Pool: "gpu", AsTenant: true}}}, PermissionDenied, "a pool is paused and resumed by an admin"},
		{setConfigWith(func(p *pb.SchedulerConfig) { p.MaxPools = 2000 }), Invalid, "max_pools is 2000 (want 0 for the default 64, or 1..1024)"},
	} {
		if r := h.one(c.cmd); r.Code != c.code || r.Msg != c.msg {
			t.Errorf("%v: %v %q, want %v %q", c.cmd, r.Code, r.Msg, c.code, c.msg)
		}
	}
	if after, _ := h.f.Hash(); after != before {
		t.Fatal("a refused pool command changed the state")
	}
	// max_pools: two pools (default and gpu) with max_pools 2.
	h.one(setConfigWith(func(p *pb.SchedulerConfig) { p.MaxPools = 2 }))
	if r := h.one(poolSet("eu", nil, nil)); r.Code != ResourceExhausted || r.Msg != `the cluster has 2 pools, its max_pools; pool "eu" would exceed it` {
		t.Fatalf("a third pool: %+v", r)
	}
	// A busy pool is not deleted; an idle one is, and its jobs' filter
	// then names an unknown pool.
	if r := h.one(submitIn("a", "gpu")); r.Code != OK {
		t.Fatalf("submit to gpu: %+v", r)
	}
	del := &clusterpb.Command{Cmd: &clusterpb.Command_PoolDelete{PoolDelete: &clusterpb.PoolDelete{Name: "gpu"}}}
	if r := h.one(del); r.Code != FailedPrecondition || r.Msg != "pool gpu has 0 scheduled, 1 queued and 0 running jobs" {
		t.Fatalf("delete a busy pool: %+v", r)
	}
	h.one(cancelJob("a", 1))
	if r := h.one(del); r.Code != OK {
		t.Fatalf("delete an idle pool: %+v", r)
	}
	if r := h.one(submitIn("a", "gpu")); r.Code != NotFound {
		t.Fatalf("submit to a deleted pool: %+v", r)
	}
	// The cancelled job still names its pool.
	evs := 0
	h.f.Events(0, func(ev *Event) bool {
		if ev.Job == 1 {
			evs++
			if ev.PoolName != "gpu" || h.f.sched.TenantName(ev.Tenant) != "a" {
				t.Errorf("event %d of job 1: pool %q tenant %d", ev.Seq, ev.PoolName, ev.Tenant)
			}
		}
		return true
	})
	if evs != 2 {
		t.Fatalf("job 1 has %d events, want queued and cancelled", evs)
	}
}

// TestPoolsRoundTrip: at level 6, a state with pools, subscriptions, a
// worker of a pool and the pool settings is written as state version 9
// and reads back to the same bytes; the same state without them stays
// version 8.
func TestPoolsRoundTrip(t *testing.T) {
	h := &harness{t: t, f: newAt(Level6), now: 1_000}
	h.one(tenant("a", pb.Tier_GOLD))
	h.one(submit("a", "", 1000, ""))
	v, _ := h.f.Freeze()
	if got := v.StateVersion(); got != stateVersionQuotas {
		t.Fatalf("a level-6 state without pools is version %d, want %d", got, stateVersionQuotas)
	}
	h.one(poolSet("gpu", ptr("equal"), ptr(true)))
	h.one(&clusterpb.Command{Cmd: &clusterpb.Command_SubscriptionSet{SubscriptionSet: &clusterpb.SubscriptionSet{Tenant: "a", Pool: "gpu", Burst: ptr(uint32(2))}}})
	h.one(submitIn("a", "gpu"))
	if r := h.one(dispatchIn("w1", "gpu", 1)); !r.Assigned || r.Job != 2 {
		t.Fatalf("dispatch in gpu: %+v", r)
	}
	h.one(setConfigWith(func(p *pb.SchedulerConfig) {
		p.MaxPools, p.ImplicitTenants, p.DefaultTenant = 8, pb.Tier_SILVER, "a"
	}))
	v, _ = h.f.Freeze()
	if got := v.StateVersion(); got != stateVersionPools {
		t.Fatalf("a state with pools is version %d", got)
	}
	b := encodeFSM(v)
	n := New()
	if err := n.Restore(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(b))), h.index); err != nil {
		t.Fatal(err)
	}
	v2, _ := n.Freeze()
	if !bytes.Equal(encodeFSM(v2), b) {
		t.Fatal("a restored state with pools encodes differently")
	}
	if w := n.workers["w1"]; w == nil || w.Pool != "gpu" {
		t.Fatalf("worker w1 after restore: %+v", w)
	}
	if p := n.PoolSettings(); p != (PoolSettings{MaxPools: 8, Implicit: true, ImplicitTier: sfq.Silver, DefaultTenant: "a"}) {
		t.Fatalf("pool settings after restore: %+v", p)
	}
}

// TestDefaultAndImplicitTenants: default_tenant names the tenant of a
// submit that names none; implicit_tenants creates an unknown tenant with
// its tier, and a refused submit (an unknown pool) creates nothing.
func TestDefaultAndImplicitTenants(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("house", pb.Tier_BRONZE))
	if r := h.one(submitIn("", "")); r.Code != NotFound {
		t.Fatalf("a submit naming no tenant without default_tenant: %+v", r)
	}
	h.one(setConfigWith(func(p *pb.SchedulerConfig) { p.DefaultTenant = "house" }))
	if r := h.one(submitIn("", "")); r.Code != OK || r.Tenant != "house" {
		t.Fatalf("a submit naming no tenant: %+v", r)
	}
	if r := h.one(submitIn("newco", "")); r.Code != NotFound || r.Msg != `unknown tenant "newco"` {
		t.Fatalf("implicit_tenants off: %+v", r)
	}
	h.one(setConfigWith(func(p *pb.SchedulerConfig) { p.DefaultTenant, p.ImplicitTenants = "house", pb.Tier_SILVER }))
	if r := h.one(submitIn("newco", "nowhere")); r.Code != NotFound {
		t.Fatalf("an implicit tenant's submit to an unknown pool: %+v", r)
	}
	h.one(poolSet("gpu", nil, ptr(true)))
	if r := h.one(submitIn("newco", "gpu")); r.Code != FailedPrecondition || r.Msg != "tenant newco has no subscription in pool gpu, which requires one" {
		t.Fatalf("an implicit tenant's submit to a pool that requires a subscription: %+v", r)
	}
	if _, ok := h.f.sched.TenantIndex("newco"); ok {
		t.Fatal("a refused submit created its tenant")
	}
	if r := h.one(submitIn("newco", "")); r.Code != OK {
		t.Fatalf("implicit tenant: %+v", r)
	}
	nt, ok := h.f.sched.Tenant("newco")
	if !ok || nt.Tier != sfq.Silver || nt.Caps != (sfq.Caps{}) || nt.QueuedTotal() != 1 {
		t.Fatalf("the implicit tenant: %+v %v", nt, ok)
	}
}

// TestUpgradeToPools: a state at level 5 holds nothing of pools, and pool
// commands are refused, naming the field; raised to level 6, the same
// commands apply, and every job and worker of before is in the pool
// default.
func TestUpgradeToPools(t *testing.T) {
	h := &harness{t: t, f: NewAtLevel(Level5), now: 1000}
	h.one(tenant("a", pb.Tier_GOLD))
	h.one(submit("a", "", 1000, ""))
	h.one(dispatch("w1", 1))
	for _, c := range []*clusterpb.Command{poolSet("gpu", nil, nil), submitIn("a", "gpu"), dispatchIn("w2", "gpu", 1),
		setConfigWith(func(p *pb.SchedulerConfig) { p.DefaultTenant = "a" })} {
		if r := h.one(c); r.Code != FailedPrecondition {
			t.Fatalf("%v at level 5: %+v", c, r)
		}
	}
	h.one(&clusterpb.Command{Cmd: &clusterpb.Command_SetFeatureLevel{SetFeatureLevel: &clusterpb.SetFeatureLevel{Level: Level6}}})
	if r := h.one(poolSet("gpu", nil, nil)); r.Code != OK {
		t.Fatalf("pool at level 6: %+v", r)
	}
	h.f.Read(func(s *sfq.Scheduler) {
		j, _ := s.Job(1)
		if s.LanePool(j.Tenant) != sfq.DefaultPool {
			t.Errorf("job 1 is in pool %d", s.LanePool(j.Tenant))
		}
	})
	if w := h.f.workers["w1"]; w.Pool != "" {
		t.Fatalf("worker w1 is of pool %q", w.Pool)
	}
}

// TestQuotasCountEveryPool: max_queued counts a tenant's jobs in every
// pool, at submit and at redrive; the metrics count a tenant once, its
// jobs in every pool.
func TestQuotasCountEveryPool(t *testing.T) {
	h := newHarness(t)
	h.one(&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "a", Tier: pb.Tier_GOLD, Caps: &pb.Caps{MaxQueued: 2}}}})
	h.one(poolSet("gpu", nil, nil))
	for _, p := range []string{"", "gpu"} {
		if r := h.one(submitIn("a", p)); r.Code != OK {
			t.Fatalf("submit to %q: %+v", p, r)
		}
	}
	if r := h.one(submitIn("a", "gpu")); r.Code != ResourceExhausted || r.Msg != `tenant "a" has 2 queued jobs, its max_queued quota` {
		t.Fatalf("a third job: %+v", r)
	}
	m := h.f.Metrics(1000)
	if len(m.Tenants) != 1 || m.Tenants[0].Queued != [sfq.NumSizes]uint32{0, 2, 0} || m.Tiers[sfq.Gold].Tenants != 1 {
		t.Fatalf("metrics: %+v, gold %+v", m.Tenants, m.Tiers[sfq.Gold])
	}
	// A cancelled job of gpu is redriven against the same quota.
	h.one(cancelJob("a", 2))
	h.one(submitIn("a", ""))
	r := h.one(redriveCmd(&clusterpb.BulkJobs{Tenant: "a", Jobs: []uint64{2}}))
	if r.Bulk == nil || len(r.Bulk.Items) != 1 || r.Bulk.Items[0].Done {
		t.Fatalf("a redrive past the quota: %+v", r.Bulk)
	}
}

// TestDispatchBudgetIn: the leader's budget for workers of a pool and a
// size is 0 unless that pool has an eligible job such a worker fits; a
// pause of one pool zeroes that pool's alone, a pause of all every
// pool's; an unknown pool is not known.
func TestDispatchBudgetIn(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("a", pb.Tier_GOLD))
	h.one(poolSet("gpu", nil, nil))
	h.one(poolSet("cpu", nil, nil))
	h.one(submitIn("a", "gpu")) // md
	h.one(submitIn("a", "gpu"))
	pause := func(pool string, all, resume bool) {
		t.Helper()
		if r := h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Pause{Pause: &clusterpb.Pause{Pool: pool, All: all, Resume: resume}}}); r.Code != OK {
			t.Fatalf("pause %q all=%v resume=%v: %+v", pool, all, resume, r)
		}
	}
	type want struct {
		pool  string
		size  sfq.Size
		n     int
		known bool
	}
	check := func(step string, wants ...want) {
		t.Helper()
		for _, w := range wants {
			if n, known := h.f.DispatchBudgetIn(w.pool, w.size, h.now); n != w.n || known != w.known {
				t.Errorf("%s: budget of pool %q size %s = %d, %v; want %d, %v", step, w.pool, w.size, n, known, w.n, w.known)
			}
		}
	}
	check("two md jobs in gpu",
		want{"gpu", sfq.MD, 2, true}, want{"gpu", sfq.LG, 2, true}, want{"gpu", sfq.SM, 0, true},
		want{"cpu", sfq.LG, 0, true}, want{"", sfq.LG, 0, true}, want{"default", sfq.LG, 0, true}, want{"eu", sfq.LG, 0, false})
	if got := h.f.DispatchBudget(sfq.LG, h.now); got != 0 {
		t.Errorf("the pool default's budget: %d, want 0", got)
	}
	h.one(submitIn("a", "cpu"))
	check("and one md job in cpu", want{"gpu", sfq.MD, 3, true}, want{"cpu", sfq.MD, 3, true}, want{"", sfq.MD, 0, true})
	pause("gpu", false, false)
	check("gpu paused", want{"gpu", sfq.MD, 0, true}, want{"cpu", sfq.MD, 3, true})
	pause("", true, false)
	check("all paused too", want{"gpu", sfq.MD, 0, true}, want{"cpu", sfq.MD, 0, true})
	pause("", true, true)
	pause("gpu", false, true)
	check("both resumed", want{"gpu", sfq.MD, 3, true}, want{"cpu", sfq.MD, 3, true})
}

// TestTopRowsPerPool: a tenant's line in a pool shows its queued and
// running jobs in that pool, not in the pool default (a line of pool gpu
// said queued 1 while the tenant had no queued job there).
func TestTopRowsPerPool(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	h.one(poolSet("gpu", nil, nil))
	h.one(submit("acme", "", 1000, ""))
	h.one(submitIn("acme", "gpu"))
	h.one(submitIn("acme", "gpu"))
	if r := h.one(dispatchIn("w1", "gpu", 1)); !r.Assigned {
		t.Fatalf("dispatch in gpu: %+v", r)
	}
	rows, _, _ := h.f.Top(60_000)
	got := map[string][2]uint32{}
	for _, r := range rows {
		if r.Name == "acme" {
			got[r.Pool] = [2]uint32{r.Queued, r.Running}
		}
	}
	want := map[string][2]uint32{"": {1, 0}, "gpu": {1, 1}}
	if len(got) != len(want) || got[""] != want[""] || got["gpu"] != want["gpu"] {
		t.Fatalf("acme's lines (pool: queued, running): %v, want %v", got, want)
	}
}
