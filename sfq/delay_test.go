package sfq

import (
	"errors"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// delayWorld is a scheduler with tenants a (gold) and b (free), checked
// by Verify and a snapshot round trip after every step.
type delayWorld struct {
	t *testing.T
	s *Scheduler
}

func newDelayWorld(t *testing.T, cfg Config) *delayWorld {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range []TenantSpec{{Name: "a", Tier: Gold}, {Name: "b", Tier: Free}} {
		if _, err := s.UpsertTenant(ts); err != nil {
			t.Fatal(err)
		}
	}
	return &delayWorld{t: t, s: s}
}

// check verifies the state and that a restored copy hashes alike and
// verifies too.
func (w *delayWorld) check() {
	w.t.Helper()
	if err := w.s.Verify(); err != nil {
		w.t.Fatal(err)
	}
	d, err := decodeBytes(encodeView(w.s.Freeze()))
	if err != nil {
		w.t.Fatalf("restore: %v", err)
	}
	if d.Hash() != w.s.Hash() {
		w.t.Fatal("the restored state hashes differently")
	}
	if err := d.Verify(); err != nil {
		w.t.Fatalf("restored: %v", err)
	}
}

func (w *delayWorld) submit(now Time, sub Submission) JobID {
	w.t.Helper()
	if sub.Size == 0 {
		sub.Size = SM
	}
	if sub.EstCostMs == 0 {
		sub.EstCostMs = 1000
	}
	id, err := w.s.Submit(now, sub)
	if err != nil {
		w.t.Fatal(err)
	}
	w.check()
	return id
}

func (w *delayWorld) dispatch(now Time) JobID {
	w.t.Helper()
	a, ok, err := w.s.Dispatch(now, SM, "w1")
	if err != nil {
		w.t.Fatal(err)
	}
	w.check()
	if !ok {
		return 0
	}
	return a.Job
}

func wantErr(t *testing.T, err error, msg string) {
	t.Helper()
	if err == nil || err.Error() != msg {
		t.Fatalf("got error %v, want %q", err, msg)
	}
}

// TestDelayReleaseAtIDPlace: a delayed job is scheduled in no queue; its
// release is refused before its due time and puts it in its queue at its
// ID's place, ahead of younger jobs submitted meanwhile.
func TestDelayReleaseAtIDPlace(t *testing.T) {
	w := newDelayWorld(t, DefaultConfig())
	j1 := w.submit(0, Submission{Tenant: "a", DelayMs: 5000})
	j2 := w.submit(100, Submission{Tenant: "a"})
	j3 := w.submit(200, Submission{Tenant: "a"})
	if j, _ := w.s.Job(j1); j.State != Scheduled || j.DueAt() != 5000 {
		t.Fatalf("job 1 is %s due %d", j.State, j.DueAt())
	}
	if r, _ := w.s.Explain(j1); r.Format() != "reason=scheduled due=5000" {
		t.Fatalf("explain: %s", r.Format())
	}
	if at, ok := w.s.NextDelayWake(); !ok || at != 5000 {
		t.Fatalf("next wake %d %v", at, ok)
	}
	if got := w.s.DueReleases(4999, 0); len(got) != 0 {
		t.Fatalf("due at 4999: %v", got)
	}
	if got := w.s.DueReleases(5000, 0); !slices.Equal(got, []JobID{j1}) {
		t.Fatalf("due at 5000: %v", got)
	}
	_, err := w.s.Release(4999, j1, false)
	wantErr(t, err, "release of job 1 is not due yet: due at 5000 ms, now 4999 ms")
	if ta, _ := w.s.Tenant("a"); ta.Scheduled != 1 || ta.QueuedTotal() != 2 {
		t.Fatalf("a: scheduled %d queued %d", ta.Scheduled, ta.QueuedTotal())
	}
	if err := w.s.DeleteTenant("a"); err == nil {
		t.Fatal("deleted a tenant with a scheduled job")
	}
	ch, err := w.s.Release(5000, j1, false)
	if err != nil || ch.From != Scheduled || ch.To != Queued {
		t.Fatalf("release: %+v %v", ch, err)
	}
	w.check()
	_, err = w.s.Release(5000, j1, false)
	wantErr(t, err, "release of job 1 does not apply: job is queued")
	for _, want := range []JobID{j1, j2, j3} {
		if got := w.dispatch(5000); got != want {
			t.Fatalf("dispatched %d, want %d", got, want)
		}
	}
	// Run-now: force releases before the due time.
	j4 := w.submit(6000, Submission{Tenant: "b", DelayMs: 60_000})
	if _, err := w.s.Release(6001, j4, true); err != nil {
		t.Fatal(err)
	}
	w.check()
	if got := w.dispatch(6002); got != j4 {
		t.Fatalf("dispatched %d, want %d", got, j4)
	}
}

// TestExpiryLapse: a job never dispatched whose expire_at has passed is
// skipped by Dispatch from that time on (in the restored state too), and
// Expire{ttl} ends it expired — refused before expire_at, and for a job
// dispatched once.
func TestExpiryLapse(t *testing.T) {
	w := newDelayWorld(t, DefaultConfig())
	j1 := w.submit(0, Submission{Tenant: "a", ExpireMs: 2000})
	j2 := w.submit(0, Submission{Tenant: "a"})
	j3 := w.submit(0, Submission{Tenant: "b", ExpireMs: 1000})
	if got := w.s.DueExpiries(1999, 0); !slices.Equal(got, []JobID{j3}) {
		t.Fatalf("expiries due at 1999: %v", got)
	}
	_, err := w.s.Expire(999, j3, 0, InExpireTTL)
	wantErr(t, err, "expire-ttl of job 3 is not due yet: expire_at 1000 ms, now 999 ms")
	// Job 3 (b) lapsed at 1000: the next dispatch at 1999 takes a's job 1.
	if got := w.dispatch(1999); got != j1 {
		t.Fatalf("dispatched %d, want %d", got, j1)
	}
	if r, _ := w.s.Explain(j3); r.Format() != "reason=expired" {
		t.Fatalf("explain lapsed: %s", r.Format())
	}
	if got := w.dispatch(2000); got != j2 {
		t.Fatalf("dispatched %d, want %d", got, j2)
	}
	if got := w.dispatch(2000); got != 0 {
		t.Fatalf("dispatched the lapsed job %d", got)
	}
	// Job 1 was dispatched before its expire_at: it never expires.
	_, err = w.s.Expire(5000, j1, 0, InExpireTTL)
	wantErr(t, err, "expire-ttl of job 1 does not apply: it was dispatched (attempt 1)")
	if got := w.s.DueExpiries(5000, 0); !slices.Equal(got, []JobID{j3}) {
		t.Fatalf("expiries due: %v", got)
	}
	ch, err := w.s.Expire(5000, j3, 0, InExpireTTL)
	if err != nil || ch.To != Expired {
		t.Fatalf("expire: %+v %v", ch, err)
	}
	w.check()
	if tb, _ := w.s.Tenant("b"); tb.QueuedTotal() != 0 {
		t.Fatalf("b still has %d queued", tb.QueuedTotal())
	}
	_, err = w.s.Expire(5000, j3, 0, InExpireTTL)
	wantErr(t, err, "expire-ttl of job 3 does not apply: job is expired")
	if _, ok := w.s.NextDelayWake(); ok {
		t.Fatal("a wake is left")
	}
	// A scheduled job can expire before its release: the release is
	// refused, the expiry is due.
	j5 := w.submit(10_000, Submission{Tenant: "a", DelayMs: 5000, ExpireMs: 6000})
	if got := w.s.DueReleases(16_000, 0); len(got) != 0 {
		t.Fatalf("releases due of an expired job: %v", got)
	}
	_, err = w.s.Release(16_000, j5, false)
	wantErr(t, err, "release of job 4 does not apply: it expired at 16000 ms")
	w.check()
	if _, err := w.s.Expire(16_000, j5, 0, InExpireTTL); err != nil {
		t.Fatal(err)
	}
	w.check()
}

// TestRetryBackoff: a failed run goes back through scheduled for
// retry_backoff × 2^(failures−1), capped at retry_backoff_max; a lost
// lease is requeued at once; a job's own backoff of 0 requeues at once.
func TestRetryBackoff(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RetryBackoffMs, cfg.RetryBackoffMaxMs = 1000, 3000
	w := newDelayWorld(t, cfg)
	j := w.submit(0, Submission{Tenant: "a", MaxAttempts: 5})
	run := func(now Time) uint32 {
		t.Helper()
		if got := w.dispatch(now); got != j {
			t.Fatalf("dispatched %d at %d", got, now)
		}
		jj, _ := w.s.Job(j)
		if _, err := w.s.Start(now, j, jj.Attempt, "w1"); err != nil {
			t.Fatal(err)
		}
		return jj.Attempt
	}
	fail := func(now Time, attempt uint32, due Time) {
		t.Helper()
		ch, err := w.s.Finish(now, j, attempt, "w1", OutcomeFailed, 10, RunResult{ExitCode: 3})
		if err != nil || ch.To != Scheduled {
			t.Fatalf("finish: %+v %v", ch, err)
		}
		w.check()
		if jj, _ := w.s.Job(j); jj.DueAt() != due {
			t.Fatalf("due %d, want %d", jj.DueAt(), due)
		}
	}
	fail(100, run(0), 1100)
	_, err := w.s.Release(1099, j, false)
	wantErr(t, err, "release of job 1 is not due yet: due at 1100 ms, now 1099 ms")
	w.s.Release(1100, j, false)
	fail(1200, run(1100), 3200)
	w.s.Release(3200, j, false)
	fail(3300, run(3200), 6300) // 4000 capped at 3000
	w.s.Release(6300, j, false)
	// A lost lease is not the job's fault: requeued at once.
	a := run(6300)
	ch, err := w.s.Expire(6300+Time(cfg.LeaseTimeoutMs), j, a, InExpireLease)
	if err != nil || ch.To != Queued {
		t.Fatalf("lease: %+v %v", ch, err)
	}
	if ta, _ := w.s.Tenant("a"); ta.Billing.Requeues != 4 || ta.Billing.Failures != 4 {
		t.Fatalf("billing %+v", ta.Billing)
	}
	// A job's own backoff of 0 requeues at once.
	k := w.submit(7000, Submission{Tenant: "b", RetryBackoffSet: true})
	w.s.Cancel(7000, j)
	if got := w.dispatch(40_000); got != k {
		t.Fatalf("dispatched %d", got)
	}
	ch, err = w.s.Finish(40_000, k, 1, "w1", OutcomeFailed, 10, RunResult{})
	if err != nil || ch.To != Queued {
		t.Fatalf("own backoff 0: %+v %v", ch, err)
	}
	w.check()
}

func TestBackoffValues(t *testing.T) {
	c := Config{RetryBackoffMs: 5000, RetryBackoffMaxMs: 600_000}
	var got []int64
	for f := uint16(0); f <= 9; f++ {
		got = append(got, c.Backoff(0, false, 0, f))
	}
	want := []int64{0, 5000, 10_000, 20_000, 40_000, 80_000, 160_000, 320_000, 600_000, 600_000}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if b := c.Backoff(700_000, true, 0, 1); b != 700_000 {
		t.Fatalf("own backoff above the maximum: %d", b)
	}
	if b := c.Backoff(1000, true, 0, 65535); b != 600_000 {
		t.Fatalf("many failures: %d", b)
	}
	if b := (&Config{}).Backoff(0, false, 0, 3); b != 0 {
		t.Fatalf("no backoff: %d", b)
	}
	// A job's own max (a kind's retry policy) replaces the cluster's.
	if b := c.Backoff(0, false, 30_000, 5); b != 30_000 {
		t.Fatalf("own max 30 s after 5 failures: %d", b)
	}
	if b := c.Backoff(0, false, 1_000_000, 9); b != 1_000_000 {
		t.Fatalf("own max above the cluster's after 9 failures: %d", b)
	}
}

func TestDelayValidation(t *testing.T) {
	for _, c := range []struct {
		sub Submission
		msg string
	}{
		{Submission{DelayMs: -1}, "delay_ms: -1 is out of range (0 = none, else 1 ms .. 1 year)"},
		{Submission{ExpireMs: 999}, "expire_ms: 999 is out of range (0 = none, else 1 s .. 1 year after the submit)"},
		{Submission{DelayMs: 5000, ExpireMs: 5000}, "expire_ms: 5000 is not after delay_ms 5000 (the job would expire before it is due)"},
		{Submission{DelayMs: 5000, DeadlineMs: 4000}, "deadline_ms: 4000 is not after delay_ms 5000"},
		{Submission{RetryBackoffMs: MaxRetryBackoffMs + 1, RetryBackoffSet: true}, "retry_backoff_ms: 86400001 is out of range (0 .. 24 h)"},
	} {
		err := c.sub.Validate()
		if err == nil || err.Error() != c.msg || !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: got %v, want %q", c.sub, err, c.msg)
		}
	}
	cfg := DefaultConfig()
	cfg.RetryBackoffMs, cfg.RetryBackoffMaxMs = 5000, 1000
	if err := cfg.Validate(); err == nil || err.Error() != "retry_backoff_max 1000 ms is below retry_backoff 5000 ms" {
		t.Fatalf("config: %v", err)
	}
}

