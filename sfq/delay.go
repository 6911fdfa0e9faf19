package sfq

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
)

// Delays, expiry and retry backoff (SPEC §3 "Delays, expiry, pause and rate
// limits"; feature level 5).
//
// A job submitted with a delay is scheduled: in no queue, its due time in
// s.dl.due, until a Release (refused before the due time) puts it in its
// queue at its job ID's place. A failed run with a retry backoff goes the
// same way. A job never dispatched whose expire_at has passed lapses: the
// first input at or after its expire_at that takes effect (lapse, called
// once an input is accepted and before its own effect; a refused input
// changes nothing) takes it out of its queue for good, so it is never dispatched, and
// the reaper's Expire{ttl} ends it expired. The lapsed mark is part of the
// state, so which jobs are in their queues never depends on when a state
// was restored. The due times, expiries and lapsed jobs are kept in
// (time, job ID) heaps whose stale entries are dropped when they reach the
// top: every operation is O(log n).

// Limits on the delay fields of a submit and on the retry backoff.
const (
	MaxDelayMs        = 365 * 24 * 3600 * 1000
	MinExpireMs       = 1000
	MaxExpireMs       = 365 * 24 * 3600 * 1000
	MaxRetryBackoffMs = 24 * 3600 * 1000
	// DefaultRetryBackoffMs and DefaultRetryBackoffMaxMs are the retry
	// backoff of a new cluster at feature level 5 (below it the backoff is
	// 0: a failed run is requeued at once, as before).
	DefaultRetryBackoffMs    = 5_000
	DefaultRetryBackoffMaxMs = 600_000
)

// delayState is the scheduler's derived index of delays and expiries,
// rebuilt from the job table on restore.
type delayState struct {
	due      endedQueue // scheduled jobs by (due time, ID)
	expiring endedQueue // jobs that may still expire, not lapsed, by (expire_at, ID)
	lapsed   endedQueue // lapsed jobs not yet ended, by (expire_at, ID)
	timed    uint64     // jobs of the table with delay fields
}

// validateDelays checks a submission's delay fields.
func (s *Submission) validateDelays() error {
	if s.DelayMs < 0 || s.DelayMs > MaxDelayMs {
		return invalidf("delay_ms", "%d is out of range (0 = none, else 1 ms .. 1 year)", s.DelayMs)
	}
	if s.ExpireMs != 0 && (s.ExpireMs < MinExpireMs || s.ExpireMs > MaxExpireMs) {
		return invalidf("expire_ms", "%d is out of range (0 = none, else 1 s .. 1 year after the submit)", s.ExpireMs)
	}
	if s.ExpireMs != 0 && s.ExpireMs <= s.DelayMs {
		return invalidf("expire_ms", "%d is not after delay_ms %d (the job would expire before it is due)", s.ExpireMs, s.DelayMs)
	}
	if s.DeadlineMs != 0 && s.DeadlineMs <= s.DelayMs {
		return invalidf("deadline_ms", "%d is not after delay_ms %d", s.DeadlineMs, s.DelayMs)
	}
	if s.RetryBackoffMs < 0 || s.RetryBackoffMs > MaxRetryBackoffMs || (s.RetryBackoffMs != 0 && !s.RetryBackoffSet) {
		return invalidf("retry_backoff_ms", "%d is out of range (0 .. 24 h)", s.RetryBackoffMs)
	}
	if s.RetryBackoffMaxMs < 0 || s.RetryBackoffMaxMs > MaxRetryBackoffMs {
		return invalidf("retry_backoff_max_ms", "%d is out of range (0 .. 24 h)", s.RetryBackoffMaxMs)
	}
	return nil
}

// timed reports whether a submission carries delay fields.
func (s *Submission) timed() bool {
	return s.DelayMs != 0 || s.ExpireMs != 0 || s.RetryBackoffSet || s.RetryBackoffMaxMs != 0
}

