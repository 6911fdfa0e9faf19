package fsm

import (
	"bufio"
	"bytes"
	"fmt"
	"sync"
	"testing"

	"pgregory.net/rapid"

	"github.com/baristahq/barista/internal/text"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

func setResource(name string, capacity uint32, tenantMax *uint32) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_ResourceSet{ResourceSet: &clusterpb.ResourceSet{Name: name, Capacity: &capacity, TenantMax: tenantMax}}}
}

func resourceLimit(name, tenant string, max *uint32) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_ResourceSet{ResourceSet: &clusterpb.ResourceSet{Name: name, Tenant: tenant, Max: max}}}
}

func resourceDelete(name string) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_ResourceDelete{ResourceDelete: &clusterpb.ResourceDelete{Name: name}}}
}

func submitUses(tenant, key string, uses ...*pb.ResourceUse) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: tenant, IdempotencyKey: key, Size: pb.Size_MD,
		EstCostMs: 1000, Uses: uses}}}
}

func use(name string, units uint32) *pb.ResourceUse {
	return &pb.ResourceUse{Resource: name, Units: units}
}

// TestResourceCommands: each refusal of ResourceSet, ResourceDelete and
// a submit's uses, with its code, field and reason, the same from Admit
// (the leader's check) as from Apply; a set that changes nothing is a
// duplicate.
func TestResourceCommands(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	for _, tc := range []struct {
		name   string
		cmd    *clusterpb.Command
		code   Code
		field  string
		reason string
	}{
		{"bad name", setResource("Open AI", 4, nil), Invalid, "resource", ""},
		{"no capacity", &clusterpb.Command{Cmd: &clusterpb.Command_ResourceSet{ResourceSet: &clusterpb.ResourceSet{Name: "api"}}}, Invalid, "capacity", ""},
		{"capacity too large", setResource("api", 1_000_001, nil), Invalid, "capacity", ""},
		{"tenant_max too large", setResource("api", 4, new(uint32(1_000_001))), Invalid, "tenant_max", ""},
		{"limit of unknown resource", resourceLimit("api", "acme", new(uint32(1))), NotFound, "resource", text.ReasonResourceUnknown},
		{"delete unknown", resourceDelete("api"), NotFound, "resource", text.ReasonResourceUnknown},
		{"uses unknown", submitUses("acme", "", use("api", 1)), NotFound, "resource", text.ReasonResourceUnknown},
		{"uses 0 units", submitUses("acme", "", use("api", 0)), Invalid, "uses", ""},
		{"uses twice", submitUses("acme", "", use("api", 1), use("api", 2)), Invalid, "uses", ""},
		{"uses 9", submitUses("acme", "", use("a1", 1), use("a2", 1), use("a3", 1), use("a4", 1), use("a5", 1), use("a6", 1), use("a7", 1), use("a8", 1), use("a9", 1)), Invalid, "uses", ""},
	} {
		admit := h.f.Admit(tc.cmd)
		got := h.one(tc.cmd)
		if got.Code != tc.code || got.Field != tc.field || got.Reason != tc.reason {
			t.Errorf("%s: %v %q %q (%s), want %v %q %q", tc.name, got.Code, got.Field, got.Reason, got.Msg, tc.code, tc.field, tc.reason)
		}
		if admit.Code != got.Code || admit.Msg != got.Msg {
			t.Errorf("%s: Admit says %v %q, Apply %v %q", tc.name, admit.Code, admit.Msg, got.Code, got.Msg)
		}
	}
	if r := h.one(setResource("api", 4, new(uint32(3)))); r.Code != OK || !r.Created {
		t.Fatalf("set: %+v", r)
	}
	if r := h.f.Admit(setResource("api", 4, new(uint32(3)))); r.Outcome != sfq.Duplicate {
		t.Fatalf("the same set again: %+v, want a duplicate", r)
	}
	if r := h.one(submitUses("acme", "", use("api", 5))); r.Code != Invalid || r.Field != "uses" {
		t.Fatalf("5 units of a resource of capacity 4: %+v", r)
	}
	if r := h.one(resourceLimit("api", "nobody", new(uint32(1)))); r.Code != NotFound || r.Reason != text.ReasonTenantUnknown {
		t.Fatalf("a limit of an unknown tenant: %+v", r)
	}
	if r := h.one(resourceLimit("api", "acme", new(uint32(1)))); r.Code != OK || r.Outcome != sfq.Changed {
		t.Fatalf("acme's own limit: %+v", r)
	}
	if r := h.f.Admit(resourceLimit("api", "acme", new(uint32(1)))); r.Outcome != sfq.Duplicate {
		t.Fatalf("acme's own limit again: %+v, want a duplicate", r)
	}
	job := h.one(submitUses("acme", "", use("api", 1))).Job
	if r := h.one(resourceDelete("api")); r.Code != FailedPrecondition {
		t.Fatalf("delete of a resource a queued job uses: %+v", r)
	}
	h.one(cancelJob("acme", uint64(job)))
	if r := h.one(resourceDelete("api")); r.Code != OK {
		t.Fatalf("delete: %+v", r)
	}
	if n := h.f.sched.ResourceCount(); n != 0 {
		t.Fatalf("%d resources after the delete", n)
	}
}

