package sfq

import (
	"cmp"
	"fmt"
	"slices"
)

// A queued job's place in line (SPEC §3 "Evidence of fairness"): how many
// jobs the scheduler would give the workers of its size before it. A read
// of the state; nothing is changed.

// Place is a queued job's place in line in its pool, for the workers of
// its size: Ahead jobs would be dispatched before it, Own of them its own
// tenant's, of AheadCostMs and OwnCostMs estimated CPU. Complete is false
// when the count stopped at the caller's limit: Ahead is then that limit,
// a lower bound. For a job without a deadline, Start is the start tag it
// would be charged at and VirtualNow its class's virtual_now now: while
// every tenant with eligible work there stays so, the class hands out
// (Start − VirtualNow) × their weights of service before it.
type Place struct {
	Ahead, Own             uint64
	AheadCostMs, OwnCostMs int64
	Complete               bool
	Start, VirtualNow      VirtualTime
}

// Place returns the place in line of queued job id at cluster time now:
// the number of jobs workers of its size in its pool would be given before
// it if they asked one after another and nothing else happened — no
// submit, finish or cancel, and no time passing. Limits are taken as they
// stand: a tenant or group that a cap, a rate limit or a pause holds now
// contributes none of its jobs, one that may be dispatched now contributes
// every job of its that goes first. The count is exact as long as no limit
// starts to bind on the way (a cap reached by these very dispatches is not
// foreseen) and the steal policy is prefer-fit (under reserve, smaller
// jobs that would steal a worker of its size are not counted). What goes
// first:
//
//  1. every queued job of a higher class of size at most its size;
//  2. for a job without a deadline, every deadline job of its class of
//     size at most its size (they charge their tenants' tags); for a
//     deadline job, those with an earlier (deadline_at, ID);
//  3. for a job without a deadline, the jobs of its class and size that
//     the fair order puts before it: each tenant's in its own order
//     (lower job ID; by group tag under group_order=fair), each at its
//     tenant's tag as the jobs before it advance it (cost over weight,
//     with decay), by the dispatch key (start tag, higher tier, job ID).
//
// ok is false when the job has no place: it is not queued, or it cannot
// be dispatched until something else happens (dispatch, its pool, its
// tenant or its group paused; a cap, rate limit or the candidate rule
// holding its tenant's jobs of its class and size; its group blocked; a
// resource it uses without room for it, or reserved for another job).
// Its reason (Explain) then says what it waits for.
//
// Cost: O((Ahead + T + G) log T) for T tenants with eligible work of its
// class and G groups of theirs, at most limit jobs visited per count.
func (s *Scheduler) Place(id JobID, now Time, limit uint64) (pl Place, ok bool, err error) {
	j := s.jobs.Get(uint64(id))
	if j == nil {
		return Place{}, false, fmt.Errorf("%w: %d", ErrUnknownJob, id)
	}
	if j.State != Queued || j.Lapsed {
		return Place{}, false, nil
	}
	if _, blocked := s.resourceBlock(j); blocked {
		return Place{}, false, nil
	}
	lane := j.Tenant
	rt := &s.rt[lane]
	p := s.pools[rt.pool]
	sl := rt.slot(j.Class, j.Size)
	if s.pausedAll || p.paused || sl == nil || (j.deadline() && sl.dlPlaced == 0) || (!j.deadline() && sl.fifoPlaced == 0) {
		return Place{}, false, nil
	}
	gs, found := s.groupSlot(lane, j.Group())
	if !found || s.groupBlocked(s.tenants.Get(uint64(lane)), s.groups.Get(uint64(gs))) {
		return Place{}, false, nil
	}
	pc := placeCount{s: s, limit: max(limit, 1), ownLane: lane, p: p, class: j.Class, now: now}
	// 1. Higher classes, every size that fits.
	for _, c := range classOrder {
		if c == j.Class {
			break
		}
		for sz := Size(0); sz <= j.Size; sz++ {
			pc.lanes(&p.heapA[c][sz], &p.heapB[c][sz], func(l uint32) { pc.countQueue(l, c, sz, false, nil) })
			pc.lanes(&p.dheap[c][sz], nil, func(l uint32) { pc.countQueue(l, c, sz, true, nil) })
		}
	}
	// 2. Deadline jobs of its class: those before it, or (a job without
	// a deadline) all, each charged to its tenant's tag at max(tag,
	// virtual_now), in its tenant's (deadline_at, ID) order.
	me := dlEntry{at: j.DeadlineAt(), id: id}
	var dls []placeDeadline
	for sz := Size(0); sz <= j.Size; sz++ {
		pc.lanes(&p.dheap[j.Class][sz], nil, func(l uint32) {
			pc.countQueue(l, j.Class, sz, true, func(gs uint32, e dlEntry, cost int64) bool {
				if j.deadline() && !dlBefore(e, me) {
					return false
				}
				dls = append(dls, placeDeadline{lane: l, group: gs, e: e, cost: cost})
				return true
			})
		})
	}
	if !j.deadline() && !pc.full() {
		slices.SortFunc(dls, func(a, b placeDeadline) int {
			if a.lane != b.lane {
				return cmp.Compare(a.lane, b.lane)
			}
			if dlBefore(a.e, b.e) {
				return -1
			}
			return 1
		})
		for _, d := range dls {
			pl := pc.lane(d.lane)
			pl.tag = max(pl.tag, p.vnow[j.Class])
			if err := pl.charge(s, d.cost); err != nil {
				return Place{}, false, err
			}
			if pl.fair {
				// Its group pays too, at weight 1, from max(group tag,
				// group_now), which it leaves alone.
				if err := pl.chargeGroup(s, d.group, d.cost); err != nil {
					return Place{}, false, err
				}
			}
		}
		// 3. The fair order of its class and size.
		pc.fair(j)
	}
	pl = Place{Ahead: min(pc.n, pc.limit), Own: min(pc.own, pc.limit), AheadCostMs: pc.cost, OwnCostMs: pc.ownCost, Complete: !pc.full(),
		Start: pc.start, VirtualNow: p.vnow[j.Class]}
	return pl, true, pc.err
}