// validateBackoff checks the configuration's retry backoff.
func (c *Config) validateBackoff() error {
	if c.RetryBackoffMs < 0 || c.RetryBackoffMs > MaxRetryBackoffMs {
		return invalidf("", "retry_backoff %d ms out of range (0 .. 24 h)", c.RetryBackoffMs)
	}
	if c.RetryBackoffMaxMs < 0 || c.RetryBackoffMaxMs > MaxRetryBackoffMs {
		return invalidf("", "retry_backoff_max %d ms out of range (0 .. 24 h)", c.RetryBackoffMaxMs)
	}
	if c.RetryBackoffMaxMs != 0 && c.RetryBackoffMaxMs < c.RetryBackoffMs {
		return invalidf("", "retry_backoff_max %d ms is below retry_backoff %d ms", c.RetryBackoffMaxMs, c.RetryBackoffMs)
	}
	return nil
}

// Backoff returns the time a job's retry waits after its failures-th
// failure: retry_backoff (the job's own, else the configuration's) ×
// 2^(failures−1), at most retry_backoff_max (or retry_backoff when the
// maximum is below it); 0 = requeue at once.
func (c *Config) Backoff(own int64, set bool, ownMax int64, failures uint16) int64 {
	base := c.RetryBackoffMs
	if set {
		base = own
	}
	if base <= 0 || failures == 0 {
		return 0
	}
	limit := max(c.RetryBackoffMaxMs, base)
	if ownMax != 0 {
		limit = max(ownMax, base)
	}
	k := failures - 1
	if k > 30 {
		return limit // base × 2^31 ms is beyond any limit (at most 24 h)
	}
	return min(base<<k, limit)
}

// jobTimes are a timed job's delay fields: its due time (while scheduled;
// 0 = none), expire_at (0 = none) and its own retry backoff (-1 = the
// configuration's); base, when its delay, expiry and deadline count from
// (its last redrive; 0 = its submit), and delay, the delay it was
// submitted with (0 = none), which a redrive counts again.
//
// In the job's text they are uvarints: due, expire, then backoff+1 shifted
// left by one with the low bit set when base and delay follow. They
// follow only when they cannot be derived: base is 0 and delay is due −
// submitted_at (0 with no due) until a redrive or a retry's backoff
// changes that, so most jobs carry three uvarints, and encode (and hash)
// as before these two fields existed.
//
// backoffMax, when not 0, replaces the configuration's retry_backoff_max
// for the job (a kind's retry policy, feature level 8): a sixth uvarint,
// after base and delay, which the job's flags say follows
// (jobBackoffMax).
type jobTimes struct {
	due, expire Time
	backoff     int64
	base, delay Time
	backoffMax  int64
}

// derivedDelay is the delay a job's fields imply without the extra
// fields: its due time counted from its submit.
func derivedDelay(due, submitted Time) Time {
	if due == 0 {
		return 0
	}
	return due - submitted
}

// extra reports whether t needs its base and delay written out for a job
// submitted at submitted.
func (t *jobTimes) extra(submitted Time) bool {
	return t.base != 0 || t.delay != derivedDelay(t.due, submitted)
}

// timesWidth returns the width of the delay fields at the start of t
// (withMax: a backoff max follows base and delay).
func timesWidth(t string, withMax bool) int {
	w, n := 0, 3
	for i := 0; i < n; i++ {
		x, k := uvarintPrefix(t[w:])
		if k <= 0 {
			return w
		}
		w += k
		if i == 2 && x&1 != 0 {
			n = 5
			if withMax {
				n = 6
			}
		}
	}
	return w
}

// timesPrefix returns the delay fields of the job's text ("" if none).
func (j *Job) timesPrefix() string {
	if !j.timed {
		return ""
	}
	t := j.afterUses()
	return t[:timesWidth(t, j.bits&jobBackoffMax != 0)]
}

// body returns the job's text after its delay fields.
func (j *Job) body() string {
	t := j.afterUses()
	if !j.timed {
		return t
	}
	return t[timesWidth(t, j.bits&jobBackoffMax != 0):]
}

