package sfq

import (
	"fmt"

	"github.com/baristahq/barista/internal/text"
)

// Dead letters and redrive (SPEC §3 "Dead letters and redrive"; feature
// level 5).
//
// A job that ended failed, timed_out, expired or cancelled is a dead
// letter: it stays in the job table, listed by its state, until the
// dead-letter retention prunes it, and each tenant's dead letters are
// bounded in count and payload bytes (the oldest go first). Completed jobs
// keep the job retention. The dead letters are ordered twice, both derived
// from the job table: all of them by (ended_at, id) for the retention, and
// each tenant's by (ended_at, id) for its bounds. A job that leaves the
// dead letters (redriven, purged, pruned by the other order) leaves its
// entries behind; they are skipped when they reach the front (live checks
// the job still ended then).

// deadLetters is one tenant's share of the dead letters.
type deadLetters struct {
	jobs  uint64 // its dead letters in the job table
	bytes uint64 // their payload bytes
	order endedQueue
}

// deadOf returns tenant ti's dead letters, growing the table.
func (s *Scheduler) deadOf(ti uint32) *deadLetters {
	for uint32(len(s.dead)) <= ti {
		s.dead = append(s.dead, deadLetters{})
	}
	return &s.dead[ti]
}

// noteEnded files a job that has just ended (or, on restore, is ended) in
// the pruning orders.
func (s *Scheduler) noteEnded(j *Job) {
	if !j.State.DeadLetter() {
		s.ended.push(j.EndedAt, j.ID)
		return
	}
	s.deadAll.push(j.EndedAt, j.ID)
	d := s.deadOf(s.owner(j.Tenant)) // a tenant's dead letters of every pool
	d.jobs++
	d.bytes += uint64(len(j.Payload()))
	d.order.push(j.EndedAt, j.ID)
}

// forgetDead takes dead letter j out of its tenant's counts (it is
// redriven or deleted); its order entries go stale.
func (s *Scheduler) forgetDead(j *Job) {
	d := s.deadOf(s.owner(j.Tenant))
	d.jobs--
	d.bytes -= uint64(len(j.Payload()))
}

// live reports whether an order entry still names an ended job as it
// ended then.
func (s *Scheduler) live(e endedEntry) (*Job, bool) {
	j := s.jobs.Get(uint64(e.id))
	if j == nil || !j.State.Terminal() || j.EndedAt != e.at {
		return nil, false
	}
	return j, true
}

// deleteEnded removes a terminal job from the table.
func (s *Scheduler) deleteEnded(j *Job) {
	if j.Group() != "" {
		s.grouped--
	}
	if j.timed {
		s.dl.timed--
	}
	if j.State.DeadLetter() {
		s.forgetDead(j)
	}
	s.jobs.Del(uint64(j.ID))
}

// PruneEnded removes up to limit terminal jobs: completed ones that ended
// before cutoff, dead letters that ended before deadCutoff, together in
// (ended_at, id) order. With both cutoffs equal it is Prune.
func (s *Scheduler) PruneEnded(cutoff, deadCutoff Time, limit int) int {
	n := 0
	for n < limit {
		a, aok := s.ended.front()
		aok = aok && a.at < cutoff
		b, bok := s.deadAll.front()
		bok = bok && b.at < deadCutoff
		var e endedEntry
		switch {
		case aok && (!bok || a.at < b.at || (a.at == b.at && a.id < b.id)):
			e = a
			s.ended.pop()
		case bok:
			e = b
			s.deadAll.pop()
		default:
			return n
		}
		if j, ok := s.live(e); ok {
			s.deleteEnded(j)
			n++
		}
	}
	return n
}

// PruneDeadBounds removes, tenant by tenant in index order, the oldest
// dead letters of every tenant over maxJobs dead letters or maxBytes of
// their payloads (0: no bound), up to limit jobs in all.
func (s *Scheduler) PruneDeadBounds(maxJobs, maxBytes uint64, limit int) int {
	n := 0
	for ti := range s.dead {
		d := &s.dead[ti]
		for n < limit && over(d, maxJobs, maxBytes) {
			e, ok := d.order.front()
			if !ok {
				break
			}
			d.order.pop()
			if j, ok := s.live(e); ok && j.State.DeadLetter() && s.owner(j.Tenant) == uint32(ti) {
				s.deleteEnded(j)
				n++
			}
		}
	}
	return n
}

func over(d *deadLetters, maxJobs, maxBytes uint64) bool {
	return (maxJobs > 0 && d.jobs > maxJobs) || (maxBytes > 0 && d.bytes > maxBytes)
}

