package sfq

import (
	"errors"
	"strings"
	"testing"
)

// redriveWorld is a scheduler with tenants acme (gold) and beta (free).
func redriveWorld(t *testing.T) *Scheduler {
	t.Helper()
	s, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []TenantSpec{{Name: "acme", Tier: Gold}, {Name: "beta", Tier: Free}} {
		if _, err := s.UpsertTenant(spec); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func mustVerify(t *testing.T, s *Scheduler, what string) {
	t.Helper()
	if err := s.Verify(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// failOnce dispatches the next sm job and fails its run.
func failOnce(t *testing.T, s *Scheduler, now Time, worker string) JobID {
	t.Helper()
	a, ok, err := s.Dispatch(now, SM, worker)
	if err != nil || !ok {
		t.Fatalf("dispatch: %v %v", ok, err)
	}
	if _, err := s.Finish(now, a.Job, a.Attempt, worker, OutcomeFailed, 10, RunResult{ExitCode: 3}); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, s, "after a failed run")
	return a.Job
}

// TestRedriveCore: a job failed three times goes back to its tenant's
// queue first (its ID's place, before a younger job), with failures 0 and
// its attempt counting on (the next dispatch is attempt 4); the dead
// letter counts follow; a completed or queued job is refused.
func TestRedriveCore(t *testing.T) {
	s := redriveWorld(t)
	old, err := s.Submit(1000, Submission{Tenant: "acme", Size: SM, EstCostMs: 1000, Payload: "12345"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if got := failOnce(t, s, Time(2000+i), "w1"); got != old {
			t.Fatalf("run %d took job %d", i, got)
		}
	}
	j, _ := s.Job(old)
	if j.State != Failed || j.Attempt != 3 || j.Failures != 3 || j.EndedAt != 2002 {
		t.Fatalf("after 3 failures: %+v", j.Life)
	}
	if n, b := s.DeadLetterCount(0); n != 1 || b != 5 {
		t.Fatalf("dead letters %d (%d bytes), want 1 (5)", n, b)
	}
	young, _ := s.Submit(3000, Submission{Tenant: "acme", Size: SM, EstCostMs: 1000})
	ch, err := s.Redrive(4000, old, 5)
	if err != nil || ch.Outcome != Changed || ch.From != Failed || ch.To != Queued {
		t.Fatalf("redrive: %+v %v", ch, err)
	}
	mustVerify(t, s, "after the redrive")
	j, _ = s.Job(old)
	if j.State != Queued || j.Failures != 0 || j.Attempt != 3 || j.MaxAttempts != 5 || j.EndedAt != 0 || j.Worker != "" {
		t.Fatalf("redriven: %+v", j.Life)
	}
	if n, b := s.DeadLetterCount(0); n != 0 || b != 0 {
		t.Fatalf("dead letters after redrive %d (%d bytes)", n, b)
	}
	a, ok, err := s.Dispatch(5000, SM, "w2")
	if err != nil || !ok || a.Job != old || a.Attempt != 4 {
		t.Fatalf("dispatch after redrive: %+v %v %v (want job %d attempt 4)", a, ok, err, old)
	}
	if _, err := s.Redrive(5000, old, 0); !errors.Is(err, ErrPrecondition) || !strings.Contains(err.Error(), "job 1 is assigned, not failed") {
		t.Fatalf("redrive of a live job: %v", err)
	}
	if _, err := s.Redrive(5000, young, 0); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("redrive of a queued job: %v", err)
	}
	if _, err := s.Finish(6000, old, 4, "w2", OutcomeOK, 10, RunResult{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Redrive(7000, old, 0); !errors.Is(err, ErrPrecondition) || !strings.Contains(err.Error(), "is completed") {
		t.Fatalf("redrive of a completed job: %v", err)
	}
	if _, err := s.Redrive(7000, 99, 0); !errors.Is(err, ErrUnknownJob) {
		t.Fatalf("redrive of an unknown job: %v", err)
	}
	mustVerify(t, s, "end")
}

// TestRedriveClassCeiling: a job of class high is not redriven once its
// tenant's max_class was lowered to normal.
func TestRedriveClassCeiling(t *testing.T) {
	s := redriveWorld(t)
	if _, err := s.UpsertTenant(TenantSpec{Name: "acme", Tier: Gold, MaxClass: ClassHigh}); err != nil {
		t.Fatal(err)
	}
	id, _ := s.Submit(1000, Submission{Tenant: "acme", Size: SM, EstCostMs: 1000, Class: ClassHigh, MaxAttempts: 1})
	failOnce(t, s, 2000, "w1")
	if _, err := s.UpsertTenant(TenantSpec{Name: "acme", Tier: Gold}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Redrive(3000, id, 0); !errors.Is(err, ErrPermission) || err.Error() != "class high is above tenant acme's max_class normal" {
		t.Fatalf("got %v", err)
	}
	mustVerify(t, s, "refused")
}

// TestRedriveGroupComesBack: a failed job's group was forgotten when it
// emptied; the redrive creates it again.
func TestRedriveGroupComesBack(t *testing.T) {
	s := redriveWorld(t)
	id, _ := s.Submit(1000, Submission{Tenant: "acme", Size: SM, EstCostMs: 1000, Group: "g1", MaxAttempts: 1})
	failOnce(t, s, 2000, "w1")
	if _, ok := s.Group("acme", "g1"); ok {
		t.Fatal("group g1 still held")
	}
	if _, err := s.Redrive(3000, id, 0); err != nil {
		t.Fatal(err)
	}
	if g, ok := s.Group("acme", "g1"); !ok || g.Queued != 1 {
		t.Fatalf("group g1 after redrive: %+v %v", g, ok)
	}
	mustVerify(t, s, "redriven into a new group")
}

// TestRedriveDeadlineCountsAgain: the deadline is the same duration from
// the redrive as it was from the submit.
func TestRedriveDeadlineCountsAgain(t *testing.T) {
	s := redriveWorld(t)
	if _, err := s.UpsertTenant(TenantSpec{Name: "acme", Tier: Gold, AllowDeadlines: true}); err != nil {
		t.Fatal(err)
	}
	id, _ := s.Submit(1000, Submission{Tenant: "acme", Size: SM, EstCostMs: 1000, DeadlineMs: 60_000, MaxAttempts: 1})
	failOnce(t, s, 2000, "w1")
	if _, err := s.Redrive(100_000, id, 0); err != nil {
		t.Fatal(err)
	}
	if j, _ := s.Job(id); j.DeadlineAt() != 160_000 {
		t.Fatalf("deadline at %d, want 160000", j.DeadlineAt())
	}
	mustVerify(t, s, "deadline redriven")
}

// TestDeadLetterPruning: completed jobs and dead letters have their own
// cutoffs; the per-tenant bounds drop the oldest dead letters first; a
// redriven job that failed again is pruned by its new end only; Purge
// deletes any ended job.
func TestDeadLetterPruning(t *testing.T) {
	s := redriveWorld(t)
	var ids []JobID
	for i := range 4 {
		id, _ := s.Submit(Time(1000+i), Submission{Tenant: "acme", Size: SM, EstCostMs: 1000, Payload: "abc", MaxAttempts: 1})
		ids = append(ids, id)
	}
	for i := range 4 {
		failOnce(t, s, Time(2000+i), "w1") // ids[i] ends at 2000+i
	}
	ok, _ := s.Submit(3000, Submission{Tenant: "beta", Size: SM, EstCostMs: 1000})
	a, _, _ := s.Dispatch(3000, SM, "w1")
	if a.Job != ok {
		t.Fatalf("dispatched %d", a.Job)
	}
	s.Finish(3100, ok, 1, "w1", OutcomeOK, 5, RunResult{}) // completed at 3100
	// Completed before 4000 go, dead letters before 2001 only.
	if n := s.PruneEnded(4000, 2001, 100); n != 2 {
		t.Fatalf("pruned %d, want 2 (the completed job and job %d)", n, ids[0])
	}
	if _, found := s.Job(ok); found {
		t.Fatal("completed job kept")
	}
	if _, found := s.Job(ids[0]); found {
		t.Fatal("oldest dead letter kept")
	}
	mustVerify(t, s, "after age pruning")
	// Redrive ids[1] and fail it again at 5000: it is now the youngest.
	if _, err := s.Redrive(4500, ids[1], 0); err != nil {
		t.Fatal(err)
	}
	if got := failOnce(t, s, 5000, "w1"); got != ids[1] {
		t.Fatalf("failed %d", got)
	}
	if n, b := s.DeadLetterCount(0); n != 3 || b != 9 {
		t.Fatalf("dead letters %d (%d bytes), want 3 (9)", n, b)
	}
	// At most 2 dead letters (or 6 bytes): ids[2] goes, the oldest.
	if s.DeadOverBounds(3, 9) || !s.DeadOverBounds(2, 0) || !s.DeadOverBounds(0, 8) {
		t.Fatal("DeadOverBounds")
	}
	if n := s.PruneDeadBounds(2, 0, 100); n != 1 {
		t.Fatalf("bounds pruned %d, want 1", n)
	}
	if _, found := s.Job(ids[2]); found {
		t.Fatal("oldest dead letter kept over the bound")
	}
	mustVerify(t, s, "after the bounds")
	// The old entry of ids[1] (ended 2001) must not prune it now.
	if n := s.PruneEnded(4000, 2003, 100); n != 0 {
		t.Fatalf("stale entry pruned %d", n)
	}
	if _, found := s.Job(ids[1]); !found {
		t.Fatal("redriven job pruned by its old end")
	}
	if err := s.Purge(ids[1]); err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ids[1]); !errors.Is(err, ErrUnknownJob) {
		t.Fatalf("purge twice: %v", err)
	}
	if n, b := s.DeadLetterCount(0); n != 1 || b != 3 {
		t.Fatalf("dead letters %d (%d bytes), want 1 (3)", n, b)
	}
	q, _ := s.Submit(6000, Submission{Tenant: "beta", Size: SM, EstCostMs: 1000})
	if err := s.Purge(q); !errors.Is(err, ErrPrecondition) || err.Error() != "job 6 is queued, not ended" {
		t.Fatalf("purge of a queued job: %v", err)
	}
	mustVerify(t, s, "end")
	// Restore derives the same counts.
	r, err := decodeBytes(encodeView(s.Freeze()))
	if err != nil {
		t.Fatal(err)
	}
	if n, b := r.DeadLetterCount(0); n != 1 || b != 3 {
		t.Fatalf("restored dead letters %d (%d bytes), want 1 (3)", n, b)
	}
}

// TestRedriveIdleRule: a redrive counts as a submit for the idle rule and
// the activation clamp. beta ran while acme's only job was a dead letter;
// with nothing queued, the redrive first raises virtual_now to the
// highest finish tag (beta's), and acme, eligible again, is clamped up to
// it: it banked no credit while its job was dead.
func TestRedriveIdleRule(t *testing.T) {
	s := redriveWorld(t) // acme gold (125 virtual ms a 1s job), beta free (1000)
	id, _ := s.Submit(0, Submission{Tenant: "acme", Size: SM, EstCostMs: 1000, MaxAttempts: 1})
	failOnce(t, s, 1, "w1") // acme's tag 125
	for i := range 3 {
		s.Submit(Time(10+i), Submission{Tenant: "beta", Size: SM, EstCostMs: 1000})
	}
	for i := range 3 {
		a, ok, err := s.Dispatch(Time(20+i), SM, "w2")
		if err != nil || !ok || a.Tenant != 1 {
			t.Fatalf("dispatch %d: %+v %v %v", i, a, ok, err)
		}
		s.Finish(Time(20+i), a.Job, a.Attempt, "w2", OutcomeOK, 1000, RunResult{})
	}
	before := s.VirtualNow()
	if _, err := s.Redrive(100, id, 0); err != nil {
		t.Fatal(err)
	}
	acme, _ := s.Tenant("acme")
	beta, _ := s.Tenant("beta")
	if s.VirtualNow() != beta.Tag(ClassNormal) || s.VirtualNow() <= before || acme.Tag(ClassNormal) != s.VirtualNow() {
		t.Fatalf("after the redrive: vnow %d (before %d), acme's tag %d, beta's %d", s.VirtualNow(), before, acme.Tag(ClassNormal), beta.Tag(ClassNormal))
	}
	mustVerify(t, s, "idle rule")
}
