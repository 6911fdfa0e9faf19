package sfq

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/baristahq/barista/internal/text"
)

// Pools (SPEC §3 "Pools"): a pool is a fleet of workers and the jobs that
// may run on it, a scheduling domain of its own. Every rule of fair share
// holds inside each pool on its own: each (pool, class) has its own
// virtual_now and heaps (poolCore), and each tenant has, per pool it has
// used, a lane: a record of its own in the tenant table (the tenant's own
// record is its lane of pool default) holding its tags, usage and
// group_now there, its runtime slots, and groups of its own. A job's
// Tenant is its lane. Tenant-level limits (caps, max_queued, rate limit,
// pause) count the tenant's whole footprint: the limit checks read the
// sum over its lanes (limits), and its pause, rate-limit state and group
// count live on its own record. A group's cap, rate and pause count the
// group's jobs in every pool: each lane has a group record of that name,
// their settings, pause and rate state are kept alike, and the cap reads
// their running jobs summed.

// PoolID is a pool's slot; DefaultPool (0) is the pool default. A deleted
// pool keeps its slot and its lanes, for the terminal jobs that name it;
// creating a pool of that name again revives it.
type PoolID uint16

// DefaultPool is the pool every cluster has, and the pool of every job and
// worker that names none.
const DefaultPool PoolID = 0

// DefaultPoolName is the name of DefaultPool.
const DefaultPoolName = "default"

// DefaultMaxPools is how many pools (default included) a cluster may have
// when its configuration says nothing.
const DefaultMaxPools = 64

// MaxPoolSlots bounds the pool slots ever created, deleted ones included
// (a deleted pool's slot stays for the jobs that name it).
const MaxPoolSlots = 1024

// MaxPoolWeight is the largest weight a pool's weight map may give.
const MaxPoolWeight = 1_000_000

// WeightMode says how a pool weighs its tenants.
type WeightMode uint8

const (
	// WeightsDefault: each tenant's tier weight times its multiplier.
	WeightsDefault WeightMode = iota
	// WeightsEqual: every tenant weighs 1 (cronoq's fair_share = true).
	WeightsEqual
	// WeightsMap: the tenants listed weigh as listed, the others 1.
	WeightsMap
)

// TenantWeight is one entry of a pool's weight map.
type TenantWeight struct {
	Tenant string
	Weight uint32
}

// PoolWeights is a pool's weights: a mode and, for WeightsMap, the map
// sorted by tenant name.
type PoolWeights struct {
	Mode WeightMode
	Map  []TenantWeight
}

// String renders the weights as the replay syntax writes them: default,
// equal, or T:W,... in tenant order.
func (w PoolWeights) String() string {
	switch w.Mode {
	case WeightsEqual:
		return "equal"
	case WeightsMap:
		var b strings.Builder
		for i, e := range w.Map {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(e.Tenant)
			b.WriteByte(':')
			b.WriteString(strconv.FormatUint(uint64(e.Weight), 10))
		}
		return b.String()
	}
	return "default"
}

// Of returns the base weight (in tier-weight units) the weights give a
// tenant, or 0 for "its tier weight times its multiplier".
func (w PoolWeights) Of(tenant string) int64 {
	switch w.Mode {
	case WeightsEqual:
		return 1
	case WeightsMap:
		if i, ok := slices.BinarySearchFunc(w.Map, tenant, func(e TenantWeight, t string) int { return strings.Compare(e.Tenant, t) }); ok {
			return int64(w.Map[i].Weight)
		}
		return 1
	}
	return 0
}

