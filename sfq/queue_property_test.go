package sfq

import (
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestLivedAndRestoredAlike drives a scheduler through random commands of
// every kind that moves a job into or out of its queue — submits with
// delays, expiries, deadlines, groups and classes, dispatches, failed and
// completed runs with retry backoff, cancels, releases, lapses and
// expiries, redrives, purges, pruning, pauses — and checks after every
// step that Verify passes (every queue holds each queued job exactly once,
// under the key its current fields give). At random steps a second
// scheduler is rebuilt from the first one's encoding, as a node restored
// from a snapshot is; from then on both take the same commands and must
// answer each alike: the same dispatches, outcomes, errors and reasons of
// every job, and the same hash. After every step, a scheduler restored
// from that step's state must also give every job the same reason.
func TestLivedAndRestoredAlike(t *testing.T) {
	defer withFreshDeadlines(freshDeadlines)
	rapid.Check(t, func(t *rapid.T) {
		freshDeadlines = rapid.SampledFrom([]int{1, 3, 2048}).Draw(t, "fresh_deadlines")
		cfg := DefaultConfig()
		cfg.RetryBackoffMs = rapid.SampledFrom([]int64{0, 700}).Draw(t, "backoff")
		cfg.RetryBackoffMaxMs = cfg.RetryBackoffMs * 4
		cfg.AckTimeoutMs, cfg.LeaseTimeoutMs = 3000, 6000
		lived, _ := New(cfg)
		tenants := []TenantSpec{
			{Name: "a", Tier: Gold, AllowDeadlines: true, MaxClass: ClassHigh},
			{Name: "b", Tier: Free, AllowDeadlines: true, GroupOrder: GroupFair, Caps: Caps{MaxInflightCPUMs: 3000}},
			{Name: "c", Tier: Silver, AllowDeadlines: true, GroupCap: 1},
		}
		for _, ts := range tenants {
			if _, err := lived.UpsertTenant(ts); err != nil {
				t.Fatal(err)
			}
		}
		var restored *Scheduler // nil until the first restore
		now := Time(0)
		// on runs a command on both schedulers and requires the same
		// result.
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
		change := func(ch Change, err error) (string, error) { return fmt.Sprintf("%+v", ch), err }
		anyJob := func() JobID { return JobID(rapid.Uint64Range(1, uint64(lived.NextJobID())).Draw(t, "job")) }
		// pick draws a job of the lived state for which want holds, if
		// any (else any job: a refused command must change nothing).
		pick := func(want func(j *Job) bool) JobID {
			var ids []JobID
			lived.Jobs(0, func(j *Job) bool {
				if want(j) {
					ids = append(ids, j.ID)
				}
				return true
			})
			if len(ids) == 0 || rapid.IntRange(0, 4).Draw(t, "any_job") == 0 {
				return anyJob()
			}
			return rapid.SampledFrom(ids).Draw(t, "picked")
		}
		for step := range rapid.IntRange(30, 150).Draw(t, "steps") {
			switch rapid.IntRange(0, 13).Draw(t, "op") {
			case 0, 1, 2:
				sub := Submission{Tenant: rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "tenant"),
					Size:      Size(rapid.IntRange(0, 2).Draw(t, "size")),
					EstCostMs: rapid.SampledFrom([]int64{500, 1000, 2500}).Draw(t, "cost"),
					Class:     rapid.SampledFrom([]Class{ClassNormal, ClassNormal, ClassHigh, ClassLow}).Draw(t, "class"),
					Group:     rapid.SampledFrom([]string{"", "", "g1", "g2"}).Draw(t, "group"),
					DelayMs:   rapid.SampledFrom([]int64{0, 0, 0, 800, 2500}).Draw(t, "delay"), MaxAttempts: 2}
				if rapid.IntRange(0, 2).Draw(t, "has_expire") == 0 {
					sub.ExpireMs = sub.DelayMs + rapid.Int64Range(1000, 5000).Draw(t, "expire")
				}
				if rapid.IntRange(0, 2).Draw(t, "has_deadline") == 0 {
					sub.DeadlineMs = sub.DelayMs + rapid.Int64Range(1000, 9000).Draw(t, "deadline")
				}
				on("submit", func(s *Scheduler) (string, error) {
					id, err := s.Submit(now, sub)
					return fmt.Sprint(id), err
				})
			case 3, 4:
				size := Size(rapid.IntRange(0, 2).Draw(t, "worker_size"))
				worker := fmt.Sprintf("w%d", step)
				on("dispatch", func(s *Scheduler) (string, error) {
					a, ok, err := s.Dispatch(now, size, worker)
					return fmt.Sprintf("%+v %v", a, ok), err
				})
			case 5: // a live job's run ends, or it starts
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
				if rapid.IntRange(0, 3).Draw(t, "just_start") == 0 {
					on("start", func(s *Scheduler) (string, error) { return change(s.Start(now, j.ID, j.Attempt, j.Worker)) })
					break
				}
				o := rapid.SampledFrom([]FinishOutcome{OutcomeOK, OutcomeFailed, OutcomeFailed, OutcomeCancelled}).Draw(t, "outcome")
				cpu := rapid.Int64Range(0, 3000).Draw(t, "cpu")
				on("finish", func(s *Scheduler) (string, error) {
					return change(s.Finish(now, j.ID, j.Attempt, j.Worker, o, cpu, RunResult{}))
				})
			case 6, 7: // cancel a job, mostly one that waits
				id := pick(func(j *Job) bool { return j.State == Queued || j.State == Scheduled })
				on("cancel", func(s *Scheduler) (string, error) { return change(s.Cancel(now, id)) })
			case 8, 9: // redrive a few jobs, dead letters or not
				for range rapid.IntRange(1, 3).Draw(t, "redrives") {
					id := pick(func(j *Job) bool { return j.State.DeadLetter() })
					on("redrive", func(s *Scheduler) (string, error) { return change(s.Redrive(now, id, 0)) })
				}
			case 10: // time passes; the leader releases and expires what is due
				now += Time(rapid.Int64Range(0, 3000).Draw(t, "dt"))
				for _, id := range lived.DueReleases(now, 0) {
					on("release", func(s *Scheduler) (string, error) { return change(s.Release(now, id, false)) })
				}
				for _, id := range lived.DueExpiries(now, 0) {
					on("expire ttl", func(s *Scheduler) (string, error) { return change(s.Expire(now, id, 0, InExpireTTL)) })
				}
				type due struct {
					id      JobID
					attempt uint32
					kind    InputKind
				}
				var list []due
				lived.Due(now, func(id JobID, attempt uint32, kind InputKind) bool {
					list = append(list, due{id, attempt, kind})
					return true
				})
				for name, s := range map[string]*Scheduler{"lived": lived, "restored": restored} {
					if s != nil {
						checkDue(t, name, s, now)
					}
				}
				for _, d := range list {
					on("expire", func(s *Scheduler) (string, error) { return change(s.Expire(now, d.id, d.attempt, d.kind)) })
				}
			case 11: // purge a job, or prune what ended
				if rapid.Bool().Draw(t, "purge") {
					id := anyJob()
					on("purge", func(s *Scheduler) (string, error) { return "", s.Purge(id) })
				} else {
					cut := now - Time(rapid.Int64Range(0, 4000).Draw(t, "age"))
					on("prune", func(s *Scheduler) (string, error) { return fmt.Sprint(s.PruneEnded(cut, cut, 5)), nil })
				}
			case 12: // pause or resume a tenant or one of its groups
				name := rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "pause_tenant")
				pause := rapid.Bool().Draw(t, "pause")
				if rapid.Bool().Draw(t, "pause_group") {
					g := rapid.SampledFrom([]string{"g1", "g2"}).Draw(t, "group_paused")
					on("pause group", func(s *Scheduler) (string, error) {
						s.SetClock(now)
						ok, err := s.PauseGroup(name, g, pause, true)
						return fmt.Sprint(ok), err
					})
				} else {
					on("pause tenant", func(s *Scheduler) (string, error) {
						s.SetClock(now)
						ok, err := s.PauseTenant(name, pause, true)
						return fmt.Sprint(ok), err
					})
				}
			case 13: // a node restored from a snapshot of the lived state
				restored = reloaded(t, lived)
			}
			for name, s := range map[string]*Scheduler{"lived": lived, "restored": restored} {
				if s == nil {
					continue
				}
				if err := s.Verify(); err != nil {
					t.Fatalf("step %d, %s state: %v", step, name, err)
				}
			}
			// A node restored from this very step reads every job alike.
			fresh := reloaded(t, lived)
			for id := JobID(1); id < lived.NextJobID(); id++ {
				r1, e1 := lived.Explain(id)
				r2, e2 := fresh.Explain(id)
				if r1 != r2 || fmt.Sprint(e1) != fmt.Sprint(e2) {
					t.Fatalf("step %d: explain %d: the lived state says %s (%v), one restored from it %s (%v)", step, id, r1.Format(), e1, r2.Format(), e2)
				}
			}
			if restored == nil {
				continue
			}
			if lived.Hash() != restored.Hash() {
				t.Fatalf("step %d: the hashes differ", step)
			}
			for id := JobID(1); id < lived.NextJobID(); id++ {
				on(fmt.Sprintf("explain %d", id), func(s *Scheduler) (string, error) {
					r, err := s.Explain(id)
					return r.Format(), err
				})
			}
		}
	})
}

