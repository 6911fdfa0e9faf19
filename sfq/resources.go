package sfq

// Resources (SPEC §3 "Resources"): limits shared across tenants. A
// resource is a named count of units (an API's concurrent calls, a
// licence server's seats) with a capacity, an optional limit per tenant
// (the resource's tenant_max, or a tenant's own), and at most one
// reservation. A job uses up to MaxUses resources, some units of each,
// held from its Dispatch until its run ends.
//
// The jobs of a group's queue are kept apart by the resources they use
// (their uses, interned as a UsesID), as they are by route (kinds.go), so
// that a head blocked only by a resource is passed over: the part of the
// queue that uses it is skipped, and the jobs of the other parts are seen
// as if it were not there (resourcepick.go).

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/baristahq/barista/internal/text"
)

// Limits of resources.
const (
	// MaxResourceCapacity bounds a resource's capacity and its limits per
	// tenant.
	MaxResourceCapacity = 1_000_000
	// DefaultMaxResources is how many resources a cluster may declare
	// when its configuration says nothing (max_resources).
	DefaultMaxResources = 256
	// MaxMaxResources bounds max_resources.
	MaxMaxResources = 4096
	// MaxUses bounds the resources one job uses.
	MaxUses = 8
	// DefaultResourceReserveAfterMs is resource_reserve_after when the
	// configuration says nothing: a job blocked only by a resource for
	// longer than that may take its reservation.
	DefaultResourceReserveAfterMs = 60_000
	// MaxResourceReserveAfterMs bounds resource_reserve_after.
	MaxResourceReserveAfterMs = 7 * 24 * 3600 * 1000
)

// NoTenantMax stands for "no limit per tenant".
const NoTenantMax = math.MaxUint32

// ResourceSpec is what an admin declares of a resource.
type ResourceSpec struct {
	Name     string
	Capacity uint32
	// TenantMax is every tenant's limit on the resource's units it
	// holds, unless the tenant has its own; NoTenantMax: none.
	TenantMax uint32
}

// Validate checks the spec and names the offending field.
func (r *ResourceSpec) Validate() error {
	if err := ValidateResourceName(r.Name); err != nil {
		return err
	}
	if r.Capacity > MaxResourceCapacity {
		return invalidf("capacity", "%d, at most %d", r.Capacity, MaxResourceCapacity)
	}
	if r.TenantMax != NoTenantMax && r.TenantMax > MaxResourceCapacity {
		return invalidf("tenant_max", "%d, at most %d (or none)", r.TenantMax, MaxResourceCapacity)
	}
	return nil
}

// ValidateResourceName checks a resource's name: as a pool's,
// [a-z0-9][a-z0-9-]{0,62}.
func ValidateResourceName(s string) error {
	if err := text.ValidatePoolName(s); err != nil {
		return invalidf("resource", "%s", strings.Replace(err.Error(), "pool", "resource", 1))
	}
	return nil
}

// FormatTenantMax writes a limit per tenant as the replay and the CLI do:
// a number, or "none".
func FormatTenantMax(m uint32) string {
	if m == NoTenantMax {
		return "none"
	}
	return strconv.FormatUint(uint64(m), 10)
}