// ParsePoolWeights reads default, equal, or TENANT:W,... (W in
// 1..MaxPoolWeight, each tenant once). Tenants need not exist: a weight
// applies to a tenant of that name whenever it does.
func ParsePoolWeights(s string) (PoolWeights, error) {
	switch s {
	case "", "default":
		return PoolWeights{}, nil
	case "equal":
		return PoolWeights{Mode: WeightsEqual}, nil
	}
	var w PoolWeights
	w.Mode = WeightsMap
	for _, part := range strings.Split(s, ",") {
		name, num, ok := strings.Cut(part, ":")
		if !ok {
			return PoolWeights{}, invalidf("", "weights entry %q (want TENANT:W)", part)
		}
		n, err := strconv.ParseUint(num, 10, 32)
		if err != nil || n < 1 || n > MaxPoolWeight {
			return PoolWeights{}, invalidf("", "weight %q of tenant %q (want 1..%d)", num, name, MaxPoolWeight)
		}
		w.Map = append(w.Map, TenantWeight{Tenant: name, Weight: uint32(n)})
	}
	if err := w.Validate(); err != nil {
		return PoolWeights{}, err
	}
	return w, nil
}

// Validate checks the weights, sorting the map, and names the offending
// entry.
func (w *PoolWeights) Validate() error {
	switch w.Mode {
	case WeightsDefault, WeightsEqual:
		if len(w.Map) != 0 {
			return invalidf("", "weights %s with a weight map", w.Mode.String())
		}
		return nil
	case WeightsMap:
	default:
		return invalidf("", "weights mode %d", w.Mode)
	}
	if len(w.Map) == 0 {
		return invalidf("", "a weight map with no tenant")
	}
	slices.SortFunc(w.Map, func(a, b TenantWeight) int { return strings.Compare(a.Tenant, b.Tenant) })
	for i, e := range w.Map {
		if err := ValidateName("weights tenant", e.Tenant); err != nil {
			return err
		}
		if e.Weight < 1 || e.Weight > MaxPoolWeight {
			return invalidf("", "weight %d of tenant %q (want 1..%d)", e.Weight, e.Tenant, MaxPoolWeight)
		}
		if i > 0 && w.Map[i-1].Tenant == e.Tenant {
			return invalidf("", "tenant %q is in the weights twice", e.Tenant)
		}
	}
	return nil
}

func (m WeightMode) String() string {
	switch m {
	case WeightsEqual:
		return "equal"
	case WeightsMap:
		return "map"
	}
	return "default"
}

// PoolSpec is what an admin sets on a pool.
type PoolSpec struct {
	Name    string
	Weights PoolWeights
	// Required: a tenant without a subscription in the pool may not
	// submit to it (it fails closed).
	Required bool
}

// ValidatePoolName checks a pool name: [a-z0-9][a-z0-9-]{0,62} (the rule
// of package internal/text, which the worker applies too).
func ValidatePoolName(s string) error { return text.ValidatePoolName(s) }

// Validate checks the spec and names the offending field.
func (p *PoolSpec) Validate() error {
	if err := ValidatePoolName(p.Name); err != nil {
		return err
	}
	return p.Weights.Validate()
}

// Pool is a read-only picture of one pool.
type Pool struct {
	PoolSpec
	ID      PoolID
	Paused  bool
	Deleted bool
	// VirtualNow per class; Scheduled, Queued and Running count its jobs;
	// Lanes the tenants that have used it.
	VirtualNow [NumClasses]VirtualTime
	Scheduled  uint64
	Queued     uint64
	Running    uint64
	Lanes      int
}

