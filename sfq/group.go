package sfq

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/baristahq/barista/internal/text"
)

// GroupOrder is how a tenant chooses among the eligible heads of its
// groups (SPEC §3 "Groups").
type GroupOrder uint8

const (
	// GroupFIFO (default): the eligible head with the lowest job ID.
	GroupFIFO GroupOrder = iota
	// GroupFair: the groups share the tenant's dispatches equally in cost:
	// the eligible head whose group has the lowest group tag.
	GroupFair
)

func (o GroupOrder) String() string {
	if o == GroupFair {
		return "fair"
	}
	return "fifo"
}

// ParseGroupOrder reads "fifo" or "fair".
func ParseGroupOrder(s string) (GroupOrder, error) {
	switch s {
	case "fifo":
		return GroupFIFO, nil
	case "fair":
		return GroupFair, nil
	}
	return 0, invalidf("", "unknown group_order %q (want fifo or fair)", s)
}

// GroupCap is the cap an admin sets on one group: inherit the tenant's
// group_cap (the zero value), none, or a number of Assigned+Running jobs.
type GroupCap uint32

const (
	// GroupCapInherit: the tenant's group_cap applies.
	GroupCapInherit GroupCap = 0
	// GroupCapNone: no group cap, whatever the tenant's group_cap.
	GroupCapNone GroupCap = math.MaxUint32
)

// MaxGroupCap bounds a numeric group cap (and a tenant's group_cap).
const MaxGroupCap = 1_000_000

func (c GroupCap) String() string {
	switch c {
	case GroupCapInherit:
		return "inherit"
	case GroupCapNone:
		return "none"
	}
	return strconv.FormatUint(uint64(c), 10)
}

