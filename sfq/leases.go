package sfq

// Leases and deadlines of live jobs (grants, due expiries, tidying) and the
// pruning of ended jobs.

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