// TestResourcesNeedLevel8: every resource command, a submit that uses a
// resource and the settings of resources are refused below level 8,
// naming what needs it.
func TestResourcesNeedLevel8(t *testing.T) {
	h := &harness{t: t, f: newAt(Level7), now: 1_000}
	h.one(tenant("acme", pb.Tier_GOLD))
	for _, tc := range []struct {
		cmd  *clusterpb.Command
		what string
	}{
		{setResource("api", 4, nil), "ResourceSet"},
		{resourceDelete("api"), "ResourceDelete"},
		{submitUses("acme", "", use("api", 1)), "uses"},
		{setConfigWith(func(p *pb.SchedulerConfig) { p.ResourceReserveAfterMs = new(int64(1000)) }), "resource_reserve_after"},
		{setConfigWith(func(p *pb.SchedulerConfig) { p.MaxResources = 10 }), "max_resources"},
	} {
		r := h.one(tc.cmd)
		if r.Code != FailedPrecondition || r.Reason != text.ReasonFeatureLevel || r.Msg != LevelMessage(tc.what, Level8, Level7) {
			t.Errorf("%s at level 7: %+v", tc.what, r)
		}
	}
	// The default settings, as a SetConfig of this build sends them, pass.
	if r := h.one(setConfigWith(func(*pb.SchedulerConfig) {})); r.Code != OK {
		t.Fatalf("a SetConfig with the default settings of resources at level 7: %+v", r)
	}
}

// TestResourceSettings: resource_reserve_after and max_resources go
// through SetConfig (absent: the defaults) and bound what they bound.
func TestResourceSettings(t *testing.T) {
	h := newHarness(t)
	if r := h.one(setConfigWith(func(p *pb.SchedulerConfig) { p.ResourceReserveAfterMs, p.MaxResources = new(int64(0)), 2 })); r.Code != OK {
		t.Fatalf("set: %+v", r)
	}
	if got := h.f.Config().Sched; got.ResourceReserveAfterMs != 0 || got.MaxResources != 2 {
		t.Fatalf("config %d %d", got.ResourceReserveAfterMs, got.MaxResources)
	}
	h.one(setResource("a", 1, nil))
	h.one(setResource("b", 1, nil))
	if r := h.one(setResource("c", 1, nil)); r.Code != ResourceExhausted || r.Reason != text.ReasonQuotaExceeded {
		t.Fatalf("a third resource under max_resources 2: %+v", r)
	}
	if r := h.one(setResource("a", 3, nil)); r.Code != OK {
		t.Fatalf("a change of a declared resource at max_resources: %+v", r)
	}
	if r := h.one(setConfigWith(func(p *pb.SchedulerConfig) { p.ResourceReserveAfterMs = new(int64(8 * 24 * 3600 * 1000)) })); r.Code != Invalid || r.Field != "resource_reserve_after" {
		t.Fatalf("8 days: %+v", r)
	}
	p := ConfigToPB(h.f.Config())
	if p.ResourceReserveAfterMs == nil || *p.ResourceReserveAfterMs != 0 || p.MaxResources != 2 {
		t.Fatalf("ConfigToPB: %v %d", p.ResourceReserveAfterMs, p.MaxResources)
	}
}

// TestResourceDispatchAndExplain: units are held from dispatch until the
// run ends; a head blocked by a resource is passed over; explain names
// the resource; a decrease preempts nothing.
func TestResourceDispatchAndExplain(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	h.one(setResource("api", 1, nil))
	a := h.one(submitUses("acme", "", use("api", 1))).Job
	b := h.one(submitUses("acme", "", use("api", 1))).Job
	c := h.one(submit("acme", "", 1000, "")).Job
	if r := h.one(dispatch("w1", 1)); r.Job != a {
		t.Fatalf("w1 got %d, want %d", r.Job, a)
	}
	if r := h.one(dispatch("w2", 1)); r.Job != c {
		t.Fatalf("w2 got %d, want %d (b passed over)", r.Job, c)
	}
	reason, _, err := h.f.Explain(b)
	if err != nil || reason.Format() != "reason=resource name=api held=1 capacity=1" {
		t.Fatalf("explain b: %q %v", reason.Format(), err)
	}
	h.one(setResource("api", 0, nil)) // a decrease below held: a keeps its unit
	if info, _ := h.f.sched.Resource("api"); info.Held != 1 || info.Capacity != 0 {
		t.Fatalf("after the decrease: %+v", info)
	}
	h.one(setResource("api", 1, nil))
	h.one(started(uint64(a), 1, "w1"))
	h.one(finished(uint64(a), 1, "w1", 10))
	if r := h.one(dispatch("w1", 2)); r.Job != b {
		t.Fatalf("w1 got %d, want %d once a's unit is free", r.Job, b)
	}
}

