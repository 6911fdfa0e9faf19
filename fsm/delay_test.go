package fsm

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

func releaseCmd(tenant string, now bool, jobs ...uint64) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_Release{Release: &clusterpb.Release{Jobs: jobs, Now: now, Tenant: tenant}}}
}

func expireTTL(job uint64) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_Expire{Expire: &clusterpb.Expire{Job: job, Kind: clusterpb.ExpireKind_TTL}}}
}

// eventKinds lists the events of the log as "job:kind[:reason]".
func eventKinds(f *FSM) string {
	var out []string
	f.Events(0, func(ev *Event) bool {
		s := strconv.FormatUint(uint64(ev.Job), 10) + ":" + ev.Kind.String()
		if ev.Reason != ReasonNone {
			s += ":" + ev.Reason.String()
		}
		out = append(out, s)
		return true
	})
	return strings.Join(out, " ")
}

// TestFeatureLevel5Delays: at level 4 every command that puts anything of
// delays into the state is refused, naming the field and both levels, at
// the edge and in Apply; at level 5 they apply.
func TestFeatureLevel5Delays(t *testing.T) {
	h := &harness{t: t, f: newAt(Level4), now: 1_000}
	h.one(tenant("acme", pb.Tier_GOLD))
	refused := []levelCase{
		{submitJob(&clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1, DelayMs: 5000}), "delay"},
		{submitJob(&clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1, ExpireMs: 5000}), "expire"},
		{submitJob(&clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1, RetryBackoffMs: new(int64(0))}), "retry_backoff"},
		{releaseCmd("", false, 1), "Release"},
		{expireTTL(1), "expire ttl"},
		{setConfigWith(func(p *pb.SchedulerConfig) { p.RetryBackoffMs, p.RetryBackoffMaxMs = 5000, 600_000 }), "retry_backoff"},
	}
	h.refusedBelow(Level5, refused)
	h.one(setLevelCmd(Level5))
	for _, c := range refused[:3] {
		if r := h.one(c.cmd); r.Code != OK {
			t.Errorf("%s at level 5: %v", c.what, r.Err())
		}
	}
	if v, _ := h.f.Freeze(); v.StateVersion() != 7 {
		t.Fatalf("state version %d", v.StateVersion())
	}
}

// TestDelaysThroughTheFSM: a delayed submit is scheduled (event
// scheduled); a Release batch releases the due job and refuses, per job,
// the one not due; Expire ttl ends a queued job at its expire_at (refused
// before); a failed run backs off through scheduled (event scheduled,
// reason run_failed) and a run-now by its tenant releases it early, while
// another tenant's Release does not find it. A snapshot taken in the
// middle restores to the same hash.
func TestDelaysThroughTheFSM(t *testing.T) {
	h := newHarness(t)
	cfg := setConfigWith(func(p *pb.SchedulerConfig) { p.RetryBackoffMs, p.RetryBackoffMaxMs = 5000, 600_000 })
	h.apply(tenant("a", pb.Tier_GOLD), tenant("b", pb.Tier_FREE), cfg)
	h.one(submitJob(&clusterpb.SubmitJob{Tenant: "a", Size: pb.Size_MD, EstCostMs: 1000, DelayMs: 2000}))   // 1, due 3000
	h.one(submitJob(&clusterpb.SubmitJob{Tenant: "a", Size: pb.Size_MD, EstCostMs: 1000, DelayMs: 60_000})) // 2, due 61000
	h.one(submitJob(&clusterpb.SubmitJob{Tenant: "b", Size: pb.Size_MD, EstCostMs: 1000, ExpireMs: 1500}))  // 3, expires 2500
	h.now = 2000
	if r := h.one(expireTTL(3)); r.Code != FailedPrecondition || r.Msg != "expire-ttl of job 3 is not due yet: expire_at 2500 ms, now 2000 ms" {
		t.Fatalf("early expiry: %+v", r)
	}
	h.now = 3000
	r := h.one(releaseCmd("", false, 1, 2))
	if r.Code != OK || r.Count != 1 || r.Msg != "1 of 2 refused: release of job 2 is not due yet: due at 61000 ms, now 3000 ms" {
		t.Fatalf("release batch: %+v", r)
	}
	if r := h.one(releaseCmd("", false, 1)); r.Code != FailedPrecondition || r.Msg != "release of job 1 does not apply: job is queued" {
		t.Fatalf("second release: %+v", r)
	}
	// Job 3 lapsed at 2500: the dispatch at 3000 takes job 1.
	if d := h.one(dispatch("w1", 1)); d.Job != 1 {
		t.Fatalf("dispatched %d", d.Job)
	}
	if r := h.one(expireTTL(3)); r.Code != OK || r.Outcome != sfq.Changed {
		t.Fatalf("expire: %+v", r)
	}
	h.one(started(1, 1, "w1"))
	fail := &clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: 1, Attempt: 1, WorkerId: "w1", Outcome: pb.Outcome_FAILED, CpuMs: 5, ExitCode: 3}}}
	h.one(fail)
	j, _, _ := h.f.Job(1)
	if j.State != sfq.Scheduled || j.DueAt() != 8000 {
		t.Fatalf("after a failed run: %s due %d", j.State, j.DueAt())
	}
	v, _ := h.f.Freeze()
	back := New()
	if err := back.Restore(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(encodeFSM(v)))), h.index); err != nil {
		t.Fatal(err)
	}
	if r := h.one(releaseCmd("b", true, 1)); r.Code != NotFound || r.Msg != "job 1 not found" {
		t.Fatalf("another tenant's run-now: %+v", r)
	}
	if r := h.one(releaseCmd("a", true, 1)); r.Code != OK || r.Count != 1 || r.Job != 1 {
		t.Fatalf("run-now: %+v", r)
	}
	want := "1:scheduled 2:scheduled 3:queued 1:released 1:assigned 3:expired 1:started 1:scheduled:run_failed 1:released"
	if got := eventKinds(h.f); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	if err := h.f.Verify(); err != nil {
		t.Fatal(err)
	}
	// The restored copy, fed the same commands, ends alike.
	hb := &harness{t: t, f: back, index: h.index - 2, now: h.now}
	hb.one(releaseCmd("b", true, 1))
	hb.one(releaseCmd("a", true, 1))
	h1, _ := h.f.Hash()
	h2, _ := back.Hash()
	if h1 != h2 {
		t.Fatal("the restored state diverged")
	}
}