// TestStateVersionFollowsDelays: a state without anything of delays
// fits version 4; a delayed job, a job's expiry, or a retry backoff
// setting does not.
func TestStateVersionFollowsDelays(t *testing.T) {
	w := newDelayWorld(t, DefaultConfig())
	w.submit(0, Submission{Tenant: "a"})
	if err := w.s.Freeze().FitsVersion4(); err != nil {
		t.Fatal(err)
	}
	if b := encodeView(w.s.Freeze()); b[0] != stateVersionNoGroups {
		t.Fatalf("version %d", b[0])
	}
	id := w.submit(0, Submission{Tenant: "a", ExpireMs: 5000})
	if err := w.s.Freeze().FitsVersion4(); err == nil {
		t.Fatal("a job's expiry fits version 4")
	}
	if b := encodeView(w.s.Freeze()); b[0] != stateVersionLevers {
		t.Fatalf("version %d", b[0])
	}
	// Once the job is pruned, the state is version 3 again.
	w.s.Cancel(10, id)
	w.s.Prune(100, 10)
	w.check()
	if err := w.s.Freeze().FitsVersion4(); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.RetryBackoffMs = 1
	w.s.SetConfig(cfg)
	if err := w.s.Freeze().FitsVersion4(); err == nil {
		t.Fatal("a retry backoff fits version 4")
	}
	w.check()
}