// ParseTenantMax reads a number 0..MaxResourceCapacity, or "none".
func ParseTenantMax(s string) (uint32, error) {
	if s == "none" {
		return NoTenantMax, nil
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n > MaxResourceCapacity {
		return 0, invalidf("", "limit %q (want 0..%d or none)", s, MaxResourceCapacity)
	}
	return uint32(n), nil
}

// Use is one resource a job uses, and how many of its units.
type Use struct {
	Resource string
	Units    uint32
}

// String writes the use as the replay does: NAME:K.
func (u Use) String() string { return u.Resource + ":" + strconv.FormatUint(uint64(u.Units), 10) }

// FormatUses writes uses as the replay does: NAME:K,... ("" for none).
func FormatUses(us []Use) string {
	var b strings.Builder
	for i, u := range us {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(u.String())
	}
	return b.String()
}

// ParseUses reads NAME:K,... (each name once; K >= 1), sorted by name.
func ParseUses(s string) ([]Use, error) {
	if s == "" {
		return nil, nil
	}
	var out []Use
	for _, part := range strings.Split(s, ",") {
		name, num, ok := strings.Cut(part, ":")
		if !ok {
			return nil, invalidf("uses", "%q (want RESOURCE:UNITS)", part)
		}
		n, err := strconv.ParseUint(num, 10, 32)
		if err != nil {
			return nil, invalidf("uses", "units %q of resource %q (want a number)", num, name)
		}
		out = append(out, Use{Resource: name, Units: uint32(n)})
	}
	if err := ValidateUses(out); err != nil {
		return nil, err
	}
	return SortUses(out), nil
}

// SortUses returns uses sorted by resource name (the order a job keeps
// them in).
func SortUses(us []Use) []Use {
	slices.SortFunc(us, func(a, b Use) int { return strings.Compare(a.Resource, b.Resource) })
	return us
}

// ValidateUses checks a submit's uses on their own (not whether the
// resources exist): at most MaxUses, each a resource name once, with at
// least one unit and at most MaxResourceCapacity.
func ValidateUses(us []Use) error {
	if len(us) > MaxUses {
		return invalidf("uses", "%d resources, at most %d", len(us), MaxUses)
	}
	for i, u := range us {
		if err := ValidateResourceName(u.Resource); err != nil {
			return invalidf("uses", "%v", err)
		}
		if u.Units < 1 || u.Units > MaxResourceCapacity {
			return invalidf("uses", "%d units of resource %s (want 1..its capacity)", u.Units, u.Resource)
		}
		for _, v := range us[:i] {
			if v.Resource == u.Resource {
				return invalidf("uses", "resource %s is named twice", u.Resource)
			}
		}
	}
	return nil
}

// usesKey is the canonical text of uses sorted by name, as a job's text
// keeps it: uvarint(n), then each name (uvarint length first) and its
// units as a uvarint. It is also the key uses are interned by.
func usesKey(us []Use) string {
	if len(us) == 0 {
		return ""
	}
	b := binary.AppendUvarint(nil, uint64(len(us)))
	for _, u := range us {
		b = binary.AppendUvarint(b, uint64(len(u.Resource)))
		b = append(b, u.Resource...)
		b = binary.AppendUvarint(b, uint64(u.Units))
	}
	return string(b)
}

// usesWidth is the width of the uses text at the start of t (0: none
// readable).
func usesWidth(t string) int {
	n, w := uvarintPrefix(t)
	if w <= 0 {
		return 0
	}
	for i := uint64(0); i < n; i++ {
		l, k := uvarintPrefix(t[w:])
		if k <= 0 || uint64(len(t)-w-k) < l {
			return 0
		}
		w += k + int(l)
		_, k = uvarintPrefix(t[w:])
		if k <= 0 {
			return 0
		}
		w += k
	}
	return w
}

// decodeUsesKey reads the uses a uses text holds (nil if it holds none
// or is malformed).
func decodeUsesKey(t string) []Use {
	n, w := uvarintPrefix(t)
	if w <= 0 || n > MaxUses {
		return nil
	}
	out := make([]Use, 0, n)
	for i := uint64(0); i < n; i++ {
		name, rest, ok := cutString(t[w:])
		if !ok {
			return nil
		}
		w = len(t) - len(rest)
		k, kw := uvarintPrefix(rest)
		if kw <= 0 || k > math.MaxUint32 {
			return nil
		}
		w += kw
		out = append(out, Use{Resource: name, Units: uint32(k)})
	}
	return out
}

// usesPrefix is the uses text at the start of the job's text ("" when it
// uses no resource).
func (j *Job) usesPrefix() string {
	if j.bits&jobUses == 0 {
		return ""
	}
	return j.text[:usesWidth(j.text)]
}

// afterUses is the job's text after its uses.
func (j *Job) afterUses() string {
	if j.bits&jobUses == 0 {
		return j.text
	}
	return j.text[usesWidth(j.text):]
}

// setUses keeps the uses text key (sorted, validated) at the start of the
// job's text ("": none).
func (j *Job) setUses(key string) {
	rest := j.afterUses()
	j.bits &^= jobUses
	if key == "" {
		j.text = rest
		return
	}
	j.bits |= jobUses
	j.text = key + rest
}

// Uses returns the resources the job uses, sorted by name (nil: none).
func (j *Job) Uses() []Use { return decodeUsesKey(j.usesPrefix()) }

// UsesResources reports whether the job uses any resource.
func (j *Job) UsesResources() bool { return j.bits&jobUses != 0 }

// ResourceID is a resource's slot on this node: numbers are this node's
// alone (a restored node numbers resources by name), and no decision,
// encoding or hash reads them.
type ResourceID uint32

// UsesID names the uses of some jobs (0: none) on this node, as
// ResourceID does a resource.
type UsesID uint32

// tenantLimit is one tenant's own limit on a resource.
type tenantLimit struct {
	tenant uint32 // the tenant's own index
	max    uint32
}

// stair is one step of a resource's record of when it last had room: a
// job that needs k units (next step's k < k <= this k) has found no room
// since at (free units < k ever since). The steps are kept by k
// descending (at ascending); the first has k = NoTenantMax, and the last
// covers down to the free units (resourceStairs).
type stair struct {
	k  uint32
	at Time
}

// resource is a resource's record: its spec, its limits per tenant and
// its record of room and reservation (state), and what is derived.
type resource struct {
	ResourceSpec
	// limits: the tenants' own limits, by tenant; stairs: when each
	// count of units last found room; reserved: the job that holds the
	// reservation (0: none), and rank, when it was blocked since (the
	// reservation's rank against another's). limits and stairs are
	// never written in place while a view may hold them (shared).
	limits   []tenantLimit
	stairs   []stair
	reserved JobID
	rank     Time
	// Derived: the units live jobs hold, the unfinished jobs that use it,
	// and whether it is declared (a free slot is not).
	held   uint64
	users  uint64
	live   bool
	shared bool
	// standGen and standing cache, for one pick, whether the
	// reservation stands (resourcepick.go).
	standGen uint32
	standing bool
}

// free is the units no live job holds (negative after a capacity
// decrease below what is held).
func (r *resource) free() int64 { return int64(r.Capacity) - int64(r.held) }

// level is free clamped to the units a job may need (k >= 1): the lowest
// count the stairs cover is level+1.
func level(free int64) uint32 {
	if free <= 0 {
		return 0
	}
	return uint32(min(free, int64(math.MaxUint32-1)))
}

// tenantMax is tenant o's limit (own index) on the resource.
func (r *resource) tenantMax(o uint32) uint32 {
	if i, ok := slices.BinarySearchFunc(r.limits, o, func(l tenantLimit, o uint32) int { return cmp.Compare(l.tenant, o) }); ok {
		return r.limits[i].max
	}
	return r.TenantMax
}

// own makes the record's slices its own before a write (a frozen view
// may hold them).
func (r *resource) own() {
	if r.shared {
		r.limits = slices.Clone(r.limits)
		r.stairs = slices.Clone(r.stairs)
		r.shared = false
	}
}

// lacked returns since when a job needing k units (k > level(free)) has
// found no room at r.
func (r *resource) lacked(k uint32) Time {
	// The steps are by k descending: the first whose k is at most k, or
	// the one before it (whose k is above k).
	i, found := slices.BinarySearchFunc(r.stairs, k, func(s stair, k uint32) int { return cmp.Compare(k, s.k) })
	if !found {
		i--
	}
	return r.stairs[i].at
}

// moved records that r's free units went from oldFree to newFree at now:
// the counts of units that lost room lack it since now; those that found
// room again are forgotten.
func (r *resource) moved(oldFree, newFree int64, now Time) {
	o, n := level(oldFree), level(newFree)
	switch {
	case n < o:
		if last := r.stairs[len(r.stairs)-1]; last.at != now {
			r.own()
			r.stairs = append(r.stairs, stair{k: o, at: now})
		}
	case n > o:
		end := len(r.stairs)
		for end > 1 && r.stairs[end-1].k <= n {
			end--
		}
		if end != len(r.stairs) {
			r.own()
			r.stairs = r.stairs[:end]
		}
	}
}

// usesEntry is one interned set of uses: its text, its resources and
// units, and the unfinished jobs (and of them the queued ones, in a
// queue) that have it.
type usesEntry struct {
	key    string
	items  []useItem
	refs   uint64
	queued uint64
}

type useItem struct {
	res   ResourceID
	units uint32
}

// resourceTable is the scheduler's resources: by slot, with their names,
// and the interned uses.
type resourceTable struct {
	res    []*resource
	free   []ResourceID // slots not in use, lowest first when reused
	byName map[string]ResourceID
	uses   []usesEntry // by UsesID; uses[0] is "none"
	ufree  []UsesID
	byKey  map[string]UsesID
	// queuedUses counts the queued jobs (in a queue) that use any
	// resource, per pool: a pool with some dispatches by the pick that
	// sees resources (resourcepick.go).
	queuedUses []uint64
	// standGen numbers the picks (the cache of whether a reservation
	// stands).
	standGen uint32
}

// ResourceInfo is a read-only picture of a resource.
type ResourceInfo struct {
	ResourceSpec
	// Held is the units live jobs hold; Users the unfinished jobs that
	// use it; Queued those of them queued; Reserved the job that holds
	// its reservation while it stands (0: none), and ReservedSince when
	// that job was blocked since (the reservation's rank: of two that
	// stand, the one blocked longer, then the lower job ID, goes first).
	Held          uint64
	Users         uint64
	Queued        uint64
	Reserved      JobID
	ReservedSince Time
	// Blocked is, of Queued, the jobs the resource holds back now: those
	// whose units do not fit in its free units, and while a reservation
	// stands every other (a tenant's own limit is not counted).
	Blocked uint64
	// Limits are the tenants' own limits, by tenant name.
	Limits []TenantResourceLimit
}

// TenantResourceLimit is one tenant's own limit on a resource, and the
// units its live jobs hold.
type TenantResourceLimit struct {
	Tenant string
	Max    uint32
}

// TenantResourceUse is what one tenant holds of a resource, with its
// limit in force.
type TenantResourceUse struct {
	Resource string
	Held     uint32
	Max      uint32 // NoTenantMax: none
}

// resourceOf returns the declared resource named name.
func (s *Scheduler) resourceOf(name string) (*resource, ResourceID, bool) {
	id, ok := s.rs.byName[name]
	if !ok {
		return nil, 0, false
	}
	return s.rs.res[id], id, true
}

// ResourceCount is the number of declared resources.
func (s *Scheduler) ResourceCount() int { return len(s.rs.byName) }

// CheckSetResource is SetResource's verdict without the change: the spec
// is valid, and a new resource fits under max_resources.
func (s *Scheduler) CheckSetResource(spec ResourceSpec) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	maxResources := int(s.cfg.MaxResources)
	if maxResources == 0 {
		maxResources = DefaultMaxResources
	}
	if _, _, ok := s.resourceOf(spec.Name); !ok && len(s.rs.byName) >= maxResources {
		return exhaustedf(text.ReasonQuotaExceeded, "resource", "the cluster has %d resources, its max_resources", len(s.rs.byName))
	}
	return nil
}

