package sfq

import (
	"fmt"
	"slices"
	"testing"
)

// TestRunsWithout: a worker that says it does not run a job's kind stops
// running that kind (or commands), whatever it ran before.
func TestRunsWithout(t *testing.T) {
	all := RunsAll()
	cases := []struct {
		name string
		from *Runs
		form JobForm
		kind string
		want Runs
	}{
		{"every job, a function", nil, FormFunction, "digest", Runs{Commands: true, AllKinds: true, Kinds: []string{"digest"}}},
		{"every job, a command", &all, FormCommand, "x", Runs{AllKinds: true}},
		{"listed kinds", &Runs{Kinds: []string{"a", "digest", "z"}}, FormFunction, "digest", Runs{Kinds: []string{"a", "z"}}},
		{"not listed", &Runs{Kinds: []string{"a"}}, FormFunction, "b", Runs{Kinds: []string{"a"}}},
		{"all but one, another", &Runs{AllKinds: true, Kinds: []string{"b"}}, FormFunction, "a", Runs{AllKinds: true, Kinds: []string{"a", "b"}}},
		{"a job of a build before kinds", &Runs{Commands: true}, FormAny, "a", Runs{Commands: true}},
	}
	for _, c := range cases {
		got := c.from.Without(c.form, c.kind)
		if got.Commands != c.want.Commands || got.AllKinds != c.want.AllKinds || !slices.Equal(got.Kinds, c.want.Kinds) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
		if got.RunsKind(c.kind) && c.form == FormFunction {
			t.Errorf("%s: still runs %q", c.name, c.kind)
		}
	}
	if !(*Runs)(nil).All() || !all.All() || (&Runs{Commands: true}).All() {
		t.Error("All: nil and RunsAll run every job; commands alone do not")
	}
}

