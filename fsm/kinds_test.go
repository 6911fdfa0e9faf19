package fsm

import (
	"bytes"
	"slices"
	"testing"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

func submitForm(tenant, jobType string, form pb.JobForm) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: tenant, JobType: jobType, Size: pb.Size_MD,
		EstCostMs: 1000, Form: form}}}
}

func hello(worker string, commands bool, kinds []string, holds ...*clusterpb.HeldJob) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_WorkerHello{WorkerHello: &clusterpb.WorkerHello{WorkerId: worker, Size: pb.Size_MD,
		Says: commands || len(kinds) > 0, Commands: commands, Kinds: kinds, Holds: holds}}}
}

func unknownKind(job uint64, attempt uint32, worker string) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: job, Attempt: attempt, WorkerId: worker,
		Outcome: pb.Outcome_UNKNOWN_KIND}}}
}

// TestKindsRoute: a worker gets only the jobs it runs; a head it cannot
// run keeps its place for the next worker that can; a worker that says
// nothing runs every job.
func TestKindsRoute(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	digest := h.one(submitForm("acme", "digest", pb.JobForm_FUNCTION)).Job   // 1
	cmd := h.one(submitForm("acme", "render", pb.JobForm_COMMAND)).Job       // 2
	resize := h.one(submitForm("acme", "resize", pb.JobForm_FUNCTION)).Job   // 3
	thumb := h.one(submitForm("acme", "thumbnail", pb.JobForm_FUNCTION)).Job // 4
	h.one(hello("cmd", true, nil))
	h.one(hello("py", false, []string{"resize", "digest", "resize"}))
	if w, _ := h.f.Worker("py"); w.Runs == nil || !slices.Equal(w.Runs.Kinds, []string{"digest", "resize"}) || w.Runs.Commands {
		t.Fatalf("py's record runs %+v, want kinds digest, resize", w.Runs)
	}
	// The command worker passes over the function job ahead of it.
	if r := h.one(dispatch("cmd", 1)); r.Job != cmd || r.Assign.Form != sfq.FormCommand {
		t.Fatalf("the command worker got job %d (%v), want %d", r.Job, r.Assign.Form, cmd)
	}
	if r := h.one(dispatch("cmd", 2)); r.Code != FailedPrecondition {
		t.Fatalf("a second dispatch while it holds a job: %+v", r)
	}
	if r := h.one(dispatch("py", 1)); r.Job != digest {
		t.Fatalf("py got job %d, want %d", r.Job, digest)
	}
	h.one(finished(uint64(digest), 1, "py", 10))
	if r := h.one(dispatch("py", 2)); r.Job != resize {
		t.Fatalf("py got job %d, want %d", r.Job, resize)
	}
	h.one(finished(uint64(resize), 1, "py", 10))
	if r := h.one(dispatch("py", 3)); r.Assigned {
		t.Fatalf("py got job %d, a kind it does not run", r.Job)
	}
	// A worker that says nothing (an earlier build) runs every job.
	if r := h.one(dispatch("old", 1)); r.Job != thumb {
		t.Fatalf("the old worker got job %d, want %d", r.Job, thumb)
	}
}

