package sfq

// The resources in the state: their picture in a View, their encoding
// (state version 9) and their check in Verify.

import (
	"fmt"
	"slices"
	"strings"
)

// resourcePic is a resource as a View holds it: what is state of it.
type resourcePic struct {
	ResourceSpec
	limits   []tenantLimit
	stairs   []stair
	reserved JobID
	rank     Time
}

// resourcePics returns the declared resources by name. For a frozen view
// (freeze) their slices become shared: the next write copies them.
func (s *Scheduler) resourcePics(freeze bool) []resourcePic {
	if len(s.rs.byName) == 0 {
		return nil
	}
	out := make([]resourcePic, 0, len(s.rs.byName))
	for _, r := range s.rs.res {
		if !r.live {
			continue
		}
		if freeze {
			r.shared = true
		}
		out = append(out, resourcePic{ResourceSpec: r.ResourceSpec, limits: r.limits, stairs: r.stairs, reserved: r.reserved, rank: r.rank})
	}
	slices.SortFunc(out, func(a, b resourcePic) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// UsesResources reports whether the state holds anything of resources:
// a resource, a job that uses one, or a resource setting other than its
// default (the state is then written as version 9).
func (v *View) UsesResources() bool { return v.usesResources() }

func (v *View) usesResources() bool {
	if len(v.res) > 0 || v.cfg.ResourceReserveAfterMs != DefaultResourceReserveAfterMs || v.cfg.MaxResources != 0 {
		return true
	}
	uses := false
	v.jobs.Each(func(_ uint64, j *Job) bool {
		uses = j.UsesResources()
		return !uses
	})
	return uses
}

// encodeUses writes the resources a job uses (sorted by name).
func encodeUses(e *Encoder, us []Use) {
	e.Uvarint(uint64(len(us)))
	for _, u := range us {
		e.String(u.Resource)
		e.Uvarint(uint64(u.Units))
	}
}

// decodeUses reads what encodeUses wrote, checking it.
func decodeUses(d *Decoder, id JobID) []Use {
	n := d.Uvarint()
	if n > MaxUses {
		d.Fail("job %d uses %d resources", id, n)
		return nil
	}
	var us []Use
	for i := uint64(0); i < n && d.Err() == nil; i++ {
		us = append(us, Use{Resource: d.String(), Units: d.Uint32()})
	}
	if d.Err() != nil {
		return nil
	}
	if err := ValidateUses(us); err != nil || !slices.IsSortedFunc(us, func(a, b Use) int { return strings.Compare(a.Resource, b.Resource) }) {
		d.Fail("job %d uses resources %v out of order or range", id, us)
		return nil
	}
	return us
}

// encodeResources writes the resource table: each resource by name, its
// spec, its tenants' own limits, its reservation and its stairs.
func (v *View) encodeResources(e *Encoder) {
	e.Uvarint(uint64(len(v.res)))
	for _, r := range v.res {
		e.String(r.Name)
		e.Uvarint(uint64(r.Capacity))
		e.Uvarint(uint64(r.TenantMax))
		e.Uvarint(uint64(len(r.limits)))
		for _, l := range r.limits {
			e.Uvarint(uint64(l.tenant))
			e.Uvarint(uint64(l.max))
		}
		e.Uvarint(uint64(r.reserved))
		e.Varint(int64(r.rank))
		e.Uvarint(uint64(len(r.stairs)))
		for _, st := range r.stairs {
			e.Uvarint(uint64(st.k))
			e.Varint(int64(st.at))
		}
	}
}

// decodeResources reads what encodeResources wrote.
func (s *Scheduler) decodeResources(d *Decoder) error {
	n := d.Uvarint()
	if n > MaxMaxResources {
		return fmt.Errorf("%w: %d resources", ErrCorrupt, n)
	}
	prev := ""
	for i := uint64(0); i < n && d.Err() == nil; i++ {
		r := &resource{ResourceSpec: ResourceSpec{Name: d.String(), Capacity: d.Uint32(), TenantMax: d.Uint32()}}
		nl := d.Uvarint()
		if nl > uint64(s.tenants.Len()) {
			return fmt.Errorf("%w: resource %q has %d limits", ErrCorrupt, r.Name, nl)
		}
		for k := uint64(0); k < nl && d.Err() == nil; k++ {
			r.limits = append(r.limits, tenantLimit{tenant: d.Uint32(), max: d.Uint32()})
		}
		r.reserved = JobID(d.Uvarint())
		r.rank = Time(d.Varint())
		ns := d.Uvarint()
		if ns > MaxResourceCapacity+2 {
			return fmt.Errorf("%w: resource %q has %d stairs", ErrCorrupt, r.Name, ns)
		}
		for k := uint64(0); k < ns && d.Err() == nil; k++ {
			r.stairs = append(r.stairs, stair{k: d.Uint32(), at: Time(d.Varint())})
		}
		if d.Err() != nil {
			break
		}
		if err := r.Validate(); err != nil || (i > 0 && r.Name <= prev) {
			return fmt.Errorf("%w: resource %d (%q) is out of order or range", ErrCorrupt, i, r.Name)
		}
		prev = r.Name
		s.linkResource(r)
	}
	return d.Err()
}

// verifyResources checks each resource's derived counts against the job
// table — the units live jobs hold, in all and per tenant, and the
// unfinished jobs that use it — and its state: limits of live tenants
// in order and range, stairs that cover every count of units above its
// free units, a reservation by a job that uses it; and the interned uses
// against the jobs that have them.
func (s *Scheduler) verifyResources(report func(string, ...any)) {
	type tk struct {
		tenant uint32
		res    string
	}
	held := map[string]uint64{}
	users := map[string]uint64{}
	tenantHeld := map[tk]uint64{}
	refs := map[string]uint64{}
	queuedKeys := map[string]uint64{}
	s.jobs.View().Each(func(_ uint64, j *Job) bool {
		if !j.UsesResources() {
			return true
		}
		us := j.Uses()
		if len(us) == 0 {
			report("job %d's uses cannot be read", j.ID)
			return true
		}
		if j.State.Terminal() {
			return true
		}
		refs[j.usesPrefix()]++
		if j.State == Queued && !j.Lapsed {
			queuedKeys[j.usesPrefix()]++
		}
		for _, u := range us {
			users[u.Resource]++
			if j.State.Live() {
				held[u.Resource] += uint64(u.Units)
				tenantHeld[tk{s.owner(j.Tenant), u.Resource}] += uint64(u.Units)
			}
		}
		return true
	})
	live := 0
	for id, r := range s.rs.res {
		if !r.live {
			continue
		}
		live++
		if got, ok := s.rs.byName[r.Name]; !ok || got != ResourceID(id) {
			report("resource %q (slot %d) is not indexed", r.Name, id)
		}
		if r.held != held[r.Name] || r.users != users[r.Name] {
			report("resource %q holds %d units for %d users, the job table says %d for %d", r.Name, r.held, r.users, held[r.Name], users[r.Name])
		}
		delete(users, r.Name)
		if err := r.Validate(); err != nil {
			report("resource %q: %v", r.Name, err)
		}
		for i, l := range r.limits {
			if t := s.tenants.Get(uint64(l.tenant)); t == nil || t.Deleted || t.pool != DefaultPool || (l.max != NoTenantMax && l.max > MaxResourceCapacity) || (i > 0 && r.limits[i-1].tenant >= l.tenant) {
				report("resource %q: limit %d (tenant %d, max %d) is out of order or range", r.Name, i, l.tenant, l.max)
			}
		}
		if len(r.stairs) == 0 || r.stairs[0].k != NoTenantMax || r.stairs[len(r.stairs)-1].k <= level(r.free()) {
			report("resource %q: its stairs %v do not cover the counts above %d free units", r.Name, r.stairs, r.free())
		}
		for i := 1; i < len(r.stairs); i++ {
			if r.stairs[i].k >= r.stairs[i-1].k || r.stairs[i].at <= r.stairs[i-1].at {
				report("resource %q: its stairs %v are out of order", r.Name, r.stairs)
				break
			}
		}
		if r.reserved != 0 {
			j := s.jobs.Get(uint64(r.reserved))
			if j == nil || j.State != Queued || j.Lapsed || !slices.ContainsFunc(j.Uses(), func(u Use) bool { return u.Resource == r.Name }) {
				report("resource %q is reserved by job %d, not a queued job that uses it", r.Name, r.reserved)
			}
		}
	}
	if live != len(s.rs.byName) {
		report("%d resources are declared, %d indexed", live, len(s.rs.byName))
	}
	for name, n := range users {
		report("%d unfinished jobs use resource %q, which is not declared", n, name)
	}
	for i := range s.rt {
		for _, h := range s.rt[i].resHeld {
			r := s.rs.res[h.res]
			if uint64(h.units) != tenantHeld[tk{uint32(i), r.Name}] || h.units == 0 {
				report("tenant %d holds %d units of %q, the job table says %d", i, h.units, r.Name, tenantHeld[tk{uint32(i), r.Name}])
			}
			delete(tenantHeld, tk{uint32(i), r.Name})
		}
	}
	if len(tenantHeld) > 0 {
		report("%d tenants hold units the counts miss", len(tenantHeld))
	}
	n := 0
	for id := 1; id < len(s.rs.uses); id++ {
		e := &s.rs.uses[id]
		if e.refs == 0 {
			continue
		}
		n++
		if got := s.rs.byKey[e.key]; got != UsesID(id) || e.refs != refs[e.key] || e.queued != queuedKeys[e.key] {
			report("uses %v (id %d) count %d jobs, %d queued; the job table says %d, %d", decodeUsesKey(e.key), id, e.refs, e.queued, refs[e.key], queuedKeys[e.key])
		}
	}
	if n != len(refs) || n != len(s.rs.byKey) {
		report("%d sets of uses are interned, %d indexed, the job table has %d", n, len(s.rs.byKey), len(refs))
	}
	queued := make([]uint64, len(s.pools))
	s.jobs.View().Each(func(_ uint64, j *Job) bool {
		if j.UsesResources() && j.State == Queued && !j.Lapsed && int(j.Tenant) < len(s.rt) {
			queued[s.rt[j.Tenant].pool]++
		}
		return true
	})
	for pid, q := range queued {
		var have uint64
		if pid < len(s.rs.queuedUses) {
			have = s.rs.queuedUses[pid]
		}
		if have != q {
			report("pool %d has %d queued jobs that use resources, the job table says %d", pid, have, q)
		}
	}
}