// poolCore is one pool's scheduling state: virtual_now per class and the
// heaps of the tenants' lanes in it, keyed by the lane's local number
// (members maps it back to its index in the tenant table; the pool
// default, whose lanes are the tenants' own records, uses the index
// itself).
type poolCore struct {
	PoolSpec
	paused  bool
	deleted bool
	// plain: the pool's last pick was the plain one, which reads no
	// route heap: their entries are then raised by the scans alone, not
	// on every placement (syncRouteTags). A hint of cost only: no
	// decision reads it.
	plain bool
	vnow  [NumClasses]VirtualTime
	// heapA[c][s] orders lanes whose candidate without a deadline of
	// class c and size s is eligible, by (finish tag, tier, seq). Under
	// the dispatch clamp, heapB[c][s] holds those whose finish tag is <=
	// the class's virtual_now: they all start at virtual_now and are
	// ordered by (tier, seq).
	heapA [NumClasses][NumSizes]tenantHeap
	heapB [NumClasses][NumSizes]tenantHeap
	// dheap[c][s] orders lanes whose deadline candidate of class c and
	// size s is eligible, by (deadline_at, job ID).
	dheap  [NumClasses][NumSizes]tenantHeap
	maxTag [NumClasses]tenantHeap // per class, lanes by finish tag, highest first
	// queuedFair counts the queued jobs without a deadline of each class
	// (the idle rule looks at them only).
	queuedFair [NumClasses]uint64
	// members maps a local number to its lane (nil for the pool default).
	members []uint32
	// routes holds, per class, size and route, the lanes with queued jobs
	// of that route there: those a worker that runs the route looks at
	// (kinds.go).
	routes map[routeKey]*routeLanes
	// alts lists, per class, size and route (uses 0), the sets of uses
	// other than none that routes holds lanes of.
	alts map[routeKey][]UsesID
}

func newPoolCore(spec PoolSpec, def bool) *poolCore {
	p := &poolCore{PoolSpec: spec}
	p.initHeaps()
	if !def {
		p.members = []uint32{}
	}
	return p
}

func (p *poolCore) initHeaps() {
	for c := range NumClasses {
		for sz := range NumSizes {
			p.heapA[c][sz] = tenantHeap{order: byTag}
			p.heapB[c][sz] = tenantHeap{order: byTierSeq}
			p.dheap[c][sz] = tenantHeap{order: byDeadline}
		}
		p.maxTag[c] = tenantHeap{order: byTagDesc}
	}
}

// lane returns the tenant-table index of local number x.
func (p *poolCore) lane(x uint32) uint32 {
	if p.members == nil {
		return x
	}
	return p.members[x]
}

// pool returns the scheduling state of lane ti's pool.
func (s *Scheduler) pool(ti uint32) *poolCore { return s.pools[s.rt[ti].pool] }

// subscription is a tenant's burst in a pool.
type subscription struct {
	tenant uint32 // the tenant's own index
	pool   PoolID
	burst  uint32
}

func cmpSub(a subscription, tenant uint32, pool PoolID) int {
	if c := cmp.Compare(a.tenant, tenant); c != 0 {
		return c
	}
	return cmp.Compare(a.pool, pool)
}

// unplace takes lane ti out of its pool's heaps.
func (s *Scheduler) unplace(ti uint32) {
	p, x := s.pool(ti), s.rt[ti].local
	for c := range NumClasses {
		for sz := range NumSizes {
			p.heapA[c][sz].remove(x)
			p.heapB[c][sz].remove(x)
			p.dheap[c][sz].remove(x)
		}
		p.maxTag[c].remove(x)
	}
}

// owner returns the index of the tenant whose lane ti is (ti itself for a
// tenant's own record).
func (s *Scheduler) owner(ti uint32) uint32 {
	if t := s.tenants.Get(uint64(ti)); t != nil && t.pool != DefaultPool {
		return t.owner
	}
	return ti
}

// Owner returns the index of the tenant whose lane index i is: jobs and
// changes name a lane, and a tenant's own index is its lane of the pool
// default.
func (s *Scheduler) Owner(i uint32) uint32 { return s.owner(i) }

// LanePool returns the pool of lane i.
func (s *Scheduler) LanePool(i uint32) PoolID {
	if t := s.tenants.Get(uint64(i)); t != nil {
		return t.pool
	}
	return DefaultPool
}

// hasLanes reports whether the tenant of lane ti has lanes in other pools
// than default (its limits then read their sum).
func (s *Scheduler) hasLanes(ti uint32) bool {
	return len(s.rt[s.owner(ti)].lanes) != 0
}