// SetResource declares a resource or changes one (its capacity and
// tenant_max; the tenants' own limits stay) at now. A change takes
// effect at the next dispatch; a decrease below the units held preempts
// nothing. It reports whether it created the resource.
func (s *Scheduler) SetResource(now Time, spec ResourceSpec) (bool, error) {
	if err := s.CheckSetResource(spec); err != nil {
		return false, err
	}
	s.advance(now)
	if r, _, ok := s.resourceOf(spec.Name); ok {
		old := r.free()
		r.ResourceSpec = spec
		r.moved(old, r.free(), now)
		return false, nil
	}
	// Every count of units above its capacity has found no room since
	// it was declared.
	s.linkResource(&resource{ResourceSpec: spec, stairs: []stair{{k: NoTenantMax, at: now}}})
	return true, nil
}

// linkResource puts a declared resource in the lowest free slot.
func (s *Scheduler) linkResource(r *resource) ResourceID {
	rs := &s.rs
	if rs.byName == nil {
		rs.byName = map[string]ResourceID{}
		rs.byKey = map[string]UsesID{}
		rs.uses = []usesEntry{{}}
	}
	r.live = true
	var id ResourceID
	if n := len(rs.free); n > 0 {
		slices.Sort(rs.free)
		id, rs.free = rs.free[0], rs.free[1:]
		rs.res[id] = r
	} else {
		id = ResourceID(len(rs.res))
		rs.res = append(rs.res, r)
	}
	rs.byName[r.Name] = id
	return id
}