// OldestDead returns when the longest-ended dead letter still in the
// table ended (its entry may be stale; a prune then drops it).
func (s *Scheduler) OldestDead() (Time, bool) {
	e, ok := s.deadAll.front()
	return e.at, ok
}

// OldestCompleted returns when the longest-ended completed job ended.
func (s *Scheduler) OldestCompleted() (Time, bool) {
	e, ok := s.ended.front()
	return e.at, ok
}

// DeadOverBounds reports whether some tenant holds more dead letters, or
// more of their payload bytes, than the bounds (0: no bound).
func (s *Scheduler) DeadOverBounds(maxJobs, maxBytes uint64) bool {
	for i := range s.dead {
		if over(&s.dead[i], maxJobs, maxBytes) {
			return true
		}
	}
	return false
}

// DeadLetterCount returns tenant ti's dead letters and their payload
// bytes.
func (s *Scheduler) DeadLetterCount(ti uint32) (jobs, bytes uint64) {
	if int(ti) >= len(s.rt) {
		return 0, 0
	}
	if o := s.owner(ti); int(o) < len(s.dead) { // of every pool
		return s.dead[o].jobs, s.dead[o].bytes
	}
	return 0, 0
}

// Purge deletes a terminal job (any terminal state, completed included).
func (s *Scheduler) Purge(id JobID) error {
	j := s.jobs.Get(uint64(id))
	if j == nil {
		return fmt.Errorf("%w: %d", ErrUnknownJob, id)
	}
	if !j.State.Terminal() {
		return preconditionf("", "", "job %d is %s, not ended", id, j.State)
	}
	s.deleteEnded(j)
	return nil
}

// Redrive moves dead letter id back to its queue at its ID's place: its
// failures are forgotten, its attempt keeps counting, maxAttempts (0: keep)
// replaces its max_attempts, and its delay, expiry and deadline count
// again from now: a job submitted with a delay is scheduled until that
// delay has passed again, then released like any delayed job. It checks
// the tenant's class ceiling and deadline permission (ErrPermission) and,
// if its group must be created again, max_groups (ErrExhausted); the
// quota is the caller's. Back in its queue it counts as a submit for the
// idle rule and the activation clamp.
func (s *Scheduler) Redrive(now Time, id JobID, maxAttempts uint32) (Change, error) {
	j := s.jobs.Get(uint64(id))
	if j == nil {
		return Change{}, fmt.Errorf("%w: %d", ErrUnknownJob, id)
	}
	if maxAttempts > MaxMaxAttempts {
		return Change{}, invalidf("", "max_attempts %d (want 1..%d)", maxAttempts, MaxMaxAttempts)
	}
	delay := j.times().delay
	e := Input{Kind: InRedrive, Now: now, MaxAttempts: uint16(maxAttempts), Due: now + delay}
	if delay == 0 {
		e.Due = 0
	}
	life, out := Step(j.Life, e)
	ch := Change{Job: id, Tenant: j.Tenant, Attempt: j.Attempt, Outcome: out, From: j.State, To: life.State}
	if out != Changed {
		return ch, preconditionf("", "", "job %d is %s, not failed, timed_out, expired or cancelled", id, j.State)
	}
	ti := j.Tenant
	t := s.tenants.Get(uint64(ti))
	if t.Deleted {
		return ch, Refusef(CodeNotFound, text.ReasonTenantUnknown, "", "job %d belongs to a deleted tenant", id)
	}
	if p := s.pools[t.pool]; p.deleted {
		return ch, Refusef(CodeNotFound, text.ReasonPoolUnknown, "", "job %d is of pool %s, which was deleted", id, p.Name)
	}
	if err := t.Permit(j.Class, j.deadline()); err != nil {
		return ch, err
	}
	gs, exists := s.groupSlot(ti, j.Group())
	if own := s.tenants.Get(uint64(s.owner(ti))); !exists && j.Group() != "" && !s.groupAnywhere(ti, j.Group()) && own.Groups >= own.GroupLimit() {
		return ch, exhaustedf(text.ReasonMaxGroups, "", "tenant %s has %d groups, its max_groups; job %d of group %q would exceed it", t.Name, own.Groups, id, j.Group())
	}
	for _, u := range j.Uses() {
		if _, _, ok := s.resourceOf(u.Resource); !ok {
			return ch, UnknownResource(u.Resource)
		}
	}
	// Eligibility at the redrive's time first, as for every command that
	// takes effect (a refused one, above, changes nothing).
	s.advance(now)
	j, t = s.jobs.Get(uint64(id)), s.tenants.Get(uint64(ti))
	c := j.Class
	rt := &s.rt[ti]
	fair := t.GroupOrder == GroupFair
	scheduled := life.State == Scheduled // its delay runs again: in no queue yet
	var was [NumClasses]bool
	if fair && exists && !scheduled {
		was = s.groupEligibility(ti, gs)
	}
	// The idle rules, as for a submit.
	if !j.deadline() && !scheduled {
		s.idleRule(s.pool(ti), c)
	}
	if fair && !j.deadline() && !scheduled && rt.queuedFair[c] == 0 {
		s.groupIdle(ti, c)
	}
	s.forgetDead(j)
	if key := j.usesPrefix(); key != "" {
		if _, err := s.internUses(key); err != nil {
			return ch, err // its resources were checked above
		}
	}
	rt.payload += uint64(len(j.Payload()))
	s.payloadAll += uint64(len(j.Payload()))
	jm := s.jobs.Mut(uint64(id))
	jm.Life = life
	jm.Result = jm.Result.redriven()
	jm.EndedAt, jm.endWall = 0, 0
	s.redriveTimes(jm, now)
	if !exists {
		gs = s.newGroup(ti, jm.Group(), GroupSettings{})
		s.joinHeaps(ti, gs)
	}
	tm := s.tenants.Mut(uint64(ti))
	gm := s.groups.Mut(uint64(gs))
	if scheduled {
		tm.Scheduled++
		if jm.Attempt > 0 {
			tm.ScheduledAgain++
		}
		gm.Scheduled++
		s.dl.due.push(jm.DueAt(), id)
		s.tidyDelays()
		return ch, nil
	}
	tm.Queued[jm.Size]++
	s.queued++
	gm.Queued++
	s.enqueue(ti, gs, c, jm.Size, s.routeOf(jm), s.usesOf(jm), id, jm.deadline(), jm.DeadlineAt(), (*jobQueue).pushAt)
	s.setBlocked(ti, gs, s.groupBlocked(tm, gm))
	s.place(ti, &placeOpts{clamp: true, touched: gs + 1, was: was}, allSlots)
	return ch, nil
}