// eachLane calls fn for every lane of the tenant whose own index is o: o
// itself first, then the others in the order they were made.
func (s *Scheduler) eachLane(o uint32, fn func(ti uint32)) {
	fn(o)
	for _, l := range s.rt[o].lanes {
		fn(l)
	}
}

// limitsInto returns what the tenant-level limits of lane ti read: its
// record, when its tenant has no other lane; else, in buf, its tenant's
// own record (settings, pause, rate state) with the counters of every
// lane summed. buf must not be shared between goroutines.
func (s *Scheduler) limitsInto(ti uint32, buf *Tenant) *Tenant {
	o := s.owner(ti)
	lanes := s.rt[o].lanes
	own := s.tenants.Get(uint64(o))
	if len(lanes) == 0 {
		return own
	}
	if own.Caps.none() {
		// No cap reads a counter: what the limits read is the tenant's
		// pause and rate state, on its own record.
		return own
	}
	*buf = *own
	for _, l := range lanes {
		addRunning(buf, s.tenants.Get(uint64(l)))
	}
	return buf
}

// addRunning adds the running counters of lane t, which the caps read, to
// sum.
func addRunning(sum, t *Tenant) {
	sum.Running += t.Running
	for i := range sum.RunningBySize {
		sum.RunningBySize[i] += t.RunningBySize[i]
	}
	for i := range sum.RunningByClass {
		sum.RunningByClass[i] += t.RunningByClass[i]
	}
	sum.RunningDeadline += t.RunningDeadline
	sum.InflightCPUMs += t.InflightCPUMs
}

// addCounters adds the job counters and billing of lane t to sum.
func addCounters(sum, t *Tenant) {
	sum.Running += t.Running
	for i := range sum.RunningBySize {
		sum.RunningBySize[i] += t.RunningBySize[i]
		sum.Queued[i] += t.Queued[i]
	}
	for i := range sum.RunningByClass {
		sum.RunningByClass[i] += t.RunningByClass[i]
	}
	sum.RunningDeadline += t.RunningDeadline
	sum.InflightCPUMs += t.InflightCPUMs
	sum.Scheduled += t.Scheduled
	b, x := &sum.Billing, &t.Billing
	b.Submitted += x.Submitted
	b.Dispatches += x.Dispatches
	b.DispatchedCostMs += x.DispatchedCostMs
	b.CPUMs += x.CPUMs
	b.ZombieCPUMs += x.ZombieCPUMs
	b.Completed += x.Completed
	b.Failed += x.Failed
	b.Cancelled += x.Cancelled
	b.TimedOut += x.TimedOut
	b.Requeues += x.Requeues
	b.Failures += x.Failures
}

// totals returns a copy of the tenant record at own index o with the
// counters of all its lanes summed: what it holds in every pool.
func (s *Scheduler) totals(o uint32) Tenant {
	t := *s.tenants.Get(uint64(o))
	for _, l := range s.rt[o].lanes {
		addCounters(&t, s.tenants.Get(uint64(l)))
	}
	return t
}

// groupRunningOf returns group g's running jobs in every pool.
func (s *Scheduler) groupRunningOf(g *Group) uint32 {
	o := s.owner(g.Tenant)
	if len(s.rt[o].lanes) == 0 || g.Name == "" {
		return g.Running
	}
	var n uint32
	s.eachLane(o, func(l uint32) {
		if gs, ok := s.gindex[groupKey{l, g.Name}]; ok {
			n += s.groups.Get(uint64(gs)).Running
		}
	})
	return n
}

// groupRunning is groupRunningOf for the group at slot gs.
func (s *Scheduler) groupRunning(gs uint32) uint32 {
	return s.groupRunningOf(s.groups.Get(uint64(gs)))
}

