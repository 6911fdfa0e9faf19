package sfq

import (
	"cmp"
	"slices"
	"testing"
)

// deadlineWorld is a scheduler with one tenant and ack and lease
// timeouts of 10 and 30 s.
func deadlineWorld(t *testing.T) *Scheduler {
	t.Helper()
	cfg := DefaultConfig()
	cfg.AckTimeoutMs, cfg.LeaseTimeoutMs = 10_000, 30_000
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertTenant(TenantSpec{Name: "a", Tier: Gold}); err != nil {
		t.Fatal(err)
	}
	return s
}

// runJob submits, dispatches and (unless held) starts and finishes one job
// at now, and returns it.
func runJob(t *testing.T, s *Scheduler, now Time, held bool) JobID {
	t.Helper()
	if _, err := s.Submit(now, Submission{Tenant: "a", Size: SM, EstCostMs: 1000}); err != nil {
		t.Fatal(err)
	}
	a, ok, err := s.Dispatch(now, SM, "w")
	if err != nil || !ok {
		t.Fatalf("dispatch at %d: %v %v", now, ok, err)
	}
	if held {
		return a.Job
	}
	if _, err := s.Start(now, a.Job, a.Attempt, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Finish(now, a.Job, a.Attempt, "w", OutcomeOK, 10, RunResult{}); err != nil {
		t.Fatal(err)
	}
	return a.Job
}

// withFreshDeadlines sets freshDeadlines back to n (a property test
// draws its own).
func withFreshDeadlines(n int) { freshDeadlines = n }

type dueEntry struct {
	job  JobID
	kind InputKind
}

func dueAt(s *Scheduler, now Time) []dueEntry {
	var out []dueEntry
	s.Due(now, func(id JobID, _ uint32, kind InputKind) bool {
		out = append(out, dueEntry{id, kind})
		return true
	})
	slices.SortFunc(out, func(a, b dueEntry) int { return int(a.job) - int(b.job) })
	return out
}

// TestShortJobsStayOutOfTheDeadlineHeap: a job that starts and ends
// between two settles of the fresh deadlines never enters the heap. Each
// job adds two deadlines (its ack, then its lease); the 2,048th and
// 4,096th are leases, each added while its job was running, so the heap
// keeps exactly those two, and the last 1,904 wait in fresh. Before, the
// heap held all 6,000 until they came due.
func TestShortJobsStayOutOfTheDeadlineHeap(t *testing.T) {
	s := deadlineWorld(t)
	for i := range 3000 {
		runJob(t, s, Time(i), false)
	}
	if got, fresh := len(s.deadlines.items), len(s.deadlines.fresh); got != 2 || fresh != 1904 {
		t.Fatalf("heap %d, fresh %d; want 2, 1904", got, fresh)
	}
	for _, d := range s.deadlines.items {
		if d.kind != InExpireLease || (d.job != 1024 && d.job != 2048) {
			t.Fatalf("heap holds %+v", d)
		}
	}
	// Nothing is due: every job ended.
	if got := dueAt(s, 1_000_000); len(got) != 0 {
		t.Fatalf("due: %v", got)
	}
}

// TestDueSeesFreshDeadlines: Due and GrantLeases find a deadline whether
// it is still fresh or already in the heap.
func TestDueSeesFreshDeadlines(t *testing.T) {
	s := deadlineWorld(t)
	early := runJob(t, s, 0, true) // assigned, never started: ack at 10,000
	for i := range 2100 {          // settles once: early's ack enters the heap
		runJob(t, s, Time(1+i), false)
	}
	late := runJob(t, s, 3000, true) // ack at 13,000, fresh
	if len(s.deadlines.fresh) == 0 || !slices.ContainsFunc(s.deadlines.items, func(d deadline) bool { return d.job == early }) {
		t.Fatalf("early %d not in the heap, or nothing fresh", early)
	}
	if got := dueAt(s, 9_999); len(got) != 0 {
		t.Fatalf("due at 9,999: %v", got)
	}
	if got, want := dueAt(s, 13_000), []dueEntry{{early, InExpireAck}, {late, InExpireAck}}; !slices.Equal(got, want) {
		t.Fatalf("due at 13,000: %v, want %v", got, want)
	}
	// A new leader's grant moves both acks, fresh or not, to 30 s after
	// it.
	if moved := s.GrantLeases(12_000); moved != 2 {
		t.Fatalf("grant moved %d, want 2", moved)
	}
	if got := dueAt(s, 41_999); len(got) != 0 {
		t.Fatalf("due at 41,999 after the grant: %v", got)
	}
	if got, want := dueAt(s, 42_000), []dueEntry{{early, InExpireAck}, {late, InExpireAck}}; !slices.Equal(got, want) {
		t.Fatalf("due at 42,000: %v, want %v", got, want)
	}
	for _, id := range []JobID{early, late} {
		j, _ := s.Job(id)
		if ch, err := s.Expire(42_000, id, j.Attempt, InExpireAck); err != nil || ch.To != Queued {
			t.Fatalf("expire %d: %+v %v", id, ch, err)
		}
	}
	if got := dueAt(s, 1_000_000); len(got) != 0 {
		t.Fatalf("due after the expiries: %v", got)
	}
}

// checkDue fails unless Due(now) reports exactly the deadlines the job
// table says are due, each once: every assigned job's ack deadline, every
// running job's lease, and every live job's timeout that was not
// cancelled (found by brute force).
func checkDue(t interface{ Fatalf(string, ...any) }, name string, s *Scheduler, now Time) {
	type key struct {
		job     JobID
		attempt uint32
		kind    InputKind
	}
	order := func(a, b key) int {
		return cmp.Or(cmp.Compare(a.job, b.job), cmp.Compare(a.attempt, b.attempt), cmp.Compare(a.kind, b.kind))
	}
	var want, got []key
	s.jobs.View().Each(func(_ uint64, j *Job) bool {
		if j.State == Assigned && j.AckDeadline <= now {
			want = append(want, key{j.ID, j.Attempt, InExpireAck})
		}
		if j.State == Running && j.LeaseExpires <= now {
			want = append(want, key{j.ID, j.Attempt, InExpireLease})
		}
		if j.State.Live() && j.TimeoutAt != 0 && j.TimeoutAt <= now && j.Cancel == CancelNone {
			want = append(want, key{j.ID, j.Attempt, InExpireTimeout})
		}
		return true
	})
	s.Due(now, func(id JobID, attempt uint32, kind InputKind) bool {
		got = append(got, key{id, attempt, kind})
		return true
	})
	slices.SortFunc(want, order)
	slices.SortFunc(got, order)
	if !slices.Equal(got, want) {
		t.Fatalf("%s: Due(%d) reports %v; the job table says %v", name, now, got, want)
	}
}