// TestVerifyCatchesQueueDamage: Verify names a job that sits in its queue
// twice, a queue entry of a job the table does not hold, and a queued job
// missing from its queue.
func TestVerifyCatchesQueueDamage(t *testing.T) {
	build := func() (*Scheduler, *jobQueue) {
		s, _ := New(DefaultConfig())
		if _, err := s.UpsertTenant(TenantSpec{Name: "a", Tier: Gold}); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := s.Submit(0, Submission{Tenant: "a", Size: SM, EstCostMs: 1000}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Verify(); err != nil {
			t.Fatal(err)
		}
		return s, &s.grt[0].at(0).first.fifo
	}
	s, q := build()
	q.pushBack(3)
	if err := s.Verify(); err == nil || !strings.Contains(err.Error(), "queued job 3 is in its queue 2 times") {
		t.Errorf("a job twice: %v", err)
	}
	s, q = build()
	q.pushBack(9)
	if err := s.Verify(); err == nil || !strings.Contains(err.Error(), "a queue holds job 9, which the job table does not") {
		t.Errorf("a job the table does not hold: %v", err)
	}
	s, q = build()
	q.remove(2)
	if err := s.Verify(); err == nil || !strings.Contains(err.Error(), "queued job 2 is in no queue") {
		t.Errorf("a job missing: %v", err)
	}
}