func (j *Job) times() jobTimes {
	if !j.timed {
		return jobTimes{backoff: -1}
	}
	t := j.afterUses()
	due, w1 := uvarintPrefix(t)
	exp, w2 := uvarintPrefix(t[w1:])
	bo, w3 := uvarintPrefix(t[w1+w2:])
	jt := jobTimes{due: Time(due), expire: Time(exp), backoff: int64(bo>>1) - 1}
	if bo&1 == 0 {
		jt.delay = derivedDelay(jt.due, j.SubmittedAt)
		return jt
	}
	rest := t[w1+w2+w3:]
	base, w4 := uvarintPrefix(rest)
	delay, w5 := uvarintPrefix(rest[w4:])
	jt.base, jt.delay = Time(base), Time(delay)
	if j.bits&jobBackoffMax != 0 {
		bmax, _ := uvarintPrefix(rest[w4+w5:])
		jt.backoffMax = int64(bmax)
	}
	return jt
}

// setTimes stores the job's delay fields before the rest of its text.
func (j *Job) setTimes(t jobTimes) {
	body := j.body()
	b := make([]byte, 0, 5*binary.MaxVarintLen64+len(body))
	b = binary.AppendUvarint(b, uint64(t.due))
	b = binary.AppendUvarint(b, uint64(t.expire))
	bo := uint64(t.backoff+1) << 1
	j.bits &^= jobBackoffMax
	if t.extra(j.SubmittedAt) || t.backoffMax != 0 {
		b = binary.AppendUvarint(b, bo|1)
		b = binary.AppendUvarint(b, uint64(t.base))
		b = binary.AppendUvarint(b, uint64(t.delay))
		if t.backoffMax != 0 {
			b = binary.AppendUvarint(b, uint64(t.backoffMax))
			j.bits |= jobBackoffMax
		}
	} else {
		b = binary.AppendUvarint(b, bo)
	}
	b = append(b, body...)
	j.timed = true
	j.text = j.usesPrefix() + string(b)
}

// countsFrom is when the job's delay, expiry and deadline count from: its
// last redrive, or its submit.
func (j *Job) countsFrom() Time {
	if b := j.times().base; b != 0 {
		return b
	}
	return j.SubmittedAt
}

// DueAt is the cluster time a scheduled job is due (0 = none).
func (j *Job) DueAt() Time {
	if j.State != Scheduled {
		return 0
	}
	return j.times().due
}

// ExpireAt is the cluster time after which the job, if never dispatched,
// is never dispatched (0 = none).
func (j *Job) ExpireAt() Time { return j.times().expire }

// RetryBackoff returns the job's own retry backoff, if it has one.
func (j *Job) RetryBackoff() (ms int64, set bool) {
	bo := j.times().backoff
	return max(bo, 0), bo >= 0
}

// RetryBackoffMax returns the job's own retry backoff max (0: the
// configuration's).
func (j *Job) RetryBackoffMax() int64 { return j.times().backoffMax }

// Timed reports whether the job carries delay fields (a delay, an
// expiry, its own retry backoff, or a backoff it went through).
func (j *Job) Timed() bool { return j.timed }

// expirable reports whether the job may still lapse: never dispatched,
// scheduled or queued, with an expire_at, not lapsed yet.
func expirable(j *Job) bool {
	return (j.State == Queued || j.State == Scheduled) && j.Attempt == 0 && !j.Lapsed && j.timed && j.ExpireAt() != 0
}

// submitTimes fixes a new job's delay fields (before it is stored).
func (s *Scheduler) submitTimes(j *Job, now Time, sub *Submission) {
	if !sub.timed() {
		return
	}
	t := jobTimes{backoff: -1}
	if sub.DelayMs != 0 {
		t.due = now + Time(sub.DelayMs)
		t.delay = Time(sub.DelayMs)
		j.State = Scheduled
		s.dl.due.push(t.due, j.ID)
	}
	if sub.ExpireMs != 0 {
		t.expire = now + Time(sub.ExpireMs)
		s.dl.expiring.push(t.expire, j.ID)
	}
	if sub.RetryBackoffSet {
		t.backoff = sub.RetryBackoffMs
	}
	t.backoffMax = sub.RetryBackoffMaxMs
	j.setTimes(t)
	s.dl.timed++
}

