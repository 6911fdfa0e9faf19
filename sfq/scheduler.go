package sfq

import (
	"fmt"
	"slices"
)

// Scheduler is the scheduling core. It is not safe for concurrent use,
// except that a View returned by Freeze may be read by other goroutines
// while the Scheduler keeps changing, and that the read-only methods
// (Explain, Job, Tenant, ...) may run concurrently with each other.
type Scheduler struct {
	cfg     Config
	nextJob JobID
	jobs    Vector[Job]
	tenants Vector[Tenant]
	types   Vector[TypeStat] // cost estimates per (tenant, job type)
	groups  Vector[Group]    // by slot: the lowest free slot is taken
	grouped uint64           // jobs of a named group in the job table (derived)

	// Everything below is derived from the tables and rebuilt on restore.
	byName map[string]uint32
	rt     []tenantRT
	gindex map[groupKey]uint32 // named groups by (tenant, name)
	grt    []groupRT           // by group slot
	gfree  slotHeap            // group slots below gnext not in use
	gnext  uint64
	nodes  nodePool // group heads (slot.go, tree.go)
	// pools holds each pool's scheduling state (pool.go), by PoolID:
	// pools[0] is the pool default. poolIdx finds a pool by name; subs
	// holds the subscriptions, by (tenant, pool).
	pools   []*poolCore
	poolIdx map[string]PoolID
	subs    []subscription
	// subsShared: a frozen View holds subs, so the next change copies it
	// first; otherwise changes are made in place.
	subsShared bool
	queued     uint64 // queued jobs of all tenants
	deadlines  deadlineHeap
	ended      endedQueue // completed jobs, by (ended_at, id)
	deadAll    endedQueue // dead letters, by (ended_at, id) (redrive.go)
	dead       []deadLetters
	est        estimateIndex
	dl         delayState // delays and expiries (delay.go)
	// rateT and rateG hold the tenants and groups (by slot) whose rate
	// limit blocks them at evalUs, by the time it stops (µs); evalUs is
	// the cluster time (µs) eligibility was last evaluated at, clock the
	// time of the input being applied (pause.go). pausedAll gates
	// Dispatch (maintenance).
	rateT, rateG tenantHeap
	evalUs       int64
	clock        Time
	pausedAll    bool
	// scratch holds the summed limits of a tenant with lanes while the
	// writer places one (limitsInto).
	scratch Tenant

	// wall is the wall clock of the input being applied (SetWall): kept
	// on the jobs it submits and ends, for display, and read by no rule.
	wall Time
	// v1 makes the scheduler behave as the builds before feature level 2
	// (SetVersion1): it learns no cost estimates, records no wall times,
	// keeps no stdout tail and forgets an ended job's worker, so that its
	// state is what those builds hold. It is not encoded: the state machine
	// above sets it from its replicated feature level.
	v1 bool
}

type tenantRT struct {
	// normal holds the tenant's slots of class normal (slot.go), where most
	// work is; other those of high, critical and low (at Class-1), nil
	// until it first queues a job of the class.
	normal [NumSizes]slotRT
	other  [NumClasses - 1]*[NumSizes]slotRT
	// fairBits and dlBits have bit c*NumSizes+s set when the tenant has a
	// candidate without a deadline, or a deadline candidate, of class c
	// and size s (as of its last placement); heldBits when the candidate
	// rule holds that slot; openBits when its fifo heads pass every
	// tenant-level limit but the in-flight cap, whose room (the largest
	// cost that fits) is in room.
	fairBits, dlBits   uint16
	heldBits, openBits uint16
	room               int64
	// eligible[c]: the tenant had a candidate without a deadline in class
	// c at its last placement (the activation clamp watches it change).
	eligible [NumClasses]bool
	// inMaxTag[c] and maxTagged[c]: the tenant is in maxTag[c] with that
	// tag.
	inMaxTag  [NumClasses]bool
	maxTagged [NumClasses]VirtualTime
	// queuedFair counts the tenant's queued jobs without a deadline per
	// class (the idle rule of group_order=fair).
	queuedFair [NumClasses]uint32
	// payload counts the payload bytes of the tenant's unfinished jobs
	// (scheduled, queued, assigned, running): what its quota of payload
	// bytes (the state machine's max_queued_bytes) bounds.
	payload uint64
	types   []uint64 // slots of the tenant's job-type estimates
	groups  []uint32 // slots of the tenant's groups, in no order
	unnamed uint32   // slot+1 of its unnamed group; 0: none
	// pend holds, under group_order=fair, the latest group tags not yet
	// written to gmax (a dispatch only notes its group's new tag here, in
	// the tenant's own record; gmax is brought up to date when it is full
	// or read).
	pend  [4]tagPend
	npend uint8
	// gmax holds, under group_order=fair, the tags of the tenant's groups
	// per class (the idle rule reads the highest).
	gmax *[NumClasses]tagMax
	// pool is the lane's pool and local its number in the pool's heaps
	// (pool.go); lanes, on a tenant's own record, its lanes of the other
	// pools, in the order they were created.
	pool  PoolID
	local uint32
	lanes []uint32
	// burst is the lane's subscription burst, if subscribed.
	burst      uint32
	subscribed bool
}

// New returns an empty scheduler.
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Scheduler{cfg: cfg, nextJob: 1, byName: make(map[string]uint32), gindex: make(map[groupKey]uint32)}
	s.pools = []*poolCore{newPoolCore(PoolSpec{Name: DefaultPoolName}, true)}
	s.poolIdx = map[string]PoolID{DefaultPoolName: DefaultPool}
	s.rateT = tenantHeap{order: byDeadline}
	s.rateG = tenantHeap{order: byDeadline}
	s.est.init()
	s.nodes.init()
	return s, nil
}

func (s *Scheduler) initHeaps() {
	for _, p := range s.pools {
		p.initHeaps()
	}
}

// SetWall gives the wall-clock time (ms since the Unix epoch; 0 =
// unknown) of the inputs that follow, until the next SetWall: the state
// machine sets that of each log entry before applying it. Jobs keep it
// beside the cluster time of their submit and of their end (SubmittedWall,
// EndedWall), for display only: no deadline or rule reads it, and it is
// not state of its own (the next input sets it again).
func (s *Scheduler) SetWall(wall Time) {
	if s.v1 {
		wall = 0 // unknown: as before wall times
	}
	s.wall = wall
}

// SetVersion1 makes the scheduler hold exactly what the builds before
// feature level 2 hold (on), or all it knows (off, the default): while
// some voter may run such a build, the cluster keeps no cost estimates, no
// wall times, no stdout tails and no worker of an ended job, so that every
// node holds (and hashes) the same state; the state machine turns it off
// with the feature level that brought them.
func (s *Scheduler) SetVersion1(on bool) { s.v1 = on }

// version1Life forgets an ended job's worker under SetVersion1, as the
// builds before feature level 2 did.
func (s *Scheduler) version1Life(l Life) Life {
	if s.v1 && l.State.Terminal() {
		l.Worker = ""
	}
	return l
}

// Config returns the configuration in force.
func (s *Scheduler) Config() Config { return s.cfg }

// VirtualNow returns virtual_now of class normal.
func (s *Scheduler) VirtualNow() VirtualTime { return s.pools[DefaultPool].vnow[ClassNormal] }

// ClassVirtualNow returns virtual_now of class c in the pool default.
func (s *Scheduler) ClassVirtualNow(c Class) VirtualTime {
	return s.PoolVirtualNow(DefaultPool, c)
}

// PoolVirtualNow returns virtual_now of class c in pool p.
func (s *Scheduler) PoolVirtualNow(p PoolID, c Class) VirtualTime {
	if c >= NumClasses || int(p) >= len(s.pools) {
		return 0
	}
	return s.pools[p].vnow[c]
}

// NextJobID returns the ID the next submit will get.
func (s *Scheduler) NextJobID() JobID { return s.nextJob }

