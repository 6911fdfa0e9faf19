package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/test/cluster"
)

// TestRecreatedTenantThroughAPI: a tenant deleted and created again is a
// new tenant for its client token: an old idempotency key makes a new
// job, the old job is NOT_FOUND, its list, events and usage hold only the
// new one.
func TestRecreatedTenantThroughAPI(t *testing.T) {
	c := startWithTokens(t, 1, "")
	addr := c.Nodes[0].GRPCAddr
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, acme := adminAndAcme(t, addr)
	key := "nightly-report"
	submit := func() *pb.SubmitResponse {
		t.Helper()
		r, err := acme.Submit(ctx, &pb.SubmitRequest{IdempotencyKey: &key, Size: pb.Size_SM, EstCostMs: 1000, Payload: []byte("same")})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if _, err := admin.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "acme", Tier: pb.Tier_GOLD.Enum()}); err != nil {
		t.Fatal(err)
	}
	old := submit()
	if _, err := acme.CancelJob(ctx, &pb.CancelJobRequest{JobId: old.JobId}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.DeleteTenant(ctx, &pb.DeleteTenantRequest{Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "acme", Tier: pb.Tier_GOLD.Enum()}); err != nil {
		t.Fatal(err)
	}
	fresh := submit()
	if !fresh.Created || fresh.JobId == old.JobId {
		t.Fatalf("the old key after re-creating the tenant: %v (old job %d)", fresh, old.JobId)
	}
	_, err := acme.GetJob(ctx, &pb.GetJobRequest{JobId: old.JobId})
	if status.Code(err) != codes.NotFound || status.Convert(err).Message() != fmt.Sprintf("job %d not found", old.JobId) {
		t.Errorf("GetJob of the old job: %v", err)
	}
	list, err := acme.ListJobs(ctx, &pb.ListJobsRequest{})
	if err != nil || len(list.Jobs) != 1 || list.Jobs[0].JobId != fresh.JobId {
		t.Errorf("acme lists %v %v, want only job %d", list, err, fresh.JobId)
	}
	u, err := acme.TenantUsage(ctx, &pb.TenantUsageRequest{})
	if err != nil || u.Submitted != 1 || u.Cancelled != 0 || u.Queued != 1 {
		t.Errorf("usage of the new acme: %v %v", u, err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	stream, err := acme.WatchEvents(wctx, &pb.WatchEventsRequest{FromSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := stream.Recv()
	if err != nil || ev.JobId != fresh.JobId || ev.Kind != "queued" {
		t.Errorf("the new acme's first event: %v %v, want job %d queued", ev, err, fresh.JobId)
	}
	// The admin still finds the old job, under the name.
	if j, err := pb.NewClientClient(cluster.Dial(t, addr, adminToken, nil)).GetJob(ctx, &pb.GetJobRequest{JobId: old.JobId}); err != nil || j.State != "cancelled" || j.Tenant != "acme" {
		t.Errorf("admin GetJob of the old job: %v %v", j, err)
	}
}
