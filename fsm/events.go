package fsm

import (
	"fmt"

	"barista/sfq"
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
	numEventKinds
)

var eventKindNames = [numEventKinds]string{"", "queued", "assigned", "started", "requeued", "completed", "failed", "cancel_requested", "cancelled", "timed_out"}

func (k EventKind) String() string {
	if k > 0 && k < numEventKinds {
		return eventKindNames[k]
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// Terminal reports whether the event ends its job.
func (k EventKind) Terminal() bool {
	return k == EvCompleted || k == EvFailed || k == EvCancelled || k == EvTimedOut
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
	numReasons
)

var reasonNames = [numReasons]string{"", "ack_timeout", "lease_expired", "run_failed", "requested", "timeout", "deadline_missed"}

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
}

// eventRecord is an event as the log keeps it: its Seq is its position.
type eventRecord struct {
	Job      sfq.JobID
	At       sfq.Time
	CPUMs    int64  // completed, failed, cancelled, timed_out, requeued after a run
	Worker   string // assigned, started
	Tenant   uint32
	Attempt  uint32
	ExitCode int32
	Kind     EventKind
	Reason   Reason
}

func encodeEvent(e *sfq.Encoder, seq uint64, ev *eventRecord) {
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
}

func decodeEvent(d *sfq.Decoder) (uint64, eventRecord) {
	var ev eventRecord
	seq := d.Uvarint()
	ev.Job = sfq.JobID(d.Uvarint())
	ev.At = sfq.Time(d.Varint())
	ev.CPUMs = d.Varint()
	ev.Worker = d.String()
	ev.Tenant = d.Uint32()
	ev.Attempt = d.Uint32()
	ev.ExitCode = int32(d.Varint())
	ev.Kind = EventKind(d.Enum("event kind", byte(numEventKinds)))
	ev.Reason = Reason(d.Enum("event reason", byte(numReasons)))
	if ev.Kind == 0 {
		d.Fail("event %d has no kind", seq)
	}
	return seq, ev
}

// emit appends an event for job j.
func (f *FSM) emit(kind EventKind, j *sfq.Job, reason Reason) {
	ev := eventRecord{Job: j.ID, At: f.clock, Tenant: j.Tenant, Attempt: j.Attempt, Kind: kind, Reason: reason}
	switch kind {
	case EvAssigned, EvStarted:
		ev.Worker = j.Worker
	case EvCompleted, EvFailed, EvCancelled, EvTimedOut, EvRequeued:
		ev.CPUMs = j.CPUMs
		if j.Result != nil {
			ev.ExitCode = j.Result.ExitCode
		}
	}
	f.events.Put(f.nextEvent, ev)
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
	if ch.From == ch.To {
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