// TestDelayJobText: the delay fields ride before the rest of the text,
// which reads as before; setText keeps them.
func TestDelayJobText(t *testing.T) {
	var j Job
	j.setText(0, "g", "k", "t", "p")
	j.setTimes(jobTimes{due: 300, expire: 400, backoff: 0})
	if j.Group() != "g" || j.Key() != "k" || j.Type() != "t" || j.Payload() != "p" || j.ExpireAt() != 400 {
		t.Fatalf("text: %q %q %q %q %d", j.Group(), j.Key(), j.Type(), j.Payload(), j.ExpireAt())
	}
	if ms, set := j.RetryBackoff(); ms != 0 || !set {
		t.Fatalf("backoff %d %v", ms, set)
	}
	j.setText(1234, "g2", "k", "t", "p")
	if j.Group() != "g2" || j.DeadlineAt() != 1234 || j.ExpireAt() != 400 {
		t.Fatalf("after setText: %q %d %d", j.Group(), j.DeadlineAt(), j.ExpireAt())
	}
}

// TestDispatchOverLapsedAllocatesNothing: with half the backlog lapsed,
// Dispatch takes each queue's first job not lapsed and allocates nothing.
func TestDispatchOverLapsedAllocatesNothing(t *testing.T) {
	s, _ := New(DefaultConfig())
	for _, n := range []string{"a", "b", "c"} {
		s.UpsertTenant(TenantSpec{Name: n, Tier: Gold})
	}
	for i := range 30_000 {
		sub := Submission{Tenant: []string{"a", "b", "c"}[i%3], Size: SM, EstCostMs: 1000}
		if i%2 == 0 {
			sub.ExpireMs = 1000
		}
		if _, err := s.Submit(0, sub); err != nil {
			t.Fatal(err)
		}
	}
	s.lapse(1000)
	s.dl.lapsed.items = slices.Grow(s.dl.lapsed.items, 20_000)
	i := 0
	allocs := testing.AllocsPerRun(5000, func() {
		a, ok, err := s.Dispatch(Time(1000+i), SM, "w1")
		if err != nil || !ok || a.Job%2 == 1 {
			t.Fatalf("dispatch: %+v %v %v", a, ok, err)
		}
		i++
	})
	if allocs != 0 {
		t.Errorf("%.2f allocations per dispatch, want 0", allocs)
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestDelaysProperty drives random submits (delayed, expiring, with a
// backoff of their own), dispatches, failed and good runs, cancels,
// releases and expiries of what is due, and restores: after every step
// the state verifies, a restored twin fed the same inputs hashes alike,
// no dispatch takes a job at or after its expire_at on its first attempt,
// and nothing scheduled is ever dispatched.
func TestDelaysProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := DefaultConfig()
		cfg.RetryBackoffMs = rapid.SampledFrom([]int64{0, 500, 2000}).Draw(t, "backoff")
		cfg.RetryBackoffMaxMs = cfg.RetryBackoffMs * 4
		s, _ := New(cfg)
		for _, ts := range []TenantSpec{{Name: "a", Tier: Gold}, {Name: "b", Tier: Free, GroupOrder: GroupFair}} {
			s.UpsertTenant(ts)
		}
		twin, err := decodeBytes(encodeView(s.Freeze()))
		if err != nil {
			t.Fatal(err)
		}
		now := Time(0)
		apply := func(fn func(s *Scheduler) error) {
			e1, e2 := fn(s), fn(twin)
			if (e1 == nil) != (e2 == nil) {
				t.Fatalf("the twin disagrees: %v vs %v", e1, e2)
			}
		}
		for step := range rapid.IntRange(1, 120).Draw(t, "steps") {
			switch rapid.IntRange(0, 7).Draw(t, "op") {
			case 0, 1:
				sub := Submission{Tenant: rapid.SampledFrom([]string{"a", "b"}).Draw(t, "tenant"), Size: SM, EstCostMs: 1000,
					Group: rapid.SampledFrom([]string{"", "g"}).Draw(t, "group"), MaxAttempts: 3,
					DelayMs: rapid.SampledFrom([]int64{0, 0, 700, 3000}).Draw(t, "delay")}
				if rapid.Bool().Draw(t, "expires") {
					sub.ExpireMs = sub.DelayMs + rapid.Int64Range(1000, 4000).Draw(t, "expire")
				}
				if rapid.IntRange(0, 3).Draw(t, "own") == 0 {
					sub.RetryBackoffMs, sub.RetryBackoffSet = rapid.SampledFrom([]int64{0, 300}).Draw(t, "ownbackoff"), true
				}
				apply(func(s *Scheduler) error { _, err := s.Submit(now, sub); return err })
			case 2, 3:
				var got JobID
				apply(func(s *Scheduler) error {
					a, ok, err := s.Dispatch(now, SM, "w")
					if ok {
						got = a.Job
					}
					return err
				})
				if got != 0 {
					j, _ := s.Job(got)
					if x := j.ExpireAt(); j.Attempt == 1 && x != 0 && now >= x {
						t.Fatalf("job %d dispatched at %d, its expire_at %d", got, now, x)
					}
				}
			case 4: // the oldest live job ends, failed or not
				var id JobID
				var attempt uint32
				s.Jobs(0, func(j *Job) bool {
					if j.State.Live() {
						id, attempt = j.ID, j.Attempt
						return false
					}
					return true
				})
				if id != 0 {
					o := rapid.SampledFrom([]FinishOutcome{OutcomeOK, OutcomeFailed}).Draw(t, "outcome")
					apply(func(s *Scheduler) error { _, err := s.Finish(now, id, attempt, "w", o, 500, RunResult{}); return err })
				}
			case 5:
				id := JobID(rapid.IntRange(1, int(s.NextJobID())).Draw(t, "cancel"))
				apply(func(s *Scheduler) error { s.Cancel(now, id); return nil })
			case 6: // time passes; the leader releases and expires what is due
				now += Time(rapid.Int64Range(0, 2500).Draw(t, "dt"))
				for _, id := range s.DueReleases(now, 0) {
					apply(func(s *Scheduler) error { _, err := s.Release(now, id, false); return err })
				}
				for _, id := range s.DueExpiries(now, 0) {
					apply(func(s *Scheduler) error { _, err := s.Expire(now, id, 0, InExpireTTL); return err })
				}
				if next, ok := s.NextDelayWake(); ok && next <= now && len(s.DueReleases(now, 0))+len(s.DueExpiries(now, 0)) > 0 {
					t.Fatalf("due work left at %d after the leader's pass", now)
				}
			case 7: // the twin is restored from the scheduler's encoding
				if twin, err = decodeBytes(encodeView(s.Freeze())); err != nil {
					t.Fatalf("restore: %v", err)
				}
			}
			if err := s.Verify(); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			if s.Hash() != twin.Hash() {
				t.Fatalf("step %d: the twin's hash differs", step)
			}
			s.Jobs(0, func(j *Job) bool {
				if j.State == Scheduled && j.DueAt() == 0 {
					t.Fatalf("scheduled job %d without a due time", j.ID)
				}
				return true
			})
		}
	})
}