// siblingGroups calls fn for the slot of a group of the same name as
// group gs in every other lane of its tenant.
func (s *Scheduler) siblingGroups(gs uint32, fn func(ti, sib uint32)) {
	g := s.groups.Get(uint64(gs))
	o := s.owner(g.Tenant)
	if len(s.rt[o].lanes) == 0 {
		return
	}
	s.eachLane(o, func(l uint32) {
		if l == g.Tenant {
			return
		}
		var sib uint32
		var ok bool
		if g.Name == "" {
			sib, ok = s.rt[l].unnamed-1, s.rt[l].unnamed != 0
		} else {
			sib, ok = s.gindex[groupKey{l, g.Name}]
		}
		if ok {
			fn(l, sib)
		}
	})
}

// afterTenantChange re-places the other lanes of lane ti's tenant after a
// change of its tenant-level state (its counters, pause or rate state)
// that can change what their limits allow.
func (s *Scheduler) afterTenantChange(ti uint32) {
	o := s.owner(ti)
	if len(s.rt[o].lanes) == 0 {
		return
	}
	s.eachLane(o, func(l uint32) {
		if l != ti {
			s.place(l, &placeOpts{clamp: true}, allSlots)
		}
	})
}

// afterGroupRunning re-evaluates the group blocks of the groups of the same
// name as gs in the other lanes after its running count changed (their cap
// counts it).
func (s *Scheduler) afterGroupRunning(gs uint32) {
	g := s.groups.Get(uint64(gs))
	if g == nil || g.Name == "" || !s.hasLanes(g.Tenant) || capOf(s.tenants.Get(uint64(g.Tenant)), g) == 0 {
		return // no cap, or no other pool: nothing else counts its runs
	}
	s.siblingGroups(gs, func(l, sib uint32) {
		if capOf(s.tenants.Get(uint64(l)), s.groups.Get(uint64(sib))) != 0 {
			s.reblock(l, sib)
		}
	})
}

// laneOf returns the lane of pool pid of the tenant whose own index is o,
// making it when create is set and it has none.
func (s *Scheduler) laneOf(o uint32, pid PoolID, create bool) (uint32, bool) {
	if pid == DefaultPool {
		return o, true
	}
	for _, l := range s.rt[o].lanes {
		if s.rt[l].pool == pid {
			return l, true
		}
	}
	if !create {
		return 0, false
	}
	own := s.tenants.Get(uint64(o))
	l := uint32(s.tenants.Len())
	s.tenants.Put(uint64(l), Tenant{TenantSpec: own.TenantSpec, pool: pid, owner: o})
	s.rt = append(s.rt, tenantRT{})
	s.linkLane(l)
	s.place(l, &placeOpts{clamp: true}, allSlots)
	return l, true
}

// linkLane adds lane l (whose record is in the table) to the derived
// indexes: its tenant's list, its pool's members, its burst and weight.
func (s *Scheduler) linkLane(l uint32) {
	t := s.tenants.Get(uint64(l))
	rt := &s.rt[l]
	rt.pool = t.pool
	p := s.pools[t.pool]
	if p.members == nil {
		rt.local = l
	} else {
		rt.local = uint32(len(p.members))
		p.members = append(p.members, l)
	}
	if t.GroupOrder == GroupFair && rt.gmax == nil && !t.Deleted {
		rt.gmax = new([NumClasses]tagMax)
	}
	if t.pool != DefaultPool {
		s.rt[t.owner].lanes = append(s.rt[t.owner].lanes, l)
	}
	s.laneSettings(l)
}

// laneSettings sets lane l's derived burst from its tenant's
// subscription.
func (s *Scheduler) laneSettings(l uint32) {
	t := s.tenants.Get(uint64(l))
	rt := &s.rt[l]
	rt.burst, rt.subscribed = s.subscription(s.owner(l), t.pool)
}

// subscription returns the burst of tenant o (own index) in pool pid.
func (s *Scheduler) subscription(o uint32, pid PoolID) (uint32, bool) {
	i, ok := slices.BinarySearchFunc(s.subs, o, func(e subscription, o uint32) int { return cmpSub(e, o, pid) })
	if !ok {
		return 0, false
	}
	return s.subs[i].burst, true
}

