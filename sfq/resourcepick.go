package sfq

import (
	"cmp"
	"slices"
)

// The pick's view of resources (SPEC §3 "Resources"): which heads a
// resource blocks, whose reservation stands, and when a job takes one.
//
// A head is blocked by a resource when one of the resources it uses has
// no room for its units — cluster-wide (held + units > capacity) or under
// its tenant's limit — or holds a reservation that stands for another
// job. Such a head, unless a tenant-level limit blocks it too, is passed
// over: the candidate rule sees its tenant's other heads as if it were
// not there (laneClass). A pool with queued jobs that use resources is
// dispatched by the pick that sees them (pickFor), for every worker.
//
// Reservations. A job that has been blocked only by resources (no cap,
// pause, rate or group limit holds it, its tenant has room under every
// limit of its own, and its resource lacks room cluster-wide) for longer
// than resource_reserve_after may take the resource's reservation: the
// one blocked the longest (then the lowest job ID) takes it, at the first
// Dispatch after it qualifies. While it stands no other job takes units
// of that resource — but a job that holds a reservation of its own ranked
// before it (blocked longer, then lower ID), so that two reservations
// never wait on each other. It ends when its job is dispatched or leaves
// its queue; it does not stand (and the next Dispatch gives it up) while
// its job is held back by anything but resources, or is no longer the
// head of its part of the queue.
//
// "Blocked since": the later of when the job entered its queue (its
// submit, last release or redrive) and when the resource last stopped
// having room for its units (the resource's stairs, resources.go).

// runsAllValue is what a worker that runs every job runs: the view the
// pick of a pool with resources takes for it.
var runsAllValue = Runs{Commands: true, AllKinds: true}

// resBlocked reports whether head id of tenant o (own index), whose part
// of the queue uses u, is blocked by a resource. cache lets it keep, for
// this pick, whether a reservation stands (a write: never in a read that
// may run beside others).
func (s *Scheduler) resBlocked(u UsesID, o uint32, id JobID, cache bool) bool {
	if u == 0 {
		return false
	}
	for _, it := range s.rs.uses[u].items {
		r := s.rs.res[it.res]
		if r.held+uint64(it.units) > uint64(r.Capacity) {
			return true
		}
		if m := r.tenantMax(o); m != NoTenantMax && uint64(s.tenantHeld(o, it.res))+uint64(it.units) > uint64(m) {
			return true
		}
		if r.reserved != 0 && r.reserved != id && s.standingHolder(r, cache) != 0 && !s.outranks(id, r) {
			return true
		}
	}
	return false
}

// capBlocked reports whether some resource of uses u has no room for its
// units whatever the tenant: no job of u can be dispatched.
func (s *Scheduler) capBlocked(u UsesID) bool {
	for _, it := range s.rs.uses[u].items {
		if r := s.rs.res[it.res]; r.held+uint64(it.units) > uint64(r.Capacity) {
			return true
		}
	}
	return false
}

// outranks reports whether job id holds a standing reservation ranked
// before r's (blocked longer, then a lower ID).
func (s *Scheduler) outranks(id JobID, r *resource) bool {
	for _, o := range s.rs.res {
		if o != r && o.live && o.reserved == id && (o.rank < r.rank || (o.rank == r.rank && id < r.reserved)) {
			return true
		}
	}
	return false
}

// standingHolder returns the job whose reservation of r stands (0: none).
func (s *Scheduler) standingHolder(r *resource, cache bool) JobID {
	if r.reserved == 0 {
		return 0
	}
	if cache && r.standGen == s.rs.standGen {
		if r.standing {
			return r.reserved
		}
		return 0
	}
	var buf Tenant
	ok := s.holderValid(r, &buf)
	if cache {
		r.standGen, r.standing = s.rs.standGen, ok
	}
	if !ok {
		return 0
	}
	return r.reserved
}

// newPick starts a pick's cache of standing reservations.
func (s *Scheduler) newPick() {
	s.rs.standGen++
	if s.rs.standGen == 0 {
		for _, r := range s.rs.res {
			r.standGen = 0
		}
		s.rs.standGen = 1
	}
}

// holderValid reports whether r's reservation stands: its job is queued,
// the head of its part of its queue, blocked by nothing but resources,
// and its tenant has room for it under each of its limits.
func (s *Scheduler) holderValid(r *resource, buf *Tenant) bool {
	j := s.jobs.Get(uint64(r.reserved))
	if j == nil || j.State != Queued || j.Lapsed {
		return false
	}
	gs, ok := s.groupSlot(j.Tenant, j.Group())
	if !ok {
		return false
	}
	q := s.queue(gs, j.Class, j.Size)
	if q == nil {
		return false
	}
	part := q.of(s.routeOf(j), s.usesOf(j))
	if part == nil {
		return false
	}
	var h headInfo
	if j.deadline() {
		if part.dls != nil {
			h = s.peekDlHead(part.dls)
		}
	} else {
		h = s.peekHead(&part.fifo)
	}
	if !h.ok || h.id != j.ID {
		return false
	}
	return s.onlyResources(j, gs, buf)
}

