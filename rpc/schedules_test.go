package rpc

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
)

func fieldOf(err error) string {
	for _, d := range status.Convert(err).Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.FieldViolations) > 0 {
			return br.FieldViolations[0].Field
		}
	}
	return ""
}

// TestScheduleCalls: a tenant's client token manages its own schedules
// (set, get, list, pause, run-now, delete) and no other tenant's; the
// spec and zone are read at the edge; a schedule of every second fires
// on the node's leader loop, and explain says which schedule fired the
// job; a client's own key may not begin schedule/.
func TestScheduleCalls(t *testing.T) {
	ctx := context.Background()
	n := startPoolNode(t, 0)
	n.tenant(t, "acme", pb.Tier_GOLD)
	n.tenant(t, "beta", pb.Tier_GOLD)
	job := &pb.SubmitRequest{JobType: "report", Size: pb.Size_SM, EstCostMs: 1000, Payload: []byte("x")}
	set := func(c pb.ClientClient, req *pb.SetScheduleRequest) (*pb.Schedule, error) {
		if req.Job == nil {
			req.Job = job
		}
		return c.SetSchedule(ctx, req)
	}
	s, err := set(n.acme, &pb.SetScheduleRequest{Name: "nightly", Spec: "30 2 * * *", Zone: "Europe/Berlin"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Tenant != "acme" || s.Version != 1 || s.Zone != "Europe/Berlin" || len(s.NextSlotsMs) != 5 || s.CatchupMs != fsm.DefaultCatchupMs ||
		s.Job.GetJobType() != "report" || s.Overlap != pb.Overlap_OVERLAP_SKIP || s.NextFireMs != s.NextSlotsMs[0] {
		t.Fatalf("set: %+v", s)
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	if at := time.UnixMilli(s.NextSlotsMs[1]).In(berlin); at.Hour() != 2 || at.Minute() != 30 || s.NextSlotsMs[1]-s.NextSlotsMs[0] > 25*3600*1000 {
		t.Fatalf("next slots %v (%s)", s.NextSlotsMs, at)
	}
	for _, c := range []struct {
		req   *pb.SetScheduleRequest
		code  codes.Code
		field string
	}{
		{&pb.SetScheduleRequest{Name: "x", Spec: "61 * * * *"}, codes.InvalidArgument, "spec"},
		{&pb.SetScheduleRequest{Name: "x", Spec: "@daily", Zone: "Mars/Base"}, codes.InvalidArgument, "zone"},
		{&pb.SetScheduleRequest{Name: "x/y", Spec: "@daily"}, codes.InvalidArgument, "name"},
		{&pb.SetScheduleRequest{Name: "x", Spec: "@daily", Job: &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: -1}}, codes.InvalidArgument, "job.est_cost_ms"},
		{&pb.SetScheduleRequest{Name: "x", Spec: "@daily", CatchupMs: new(int64)}, codes.InvalidArgument, "catchup_ms"},
		{&pb.SetScheduleRequest{Tenant: "beta", Name: "x", Spec: "@daily"}, codes.PermissionDenied, "tenant"},
	} {
		if _, err := set(n.acme, c.req); status.Code(err) != c.code || fieldOf(err) != c.field {
			t.Errorf("%v: %v (field %q), want %v %q", c.req, err, fieldOf(err), c.code, c.field)
		}
	}
	if _, err := n.acme.GetSchedule(ctx, &pb.GetScheduleRequest{Tenant: "beta", Name: "nightly"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("another tenant's schedule: %v", err)
	}
	if _, err := n.cl.GetSchedule(ctx, &pb.GetScheduleRequest{Tenant: "beta", Name: "nightly"}); status.Code(err) != codes.NotFound {
		t.Fatalf("beta has no nightly: %v", err)
	}

	// A schedule of every second fires on the leader's loop.
	if _, err := set(n.acme, &pb.SetScheduleRequest{Name: "tick", Spec: "@every 1s", Overlap: pb.Overlap_OVERLAP_ALLOW}); err != nil {
		t.Fatal(err)
	}
	var tick *pb.Schedule
	waitFor(t, 20*time.Second, "a fire of tick", func() bool {
		tick, err = n.acme.GetSchedule(ctx, &pb.GetScheduleRequest{Name: "tick", Next: 2})
		return err == nil && tick.Fired >= 2
	})
	if tick.LastSlotMs%1000 != 0 || len(tick.NextSlotsMs) != 2 || tick.NextSlotsMs[0] <= tick.LastSlotMs {
		t.Fatalf("tick: %+v", tick)
	}
	j, err := n.acme.GetJob(ctx, &pb.GetJobRequest{JobId: tick.LastJobId})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(j.IdempotencyKey, "schedule/tick/") || j.JobType != "report" {
		t.Fatalf("the fired job: %+v", j)
	}
	ex, err := n.acme.ExplainJob(ctx, &pb.ExplainJobRequest{JobId: tick.LastJobId})
	if err != nil {
		t.Fatal(err)
	}
	if ex.Schedule != "tick" || ex.ScheduleSlotMs == 0 || !strings.Contains(ex.Text, "Schedule tick fired it, for its slot") {
		t.Fatalf("explain: %+v", ex)
	}
	p, err := n.acme.PauseSchedule(ctx, &pb.PauseScheduleRequest{Name: "tick"})
	if err != nil || !p.Paused || len(p.NextSlotsMs) != 0 {
		t.Fatalf("pause: %+v %v", p, err)
	}

	// Run-now: once per key.
	r1, err := n.acme.RunScheduleNow(ctx, &pb.RunScheduleNowRequest{Name: "nightly", Key: "deploy-1"})
	if err != nil || !r1.Created || r1.Key != "deploy-1" {
		t.Fatalf("run-now: %+v %v", r1, err)
	}
	r2, err := n.acme.RunScheduleNow(ctx, &pb.RunScheduleNowRequest{Name: "nightly", Key: "deploy-1"})
	if err != nil || r2.Created || r2.JobId != r1.JobId {
		t.Fatalf("run-now again: %+v %v", r2, err)
	}
	r3, err := n.acme.RunScheduleNow(ctx, &pb.RunScheduleNowRequest{Name: "nightly"})
	if err != nil || !r3.Created || r3.JobId == r1.JobId || len(r3.Key) != 16 {
		t.Fatalf("run-now without a key: %+v %v", r3, err)
	}

	list, err := n.acme.ListSchedules(ctx, &pb.ListSchedulesRequest{PageSize: 1})
	if err != nil || len(list.Schedules) != 1 || list.Schedules[0].Name != "nightly" || list.NextPageToken != "nightly" {
		t.Fatalf("list: %+v %v", list, err)
	}
	list, err = n.acme.ListSchedules(ctx, &pb.ListSchedulesRequest{PageToken: list.NextPageToken})
	if err != nil || len(list.Schedules) != 1 || list.Schedules[0].Name != "tick" || list.NextPageToken != "" {
		t.Fatalf("list, page 2: %+v %v", list, err)
	}
	if _, err := n.acme.DeleteSchedule(ctx, &pb.DeleteScheduleRequest{Name: "nightly"}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.acme.GetSchedule(ctx, &pb.GetScheduleRequest{Name: "nightly"}); status.Code(err) != codes.NotFound {
		t.Fatalf("deleted: %v", err)
	}
	if _, err := n.acme.Submit(ctx, &pb.SubmitRequest{IdempotencyKey: new("schedule/tick/5000"), Size: pb.Size_SM, EstCostMs: 1}); status.Code(err) != codes.InvalidArgument || fieldOf(err) != "idempotency_key" {
		t.Fatalf("a reserved key: %v", err)
	}

	old := startPoolNode(t, fsm.Level7)
	old.tenant(t, "acme", pb.Tier_GOLD)
	if _, err := set(old.acme, &pb.SetScheduleRequest{Name: "x", Spec: "@daily"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("at level 7: %v", err)
	}
}