// TestUnknownKindAndReconnect: a run ended unknown_kind requeues its job
// with no failure and no bill, and its worker gets no job of that kind
// for the rest of its session; a new session forgets that. A job the
// state says a worker holds that its Hello does not list is lost at once:
// queued with no failure if it never started, failed once if it had.
func TestUnknownKindAndReconnect(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	a := h.one(submitForm("acme", "digest", pb.JobForm_FUNCTION)).Job
	b := h.one(submitForm("acme", "resize", pb.JobForm_FUNCTION)).Job
	// An old worker (says nothing) takes the digest job, then says it
	// does not run that kind.
	h.one(hello("w", false, nil))
	if r := h.one(dispatch("w", 1)); r.Job != a {
		t.Fatalf("got %d, want %d", r.Job, a)
	}
	h.one(started(uint64(a), 1, "w"))
	if r := h.one(unknownKind(uint64(a), 1, "w")); r.Refused() || r.Outcome != sfq.Changed {
		t.Fatalf("unknown_kind: %+v", r)
	}
	j, _ := h.job(a)
	var billed int64
	h.f.Read(func(s *sfq.Scheduler) { t, _ := s.Tenant("acme"); billed = t.Billing.CPUMs })
	if j.State != sfq.Queued || j.Failures != 0 || billed != 0 {
		t.Fatalf("after unknown_kind: %s, %d failures, %d ms billed", j.State, j.Failures, billed)
	}
	if ev := h.lastEvent(); ev.Kind != EvRequeued || ev.Reason != ReasonUnknownKind {
		t.Fatalf("the event: %s %s", ev.Kind, ev.Reason)
	}
	// It passes over the digest job now, for the rest of its session.
	if r := h.one(dispatch("w", 2)); r.Job != b {
		t.Fatalf("got %d, want %d (digest passed over)", r.Job, b)
	}
	h.one(started(uint64(b), 1, "w"))
	// Its process restarts: the new session lists nothing. The started
	// job is lost as a lease is, at once.
	if r := h.one(hello("w", false, nil)); r.Job != b || r.Refused() {
		t.Fatalf("reconnect: %+v", r)
	}
	if j, _ := h.job(b); j.State != sfq.Queued || j.Failures != 1 {
		t.Fatalf("a started job lost on reconnect: %s, %d failures", j.State, j.Failures)
	}
	if ev := h.lastEvent(); ev.Kind != EvRequeued || ev.Reason != ReasonReconnected {
		t.Fatalf("the event: %s %s", ev.Kind, ev.Reason)
	}
	// The new session runs every kind again: it gets the digest job
	// (ahead by ID); never started, it is lost with no failure.
	if r := h.one(dispatch("w", 1)); r.Job != a {
		t.Fatalf("the new session got %d, want %d", r.Job, a)
	}
	h.one(hello("w", false, nil))
	if j, _ := h.job(a); j.State != sfq.Queued || j.Failures != 0 || j.Attempt != 2 {
		t.Fatalf("an assignment lost on reconnect: %s, %d failures, attempt %d", j.State, j.Failures, j.Attempt)
	}
	// A Hello that lists the run keeps it.
	r := h.one(dispatch("w", 1))
	h.one(hello("w", false, nil, &clusterpb.HeldJob{Job: uint64(r.Job), Attempt: r.Attempt}))
	if j, _ := h.job(r.Job); j.State != sfq.Assigned {
		t.Fatalf("a listed run: %s", j.State)
	}
	// A job with no form runs on every worker: unknown_kind is refused.
	c := h.one(submit("acme", "", 100, "x")).Job
	h.one(hello("v", false, nil))
	if r := h.one(dispatch("v", 1)); r.Job != b {
		t.Fatalf("got %d, want %d", r.Job, b)
	}
	h.one(finished(uint64(b), 2, "v", 10))
	if r := h.one(dispatch("v", 2)); r.Job != c {
		t.Fatalf("got %d, want %d", r.Job, c)
	}
	if r := h.one(unknownKind(uint64(c), 1, "v")); r.Code != FailedPrecondition || r.Field != "outcome" {
		t.Fatalf("unknown_kind of a job with no form: %+v", r)
	}
}

// TestKindPolicies: what a submit does not set, its tenant's policy of
// its kind sets, then every tenant's, then the cluster's.
func TestKindPolicies(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	h.one(tenant("beta", pb.Tier_GOLD))
	policy := func(tenant, kind string, attempts uint32, timeout int64) *clusterpb.Command {
		return &clusterpb.Command{Cmd: &clusterpb.Command_KindPolicySet{KindPolicySet: &clusterpb.KindPolicySet{Tenant: tenant, Kind: kind,
			MaxAttempts: attempts, TimeoutMs: timeout, RetryBackoffMaxMs: 9_000}}}
	}
	if r := h.one(policy("", "digest", 7, 60_000)); r.Refused() {
		t.Fatal(r)
	}
	if r := h.one(policy("acme", "digest", 2, 0)); r.Refused() {
		t.Fatal(r)
	}
	if r := h.one(policy("acme", "digest", 2, 0)); r.Outcome != sfq.Duplicate {
		t.Fatalf("the same policy again: %+v", r)
	}
	mine := h.one(submitForm("acme", "digest", pb.JobForm_FUNCTION)).Job
	theirs := h.one(submitForm("beta", "digest", pb.JobForm_FUNCTION)).Job
	own := &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "acme", JobType: "digest", Size: pb.Size_MD,
		EstCostMs: 1000, Form: pb.JobForm_FUNCTION, MaxAttempts: 5, TimeoutMs: 1000}}}
	ownJob := h.one(own).Job
	other := h.one(submitForm("acme", "resize", pb.JobForm_FUNCTION)).Job
	for _, c := range []struct {
		id       sfq.JobID
		attempts uint32
		timeout  int64
		max      int64
	}{
		{mine, 2, 60_000, 9_000},   // acme's attempts, every tenant's timeout
		{theirs, 7, 60_000, 9_000}, // every tenant's
		{ownJob, 5, 1000, 9_000},   // the submit's own values win
		{other, 3, 0, 0},           // no policy: the cluster's
	} {
		j, _ := h.job(c.id)
		if uint32(j.MaxAttempts) != c.attempts || j.TimeoutMs != c.timeout || j.RetryBackoffMax() != c.max {
			t.Errorf("job %d: max_attempts %d, timeout %d, backoff max %d; want %d, %d, %d", c.id, j.MaxAttempts, j.TimeoutMs, j.RetryBackoffMax(),
				c.attempts, c.timeout, c.max)
		}
	}
	if got := h.f.KindPolicies("acme", true); len(got) != 2 || got[0].TenantName != "" || got[1].TenantName != "acme" {
		t.Fatalf("acme's policies and every tenant's: %+v", got)
	}
	// Deleting the tenant forgets its policies.
	h.one(&clusterpb.Command{Cmd: &clusterpb.Command_TenantDelete{TenantDelete: &clusterpb.TenantDelete{Name: "beta"}}})
	rm := &clusterpb.Command{Cmd: &clusterpb.Command_KindPolicySet{KindPolicySet: &clusterpb.KindPolicySet{Kind: "digest", Remove: true}}}
	if r := h.one(rm); r.Refused() || len(h.f.KindPolicies("", false)) != 0 {
		t.Fatalf("remove: %+v %+v", r, h.f.KindPolicies("", false))
	}
	if r := h.one(rm); r.Outcome != sfq.Duplicate {
		t.Fatalf("remove again: %+v", r)
	}
}