// redriveTimes counts a redriven job's delay, expiry and deadline again
// from now: each moves as far after the redrive as it was after the
// submit (or the redrive before). A job with a delay is due that long
// after now. A job lapses only while never dispatched: one that was (its
// attempt is above 0) keeps the new expire_at for display but does not
// lapse; one that never was (cancelled or expired while queued) may lapse
// again.
func (s *Scheduler) redriveTimes(j *Job, now Time) {
	t := j.times()
	if !j.timed && !j.deadline() {
		return // nothing counts from its submit
	}
	from := j.countsFrom()
	if !j.timed {
		s.dl.timed++ // it keeps when its deadline counts from
	}
	if j.deadline() {
		j.setText(now+(j.DeadlineAt()-from), j.Group(), j.Key(), j.Type(), j.Payload())
	}
	t.due = 0
	if t.delay != 0 {
		t.due = now + t.delay
	}
	if t.expire != 0 {
		t.expire = now + (t.expire - from)
	}
	t.base = now
	j.Lapsed = false
	j.setTimes(t)
	if expirable(j) {
		s.dl.expiring.push(t.expire, j.ID)
	}
}

// verifyDeadLetters recomputes every tenant's dead-letter counts from the
// job table, and checks that each order holds an entry for every dead
// letter (and every completed job).
func (s *Scheduler) verifyDeadLetters(report func(string, ...any)) {
	type count struct{ jobs, bytes uint64 }
	derived := map[uint32]count{}
	inAll := map[JobID]bool{}
	for _, e := range s.deadAll.items {
		inAll[e.id] = true
	}
	for _, e := range s.ended.items {
		inAll[e.id] = true
	}
	s.jobs.View().Each(func(_ uint64, j *Job) bool {
		if j.State.DeadLetter() {
			o := s.owner(j.Tenant)
			c := derived[o]
			c.jobs++
			c.bytes += uint64(len(j.Payload()))
			derived[o] = c
		}
		if j.State.Terminal() && !inAll[j.ID] {
			report("ended job %d (%s) is in no pruning order", j.ID, j.State)
		}
		return true
	})
	for ti := range s.dead {
		d := &s.dead[ti]
		if c := derived[uint32(ti)]; c.jobs != d.jobs || c.bytes != d.bytes {
			report("tenant %d dead letters %d (%d bytes), job table says %d (%d bytes)", ti, d.jobs, d.bytes, c.jobs, c.bytes)
		}
		delete(derived, uint32(ti))
	}
	if len(derived) > 0 {
		report("%d tenants have dead letters the counts miss", len(derived))
	}
}
