package rpc

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"

	pb "github.com/baristahq/barista/proto"
)

func resourceText(r *pb.Resource) string {
	tm := "none"
	if r.TenantMax != nil {
		tm = fmt.Sprint(*r.TenantMax)
	}
	s := fmt.Sprintf("%s capacity=%d tenant_max=%s held=%d users=%d queued=%d blocked=%d reserved=%d created=%v", r.Name, r.Capacity, tm, r.Held, r.Users,
		r.Queued, r.Blocked, r.ReservedJobId, r.Created)
	for _, t := range r.Tenants {
		s += fmt.Sprintf(" %s:max=%d,held=%d", t.Tenant, t.Max, t.Held)
	}
	return s
}

// TestResourcesAtTheEdge: a resource declared, a tenant's own limit set,
// read and listed; a client token's submit that uses it; explain of a job
// the resource holds back (reason resource, its fields); every bad input
// refused with its code and words; delete refused while a job uses it.
func TestResourcesAtTheEdge(t *testing.T) {
	ctx := context.Background()
	n := startPoolNode(t, 0)
	n.tenant(t, "acme", pb.Tier_GOLD)

	_, err := n.admin.ResourceSet(ctx, &pb.ResourceSetRequest{Name: "OpenAI", Capacity: u32(4)})
	wantStatus(t, err, codes.InvalidArgument, `resource: resource name "OpenAI" has 'O' at byte 0 (want a-z, 0-9 and -, not starting with -)`)
	_, err = n.admin.ResourceSet(ctx, &pb.ResourceSetRequest{Name: "openai"})
	wantStatus(t, err, codes.InvalidArgument, `capacity: required to set resource openai`)
	_, err = n.admin.ResourceSet(ctx, &pb.ResourceSetRequest{Name: "openai", Capacity: u32(2_000_000)})
	wantStatus(t, err, codes.InvalidArgument, `capacity: 2000000, at most 1000000`)
	_, err = n.acme.Submit(ctx, &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1000, Uses: []*pb.ResourceUse{{Resource: "openai", Units: 1}}})
	wantStatus(t, err, codes.NotFound, `resource: unknown resource "openai"`)

	r, err := n.admin.ResourceSet(ctx, &pb.ResourceSetRequest{Name: "openai", Capacity: u32(0), TenantMax: u32(3)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := resourceText(r), "openai capacity=0 tenant_max=3 held=0 users=0 queued=0 blocked=0 reserved=0 created=true"; got != want {
		t.Errorf("ResourceSet: %s, want %s", got, want)
	}
	if _, err = n.admin.ResourceSet(ctx, &pb.ResourceSetRequest{Name: "openai", Tenant: "acme", Max: u32(2)}); err != nil {
		t.Fatal(err)
	}
	_, err = n.acme.Submit(ctx, &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1000, Uses: []*pb.ResourceUse{{Resource: "openai", Units: 1}}})
	wantStatus(t, err, codes.InvalidArgument, `uses: 1 units of resource openai, whose capacity is 0`)
	if _, err = n.admin.ResourceSet(ctx, &pb.ResourceSetRequest{Name: "openai", Capacity: u32(1), TenantMax: u32(3)}); err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for range 2 {
		resp, err := n.acme.Submit(ctx, &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1000, Uses: []*pb.ResourceUse{{Resource: "openai", Units: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, resp.JobId)
	}
	j, err := n.acme.GetJob(ctx, &pb.GetJobRequest{JobId: ids[0]})
	if err != nil || len(j.Uses) != 1 || j.Uses[0].Resource != "openai" || j.Uses[0].Units != 1 {
		t.Fatalf("GetJob: uses %v, %v", j.GetUses(), err)
	}
	r, err = n.admin.ResourceGet(ctx, &pb.ResourceGetRequest{Name: "openai"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := resourceText(r), "openai capacity=1 tenant_max=3 held=0 users=2 queued=2 blocked=0 reserved=0 created=false acme:max=2,held=0"; got != want {
		t.Errorf("ResourceGet: %s, want %s", got, want)
	}
	list, err := n.admin.ResourceList(ctx, &pb.ResourceListRequest{})
	if err != nil || len(list.Resources) != 1 || list.Resources[0].Name != "openai" {
		t.Fatalf("ResourceList: %v %v", list, err)
	}
	_, err = n.admin.ResourceGet(ctx, &pb.ResourceGetRequest{Name: "nope"})
	wantStatus(t, err, codes.NotFound, `resource: unknown resource "nope"`)

	// The capacity goes to 0 under the queued jobs: explain says so.
	if _, err = n.admin.ResourceSet(ctx, &pb.ResourceSetRequest{Name: "openai", Capacity: u32(0), TenantMax: u32(3)}); err != nil {
		t.Fatal(err)
	}
	r, err = n.admin.ResourceGet(ctx, &pb.ResourceGetRequest{Name: "openai"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := resourceText(r), "openai capacity=0 tenant_max=3 held=0 users=2 queued=2 blocked=2 reserved=0 created=false acme:max=2,held=0"; got != want {
		t.Errorf("ResourceGet with no room: %s, want %s", got, want)
	}
	e, err := n.acme.ExplainJob(ctx, &pb.ExplainJobRequest{JobId: ids[0]})
	if err != nil {
		t.Fatal(err)
	}
	if e.Reason != "resource" || e.Resource != "openai" || e.Held != 0 || e.Capacity != 0 || e.TenantMax != nil ||
		e.Text != fmt.Sprintf("Job %d (tenant acme, class normal, size sm) is next in its queue but resource openai has 0 of its 0 units held and no room for this job's; freed units go by the fair order. The jobs behind it in its queue go first if they can run (it keeps its place).", ids[0]) {
		t.Errorf("explain: %s %s held=%d capacity=%d %q", e.Reason, e.Resource, e.Held, e.Capacity, e.Text)
	}

	_, err = n.admin.ResourceDelete(ctx, &pb.ResourceDeleteRequest{Name: "openai"})
	wantStatus(t, err, codes.FailedPrecondition, `resource: resource openai is used by 2 unfinished jobs (scheduled, queued or running)`)
	for _, id := range ids {
		if _, err := n.acme.CancelJob(ctx, &pb.CancelJobRequest{JobId: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err = n.admin.ResourceDelete(ctx, &pb.ResourceDeleteRequest{Name: "openai"}); err != nil {
		t.Fatal(err)
	}
	_, err = n.admin.ResourceDelete(ctx, &pb.ResourceDeleteRequest{Name: "openai"})
	wantStatus(t, err, codes.NotFound, `resource: unknown resource "openai"`)
}