// PoolID returns the ID of the live pool named name.
func (s *Scheduler) PoolID(name string) (PoolID, bool) {
	if name == "" {
		return DefaultPool, true
	}
	id, ok := s.poolIdx[name]
	if !ok || s.pools[id].deleted {
		return 0, false
	}
	return id, true
}

// PoolName returns the name of pool slot id ("" if there is none).
func (s *Scheduler) PoolName(id PoolID) string {
	if int(id) >= len(s.pools) {
		return ""
	}
	return s.pools[id].Name
}

// PoolCount returns the number of live pools, default included.
func (s *Scheduler) PoolCount() int {
	n := 0
	for _, p := range s.pools {
		if !p.deleted {
			n++
		}
	}
	return n
}

// Pool returns a picture of the live pool named name.
func (s *Scheduler) Pool(name string) (Pool, bool) {
	id, ok := s.PoolID(name)
	if !ok {
		return Pool{}, false
	}
	return s.poolAt(id), true
}

func (s *Scheduler) poolAt(id PoolID) Pool {
	p := s.pools[id]
	spec := p.PoolSpec
	spec.Weights.Map = slices.Clone(spec.Weights.Map)
	out := Pool{PoolSpec: spec, ID: id, Paused: p.paused, Deleted: p.deleted, VirtualNow: p.vnow}
	s.eachPoolLane(id, func(l uint32) {
		t := s.tenants.Get(uint64(l))
		out.Lanes++
		out.Scheduled += uint64(t.Scheduled)
		out.Queued += uint64(t.QueuedTotal())
		out.Running += uint64(t.Running)
	})
	return out
}

// Pools calls fn for every live pool in name order.
func (s *Scheduler) Pools(fn func(p Pool) bool) {
	names := make([]string, 0, len(s.pools))
	for _, p := range s.pools {
		if !p.deleted {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		if !fn(s.poolAt(s.poolIdx[n])) {
			return
		}
	}
}

// CheckSetPool is SetPool's verdict without the change: the spec, and
// max_pools (and the slots kept) for a pool it would make.
func (s *Scheduler) CheckSetPool(spec PoolSpec, maxPools int) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	id, exists := s.poolIdx[spec.Name]
	if exists && !s.pools[id].deleted {
		return nil
	}
	if maxPools > 0 && s.PoolCount() >= maxPools {
		return exhaustedf("", "", "the cluster has %d pools, its max_pools; pool %q would exceed it", s.PoolCount(), spec.Name)
	}
	if !exists && len(s.pools) >= MaxPoolSlots {
		return exhaustedf("", "", "the cluster has made %d pools, deleted ones included, the most it keeps", len(s.pools))
	}
	return nil
}

// SetPool creates a pool or changes one (the pool default included: its
// weights and subscriptions setting). Changing a pool's weights keeps every
// tag, as a tier change does. maxPools bounds the live pools (0: none). It
// reports whether the pool was created.
func (s *Scheduler) SetPool(spec PoolSpec, maxPools int) (bool, error) {
	if err := s.CheckSetPool(spec, maxPools); err != nil {
		return false, err
	}
	s.advance(s.clock)
	id, exists := s.poolIdx[spec.Name]
	created := !exists || s.pools[id].deleted
	if created {
		if !exists {
			id = PoolID(len(s.pools))
			s.pools = append(s.pools, newPoolCore(spec, false))
			s.poolIdx[spec.Name] = id
			return true, nil
		}
		s.pools[id].deleted = false
	}
	// Weights are read at dispatch (tags keep their values): nothing
	// placed depends on them.
	s.pools[id].PoolSpec = spec
	return created, nil
}