// TestSeedConfigBackoff: a new cluster at level 5 is seeded with a 5 s
// retry backoff doubling up to 10 min; the defaults of the core keep 0.
func TestSeedConfigBackoff(t *testing.T) {
	c := SeedConfig()
	if c.Sched.RetryBackoffMs != 5000 || c.Sched.RetryBackoffMaxMs != 600_000 || c.Validate() != nil {
		t.Fatalf("seed: %+v", c.Sched)
	}
	if d := DefaultConfig(); d.Sched.RetryBackoffMs != 0 || d.Sched.RetryBackoffMaxMs != 0 {
		t.Fatalf("default: %+v", d.Sched)
	}
	back, err := ConfigFromPB(ConfigToPB(c))
	if err != nil || back.Sched.RetryBackoffMs != 5000 || back.Sched.RetryBackoffMaxMs != 600_000 {
		t.Fatalf("round trip: %+v %v", back.Sched, err)
	}
}

// TestRedriveOfADelayedJob: a redriven job that was submitted with a delay
// is scheduled again (events redriven, scheduled) until that delay,
// counted from the redrive, is due; an early Release is refused, the due
// one releases it, and the quota counts it while it is scheduled.
func TestRedriveOfADelayedJob(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("a", pb.Tier_GOLD))
	t0 := h.now
	h.one(submitJob(&clusterpb.SubmitJob{Tenant: "a", Size: pb.Size_SM, EstCostMs: 1000, DelayMs: 1000})) // 1, due t0+1000
	h.now = t0 + 1000
	if r := h.one(releaseCmd("", false, 1)); r.Code != OK {
		t.Fatalf("release: %+v", r)
	}
	h.one(cancelJobsCmd(&clusterpb.BulkJobs{Tenant: "a", Jobs: []uint64{1}}))
	h.now = t0 + 2000
	r := h.one(redriveCmd(&clusterpb.BulkJobs{Tenant: "a", Jobs: []uint64{1}}))
	if r.Code != OK || items(r.Bulk) != "1:scheduled" {
		t.Fatalf("redrive: %+v %s", r, items(r.Bulk))
	}
	j, _ := h.job(1)
	if j.State != sfq.Scheduled || j.DueAt() != t0+3000 {
		t.Fatalf("after the redrive: %s due %d", j.State, j.DueAt())
	}
	if d := h.one(dispatch("w1", 1)); d.Assigned {
		t.Fatalf("dispatched a job not due: %+v", d)
	}
	h.now = t0 + 2999
	if r := h.one(releaseCmd("", false, 1)); r.Code != FailedPrecondition || r.Msg != fmt.Sprintf("release of job 1 is not due yet: due at %d ms, now %d ms", t0+3000, t0+2999) {
		t.Fatalf("early release: %+v", r)
	}
	h.now = t0 + 3000
	if r := h.one(releaseCmd("", false, 1)); r.Code != OK {
		t.Fatalf("release: %+v", r)
	}
	if d := h.one(dispatch("w1", 2)); d.Job != 1 {
		t.Fatalf("dispatch: %+v", d)
	}
	want := "1:scheduled 1:released 1:cancelled:requested 1:redriven 1:scheduled 1:released 1:assigned"
	if got := eventKinds(h.f); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	if err := h.f.Verify(); err != nil {
		t.Fatal(err)
	}
}