// setDue keeps a job's new due time (a retry backing off).
func (s *Scheduler) setDue(j *Job, due Time) {
	t := j.times()
	t.due = due
	if !j.timed {
		s.dl.timed++
	}
	j.setTimes(t)
}

// lapse takes out of their queues the jobs whose expire_at is <= now
// and that were never dispatched. Every input with a time that takes
// effect calls it before its own effect; a refused one does not.
func (s *Scheduler) lapse(now Time) {
	for {
		e, ok := s.dl.expiring.front()
		if !ok || e.at > now {
			return
		}
		s.dl.expiring.pop()
		j := s.jobs.Get(uint64(e.id))
		if j == nil || !expirable(j) || j.ExpireAt() != e.at {
			continue
		}
		jm := s.jobs.Mut(uint64(e.id))
		jm.Lapsed = true
		s.dl.lapsed.push(e.at, e.id)
		if jm.State != Queued {
			continue
		}
		// Out of its queue: its queue's head, if it was, moves on.
		ti, gs := jm.Tenant, s.jobGroup(jm)
		var was [NumClasses]bool
		if s.tenants.Get(uint64(ti)).GroupOrder == GroupFair {
			was = s.groupEligibility(ti, gs)
		}
		q := s.queueMut(gs, jm.Class, jm.Size)
		s.unqueue(q, jm)
		s.rt[ti].slotMut(jm.Class, jm.Size)
		s.refresh(ti, gs, q)
		s.place(ti, &placeOpts{clamp: true, touched: gs + 1, was: was}, allSlots)
	}
}

// tidyDelays drops entries that no longer apply from the tops of the
// delay heaps, so that their tops are what the leader waits for.
func (s *Scheduler) tidyDelays() {
	s.tidyHeap(&s.dl.due, func(j *Job, at Time) bool { return j.State == Scheduled && !j.Lapsed && j.DueAt() == at })
	s.tidyHeap(&s.dl.expiring, func(j *Job, at Time) bool { return expirable(j) && j.ExpireAt() == at })
	s.tidyHeap(&s.dl.lapsed, func(j *Job, _ Time) bool { return j.Lapsed && (j.State == Queued || j.State == Scheduled) })
}

// tidyHeap pops the entries of q whose job is gone or for which live is
// false, until its top is a live one.
func (s *Scheduler) tidyHeap(q *endedQueue, live func(j *Job, at Time) bool) {
	for {
		e, ok := q.front()
		if !ok {
			return
		}
		if j := s.jobs.Get(uint64(e.id)); j != nil && live(j, e.at) {
			return
		}
		q.pop()
	}
}

// Release moves a scheduled job to its queue at its job ID's place; it is
// refused before the job's due time unless force (an operator's run-now),
// and for a job whose expire_at has passed. Like a submit it applies the
// idle rule and the activation clamp.
func (s *Scheduler) Release(now Time, id JobID, force bool) (Change, error) {
	j := s.jobs.Get(uint64(id))
	if j == nil {
		return Change{}, fmt.Errorf("%w: %d", ErrUnknownJob, id)
	}
	due := j.DueAt()
	e := Input{Kind: InRelease, Now: now, Due: due, Force: force}
	life, out := Step(j.Life, e)
	ch := Change{Job: id, Tenant: j.Tenant, Attempt: j.Attempt, Outcome: out, From: j.State, To: life.State}
	expired := j.Lapsed || (j.Attempt == 0 && j.ExpireAt() != 0 && j.ExpireAt() <= now)
	switch {
	case j.State == Scheduled && expired:
		ch.Outcome, ch.To = Invalid, j.State
		return ch, preconditionf("", "", "release of job %d does not apply: it expired at %d ms", id, j.ExpireAt())
	case out == NotDue:
		return ch, preconditionf("", "", "release of job %d is not due yet: due at %d ms, now %d ms", id, due, now)
	case out != Changed:
		return ch, preconditionf("", "", "release of job %d does not apply: job is %s", id, j.State)
	}
	// The release takes effect: first, what expired by now leaves its
	// queue (this job did not: its expire_at is later).
	s.advance(now)
	j = s.jobs.Get(uint64(id))
	if !j.deadline() {
		s.idleRule(s.pool(j.Tenant), j.Class) // as at a submit
	}
	s.setLife(id, life, now)
	return ch, nil
}