// eachPoolLane calls fn for every live lane of pool id, in index order.
func (s *Scheduler) eachPoolLane(id PoolID, fn func(l uint32)) {
	p := s.pools[id]
	if p.members == nil {
		s.Tenants(func(i uint32, _ *Tenant) bool { fn(i); return true })
		return
	}
	for _, l := range p.members {
		if !s.tenants.Get(uint64(l)).Deleted {
			fn(l)
		}
	}
}

// DeletePool deletes a pool that has no scheduled, queued or running job
// (whether a worker serves it is for the caller to check). The pool
// default is never deleted.
func (s *Scheduler) DeletePool(name string) error {
	if err := s.CheckDeletePool(name); err != nil {
		return err
	}
	id, _ := s.PoolID(name)
	p := s.pools[id]
	p.deleted = true
	p.paused = false
	return nil
}

// CheckDeletePool is DeletePool's verdict without the change: the pool
// exists, is not default, and holds no scheduled, queued or running job.
func (s *Scheduler) CheckDeletePool(name string) error {
	id, ok := s.PoolID(name)
	if !ok {
		return UnknownPool(name)
	}
	if id == DefaultPool {
		return preconditionf("", "", "the pool default is never deleted")
	}
	if v := s.poolAt(id); v.Scheduled+v.Queued+v.Running > 0 {
		return preconditionf("", "", "pool %s has %d scheduled, %d queued and %d running jobs", name, v.Scheduled, v.Queued, v.Running)
	}
	return nil
}

// CheckPausePool is PausePool's verdict without the change: the pool
// exists. It reports whether PausePool would change anything.
func (s *Scheduler) CheckPausePool(name string, pause bool) (bool, error) {
	id, ok := s.PoolID(name)
	if !ok {
		return false, UnknownPool(name)
	}
	return s.pools[id].paused != pause, nil
}

// PausePool pauses (or resumes) dispatch in one pool: a gate, like a
// pause of all dispatch, that changes no eligibility and clamps nothing on
// resume. It reports whether anything changed.
func (s *Scheduler) PausePool(name string, pause bool) (bool, error) {
	id, ok := s.PoolID(name)
	if !ok {
		return false, UnknownPool(name)
	}
	p := s.pools[id]
	if p.paused == pause {
		return false, nil
	}
	s.advance(s.clock)
	p.paused = pause
	return true, nil
}

// PoolPaused reports whether dispatch in pool id is paused (by its own
// pause; DispatchPaused reports the pause of all dispatch).
func (s *Scheduler) PoolPaused(id PoolID) bool {
	return int(id) < len(s.pools) && s.pools[id].paused
}

// CheckSubscription is SetSubscription's verdict without the change: the
// tenant and the pool exist. It reports whether SetSubscription would
// change anything.
func (s *Scheduler) CheckSubscription(tenant, pool string, burst *uint32) (bool, error) {
	o, ok := s.TenantIndex(tenant)
	if !ok {
		return false, UnknownTenant(tenant)
	}
	id, ok := s.PoolID(pool)
	if !ok {
		return false, UnknownPool(pool)
	}
	i, found := slices.BinarySearchFunc(s.subs, o, func(e subscription, o uint32) int { return cmpSub(e, o, id) })
	return !(burst == nil && !found || found && burst != nil && s.subs[i].burst == *burst), nil
}

// SetSubscription sets tenant's burst in pool (nil removes it): its
// assigned and running jobs in the pool stay at most burst; 0 keeps its
// jobs of the pool queued. It reports whether anything changed.
func (s *Scheduler) SetSubscription(tenant, pool string, burst *uint32) (bool, error) {
	if changed, err := s.CheckSubscription(tenant, pool, burst); !changed {
		return false, err
	}
	o, _ := s.TenantIndex(tenant)
	id, _ := s.PoolID(pool)
	i, found := slices.BinarySearchFunc(s.subs, o, func(e subscription, o uint32) int { return cmpSub(e, o, id) })
	if s.subsShared {
		// A frozen View (a snapshot being written) holds the table: it
		// must not see this change. Later changes, until the next
		// freeze, are made in place.
		s.subs = slices.Clip(slices.Clone(s.subs))
		s.subsShared = false
	}
	switch {
	case burst == nil:
		s.subs = slices.Delete(s.subs, i, i+1)
	case found:
		s.subs[i].burst = *burst
	default:
		s.subs = slices.Insert(s.subs, i, subscription{tenant: o, pool: id, burst: *burst})
	}
	s.advance(s.clock)
	if l, ok := s.laneOf(o, id, false); ok {
		s.laneSettings(l)
		s.place(l, &placeOpts{clamp: true}, allSlots)
	}
	return true, nil
}