// QueuedTotal returns the number of queued jobs of all tenants.
func (s *Scheduler) QueuedTotal() uint64 { return s.queued }

// SetConfig replaces the configuration. Changing the clamp mode raises
// every finish tag to at least its class's virtual_now and rebuilds the
// order.
func (s *Scheduler) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	s.advance(s.clock)
	old := s.cfg
	s.cfg = cfg
	if old.Clamp != cfg.Clamp {
		for i := range s.rt {
			ti := uint32(i)
			t := s.tenants.Get(uint64(ti))
			if t == nil {
				continue
			}
			vnow := &s.pool(ti).vnow
			for c := range Class(NumClasses) {
				if t.Tag(c) < vnow[c] {
					*s.tenants.Mut(uint64(ti)).tagPtr(c) = vnow[c]
					t = s.tenants.Get(uint64(ti))
				}
			}
		}
		s.rebuildOrder()
	}
	return nil
}

// rebuildOrder recomputes every heap from the tenants and their queues.
func (s *Scheduler) rebuildOrder() {
	s.initHeaps()
	for i := range s.rt {
		ti := uint32(i)
		t := s.tenants.Get(uint64(ti))
		if t == nil || t.Deleted {
			continue
		}
		s.rt[ti].eligible = [NumClasses]bool{}
		for c := range Class(NumClasses) {
			if sl := s.rt[ti].slots(c); sl != nil {
				for sz := range sl {
					sl[sz].fifoPlaced, sl[sz].dlPlaced = 0, 0
				}
			}
		}
		s.place(ti, &placeOpts{}, allSlots)
	}
}

// TenantIndex returns the index of a live tenant.
func (s *Scheduler) TenantIndex(name string) (uint32, bool) {
	i, ok := s.byName[name]
	if !ok {
		return 0, false
	}
	if t := s.tenants.Get(uint64(i)); t == nil || t.Deleted {
		return 0, false
	}
	return i, true
}

// Tenant returns a copy of a live tenant's record, its counters and
// billing summed over every pool (its tags and usage are those of the
// pool default: Lane reads another pool's).
func (s *Scheduler) Tenant(name string) (Tenant, bool) {
	i, ok := s.TenantIndex(name)
	if !ok {
		return Tenant{}, false
	}
	return s.totals(i), true
}

// TenantTotals returns the record of the tenant whose lane index i is,
// with its counters and billing summed over every pool (tombstones
// included).
func (s *Scheduler) TenantTotals(i uint32) (Tenant, bool) {
	if s.tenants.Get(uint64(i)) == nil {
		return Tenant{}, false
	}
	return s.totals(s.owner(i)), true
}

// TenantAt returns a copy of the record at index i (tombstones included):
// a tenant's own record, or one of its lanes, with that lane's counters.
func (s *Scheduler) TenantAt(i uint32) (Tenant, bool) {
	t := s.tenants.Get(uint64(i))
	if t == nil {
		return Tenant{}, false
	}
	return *t, true
}

// TenantName returns the name of the tenant at index i.
func (s *Scheduler) TenantName(i uint32) string {
	if t := s.tenants.Get(uint64(i)); t != nil {
		return t.Name
	}
	return ""
}

// TenantCount returns the number of tenant slots, tombstones and lanes
// included.
func (s *Scheduler) TenantCount() int { return s.tenants.Len() }

// Tenants calls fn for every live tenant in index order (not its lanes),
// with its counters and billing summed over every pool.
func (s *Scheduler) Tenants(fn func(i uint32, t *Tenant) bool) {
	var sum Tenant
	s.tenants.View().Each(func(i uint64, t *Tenant) bool {
		if t.Deleted || t.pool != DefaultPool {
			return true
		}
		if len(s.rt[i].lanes) != 0 {
			sum = s.totals(uint32(i))
			t = &sum
		}
		return fn(uint32(i), t)
	})
}

// Job returns a copy of a job's record.
func (s *Scheduler) Job(id JobID) (Job, bool) {
	j := s.jobs.Get(uint64(id))
	if j == nil {
		return Job{}, false
	}
	return *j, true
}

// TenantJob returns a copy of a job as seen through a tenant's scope: the
// job only if it belongs to the live tenant named tenant (any job when
// tenant is empty, the admin's scope). Another tenant's job, a job of a
// deleted tenant of the same name, and a missing one look the same, so IDs
// cannot be probed.
func (s *Scheduler) TenantJob(tenant string, id JobID) (Job, bool) {
	j := s.jobs.Get(uint64(id))
	if j == nil {
		return Job{}, false
	}
	if tenant != "" {
		if ti, ok := s.TenantIndex(tenant); !ok || s.owner(j.Tenant) != ti {
			return Job{}, false
		}
	}
	return *j, true
}

// TenantJobs calls fn for the jobs of the live tenant named tenant (every
// job when tenant is empty) with ID >= from, in ID order, until fn returns
// false. It reports false, calling nothing, when no live tenant has that
// name. The pointer must not be retained or written.
func (s *Scheduler) TenantJobs(tenant string, from JobID, fn func(j *Job) bool) bool {
	if tenant == "" {
		s.Jobs(from, fn)
		return true
	}
	ti, ok := s.TenantIndex(tenant)
	if !ok {
		return false
	}
	s.Jobs(from, func(j *Job) bool { return s.owner(j.Tenant) != ti || fn(j) })
	return true
}

// TenantJobsDown is TenantJobs from the newest job down: every job of
// tenant (every tenant's if empty) with ID <= from (from 0: the newest),
// in descending ID order.
func (s *Scheduler) TenantJobsDown(tenant string, from JobID, fn func(j *Job) bool) bool {
	if tenant == "" {
		s.JobsDown(from, fn)
		return true
	}
	ti, ok := s.TenantIndex(tenant)
	if !ok {
		return false
	}
	s.JobsDown(from, func(j *Job) bool { return s.owner(j.Tenant) != ti || fn(j) })
	return true
}

// JobsDown calls fn for every job with ID <= from (from 0: every job) in
// descending ID order until fn returns false. The pointer must not be
// retained or written.
func (s *Scheduler) JobsDown(from JobID, fn func(j *Job) bool) {
	v := s.jobs.View()
	if len(v.dir) == 0 {
		return
	}
	top := uint64(len(v.dir))<<chunkBits - 1
	if from != 0 && uint64(from) < top {
		top = uint64(from)
	}
	for c := int64(top >> chunkBits); c >= 0; c-- {
		ch := v.dir[c]
		if ch == nil {
			continue
		}
		for o := chunkSize - 1; o >= 0; o-- {
			id := uint64(c)<<chunkBits | uint64(o)
			if id > top || ch.present[o/64]&(1<<(o%64)) == 0 {
				continue
			}
			if !fn(&ch.items[o]) {
				return
			}
		}
	}
}

// UnfinishedPayload returns the payload bytes of tenant ti's unfinished
// jobs (scheduled, queued, assigned, running).
func (s *Scheduler) UnfinishedPayload(ti uint32) uint64 {
	if int(ti) >= len(s.rt) {
		return 0
	}
	var n uint64
	s.eachLane(s.owner(ti), func(l uint32) { n += s.rt[l].payload }) // in every pool
	return n
}

// JobCount returns the number of jobs in the table.
func (s *Scheduler) JobCount() int { return s.jobs.Len() }

// Jobs calls fn for every job with ID >= from in ID order until fn returns
// false. The pointer must not be retained or written.
func (s *Scheduler) Jobs(from JobID, fn func(j *Job) bool) {
	v := s.jobs.View()
	for c := uint64(from) >> chunkBits; c < uint64(len(v.dir)); c++ {
		ch := v.dir[c]
		if ch == nil {
			continue
		}
		for o := 0; o < chunkSize; o++ {
			id := c<<chunkBits | uint64(o)
			if id < uint64(from) || ch.present[o/64]&(1<<(o%64)) == 0 {
				continue
			}
			if !fn(&ch.items[o]) {
				return
			}
		}
	}
}