// placeDeadline is a deadline job counted ahead: its lane, key and cost.
type placeDeadline struct {
	lane, group uint32
	e           dlEntry
	cost        int64
}

// placeCount counts the jobs ahead, up to limit.
type placeCount struct {
	s        *Scheduler
	p        *poolCore
	class    Class // the job's
	now      Time
	limit, n uint64
	ownLane  uint32
	own      uint64 // of n, the jobs of ownLane
	// cost and ownCost are the estimated CPU of the jobs counted; start
	// the job's start tag in the fair walk.
	cost, ownCost int64
	start         VirtualTime
	err           error
	// walk holds the lanes whose usage or tag the jobs counted so far
	// have moved (the walk's class's tag).
	walk map[uint32]*placeLane
}

// add counts one job of lane, of cost ms: under decay its usage grows
// by the cost, whatever the job's class (decay is per tenant and pool).
func (pc *placeCount) add(lane uint32, cost int64) {
	pc.n++
	pc.cost += cost
	if lane == pc.ownLane {
		pc.own++
		pc.ownCost += cost
	}
	if pc.s.cfg.Decay != nil {
		pc.lane(lane).usage += cost
	}
}

// lane returns lane l's state in the walk.
func (pc *placeCount) lane(l uint32) *placeLane {
	if pl := pc.walk[l]; pl != nil {
		return pl
	}
	if pc.walk == nil {
		pc.walk = map[uint32]*placeLane{}
	}
	t := pc.s.tenants.Get(uint64(l))
	pl := &placeLane{lane: l, class: pc.class, tier: t.Tier, tag: t.Tag(pc.class), usage: pc.s.decayedUsage(t, pc.now), t: t, fair: t.GroupOrder == GroupFair}
	pc.walk[l] = pl
	return pl
}