// TestUnknownKindAndLose: a run that ends unknown_kind goes back to the
// queue with no failure and no bill, its estimate's charge refunded; a
// lost attempt goes back at once, counted as a failure only if it had
// started; a loss reported for another worker or attempt changes nothing.
func TestUnknownKindAndLose(t *testing.T) {
	s, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertTenant(TenantSpec{Name: "a", Tier: Gold}); err != nil {
		t.Fatal(err)
	}
	id, err := s.Submit(0, Submission{Tenant: "a", Type: "digest", Size: SM, EstCostMs: 1000, Form: FormFunction})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := s.Tenant("a")
	a, ok, err := s.DispatchFor(10, DefaultPool, SM, "w1", &Runs{Kinds: []string{"digest"}})
	if err != nil || !ok || a.Job != id {
		t.Fatalf("dispatch: %+v %v %v", a, ok, err)
	}
	if _, err := s.Start(20, id, a.Attempt, "w1"); err != nil {
		t.Fatal(err)
	}
	ch, err := s.Finish(30, id, a.Attempt, "w1", OutcomeUnknownKind, 500, RunResult{})
	if err != nil || ch.Outcome != Changed || ch.To != Queued {
		t.Fatalf("unknown_kind: %+v %v", ch, err)
	}
	j, _ := s.Job(id)
	after, _ := s.Tenant("a")
	if j.Failures != 0 || after.Billing.CPUMs != 0 || after.Tag(ClassNormal) != before.Tag(ClassNormal) {
		t.Fatalf("unknown_kind: failures %d, billed %d ms, tag %s (was %s)", j.Failures, after.Billing.CPUMs, after.Tag(ClassNormal), before.Tag(ClassNormal))
	}
	// Lost before it started: queued, no failure.
	a, _, _ = s.DispatchFor(40, DefaultPool, SM, "w1", nil)
	if ch, err := s.Lose(50, id, a.Attempt, "w2"); err == nil || ch.Outcome != Stale {
		t.Fatalf("a loss for another worker: %+v %v", ch, err)
	}
	if ch, err := s.Lose(50, id, a.Attempt, "w1"); err != nil || ch.To != Queued {
		t.Fatalf("lose an assigned job: %+v %v", ch, err)
	}
	if j, _ := s.Job(id); j.Failures != 0 {
		t.Fatalf("a lost assignment counted %d failures", j.Failures)
	}
	// Lost after it started: as a lost lease.
	a, _, _ = s.DispatchFor(60, DefaultPool, SM, "w1", nil)
	if _, err := s.Start(70, id, a.Attempt, "w1"); err != nil {
		t.Fatal(err)
	}
	if ch, err := s.Lose(80, id, a.Attempt-1, "w1"); err == nil || ch.Outcome != Stale {
		t.Fatalf("a loss of an older attempt: %+v %v", ch, err)
	}
	if ch, err := s.Lose(80, id, a.Attempt, "w1"); err != nil || ch.To != Queued {
		t.Fatalf("lose a running job: %+v %v", ch, err)
	}
	if j, _ := s.Job(id); j.Failures != 1 || j.Attempt != 3 {
		t.Fatalf("a lost run: %d failures at attempt %d, want 1 at 3", j.Failures, j.Attempt)
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestHasJobFor: whether a worker would get a job now, by its kinds,
// commands and size; a job of no form is every worker's; a job dispatched
// is no longer there.
func TestHasJobFor(t *testing.T) {
	s, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertTenant(TenantSpec{Name: "a", Tier: Gold}); err != nil {
		t.Fatal(err)
	}
	digestW, thumbW, commandW := &Runs{Kinds: []string{"digest", "resize"}}, &Runs{Kinds: []string{"thumbnail"}}, &Runs{Commands: true}
	check := func(when string, want [3]bool, ws Size) {
		t.Helper()
		got := [3]bool{s.HasJobFor(DefaultPool, ws, digestW), s.HasJobFor(DefaultPool, ws, thumbW), s.HasJobFor(DefaultPool, ws, commandW)}
		if got != want {
			t.Errorf("%s, worker size %s: digest, thumbnail, command workers %v, want %v", when, ws, got, want)
		}
	}
	check("nothing queued", [3]bool{}, LG)
	thumb, err := s.Submit(0, Submission{Tenant: "a", Type: "thumbnail", Size: MD, EstCostMs: 1000, Form: FormFunction})
	if err != nil {
		t.Fatal(err)
	}
	check("a thumbnail job of size md", [3]bool{false, true, false}, MD)
	check("a thumbnail job of size md", [3]bool{false, false, false}, SM)
	a, ok, err := s.DispatchFor(10, DefaultPool, MD, "t1", thumbW)
	if err != nil || !ok || a.Job != thumb {
		t.Fatalf("dispatch of the thumbnail job: %+v %v %v", a, ok, err)
	}
	check("the thumbnail job dispatched", [3]bool{false, false, false}, MD)
	if _, err := s.Submit(20, Submission{Tenant: "a", Type: "digest", Size: SM, EstCostMs: 1000, Form: FormCommand}); err != nil {
		t.Fatal(err)
	}
	check("a command job", [3]bool{false, false, true}, SM)
	if _, err := s.Submit(20, Submission{Tenant: "a", Type: "x", Size: SM, EstCostMs: 1000}); err != nil {
		t.Fatal(err)
	}
	check("and a job of no form", [3]bool{true, true, true}, SM)
	if s.HasJobFor(PoolID(7), LG, nil) {
		t.Error("a pool that does not exist holds a job")
	}
}

// BenchmarkHasJobFor: the leader's check, per ready worker of some kinds
// and per dispatch round, that it would get a job: 40 routes of 10 kinds
// queued (4 classes each), none the worker's.
func BenchmarkHasJobFor(b *testing.B) {
	s, err := New(DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.UpsertTenant(TenantSpec{Name: "a", Tier: Gold, MaxClass: ClassCritical}); err != nil {
		b.Fatal(err)
	}
	for k := range 10 {
		for c := range Class(NumClasses) {
			if _, err := s.Submit(0, Submission{Tenant: "a", Type: fmt.Sprintf("kind-%d", k), Size: SM, EstCostMs: 1000, Class: c, Form: FormFunction}); err != nil {
				b.Fatal(err)
			}
		}
	}
	w := &Runs{Kinds: []string{"other-1", "other-2"}}
	b.ReportAllocs()
	for b.Loop() {
		if s.HasJobFor(DefaultPool, LG, w) {
			b.Fatal("a job of the worker's kinds")
		}
	}
}