// onlyResources reports whether queued job j (of group gs) would be held
// back by resources alone: no tenant-level or group-level limit blocks
// it, and its tenant has room under its own limit on each resource it
// uses.
func (s *Scheduler) onlyResources(j *Job, gs uint32, buf *Tenant) bool {
	ti := j.Tenant
	t := s.tenants.Get(uint64(ti))
	lt := s.limitsInto(ti, buf)
	rt := &s.rt[ti]
	gate := s.tenantGate(lt) || (rt.subscribed && t.Running >= rt.burst)
	uf, ud := uniformBlock(lt, j.Class, j.Size, gate)
	if (j.deadline() && ud) || (!j.deadline() && uf) || j.EstCostMs > inflightRoom(lt) {
		return false
	}
	if s.groupBlocked(t, s.groups.Get(uint64(gs))) {
		return false
	}
	o := s.owner(ti)
	for _, it := range s.rs.uses[s.usesOf(j)].items {
		r := s.rs.res[it.res]
		if m := r.tenantMax(o); m != NoTenantMax && uint64(s.tenantHeld(o, it.res))+uint64(it.units) > uint64(m) {
			return false
		}
	}
	return true
}

// queuedSince is when queued job j entered its queue: its submit, or its
// last redrive or release.
func queuedSince(j *Job) Time { return max(j.countsFrom(), j.times().due) }

// reserveResources gives each resource without a standing reservation to
// the job that qualifies for it, at the start of a Dispatch at now, and
// gives up those that no longer stand.
func (s *Scheduler) reserveResources(now Time) {
	if len(s.rs.byName) == 0 {
		return
	}
	for id, r := range s.rs.res {
		if !r.live {
			continue
		}
		if r.reserved != 0 && !s.holderValid(r, &s.scratch) {
			s.setReserved(r, 0, 0)
		}
		if r.reserved == 0 {
			if j, rank, ok := s.reserveCandidate(ResourceID(id), r, now); ok {
				s.setReserved(r, j, rank)
			}
		}
	}
}

// setReserved gives r's reservation to job j, blocked since rank (0:
// none).
func (s *Scheduler) setReserved(r *resource, j JobID, rank Time) {
	r.reserved, r.rank = j, rank
	r.standGen = 0
}

// unreserve gives up the reservations job id holds (it was dispatched, or
// left its queue).
func (s *Scheduler) unreserve(id JobID) {
	for _, r := range s.rs.res {
		if r.live && r.reserved == id {
			s.setReserved(r, 0, 0)
		}
	}
}

// reserveCandidate finds the job that qualifies for resource id's
// reservation at now: blocked only by resources, with id lacking room for
// its units (at most its capacity) for longer than resource_reserve_after;
// the one blocked the longest, then the lowest job ID.
func (s *Scheduler) reserveCandidate(id ResourceID, r *resource, now Time) (JobID, Time, bool) {
	if !s.queuedBeyond(id, r) {
		return 0, 0, false // no queued job lacks room in it now
	}
	cut := now - Time(s.cfg.ResourceReserveAfterMs) // blocked since before it
	// The stairs are by k descending and time ascending: the counts of
	// units that have lacked room since before cut are those above the
	// first step that has not (found by halving: a resource that has
	// filled up unit by unit has as many steps as units).
	n, _ := slices.BinarySearchFunc(r.stairs, cut, func(st stair, cut Time) int { return cmp.Compare(st.at, cut) })
	if n == 0 {
		return 0, 0, false
	}
	kmin := level(r.free()) + 1
	if n < len(r.stairs) {
		kmin = r.stairs[n].k + 1
	}
	if kmin > r.Capacity {
		return 0, 0, false // no job that can ever fit has waited so long
	}
	var best JobID
	var bestSince Time
	for u := range s.rs.uses {
		e := &s.rs.uses[u]
		if e.queued == 0 {
			continue
		}
		var units uint32
		for _, it := range e.items {
			if it.res == id {
				units = it.units
			}
		}
		if units < kmin || units > r.Capacity {
			continue
		}
		lack := r.lacked(units)
		s.eachUsesHead(UsesID(u), func(j *Job, gs uint32) {
			since := max(queuedSince(j), lack)
			if since >= cut || (best != 0 && (since > bestSince || (since == bestSince && j.ID > best))) {
				return
			}
			if s.onlyResources(j, gs, &s.scratch) {
				best, bestSince = j.ID, since
			}
		})
	}
	return best, bestSince, best != 0
}

// queuedBeyond reports whether a queued job uses more units of resource
// id (r) than it has free, and no more than its capacity: only such a
// job may take its reservation.
func (s *Scheduler) queuedBeyond(id ResourceID, r *resource) bool {
	free := level(r.free())
	for u := 1; u < len(s.rs.uses); u++ {
		e := &s.rs.uses[u]
		if e.queued == 0 {
			continue
		}
		for _, it := range e.items {
			if it.res == id && it.units > free && it.units <= r.Capacity {
				return true
			}
		}
	}
	return false
}

