package sfq

import "fmt"

// State is a job's lifecycle state.
type State uint8

// The job states. StateNone marks an empty (never used or pruned) slot.
const (
	StateNone State = iota
	Queued
	Assigned
	Running
	Completed
	Failed
	Cancelled
	TimedOut
	// Scheduled: delayed or backing off, in no queue until its due time
	// (feature level 5).
	Scheduled
	// Expired: never dispatched before its expire_at; terminal, never
	// retried (feature level 5).
	Expired
	numStates
)

var stateNames = [numStates]string{"none", "queued", "assigned", "running", "completed", "failed", "cancelled", "timed_out", "scheduled", "expired"}

func (s State) String() string {
	if s < numStates {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// ParseState reads a state name as String prints it.
func ParseState(s string) (State, error) {
	for i := Queued; i < numStates; i++ {
		if stateNames[i] == s {
			return i, nil
		}
	}
	return 0, invalidf("", "unknown state %q", s)
}

// Terminal reports whether s is a final state.
func (s State) Terminal() bool {
	return (s >= Completed && s <= TimedOut) || s == Expired
}

// DeadLetter reports whether s is a state a job ends in without
// completing (failed, timed_out, expired, cancelled): such a job is kept
// under the dead-letter retention and may be redriven.
func (s State) DeadLetter() bool {
	return s == Failed || s == TimedOut || s == Expired || s == Cancelled
}

// Live reports whether a job in state s holds a worker slot (and counts
// against its tenant's caps).
func (s State) Live() bool { return s == Assigned || s == Running }

// CancelReason says why a cancel is pending on a live job.
type CancelReason uint8

// The cancel reasons.
const (
	CancelNone CancelReason = iota
	CancelRequested
	CancelTimeout
)

func (c CancelReason) String() string {
	switch c {
	case CancelNone:
		return "none"
	case CancelRequested:
		return "requested"
	case CancelTimeout:
		return "timeout"
	}
	return fmt.Sprintf("cancel(%d)", uint8(c))
}

// FinishOutcome is what a worker reports about a run.
type FinishOutcome uint8

// The outcomes of a run.
const (
	OutcomeOK FinishOutcome = iota + 1
	OutcomeFailed
	OutcomeCancelled
	// OutcomeSnoozed: the run asks that the job be tried again later
	// (a downstream service said "not yet"): not a failure; the job waits
	// scheduled for the run's snooze and keeps its place by ID.
	OutcomeSnoozed
	// OutcomeUnknownKind: the worker does not run jobs of this kind (SPEC
	// §3 "Kinds"): the job goes back to queued with no failure, and the
	// run is not billed.
	OutcomeUnknownKind
)

func (o FinishOutcome) String() string {
	switch o {
	case OutcomeOK:
		return "ok"
	case OutcomeFailed:
		return "failed"
	case OutcomeSnoozed:
		return "snoozed"
	case OutcomeCancelled:
		return "cancelled"
	case OutcomeUnknownKind:
		return "unknown_kind"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// ParseOutcome reads an outcome name.
func ParseOutcome(s string) (FinishOutcome, error) {
	for o := OutcomeOK; o <= OutcomeUnknownKind; o++ {
		if o.String() == s {
			return o, nil
		}
	}
	return 0, invalidf("", "unknown outcome %q (want ok, failed, cancelled, snoozed or unknown_kind)", s)
}

// Life is the mutable lifecycle part of a job: everything Apply reads and
// writes. Attempt counts dispatches and is the fencing token; Failures counts
// lost or failed runs and is compared with MaxAttempts.
type Life struct {
	State       State
	Cancel      CancelReason
	Failures    uint16
	MaxAttempts uint16 // at most MaxMaxAttempts
	// Lapsed marks a job never dispatched whose expire_at has passed: it
	// is out of its queue (never dispatched) until Expire ends it
	// (feature level 5; delay.go).
	Lapsed bool
	// timed marks a job whose text starts with its delay fields: due
	// time, expire_at and retry backoff (delay.go). Both fit the padding
	// before Attempt.
	timed   bool
	Attempt uint32
	// Settled has bit i set when the CPU of attempt Attempt-i has been
	// accounted for: its Finished was accepted, or billed as a zombie. It
	// makes a repeated Finished a no-op and bills a zombie once. Reports
	// more than 31 attempts old are refused unbilled.
	Settled uint32
	// Worker is the worker of the current attempt while the job is live,
	// and stays that of its last attempt when the job ends from a live
	// state (it shows where the job ran and its output is); a requeue
	// clears it.
	Worker       string
	AckDeadline  Time // Assigned: Started must arrive by then
	LeaseExpires Time // Running: moved by every heartbeat
	TimeoutAt    Time // Running: Started + job timeout; 0 = no timeout
}

// InputKind names an input of the job lifecycle.
type InputKind uint8

// The lifecycle inputs.
const (
	InDispatch InputKind = iota + 1
	InStart
	InHeartbeat
	InFinish
	InCancel
	InExpireAck
	InExpireLease
	InExpireTimeout
	InGrant
	// InRelease moves a scheduled job to its queue at its due time;
	// InExpireTTL ends a job never dispatched at its expire_at (feature
	// level 5). Both read Due.
	InRelease
	InExpireTTL
	// InRedrive moves a dead letter back to queued (feature level 5).
	InRedrive
	// InLose: the job's worker opened a session whose Hello did not list
	// this attempt (feature level 8, SPEC §5): lost at once, as at its
	// ack deadline if it never started, else as at its lease's end. It
	// uses Attempt and Worker.
	InLose
	numInputKinds
)

var inputNames = [numInputKinds]string{"", "dispatch", "start", "heartbeat", "finish", "cancel", "expire-ack", "expire-lease", "expire-timeout", "grant",
	"release", "expire-ttl", "redrive", "lose"}

func (k InputKind) String() string {
	if k > 0 && k < numInputKinds {
		return inputNames[k]
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// Input is one input to the lifecycle. Which fields matter depends on Kind:
// Dispatch uses Worker, Now, AckMs; Start and Heartbeat use Attempt, Worker,
// Now, LeaseMs (Start also TimeoutMs); Finish uses Attempt, Worker, Outcome;
// the expiries use Attempt and Now; Grant uses Now and LeaseMs; Release
// uses Now and Due (the job's due time; Force releases it before), and
// ExpireTTL Now and Due (its expire_at). A Finish of outcome failed that
// requeues goes through scheduled when BackoffMs > 0 (the caller keeps the
// due time, Now + BackoffMs, on the job). Redrive uses MaxAttempts (0
// keeps the job's) and Due: a job submitted with a delay goes back to
// scheduled (the caller keeps Due, Now + its delay, on the job), any other
// to queued.
type Input struct {
	Kind        InputKind
	Attempt     uint32
	Worker      string
	Now         Time
	Outcome     FinishOutcome
	AckMs       int64
	LeaseMs     int64
	TimeoutMs   int64
	Due         Time
	Force       bool
	BackoffMs   int64
	MaxAttempts uint16
	// Permanent, with a Finish of outcome failed: the run can never
	// succeed, so the job ends failed instead of being retried.
	Permanent bool
	// Snoozes, with a Finish of outcome snoozed, counts the job's runs
	// snoozed in a row, this one included; at MaxSnoozes (0: no bound)
	// the job ends failed. The caller keeps the due time, Now + the
	// snooze, on the job (BackoffMs carries it).
	Snoozes, MaxSnoozes uint16
}

// Outcome says what Apply did with an event. Only Changed and Zombie carry
// a new Life; every side effect keys off them.
type Outcome uint8

// The outcomes of Apply.
const (
	// Changed: the event was accepted and the Life changed.
	Changed Outcome = iota + 1
	// Duplicate: the event repeats one already applied; acknowledge it,
	// change nothing.
	Duplicate
	// Stale: the event is fenced off (another attempt or worker, or the
	// attempt is over); refuse it, change nothing.
	Stale
	// Zombie: the first Finished of a stale attempt. Bill its CPU; only the
	// Settled mask changes.
	Zombie
	// NotDue: an expiry whose deadline has not passed.
	NotDue
	// Invalid: the event makes no sense in this state.
	Invalid
)

var outcomeNames = [...]string{"", "changed", "duplicate", "stale", "zombie", "not-due", "invalid"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) && o > 0 {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Step is the job lifecycle: one pure function from a Life and an Input to
// the next Life and what happened. It never panics and has no side effects.
func Step(l Life, e Input) (Life, Outcome) {
	match := e.Attempt == l.Attempt && e.Worker == l.Worker
	switch e.Kind {
	case InDispatch:
		if l.State != Queued {
			return l, Invalid
		}
		l.State = Assigned
		l.Attempt++
		l.Settled <<= 1
		l.Worker = e.Worker
		l.AckDeadline = e.Now + Time(e.AckMs)
		l.LeaseExpires, l.TimeoutAt = 0, 0
		return l, Changed

	case InStart:
		switch {
		case l.State == Assigned && match:
			return start(l, e), Changed
		case l.State == Running && match:
			return l, Duplicate
		}
		return l, Stale

	case InHeartbeat:
		switch {
		case l.State == Assigned && match:
			// A heartbeat proves the run started even if its Started was
			// lost in a leader change; treating it as one keeps the ack
			// deadline from requeueing a job that is running.
			return start(l, e), Changed
		case l.State == Running && match:
			next := e.Now + Time(e.LeaseMs)
			if next <= l.LeaseExpires {
				return l, Duplicate
			}
			l.LeaseExpires = next
			return l, Changed
		}
		return l, Stale

	case InFinish:
		if l.State.Live() && match {
			l.Settled |= 1
			if e.Outcome == OutcomeUnknownKind {
				// Not a run of the job: back to the queue (a pending
				// cancel ends it).
				if l.Cancel != CancelNone {
					return endCancelled(l), Changed
				}
				return requeue(l), Changed
			}
			if e.Outcome == OutcomeSnoozed && l.Cancel == CancelNone {
				if e.MaxSnoozes > 0 && e.Snoozes >= e.MaxSnoozes {
					return end(l, Failed), Changed // snoozed too often
				}
				next := requeue(l) // not a failure: failures stay
				next.State = Scheduled
				return next, Changed
			}
			next := finish(l, e.Outcome)
			if next.State == Queued && e.Permanent {
				// The worker says no run can succeed (its payload
				// cannot be run): no retry.
				next = end(next, Failed)
			}
			if next.State == Queued && e.BackoffMs > 0 {
				// A failed run (not a lost lease or an ack timeout) backs
				// off before its retry.
				next.State = Scheduled
			}
			return next, Changed
		}
		if e.Attempt == 0 || e.Attempt > l.Attempt || (l.State.Live() && e.Attempt == l.Attempt) {
			// Unknown attempt, or the live attempt claimed by another worker.
			return l, Stale
		}
		back := l.Attempt - e.Attempt
		if back >= 32 {
			return l, Stale // too old to remember: neither billed nor applied
		}
		if l.Settled&(1<<back) != 0 {
			return l, Duplicate
		}
		l.Settled |= 1 << back
		return l, Zombie

	case InCancel:
		switch {
		case l.State == Queued || l.State == Scheduled:
			l.State = Cancelled
			l.Cancel = CancelRequested
			l.Lapsed = false
			return l, Changed
		case l.State.Live() && l.Cancel == CancelNone:
			l.Cancel = CancelRequested
			return l, Changed
		case l.State.Live() || l.State == Cancelled:
			return l, Duplicate
		}
		return l, Invalid

	case InExpireAck:
		// The worker never acknowledged: back to the queue, not a failure.
		return expire(l, e, Assigned, l.AckDeadline, requeue)

	case InExpireLease:
		return expire(l, e, Running, l.LeaseExpires, fail)

	case InLose:
		if !l.State.Live() || e.Attempt != l.Attempt || e.Worker != l.Worker {
			return l, Stale
		}
		switch {
		case l.Cancel != CancelNone:
			return endCancelled(l), Changed
		case l.State == Assigned:
			return requeue(l), Changed
		}
		return fail(l), Changed

	case InExpireTimeout:
		if !l.State.Live() || e.Attempt != l.Attempt || l.TimeoutAt == 0 {
			return l, Stale
		}
		if e.Now < l.TimeoutAt {
			return l, NotDue
		}
		if l.Cancel != CancelNone {
			return l, Duplicate
		}
		l.Cancel = CancelTimeout
		return l, Changed

	case InRelease:
		if l.State != Scheduled || l.Lapsed {
			return l, Invalid
		}
		if e.Now < e.Due && !e.Force {
			return l, NotDue
		}
		return requeue(l), Changed

	case InExpireTTL:
		if (l.State != Scheduled && l.State != Queued) || l.Attempt != 0 || e.Due == 0 {
			return l, Invalid
		}
		if e.Now < e.Due {
			return l, NotDue
		}
		l.Lapsed = false
		return end(l, Expired), Changed

	case InGrant:
		if !l.State.Live() {
			return l, Invalid
		}
		floor := e.Now + Time(e.LeaseMs)
		moved := false
		raise := func(d *Time) {
			if *d != 0 && *d < floor {
				*d = floor
				moved = true
			}
		}
		raise(&l.AckDeadline)
		raise(&l.LeaseExpires)
		raise(&l.TimeoutAt)
		if !moved {
			return l, Duplicate
		}
		return l, Changed

	case InRedrive:
		// A dead letter goes back to the queue with its failures
		// forgotten; its attempt keeps counting, so fencing stays
		// monotonic. A completed job is never redriven.
		if !l.State.DeadLetter() {
			return l, Invalid
		}
		l = requeue(l)
		if e.Due != 0 {
			l.State = Scheduled // its delay runs again first
		}
		l.Failures = 0
		l.Cancel = CancelNone
		if e.MaxAttempts != 0 {
			l.MaxAttempts = e.MaxAttempts
		}
		return l, Changed
	}
	return l, Invalid
}

// expire ends the attempt of e, live in state, once its deadline has
// passed: a requested cancel ends the job cancelled, otherwise lapse says
// what becomes of it.
func expire(l Life, e Input, state State, deadline Time, lapse func(Life) Life) (Life, Outcome) {
	if l.State != state || e.Attempt != l.Attempt {
		return l, Stale
	}
	if e.Now < deadline {
		return l, NotDue
	}
	if l.Cancel != CancelNone {
		return endCancelled(l), Changed
	}
	return lapse(l), Changed
}

func start(l Life, e Input) Life {
	l.State = Running
	l.AckDeadline = 0
	l.LeaseExpires = e.Now + Time(e.LeaseMs)
	if e.TimeoutMs > 0 {
		l.TimeoutAt = e.Now + Time(e.TimeoutMs)
	}
	return l
}

// finish applies an accepted Finished of the current attempt. The worker's
// own success beats a pending cancel; a failure or a cancel confirmation
// with a cancel pending ends the job by the cancel's reason; a failure (or
// an unrequested "cancelled") counts against MaxAttempts.
func finish(l Life, o FinishOutcome) Life {
	switch {
	case o == OutcomeOK:
		return end(l, Completed)
	case l.Cancel != CancelNone:
		return endCancelled(l)
	default:
		return fail(l)
	}
}

// fail counts a lost or failed run and requeues the job if it has attempts
// left.
func fail(l Life) Life {
	l.Failures++
	if l.Failures < l.MaxAttempts {
		return requeue(l)
	}
	return end(l, Failed)
}

func requeue(l Life) Life {
	l.State = Queued
	l.Worker = ""
	l.AckDeadline, l.LeaseExpires, l.TimeoutAt = 0, 0, 0
	return l
}

func endCancelled(l Life) Life {
	if l.Cancel == CancelTimeout {
		return end(l, TimedOut)
	}
	return end(l, Cancelled)
}

func end(l Life, s State) Life {
	l.State = s
	l.AckDeadline, l.LeaseExpires, l.TimeoutAt = 0, 0, 0
	return l
}
