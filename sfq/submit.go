package sfq

// Submit and the queueing it does: the idle rules, enqueue and unqueue.

import (
	"slices"

	"github.com/baristahq/barista/internal/text"
)

// SubmitPlan is what AdmitSubmit found of a submit it admits: what
// SubmitAdmitted needs to queue the job without looking again.
type SubmitPlan struct {
	lane       uint32 // the tenant's record in the job's pool, if hasLane
	owner      uint32 // the tenant's own index
	pool       PoolID
	hasLane    bool
	group      uint32 // the group's slot in the lane, if exists
	exists     bool
	est        int64
	src        EstSource
	deadlineAt Time
	known      bool // the tenant existed (a plan for a tenant to be made is not one SubmitAdmitted takes)
}

// EstCostMs is the cost estimate the job gets, and where it comes from.
func (p *SubmitPlan) EstCostMs() (int64, EstSource) { return p.est, p.src }

// noTenant stands for a tenant AdmitSubmit is asked about before it is
// made: no state is kept under it.
const noTenant = ^uint32(0)

// AdmitSubmit is Submit's verdict on sub without the change: every rule
// of the core a submit must pass, in this order — its fields, its
// tenant, its pool and the pool's subscription rule, the tenant's
// max_class and allow_deadlines, max_groups, and the cost estimate —
// over the state as it stands. It changes nothing. A refusal is a
// *Refusal (RefusalOf).
//
// spec stands for the tenant when it does not exist yet (nil: it must
// exist): the settings a tenant made for this submit would have (the
// state machine's implicit tenants), so that the verdict is the one the
// submit gets once the tenant is made — and a submit refused by it makes
// nothing.
func (s *Scheduler) AdmitSubmit(now Time, sub *Submission, spec *TenantSpec) (SubmitPlan, error) {
	var p SubmitPlan
	if err := sub.Validate(); err != nil {
		return p, err
	}
	pid, ok := s.PoolID(sub.Pool)
	if !ok {
		return p, UnknownPool(sub.Pool)
	}
	o, known := s.TenantIndex(sub.Tenant)
	var t *Tenant
	switch {
	case known:
		t = s.tenants.Get(uint64(o))
	case spec != nil:
		t, o = &Tenant{TenantSpec: *spec}, noTenant
		t.Name = sub.Tenant
	default:
		return p, UnknownTenant(sub.Tenant)
	}
	subscribed := false
	if known {
		_, subscribed = s.subscription(o, pid)
	}
	if s.pools[pid].Required && !subscribed {
		return p, preconditionf(text.ReasonSubscriptionRequired, "", "tenant %s has no subscription in pool %s, which requires one", sub.Tenant, s.pools[pid].Name)
	}
	deadline := sub.DeadlineMs != 0
	if err := t.Permit(sub.Class, deadline); err != nil {
		return p, err
	}
	p = SubmitPlan{owner: o, pool: pid, known: known}
	if known {
		p.lane, p.hasLane = s.laneOf(o, pid, false)
		p.group, p.exists = s.groupSlot(p.lane, sub.Group)
		p.exists = p.exists && p.hasLane
	}
	if !p.exists && sub.Group != "" && !(known && s.groupAnywhere(o, sub.Group)) {
		if err := groupRoom(t, "a job of a new group", sub.Group); err != nil {
			return p, err
		}
	}
	if err := s.checkUses(sub.Uses); err != nil {
		return p, err
	}
	var err error
	if p.est, p.src, err = s.estimate(o, sub); err != nil {
		return p, err
	}
	if deadline {
		p.deadlineAt = now + Time(sub.DeadlineMs)
		if p.deadlineAt <= 0 {
			return p, invalidf("", "deadline at %d ms of cluster time", p.deadlineAt)
		}
	}
	return p, nil
}

// Submit queues a new job and returns its ID: AdmitSubmit's checks, then
// SubmitAdmitted. The core does not dedupe idempotency keys; the state
// machine above it does.
func (s *Scheduler) Submit(now Time, sub Submission) (JobID, error) {
	p, err := s.AdmitSubmit(now, &sub, nil)
	if err != nil {
		return 0, err
	}
	return s.SubmitAdmitted(now, sub, p)
}

// SubmitAdmitted queues a job that AdmitSubmit admitted, with its plan,
// on the state AdmitSubmit read (nothing may change in between). It
// checks nothing again.
func (s *Scheduler) SubmitAdmitted(now Time, sub Submission, p SubmitPlan) (JobID, error) {
	if !p.known {
		return 0, UnknownTenant(sub.Tenant)
	}
	ti, hasLane, gs, exists, pid := p.lane, p.hasLane, p.group, p.exists, p.pool
	est, src, deadlineAt, deadline := p.est, p.src, p.deadlineAt, sub.DeadlineMs != 0
	s.advance(now)
	if !hasLane {
		ti, _ = s.laneOf(p.owner, pid, true) // its first job in the pool
	}
	t := s.tenants.Get(uint64(ti))
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
	job.setRouteClass(uint8(sub.Form))
	s.submitTimes(&job, now, &sub)
	var u UsesID
	if len(sub.Uses) > 0 {
		// AdmitSubmit found every resource: interning cannot fail.
		key := usesKey(SortUses(slices.Clone(sub.Uses)))
		var err error
		if u, err = s.internUses(key); err != nil {
			return 0, err
		}
		job.setUses(key)
	}
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
	s.payloadAll += uint64(len(sub.Payload))
	if delayed {
		tm.Scheduled++
		s.groups.Mut(uint64(gs)).Scheduled++
		s.tidyDelays()
		return id, nil
	}
	tm.Queued[sub.Size]++
	s.queued++
	s.groups.Mut(uint64(gs)).Queued++
	s.enqueue(ti, gs, c, sub.Size, s.routeOf(&job), u, id, deadline, deadlineAt, (*jobQueue).pushBack)
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
func (s *Scheduler) unqueue(q *groupQueue, j *Job) {
	r, u := s.routeOf(j), s.usesOf(j)
	part := q.of(r, u)
	if part == nil {
		return
	}
	s.countRoute(j.Tenant, j.Class, j.Size, r, u, j.deadline(), -1)
	if u != 0 {
		s.unreserve(j.ID) // a reservation ends when its job leaves the queue
	}
	if j.deadline() {
		if part.dls != nil {
			part.dls.remove(dlEntry{at: j.DeadlineAt(), id: j.ID})
		}
		return
	}
	part.fifo.remove(j.ID)
}

// enqueue puts queued job id (of tenant ti, group gs, class c, size) in
// its queue, a deadline job by its deadline at, any other into the fifo
// by push, and refreshes the queue's slot.
func (s *Scheduler) enqueue(ti, gs uint32, c Class, size Size, r Route, u UsesID, id JobID, deadline bool, at Time, push func(*jobQueue, JobID)) {
	rt := &s.rt[ti]
	q := s.queueMut(gs, c, size)
	part := q.ofMut(r, u)
	s.countRoute(ti, c, size, r, u, deadline, 1)
	if deadline {
		part.deadlines().push(dlEntry{at: at, id: id})
	} else {
		s.pools[rt.pool].queuedFair[c]++
		rt.queuedFair[c]++
		push(&part.fifo, id)
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
