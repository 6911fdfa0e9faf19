package fsm

import (
	"fmt"
	"testing"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

func upsert(u *clusterpb.TenantUpsert) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: u}}
}

func submitJob(c *clusterpb.SubmitJob) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: c}}
}

// TestApplyRechecksClassAndDeadlines: max_class and allow_deadlines are
// checked again when the submit is applied, so that a tenant update that
// committed between the edge check and the submit wins, and the refusal
// names the rule.
func TestApplyRechecksClassAndDeadlines(t *testing.T) {
	h := newHarness(t)
	h.one(upsert(&clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD, MaxClass: pb.Class_CRITICAL, AllowDeadlines: true}))
	crit := &clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1000, JobClass: pb.Class_CRITICAL}
	dl := &clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1000, DeadlineMs: 5000}
	if r := h.one(submitJob(crit)); r.Code != OK {
		t.Fatalf("critical submit while allowed: %+v", r)
	}
	if r := h.one(submitJob(dl)); r.Code != OK {
		t.Fatalf("deadline submit while allowed: %+v", r)
	}
	// The admin takes both grants back; the same submits are refused.
	h.one(upsert(&clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD}))
	r := h.one(submitJob(crit))
	if r.Code != PermissionDenied || r.Err().Error() != "PERMISSION_DENIED: class critical is above tenant acme's max_class normal" {
		t.Fatalf("critical submit after the downgrade: %v", r.Err())
	}
	r = h.one(submitJob(dl))
	if r.Code != PermissionDenied || r.Msg != "tenant acme may not submit a job with a deadline (allow_deadlines is off)" {
		t.Fatalf("deadline submit after the downgrade: %v", r.Err())
	}
	// low is always allowed; normal is the default ceiling.
	for _, c := range []pb.Class{pb.Class_LOW, pb.Class_NORMAL, pb.Class_CLASS_UNSPECIFIED} {
		if r := h.one(submitJob(&clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1, JobClass: c})); r.Code != OK {
			t.Fatalf("class %v: %v", c, r.Err())
		}
	}
	if r := h.one(submitJob(&clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1, JobClass: pb.Class(9)})); r.Code != Invalid {
		t.Fatalf("class 9: %+v", r)
	}
	r = h.one(submitJob(&clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1, DeadlineMs: 999}))
	if r.Code != Invalid || r.Msg != "deadline_ms: 999 is out of range (0 = none, else 1 s .. 1 year after the submit)" {
		t.Fatalf("a deadline under a second: %+v", r)
	}
	if got := ResultToPB(Result{Code: PermissionDenied}).Code; got != clusterpb.Code_CODE_PERMISSION_DENIED {
		t.Fatalf("PermissionDenied is %v in the proto", got)
	}
}

// TestDeadlineMissedEvent: a deadline job dispatched after its deadline
// still runs; its dispatch result and assigned event say so.
func TestDeadlineMissedEvent(t *testing.T) {
	h := newHarness(t)
	h.one(upsert(&clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD, AllowDeadlines: true}))
	h.one(submitJob(&clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_MD, EstCostMs: 1000, DeadlineMs: 2000}))
	h.one(submitJob(&clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_MD, EstCostMs: 1000, DeadlineMs: 60_000}))
	h.now += 2000 // exactly at the deadline of job 1: not missed yet
	if r := h.one(dispatch("w1", 1)); !r.Assigned || r.Job != 1 || r.DeadlineMissed {
		t.Fatalf("dispatch at the deadline: %+v", r)
	}
	h.now += 60_000
	r := h.one(dispatch("w2", 1))
	if !r.Assigned || r.Job != 2 || !r.DeadlineMissed || !ResultToPB(r).DeadlineMissed {
		t.Fatalf("dispatch after the deadline: %+v", r)
	}
	var reasons []string
	h.f.Events(0, func(ev *Event) bool {
		if ev.Kind == EvAssigned {
			reasons = append(reasons, ev.Reason.String())
		}
		return true
	})
	if len(reasons) != 2 || reasons[0] != "" || reasons[1] != "deadline_missed" {
		t.Fatalf("assigned event reasons %q", reasons)
	}
}