// eachUsesHead calls fn with each head (without a deadline, and with one)
// of every part of a queue that holds queued jobs of uses u, in every
// pool.
func (s *Scheduler) eachUsesHead(u UsesID, fn func(j *Job, gs uint32)) {
	for _, p := range s.pools {
		for k, rl := range p.routes {
			if k.uses != u {
				continue
			}
			for _, lanes := range [2]map[uint32]uint32{rl.nfifo, rl.ndl} {
				for ti := range lanes {
					s.eachSlotQueue(ti, k.class, k.size, func(gs uint32, q *groupQueue) {
						part := q.of(k.route, u)
						if part == nil {
							return
						}
						for _, h := range [2]headInfo{s.peekHead(&part.fifo), s.peekDl(part)} {
							if h.ok {
								fn(s.jobs.Get(uint64(h.id)), gs)
							}
						}
					})
				}
			}
		}
	}
}

// peekDl is the deadline head of part p (none without deadline jobs).
func (s *Scheduler) peekDl(p *routeQueue) headInfo {
	if p.dls == nil {
		return headInfo{}
	}
	return s.peekDlHead(p.dls)
}

// eachSlotQueue calls fn with every queue of lane ti's slot of class c and
// size sz that holds a queued job, each once.
func (s *Scheduler) eachSlotQueue(ti uint32, c Class, sz Size, fn func(gs uint32, q *groupQueue)) {
	sl := s.rt[ti].slot(c, sz)
	if sl == nil || sl.byID == 0 {
		return
	}
	// Every group with a head in the slot has a node in its treeID (its
	// fifo head's, else its deadline head's): walk them, each group once.
	var stack [64]int32
	top := 0
	x := sl.byID
	for x != 0 || top > 0 {
		for x != 0 {
			stack[top] = x
			top++
			x = s.nodes.n[x].l[treeID]
		}
		top--
		x = stack[top]
		n := &s.nodes.n[x]
		if q := s.queue(n.group, c, sz); q != nil && (x == q.fnode || q.fnode == 0) {
			fn(n.group, q)
		}
		x = n.r[treeID]
	}
}

// peekHead is head without dropping anything (a read): a queue's front
// is never dead.
func (s *Scheduler) peekHead(q *jobQueue) headInfo {
	if q.cachedHead != 0 {
		return headInfo{id: q.cachedHead, cost: q.cachedCost, ok: true}
	}
	id, ok := q.front()
	if !ok {
		return headInfo{}
	}
	j := s.jobs.Get(uint64(id))
	if j == nil || j.State != Queued || j.Lapsed {
		return headInfo{}
	}
	return headInfo{id: id, cost: j.EstCostMs, ok: true}
}

// peekDlHead is dlHead without dropping anything (a read).
func (s *Scheduler) peekDlHead(q *deadlineQueue) headInfo {
	if q.cachedHead != 0 {
		return headInfo{id: q.cachedHead, cost: q.cachedCost, at: q.items[0].at, ok: true}
	}
	e, ok := q.front()
	if !ok {
		return headInfo{}
	}
	j := s.jobs.Get(uint64(e.id))
	if j == nil || j.State != Queued || j.Lapsed {
		return headInfo{}
	}
	return headInfo{id: e.id, cost: j.EstCostMs, at: e.at, ok: true}
}

// ResourceBlock says which resource holds a queued head back, and how
// (explain's `resource` cap).
type ResourceBlock struct {
	Resource string
	// Held and Capacity: the resource has no room cluster-wide; or
	// TenantHeld and TenantMax (Tenant set): none under its tenant's
	// limit; Reserved: another job's reservation of it stands.
	Held, Capacity        uint64
	Tenant                bool
	TenantHeld, TenantMax uint64
	Reserved              JobID
}

// resourceBlock returns the first resource (by name) that blocks queued
// job j, as explain says it. It is a read.
func (s *Scheduler) resourceBlock(j *Job) (ResourceBlock, bool) {
	u := s.usesOf(j)
	if u == 0 {
		return ResourceBlock{}, false
	}
	o := s.owner(j.Tenant)
	for _, use := range j.Uses() {
		r, rid, ok := s.resourceOf(use.Resource)
		if !ok {
			continue
		}
		b := ResourceBlock{Resource: use.Resource, Held: r.held, Capacity: uint64(r.Capacity)}
		if r.held+uint64(use.Units) > uint64(r.Capacity) {
			return b, true
		}
		if m := r.tenantMax(o); m != NoTenantMax && uint64(s.tenantHeld(o, rid))+uint64(use.Units) > uint64(m) {
			b.Tenant, b.TenantHeld, b.TenantMax = true, uint64(s.tenantHeld(o, rid)), uint64(m)
			return b, true
		}
		if h := s.standingHolder(r, false); h != 0 && h != j.ID && !s.outranks(j.ID, r) {
			b.Reserved = h
			return b, true
		}
	}
	return ResourceBlock{}, false
}
