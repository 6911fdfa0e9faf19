package fsm

import (
	"bufio"
	"bytes"
	"slices"
	"testing"

	"pgregory.net/rapid"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

func markedTenant(name string, tier pb.Tier, export bool) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: name, Tier: tier, ExportMetrics: export}}}
}

// run dispatches, starts and finishes the next md job on w1 with cpu ms.
func (h *harness) run(cpu int64) {
	h.t.Helper()
	d := h.one(dispatch("w1", uint64(h.index)))
	if !d.Assigned {
		h.t.Fatalf("nothing dispatched: %+v", d)
	}
	h.one(started(uint64(d.Job), d.Attempt, "w1"))
	if r := h.one(finished(uint64(d.Job), d.Attempt, "w1", cpu)); r.Code != OK {
		h.t.Fatalf("finished: %+v", r)
	}
}

func names(v MetricsView) []string {
	var out []string
	for _, t := range v.Tenants {
		out = append(out, t.Name)
	}
	return out
}

func tenantCounters(t *testing.T, v MetricsView, name string) Counters {
	t.Helper()
	for _, m := range v.Tenants {
		if m.Name == name {
			return m.Counters
		}
	}
	t.Fatalf("no series for tenant %q in %v", name, names(v))
	return Counters{}
}

// TestMetricsCountersSurviveTierMoveAndDelete: moving a tenant to another
// tier changes neither tier's counters; later work counts in the new tier;
// deleting a tenant keeps its work in its tier; a new tenant of the same
// name continues the name's series.
func TestMetricsCountersSurviveTierMoveAndDelete(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("a", pb.Tier_GOLD))
	h.one(submit("a", "", 1000, "x"))
	h.one(submit("a", "", 3000, "y"))
	h.run(2500)
	first := Counters{Dispatches: 1, DispatchedCostMs: 1000, CPUMs: 2500, Completed: 1}
	v := h.f.Metrics(10)
	if got := v.Tiers[sfq.Gold].Counters; got != first {
		t.Fatalf("gold after one run: %+v, want %+v", got, first)
	}

	h.one(tenant("a", pb.Tier_SILVER))
	v = h.f.Metrics(10)
	if got := v.Tiers[sfq.Gold].Counters; got != first {
		t.Fatalf("gold after the move: %+v, want %+v", got, first)
	}
	if got := v.Tiers[sfq.Silver].Counters; got != (Counters{}) {
		t.Fatalf("silver after the move: %+v, want zero", got)
	}
	if got := tenantCounters(t, v, "a"); got != first {
		t.Fatalf("a after the move: %+v, want %+v", got, first)
	}
	if v.Tiers[sfq.Gold].Tenants != 0 || v.Tiers[sfq.Silver].Tenants != 1 || v.Tiers[sfq.Silver].Queued[sfq.MD] != 1 {
		t.Fatalf("tier gauges after the move: gold %+v silver %+v", v.Tiers[sfq.Gold], v.Tiers[sfq.Silver])
	}

	h.run(700)
	second := Counters{Dispatches: 1, DispatchedCostMs: 3000, CPUMs: 700, Completed: 1}
	both := Counters{Dispatches: 2, DispatchedCostMs: 4000, CPUMs: 3200, Completed: 2}
	v = h.f.Metrics(10)
	if got := v.Tiers[sfq.Gold].Counters; got != first {
		t.Fatalf("gold after the second run: %+v, want %+v", got, first)
	}
	if got := v.Tiers[sfq.Silver].Counters; got != second {
		t.Fatalf("silver after the second run: %+v, want %+v", got, second)
	}

	if r := h.one(deleteTenant("a")); r.Code != OK {
		t.Fatalf("delete: %+v", r)
	}
	v = h.f.Metrics(10)
	if len(v.Tenants) != 0 || v.Tiers[sfq.Gold].Counters != first || v.Tiers[sfq.Silver].Counters != second {
		t.Fatalf("after the delete: tenants %v gold %+v silver %+v", names(v), v.Tiers[sfq.Gold].Counters, v.Tiers[sfq.Silver].Counters)
	}

	h.one(tenant("a", pb.Tier_FREE))
	v = h.f.Metrics(10)
	if got := tenantCounters(t, v, "a"); got != both {
		t.Fatalf("new a: %+v, want the name's %+v", got, both)
	}
	if v.Tiers[sfq.Gold].Counters != first || v.Tiers[sfq.Silver].Counters != second || v.Tiers[sfq.Free].Counters != (Counters{}) {
		t.Fatalf("tiers after re-creating a: %+v", v.Tiers)
	}
	// The carries survive a snapshot.
	frozen, err := h.f.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	b := New()
	if err := b.Restore(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(encodeFSM(frozen)))), h.index); err != nil {
		t.Fatal(err)
	}
	if got := b.Metrics(10); got.Tiers != v.Tiers {
		t.Fatalf("restored tiers %+v, want %+v", got.Tiers, v.Tiers)
	}
}