// TestSubmitDigestStable: a submit without a class or deadline keeps the
// idempotency digest it had before they existed (keys remembered across
// the upgrade still match their retries); a class or a deadline is part
// of the content.
func TestSubmitDigestStable(t *testing.T) {
	mk := func() *clusterpb.SubmitJob {
		return &clusterpb.SubmitJob{Tenant: "acme", IdempotencyKey: "k", JobType: "t", Size: pb.Size_MD, EstCostMs: 1500, Payload: []byte("p"), MaxAttempts: 2, TimeoutMs: 9}
	}
	base := mk()
	// The digest this submit had before classes existed.
	if got := fmt.Sprintf("%x", submitDigest(base)); got != "61a1fdd57d83352bffcfef0b24b2335b" {
		t.Fatalf("digest %s changed", got)
	}
	normal := mk()
	normal.JobClass = pb.Class_NORMAL
	if submitDigest(normal) != submitDigest(base) {
		t.Fatal("an explicit normal class changed the digest")
	}
	high, dl := mk(), mk()
	high.JobClass = pb.Class_HIGH
	dl.DeadlineMs = 5000
	if submitDigest(high) == submitDigest(base) || submitDigest(dl) == submitDigest(base) || submitDigest(high) == submitDigest(dl) {
		t.Fatal("class or deadline is not part of the digest")
	}
}

// TestExplainScoped: the state machine explains a job and names its
// tenant (the API scopes the answer to the caller's tenant).
func TestExplainScoped(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	h.one(submit("acme", "", 1000, ""))
	h.one(submit("acme", "", 1000, ""))
	r, name, err := h.f.Explain(2)
	if err != nil || name != "acme" || r.Format() != "reason=behind position=1" {
		t.Fatalf("explain 2: %v %q %v", r.Format(), name, err)
	}
	r, _, _ = h.f.Explain(1)
	if r.Format() != "reason=waiting ahead=0 tag=0 vnow=0" {
		t.Fatalf("explain 1: %s", r.Format())
	}
	if _, _, err := h.f.Explain(99); err == nil {
		t.Fatal("explained an unknown job")
	}
	if r.Kind != sfq.ReasonWaiting {
		t.Fatal(r.Kind)
	}
}

// TestEstimateConfig: estimate mode and default cost ride in the
// replicated configuration; an entry from before they existed reads as
// submitted estimates and a 60 s default.
func TestEstimateConfig(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Sched.Estimate = sfq.EstimateAuto
	cfg.Sched.DefaultCostMs = 90_000
	got, err := ConfigFromPB(ConfigToPB(cfg))
	if err != nil || got.Sched.Estimate != sfq.EstimateAuto || got.Sched.DefaultCostMs != 90_000 {
		t.Fatalf("round trip: %+v %v", got.Sched, err)
	}
	old := ConfigToPB(DefaultConfig())
	old.Estimate, old.DefaultCostMs = pb.Estimate_ESTIMATE_UNSPECIFIED, 0
	got, err = ConfigFromPB(old)
	if err != nil || got.Sched.Estimate != sfq.EstimateSubmitted || got.Sched.DefaultCostMs != 60_000 {
		t.Fatalf("old entry: %+v %v", got.Sched, err)
	}
	old.DefaultCostMs = -1
	if _, err := ConfigFromPB(old); err == nil || err.Error() != "default_cost -1 ms (want 1 ms .. a CPU-year)" {
		t.Fatalf("negative default cost: %v", err)
	}
	h := newHarness(t)
	h.one(&clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: ConfigToPB(cfg)}}})
	h.one(tenant("acme", pb.Tier_GOLD))
	if r := h.one(submitJob(&clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM})); r.Code != OK {
		t.Fatalf("a submit without a cost under estimate=auto: %+v", r)
	}
	if j, _ := h.job(1); j.EstCostMs != 90_000 || j.EstSource != sfq.EstFromDefault {
		t.Fatalf("job 1 est %d from %s", j.EstCostMs, j.EstSource)
	}
}
