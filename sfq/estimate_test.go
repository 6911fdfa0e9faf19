package sfq

import (
	"fmt"
	"testing"
)

// TestEMASequence pins the moving average: completions of 1000, 3000, 2000
// and 500 ms give exactly 1000, 1250, 1343 and 1237 (each step floors
// toward -inf; truncation would give 1238), and estimate=auto switches a
// submit from its stated cost to the average at the third completion.
func TestEMASequence(t *testing.T) {
	if got := emaStep(1343, 500); got != 1237 {
		t.Fatalf("emaStep(1343, 500) = %d", got)
	}
	if got := emaStep(0, -9); got != -2 {
		t.Fatalf("emaStep(0, -9) = %d, want floor(-9/8) = -2", got)
	}
	cfg := DefaultConfig()
	cfg.Estimate = EstimateAuto
	s, _ := New(cfg)
	s.UpsertTenant(TenantSpec{Name: "a", Tier: Gold})
	want := []struct {
		cpu, ema int64
		src      EstSource
	}{{1000, 1000, EstFromSubmit}, {3000, 1250, EstFromSubmit}, {2000, 1343, EstFromSubmit}, {500, 1237, EstFromEMA}}
	for i, w := range want {
		id, err := s.Submit(Time(i), Submission{Tenant: "a", Type: "render", Size: SM, EstCostMs: 5000})
		if err != nil {
			t.Fatal(err)
		}
		if j, _ := s.Job(id); j.EstSource != w.src || (w.src == EstFromSubmit && j.EstCostMs != 5000) || (w.src == EstFromEMA && j.EstCostMs != 1343) {
			t.Fatalf("job %d: est %d from %s", id, j.EstCostMs, j.EstSource)
		}
		a, _, _ := s.Dispatch(Time(i), SM, "w")
		if _, err := s.Finish(Time(i), a.Job, a.Attempt, "w", OutcomeOK, w.cpu, RunResult{}); err != nil {
			t.Fatal(err)
		}
		st, ok := s.Estimate("a", "render")
		if !ok || st.EMAMs != w.ema || st.Samples != uint32(i+1) || st.UpdatedAt != Time(i) {
			t.Fatalf("after %d ms: %+v, want ema %d", w.cpu, st, w.ema)
		}
	}
	// A failed run, a cancelled one and a zombie teach nothing.
	for _, o := range []FinishOutcome{OutcomeFailed, OutcomeCancelled} {
		id, _ := s.Submit(9, Submission{Tenant: "a", Type: "render", Size: SM, MaxAttempts: 1})
		a, _, _ := s.Dispatch(9, SM, "w")
		if a.Job != id {
			t.Fatalf("dispatched %d, want %d", a.Job, id)
		}
		s.Finish(9, id, a.Attempt, "w", o, 1, RunResult{})
	}
	if st, _ := s.Estimate("a", "render"); st.EMAMs != 1237 || st.Samples != 4 {
		t.Fatalf("after failed runs: %+v", st)
	}
	// estimate=submitted ignores the average and wants a cost.
	cfg.Estimate = EstimateSubmitted
	s.SetConfig(cfg)
	if _, err := s.Submit(10, Submission{Tenant: "a", Type: "render", Size: SM}); err == nil || err.Error() != "est_cost_ms: must be positive (got 0); it may be left out only while the cluster's estimate is auto" {
		t.Fatalf("no cost under estimate=submitted: %v", err)
	}
	id, _ := s.Submit(10, Submission{Tenant: "a", Type: "render", Size: SM, EstCostMs: 7})
	if j, _ := s.Job(id); j.EstCostMs != 7 || j.EstSource != EstFromSubmit {
		t.Fatalf("submitted mode: %+v", j)
	}
}

// TestEstimateEviction: a tenant keeps at most MaxJobTypes types; a new
// one evicts the type updated longest ago, then the lowest name. A restored
// scheduler evicts and reuses slots exactly as the original.
func TestEstimateEviction(t *testing.T) {
	s, _ := New(DefaultConfig())
	s.UpsertTenant(TenantSpec{Name: "a", Tier: Gold})
	s.UpsertTenant(TenantSpec{Name: "b", Tier: Gold})
	learn := func(s *Scheduler, tenant string, typ string, now Time) {
		t.Helper()
		id, err := s.Submit(now, Submission{Tenant: tenant, Type: typ, Size: SM, EstCostMs: 1})
		if err != nil {
			t.Fatal(err)
		}
		a, ok, _ := s.Dispatch(now, SM, "w")
		if !ok || a.Job != id {
			t.Fatalf("dispatch: %+v", a)
		}
		if _, err := s.Finish(now, id, a.Attempt, "w", OutcomeOK, 100, RunResult{}); err != nil {
			t.Fatal(err)
		}
	}
	// Types t0000..t0999 at time 1, except t0500 and t0007 updated at 0:
	// those two are the oldest; t0007 is the lower name.
	for i := range MaxJobTypes {
		now := Time(1)
		if i == 500 || i == 7 {
			now = 0
		}
		learn(s, "a", fmt.Sprintf("t%04d", i), now)
	}
	learn(s, "b", "x", 1)
	twin, err := decodeBytes(encodeView(s.Freeze()))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Scheduler{s, twin} {
		learn(s, "a", "new1", 2)
		if _, ok := s.Estimate("a", "t0007"); ok {
			t.Fatal("t0007 (oldest, lowest name) was kept")
		}
		if _, ok := s.Estimate("a", "t0500"); !ok {
			t.Fatal("t0500 was dropped first")
		}
		learn(s, "a", "new2", 2)
		if _, ok := s.Estimate("a", "t0500"); ok {
			t.Fatal("t0500 was kept")
		}
		if _, ok := s.Estimate("b", "x"); !ok {
			t.Fatal("another tenant's type was dropped")
		}
		if n := len(s.rt[0].types); n != MaxJobTypes {
			t.Fatalf("tenant a has %d types", n)
		}
		if err := s.Verify(); err != nil {
			t.Fatal(err)
		}
	}
	if s.Hash() != twin.Hash() {
		t.Fatal("the restored scheduler evicted or placed differently")
	}
	// Deleting a tenant forgets its types; a revived tenant starts empty.
	s.DeleteTenant("b")
	if _, err := s.UpsertTenant(TenantSpec{Name: "b"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Estimate("b", "x"); ok {
		t.Fatal("a revived tenant kept its estimates")
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
}