// CheckDeleteResource is DeleteResource's verdict without the change:
// the resource exists and no unfinished job (scheduled, queued or live)
// uses it.
func (s *Scheduler) CheckDeleteResource(name string) error {
	r, _, ok := s.resourceOf(name)
	if !ok {
		return UnknownResource(name)
	}
	if r.users > 0 {
		return preconditionf("", "resource", "resource %s is used by %d unfinished jobs (scheduled, queued or running)", name, r.users)
	}
	return nil
}

// DeleteResource forgets a resource no unfinished job uses.
func (s *Scheduler) DeleteResource(name string) error {
	if err := s.CheckDeleteResource(name); err != nil {
		return err
	}
	_, id, _ := s.resourceOf(name)
	delete(s.rs.byName, name)
	s.rs.res[id] = &resource{}
	s.rs.free = append(s.rs.free, id)
	return nil
}

// UnknownResource is the refusal of a resource that is not declared.
func UnknownResource(name string) error {
	return Refusef(CodeNotFound, text.ReasonResourceUnknown, "resource", "unknown resource %q", name)
}

// CheckSetResourceLimit is SetResourceLimit's verdict without the
// change: the resource and the tenant exist, and the limit is in range.
func (s *Scheduler) CheckSetResourceLimit(name, tenant string, max uint32) error {
	if _, _, ok := s.resourceOf(name); !ok {
		return UnknownResource(name)
	}
	if _, ok := s.TenantIndex(tenant); !ok {
		return UnknownTenant(tenant)
	}
	if max != NoTenantMax && max > MaxResourceCapacity {
		return invalidf("max", "%d, at most %d (or none)", max, MaxResourceCapacity)
	}
	return nil
}