func (pc *placeCount) full() bool { return pc.n >= pc.limit || pc.err != nil }

// lanes calls fn for each lane in heaps a and b (b may be nil).
func (pc *placeCount) lanes(a, b *tenantHeap, fn func(lane uint32)) {
	for _, h := range [2]*tenantHeap{a, b} {
		if h == nil {
			continue
		}
		for i := range h.items {
			if pc.full() {
				return
			}
			fn(pc.p.lane(h.items[i].tenant))
		}
	}
}

// countQueue counts lane's queued jobs of class c and size sz, deadline
// jobs or not, in its groups that no group-level limit blocks, adding
// their costs to its usage; with fn, only the deadline jobs fn accepts
// (it sees each one's group slot, key and cost, and charges it).
func (pc *placeCount) countQueue(lane uint32, c Class, sz Size, dl bool, fn func(uint32, dlEntry, int64) bool) {
	s := pc.s
	t := s.tenants.Get(uint64(lane))
	for _, gs := range s.rt[lane].groups {
		if pc.full() {
			return
		}
		q := s.queue(gs, c, sz)
		if q == nil || s.groupBlocked(t, s.groups.Get(uint64(gs))) {
			continue
		}
		if dl {
			for i := range q.nparts() { // every route's deadline jobs
				dls := q.part(i).dls
				if dls == nil {
					continue
				}
				for _, e := range dls.items {
					if pc.full() {
						return
					}
					if !dls.live(e) {
						continue
					}
					jb := s.jobs.Get(uint64(e.id))
					if jb == nil || jb.State != Queued || jb.Lapsed {
						continue
					}
					if fn == nil {
						pc.add(lane, jb.EstCostMs)
					} else if fn(gs, e, jb.EstCostMs) {
						pc.add(lane, jb.EstCostMs)
						pc.lane(lane).usage -= jb.EstCostMs * decayOn(pc.s) // fn's caller charges it
					}
				}
			}
			continue
		}
		it := newGroupIter(s, q)
		for ; ; it.next() {
			if pc.full() {
				return
			}
			if _, ok := it.peek(); !ok {
				break
			}
			pc.add(lane, it.cost)
		}
	}
}

// queueIter walks a fifo queue's queued jobs in ID order: the ring
// (ascending) merged with the requeued list (descending, smallest last).
type queueIter struct {
	s      *Scheduler
	q      *jobQueue
	ri, qi int // entries taken from the ring's head and the list's end
	id     JobID
	cost   int64
	ok     bool
}

// peek returns the next queued job (its cost in it.cost).
func (it *queueIter) peek() (JobID, bool) {
	for !it.ok {
		var ringID, reqID JobID
		hasRing, hasReq := it.ri < int(it.q.n), it.qi < len(it.q.requeued)
		if hasRing {
			ringID = it.q.ringAt(it.ri)
		}
		if hasReq {
			reqID = it.q.requeued[len(it.q.requeued)-1-it.qi]
		}
		var e JobID
		switch {
		case hasRing && (!hasReq || ringID&^deadEntry < reqID&^deadEntry):
			e = ringID
			it.ri++
		case hasReq:
			e = reqID
			it.qi++
		default:
			return 0, false
		}
		if e&deadEntry != 0 {
			continue
		}
		if j := it.s.jobs.Get(uint64(e)); j != nil && j.State == Queued && !j.Lapsed {
			it.id, it.cost, it.ok = e, j.EstCostMs, true
		}
	}
	return it.id, true
}

func (it *queueIter) next() { it.ok = false }

// groupIter walks a group queue's queued jobs without a deadline in ID
// order, over the parts of every route (queueIter's of each, merged).
type groupIter struct {
	parts []queueIter
	which int
	id    JobID
	cost  int64
	ok    bool
}