// Weight returns the weight tenant t would be dispatched with at now,
// without storing the decayed usage.
func (s *Scheduler) Weight(t *Tenant, now Time) Weight {
	return s.weight(t, s.decayedUsage(t, now))
}

// DecayedUsage returns the tenant's usage decayed to now, without storing
// it.
func (s *Scheduler) DecayedUsage(t *Tenant, now Time) int64 { return s.decayedUsage(t, now) }

func (s *Scheduler) decayedUsage(t *Tenant, now Time) int64 {
	if s.cfg.Decay == nil {
		return t.Usage
	}
	return decayUsage(t.Usage, int64(now-t.UsageAt), s.cfg.Decay.HalfLifeMs)
}

func (s *Scheduler) weight(t *Tenant, usage int64) Weight {
	factor := WeightOne
	if s.cfg.Decay != nil {
		factor = decayFactor(usage, s.cfg.Decay.NormMs)
	}
	if base := s.pools[t.pool].Weights.Of(t.Name); base != 0 {
		return Weight(base * int64(factor)) // the pool's weights replace tier and multiplier
	}
	mult := max(t.Multiplier, 1)
	return Weight(int64(s.cfg.TierWeights[t.Tier]) * int64(mult) * int64(factor))
}

// UpsertTenant creates a tenant or updates one. An update keeps the
// tenant's tags, usage and counters; a cap change takes effect at the next
// dispatch and preempts nothing. Upserting a deleted tenant's name creates
// a new tenant at a new index (indexes are never reused): the tombstone
// keeps the old incarnation's jobs, and everything keyed by the index
// (idempotency keys, events) stays with it, out of the new tenant's sight.
func (s *Scheduler) UpsertTenant(spec TenantSpec) (created bool, err error) {
	if err := spec.Validate(); err != nil {
		return false, err
	}
	if spec.Multiplier == 0 {
		spec.Multiplier = 1
	}
	s.advance(s.clock)
	if i, ok := s.TenantIndex(spec.Name); ok {
		s.eachLane(i, func(l uint32) { s.updateTenant(l, spec) }) // its own record first: the lanes' limits read it
		return false, nil
	}
	i := uint32(s.tenants.Len())
	s.tenants.Put(uint64(i), Tenant{TenantSpec: spec})
	s.byName[spec.Name] = i
	s.rt = append(s.rt, tenantRT{})
	s.linkLane(i)
	s.rateT.reserve(i)
	s.place(i, &placeOpts{clamp: true}, allSlots)
	return true, nil
}

// updateTenant replaces an existing tenant's settings. A change of
// group_cap or group_order re-links its groups' heads; under
// group_order=fair the groups it makes eligible are clamped (switching to
// fair starts every group at group_now). Cost: O(G log G) in the tenant's
// groups when a group setting changes, O(G) under group_order=fair.
func (s *Scheduler) updateTenant(ti uint32, spec TenantSpec) {
	old := *s.tenants.Get(uint64(ti))
	rt := &s.rt[ti]
	keepFair := old.GroupOrder == GroupFair && spec.GroupOrder == GroupFair
	var before [][NumClasses]bool
	if keepFair {
		before = make([][NumClasses]bool, len(rt.groups))
		for k, gs := range rt.groups {
			before[k] = s.groupEligibility(ti, gs)
		}
	}
	s.tenants.Mut(uint64(ti)).TenantSpec = spec
	s.setTenantRate(ti, old.Rate)
	if old.GroupOrder != spec.GroupOrder || old.GroupCap != spec.GroupCap {
		s.relinkGroups(ti, old.GroupOrder != GroupFair && spec.GroupOrder == GroupFair)
	}
	o := placeOpts{clamp: true, noScan: true}
	s.place(ti, &o, allSlots)
	if !keepFair {
		return
	}
	var mask uint16
	for k, gs := range rt.groups {
		for c := range Class(NumClasses) {
			if !before[k][c] && s.groupEligible(gs, c, rt.openBits, rt.room) {
				mask |= s.clampGroup(ti, gs, c)
			}
		}
	}
	if mask != 0 {
		s.place(ti, &o, mask)
	}
}

// relinkGroups re-links every head of tenant ti's groups after its
// group_cap or group_order changed. toFair starts every group at the
// tenant's group_now (no group carries credit from before).
func (s *Scheduler) relinkGroups(ti uint32, toFair bool) {
	t := s.tenants.Get(uint64(ti))
	rt := &s.rt[ti]
	fair := t.GroupOrder == GroupFair
	if rt.gmax != nil {
		rt.flushTags()
	}
	if !fair {
		rt.gmax = nil
	} else if toFair || rt.gmax == nil {
		rt.gmax = new([NumClasses]tagMax)
		for _, gs := range rt.groups {
			gm := s.groups.Mut(uint64(gs))
			for c := range Class(NumClasses) {
				if toFair {
					gm.tags[c] = t.groupNow[c]
				}
				rt.gmax[c].set(int(s.grt[gs].pos), gm.tags[c])
			}
		}
	}
	for _, gs := range rt.groups {
		g := s.groups.Get(uint64(gs))
		blocked := s.groupBlocked(t, g)
		grt := &s.grt[gs]
		for i := range grt.nq {
			q := grt.at(i)
			for _, x := range [2]int32{q.fnode, q.dnode} {
				if x == 0 {
					continue
				}
				sl := rt.slot(q.class, q.size)
				s.unlink(sl, x)
				n := &s.nodes.n[x]
				n.gb = blocked
				if !n.dl {
					n.key = g.tags[q.class]
				}
				s.link(sl, x, fair)
			}
		}
	}
}

// DeleteTenant deletes a tenant without queued or running jobs. Its record
// stays as a tombstone so that its terminal jobs keep their tenant name;
// the name is free for a new tenant (see UpsertTenant). Its cost estimates
// and its groups (with their settings) are forgotten.
func (s *Scheduler) DeleteTenant(name string) error {
	i, ok := s.TenantIndex(name)
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownTenant, name)
	}
	tot := s.totals(i) // in every pool
	t := &tot
	if t.Running > 0 || t.QueuedTotal() > 0 {
		return fmt.Errorf("%w: %q has %d queued and %d running", ErrTenantBusy, name, t.QueuedTotal(), t.Running)
	}
	if t.Scheduled > 0 {
		return fmt.Errorf("%w: %q has %d scheduled", ErrTenantBusy, name, t.Scheduled)
	}
	s.advance(s.clock)
	s.forgetEstimates(i)
	// Its lanes first, its own record last: forgetting a group counts
	// the names its other lanes still hold.
	lanes := append(slices.Clone(s.rt[i].lanes), i)
	for _, l := range lanes {
		tm := s.tenants.Mut(uint64(l))
		tm.Deleted = true
		tm.Rate, tm.rateTAT, tm.paused = RateLimit{}, 0, NotPaused // a tombstone holds no pause or limit
		s.rateT.remove(l)
		s.unplace(l)
		for len(s.rt[l].groups) > 0 {
			gs := s.rt[l].groups[len(s.rt[l].groups)-1]
			s.rateG.remove(gs)
			s.forgetGroup(gs)
		}
		rt := &s.rt[l]
		*rt = tenantRT{pool: rt.pool, local: rt.local, lanes: rt.lanes} // its place in the pools stays, for its jobs
	}
	return nil
}

