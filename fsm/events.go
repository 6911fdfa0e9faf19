package fsm

import (
	"fmt"

	"github.com/baristahq/barista/sfq"
)

// EventKind names a job state change in the event log.
type EventKind uint8

// The event kinds.
const (
	EvQueued EventKind = iota + 1
	EvAssigned
	EvStarted
	EvRequeued
	EvCompleted
	EvFailed
	EvCancelRequested
	EvCancelled
	EvTimedOut
	// Feature level 5: a job delayed or backing off (scheduled), its
	// delay due (released), its expiry (expired), a pause and a resume
	// of its tenant or group (paused, resumed: tenant-level events), a
	// redrive (redriven).
	EvScheduled
	EvReleased
	EvExpired
	EvPaused
	EvResumed
	EvRedriven
	// Feature level 8: a schedule's fire submitted its job (job: the job;
	// reason run_now for a run-now), was refused (job 0; reason: why), or
	// slots were counted missed (job 0). Only a state of version 12 holds
	// them (schedule.go).
	EvScheduleFired
	EvScheduleRefused
	EvScheduleMissed
	numEventKinds
)

var eventKindNames = [numEventKinds]string{"", "queued", "assigned", "started", "requeued", "completed", "failed", "cancel_requested", "cancelled", "timed_out",
	"scheduled", "released", "expired", "paused", "resumed", "redriven", "schedule_fired", "schedule_refused", "schedule_missed"}

// eventKindsIn is how many event kinds an event of FSM state version v
// may hold.
func eventKindsIn(v int) EventKind {
	if v < stateVersionSchedules {
		return EvScheduleFired
	}
	return numEventKinds
}

// ScheduleEvent reports whether the event is a schedule's: its Worker
// field holds the schedule's name, CPUMs the slot, and Attempt the slots
// a miss counted.
func (k EventKind) ScheduleEvent() bool {
	return k == EvScheduleFired || k == EvScheduleRefused || k == EvScheduleMissed
}

