package rpc

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// TestValidateSubmitClassDeadlineCost: the edge names the field and the
// rule for a class, a deadline and a negative cost, in Apply's words; a
// cost left out is the leader's to judge (the core's estimate rule: it
// may be left out only under estimate=auto).
func TestValidateSubmitClassDeadlineCost(t *testing.T) {
	auto := fsm.DefaultConfig()
	auto.Sched.Estimate = sfq.EstimateAuto
	for _, c := range []struct {
		req  *pb.SubmitRequest
		cfg  fsm.Config
		want string
	}{
		{&pb.SubmitRequest{Size: pb.Size_SM}, fsm.DefaultConfig(), ""},
		{&pb.SubmitRequest{Size: pb.Size_SM}, auto, ""},
		{&pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: -1}, auto, "rpc error: code = InvalidArgument desc = est_cost_ms: must be positive (got -1)"},
		{&pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1, Class: pb.Class(7)}, auto, "rpc error: code = InvalidArgument desc = class: 7 is not critical, high, normal or low"},
		{&pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1, Class: pb.Class_LOW, DeadlineMs: 999}, auto, "rpc error: code = InvalidArgument desc = deadline_ms: 999 is out of range (0 = none, else 1 s .. 1 year after the submit)"},
		{&pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1, Class: pb.Class_CRITICAL, DeadlineMs: 1000}, fsm.DefaultConfig(), ""},
	} {
		c.req.Tenant = "acme"
		err := edgeSubmit(context.Background(), c.req, &clusterpb.SubmitJob{}, c.cfg, fsm.MaxFeatureLevel)
		if (err == nil && c.want != "") || (err != nil && err.Error() != c.want) {
			t.Errorf("%v: %v, want %q", c.req, err, c.want)
		}
	}
}

// TestExplainNextWhenEveryWorkerIsBusy: a job with nothing ahead of it
// while the only worker that fits runs another job is next, and the
// leader says so (reason waiting, as in replay): its paragraph says every
// fitting worker is busy, not "0 candidates go first".
func TestExplainNextWhenEveryWorkerIsBusy(t *testing.T) {
	n := startTestNode(t, nil, nil)
	first := n.submit()
	w, _, err := n.connect("", hello("w1"))
	if err != nil {
		t.Fatal(err)
	}
	if a := w.ready(1); a.Job != uint64(first) {
		t.Fatalf("assigned %v", a)
	}
	second := n.submit()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := pb.NewClientClient(n.dial("")).ExplainJob(ctx, &pb.ExplainJobRequest{Tenant: "acme", JobId: uint64(second)})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("Job %d (tenant acme, class normal, size md) is next: nothing goes before it, and every worker that fits it (1 worker of size md or larger) is busy; the first to ask for work takes it.", second)
	if got.Reason != "waiting" || got.Ahead != 0 || got.FittingWorkers != 1 || !got.WorkersBusy || !strings.HasPrefix(got.Text, want) {
		t.Fatalf("%s ahead=%d fitting=%d busy=%v %q\nwant waiting, 0, 1, busy, %q", got.Reason, got.Ahead, got.FittingWorkers, got.WorkersBusy, got.Text, want)
	}
}

// TestExplainNextForItsSizeOnly: a job with nothing ahead among the jobs
// of its size, whose only fitting worker is larger and busy, is not said
// to be next for it: that worker takes a waiting job of its own size
// first (prefer-fit), and the paragraph says so.
func TestExplainNextForItsSizeOnly(t *testing.T) {
	n := startTestNode(t, nil, nil)
	first := n.submit() // md, tenant acme
	lg := hello("w1")
	lg.Size = pb.Size_LG
	w, _, err := n.connect("", lg)
	if err != nil {
		t.Fatal(err)
	}
	if a := w.ready(1); a.Job != uint64(first) {
		t.Fatalf("assigned %v", a)
	}
	second := n.submit()
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "beta", Tier: pb.Tier_FREE}}},
		&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "beta", Size: pb.Size_LG, EstCostMs: 1000}}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := pb.NewClientClient(n.dial("")).ExplainJob(ctx, &pb.ExplainJobRequest{Tenant: "acme", JobId: uint64(second)})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("Job %d (tenant acme, class normal, size md) is next among the md jobs of its class, and every worker that fits it (1 worker of size md or larger) is busy: a worker of size md takes it when it asks for work, but a larger worker takes the larger job that waits first (a job of its own size).", second)
	if got.Reason != "waiting" || got.Ahead != 0 || !strings.HasPrefix(got.Text, want) {
		t.Fatalf("%s ahead=%d %q\nwant %q", got.Reason, got.Ahead, got.Text, want)
	}
}