// Submit queues a new job and returns its ID. The core does not dedupe
// idempotency keys; the state machine above it does. It checks the
// tenant's max_class and allow_deadlines (ErrPermission) and max_groups
// (ErrExhausted), and fixes the job's cost estimate.
func (s *Scheduler) Submit(now Time, sub Submission) (JobID, error) {
	if err := sub.Validate(); err != nil {
		return 0, err
	}
	o, ok := s.TenantIndex(sub.Tenant)
	if !ok {
		return 0, fmt.Errorf("%w: %q", ErrUnknownTenant, sub.Tenant)
	}
	pid, ok := s.PoolID(sub.Pool)
	if !ok {
		return 0, fmt.Errorf("%w: %q", ErrUnknownPool, sub.Pool)
	}
	if _, subscribed := s.subscription(o, pid); s.pools[pid].Required && !subscribed {
		return 0, preconditionf("tenant %s has no subscription in pool %s, which requires one", sub.Tenant, s.pools[pid].Name)
	}
	t := s.tenants.Get(uint64(o))
	deadline := sub.DeadlineMs != 0
	if err := t.Permit(sub.Class, deadline); err != nil {
		return 0, err
	}
	ti, hasLane := s.laneOf(o, pid, false)
	gs, exists := s.groupSlot(ti, sub.Group)
	if !hasLane {
		exists = false
	}
	if !exists && sub.Group != "" && !s.groupAnywhere(o, sub.Group) && t.Groups >= t.GroupLimit() {
		return 0, exhaustedf("tenant %s has %d groups, its max_groups; a job of a new group %q would exceed it", t.Name, t.Groups, sub.Group)
	}
	est, src, err := s.estimate(o, &sub)
	if err != nil {
		return 0, err
	}
	var deadlineAt Time
	if deadline {
		deadlineAt = now + Time(sub.DeadlineMs)
		if deadlineAt <= 0 {
			return 0, fmt.Errorf("%w: deadline at %d ms of cluster time", ErrInvalid, deadlineAt)
		}
	}
	s.advance(now)
	if !hasLane {
		ti, _ = s.laneOf(o, pid, true) // its first job in the pool
	}
	t = s.tenants.Get(uint64(ti))
	c := sub.Class
	rt := &s.rt[ti]
	fair := t.GroupOrder == GroupFair
	var was [NumClasses]bool
	if fair && exists {
		was = s.groupEligibility(ti, gs)
	}
	delayed := sub.DelayMs != 0 // scheduled: the idle rule waits for its release
	if !deadline && !delayed {
		s.idleRule(s.pool(ti), c)
	}
	if fair && !deadline && !delayed && rt.queuedFair[c] == 0 {
		s.groupIdle(ti, c)
	}
	maxAttempts := sub.MaxAttempts
	if maxAttempts == 0 {
		maxAttempts = s.cfg.DefaultMaxAttempts
	}
	id := s.nextJob
	s.nextJob++
	job := Job{
		ID:          id,
		Tenant:      ti,
		Size:        sub.Size,
		Class:       c,
		EstSource:   src,
		Life:        Life{State: Queued, MaxAttempts: uint16(maxAttempts)},
		EstCostMs:   est,
		TimeoutMs:   sub.TimeoutMs,
		SubmittedAt: now,
		submitWall:  MakeWallDelta(s.wall, now),
	}
	job.setText(deadlineAt, sub.Group, sub.Key, sub.Type, sub.Payload)
	s.submitTimes(&job, now, &sub)
	s.jobs.Put(uint64(id), job)
	if sub.Group != "" {
		s.grouped++
	}
	if !exists {
		gs = s.newGroup(ti, sub.Group, GroupSettings{})
		s.joinHeaps(ti, gs)
	}
	tm := s.tenants.Mut(uint64(ti))
	tm.Billing.Submitted++
	s.rt[ti].payload += uint64(len(sub.Payload))
	if delayed {
		tm.Scheduled++
		s.groups.Mut(uint64(gs)).Scheduled++
		s.tidyDelays()
		return id, nil
	}
	tm.Queued[sub.Size]++
	s.queued++
	s.groups.Mut(uint64(gs)).Queued++
	s.enqueue(ti, gs, c, sub.Size, id, deadline, deadlineAt, (*jobQueue).pushBack)
	// A new job can change the heads of its own size only (and, without
	// caps, only its own slot's). Only the touched group can become
	// eligible — unless a deadline job displaced an older deadline head
	// that held the slot.
	s.place(ti, &placeOpts{clamp: true, fast: true, noScan: !deadline, touched: gs + 1, was: was}, bit(c, int(sub.Size)))
	s.tidyDelays()
	return id, nil
}

// idleRule is the idle rule of a job without a deadline entering class c:
// with nothing (without a deadline) queued in the class, its virtual_now
// first advances to the highest finish tag, so no tenant banks credit.
func (s *Scheduler) idleRule(p *poolCore, c Class) {
	if p.queuedFair[c] != 0 {
		return
	}
	if top := p.maxTag[c].top(); top != nil && top.tag > p.vnow[c] {
		p.vnow[c] = top.tag
	}
}

// unqueue takes queued job j out of its queue q: it leaves other than by
// its dispatch (a cancel, an expiry, a lapse).
func unqueue(q *groupQueue, j *Job) {
	if j.deadline {
		if q.dls != nil {
			q.dls.remove(dlEntry{at: j.DeadlineAt(), id: j.ID})
		}
		return
	}
	q.fifo.remove(j.ID)
}

// enqueue puts queued job id (of tenant ti, group gs, class c, size) in
// its queue, a deadline job by its deadline at, any other into the fifo
// by push, and refreshes the queue's slot.
func (s *Scheduler) enqueue(ti, gs uint32, c Class, size Size, id JobID, deadline bool, at Time, push func(*jobQueue, JobID)) {
	rt := &s.rt[ti]
	q := s.queueMut(gs, c, size)
	if deadline {
		q.deadlines().push(dlEntry{at: at, id: id})
	} else {
		s.pools[rt.pool].queuedFair[c]++
		rt.queuedFair[c]++
		push(&q.fifo, id)
	}
	rt.slotMut(c, size)
	s.refresh(ti, gs, q)
}

// groupIdle is the idle rule of group_order=fair: a job enters tenant ti's
// class c with nothing of the tenant queued there (without a deadline), so
// group_now first rises to the tenant's highest group tag in the class.
func (s *Scheduler) groupIdle(ti uint32, c Class) {
	s.rt[ti].flushTags()
	if top, ok := s.rt[ti].gmax[c].top(); ok && top > s.tenants.Get(uint64(ti)).groupNow[c] {
		s.tenants.Mut(uint64(ti)).groupNow[c] = top
	}
}

// joinHeaps puts a new group of a group_order=fair tenant in its tenant's
// highest-tag heaps (on creation, never on the dispatch path, which must
// not allocate).
func (s *Scheduler) joinHeaps(ti, gs uint32) {
	if h := s.rt[ti].gmax; h != nil {
		g := s.groups.Get(uint64(gs))
		for c := range Class(NumClasses) {
			h[c].set(int(s.grt[gs].pos), g.tags[c])
		}
	}
}

// candidate is a job that may be dispatched next: a tenant's eligible
// head of one class and size, with the start tag it would be charged at.
type candidate struct {
	tag      VirtualTime
	seq      JobID
	tenant   uint32
	tier     Tier
	size     Size
	class    Class
	deadline bool
	ok       bool
}

// before orders candidates without a deadline: lower start tag, then
// higher tier, then larger size, then lower enqueue_seq.
func before(a, b *candidate) bool {
	if a.tag != b.tag {
		return a.tag < b.tag
	}
	if a.tier != b.tier {
		return a.tier > b.tier
	}
	if a.size != b.size {
		return a.size > b.size
	}
	return a.seq < b.seq
}

// realKey returns the current key of the lane of entry stored in pool p's
// fair heaps of class c.
func (s *Scheduler) realKey(p *poolCore, stored *hentry, c Class) hentry {
	t := s.tenants.Get(uint64(p.lane(stored.tenant)))
	return hentry{tag: t.Tag(c), seq: stored.seq, tenant: stored.tenant, tier: t.Tier}
}

