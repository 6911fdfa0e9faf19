package rpc

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
	"github.com/baristahq/barista/webhook"
)

// TestBulkCallsNeedLevel5: in a cluster whose voters understand only
// feature level 4, Redrive, CancelJobs and PurgeJobs (a dry run too) are
// refused at the edge, naming the command and both levels, before its
// fields are looked at (Apply's order); a request with no tenant is
// refused first, scoping the call.
func TestBulkCallsNeedLevel5(t *testing.T) {
	ctx := context.Background()
	key := webhook.Key("0123456789abcdef0123456789abcdef")
	admin, node, _ := startWebhookNodeAt(t, key, fsm.Level4)
	waitFor(t, 20*time.Second, "level 4", func() bool { return node.FSM.Level() == fsm.Level4 })
	if _, err := admin.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "acme", Tier: pb.Tier_GOLD.Enum()}); err != nil {
		t.Fatal(err)
	}
	cl := pb.NewClientClient(dialAdmin(t, node))
	msg := func(what string) string {
		return what + ` needs cluster feature level 5; the cluster is at level 4 until every voter runs a build that understands level 5 (docs/operations.md, "Upgrades")`
	}
	ids := &pb.BulkJobsRequest{Tenant: "acme", JobIds: []uint64{1}}
	_, err := cl.Redrive(ctx, ids)
	wantStatus(t, err, codes.FailedPrecondition, msg("Redrive"))
	_, err = cl.CancelJobs(ctx, &pb.BulkJobsRequest{Tenant: "acme", Filter: &pb.JobFilter{}, DryRun: true})
	wantStatus(t, err, codes.FailedPrecondition, msg("CancelJobs"))
	_, err = cl.PurgeJobs(ctx, ids)
	wantStatus(t, err, codes.FailedPrecondition, msg("Purge"))
	_, err = cl.Redrive(ctx, &pb.BulkJobsRequest{Tenant: "acme"})
	wantStatus(t, err, codes.FailedPrecondition, msg("Redrive"))
	_, err = cl.Redrive(ctx, &pb.BulkJobsRequest{Filter: &pb.JobFilter{}})
	wantStatus(t, err, codes.InvalidArgument, "tenant: required")
}

// TestBulkCommandSince: since_ms becomes the filter's absolute lower
// bound at the node that takes the call (none when it reaches back
// before cluster time 0), and a
// forwarded request (resolve false) keeps the bound it carries.
func TestBulkCommandSince(t *testing.T) {
	req := &pb.BulkJobsRequest{Filter: &pb.JobFilter{States: []string{"failed"}}, SinceMs: 60_000, PageToken: "p7"}
	c, err := bulkCommand(fsm.BulkRedrive, "acme", req, sfq.Time(100_000), true)
	if err != nil {
		t.Fatal(err)
	}
	b := c.GetRedrive()
	if b.Filter.SubmittedFromMs != 40_000 || b.After != 7 || b.SinceMs != 60_000 || b.Tenant != "acme" || req.Filter.SubmittedFromMs != 0 {
		t.Fatalf("resolved: %v (request %v)", b, req.Filter)
	}
	c, _ = bulkCommand(fsm.BulkRedrive, "acme", req, sfq.Time(10_000), true)
	if got := c.GetRedrive().Filter.SubmittedFromMs; got != 0 {
		t.Fatalf("since beyond the cluster's age: from %d, want 0 (no bound)", got)
	}
	fwd := &pb.BulkJobsRequest{Filter: &pb.JobFilter{SubmittedFromMs: 40_000}, SinceMs: 60_000}
	c, _ = bulkCommand(fsm.BulkCancel, "acme", fwd, sfq.Time(500_000), false)
	if got := c.GetCancelJobs().Filter.SubmittedFromMs; got != 40_000 {
		t.Fatalf("forwarded: from %d, want 40000", got)
	}
}
