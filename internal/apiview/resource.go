package apiview

import (
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
)

// Resource is a resource as the API shows it (SPEC §3 "Resources"):
// its settings, what it holds, its reservation, and the tenants' own
// limits with the units each holds (held, by tenant name).
func Resource(r *sfq.ResourceInfo, held func(tenant string) uint32) *pb.Resource {
	out := &pb.Resource{Name: r.Name, Capacity: r.Capacity, Held: r.Held, Users: r.Users, Queued: r.Queued, Blocked: r.Blocked, ReservedJobId: uint64(r.Reserved)}
	if r.TenantMax != sfq.NoTenantMax {
		m := r.TenantMax
		out.TenantMax = &m
	}
	for _, l := range r.Limits {
		out.Tenants = append(out.Tenants, &pb.ResourceTenant{Tenant: l.Tenant, Max: l.Max, Held: held(l.Tenant)})
	}
	return out
}

// TenantResources is what a tenant holds of each resource, with its
// limit in force there (absent: none), as the API shows it.
func TenantResources(uses []sfq.TenantResourceUse) []*pb.TenantResource {
	var out []*pb.TenantResource
	for _, u := range uses {
		r := &pb.TenantResource{Resource: u.Resource, Held: u.Held}
		if u.Max != sfq.NoTenantMax {
			m := u.Max
			r.Max = &m
		}
		out = append(out, r)
	}
	return out
}