func newGroupIter(s *Scheduler, q *groupQueue) groupIter {
	g := groupIter{parts: make([]queueIter, q.nparts())}
	for i := range g.parts {
		g.parts[i] = queueIter{s: s, q: &q.part(i).fifo}
	}
	return g
}

// peek returns the next queued job (its cost in it.cost).
func (it *groupIter) peek() (JobID, bool) {
	if it.ok {
		return it.id, true
	}
	best := -1
	for i := range it.parts {
		if id, ok := it.parts[i].peek(); ok && (best < 0 || id < it.id) {
			best, it.id = i, id
		}
	}
	if best < 0 {
		return 0, false
	}
	it.which, it.cost, it.ok = best, it.parts[best].cost, true
	return it.id, true
}

func (it *groupIter) next() {
	if it.ok {
		it.parts[it.which].next()
	}
	it.ok = false
}

// placeLane is one lane in the walk of the fair order: its jobs of the
// class and size in its own order, its tag, usage and weight as the jobs
// before advance them.
type placeLane struct {
	lane   uint32
	class  Class
	tier   Tier
	tag    VirtualTime
	usage  int64
	t      *Tenant
	fair   bool         // group_order=fair: groups go by group tag
	groups []placeGroup // a heap by (group tag, next ID) or by next ID
	done   bool
	// gtags holds the group tags (of the walk's class) that deadline
	// jobs going first have moved, by group slot (group_order=fair).
	gtags map[uint32]VirtualTime
}

// chargeGroup advances group gs's tag by a deadline job of cost ms: from
// max(its tag, its tenant's group_now), at weight 1.
func (pl *placeLane) chargeGroup(s *Scheduler, gs uint32, cost int64) error {
	tag, ok := pl.gtags[gs]
	if !ok {
		tag = s.groups.Get(uint64(gs)).tags[pl.class]
	}
	step, err := tagStep(cost, WeightOne)
	if err != nil {
		return err
	}
	if tag, err = addVT(max(tag, pl.t.groupNow[pl.class]), step); err != nil {
		return err
	}
	if pl.gtags == nil {
		pl.gtags = map[uint32]VirtualTime{}
	}
	pl.gtags[gs] = tag
	return nil
}

// placeGroup is one group's queue in a lane's walk.
type placeGroup struct {
	it  groupIter
	tag VirtualTime // group tag (group_order=fair)
	id  JobID       // its next job
}

// charge advances the lane's tag by a job of cost ms, at the weight of
// its usage, and the usage by the cost (with decay).
func (pl *placeLane) charge(s *Scheduler, cost int64) error {
	step, err := tagStep(cost, s.weight(pl.t, pl.usage))
	if err != nil {
		return err
	}
	if pl.tag, err = addVT(pl.tag, step); err != nil {
		return err
	}
	if s.cfg.Decay != nil {
		pl.usage += cost
	}
	return nil
}

func groupBefore(fair bool) func(a, b *placeGroup) bool {
	if fair {
		return func(a, b *placeGroup) bool { return a.tag < b.tag || (a.tag == b.tag && a.id < b.id) }
	}
	return func(a, b *placeGroup) bool { return a.id < b.id }
}

// open fills the lane's groups: the queues of class c and size sz of its
// groups that no group-level limit blocks.
func (pl *placeLane) open(s *Scheduler, c Class, sz Size) {
	before := groupBefore(pl.fair)
	for _, gs := range s.rt[pl.lane].groups {
		q := s.queue(gs, c, sz)
		if q == nil || s.groupBlocked(pl.t, s.groups.Get(uint64(gs))) {
			continue
		}
		g := placeGroup{it: newGroupIter(s, q), tag: s.groups.Get(uint64(gs)).tags[c]}
		if tag, ok := pl.gtags[gs]; ok {
			g.tag = tag
		}
		if id, ok := g.it.peek(); ok {
			g.id = id
			pl.groups = append(pl.groups, g)
			heapUp(pl.groups, before)
		}
	}
	pl.done = len(pl.groups) == 0
}