func (k EventKind) String() string {
	if k > 0 && k < numEventKinds {
		return eventKindNames[k]
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// Terminal reports whether the event ends its job.
func (k EventKind) Terminal() bool {
	return k == EvCompleted || k == EvFailed || k == EvCancelled || k == EvTimedOut || k == EvExpired
}

// ParseEventKind reads an event kind name.
func ParseEventKind(s string) (EventKind, bool) {
	for k := EvQueued; k < numEventKinds; k++ {
		if eventKindNames[k] == s {
			return k, true
		}
	}
	return 0, false
}

// Reason says why a requeue or cancel happened.
type Reason uint8

// The reasons.
const (
	ReasonNone Reason = iota
	ReasonAckTimeout
	ReasonLeaseExpired
	ReasonRunFailed
	ReasonRequested
	ReasonTimeout
	// ReasonDeadlineMissed marks the assigned event of a job dispatched
	// after its deadline.
	ReasonDeadlineMissed
	// ReasonUnrunnable (feature level 6) marks the failed event of a job
	// whose worker said no run of it can succeed: it is not retried.
	ReasonUnrunnable
	// ReasonOOMKilled (feature level 7) marks the event of a failed run
	// whose worker says the kernel killed it for its memory limit: it is
	// retried like any failed run (scheduled, requeued) or ends failed.
	// Only a state of version 10 (level 7) holds it.
	ReasonOOMKilled
	// ReasonSnoozed (feature level 7) marks the scheduled event of a job
	// whose run was snoozed, and ReasonSnoozedTooOften the failed event of
	// one snoozed max_snoozes times in a row.
	ReasonSnoozed
	ReasonSnoozedTooOften
	// ReasonUnknownKind (feature level 8) marks the requeued event of a
	// job whose worker does not run its kind, and ReasonReconnected the
	// event of a job lost when its worker opened a session without it
	// (SPEC §3 "Kinds", §5). Only a state of version 11 holds them.
	ReasonUnknownKind
	ReasonReconnected
	// The reasons of the schedule events (feature level 8): a run-now's
	// fire, and why a fire's submit was refused (the refusal's reason;
	// refused: another). Only a state of version 12 holds them.
	ReasonRunNow
	ReasonQuotaExceeded
	ReasonKeyConflict
	ReasonKeyJobGone
	ReasonPoolUnknown
	ReasonTooLarge
	ReasonMaxClass
	ReasonDeadlinesNotAllowed
	ReasonMaxGroups
	ReasonSubscriptionRequired
	ReasonRefused
	numReasons
)

var reasonNames = [numReasons]string{"", "ack_timeout", "lease_expired", "run_failed", "requested", "timeout", "deadline_missed", "unrunnable", "oom_killed",
	"snoozed", "snoozed_too_often", "unknown_kind", "reconnected",
	"run_now", "quota_exceeded", "key_conflict", "key_job_gone", "pool_unknown", "too_large", "max_class", "deadlines_not_allowed", "max_groups",
	"subscription_required", "refused"}

// reasonsIn is how many reasons an event of FSM state version v may hold.
func reasonsIn(v int) Reason {
	switch {
	case v < stateVersionLevel7:
		return ReasonOOMKilled
	case v < stateVersionLevel8:
		return ReasonUnknownKind
	case v < stateVersionSchedules:
		return ReasonRunNow
	}
	return numReasons
}

func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Event is one job state change. Events are numbered by a monotonic Seq
// and kept in a bounded, replicated log that clients watch.
type Event struct {
	Seq uint64
	eventRecord
	// Pool is the pool of the event's job (PoolName "" for the pool
	// default); Tenant is its tenant's own index.
	Pool     sfq.PoolID
	PoolName string
}

// PoolLabel is the pool of the event's job as the API and webhooks name
// it: PoolName, "default" for the pool default.
func (ev *Event) PoolLabel() string {
	if ev.PoolName == "" {
		return sfq.DefaultPoolName
	}
	return ev.PoolName
}

// eventRecord is an event of the log without its Seq, its position; the
// log stores it as a compact record (eventlog.go).
type eventRecord struct {
	Job     sfq.JobID
	At      sfq.Time // cluster time: what rules and retention use
	CPUMs   int64    // completed, failed, cancelled, timed_out, requeued after a run
	Worker  string   // assigned, started
	Tenant  uint32
	Attempt uint32
	wall    sfq.WallDelta // the leader's wall clock on the entry, from At
	// ExitCode is the run's exit code, clamped to 16 bits (workers report
	// -1..255; the job's result keeps the reported value), as snapshots
	// since version 4 keep it.
	ExitCode int16
	Kind     EventKind
	Reason   Reason
}

// Wall is the wall-clock time of the event: the leader's clock on the
// entry that made it, for display (At is its cluster time).
func (ev *eventRecord) Wall() sfq.Time { return ev.wall.Wall(ev.At) }

func encodeEvent(e *sfq.Encoder, seq uint64, ev *eventRecord, version int) {
	e.Uvarint(seq)
	e.Uvarint(uint64(ev.Job))
	e.Varint(int64(ev.At))
	e.Varint(ev.CPUMs)
	e.String(ev.Worker)
	e.Uvarint(uint64(ev.Tenant))
	e.Uvarint(uint64(ev.Attempt))
	e.Varint(int64(ev.ExitCode))
	e.Byte(byte(ev.Kind))
	e.Byte(byte(ev.Reason))
	if version >= 4 {
		e.Varint(int64(ev.wall))
	}
}

// decodeEvent reads an event of FSM state version version.
func decodeEvent(d *sfq.Decoder, version int) (uint64, eventRecord) {
	var ev eventRecord
	seq := d.Uvarint()
	ev.Job = sfq.JobID(d.Uvarint())
	ev.At = sfq.Time(d.Varint())
	ev.CPUMs = d.Varint()
	ev.Worker = d.String()
	ev.Tenant = d.Uint32()
	ev.Attempt = d.Uint32()
	exit := d.Varint()
	ev.Kind = EventKind(d.Enum("event kind", byte(eventKindsIn(version))))
	ev.Reason = Reason(d.Enum("event reason", byte(reasonsIn(version))))
	ev.ExitCode = clampExit(exit)
	if version >= 4 {
		if int64(ev.ExitCode) != exit {
			d.Fail("event %d: exit code %d exceeds 16 bits", seq, exit)
		}
		w := d.Varint()
		if w < -1<<31 || w > 1<<31-1 {
			d.Fail("event %d: wall-clock delta %d exceeds 32 bits", seq, w)
		}
		ev.wall = sfq.WallDelta(w)
	}
	if ev.Kind == 0 {
		d.Fail("event %d has no kind", seq)
	}
	return seq, ev
}

// clampExit is an exit code as an event keeps it.
func clampExit(c int64) int16 { return int16(min(max(c, -1<<15), 1<<15-1)) }

// emit appends an event for job j.
func (f *FSM) emit(kind EventKind, j *sfq.Job, reason Reason) {
	ev := eventRecord{Job: j.ID, At: f.clock, Tenant: j.Tenant, Attempt: j.Attempt, Kind: kind, Reason: reason}
	if eventsKeepWall(f.level) {
		ev.wall = sfq.MakeWallDelta(sfq.Time(f.lastWall), f.clock)
	}
	switch kind {
	case EvAssigned, EvStarted:
		ev.Worker = j.Worker
	case EvCompleted, EvFailed, EvCancelled, EvTimedOut, EvRequeued:
		ev.CPUMs = j.CPUMs
		if j.Result != nil {
			ev.ExitCode = clampExit(int64(j.Result.ExitCode))
		}
	}
	f.events.Append(f.nextEvent, &ev)
	f.nextEvent++
}

// emitChange appends the events a lifecycle change calls for.
func (f *FSM) emitChange(ch sfq.Change, reason Reason) {
	if ch.Outcome != sfq.Changed {
		return
	}
	j, ok := f.sched.Job(ch.Job)
	if !ok {
		return
	}
	if ch.CancelSet {
		r := ReasonRequested
		if ch.Cancel == sfq.CancelTimeout {
			r = ReasonTimeout
		}
		f.emit(EvCancelRequested, &j, r)
	}
	if ch.From == ch.To || f.emitDelay(ch, &j, reason) {
		return
	}
	switch ch.To {
	case sfq.Running:
		f.emit(EvStarted, &j, ReasonNone)
	case sfq.Queued:
		f.emit(EvRequeued, &j, reason)
	case sfq.Completed:
		f.emit(EvCompleted, &j, ReasonNone)
	case sfq.Failed:
		f.emit(EvFailed, &j, reason)
	case sfq.Cancelled:
		f.emit(EvCancelled, &j, reason)
	case sfq.TimedOut:
		f.emit(EvTimedOut, &j, ReasonTimeout)
	}
}