// SetResourceLimit sets tenant's own limit on a resource (NoTenantMax:
// it has none of its own, and the resource's tenant_max applies). It
// reports whether anything changed.
func (s *Scheduler) SetResourceLimit(now Time, name, tenant string, max uint32) (bool, error) {
	if err := s.CheckSetResourceLimit(name, tenant, max); err != nil {
		return false, err
	}
	r, _, _ := s.resourceOf(name)
	o, _ := s.TenantIndex(tenant)
	i, found := slices.BinarySearchFunc(r.limits, o, func(l tenantLimit, o uint32) int { return cmp.Compare(l.tenant, o) })
	switch {
	case max == NoTenantMax && !found, found && r.limits[i].max == max:
		return false, nil
	}
	s.advance(now)
	r.own()
	switch {
	case max == NoTenantMax:
		r.limits = slices.Delete(r.limits, i, i+1)
	case found:
		r.limits[i].max = max
	default:
		r.limits = slices.Insert(r.limits, i, tenantLimit{tenant: o, max: max})
	}
	return true, nil
}

// dropResourceLimits forgets the limits of tenant o (own index), deleted.
func (s *Scheduler) dropResourceLimits(o uint32) {
	for _, r := range s.rs.res {
		if !r.live {
			continue
		}
		if i, ok := slices.BinarySearchFunc(r.limits, o, func(l tenantLimit, o uint32) int { return cmp.Compare(l.tenant, o) }); ok {
			r.own()
			r.limits = slices.Delete(r.limits, i, i+1)
		}
	}
}