// best returns the best candidate without a deadline of one class and
// size, first re-sifting entries whose stored tag lags behind (see place).
func (s *Scheduler) best(p *poolCore, c Class, sz Size) candidate {
	a, b := &p.heapA[c][sz], &p.heapB[c][sz]
	vnow := p.vnow[c]
	for {
		if e := a.top(); e != nil {
			if r := s.realKey(p, e, c); r != *e {
				a.set(r)
				continue
			}
			if s.cfg.Clamp == ClampDispatch && e.tag <= vnow {
				// virtual_now has passed this tenant's tag: it starts at
				// virtual_now, tied with the others there.
				b.set(a.pop())
				continue
			}
		}
		if e := b.top(); e != nil {
			if r := s.realKey(p, e, c); r.tag > vnow {
				b.remove(e.tenant)
				a.set(r)
				continue
			} else if r != *e {
				b.set(r)
				continue
			}
			return candidate{tag: vnow, seq: e.seq, tenant: p.lane(e.tenant), tier: e.tier, size: sz, class: c, ok: true}
		}
		break
	}
	if e := a.top(); e != nil {
		return candidate{tag: e.tag, seq: e.seq, tenant: p.lane(e.tenant), tier: e.tier, size: sz, class: c, ok: true}
	}
	return candidate{}
}

// bestDeadline returns the eligible deadline head of class c with the
// earliest (deadline_at, ID) among sizes <= ws: urgency before size fit.
// It is charged at max(finish tag, virtual_now) of its class.
func (s *Scheduler) bestDeadline(p *poolCore, c Class, ws Size) candidate {
	var top *hentry
	var size Size
	for sz := Size(0); sz <= ws; sz++ {
		if e := p.dheap[c][sz].top(); e != nil && (top == nil || e.tag < top.tag || (e.tag == top.tag && e.seq < top.seq)) {
			top, size = e, sz
		}
	}
	if top == nil {
		return candidate{}
	}
	ti := p.lane(top.tenant)
	t := s.tenants.Get(uint64(ti))
	return candidate{tag: max(t.Tag(c), p.vnow[c]), seq: top.seq, tenant: ti, tier: t.Tier, size: size, class: c, deadline: true, ok: true}
}

// pickFair chooses, inside class c, the job without a deadline a worker of
// size ws gets: the best same-size candidate, or the best smaller one when
// there is none or the policy prefers stealing it.
func (s *Scheduler) pickFair(p *poolCore, c Class, ws Size) candidate {
	same := s.best(p, c, ws)
	if _, preferFit := s.cfg.Policy.(PreferFit); preferFit && same.ok {
		return same // prefer-fit never steals over an eligible same-size job
	}
	var steal candidate
	for sz := ws; sz > 0; {
		sz--
		if cand := s.best(p, c, sz); cand.ok && (!steal.ok || before(&cand, &steal)) {
			steal = cand
		}
	}
	if !same.ok || (steal.ok && s.cfg.Policy.Steal(same.tag, steal.tag)) {
		return steal
	}
	return same
}

// pick chooses the job a worker of size ws gets: from the highest class
// with an eligible job of size <= ws, its most urgent deadline head, else
// its fair-share pick.
func (s *Scheduler) pick(p *poolCore, ws Size) candidate {
	for _, c := range classOrder {
		if !p.eligibleIn(c, ws) {
			continue
		}
		if d := s.bestDeadline(p, c, ws); d.ok {
			return d
		}
		if f := s.pickFair(p, c, ws); f.ok {
			return f
		}
	}
	return candidate{}
}

// eligibleIn reports whether class c of the pool has an eligible job of
// size <= ws.
func (p *poolCore) eligibleIn(c Class, ws Size) bool {
	for sz := Size(0); sz <= ws && sz < NumSizes; sz++ {
		if p.heapA[c][sz].Len() > 0 || p.heapB[c][sz].Len() > 0 || p.dheap[c][sz].Len() > 0 {
			return true
		}
	}
	return false
}

// EligibleIn reports whether class c of the pool default has an eligible
// job of size <= ws without a deadline (fair) and with one (deadline):
// what SPEC §8 rule 7 checks a dispatch against.
func (s *Scheduler) EligibleIn(c Class, ws Size) (fair, deadline bool) {
	return s.PoolEligibleIn(DefaultPool, c, ws)
}

// PoolEligibleIn is EligibleIn for pool pid.
func (s *Scheduler) PoolEligibleIn(pid PoolID, c Class, ws Size) (fair, deadline bool) {
	if c >= NumClasses || int(pid) >= len(s.pools) {
		return false, false
	}
	p := s.pools[pid]
	for sz := Size(0); sz <= ws && sz < NumSizes; sz++ {
		fair = fair || p.heapA[c][sz].Len() > 0 || p.heapB[c][sz].Len() > 0
		deadline = deadline || p.dheap[c][sz].Len() > 0
	}
	return fair, deadline
}

// Eligible reports whether a worker of size ws of the pool default would
// get a job now.
func (s *Scheduler) Eligible(ws Size) bool { return s.PoolEligible(DefaultPool, ws) }

// PoolEligible reports whether a worker of size ws of pool pid would get
// a job now (were dispatch not paused).
func (s *Scheduler) PoolEligible(pid PoolID, ws Size) bool {
	if int(pid) >= len(s.pools) {
		return false
	}
	for c := range Class(NumClasses) {
		if s.pools[pid].eligibleIn(c, ws) {
			return true
		}
	}
	return false
}

// EligibleCount returns the number of queue heads of the pool default, of
// every class, with an eligible job that a worker of size ws may take.
func (s *Scheduler) EligibleCount(ws Size) int { return s.PoolEligibleCount(DefaultPool, ws) }

// PoolEligibleCount is EligibleCount for pool pid.
func (s *Scheduler) PoolEligibleCount(pid PoolID, ws Size) int {
	if int(pid) >= len(s.pools) {
		return 0
	}
	p := s.pools[pid]
	n := 0
	for c := range NumClasses {
		for sz := Size(0); sz <= ws && sz < NumSizes; sz++ {
			n += p.heapA[c][sz].Len() + p.heapB[c][sz].Len() + p.dheap[c][sz].Len()
		}
	}
	return n
}

// Dispatch gives a free worker of size ws of the pool default the next
// job, or reports that nothing is eligible. It allocates nothing.
func (s *Scheduler) Dispatch(now Time, ws Size, worker string) (Assignment, bool, error) {
	return s.DispatchPool(now, DefaultPool, ws, worker)
}