// ParseGroupCap reads "inherit", "none" or a number 1..MaxGroupCap.
func ParseGroupCap(s string) (GroupCap, error) {
	switch s {
	case "inherit":
		return GroupCapInherit, nil
	case "none":
		return GroupCapNone, nil
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n < 1 || n > MaxGroupCap {
		return 0, invalidf("", "group cap %q (want inherit, none or 1..%d)", s, MaxGroupCap)
	}
	return GroupCap(n), nil
}

// Limits on groups.
const (
	// MaxGroupNameLen bounds a group name.
	MaxGroupNameLen = 128
	// DefaultMaxGroups is a tenant's max_groups when it sets none.
	DefaultMaxGroups = 10_000
	// MaxMaxGroups bounds max_groups.
	MaxMaxGroups = 1_000_000
)

// ValidateGroupName checks a group name: 1..128 bytes of [A-Za-z0-9._:@-].
func ValidateGroupName(s string) error {
	if s == "" {
		return invalidf("", "group name is empty")
	}
	if len(s) > MaxGroupNameLen {
		return invalidf("", "group name is %d bytes (max %d)", len(s), MaxGroupNameLen)
	}
	for i, r := range s {
		if r >= 0x80 || !groupNameByte(byte(r)) {
			return invalidf("", "group name %q has %q at byte %d (allowed: A-Z a-z 0-9 . _ : @ -)", s, r, i)
		}
	}
	return nil
}

func groupNameByte(b byte) bool {
	switch {
	case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9':
		return true
	}
	return b == '.' || b == '_' || b == ':' || b == '@' || b == '-'
}

// GroupSettings is what is set on one named group: the admin's cap, and
// the tenant's own, tighter cap. Both are enforced: the group runs at most
// the lower of the two.
type GroupSettings struct {
	// Cap is the admin's: inherit (the tenant's group_cap), none, or N.
	Cap GroupCap
	// TenantCap is the tenant's own cap (0 = none). It can only tighten:
	// the admin's cap applies as well.
	TenantCap uint32
	// Rate is the group's rate limit (none: the zero value). Changing it
	// keeps the group's GCRA state; removing it forgets it.
	Rate RateLimit
}

// Empty reports whether nothing is set (the group is forgotten once it
// has no job and no pause either).
func (gs GroupSettings) Empty() bool {
	return gs.Cap == GroupCapInherit && gs.TenantCap == 0 && gs.Rate.None()
}

// Validate checks the settings and names the offending field.
func (gs GroupSettings) Validate() error {
	if gs.Cap != GroupCapNone && gs.Cap > MaxGroupCap {
		return invalidf("", "group cap %d (want inherit, none or 1..%d)", uint32(gs.Cap), MaxGroupCap)
	}
	if gs.TenantCap > MaxGroupCap {
		return invalidf("", "tenant group cap %d (want 0 for none, or 1..%d)", gs.TenantCap, MaxGroupCap)
	}
	return gs.Rate.Validate("group rate")
}

// Group is a group's record: a named group of a tenant, or its unnamed
// group (Name ""). A group with no queued or live job and no setting is
// forgotten at the end of the command that emptied it.
type Group struct {
	Tenant uint32
	Name   string
	GroupSettings
	// Running and Queued are derived from the job table and checked by
	// Verify: the group's Assigned+Running and queued jobs.
	Running uint32
	Queued  uint32
	// Scheduled counts the group's scheduled jobs (derived from the job
	// table on restore, checked by Verify; not encoded): they keep the
	// group.
	Scheduled uint32
	// tags holds the group's group_tag per class (group_order=fair).
	tags [NumClasses]VirtualTime
	// paused: the group is paused (pause.go); rateTAT: its rate limit's
	// theoretical arrival time (µs of cluster time).
	paused  PausedBy
	rateTAT int64
}

// kept reports whether the group holds something of its own (a setting
// or a pause), so that it is not forgotten when it has no job.
func (g *Group) kept() bool { return !g.Empty() || g.paused != NotPaused }

// Tag returns the group's group_tag in class c.
func (g *Group) Tag(c Class) VirtualTime { return g.tags[c] }

// capOf returns group g's cap in force for tenant t (0 = none): the
// admin's (the tenant's group_cap when it is inherit; the unnamed group
// has none), and the tenant's own, whichever is lower.
func capOf(t *Tenant, g *Group) uint32 {
	if g.Name == "" {
		return 0
	}
	var admin uint32
	switch g.Cap {
	case GroupCapInherit:
		admin = t.GroupCap
	case GroupCapNone:
	default:
		admin = uint32(g.Cap)
	}
	if g.TenantCap != 0 && (admin == 0 || g.TenantCap < admin) {
		return g.TenantCap
	}
	return admin
}

// CapOf returns the cap in force on a group of tenant t (0 = none).
func CapOf(t *Tenant, g *Group) uint32 { return capOf(t, g) }

// groupBlocked reports whether group g is blocked by a group-level limit:
// its cap, its pause or its rate limit (at the time eligibility was last
// evaluated).
func (s *Scheduler) groupBlocked(t *Tenant, g *Group) bool {
	return s.groupCapBlocked(t, g) || s.groupGate(g)
}

// groupCapBlocked reports whether group g's cap blocks it: its running
// jobs in every pool reach it.
func (s *Scheduler) groupCapBlocked(t *Tenant, g *Group) bool {
	c := capOf(t, g)
	return c > 0 && s.groupRunningOf(g) >= c
}

type groupKey struct {
	tenant uint32
	name   string
}

// groupRT is a group's derived runtime state.
type groupRT struct {
	// first and rest hold the group's queues, one per class and size it
	// has had a job of since it was created (a few, searched linearly;
	// the first inline, so that a group of one class and size costs no
	// second lookup).
	first groupQueue
	nq    int32
	rest  []groupQueue
	// idx[c*NumSizes+sz] is the index+1 of the queue of class c and size
	// sz (0: none), so that a lookup reads no other queue.
	idx [NumClasses * NumSizes]int8
	// pos is the group's index in its tenant's list of groups (and its
	// leaf in the tenant's tagMax trees).
	pos int32
}

// groupQueue holds one group's queued jobs of one class and size, split
// by route (kinds.go: which workers run them): in each part those without
// a deadline in FIFO order, those with one by (deadline_at, ID). The
// group's heads are the oldest of its parts' (a worker that runs every
// route sees them), and fnode and dnode are their nodes in the slot's
// trees. Most groups have one part, held inline.
type groupQueue struct {
	class        Class
	size         Size
	first        routeQueue
	rest         []routeQueue
	fnode, dnode int32
}

// routeQueue is the part of a group's queue of one route and one set of
// uses (the resources its jobs use: resources.go; 0 for none).
type routeQueue struct {
	route Route
	uses  UsesID
	fifo  jobQueue
	dls   *deadlineQueue // nil until the first deadline job
}

func (q *routeQueue) deadlines() *deadlineQueue {
	if q.dls == nil {
		q.dls = new(deadlineQueue)
	}
	return q.dls
}

// empty reports whether the part holds no entry.
func (q *routeQueue) empty() bool {
	return q.fifo.empty() && (q.dls == nil || len(q.dls.items) == 0)
}

// nparts is the number of q's parts.
func (q *groupQueue) nparts() int { return 1 + len(q.rest) }

// part returns q's i-th part (0 <= i < nparts).
func (q *groupQueue) part(i int) *routeQueue {
	if i == 0 {
		return &q.first
	}
	return &q.rest[i-1]
}

// of returns q's part of route r and uses u, or nil.
func (q *groupQueue) of(r Route, u UsesID) *routeQueue {
	if q.first.route == r && q.first.uses == u {
		return &q.first
	}
	for i := range q.rest {
		if q.rest[i].route == r && q.rest[i].uses == u {
			return &q.rest[i]
		}
	}
	return nil
}

// ofMut returns q's part of route r and uses u, making it. A part is
// kept while its queue lives (it is empty then, and costs its head's
// look-up only), unless an empty one is taken for another.
func (q *groupQueue) ofMut(r Route, u UsesID) *routeQueue {
	if p := q.of(r, u); p != nil {
		return p
	}
	if q.first.empty() {
		// The first part, empty: it takes the route and uses (most
		// groups have jobs of one).
		q.first = routeQueue{route: r, uses: u}
		return &q.first
	}
	for i := range q.rest {
		if q.rest[i].empty() {
			q.rest[i] = routeQueue{route: r, uses: u}
			return &q.rest[i]
		}
	}
	q.rest = append(q.rest, routeQueue{route: r, uses: u})
	return &q.rest[len(q.rest)-1]
}

// at returns the group's i-th queue (0 <= i < nq).
func (g *groupRT) at(i int32) *groupQueue {
	if i == 0 {
		return &g.first
	}
	return &g.rest[i-1]
}

// queue returns group gs's queue of class c and size sz, or nil.
func (s *Scheduler) queue(gs uint32, c Class, sz Size) *groupQueue {
	g := &s.grt[gs]
	if i := g.idx[int(c)*NumSizes+int(sz)]; i != 0 {
		return g.at(int32(i - 1))
	}
	return nil
}

// queueMut returns group gs's queue of class c and size sz, creating it.
func (s *Scheduler) queueMut(gs uint32, c Class, sz Size) *groupQueue {
	if q := s.queue(gs, c, sz); q != nil {
		return q
	}
	g := &s.grt[gs]
	g.nq++
	g.idx[int(c)*NumSizes+int(sz)] = int8(g.nq)
	if g.nq == 1 {
		g.first = groupQueue{class: c, size: sz, first: routeQueue{route: RouteAny}}
		return &g.first
	}
	g.rest = append(g.rest, groupQueue{class: c, size: sz, first: routeQueue{route: RouteAny}})
	return &g.rest[len(g.rest)-1]
}

// groupSlot returns the slot of tenant ti's group named name.
func (s *Scheduler) groupSlot(ti uint32, name string) (uint32, bool) {
	if name == "" {
		if u := s.rt[ti].unnamed; u != 0 {
			return u - 1, true
		}
		return 0, false
	}
	gs, ok := s.gindex[groupKey{ti, name}]
	return gs, ok
}

// jobGroup returns the slot of job j's group, which exists while the job
// is queued or live.
func (s *Scheduler) jobGroup(j *Job) uint32 {
	gs, ok := s.groupSlot(j.Tenant, j.Group())
	if !ok {
		panic(fmt.Sprintf("sfq: job %d (%s) has no group %q", j.ID, j.State, j.Group()))
	}
	return gs
}

// newGroup creates a group of tenant ti in the lowest free slot, so that
// which slot it gets depends on the state alone.
func (s *Scheduler) newGroup(ti uint32, name string, set GroupSettings) uint32 {
	var gs uint32
	if len(s.gfree) > 0 {
		gs = uint32(s.gfree.pop())
	} else {
		gs = uint32(s.gnext)
		s.gnext++
	}
	g := Group{Tenant: ti, Name: name, GroupSettings: set}
	shared := false
	if name != "" && s.hasLanes(ti) {
		// The group exists in another pool: it shares that group's
		// settings, pause and rate state, and counts once.
		s.eachLane(s.owner(ti), func(l uint32) {
			if sib, ok := s.gindex[groupKey{l, name}]; ok && !shared {
				sg := s.groups.Get(uint64(sib))
				g.GroupSettings, g.paused, g.rateTAT = sg.GroupSettings, sg.paused, sg.rateTAT
				shared = true
			}
		})
	}
	s.groups.Put(uint64(gs), g)
	s.linkGroup(ti, gs, name)
	s.rateG.reserve(gs)
	if shared {
		s.rekeyRateG(gs)
	} else if name != "" {
		s.tenants.Mut(uint64(s.owner(ti))).Groups++
	}
	return gs
}

// linkGroup adds group gs to the derived indexes.
func (s *Scheduler) linkGroup(ti, gs uint32, name string) {
	for uint32(len(s.grt)) <= gs {
		s.grt = append(s.grt, groupRT{})
	}
	rt := &s.rt[ti]
	s.grt[gs] = groupRT{pos: int32(len(rt.groups))}
	rt.groups = append(rt.groups, gs)
	if name == "" {
		rt.unnamed = gs + 1
	} else {
		s.gindex[groupKey{ti, name}] = gs
	}
}

// forgetGroup deletes group gs, which has no queued or live job.
func (s *Scheduler) forgetGroup(gs uint32) {
	g := s.groups.Get(uint64(gs))
	ti := g.Tenant
	rt := &s.rt[ti]
	if g.Name == "" {
		rt.unnamed = 0
	} else {
		delete(s.gindex, groupKey{ti, g.Name})
		if o := s.owner(ti); !s.groupAnywhere(ti, g.Name) {
			if t := s.tenants.Get(uint64(o)); t.Groups > 0 {
				s.tenants.Mut(uint64(o)).Groups--
			}
		}
	}
	if rt.gmax != nil {
		rt.flushTags() // positions move below
	}
	pos := s.grt[gs].pos
	last := int32(len(rt.groups) - 1)
	if pos != last {
		moved := rt.groups[last]
		rt.groups[pos] = moved
		s.grt[moved].pos = pos
		if rt.gmax != nil {
			mg := s.groups.Get(uint64(moved))
			for c := range Class(NumClasses) {
				rt.gmax[c].set(int(pos), mg.tags[c])
			}
		}
	}
	if rt.gmax != nil {
		for c := range Class(NumClasses) {
			rt.gmax[c].set(int(last), noTag)
		}
	}
	rt.groups = rt.groups[:last]
	for i := range s.grt[gs].nq {
		q := s.grt[gs].at(i)
		if q.fnode != 0 || q.dnode != 0 {
			panic(fmt.Sprintf("sfq: forgetting group %q with queued heads", g.Name))
		}
	}
	s.grt[gs] = groupRT{}
	s.groups.Del(uint64(gs))
	s.gfree.push(uint64(gs))
}

// tidyGroup forgets group gs if it has no job and no setting.
func (s *Scheduler) tidyGroup(gs uint32) {
	if g := s.groups.Get(uint64(gs)); g != nil && g.Running == 0 && g.Queued == 0 && g.Scheduled == 0 && !g.kept() {
		s.forgetGroup(gs)
	}
}

// Group returns a copy of a group's record, its counters summed over
// every pool (its tags those of the first pool it is in, default first).
// The unnamed group is named "".
func (s *Scheduler) Group(tenant, name string) (Group, bool) {
	ti, ok := s.TenantIndex(tenant)
	if !ok {
		return Group{}, false
	}
	slots := s.groupSlots(ti, name)
	if len(slots) == 0 {
		return Group{}, false
	}
	g := *s.groups.Get(uint64(slots[0][1]))
	g.Tenant = ti
	for _, ls := range slots[1:] {
		addGroup(&g, s.groups.Get(uint64(ls[1])))
	}
	return g, true
}

func addGroup(sum, g *Group) {
	sum.Running += g.Running
	sum.Queued += g.Queued
	sum.Scheduled += g.Scheduled
}

// tenantGroups returns the groups of the tenant whose own index is ti, one
// record per name with its counters summed over every pool: its own
// records when it has no lane in another pool.
func (s *Scheduler) tenantGroups(ti uint32) []*Group {
	out := make([]*Group, 0, len(s.rt[ti].groups))
	if len(s.rt[ti].lanes) == 0 {
		for _, slot := range s.rt[ti].groups {
			out = append(out, s.groups.Get(uint64(slot)))
		}
		return out
	}
	byName := map[string]*Group{}
	s.eachLane(ti, func(l uint32) {
		for _, slot := range s.rt[l].groups {
			g := s.groups.Get(uint64(slot))
			if m := byName[g.Name]; m != nil {
				addGroup(m, g)
				continue
			}
			m := *g
			m.Tenant = ti
			byName[g.Name] = &m
			out = append(out, &m)
		}
	})
	return out
}

// Groups calls fn for every group of the live tenant named tenant (the
// unnamed one included; one record per name, its counters summed over
// every pool), until fn returns false. It reports false when no live
// tenant has that name.
func (s *Scheduler) Groups(tenant string, fn func(g *Group) bool) bool {
	ti, ok := s.TenantIndex(tenant)
	if !ok {
		return false
	}
	for _, g := range s.tenantGroups(ti) {
		if !fn(g) {
			break
		}
	}
	return true
}

// GroupCount returns the number of groups of every tenant.
func (s *Scheduler) GroupCount() int { return s.groups.Len() }

// tagMax holds a group_order=fair tenant's group tags of one class by the
// groups' positions in its list of groups, as a tournament tree: v[n+i] is
// the tag of position i (noTag when unused) and every inner node the
// higher of its children, so v[1] is the tenant's highest group tag, which
// the idle rule raises group_now to. Setting a position costs O(log G) in
// one small array; only a position past the capacity (a new group, never
// on the dispatch path) grows it.
type tagMax struct {
	v []VirtualTime
}

const noTag = VirtualTime(math.MinInt64)

func (m *tagMax) set(i int, x VirtualTime) {
	n := len(m.v) / 2
	if i >= n {
		size := max(4, n)
		for size <= i {
			size *= 2
		}
		v := make([]VirtualTime, 2*size)
		for k := range v {
			v[k] = noTag
		}
		copy(v[size:], m.v[n:])
		for k := size - 1; k >= 1; k-- {
			v[k] = max(v[2*k], v[2*k+1])
		}
		m.v, n = v, size
	}
	j := n + i
	m.v[j] = x
	for j > 1 {
		j /= 2
		m.v[j] = max(m.v[2*j], m.v[2*j+1])
	}
}

// top returns the highest tag, if any position is in use.
func (m *tagMax) top() (VirtualTime, bool) {
	if len(m.v) == 0 || m.v[1] == noTag {
		return 0, false
	}
	return m.v[1], true
}

// CheckSetGroup is SetGroup's verdict without the change: the group's
// name, the settings, the tenant, and max_groups for a group it would
// make. It reports whether SetGroup would change the group's settings
// (false: they are these already, or the group does not exist and they
// are empty). It changes nothing.
func (s *Scheduler) CheckSetGroup(tenant, name string, set GroupSettings) (bool, error) {
	if err := ValidateGroupName(name); err != nil {
		return false, err
	}
	if err := set.Validate(); err != nil {
		return false, err
	}
	t, slots, err := s.groupOf(tenant, name)
	switch {
	case err != nil:
		return false, err
	case len(slots) > 0:
		return s.groups.Get(uint64(slots[0][1])).GroupSettings != set, nil
	case set.Empty():
		return false, nil
	}
	return true, groupRoom(t, "a setting on a new group", name)
}

// groupOf returns a tenant (by its name) and the (lane, slot) of its
// group named name in every lane (none: no such group).
func (s *Scheduler) groupOf(tenant, name string) (*Tenant, [][2]uint32, error) {
	ti, ok := s.TenantIndex(tenant)
	if !ok {
		return nil, nil, UnknownTenant(tenant)
	}
	return s.tenants.Get(uint64(ti)), s.groupSlots(ti, name), nil
}

// groupRoom refuses what would make tenant t one group more than its
// max_groups: what names the new group's cause ("a job of a new group").
func groupRoom(t *Tenant, what, group string) error {
	if t.Groups >= t.GroupLimit() {
		return exhaustedf(text.ReasonMaxGroups, "", "tenant %s has %d groups, its max_groups; %s %q would exceed it", t.Name, t.Groups, what, group)
	}
	return nil
}

// SetGroup sets a named group's settings. A group that does not exist is
// created (its tenant's max_groups applies, ErrExhausted); one left with
// no setting and no job is forgotten. A cap change takes effect at the
// next dispatch in log order and preempts nothing.
func (s *Scheduler) SetGroup(tenant, name string, set GroupSettings) error {
	if _, err := s.CheckSetGroup(tenant, name, set); err != nil {
		return err
	}
	ti, _ := s.TenantIndex(tenant)
	slots := s.groupSlots(ti, name)
	if len(slots) == 0 {
		if set.Empty() {
			return nil
		}
		s.advance(s.clock)
		gs := s.newGroup(ti, name, set)
		s.joinHeaps(ti, gs)
		return nil // no job: nothing else changes
	}
	// The group's records in every pool change alike.
	for _, ls := range slots {
		s.changeGroup(ls[0], ls[1], func(g *Group) {
			oldRate := g.Rate
			g.GroupSettings = set
			s.setGroupRate(ls[1], oldRate)
		})
	}
	return nil
}

// groupSlots returns the (lane, slot) of the group named name in every lane
// of the tenant whose own index is o, its own lane first.
func (s *Scheduler) groupSlots(o uint32, name string) [][2]uint32 {
	var out [][2]uint32
	s.eachLane(o, func(l uint32) {
		if gs, ok := s.groupSlot(l, name); ok {
			out = append(out, [2]uint32{l, gs})
		}
	})
	return out
}

// changeGroup changes group gs of tenant ti (its settings, its pause) at
// the scheduler's clock: eligibility is brought to the clock first, then
// the group is blocked or unblocked as the change says, and the tenant's
// heads are placed again with the activation clamp for what becomes
// eligible.
func (s *Scheduler) changeGroup(ti, gs uint32, change func(g *Group)) {
	s.advance(s.clock)
	t := s.tenants.Get(uint64(ti))
	var was [NumClasses]bool
	if t.GroupOrder == GroupFair {
		was = s.groupEligibility(ti, gs)
	}
	change(s.groups.Mut(uint64(gs)))
	g := s.groups.Mut(uint64(gs))
	s.setBlocked(ti, gs, s.groupBlocked(t, g))
	s.place(ti, &placeOpts{clamp: true, touched: gs + 1, was: was}, allSlots)
	s.tidyGroup(gs)
}

// TopGroups returns up to n groups of the live tenant named tenant, those
// with the most queued jobs first (then the most running, then by name),
// and how many groups it has (its unnamed group included). Cost:
// O(G log n) in the tenant's groups; it is a read, never on the dispatch
// path.
func (s *Scheduler) TopGroups(tenant string, n int) ([]Group, int) {
	ti, ok := s.TenantIndex(tenant)
	if !ok || n <= 0 {
		return nil, 0
	}
	gs := s.tenantGroups(ti)
	before := func(a, b *Group) bool {
		if a.Queued != b.Queued {
			return a.Queued > b.Queued
		}
		if a.Running != b.Running {
			return a.Running > b.Running
		}
		return a.Name < b.Name
	}
	best := boundedBest{n: n, before: before}
	for _, g := range gs {
		best.offer(g)
	}
	return best.sorted(), len(gs)
}

// SortedGroups returns the groups of the live tenant named tenant by name
// (the unnamed one, "", first): from the start when first is true, else
// those whose names sort after after; at most limit of them, and whether
// more follow. It reports ok false when no live tenant has that name.
// Cost: O(G log limit) in the tenant's groups, whatever the page.
func (s *Scheduler) SortedGroups(tenant, after string, first bool, limit int) (out []Group, more, ok bool) {
	ti, ok := s.TenantIndex(tenant)
	if !ok {
		return nil, false, false
	}
	if limit <= 0 {
		return nil, false, true
	}
	// The limit+1 first names after the cursor: one more says whether
	// more follow.
	best := boundedBest{n: limit + 1, before: func(a, b *Group) bool { return a.Name < b.Name }}
	for _, g := range s.tenantGroups(ti) {
		if first || g.Name > after {
			best.offer(g)
		}
	}
	out = best.sorted()
	if len(out) > limit {
		return out[:limit], true, true
	}
	return out, false, true
}

// boundedBest keeps the n first of the groups offered in the order of
// before, in a heap whose root is the last of them: O(log n) an offer.
type boundedBest struct {
	n      int
	before func(a, b *Group) bool
	h      []*Group
}

func (b *boundedBest) offer(g *Group) {
	if len(b.h) < b.n {
		b.h = append(b.h, g)
		for i := len(b.h) - 1; i > 0; {
			p := (i - 1) / 2
			if !b.before(b.h[p], b.h[i]) {
				break
			}
			b.h[p], b.h[i] = b.h[i], b.h[p]
			i = p
		}
		return
	}
	if !b.before(g, b.h[0]) {
		return
	}
	b.h[0] = g
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(b.h) && b.before(b.h[m], b.h[l]) {
			m = l
		}
		if r < len(b.h) && b.before(b.h[m], b.h[r]) {
			m = r
		}
		if m == i {
			return
		}
		b.h[i], b.h[m] = b.h[m], b.h[i]
		i = m
	}
}

// sorted returns copies of the kept groups in the order of before.
func (b *boundedBest) sorted() []Group {
	slices.SortFunc(b.h, func(x, y *Group) int {
		switch {
		case b.before(x, y):
			return -1
		case b.before(y, x):
			return 1
		}
		return 0
	})
	out := make([]Group, len(b.h))
	for i, g := range b.h {
		out[i] = *g
	}
	return out
}