// setLife gives job id the life a step of its lifecycle took it to at
// now, and updates what depends on it (transition, tidy).
func (s *Scheduler) setLife(id JobID, life Life, now Time) {
	old := s.jobs.Get(uint64(id)).Life
	jm := s.jobs.Mut(uint64(id))
	jm.Life = life
	s.transition(jm, old, now)
	s.tidy(now)
}

// expireTTL ends a job never dispatched whose expire_at has passed.
func (s *Scheduler) expireTTL(now Time, id JobID) (Change, error) {
	j := s.jobs.Get(uint64(id))
	if j == nil {
		return Change{}, fmt.Errorf("%w: %d", ErrUnknownJob, id)
	}
	at := j.ExpireAt()
	e := Input{Kind: InExpireTTL, Now: now, Due: at, Attempt: j.Attempt}
	life, out := Step(j.Life, e)
	ch := Change{Job: id, Tenant: j.Tenant, Attempt: j.Attempt, Outcome: out, From: j.State, To: life.State}
	switch {
	case out == Changed:
	case out == NotDue:
		return ch, preconditionf("", "", "expire-ttl of job %d is not due yet: expire_at %d ms, now %d ms", id, at, now)
	case at == 0:
		return ch, preconditionf("", "", "expire-ttl of job %d does not apply: it has no expiry", id)
	case j.Attempt != 0 && !j.State.Terminal():
		return ch, preconditionf("", "", "expire-ttl of job %d does not apply: it was dispatched (attempt %d)", id, j.Attempt)
	default:
		return ch, preconditionf("", "", "expire-ttl of job %d does not apply: job is %s", id, j.State)
	}
	// The expiry takes effect: first, what expired by now (this job
	// included) leaves its queue.
	s.advance(now)
	j = s.jobs.Get(uint64(id))
	life, _ = Step(j.Life, e)
	s.setLife(id, life, now)
	return ch, nil
}

// NextDelayWake returns the earliest time a scheduled job is due or a job
// expires (or lapsed, already), for the leader's release loop.
func (s *Scheduler) NextDelayWake() (Time, bool) {
	var at Time
	ok := false
	for _, q := range [...]*endedQueue{&s.dl.due, &s.dl.expiring, &s.dl.lapsed} {
		if e, has := q.front(); has && (!ok || e.at < at) {
			at, ok = e.at, true
		}
	}
	return at, ok
}

// DueReleases returns up to limit scheduled jobs due at now, by (due
// time, ID), leaving out those whose expire_at has passed (Expire ends
// them). It changes nothing.
func (s *Scheduler) DueReleases(now Time, limit int) []JobID {
	var out []endedEntry
	s.dl.due.walk(now, func(e endedEntry) {
		j := s.jobs.Get(uint64(e.id))
		if j == nil || j.State != Scheduled || j.Lapsed || j.DueAt() != e.at {
			return
		}
		if x := j.ExpireAt(); x != 0 && x <= now {
			return
		}
		out = append(out, e)
	})
	return firstIDs(out, limit)
}

// DueExpiries returns up to limit jobs whose expiry is due at now (never
// dispatched, scheduled or queued), by (expire_at, ID). It changes
// nothing.
func (s *Scheduler) DueExpiries(now Time, limit int) []JobID {
	var out []endedEntry
	add := func(e endedEntry) {
		j := s.jobs.Get(uint64(e.id))
		if j == nil || (j.State != Queued && j.State != Scheduled) || j.Attempt != 0 || j.ExpireAt() != e.at {
			return
		}
		out = append(out, e)
	}
	s.dl.lapsed.walk(now, add)
	s.dl.expiring.walk(now, func(e endedEntry) {
		if j := s.jobs.Get(uint64(e.id)); j != nil && !j.Lapsed {
			add(e)
		}
	})
	return firstIDs(out, limit)
}