// TestKindsGatedBelowLevel8: below level 8 a submit's form is ignored
// (every worker runs the job, as before), and the commands of kinds are
// refused; a state at level 8 with kinds reads back the same.
func TestKindsGatedBelowLevel8(t *testing.T) {
	h := &harness{t: t, f: newAt(Level7), now: 1000}
	h.one(tenant("acme", pb.Tier_GOLD))
	id := h.one(submitForm("acme", "digest", pb.JobForm_FUNCTION)).Job
	if j, _ := h.job(id); j.Form() != sfq.FormAny {
		t.Fatalf("a form at level 7: %s", j.Form())
	}
	for _, c := range []*clusterpb.Command{hello("w", true, nil), unknownKind(uint64(id), 1, "w"),
		{Cmd: &clusterpb.Command_KindPolicySet{KindPolicySet: &clusterpb.KindPolicySet{Kind: "digest", MaxAttempts: 2}}}} {
		if r := h.one(c); r.Code != FailedPrecondition {
			t.Errorf("%v at level 7: %+v", c, r)
		}
	}

	h = newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	h.one(submitForm("acme", "digest", pb.JobForm_FUNCTION))
	h.one(hello("py", false, []string{"digest"}))
	h.one(hello("old", false, nil))
	h.one(&clusterpb.Command{Cmd: &clusterpb.Command_KindPolicySet{KindPolicySet: &clusterpb.KindPolicySet{Tenant: "acme", Kind: "digest", MaxAttempts: 2}}})
	v, err := h.f.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	e := sfq.NewEncoder(&b)
	v.Encode(e)
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	back, err := DecodeState(sfq.NewDecoder(bytes.NewReader(b.Bytes())), 9)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := back.Worker("py")
	old, _ := back.Worker("old")
	if w.Runs == nil || !slices.Equal(w.Runs.Kinds, []string{"digest"}) || old.Runs != nil || len(back.KindPolicies("acme", false)) != 1 {
		t.Fatalf("read back: py runs %+v, old %+v, policies %+v", w.Runs, old.Runs, back.KindPolicies("acme", false))
	}
	h1, _ := h.f.Hash()
	h2, _ := back.Hash()
	if h1 != h2 {
		t.Fatal("the state read back hashes differently")
	}
}

// lastEvent is the newest event of the log.
func (h *harness) lastEvent() Event {
	var last Event
	h.f.Events(0, func(ev *Event) bool { last = *ev; return true })
	return last
}

// TestKeyedResendOfAnotherForm: a keyed resend of the same job as another
// form is other content (ALREADY_EXISTS), not the same job.
func TestKeyedResendOfAnotherForm(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	keyed := func(form pb.JobForm) *clusterpb.Command {
		return &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "acme", IdempotencyKey: "k", JobType: "digest",
			Size: pb.Size_MD, EstCostMs: 1000, Form: form}}}
	}
	first := h.one(keyed(pb.JobForm_FUNCTION))
	if r := h.one(keyed(pb.JobForm_FUNCTION)); r.Job != first.Job || r.Created {
		t.Fatalf("the same resend: %+v", r)
	}
	if r := h.one(keyed(pb.JobForm_COMMAND)); r.Code != AlreadyExists {
		t.Fatalf("a resend as a command job: %+v", r)
	}
}