// DispatchPool gives a free worker of size ws of pool pid the next job of
// that pool, or reports that nothing is eligible. It allocates nothing.
func (s *Scheduler) DispatchPool(now Time, pid PoolID, ws Size, worker string) (Assignment, bool, error) {
	if ws >= NumSizes {
		return Assignment{}, false, fmt.Errorf("%w: worker size %d", ErrInvalid, ws)
	}
	if worker == "" {
		return Assignment{}, false, fmt.Errorf("%w: empty worker id", ErrInvalid)
	}
	if int(pid) >= len(s.pools) || s.pools[pid].deleted {
		return Assignment{}, false, fmt.Errorf("%w: pool %d", ErrUnknownPool, pid)
	}
	p := s.pools[pid]
	if s.pausedAll || p.paused {
		return Assignment{}, false, nil // maintenance: a gate, nothing else
	}
	s.advance(now) // a job whose expire_at has passed is never dispatched
	c := s.pick(p, ws)
	if !c.ok {
		return Assignment{}, false, nil
	}
	t := s.tenants.Get(uint64(c.tenant)) // its lane in the pool
	j := s.jobs.Get(uint64(c.seq))
	usage := s.decayedUsage(t, now)
	w := s.weight(t, usage)
	step, err := tagStep(j.EstCostMs, w)
	if err != nil {
		return Assignment{}, false, err
	}
	finish, err := addVT(c.tag, step)
	if err != nil {
		return Assignment{}, false, err
	}
	rt := &s.rt[c.tenant]
	sl := rt.slot(c.class, c.size)
	ref := sl.fifo
	if c.deadline {
		ref = sl.dlc
	}
	gs := ref.group
	q := s.queue(gs, c.class, c.size)
	if ref.id != c.seq || q == nil {
		return Assignment{}, false, fmt.Errorf("%w: the heaps hold job %d, its tenant's candidate is job %d", ErrVerify, c.seq, ref.id)
	}
	// Under group_order=fair the group pays like the tenant, at weight 1:
	// start = group_tag (max with group_now for a deadline job).
	fair := t.GroupOrder == GroupFair
	var gstart, gtag VirtualTime
	if fair {
		gstart = s.groups.Get(uint64(gs)).tags[c.class]
		if c.deadline {
			gstart = max(gstart, t.groupNow[c.class])
		}
		gstep, err := tagStep(j.EstCostMs, WeightOne)
		if err != nil {
			return Assignment{}, false, err
		}
		if gtag, err = addVT(gstart, gstep); err != nil {
			return Assignment{}, false, err
		}
	}
	life, out := Step(j.Life, Input{Kind: InDispatch, Worker: worker, Now: now, AckMs: s.cfg.AckTimeoutMs})
	if out != Changed {
		return Assignment{}, false, fmt.Errorf("%w: job %d at the head of its queue is %s", ErrRefused, j.ID, j.State)
	}

	if c.deadline {
		q.dls.popFront()
	} else {
		q.fifo.popFront()
	}
	jm := s.jobs.Mut(uint64(c.seq))
	jm.Life = life
	jm.StartTag = c.tag
	jm.Weight = w
	jm.CPUMs = 0
	jm.Result = nil
	tm := s.tenants.Mut(uint64(c.tenant))
	*tm.tagPtr(c.class) = finish
	if s.cfg.Decay != nil {
		tm.Usage = usage + jm.EstCostMs
		tm.UsageAt = now
	}
	tm.Queued[c.size]--
	tm.Running++
	tm.RunningBySize[c.size]++
	tm.RunningByClass[c.class]++
	tm.InflightCPUMs += jm.EstCostMs
	tm.Billing.Dispatches++
	tm.Billing.DispatchedCostMs += jm.EstCostMs
	gm := s.groups.Mut(uint64(gs))
	gm.Running++
	gm.Queued--
	s.queued--
	if c.deadline {
		// A deadline job is paid for, but leaves virtual_now (and
		// group_now) alone.
		tm.RunningDeadline++
	} else {
		p.queuedFair[c.class]--
		rt.queuedFair[c.class]--
		if c.tag > p.vnow[c.class] {
			p.vnow[c.class] = c.tag
		}
	}
	s.addDeadline(deadline{at: life.AckDeadline, job: jm.ID, attempt: life.Attempt, kind: InExpireAck})
	// The dispatch changed one queue's head and raised the tenant's and
	// the group's counters: without caps (and with its group unblocked and
	// its tag unchanged) nothing else can change; with only size caps,
	// nothing of another size.
	mask := bit(c.class, int(c.size))
	if fair {
		if !c.deadline && gstart > tm.groupNow[c.class] {
			tm.groupNow[c.class] = gstart
		}
		s.storeGroupTag(c.tenant, gs, c.class, gtag)
	}
	s.refresh(c.tenant, gs, q) // its new head, if any, is keyed by the new tag
	if fair {
		mask |= s.rekeyGroup(c.tenant, gs, c.class)
	}
	rateBlocked := s.chargeRates(c.tenant, gs)
	if s.groupBlocked(tm, gm) {
		mask |= s.setBlocked(c.tenant, gs, true)
	}
	tenantWide := false
	if cp := &tm.Caps; rateBlocked || cp.MaxRunning != 0 || cp.MaxInflightCPUMs != 0 || cp.classCap(c.class) != 0 || (c.deadline && cp.MaxRunningDeadline != 0) {
		mask, tenantWide = allSlots, true
	} else if cp.MaxRunningSize[c.size] != 0 {
		tenantWide = true
	}
	if rt.subscribed {
		mask = allSlots
	}
	s.place(c.tenant, &placeOpts{clamp: true, fast: true, noScan: true}, mask)
	if tenantWide {
		s.afterTenantChange(c.tenant)
	}
	s.afterGroupRunning(gs)
	s.tidy(now)
	return Assignment{Job: jm.ID, Tenant: c.tenant, Size: c.size, Class: c.class, Attempt: life.Attempt, Start: c.tag, Weight: w,
		Deadline: c.deadline, DeadlineMissed: c.deadline && now > jm.DeadlineAt(), GroupStart: gstart}, true, nil
}

// capBlock returns the first cap, in the order "Why a job waits" lists
// them, that a job of tenant t of class c, size sz and cost estMs (with a
// deadline or not) would break, or CapNone.
func capBlock(t *Tenant, c Class, deadline bool, sz Size, estMs int64) CapVertex {
	cp := &t.Caps
	if cp.MaxRunning > 0 && t.Running >= cp.MaxRunning {
		return CapTenantRunning
	}
	if m := cp.MaxRunningSize[sz]; m > 0 && t.RunningBySize[sz] >= m {
		return CapTenantSize
	}
	if cp.MaxInflightCPUMs > 0 && t.InflightCPUMs > 0 && t.InflightCPUMs+estMs > cp.MaxInflightCPUMs {
		return CapTenantInflight
	}
	if m := cp.classCap(c); m > 0 && t.RunningByClass[c] >= m {
		return CapClass
	}
	if deadline && cp.MaxRunningDeadline > 0 && t.RunningDeadline >= cp.MaxRunningDeadline {
		return CapDeadline
	}
	return CapNone
}

// headInfo is the head of one queue: its job, cost and (deadline queues)
// deadline.
type headInfo struct {
	id   JobID
	cost int64
	at   Time
	ok   bool
}

// head returns the oldest queued job of a queue and its cost, dropping
// cancelled or pruned jobs from the front. The cost of the head is cached
// on the queue, so re-evaluating a tenant costs no job lookup.
func (s *Scheduler) head(q *jobQueue) headInfo {
	if q.cachedHead != 0 {
		return headInfo{id: q.cachedHead, cost: q.cachedCost, ok: true}
	}
	for {
		id, ok := q.front()
		if !ok {
			return headInfo{}
		}
		if j := s.jobs.Get(uint64(id)); j != nil && j.State == Queued && !j.Lapsed {
			q.cachedHead, q.cachedCost = id, j.EstCostMs
			return headInfo{id: id, cost: j.EstCostMs, ok: true}
		}
		q.popFront()
	}
}

// dlHead is head for a deadline queue.
func (s *Scheduler) dlHead(q *deadlineQueue) headInfo {
	if q.cachedHead != 0 {
		return headInfo{id: q.cachedHead, cost: q.cachedCost, at: q.items[0].at, ok: true}
	}
	for {
		e, ok := q.front()
		if !ok {
			return headInfo{}
		}
		if j := s.jobs.Get(uint64(e.id)); j != nil && j.State == Queued && !j.Lapsed {
			q.cachedHead, q.cachedCost = e.id, j.EstCostMs
			return headInfo{id: e.id, cost: j.EstCostMs, at: e.at, ok: true}
		}
		q.popFront()
	}
}

// Start records that a worker started an assigned job.
func (s *Scheduler) Start(now Time, id JobID, attempt uint32, worker string) (Change, error) {
	return s.event(now, id, Input{Kind: InStart, Attempt: attempt, Worker: worker}, 0)
}

// Heartbeat renews a running job's lease and records its CPU so far. A
// heartbeat for an assigned job counts as its Started.
func (s *Scheduler) Heartbeat(now Time, id JobID, attempt uint32, worker string, cpuMs int64) (Change, error) {
	if cpuMs < 0 {
		return Change{}, fmt.Errorf("%w: cpu_ms %d is negative", ErrInvalid, cpuMs)
	}
	return s.event(now, id, Input{Kind: InHeartbeat, Attempt: attempt, Worker: worker}, cpuMs)
}