// ResourceNames returns the declared resources' names, sorted.
func (s *Scheduler) ResourceNames() []string {
	names := make([]string, 0, len(s.rs.byName))
	for n := range s.rs.byName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Resource returns a picture of the resource named name.
func (s *Scheduler) Resource(name string) (ResourceInfo, bool) {
	r, id, ok := s.resourceOf(name)
	if !ok {
		return ResourceInfo{}, false
	}
	info := ResourceInfo{ResourceSpec: r.ResourceSpec, Held: r.held, Users: r.users, Reserved: s.standingHolder(r, false)}
	if info.Reserved != 0 {
		info.ReservedSince = r.rank
	}
	var holderUses UsesID // the uses of the job whose reservation stands
	if j := s.jobs.Get(uint64(info.Reserved)); info.Reserved != 0 && j != nil {
		holderUses = s.usesOf(j)
	}
	for u := range s.rs.uses {
		e := &s.rs.uses[u]
		for _, it := range e.items {
			if it.res != id {
				continue
			}
			info.Queued += e.queued
			switch {
			case r.held+uint64(it.units) > uint64(r.Capacity):
				info.Blocked += e.queued
			case info.Reserved != 0:
				n := e.queued
				if UsesID(u) == holderUses && n > 0 {
					n-- // the holder itself, which has room
				}
				info.Blocked += n
			}
		}
	}
	for _, l := range r.limits {
		info.Limits = append(info.Limits, TenantResourceLimit{Tenant: s.TenantName(l.tenant), Max: l.max})
	}
	return info, true
}

// TenantResources returns what tenant (own index o) holds of each
// resource it holds units of or has a limit on, by resource name.
func (s *Scheduler) TenantResources(o uint32) []TenantResourceUse {
	var out []TenantResourceUse
	for _, name := range s.ResourceNames() {
		r, id, _ := s.resourceOf(name)
		held := s.tenantHeld(o, id)
		m := r.tenantMax(o)
		if held == 0 && m == r.TenantMax {
			if _, own := slices.BinarySearchFunc(r.limits, o, func(l tenantLimit, o uint32) int { return cmp.Compare(l.tenant, o) }); !own {
				continue
			}
		}
		out = append(out, TenantResourceUse{Resource: name, Held: held, Max: m})
	}
	return out
}

// TenantHeld returns the units of the resource named name that tenant
// (own index o) holds, and its limit in force.
func (s *Scheduler) TenantHeld(o uint32, name string) (held, max uint32, ok bool) {
	r, id, ok := s.resourceOf(name)
	if !ok {
		return 0, 0, false
	}
	return s.tenantHeld(o, id), r.tenantMax(o), true
}

// resHeld is the units of one resource one tenant's live jobs hold.
type resHeld struct {
	res   ResourceID
	units uint32
}

// tenantHeld is the units of resource id that tenant o (own index) holds.
func (s *Scheduler) tenantHeld(o uint32, id ResourceID) uint32 {
	if int(o) >= len(s.rt) {
		return 0
	}
	for _, h := range s.rt[o].resHeld {
		if h.res == id {
			return h.units
		}
	}
	return 0
}

// addHeld adds d units of resource id to tenant o's (own index) count.
func (s *Scheduler) addHeld(o uint32, id ResourceID, d int64) {
	rt := &s.rt[o]
	for i := range rt.resHeld {
		if rt.resHeld[i].res == id {
			rt.resHeld[i].units = uint32(int64(rt.resHeld[i].units) + d)
			if rt.resHeld[i].units == 0 {
				rt.resHeld = slices.Delete(rt.resHeld, i, i+1)
			}
			return
		}
	}
	rt.resHeld = append(rt.resHeld, resHeld{res: id, units: uint32(d)})
}

// usesOf returns the UsesID of job j (0: it uses no resource). A job
// that uses resources is interned from its submit until it ends.
func (s *Scheduler) usesOf(j *Job) UsesID {
	if j.bits&jobUses == 0 {
		return 0
	}
	return s.rs.byKey[j.usesPrefix()]
}

// internUses counts one more unfinished job with the uses text key,
// interning it (its resources must be declared).
func (s *Scheduler) internUses(key string) (UsesID, error) {
	rs := &s.rs
	if id, ok := rs.byKey[key]; ok {
		rs.uses[id].refs++
		s.countUsers(id, 1)
		return id, nil
	}
	us := decodeUsesKey(key)
	if len(us) == 0 {
		return 0, fmt.Errorf("%w: a job's uses %q cannot be read", ErrCorrupt, key)
	}
	e := usesEntry{key: key, refs: 1}
	for _, u := range us {
		_, rid, ok := s.resourceOf(u.Resource)
		if !ok {
			return 0, UnknownResource(u.Resource)
		}
		e.items = append(e.items, useItem{res: rid, units: u.Units})
	}
	var id UsesID
	if n := len(rs.ufree); n > 0 {
		slices.Sort(rs.ufree)
		id, rs.ufree = rs.ufree[0], rs.ufree[1:]
		rs.uses[id] = e
	} else {
		id = UsesID(len(rs.uses))
		rs.uses = append(rs.uses, e)
	}
	rs.byKey[key] = id
	s.countUsers(id, 1)
	return id, nil
}

// releaseUses counts one unfinished job of uses id fewer, forgetting the
// uses when no job has them.
func (s *Scheduler) releaseUses(id UsesID) {
	if id == 0 {
		return
	}
	rs := &s.rs
	s.countUsers(id, -1)
	e := &rs.uses[id]
	e.refs--
	if e.refs == 0 {
		delete(rs.byKey, e.key)
		*e = usesEntry{}
		rs.ufree = append(rs.ufree, id)
	}
}

// countUsers adds d to the unfinished jobs of each resource of uses id.
func (s *Scheduler) countUsers(id UsesID, d int64) {
	for _, it := range s.rs.uses[id].items {
		r := s.rs.res[it.res]
		r.users = uint64(int64(r.users) + d)
	}
}

// hold takes the units of uses id for a job of tenant o (own index)
// dispatched at now (d = 1), or gives them back at the end of its run
// (d = -1).
func (s *Scheduler) hold(o uint32, id UsesID, d int64, now Time) {
	if id == 0 {
		return
	}
	for _, it := range s.rs.uses[id].items {
		r := s.rs.res[it.res]
		old := r.free()
		r.held = uint64(int64(r.held) + d*int64(it.units))
		r.moved(old, r.free(), now)
		s.addHeld(o, it.res, d*int64(it.units))
	}
}

// deriveHeld counts the units of uses id a live job of tenant o holds,
// as restore derives them (the record of room is state of its own).
func (s *Scheduler) deriveHeld(o uint32, id UsesID) {
	for _, it := range s.rs.uses[id].items {
		s.rs.res[it.res].held += uint64(it.units)
		s.addHeld(o, it.res, int64(it.units))
	}
}

// countQueuedUses adds d to the queued jobs (in a queue) of uses id in
// pool pid.
func (s *Scheduler) countQueuedUses(pid PoolID, id UsesID, d int64) {
	if id == 0 {
		return
	}
	s.rs.uses[id].queued = uint64(int64(s.rs.uses[id].queued) + d)
	for int(pid) >= len(s.rs.queuedUses) {
		s.rs.queuedUses = append(s.rs.queuedUses, 0)
	}
	s.rs.queuedUses[pid] = uint64(int64(s.rs.queuedUses[pid]) + d)
}

// resourceGated reports whether pool p holds queued jobs that use
// resources: its dispatches then take the pick that sees them.
func (s *Scheduler) resourceGated(pid PoolID) bool {
	return int(pid) < len(s.rs.queuedUses) && s.rs.queuedUses[pid] > 0
}

// resourcesBindIn reports whether pool pid holds queued jobs that use
// resources, and one of them may be held back by a resource: it then
// takes the pick that sees resources (pickFor). While no queued job's
// resource binds, no head is passed over, and the plain pick is that
// pick.
func (s *Scheduler) resourcesBindIn(pid PoolID) bool {
	return s.resourceGated(pid) && s.resourcesBind()
}

// resourcesBind reports whether a resource may hold back a queued job
// (of any pool): one that a queued job uses lacks room for its units,
// has a limit per tenant (its tenant_max or a tenant's own), or holds a
// reservation. It looks at each set of uses with queued jobs.
func (s *Scheduler) resourcesBind() bool {
	for u := 1; u < len(s.rs.uses); u++ {
		e := &s.rs.uses[u]
		if e.queued == 0 {
			continue
		}
		for _, it := range e.items {
			r := s.rs.res[it.res]
			if r.held+uint64(it.units) > uint64(r.Capacity) || r.TenantMax != NoTenantMax || len(r.limits) > 0 || r.reserved != 0 {
				return true
			}
		}
	}
	return false
}

// UsesResources reports whether pool pid holds queued jobs that use
// resources (its eligibility is then a pick's: see PoolEligible).
func (s *Scheduler) UsesResources(pid PoolID) bool { return s.resourceGated(pid) }

// EligibleWrites reports whether PoolEligible and PoolEligibleIn of pool
// pid run a pick that writes (its marks, the queues' caches, the route
// heaps' entries): while a resource may hold back one of the pool's
// queued jobs. Else they only read.
func (s *Scheduler) EligibleWrites(pid PoolID) bool { return s.resourcesBindIn(pid) }

// checkUses is the submit's check of its uses against the declared
// resources: each exists (NotFound) and has at least the units
// (Invalid: 1 <= K <= capacity).
func (s *Scheduler) checkUses(us []Use) error {
	for _, u := range us {
		r, _, ok := s.resourceOf(u.Resource)
		if !ok {
			return UnknownResource(u.Resource)
		}
		if u.Units > r.Capacity {
			return invalidf("uses", "%d units of resource %s, whose capacity is %d", u.Units, u.Resource, r.Capacity)
		}
	}
	return nil
}
