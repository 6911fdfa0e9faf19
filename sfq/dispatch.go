package sfq

// Dispatch: candidates, the fair and deadline picks, eligibility, and
// the heads of tenants' queues.

import "fmt"

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
	// group is the candidate's group and dlAt its deadline, when the
	// candidate is a worker's own (pickFor; set says so); a candidate of
	// the heaps names them in its lane's slot.
	set   bool
	group uint32
	dlAt  Time
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
	if unfairPick {
		if w := s.worstFair(p, c, ws); w.ok {
			return w
		}
	}
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
	if s.pickObserver != nil {
		s.observePick(p, ws, nil)
	}
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
	if s.resourcesBindIn(pid) && ws < NumSizes {
		s.newPick()
		deadline = s.deadlineFor(p, c, ws, &runsAllValue).ok
		for sz := Size(0); sz <= ws && !fair; sz++ {
			fair = s.fairFor(p, c, sz, &runsAllValue).ok
		}
		return fair, deadline
	}
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
	if s.resourcesBindIn(pid) {
		return s.resourcePick(s.pools[pid], ws).ok
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
		return Assignment{}, false, invalidf("", "worker size %d", ws)
	}
	if worker == "" {
		return Assignment{}, false, invalidf("", "empty worker id")
	}
	if int(pid) >= len(s.pools) || s.pools[pid].deleted {
		return Assignment{}, false, fmt.Errorf("%w: pool %d", ErrUnknownPool, pid)
	}
	p := s.pools[pid]
	if s.pausedAll || p.paused {
		return Assignment{}, false, nil // maintenance: a gate, nothing else
	}
	s.advance(now) // a job whose expire_at has passed is never dispatched
	s.reserveResources(now)
	if s.resourcesBindIn(pid) {
		// Its queues hold jobs that a resource may hold back: the pick
		// that sees them, for a worker that runs every job.
		if s.pickObserver != nil {
			s.observePick(p, ws, nil)
		}
		return s.dispatchCandidate(now, p, s.pickFor(p, ws, &runsAllValue), worker)
	}
	p.plain = true
	return s.dispatchCandidate(now, p, s.pick(p, ws), worker)
}

// DispatchFor gives a free worker of size ws of pool pid that runs the
// jobs w says (nil: every job) the next job of that pool it runs, or
// reports that nothing it runs is eligible (SPEC §3 "Kinds"). It
// allocates nothing.
func (s *Scheduler) DispatchFor(now Time, pid PoolID, ws Size, worker string, w *Runs) (Assignment, bool, error) {
	if w.All() {
		return s.DispatchPool(now, pid, ws, worker)
	}
	if ws >= NumSizes {
		return Assignment{}, false, invalidf("", "worker size %d", ws)
	}
	if worker == "" {
		return Assignment{}, false, invalidf("", "empty worker id")
	}
	if int(pid) >= len(s.pools) || s.pools[pid].deleted {
		return Assignment{}, false, fmt.Errorf("%w: pool %d", ErrUnknownPool, pid)
	}
	p := s.pools[pid]
	if s.pausedAll || p.paused {
		return Assignment{}, false, nil
	}
	s.advance(now)
	s.reserveResources(now)
	if s.pickObserver != nil {
		s.observePick(p, ws, w)
	}
	return s.dispatchCandidate(now, p, s.pickFor(p, ws, w), worker)
}

// HasJobFor reports whether a worker of size ws of pool pid that runs w
// would get a job now, as DispatchFor would pick it (at the state's own
// time). It changes nothing a reader of the state sees, but it warms the
// queues' head caches: call it only with the state to itself (the FSM's
// write lock), like a Dispatch.
func (s *Scheduler) HasJobFor(pid PoolID, ws Size, w *Runs) bool {
	if ws >= NumSizes || int(pid) >= len(s.pools) || s.pools[pid].deleted || s.pausedAll || s.pools[pid].paused {
		return false
	}
	if w.All() {
		return s.PoolEligible(pid, ws)
	}
	return s.pickFor(s.pools[pid], ws, w).ok
}

// resourcePick is the pick of a worker of size ws that runs every job
// in pool p, whose queues hold jobs that use resources.
func (s *Scheduler) resourcePick(p *poolCore, ws Size) candidate {
	return s.pickFor(p, ws, &runsAllValue)
}

// dispatchCandidate dispatches candidate c (none: nothing is eligible) to
// worker.
func (s *Scheduler) dispatchCandidate(now Time, p *poolCore, c candidate, worker string) (Assignment, bool, error) {
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
	gs := c.group
	if !c.set {
		sl := rt.slot(c.class, c.size)
		ref := sl.fifo
		if c.deadline {
			ref = sl.dlc
		}
		if ref.id != c.seq {
			return Assignment{}, false, fmt.Errorf("%w: the heaps hold job %d, its tenant's candidate is job %d", ErrVerify, c.seq, ref.id)
		}
		gs = ref.group
	}
	q := s.queue(gs, c.class, c.size)
	if q == nil {
		return Assignment{}, false, fmt.Errorf("%w: job %d's group %d has no queue of %s %s", ErrVerify, c.seq, gs, c.class, c.size)
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
		return Assignment{}, false, preconditionf("", "", "job %d at the head of its queue is %s", j.ID, j.State)
	}

	r, u := s.routeOf(j), s.usesOf(j)
	part := q.of(r, u)
	s.countRoute(c.tenant, c.class, c.size, r, u, c.deadline, -1)
	if c.deadline {
		part.dls.popFront()
	} else {
		part.fifo.popFront()
	}
	jm := s.jobs.Mut(uint64(c.seq))
	jm.Life = life
	jm.StartTag = c.tag
	jm.Weight = w
	jm.CPUMs = 0
	jm.Result = jm.Result.carried()
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
	if u != 0 {
		// Its units are held until its run ends; a reservation it held
		// ends.
		s.hold(s.owner(c.tenant), u, 1, now)
		s.unreserve(jm.ID)
	}
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