// Cancel cancels a queued job at once, or marks a live one
// cancel_requested (it ends when the worker confirms or its lease expires).
func (s *Scheduler) Cancel(now Time, id JobID) (Change, error) {
	return s.event(now, id, Input{Kind: InCancel}, 0)
}

// Expire applies a passed deadline: kind is InExpireAck, InExpireLease or
// InExpireTimeout. The lifecycle re-checks state, attempt and deadline, so a
// stale or early expiry changes nothing.
func (s *Scheduler) Expire(now Time, id JobID, attempt uint32, kind InputKind) (Change, error) {
	switch kind {
	case InExpireAck, InExpireLease, InExpireTimeout:
	case InExpireTTL:
		return s.expireTTL(now, id)
	default:
		return Change{}, fmt.Errorf("%w: expire kind %s", ErrInvalid, kind)
	}
	return s.event(now, id, Input{Kind: kind, Attempt: attempt}, 0)
}

// event applies a lifecycle event other than Dispatch and Finish.
func (s *Scheduler) event(now Time, id JobID, e Input, cpuMs int64) (Change, error) {
	j := s.jobs.Get(uint64(id))
	if j == nil {
		return Change{}, fmt.Errorf("%w: %d", ErrUnknownJob, id)
	}
	e.Now = now
	e.LeaseMs = s.cfg.LeaseTimeoutMs
	e.TimeoutMs = j.TimeoutMs
	life, out := Step(j.Life, e)
	if out == Changed {
		// The event takes effect: first, what expired by now leaves its
		// queue (a refused event changes nothing).
		s.advance(now)
		j = s.jobs.Get(uint64(id))
		life, out = Step(j.Life, e)
	}
	life = s.version1Life(life)
	ch := Change{Job: id, Tenant: j.Tenant, Attempt: j.Attempt, Outcome: out, From: j.State, To: life.State}
	if out != Changed {
		if out == Duplicate {
			return ch, nil
		}
		return ch, Refusal(j, e, out)
	}
	s.advance(now)
	old := j.Life
	jm := s.jobs.Mut(uint64(id))
	jm.Life = life
	if cpuMs > jm.CPUMs {
		jm.CPUMs = cpuMs
	}
	if old.Cancel == CancelNone && life.Cancel != CancelNone && life.State.Live() {
		ch.CancelSet, ch.Cancel = true, life.Cancel
	}
	if old.State == Assigned && life.State == Running {
		s.addDeadline(deadline{at: life.LeaseExpires, job: id, attempt: life.Attempt, kind: InExpireLease})
		if life.TimeoutAt != 0 {
			s.addDeadline(deadline{at: life.TimeoutAt, job: id, attempt: life.Attempt, kind: InExpireTimeout})
		}
	}
	s.transition(jm, old, now)
	s.tidy(now)
	return ch, nil
}

// Finish applies a worker's report of a run. An accepted report corrects
// the tenant's tag and usage by the actual CPU (with the weight used at
// dispatch) and bills the CPU; a repeat is acknowledged and changes
// nothing; the first report of a stale attempt (a zombie) bills its CPU and
// changes nothing else.
func (s *Scheduler) Finish(now Time, id JobID, attempt uint32, worker string, outcome FinishOutcome, cpuMs int64, res RunResult) (Change, error) {
	if outcome < OutcomeOK || outcome > OutcomeCancelled {
		return Change{}, fmt.Errorf("%w: outcome %d", ErrInvalid, outcome)
	}
	if cpuMs < 0 || cpuMs > MaxEstCostMs {
		return Change{}, fmt.Errorf("%w: cpu_ms %d out of range", ErrInvalid, cpuMs)
	}
	// The edge cuts both tails so already. A stdout tail is cut here by
	// the same rule; a stderr tail keeps the byte cut that entries written
	// before OutputTail were applied with.
	if len(res.StderrTail) > MaxOutputTail {
		res.StderrTail = res.StderrTail[len(res.StderrTail)-MaxOutputTail:]
	}
	res.StdoutTail = OutputTail(res.StdoutTail)
	if s.v1 {
		res.StdoutTail = ""
	}
	j := s.jobs.Get(uint64(id))
	if j == nil {
		return Change{}, fmt.Errorf("%w: %d", ErrUnknownJob, id)
	}
	own, set := j.RetryBackoff()
	backoff := s.cfg.Backoff(own, set, j.Failures+1)
	e := Input{Kind: InFinish, Attempt: attempt, Worker: worker, Now: now, Outcome: outcome, BackoffMs: backoff,
		Permanent: res.Permanent && outcome == OutcomeFailed}
	life, out := Step(j.Life, e)
	life = s.version1Life(life)
	ch := Change{Job: id, Tenant: j.Tenant, Attempt: attempt, Outcome: out, From: j.State, To: life.State}
	switch out {
	case Changed:
	case Zombie:
		s.advance(now)
		s.jobs.Mut(uint64(id)).Life = life
		tm := s.tenants.Mut(uint64(j.Tenant))
		tm.Billing.CPUMs += cpuMs
		tm.Billing.ZombieCPUMs += cpuMs
		return ch, nil
	case Duplicate:
		return ch, nil
	default:
		return ch, Refusal(j, e, out)
	}
	// The report takes effect: first, eligibility at its time (what
	// expired by now leaves its queue). A live job never lapses: its life
	// stays the one computed.
	s.advance(now)
	j = s.jobs.Get(uint64(id))

	// Cost correction: the tag advanced by step(est) at dispatch; make it
	// step(cpu), with the weight of that dispatch.
	t := s.tenants.Get(uint64(j.Tenant))
	stepEst, err := tagStep(j.EstCostMs, j.Weight)
	if err != nil {
		return Change{}, err
	}
	stepCPU, err := tagStep(cpuMs, j.Weight)
	if err != nil {
		return Change{}, err
	}
	corr, err := subVT(stepCPU, stepEst)
	if err != nil {
		return Change{}, err
	}
	tag, err := addVT(t.Tag(j.Class), corr)
	if err != nil {
		return Change{}, err
	}
	// Under group_order=fair the group's tag is corrected alike, at weight 1.
	fair := t.GroupOrder == GroupFair
	var gs uint32
	var gtag VirtualTime
	if fair {
		gs = s.jobGroup(j)
		gcpu, err := tagStep(cpuMs, WeightOne)
		if err != nil {
			return Change{}, err
		}
		gest, err := tagStep(j.EstCostMs, WeightOne)
		if err != nil {
			return Change{}, err
		}
		gcorr, err := subVT(gcpu, gest)
		if err != nil {
			return Change{}, err
		}
		if gtag, err = addVT(s.groups.Get(uint64(gs)).tags[j.Class], gcorr); err != nil {
			return Change{}, err
		}
	}

	old := j.Life
	jm := s.jobs.Mut(uint64(id))
	jm.Life = life
	if life.State == Scheduled {
		s.setDue(jm, now+Time(backoff))
	}
	jm.CPUMs = cpuMs
	jm.Result = &RunResult{ExitCode: res.ExitCode, StderrTail: res.StderrTail, StdoutTail: res.StdoutTail}
	tm := s.tenants.Mut(uint64(j.Tenant))
	*tm.tagPtr(j.Class) = tag
	tm.Billing.CPUMs += cpuMs
	if s.cfg.Decay != nil {
		tm.Usage = max(0, s.decayedUsage(tm, now)+cpuMs-jm.EstCostMs)
		tm.UsageAt = now
	}
	if life.State == Completed && !s.v1 {
		s.learn(s.owner(j.Tenant), jm.Type(), cpuMs, now) // a tenant's estimates are of every pool
	}
	if fair {
		s.setGroupTag(j.Tenant, gs, j.Class, gtag)
	}
	s.transition(jm, old, now)
	s.tidy(now)
	return ch, nil
}

