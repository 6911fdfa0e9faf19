package sfq

// Lifecycle events of jobs (start, heartbeat, cancel, expire, finish) and
// the state transitions they cause, and Refusal.

import (
	"fmt"

	"github.com/baristahq/barista/internal/text"
)

// Start records that a worker started an assigned job.
func (s *Scheduler) Start(now Time, id JobID, attempt uint32, worker string) (Change, error) {
	return s.event(now, id, Input{Kind: InStart, Attempt: attempt, Worker: worker}, 0)
}

// Heartbeat renews a running job's lease and records its CPU so far. A
// heartbeat for an assigned job counts as its Started.
func (s *Scheduler) Heartbeat(now Time, id JobID, attempt uint32, worker string, cpuMs int64) (Change, error) {
	if cpuMs < 0 {
		return Change{}, invalidf("", "cpu_ms %d is negative", cpuMs)
	}
	return s.event(now, id, Input{Kind: InHeartbeat, Attempt: attempt, Worker: worker}, cpuMs)
}

// Cancel cancels a queued job at once, or marks a live one
// cancel_requested (it ends when the worker confirms or its lease expires).
func (s *Scheduler) Cancel(now Time, id JobID) (Change, error) {
	return s.event(now, id, Input{Kind: InCancel}, 0)
}

// Lose applies a worker's new session that did not list attempt of job
// id (SPEC §5, reconcile on reconnect): the attempt, if it is still the
// job's live one on that worker, is lost at once: one never started goes
// back to queued with no failure, a started one as at its lease's end.
func (s *Scheduler) Lose(now Time, id JobID, attempt uint32, worker string) (Change, error) {
	return s.event(now, id, Input{Kind: InLose, Attempt: attempt, Worker: worker}, 0)
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
		return Change{}, invalidf("", "expire kind %s", kind)
	}
	return s.event(now, id, Input{Kind: kind, Attempt: attempt}, 0)
}

// CheckEvent is the verdict of lifecycle event e (a start, heartbeat,
// cancel or expiry) of job id at time now, without its change: the
// outcome its Apply would have, and its refusal (an unknown job, or an
// outcome other than Changed and Duplicate). It changes nothing.
func (s *Scheduler) CheckEvent(now Time, id JobID, e Input) (Outcome, error) {
	j, e, err := s.eventInput(now, id, e)
	if err != nil {
		return 0, err
	}
	_, out := Step(j.Life, e)
	if out != Changed && out != Duplicate {
		return out, LifecycleRefusal(j, e, out)
	}
	return out, nil
}

// eventInput completes lifecycle event e of job id at time now with what
// the job and the configuration give it.
func (s *Scheduler) eventInput(now Time, id JobID, e Input) (*Job, Input, error) {
	j := s.jobs.Get(uint64(id))
	if j == nil {
		return nil, e, fmt.Errorf("%w: %d", ErrUnknownJob, id)
	}
	e.Now = now
	e.LeaseMs = s.cfg.LeaseTimeoutMs
	e.TimeoutMs = j.TimeoutMs
	return j, e, nil
}

