package rpc

import (
	"testing"

	"barista/fsm"
	pb "barista/proto"
	"barista/sfq"
)

// TestValidateSubmitClassDeadlineCost: the edge names the field and the
// rule for a class, a deadline and a cost left out; a cost may be left out
// only under estimate=auto.
func TestValidateSubmitClassDeadlineCost(t *testing.T) {
	auto := fsm.DefaultConfig()
	auto.Sched.Estimate = sfq.EstimateAuto
	for _, c := range []struct {
		req  *pb.SubmitRequest
		cfg  fsm.Config
		want string
	}{
		{&pb.SubmitRequest{Size: pb.Size_SM}, fsm.DefaultConfig(), "rpc error: code = InvalidArgument desc = est_cost_ms: must be positive (got 0); it may be left out only while the cluster's estimate is auto"},
		{&pb.SubmitRequest{Size: pb.Size_SM}, auto, ""},
		{&pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: -1}, auto, "rpc error: code = InvalidArgument desc = est_cost_ms: must be positive (got -1); it may be left out only while the cluster's estimate is auto"},
		{&pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1, Class: pb.Class(7)}, auto, "rpc error: code = InvalidArgument desc = class: must be critical, high, normal or low (got 7)"},
		{&pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1, Class: pb.Class_LOW, DeadlineMs: 999}, auto, "rpc error: code = InvalidArgument desc = deadline_ms: 999 is out of range (0 = none, else 1 s .. 1 year after the submit)"},
		{&pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1, Class: pb.Class_CRITICAL, DeadlineMs: 1000}, fsm.DefaultConfig(), ""},
	} {
		err := validateSubmit(c.req, c.cfg)
		if (err == nil && c.want != "") || (err != nil && err.Error() != c.want) {
			t.Errorf("%v: %v, want %q", c.req, err, c.want)
		}
	}
}

// TestExplainParagraphs: each reason the API gives, with its fields and
// its paragraph.
func TestExplainParagraphs(t *testing.T) {
	s, _ := sfq.New(sfq.DefaultConfig())
	s.UpsertTenant(sfq.TenantSpec{Name: "acme", Tier: sfq.Gold, MaxClass: sfq.ClassHigh, AllowDeadlines: true,
		Caps: sfq.Caps{MaxInflightCPUMs: 5000, MaxRunningHigh: 1}})
	sub := func(sz sfq.Size, cost int64, class sfq.Class, deadline int64) sfq.JobID {
		id, err := s.Submit(1000, sfq.Submission{Tenant: "acme", Size: sz, EstCostMs: cost, Class: class, DeadlineMs: deadline})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	running := sub(sfq.MD, 4000, sfq.ClassNormal, 0) // 1: dispatched below
	big := sub(sfq.MD, 2000, sfq.ClassNormal, 0)     // 2: 4 s + 2 s in flight > 5 s: cap
	behind := sub(sfq.MD, 10, sfq.ClassNormal, 0)    // 3: behind 2
	low := sub(sfq.SM, 10, sfq.ClassLow, 0)          // 4: a higher class has a job its workers fit
	high := sub(sfq.LG, 100, sfq.ClassHigh, 0)       // 5
	if a, ok, _ := s.Dispatch(1000, sfq.MD, "w-md"); !ok || a.Job != running {
		t.Fatalf("dispatched %+v", a)
	}
	dl := sub(sfq.SM, 10, sfq.ClassNormal, 60_000) // 6
	explain := func(id sfq.JobID) *pb.ExplainJobResponse {
		r, err := s.Explain(id)
		if err != nil {
			t.Fatal(err)
		}
		j, _ := s.Job(id)
		return explainToPB(&j, "acme", r)
	}
	for _, c := range []struct {
		id   sfq.JobID
		want string
		text string
	}{
		{running, "assigned", "Job 1 (tenant acme, class normal, size md) is assigned to worker w-md, which has not reported it started."},
		{big, "cap", "Job 2 (tenant acme, class normal, size md) is next in its queue but a cap holds it: tenant acme has 4s of estimated CPU in flight; with this job's 2s it would pass its cap of 5s."},
		{behind, "behind", "Job 3 (tenant acme, class normal, size md) waits behind 1 older job of its queue (same tenant, class and size): they go first, in order."},
		{low, "higher_class", "Job 4 (tenant acme, class low, size sm) could run, but a higher class than low has an eligible job that fits the same workers: higher classes go first."},
		{dl, "waiting", "Job 6 (tenant acme, class normal, size sm, deadline at 61000 ms) could run and waits its turn: 0 deadline jobs of class normal with an earlier deadline go first. Tenant acme's tag in class normal is 500 virtual ms; the class's virtual_now is 0."},
	} {
		got := explain(c.id)
		if got.Reason != c.want || got.Text != c.text {
			t.Errorf("job %d: %s %q\nwant %s %q", c.id, got.Reason, got.Text, c.want, c.text)
		}
	}
	if got := explain(big); got.Vertex != "tenant_inflight" || got.Current != 4000 || got.Limit != 5000 {
		t.Errorf("cap fields: %+v", got)
	}
	if got := explain(behind); got.Position != 1 {
		t.Errorf("behind fields: %+v", got)
	}
	j, _ := s.Job(high)
	nw := explainToPB(&j, "acme", sfq.Reason{Kind: sfq.ReasonNoWorker})
	if nw.Reason != "no_worker" || nw.Text != "Job 5 (tenant acme, class high, size lg) could run, but no connected, undrained worker of size lg or larger is there to take it." {
		t.Errorf("no_worker: %+v", nw)
	}
}
