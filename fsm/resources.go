package fsm

import (
	"encoding/binary"
	"slices"
	"strings"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// Resources (SPEC §3 "Resources", feature level 8): limits shared across
// tenants, declared by an admin (ResourceSet, ResourceDelete) and used by
// jobs (a submit's uses). The core keeps them (sfq/resources.go): what a
// resource holds, who may take its units, its reservation. Here are the
// commands' checks, shared by the edge (CheckFields, Admit) and Apply,
// the settings resource_reserve_after and max_resources, and the state
// version that carries them.

// stateVersionResources (feature level 8, a state that uses resources)
// is version 12 with the configuration's core part of the core's version
// 9 (resource_reserve_after and max_resources after max_snoozes) and the
// core's state of version 9 (the uses of jobs and the resource table). A
// state that never declared a resource, holds no job that uses one and
// keeps both settings at their defaults is written as version 11 or 12,
// byte for byte as before resources.
const stateVersionResources = 13

// usesResources reports whether the view must be written as version 13.
func (v *View) usesResources() bool { return v.sched.UsesResources() }

// resourceSet is what checkResourceSet found of a ResourceSet.
type resourceSet struct {
	spec sfq.ResourceSpec
	max  uint32 // a tenant's own limit (sfq.NoTenantMax: none)
}

// resourceFields checks what of a ResourceSet needs no state: the name,
// and either a capacity and tenant_max, or a tenant and its max.
func resourceFields(c *clusterpb.ResourceSet) (resourceSet, Result) {
	v := resourceSet{spec: sfq.ResourceSpec{Name: c.Name, TenantMax: sfq.NoTenantMax}, max: sfq.NoTenantMax}
	if err := sfq.ValidateResourceName(c.Name); err != nil {
		return v, refuse(err)
	}
	if c.Tenant != "" {
		if c.Capacity != nil || c.TenantMax != nil {
			return v, refusef(Invalid, "", "a tenant's own limit on resource %s sets max, not capacity or tenant_max", c.Name)
		}
		if c.Max != nil {
			if *c.Max > sfq.MaxResourceCapacity {
				return v, refusef(Invalid, "max", "%d, at most %d (or none)", *c.Max, sfq.MaxResourceCapacity)
			}
			v.max = *c.Max
		}
		return v, Result{}
	}
	if c.Max != nil {
		return v, refusef(Invalid, "max", "a tenant's own limit names its tenant")
	}
	if c.Capacity == nil {
		return v, refusef(Invalid, "capacity", "required to set resource %s", c.Name)
	}
	v.spec.Capacity = *c.Capacity
	if c.TenantMax != nil {
		v.spec.TenantMax = *c.TenantMax
	}
	if err := v.spec.Validate(); err != nil {
		return v, refuse(err)
	}
	return v, Result{}
}

// checkResourceSet is the check of a ResourceSet: its fields, then the
// resource (and the tenant, for a tenant's own limit) and max_resources
// for a new one. One that changes nothing is a duplicate.
func (f *FSM) checkResourceSet(c *clusterpb.ResourceSet) (resourceSet, Result) {
	v, r := resourceFields(c)
	if r.Refused() {
		return v, r
	}
	if c.Tenant != "" {
		if err := f.sched.CheckSetResourceLimit(c.Name, c.Tenant, v.max); err != nil {
			return v, refuse(err)
		}
		info, _ := f.sched.Resource(c.Name)
		own := uint32(sfq.NoTenantMax)
		if i := slices.IndexFunc(info.Limits, func(l sfq.TenantResourceLimit) bool { return l.Tenant == c.Tenant }); i >= 0 {
			own = info.Limits[i].Max
		}
		if own == v.max {
			return v, duplicate(c.Tenant)
		}
		return v, Result{Tenant: c.Tenant}
	}
	if err := f.sched.CheckSetResource(v.spec); err != nil {
		return v, refuse(err)
	}
	if info, ok := f.sched.Resource(c.Name); ok && info.ResourceSpec == v.spec {
		return v, duplicate("")
	}
	return v, Result{}
}

func (f *FSM) applyResourceSet(c *clusterpb.ResourceSet) Result {
	v, r := f.checkResourceSet(c)
	if r.Refused() || r.Outcome == sfq.Duplicate {
		return r
	}
	if c.Tenant != "" {
		if _, err := f.sched.SetResourceLimit(f.clock, c.Name, c.Tenant, v.max); err != nil {
			return refuse(err)
		}
		return Result{Outcome: sfq.Changed, Tenant: c.Tenant}
	}
	created, err := f.sched.SetResource(f.clock, v.spec)
	if err != nil {
		return refuse(err)
	}
	return Result{Outcome: sfq.Changed, Created: created}
}

// checkResourceDelete is the check of a ResourceDelete: the resource
// exists and no unfinished job uses it.
func (f *FSM) checkResourceDelete(c *clusterpb.ResourceDelete) Result {
	if err := f.sched.CheckDeleteResource(c.Name); err != nil {
		return refuse(err)
	}
	return Result{}
}

func (f *FSM) applyResourceDelete(c *clusterpb.ResourceDelete) Result {
	if r := f.checkResourceDelete(c); r.Refused() {
		return r
	}
	if err := f.sched.DeleteResource(c.Name); err != nil {
		return refuse(err)
	}
	return Result{Outcome: sfq.Changed}
}

// UsesFromPB converts a submit's uses, sorted by resource name, and
// checks them on their own (sfq.ValidateUses): at most 8, each resource
// once, each with 1 .. 1,000,000 units.
func UsesFromPB(us []*pb.ResourceUse) ([]sfq.Use, error) {
	if len(us) == 0 {
		return nil, nil
	}
	if len(us) > sfq.MaxUses {
		return nil, invalidf("uses", "%d resources, at most %d", len(us), sfq.MaxUses)
	}
	out := make([]sfq.Use, len(us))
	for i, u := range us {
		out[i] = sfq.Use{Resource: u.GetResource(), Units: u.GetUnits()}
	}
	if err := sfq.ValidateUses(out); err != nil {
		return nil, err
	}
	return sfq.SortUses(out), nil
}

// UsesToPB converts a job's uses.
func UsesToPB(us []sfq.Use) []*pb.ResourceUse {
	if len(us) == 0 {
		return nil
	}
	out := make([]*pb.ResourceUse, len(us))
	for i, u := range us {
		out[i] = &pb.ResourceUse{Resource: u.Resource, Units: u.Units}
	}
	return out
}

// appendUsesDigest appends a submit's uses to its digest (submitDigest),
// sorted by name: the same uses in another order are the same content.
// A submit without uses adds nothing, so that it keeps the digest it had
// before resources existed.
func appendUsesDigest(b []byte, us []*pb.ResourceUse) []byte {
	if len(us) == 0 {
		return b
	}
	sorted := slices.Clone(us)
	slices.SortFunc(sorted, func(a, b *pb.ResourceUse) int { return strings.Compare(a.GetResource(), b.GetResource()) })
	b = append(b, 'u')
	b = binary.AppendUvarint(b, uint64(len(sorted)))
	for _, u := range sorted {
		b = binary.AppendUvarint(b, uint64(len(u.GetResource())))
		b = append(b, u.GetResource()...)
		b = binary.AppendUvarint(b, uint64(u.GetUnits()))
	}
	return b
}

// resourceSettingsFromPB reads a SetConfig's settings of resources:
// resource_reserve_after (absent: the default) and max_resources.
func resourceSettingsFromPB(p *pb.SchedulerConfig, c *Config) {
	c.Sched.ResourceReserveAfterMs = sfq.DefaultResourceReserveAfterMs
	if p.ResourceReserveAfterMs != nil {
		c.Sched.ResourceReserveAfterMs = *p.ResourceReserveAfterMs
	}
	c.Sched.MaxResources = p.MaxResources
}

// resourceSettingsToPB sets the settings of resources on p.
func resourceSettingsToPB(c Config, p *pb.SchedulerConfig) {
	ms := c.Sched.ResourceReserveAfterMs
	p.ResourceReserveAfterMs = &ms
	p.MaxResources = c.Sched.MaxResources
}

// resourceConfigLevel is the level a SetConfig's settings of resources
// need: a value other than the default.
func resourceConfigLevel(p *pb.SchedulerConfig) (uint32, string) {
	switch {
	case p.ResourceReserveAfterMs != nil && *p.ResourceReserveAfterMs != sfq.DefaultResourceReserveAfterMs:
		return Level8, "resource_reserve_after"
	case p.GetMaxResources() != 0:
		return Level8, "max_resources"
	}
	return Level1, ""
}

// resourceLevel is the level a command's resource fields need: a submit
// that uses a resource, and every resource command, need Level8.
func resourceLevel(c *clusterpb.Command, r *levelNeed) {
	switch cmd := c.GetCmd().(type) {
	case *clusterpb.Command_Submit:
		r.need(len(cmd.Submit.Uses) > 0, Level8, "uses")
	case *clusterpb.Command_ResourceSet:
		r.need(true, Level8, "ResourceSet")
	case *clusterpb.Command_ResourceDelete:
		r.need(true, Level8, "ResourceDelete")
	}
}