// TestMetricsMembership: every live tenant has its own series while there
// are at most maxTenants; beyond, only the marked ones. Only upserts and
// deletes change the set.
func TestMetricsMembership(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("a", pb.Tier_GOLD))
	h.one(markedTenant("b", pb.Tier_FREE, false))
	check := func(what string, max int, want ...string) {
		t.Helper()
		if got := names(h.f.Metrics(max)); !slices.Equal(got, want) {
			t.Fatalf("%s, max %d: series for %v, want %v", what, max, got, want)
		}
	}
	check("two tenants", 2, "a", "b")
	check("two tenants", 1)
	check("two tenants", 0)
	h.one(markedTenant("c", pb.Tier_SILVER, true))
	check("three, c marked", 2, "c")
	check("three, c marked", 3, "a", "b", "c")
	h.one(markedTenant("a", pb.Tier_GOLD, true))
	check("a marked too", 2, "a", "c")
	// Load changes nothing.
	h.one(submit("b", "", 1000, "x"))
	h.run(100)
	check("after work", 2, "a", "c")
	h.one(markedTenant("a", pb.Tier_GOLD, false))
	check("a unmarked", 2, "c")
	h.one(deleteTenant("c"))
	check("c deleted", 2, "a", "b")
	check("c deleted", 1)
	// A new tenant of a marked tenant's name is not marked.
	h.one(tenant("c", pb.Tier_SILVER))
	check("c re-created", 2)

	var flags []bool
	h.f.ReadTenants(func(s *sfq.Scheduler, x TenantFlags) {
		s.Tenants(func(i uint32, _ *sfq.Tenant) bool { flags = append(flags, x.ExportMetrics(i)); return true })
	})
	if !slices.Equal(flags, []bool{false, false, false}) {
		t.Fatalf("flags %v", flags)
	}
}

// TestMetricsCountersNeverDecrease: over random command streams, no tier
// counter and no counter of a tenant name with its own series ever
// decreases, and the marked set holds only live tenants.
func TestMetricsCountersNeverDecrease(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := NewLatest()
		now := int64(1000)
		var prev MetricsView
		for i := 0; i < 200; i++ {
			now += rapid.Int64Range(0, 20_000).Draw(t, "dt")
			cmds := []*clusterpb.Command{tenant("a", pb.Tier_GOLD), tenant("b", pb.Tier_FREE), tenant("c", pb.Tier_SILVER)}
			if i > 0 {
				jobs, _ := f.Counts()
				cmds = []*clusterpb.Command{randomCommand(t, uint64(jobs)+1)}
			}
			if _, err := f.ApplyEnvelope(uint64(i+1), &clusterpb.Envelope{Version: Version, StampMs: now, Commands: cmds}); err != nil {
				t.Fatal(err)
			}
			if err := f.Verify(); err != nil {
				t.Fatal(err)
			}
			v := f.Metrics(1 << 30)
			for tier := range v.Tiers {
				if !atLeast(v.Tiers[tier].Counters, prev.Tiers[tier].Counters) {
					t.Fatalf("step %d: tier %v went from %+v to %+v", i, sfq.Tier(tier), prev.Tiers[tier].Counters, v.Tiers[tier].Counters)
				}
			}
			was := map[string]Counters{}
			for _, m := range prev.Tenants {
				was[m.Name] = m.Counters
			}
			for _, m := range v.Tenants {
				if c, ok := was[m.Name]; ok && !atLeast(m.Counters, c) {
					t.Fatalf("step %d: tenant %s went from %+v to %+v", i, m.Name, c, m.Counters)
				}
			}
			prev = v
			// Beyond the bound: exactly the marked live tenants.
			var marked []string
			f.ReadTenants(func(s *sfq.Scheduler, x TenantFlags) {
				s.Tenants(func(i uint32, t *sfq.Tenant) bool {
					if x.ExportMetrics(i) {
						marked = append(marked, t.Name)
					}
					return true
				})
			})
			if got := names(f.Metrics(0)); !slices.Equal(got, marked) {
				t.Fatalf("step %d: series beyond the bound %v, marked %v", i, got, marked)
			}
		}
	})
}

func atLeast(a, b Counters) bool {
	x, y := a.fields(), b.fields()
	for i := range x {
		if *x[i] < *y[i] {
			return false
		}
	}
	return true
}