// next returns the lane's next job and its cost.
func (pl *placeLane) next() (JobID, int64) {
	g := &pl.groups[0]
	return g.id, g.it.cost
}

// advance takes the lane's next job: its group moves on (its tag by the
// job's cost at weight 1 under group_order=fair).
func (pl *placeLane) advance() {
	before := groupBefore(pl.fair)
	g := pl.groups[0]
	if pl.fair {
		if step, err := tagStep(g.it.cost, WeightOne); err == nil {
			g.tag += step
		}
	}
	g.it.next()
	pl.groups = heapPop(pl.groups, before)
	if id, ok := g.it.peek(); ok {
		g.id = id
		pl.groups = append(pl.groups, g)
		heapUp(pl.groups, before)
	}
	pl.done = len(pl.groups) == 0
}

// fair walks the fair order of job j's class and size among the lanes with
// an eligible candidate there, counting the jobs dispatched before j.
func (pc *placeCount) fair(j *Job) {
	s, p := pc.s, pc.p
	c, sz := j.Class, j.Size
	var lanes []*placeLane
	pc.lanes(&p.heapA[c][sz], &p.heapB[c][sz], func(l uint32) {
		pl := pc.lane(l)
		pl.open(s, c, sz)
		if !pl.done {
			lanes = append(lanes, pl)
		}
	})
	dispatchClamp := s.cfg.Clamp == ClampDispatch
	vnow := p.vnow[c]
	// a holds lanes by (tag, tier, next ID); under the dispatch clamp b
	// holds those whose tag is at or below virtual_now, which all start
	// there, by (tier, next ID): the core's two heaps.
	byTier := func(x, y *placeLane) bool {
		if x.tier != y.tier {
			return x.tier > y.tier
		}
		ix, _ := x.next()
		iy, _ := y.next()
		return ix < iy
	}
	aBefore := func(x, y **placeLane) bool {
		if (*x).tag != (*y).tag {
			return (*x).tag < (*y).tag
		}
		return byTier(*x, *y)
	}
	bBefore := func(x, y **placeLane) bool { return byTier(*x, *y) }
	var a, b []*placeLane
	for _, pl := range lanes {
		if dispatchClamp && pl.tag <= vnow {
			b = append(b, pl)
			heapUp(b, bBefore)
		} else {
			a = append(a, pl)
			heapUp(a, aBefore)
		}
	}
	for !pc.full() {
		for dispatchClamp && len(a) > 0 && a[0].tag <= vnow {
			pl := a[0]
			a = heapPop(a, aBefore)
			b = append(b, pl)
			heapUp(b, bBefore)
		}
		var pl *placeLane
		st := vnow // the start of a lane of b
		switch {
		case len(b) > 0:
			pl = b[0]
			b = heapPop(b, bBefore)
		case len(a) > 0:
			pl = a[0]
			a = heapPop(a, aBefore)
			st = pl.tag
		default:
			// j's own lane ran out of jobs before j: it is not in its
			// queue (a defect the caller's Verify would name).
			pc.err = fmt.Errorf("%w: queued job %d is not in its queue", ErrVerify, j.ID)
			return
		}
		id, cost := pl.next()
		if id == j.ID {
			pc.start = st
			return
		}
		pc.n++ // its usage grows in charge
		pc.cost += cost
		if pl.lane == j.Tenant {
			pc.own++
			pc.ownCost += cost
		}
		pl.tag = st
		if err := pl.charge(s, cost); err != nil {
			pc.err = err
			return
		}
		vnow = max(vnow, st)
		pl.advance()
		if !pl.done {
			a = append(a, pl)
			heapUp(a, aBefore)
		}
	}
}

// decayOn is 1 under usage decay, else 0.
func decayOn(s *Scheduler) int64 {
	if s.cfg.Decay != nil {
		return 1
	}
	return 0
}