// TestResourceUsesDigest: a keyed resend with other uses is other
// content; the same uses in another order are the same; a submit without
// uses keeps its digest.
func TestResourceUsesDigest(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	h.one(setResource("api", 4, nil))
	h.one(setResource("db", 4, nil))
	first := h.one(submitUses("acme", "k", use("api", 1), use("db", 2)))
	if r := h.one(submitUses("acme", "k", use("db", 2), use("api", 1))); r.Code != OK || r.Job != first.Job || r.Created {
		t.Fatalf("the same uses in another order: %+v", r)
	}
	if r := h.one(submitUses("acme", "k", use("api", 2), use("db", 2))); r.Code != AlreadyExists || r.Reason != text.ReasonKeyConflict {
		t.Fatalf("other uses under the same key: %+v", r)
	}
	plain := submit("acme", "p", 1000, "").GetSubmit()
	if submitDigest(plain) != submitDigest(&clusterpb.SubmitJob{Tenant: "acme", IdempotencyKey: "p", Size: pb.Size_MD, EstCostMs: 1000, Uses: []*pb.ResourceUse{}}) {
		t.Fatal("empty uses changed the digest")
	}
}

// TestResourceStateVersions: a state at level 8 without resources is
// written as before (11, or 12 with schedules); with a resource, its
// settings changed, or a job using one, as 13; each reads back to the
// same hash, and a state of version 12 holding resources is refused.
func TestResourceStateVersions(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	h.one(submit("acme", "", 1000, ""))
	version := func() int { v, _ := h.f.Freeze(); return v.StateVersion() }
	if v := version(); v != stateVersionLevel8 {
		t.Fatalf("without resources: version %d", v)
	}
	h.one(setConfigWith(func(p *pb.SchedulerConfig) { p.MaxResources = 5 }))
	if v := version(); v != stateVersionResources {
		t.Fatalf("with max_resources set: version %d", v)
	}
	h.one(setConfigWith(func(p *pb.SchedulerConfig) {}))
	if v := version(); v != stateVersionLevel8 {
		t.Fatalf("settings back at their defaults: version %d", v)
	}
	h.one(setResource("api", 2, new(uint32(1))))
	h.one(resourceLimit("api", "acme", new(uint32(2))))
	h.one(submitUses("acme", "", use("api", 1)))
	h.one(dispatch("w1", 1))
	h.one(dispatch("w2", 1))
	if v := version(); v != stateVersionResources {
		t.Fatalf("with a resource: version %d", v)
	}
	v, _ := h.f.Freeze()
	snap := encodeFSM(v)
	b := New()
	if err := b.Restore(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(snap))), h.index); err != nil {
		t.Fatal(err)
	}
	ha, _ := h.f.Hash()
	hb, _ := b.Hash()
	if ha != hb || b.Level() != Level8 {
		t.Fatalf("restored: hash %x vs %x, level %d", hb, ha, b.Level())
	}
	if info, _ := b.sched.Resource("api"); info.Held != 1 || info.TenantMax != 1 || len(info.Limits) != 1 || info.Limits[0].Max != 2 {
		t.Fatalf("restored resource: %+v", info)
	}
	// The same bytes labelled version 12 do not read.
	bad := append([]byte(nil), snap...)
	bad[0] = stateVersionSchedules
	if err := New().Restore(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(bad))), h.index); err == nil {
		t.Fatal("a state of version 12 holding resources was read")
	}
}