// transition updates counters and queues after job j changed from old to
// j.Life, then re-places its tenant and forgets its group if it is left
// with no job and no setting.
func (s *Scheduler) transition(j *Job, old Life, now Time) {
	if (old.State == j.State && old.Failures == j.Failures) || (old.State.Live() && j.State.Live()) {
		return // a start, a lease move or a cancel request: no counter moves
	}
	ti := j.Tenant
	gs := s.jobGroup(j)
	fair := s.tenants.Get(uint64(ti)).GroupOrder == GroupFair
	var was [NumClasses]bool
	if fair {
		was = s.groupEligibility(ti, gs)
	}
	tm := s.tenants.Mut(uint64(ti))
	gm := s.groups.Mut(uint64(gs))
	rt := &s.rt[ti]
	q := s.queueMut(gs, j.Class, j.Size)
	if old.State.Live() && !j.State.Live() {
		tm.Running--
		tm.RunningBySize[j.Size]--
		tm.RunningByClass[j.Class]--
		if j.deadline {
			tm.RunningDeadline--
		}
		tm.InflightCPUMs -= j.EstCostMs
		gm.Running--
	}
	if old.State == Queued && j.State != Queued {
		tm.Queued[j.Size]--
		gm.Queued--
		s.queued--
		if !j.deadline {
			s.pools[rt.pool].queuedFair[j.Class]--
			rt.queuedFair[j.Class]--
		}
		if !old.Lapsed {
			unqueue(q, j) // a lapsed job left its queue when it lapsed
		}
	}
	if old.State == Scheduled && j.State != Scheduled {
		tm.Scheduled--
		gm.Scheduled--
	}
	tm.Billing.Failures += uint64(j.Failures - old.Failures)
	switch j.State {
	case Queued:
		if old.State != Queued {
			if fair && !j.deadline && rt.queuedFair[j.Class] == 0 {
				s.groupIdle(ti, j.Class)
				tm = s.tenants.Mut(uint64(ti))
			}
			tm.Queued[j.Size]++
			if old.State != Scheduled {
				tm.Billing.Requeues++ // a release is no requeue: its run was counted when it backed off
			}
			gm.Queued++
			s.queued++
			if j.deadline {
				q.deadlines().push(dlEntry{at: j.DeadlineAt(), id: j.ID})
			} else {
				s.pools[rt.pool].queuedFair[j.Class]++
				rt.queuedFair[j.Class]++
				q.fifo.pushAt(j.ID)
			}
		}
	case Scheduled:
		// A failed run backing off before its retry.
		tm.Scheduled++
		tm.Billing.Requeues++
		gm.Scheduled++
		s.dl.due.push(j.DueAt(), j.ID)
	case Completed:
		tm.Billing.Completed++
	case Failed:
		tm.Billing.Failed++
	case Cancelled:
		tm.Billing.Cancelled++
	case TimedOut:
		tm.Billing.TimedOut++
	}
	if j.State.Terminal() && !old.State.Terminal() {
		j.EndedAt, j.endWall = now, MakeWallDelta(s.wall, now)
		s.noteEnded(j)
		rt.payload -= uint64(len(j.Payload()))
	}
	rt.slotMut(j.Class, j.Size)
	s.refresh(ti, gs, q)
	s.setBlocked(ti, gs, s.groupBlocked(tm, gm))
	s.place(ti, &placeOpts{clamp: true, touched: gs + 1, was: was}, allSlots)
	if old.State.Live() && !j.State.Live() && s.hasLanes(ti) {
		// A run ended: the tenant's limits and its group's cap count it
		// in every pool.
		if !tm.Caps.none() {
			s.afterTenantChange(ti)
		}
		s.afterGroupRunning(gs)
	}
	s.tidyGroup(gs)
}

// Refusal is the error Apply returns for lifecycle input e refused with
// out (Stale, NotDue, Invalid) by job j, as it stood: the leader answers
// a report its state already shows refused with the same words, without
// proposing it.
func Refusal(j *Job, e Input, out Outcome) error {
	what := fmt.Sprintf("%s of job %d", e.Kind, j.ID)
	switch {
	case e.Worker != "":
		what += fmt.Sprintf(" (attempt %d, worker %q)", e.Attempt, e.Worker)
	case e.Attempt != 0:
		what += fmt.Sprintf(" (attempt %d)", e.Attempt)
	}
	state := fmt.Sprintf("job is %s at attempt %d", j.State, j.Attempt)
	if j.State.Live() {
		state += fmt.Sprintf(" on worker %q", j.Worker)
	}
	switch out {
	case Stale:
		return fmt.Errorf("%w: %s is stale: %s", ErrRefused, what, state)
	case NotDue:
		return fmt.Errorf("%w: %s is not due yet", ErrRefused, what)
	}
	return fmt.Errorf("%w: %s does not apply: %s", ErrRefused, what, state)
}

// GrantLeases gives every live job's lease, ack deadline and timeout at
// least LeaseTimeoutMs from now; a new leader calls it before it expires
// any deadline. It returns the number of jobs whose deadlines moved.
func (s *Scheduler) GrantLeases(now Time) int {
	s.advance(now)
	moved := 0
	e := Input{Kind: InGrant, Now: now, LeaseMs: s.cfg.LeaseTimeoutMs}
	s.deadlines.each(func(d *deadline) {
		j := s.jobs.Get(uint64(d.job))
		if j == nil || j.Attempt != d.attempt {
			return
		}
		if life, out := Step(j.Life, e); out == Changed {
			s.jobs.Mut(uint64(d.job)).Life = life
			moved++
		}
	})
	return moved
}

// Due calls fn for every deadline that has passed at now: the expiries a
// leader should propose as Expire. It changes nothing.
func (s *Scheduler) Due(now Time, fn func(id JobID, attempt uint32, kind InputKind) bool) {
	s.deadlines.walk(now, func(d *deadline) bool {
		at, ok := s.deadlineOf(d)
		if ok && at <= now {
			return fn(d.job, d.attempt, d.kind)
		}
		return true
	})
}

// deadlineOf returns the current deadline of the kind d names, if the job
// is still in the state and attempt that deadline belongs to.
func (s *Scheduler) deadlineOf(d *deadline) (Time, bool) {
	j := s.jobs.Get(uint64(d.job))
	if j == nil || j.Attempt != d.attempt {
		return 0, false
	}
	switch d.kind {
	case InExpireAck:
		return j.AckDeadline, j.State == Assigned
	case InExpireLease:
		return j.LeaseExpires, j.State == Running
	case InExpireTimeout:
		return j.TimeoutAt, j.State.Live() && j.TimeoutAt != 0 && j.Cancel == CancelNone
	}
	return 0, false
}

// addDeadline records a deadline of a job that just entered the state it
// belongs to (see deadlineHeap); a full fresh list moves into the heap the
// deadlines whose job is still in that state.
func (s *Scheduler) addDeadline(d deadline) {
	if s.deadlines.add(d) {
		s.deadlines.settle(s.deadlineOf)
	}
}

// tidy drops deadlines that no longer apply from the top of the deadline
// heap and moves those that were extended, and tidies the delay heaps.
func (s *Scheduler) tidy(now Time) {
	s.tidyDelays()
	for {
		d := s.deadlines.top()
		if d == nil || d.at > now {
			return
		}
		at, ok := s.deadlineOf(d)
		switch {
		case !ok:
			s.deadlines.pop()
		case at > d.at:
			moved := *d
			moved.at = at
			s.deadlines.pop()
			s.deadlines.push(moved)
		default:
			return // due: the leader will expire it
		}
	}
}

// Prune removes up to limit terminal jobs that ended before cutoff, in
// (ended_at, id) order, and returns how many it removed.
func (s *Scheduler) Prune(cutoff Time, limit int) int {
	return s.PruneEnded(cutoff, cutoff, limit)
}

// OldestEnded returns when the longest-ended terminal job still in the
// table ended.
func (s *Scheduler) OldestEnded() (Time, bool) {
	a, aok := s.ended.front()
	b, bok := s.deadAll.front()
	switch {
	case aok && bok:
		return min(a.at, b.at), true
	case aok:
		return a.at, true
	}
	return b.at, bok
}
