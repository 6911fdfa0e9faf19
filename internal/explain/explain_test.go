package explain

import (
	"fmt"
	"strings"
	"testing"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
)

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
		ta, _ := s.Tenant("acme")
		return ToPB(&j, &ta, r, nil)
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
		{dl, "waiting", "Job 6 (tenant acme, class normal, size sm, deadline at cluster time 61000 ms) could run and waits its turn: 0 deadline jobs of class normal with an earlier deadline go first. Tenant acme's tag in class normal is 500 virtual ms; the class's virtual_now is 0."},
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
	ta, _ := s.Tenant("acme")
	nw := ToPB(&j, &ta, sfq.Reason{Kind: sfq.ReasonNoWorker}, nil)
	if nw.Reason != "no_worker" || nw.Text != "Job 5 (tenant acme, class high, size lg) could run, but no connected, undrained worker of size lg or larger is there to take it." {
		t.Errorf("no_worker: %+v", nw)
	}
}

// TestExplainGroupParagraphs: the group reasons through the API, each with
// its fields and its paragraph: the script of testdata/scenarios/
// group-explain.txt (group_cap=1, inflight_cpu=3s; a 1, 2; b 3 of 2.5 s;
// c 4, 5), then group_turn under both group orders.
func TestExplainGroupParagraphs(t *testing.T) {
	s, _ := sfq.New(sfq.DefaultConfig())
	s.UpsertTenant(sfq.TenantSpec{Name: "t", Tier: sfq.Free, GroupCap: 1, Caps: sfq.Caps{MaxInflightCPUMs: 3000}})
	for _, g := range []struct {
		group string
		cost  int64
	}{{"a", 1000}, {"a", 1000}, {"b", 2500}, {"c", 1000}, {"c", 1000}} {
		if _, err := s.Submit(0, sfq.Submission{Tenant: "t", Size: sfq.MD, EstCostMs: g.cost, Group: g.group}); err != nil {
			t.Fatal(err)
		}
	}
	if a, ok, _ := s.Dispatch(0, sfq.MD, "w1"); !ok || a.Job != 1 {
		t.Fatalf("dispatched %+v", a)
	}
	explain := func(id sfq.JobID) *pb.ExplainJobResponse {
		t.Helper()
		r, err := s.Explain(id)
		if err != nil {
			t.Fatal(err)
		}
		j, _ := s.Job(id)
		ta, _ := s.Tenant("t")
		return ToPB(&j, &ta, r, nil)
	}
	check := func(id sfq.JobID, reason, text string) *pb.ExplainJobResponse {
		t.Helper()
		got := explain(id)
		if got.Reason != reason || got.Text != text {
			t.Errorf("job %d: %s %q\nwant %s %q", id, got.Reason, got.Text, reason, text)
		}
		return got
	}
	r := check(2, "cap", "Job 2 (tenant t, class normal, size md, group a) is next in its queue but a cap holds it: group a of tenant t runs 1 jobs, its cap is 1 (its other groups are not held back).")
	if r.Vertex != "group_running" || r.Current != 1 || r.Limit != 1 || r.Group != "a" || r.GroupOrder != "" {
		t.Errorf("group cap fields: %+v", r)
	}
	r = check(3, "cap", "Job 3 (tenant t, class normal, size md, group b) is next in its queue but a cap holds it: tenant t has 1s of estimated CPU in flight; with this job's 2.5s it would pass its cap of 3s.")
	if r.Vertex != "tenant_inflight" || r.Current != 1000 || r.Limit != 3000 {
		t.Errorf("tenant cap fields: %+v", r)
	}
	check(4, "held", "Job 4 (tenant t, class normal, size md, group c) is held back: an older md job of tenant t is blocked by one of the tenant's limits, and jobs of one size keep their order, in this class and below, whatever their group.")
	r = check(5, "behind", "Job 5 (tenant t, class normal, size md, group c) waits behind 1 older job of its queue (same tenant, class and size): they go first, in order.")
	if r.Position != 1 {
		t.Errorf("behind fields: %+v", r)
	}
	// Job 1 ends: heads 2, 3 and 4 are eligible, fifo takes job 2.
	if _, err := s.Finish(1000, 1, 1, "w1", sfq.OutcomeOK, 1000, sfq.RunResult{}); err != nil {
		t.Fatal(err)
	}
	check(2, "waiting", "Job 2 (tenant t, class normal, size md, group a) could run and waits its turn: 0 candidates go first (deadline jobs of its class, and tenants with an earlier start tag). Tenant t's tag in class normal is 1000 virtual ms; the class's virtual_now is 0.")
	for _, id := range []sfq.JobID{3, 4} {
		r = check(id, "group_turn", fmt.Sprintf("Job %d (tenant t, class normal, size md, group %s) could run, but an older job of another group of tenant t goes first: under group_order fifo the oldest does.", id, map[sfq.JobID]string{3: "b", 4: "c"}[id]))
		if r.GroupOrder != "fifo" {
			t.Errorf("group_turn fields: %+v", r)
		}
	}
	// Under fair, the group with the lowest tag goes first: all three are
	// at 0, and the tie goes to the lowest job ID, job 2 of a; b and c wait.
	s.UpsertTenant(sfq.TenantSpec{Name: "t", Tier: sfq.Free, GroupCap: 1, GroupOrder: sfq.GroupFair, Caps: sfq.Caps{MaxInflightCPUMs: 3000}})
	r = check(4, "group_turn", "Job 4 (tenant t, class normal, size md, group c) could run, but another group of tenant t goes first: under group_order fair the group with the lowest group tag does.")
	if r.GroupOrder != "fair" {
		t.Errorf("group_turn fields under fair: %+v", r)
	}
}

// TestNoWorkerOfItsKind: a job whose pool and size have workers, none of
// which runs its kind, says which kind it waits for.
func TestNoWorkerOfItsKind(t *testing.T) {
	j := sfq.Job{ID: 9, Size: sfq.SM}
	ta := sfq.Tenant{TenantSpec: sfq.TenantSpec{Name: "acme"}}
	fn := ToPB(&j, &ta, sfq.Reason{Kind: sfq.ReasonNoWorker, NoWorkerKind: "thumbnail"}, nil)
	if fn.Reason != "no_worker" || fn.Kind != "thumbnail" ||
		!strings.HasSuffix(fn.Text, `could run, but no connected, undrained worker of size sm or larger runs its kind "thumbnail": it waits for a worker that registered it (no job fails for want of a worker).`) {
		t.Errorf("a function job: %+v", fn)
	}
	cmd := TextIn(&j, &ta, "gpu", sfq.Reason{Kind: sfq.ReasonNoWorker, NoWorkerKind: "command"}, nil, 0)
	if !strings.HasSuffix(cmd, "could run, but no connected, undrained worker of pool gpu of size sm or larger runs command jobs: it waits for one (no job fails for want of a worker).") {
		t.Errorf("a command job: %q", cmd)
	}
}