// TestResourceSnapshotRoundTrip: random streams of resource commands,
// submits that use them, dispatches and ends at level 8; a state
// restored from a snapshot taken at a random point, fed the rest, ends
// with the same hash, and Verify (rule 13's counters) holds throughout.
func TestResourceSnapshotRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := NewLatest()
		var log []*clusterpb.Envelope
		n := rapid.IntRange(1, 120).Draw(t, "n")
		cut := rapid.IntRange(0, n).Draw(t, "cut")
		var snap []byte
		now := int64(1000)
		for i := 0; i < n; i++ {
			if i == cut {
				v, err := a.Freeze()
				if err != nil {
					t.Fatal(err)
				}
				snap = encodeFSM(v)
			}
			now += rapid.Int64Range(0, 40_000).Draw(t, "dt")
			cmds := []*clusterpb.Command{tenant("a", pb.Tier_GOLD), tenant("b", pb.Tier_FREE)}
			if i > 0 {
				jobs, _ := a.Counts()
				cmds = []*clusterpb.Command{randomResourceCommand(t, uint64(jobs)+1)}
			}
			env := &clusterpb.Envelope{Version: Version, StampMs: now, Commands: cmds}
			log = append(log, env)
			if _, err := a.ApplyEnvelope(uint64(i+1), env); err != nil {
				t.Fatal(err)
			}
			if err := a.Verify(); err != nil {
				t.Fatal(err)
			}
		}
		if snap != nil {
			checkRestored(t, a, snap, cut, log)
		}
	})
}

func randomResourceCommand(t *rapid.T, jobs uint64) *clusterpb.Command {
	names := []string{"api", "lic"}
	tenants := []string{"a", "b"}
	workers := []string{"w1", "w2", "w3"}
	job := rapid.Uint64Range(1, max(jobs, 1)).Draw(t, "job")
	worker := rapid.SampledFrom(workers).Draw(t, "worker")
	switch rapid.IntRange(0, 9).Draw(t, "kind") {
	case 0:
		var tm *uint32
		if rapid.Bool().Draw(t, "hasmax") {
			tm = new(uint32(rapid.IntRange(0, 2).Draw(t, "tenantmax")))
		}
		return setResource(rapid.SampledFrom(names).Draw(t, "name"), uint32(rapid.IntRange(0, 3).Draw(t, "capacity")), tm)
	case 1:
		var m *uint32
		if rapid.Bool().Draw(t, "hasown") {
			m = new(uint32(rapid.IntRange(0, 2).Draw(t, "own")))
		}
		return resourceLimit(rapid.SampledFrom(names).Draw(t, "name"), rapid.SampledFrom(tenants).Draw(t, "tenant"), m)
	case 2:
		return resourceDelete(rapid.SampledFrom(names).Draw(t, "name"))
	case 3:
		return setConfigWith(func(p *pb.SchedulerConfig) {
			p.ResourceReserveAfterMs = new(rapid.SampledFrom([]int64{0, 30_000, 60_000}).Draw(t, "reserve"))
		})
	case 4, 5:
		var uses []*pb.ResourceUse
		for _, n := range names {
			if rapid.Bool().Draw(t, "uses"+n) {
				uses = append(uses, use(n, uint32(rapid.IntRange(1, 2).Draw(t, "units"+n))))
			}
		}
		return submitUses(rapid.SampledFrom(tenants).Draw(t, "tenant"), "", uses...)
	case 6, 7:
		return dispatch(worker, rapid.Uint64Range(1, 1000).Draw(t, "credit"))
	case 8:
		return started(job, uint32(rapid.IntRange(1, 2).Draw(t, "attempt")), worker)
	}
	return &clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: job, Attempt: uint32(rapid.IntRange(1, 2).Draw(t, "attempt")),
		WorkerId: worker, Outcome: pb.Outcome(rapid.IntRange(1, 3).Draw(t, "outcome")), CpuMs: 10}}}
}

// TestResourceEligibilityConcurrentReads: while a resource binds, the
// eligibility reads of the leader's dispatch loops (DispatchBudgetIn,
// HasEligibleIn) run a pick, which writes its marks and caches: run side
// by side they must not race (go test -race) and each gets the answer of
// the pick alone.
func TestResourceEligibilityConcurrentReads(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	h.one(tenant("beta", pb.Tier_GOLD))
	h.one(setResource("api", 1, nil))
	for range 3 {
		h.one(submitUses("acme", "", use("api", 1)))
		h.one(submitUses("beta", "", use("api", 1)))
	}
	if r := h.one(dispatch("w1", 1)); r.Job == 0 {
		t.Fatalf("dispatch: %+v", r)
	}
	h.one(submit("beta", "", 1000, "")) // one job the full resource does not hold back
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if n, known := h.f.DispatchBudgetIn("", sfq.MD, 0); n == 0 || !known {
					errs <- fmt.Sprintf("reader %d: budget %d known %v", g, n, known)
					return
				}
				if !h.f.HasEligibleIn("", sfq.MD) {
					errs <- fmt.Sprintf("reader %d: nothing eligible", g)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
