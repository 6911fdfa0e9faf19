package sfq

// Submit and the queueing it does: the idle rules, enqueue and unqueue.

import "fmt"

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
