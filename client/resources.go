package client

import (
	"context"
	"fmt"
	"slices"

	pb "github.com/baristahq/barista/proto"
)

// Resources (SPEC §3 "Resources", feature level 8): limits shared across
// tenants — one API's concurrent calls, a licence server's seats — that
// jobs use (InsertOpts.Uses). An admin declares them.

// ResourceSet declares a resource or changes one; with Tenant, it sets
// that tenant's own limit instead. It sets a value, so it is retried on
// another node like a read. Typed: Client.ResourceSet,
// Client.ResourceTenantSet.
func (r Raw) ResourceSet(ctx context.Context, req *pb.ResourceSetRequest) (*pb.Resource, error) {
	return call(ctx, r.c, pb.NewAdminClient, req, pb.AdminClient.ResourceSet)
}

// ResourceGet returns one resource. Typed: Client.ResourceGet.
func (r Raw) ResourceGet(ctx context.Context, req *pb.ResourceGetRequest) (*pb.Resource, error) {
	return call(ctx, r.c, pb.NewAdminClient, req, pb.AdminClient.ResourceGet)
}

// ResourceList returns every resource by name. Typed:
// Client.ResourceList.
func (r Raw) ResourceList(ctx context.Context, req *pb.ResourceListRequest) (*pb.ResourceListResponse, error) {
	return call(ctx, r.c, pb.NewAdminClient, req, pb.AdminClient.ResourceList)
}

// ResourceDelete deletes a resource no unfinished job uses. It is sent
// once: a second delete answers NOT_FOUND. Typed: Client.ResourceDelete.
func (r Raw) ResourceDelete(ctx context.Context, req *pb.ResourceDeleteRequest) (*pb.ResourceDeleteResponse, error) {
	return call(ctx, r.c, pb.NewAdminClient, req, pb.AdminClient.ResourceDelete)
}

// Resource is a resource's settings and what it holds now.
type Resource struct {
	Name     string
	Capacity int
	// TenantMax is every tenant's limit on the units it holds, unless it
	// has its own (Tenants); unset: none.
	TenantMax Optional[int]
	Held      int // units live jobs hold (above Capacity after a decrease)
	Users     int // unfinished jobs that use it
	Queued    int // of them, those queued
	// Blocked is, of Queued, the jobs it holds back now: their units do
	// not fit in its free units, or another job's reservation of it
	// stands (a tenant's own limit not counted).
	Blocked int
	// Reserved is the job whose reservation of it stands (0: none): no
	// other job takes its units until that one is dispatched.
	Reserved uint64
	// Tenants are the tenants' own limits on it, by tenant name.
	Tenants []ResourceTenant
	Created bool // set by ResourceSet: the resource is new
}

// ResourceTenant is a tenant's own limit on a resource, and the units
// it holds.
type ResourceTenant struct {
	Tenant    string
	Max, Held int
}

func resourceOf(r *pb.Resource) *Resource {
	out := &Resource{Name: r.Name, Capacity: int(r.Capacity), Held: int(r.Held), Users: int(r.Users), Queued: int(r.Queued),
		Blocked: int(r.Blocked), Reserved: r.ReservedJobId, Created: r.Created}
	if r.TenantMax != nil {
		out.TenantMax = Some(int(*r.TenantMax))
	}
	for _, t := range r.Tenants {
		out.Tenants = append(out.Tenants, ResourceTenant{Tenant: t.Tenant, Max: int(t.Max), Held: int(t.Held)})
	}
	return out
}

// ResourceSpec is what ResourceSet declares of a resource: its capacity
// (0 .. 1,000,000 units) and every tenant's limit (unset: none). The
// tenants' own limits stay.
type ResourceSpec struct {
	Capacity  int
	TenantMax Optional[int]
}

// ResourceSet declares resource name or changes it, and answers it as it
// is now (Created: it is new). A decrease below the units held preempts
// nothing: running jobs keep their units.
func (c *Client) ResourceSet(ctx context.Context, name string, spec ResourceSpec) (*Resource, error) {
	if spec.Capacity < 0 {
		return nil, invalidArg(fmt.Sprintf("capacity: %d", spec.Capacity))
	}
	r, err := c.Raw().ResourceSet(ctx, &pb.ResourceSetRequest{Name: name, Capacity: new(u32(spec.Capacity)), TenantMax: ptr(spec.TenantMax, u32)})
	if err != nil {
		return nil, err
	}
	return resourceOf(r), nil
}

// ResourceTenantSet sets tenant's own limit on resource name (unset max:
// none of its own, the resource's TenantMax applies).
func (c *Client) ResourceTenantSet(ctx context.Context, name, tenant string, max Optional[int]) (*Resource, error) {
	r, err := c.Raw().ResourceSet(ctx, &pb.ResourceSetRequest{Name: name, Tenant: tenant, Max: ptr(max, u32)})
	if err != nil {
		return nil, err
	}
	return resourceOf(r), nil
}

// ResourceGet returns resource name.
func (c *Client) ResourceGet(ctx context.Context, name string) (*Resource, error) {
	r, err := c.Raw().ResourceGet(ctx, &pb.ResourceGetRequest{Name: name})
	if err != nil {
		return nil, err
	}
	return resourceOf(r), nil
}

// ResourceList returns every resource, by name.
func (c *Client) ResourceList(ctx context.Context) ([]*Resource, error) {
	resp, err := c.Raw().ResourceList(ctx, &pb.ResourceListRequest{})
	if err != nil {
		return nil, err
	}
	out := make([]*Resource, len(resp.Resources))
	for i, r := range resp.Resources {
		out[i] = resourceOf(r)
	}
	return out, nil
}

// ResourceDelete deletes resource name, which no unfinished job may use.
// It is sent once: a second delete answers ErrNotFound
// (ErrResourceUnknown).
func (c *Client) ResourceDelete(ctx context.Context, name string) error {
	_, err := c.Raw().ResourceDelete(ctx, &pb.ResourceDeleteRequest{Name: name})
	return err
}

// usesToPB is a job's uses as a submit sends them, by resource name.
func usesToPB(uses map[string]int) ([]*pb.ResourceUse, error) {
	if len(uses) == 0 {
		return nil, nil
	}
	names := make([]string, 0, len(uses))
	for n := range uses {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]*pb.ResourceUse, len(names))
	for i, n := range names {
		if uses[n] < 1 {
			return nil, invalidArg(fmt.Sprintf("uses: %d units of resource %s", uses[n], n))
		}
		out[i] = &pb.ResourceUse{Resource: n, Units: u32(uses[n])}
	}
	return out, nil
}

// usesOf is a job's uses, by resource name (nil: none).
func usesOf(us []*pb.ResourceUse) map[string]int {
	if len(us) == 0 {
		return nil
	}
	out := make(map[string]int, len(us))
	for _, u := range us {
		out[u.Resource] = int(u.Units)
	}
	return out
}