// event applies a lifecycle event other than Dispatch and Finish.
func (s *Scheduler) event(now Time, id JobID, e Input, cpuMs int64) (Change, error) {
	j, e, err := s.eventInput(now, id, e)
	if err != nil {
		return Change{}, err
	}
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
		return ch, LifecycleRefusal(j, e, out)
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

// finishFields checks a run's outcome and CPU.
func finishFields(outcome FinishOutcome, cpuMs int64) error {
	if outcome < OutcomeOK || outcome > OutcomeUnknownKind {
		return invalidf("", "outcome %d", outcome)
	}
	if cpuMs < 0 || cpuMs > MaxEstCostMs {
		return invalidf("", "cpu_ms %d out of range", cpuMs)
	}
	return nil
}

// finishInput is the lifecycle input of a worker's report that attempt
// of job id ended with outcome.
func (s *Scheduler) finishInput(now Time, id JobID, attempt uint32, worker string, outcome FinishOutcome, permanent bool, snoozeMs int64) (*Job, Input, error) {
	j := s.jobs.Get(uint64(id))
	if j == nil {
		return nil, Input{}, fmt.Errorf("%w: %d", ErrUnknownJob, id)
	}
	if outcome == OutcomeUnknownKind && j.Form() == FormAny {
		// Every worker runs it: a worker that cannot reports its run
		// failed, as before kinds.
		return nil, Input{}, preconditionf("", "outcome", "job %d was submitted with no form: every worker runs it (a worker that cannot run it reports the run failed)", id)
	}
	own, set := j.RetryBackoff()
	e := Input{Kind: InFinish, Attempt: attempt, Worker: worker, Now: now, Outcome: outcome, BackoffMs: s.cfg.Backoff(own, set, j.RetryBackoffMax(), j.Failures+1),
		Permanent: permanent && outcome == OutcomeFailed}
	if outcome == OutcomeSnoozed {
		if err := checkSnooze(snoozeMs); err != nil {
			return nil, Input{}, err
		}
		e.BackoffMs, e.MaxSnoozes, e.Snoozes = snoozeMs, s.cfg.MaxSnoozes, 1
		if j.Result != nil {
			e.Snoozes = min(j.Result.Snoozes, MaxMaxSnoozes-1) + 1
		}
	}
	return j, e, nil
}

// The bounds of a snooze (SPEC §3 "Job lifecycle"): 1 s .. 24 h.
const (
	MinSnoozeMs = text.MinSnoozeMs
	MaxSnoozeMs = text.MaxSnoozeMs
)

// checkSnooze refuses a snooze out of its bounds.
func checkSnooze(ms int64) error {
	if ms < MinSnoozeMs || ms > MaxSnoozeMs {
		return invalidf("snooze_ms", "%d is out of range %d..%d (1 s .. 24 h)", ms, MinSnoozeMs, MaxSnoozeMs)
	}
	return nil
}

// CheckFinish is Finish's verdict without the change: the outcome its
// Apply would have (a Zombie is billed), and its refusal. It changes
// nothing.
func (s *Scheduler) CheckFinish(now Time, id JobID, attempt uint32, worker string, outcome FinishOutcome, cpuMs int64, permanent bool, snoozeMs int64) (Outcome, error) {
	if err := finishFields(outcome, cpuMs); err != nil {
		return 0, err
	}
	j, e, err := s.finishInput(now, id, attempt, worker, outcome, permanent, snoozeMs)
	if err != nil {
		return 0, err
	}
	switch _, out := Step(j.Life, e); out {
	case Changed, Zombie, Duplicate:
		return out, nil
	default:
		return out, LifecycleRefusal(j, e, out)
	}
}

// Finish applies a worker's report of a run. An accepted report corrects
// the tenant's tag and usage by the actual CPU (with the weight used at
// dispatch) and bills the CPU; a repeat is acknowledged and changes
// nothing; the first report of a stale attempt (a zombie) bills its CPU and
// changes nothing else.
func (s *Scheduler) Finish(now Time, id JobID, attempt uint32, worker string, outcome FinishOutcome, cpuMs int64, res RunResult) (Change, error) {
	if err := finishFields(outcome, cpuMs); err != nil {
		return Change{}, err
	}
	if outcome == OutcomeUnknownKind {
		cpuMs = 0 // not a run of the job: never billed
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
	if err := res.checkDetails(); err != nil {
		return Change{}, err
	}
	if outcome != OutcomeFailed {
		res.Failure = FailureNone // only a failed run has a failure
	}
	j, e, err := s.finishInput(now, id, attempt, worker, outcome, res.Permanent, res.SnoozeMs)
	if err != nil {
		return Change{}, err
	}
	res.Snoozes, res.SnoozeMs = 0, 0
	if outcome == OutcomeSnoozed {
		res.Snoozes, res.SnoozeMs = e.Snoozes, e.BackoffMs
	}
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
		return ch, LifecycleRefusal(j, e, out)
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
		s.setDue(jm, now+Time(e.BackoffMs))
	}
	jm.CPUMs = cpuMs
	jm.Result = &RunResult{ExitCode: res.ExitCode, StderrTail: res.StderrTail, StdoutTail: res.StdoutTail, CPUSource: res.CPUSource, Failure: res.Failure,
		Snoozes: res.Snoozes, SnoozeMs: res.SnoozeMs}
	s.details = s.details || res.hasDetails()
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
		if j.deadline() {
			tm.RunningDeadline--
		}
		tm.InflightCPUMs -= j.EstCostMs
		gm.Running--
		s.hold(s.owner(ti), s.usesOf(j), -1, now) // its units go back
	}
	if old.State == Queued && j.State != Queued {
		tm.Queued[j.Size]--
		gm.Queued--
		s.queued--
		if !j.deadline() {
			s.pools[rt.pool].queuedFair[j.Class]--
			rt.queuedFair[j.Class]--
		}
		if !old.Lapsed {
			s.unqueue(q, j) // a lapsed job left its queue when it lapsed
		}
	}
	if old.State == Scheduled && j.State != Scheduled {
		tm.Scheduled--
		gm.Scheduled--
		if old.Attempt > 0 {
			tm.ScheduledAgain--
		}
	}
	tm.Billing.Failures += uint64(j.Failures - old.Failures)
	switch j.State {
	case Queued:
		if old.State != Queued {
			if fair && !j.deadline() && rt.queuedFair[j.Class] == 0 {
				s.groupIdle(ti, j.Class)
				tm = s.tenants.Mut(uint64(ti))
			}
			tm.Queued[j.Size]++
			if old.State != Scheduled {
				tm.Billing.Requeues++ // a release is no requeue: its run was counted when it backed off
			}
			gm.Queued++
			s.queued++
			r, u := s.routeOf(j), s.usesOf(j)
			s.countRoute(ti, j.Class, j.Size, r, u, j.deadline(), 1)
			if j.deadline() {
				q.ofMut(r, u).deadlines().push(dlEntry{at: j.DeadlineAt(), id: j.ID})
			} else {
				s.pools[rt.pool].queuedFair[j.Class]++
				rt.queuedFair[j.Class]++
				q.ofMut(r, u).fifo.pushAt(j.ID)
			}
		}
	case Scheduled:
		// A failed run backing off before its retry.
		tm.Scheduled++
		if j.Attempt > 0 {
			tm.ScheduledAgain++
		}
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
		s.payloadAll -= uint64(len(j.Payload()))
		s.releaseUses(s.usesOf(j)) // an ended job uses no resource
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

// LifecycleRefusal is the error Apply returns for lifecycle input e refused with
// out (Stale, NotDue, Invalid) by job j, as it stood: the leader answers
// a report its state already shows refused with the same words, without
// proposing it.
func LifecycleRefusal(j *Job, e Input, out Outcome) error {
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
		return preconditionf("", "", "%s is stale: %s", what, state)
	case NotDue:
		return preconditionf("", "", "%s is not due yet", what)
	}
	return preconditionf("", "", "%s does not apply: %s", what, state)
}