func firstIDs(es []endedEntry, limit int) []JobID {
	slices.SortFunc(es, func(a, b endedEntry) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		return cmp.Compare(a.id, b.id)
	})
	es = slices.CompactFunc(es, func(a, b endedEntry) bool { return a.id == b.id })
	if limit > 0 && len(es) > limit {
		es = es[:limit]
	}
	ids := make([]JobID, len(es))
	for i, e := range es {
		ids[i] = e.id
	}
	return ids
}

// walk calls fn for every entry with time <= now, in heap order.
func (q *endedQueue) walk(now Time, fn func(endedEntry)) {
	var visit func(i int)
	visit = func(i int) {
		if i >= len(q.items) || q.items[i].at > now {
			return
		}
		fn(q.items[i])
		visit(2*i + 1)
		visit(2*i + 2)
	}
	visit(0)
}

// rebuildDelays derives the delay heaps and the scheduled counters from
// the job table.
func (s *Scheduler) rebuildDelays() {
	s.dl = delayState{}
	s.Tenants(func(i uint32, t *Tenant) bool {
		if t.Scheduled != 0 || t.ScheduledAgain != 0 {
			tm := s.tenants.Mut(uint64(i))
			tm.Scheduled, tm.ScheduledAgain = 0, 0
		}
		return true
	})
	s.groups.View().Each(func(slot uint64, g *Group) bool {
		if g.Scheduled != 0 {
			s.groups.Mut(slot).Scheduled = 0
		}
		return true
	})
	s.jobs.View().Each(func(_ uint64, j *Job) bool {
		if j.timed {
			s.dl.timed++
		}
		if j.State == Scheduled {
			tm := s.tenants.Mut(uint64(j.Tenant))
			tm.Scheduled++
			if j.Attempt > 0 {
				tm.ScheduledAgain++
			}
			if gs, ok := s.groupSlot(j.Tenant, j.Group()); ok {
				s.groups.Mut(uint64(gs)).Scheduled++
			}
			if !j.Lapsed {
				s.dl.due.push(j.DueAt(), j.ID)
			}
		}
		switch {
		case j.Lapsed && (j.State == Queued || j.State == Scheduled):
			s.dl.lapsed.push(j.ExpireAt(), j.ID)
		case expirable(j):
			s.dl.expiring.push(j.ExpireAt(), j.ID)
		}
		return true
	})
}

// verifyDelays checks the delay fields, the scheduled counters and that
// every scheduled, expiring and lapsed job is in its heap.
func (s *Scheduler) verifyDelays(report func(string, ...any)) {
	type key = endedEntry
	in := func(q *endedQueue) map[key]bool {
		m := make(map[key]bool, len(q.items))
		for _, e := range q.items {
			m[e] = true
		}
		return m
	}
	due, expiring, lapsed := in(&s.dl.due), in(&s.dl.expiring), in(&s.dl.lapsed)
	tenants := make([]uint32, s.tenants.Len())
	again := make([]uint32, s.tenants.Len())
	groups := map[groupKey]uint32{}
	var timed uint64
	s.jobs.View().Each(func(_ uint64, j *Job) bool {
		if j.timed {
			timed++
			if t := j.times(); t.due < 0 || t.expire < 0 || t.backoff < -1 || t.backoff > MaxRetryBackoffMs || t.base < 0 || t.delay < 0 {
				report("job %d has delay fields %+v out of range", j.ID, t)
			}
		}
		if j.State == Scheduled {
			if int(j.Tenant) < len(tenants) {
				tenants[j.Tenant]++
				if j.Attempt > 0 {
					again[j.Tenant]++
				}
			}
			groups[groupKey{j.Tenant, j.Group()}]++
			if !j.timed {
				report("job %d is scheduled without a due time", j.ID)
			} else if !j.Lapsed && !due[key{j.DueAt(), j.ID}] {
				report("scheduled job %d (due %d) is not in the due heap", j.ID, j.DueAt())
			}
		}
		if j.Lapsed {
			switch {
			case j.State != Queued && j.State != Scheduled:
				report("job %d is lapsed and %s", j.ID, j.State)
			case j.Attempt != 0 || j.ExpireAt() == 0:
				report("job %d is lapsed at attempt %d with expire_at %d", j.ID, j.Attempt, j.ExpireAt())
			case !lapsed[key{j.ExpireAt(), j.ID}]:
				report("lapsed job %d is not in the lapsed heap", j.ID)
			}
		}
		if expirable(j) && !expiring[key{j.ExpireAt(), j.ID}] {
			report("job %d (expire_at %d) is not in the expiry heap", j.ID, j.ExpireAt())
		}
		if (j.State == Scheduled || j.State == Expired) && !j.timed {
			report("job %d is %s without delay fields", j.ID, j.State)
		}
		return true
	})
	if timed != s.dl.timed {
		report("timed jobs: %d, job table says %d", s.dl.timed, timed)
	}
	s.tenants.View().Each(func(i uint64, t *Tenant) bool {
		if t.Scheduled != tenants[i] || t.ScheduledAgain != again[i] {
			report("tenant %q scheduled=%d (again %d), job table says %d (%d)", t.Name, t.Scheduled, t.ScheduledAgain, tenants[i], again[i])
		}
		return true
	})
	s.groups.View().Each(func(_ uint64, g *Group) bool {
		if n := groups[groupKey{g.Tenant, g.Name}]; g.Scheduled != n {
			report("tenant %d group %q scheduled=%d, job table says %d", g.Tenant, g.Name, g.Scheduled, n)
		}
		delete(groups, groupKey{g.Tenant, g.Name})
		return true
	})
	for k, n := range groups {
		report("tenant %d has %d scheduled jobs in group %q, which the state does not hold", k.tenant, n, k.name)
		break
	}
}