// Subscription returns tenant's burst in pool.
func (s *Scheduler) Subscription(tenant, pool string) (uint32, bool) {
	o, ok := s.TenantIndex(tenant)
	if !ok {
		return 0, false
	}
	id, ok := s.PoolID(pool)
	if !ok {
		return 0, false
	}
	return s.subscription(o, id)
}

// Subscriptions calls fn for every subscription of a live tenant to a live
// pool, by (tenant index, pool slot).
func (s *Scheduler) Subscriptions(fn func(tenant, pool string, burst uint32) bool) {
	for _, e := range s.subs {
		t := s.tenants.Get(uint64(e.tenant))
		if t == nil || t.Deleted || s.pools[e.pool].deleted {
			continue
		}
		if !fn(t.Name, s.pools[e.pool].Name, e.burst) {
			return
		}
	}
}

// Lane returns tenant's record in pool: its tags, usage and group_now there
// and its jobs' counters in that pool alone.
func (s *Scheduler) Lane(tenant, pool string) (Tenant, bool) {
	o, ok := s.TenantIndex(tenant)
	if !ok {
		return Tenant{}, false
	}
	id, ok := s.PoolID(pool)
	if !ok {
		return Tenant{}, false
	}
	l, ok := s.laneOf(o, id, false)
	if !ok {
		t := *s.tenants.Get(uint64(o))
		return Tenant{TenantSpec: t.TenantSpec, pool: id, owner: o}, true
	}
	return *s.tenants.Get(uint64(l)), true
}

// LaneWeight returns the weight lane i would be dispatched with at now.
func (s *Scheduler) LaneWeight(i uint32, now Time) Weight {
	return s.Weight(s.tenants.Get(uint64(i)), now)
}

// reblock re-evaluates the group-level block of group gs of lane ti and,
// if it changed, places the lane again (with the activation clamps).
func (s *Scheduler) reblock(ti, gs uint32) {
	t, g := s.tenants.Get(uint64(ti)), s.groups.Get(uint64(gs))
	var was [NumClasses]bool
	if t.GroupOrder == GroupFair {
		was = s.groupEligibility(ti, gs)
	}
	if s.setBlocked(ti, gs, s.groupBlocked(t, g)) != 0 {
		s.place(ti, &placeOpts{clamp: true, touched: gs + 1, was: was}, allSlots)
	}
}

// groupAnywhere reports whether the tenant of lane ti has a group named
// name (not "") in any pool: max_groups counts names, not pools.
func (s *Scheduler) groupAnywhere(ti uint32, name string) bool {
	found := false
	s.eachLane(s.owner(ti), func(l uint32) {
		if _, ok := s.gindex[groupKey{l, name}]; ok {
			found = true
		}
	})
	return found
}

// Lanes returns the lanes of the tenant whose own index is i, its own
// index first.
func (s *Scheduler) Lanes(i uint32) []uint32 {
	if int(i) >= len(s.rt) {
		return nil
	}
	return append([]uint32{i}, s.rt[i].lanes...)
}

// OtherLanes returns the lanes of the tenant whose own index is i in the
// pools other than default (read-only; valid until the next write).
func (s *Scheduler) OtherLanes(i uint32) []uint32 {
	if int(i) >= len(s.rt) {
		return nil
	}
	return s.rt[i].lanes
}