// TestRefusedCommandLapsesNothing: a command refused at or after a job's
// expire_at changes nothing (the job lapses at the first command that
// takes effect).
func TestRefusedCommandLapsesNothing(t *testing.T) {
	w := newDelayWorld(t, DefaultConfig())
	j1 := w.submit(0, Submission{Tenant: "a", ExpireMs: 1000})
	j2 := w.submit(0, Submission{Tenant: "b"})
	before := w.s.Hash()
	for _, f := range []func() error{
		func() error { _, err := w.s.Release(2000, j1, false); return err },
		func() error { _, err := w.s.Start(2000, j2, 1, "w1"); return err },
		func() error { _, err := w.s.Finish(2000, j2, 1, "w1", OutcomeOK, 0, RunResult{}); return err },
		func() error {
			_, err := w.s.Submit(2000, Submission{Tenant: "nobody", Size: SM, EstCostMs: 1})
			return err
		},
		func() error { _, err := w.s.Expire(2000, j2, 0, InExpireTTL); return err },
	} {
		if err := f(); err == nil {
			t.Fatal("accepted")
		}
		if w.s.Hash() != before {
			t.Fatal("a refused command changed the state")
		}
	}
	if j, _ := w.s.Job(j1); j.Lapsed {
		t.Fatal("job 1 lapsed on a refused command")
	}
	w.check()
	if got := w.dispatch(2000); got != j2 {
		t.Fatalf("dispatched %d", got)
	}
	if j, _ := w.s.Job(j1); !j.Lapsed {
		t.Fatal("job 1 did not lapse at the dispatch")
	}
}