// usesDelays reports whether the state holds a scheduled or expired job, a
// job's delay or expiry, or a retry backoff setting.
func (v *View) usesDelays() bool {
	return v.cfg.RetryBackoffMs != 0 || v.cfg.RetryBackoffMaxMs != 0 || v.timed != 0
}

func encodeConfigDelays(e *Encoder, c *Config) {
	e.Varint(c.RetryBackoffMs)
	e.Varint(c.RetryBackoffMaxMs)
}

func decodeConfigDelays(d *Decoder, c *Config) {
	c.RetryBackoffMs = d.Varint()
	c.RetryBackoffMaxMs = d.Varint()
}

func encodeJobDelays(e *Encoder, j *Job) {
	e.Bool(j.timed)
	if j.timed {
		t := j.times()
		e.Varint(int64(t.due))
		e.Varint(int64(t.expire))
		e.Varint(t.backoff)
		// Bit 0: lapsed; bit 1: base and delay follow (a state without
		// them encodes as before they existed).
		flags := byte(0)
		if j.Lapsed {
			flags |= 1
		}
		extra := t.extra(j.SubmittedAt)
		if extra {
			flags |= 2
		}
		if t.backoffMax != 0 {
			flags |= 4 // bit 2: its own backoff max follows (feature level 8)
		}
		e.Byte(flags)
		if extra {
			e.Varint(int64(t.base))
			e.Varint(int64(t.delay))
		}
		if t.backoffMax != 0 {
			e.Varint(t.backoffMax)
		}
	}
}

func decodeJobDelays(d *Decoder, j *Job) {
	if !d.Bool() {
		return
	}
	t := jobTimes{due: Time(d.Varint()), expire: Time(d.Varint()), backoff: d.Varint()}
	flags := d.Byte()
	j.Lapsed = flags&1 != 0
	t.delay = derivedDelay(t.due, j.SubmittedAt)
	if flags&2 != 0 {
		t.base, t.delay = Time(d.Varint()), Time(d.Varint())
	}
	if flags&4 != 0 {
		t.backoffMax = d.Varint()
		if t.backoffMax <= 0 || t.backoffMax > MaxRetryBackoffMs {
			d.Fail("job %d has its own backoff max out of range", j.ID)
			return
		}
	}
	if flags > 7 || t.due < 0 || t.expire < 0 || t.backoff < -1 || t.backoff > MaxRetryBackoffMs || t.base < 0 || t.delay < 0 || t.delay > MaxDelayMs {
		d.Fail("job %d has delay fields out of range", j.ID)
		return
	}
	j.setTimes(t)
}
