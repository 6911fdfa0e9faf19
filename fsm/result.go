package fsm

import (
	"github.com/baristahq/barista/sfq"
)

// Code classifies a refused command (sfq.Code). The API layer maps it to
// a gRPC status code.
type Code = sfq.Code

// The result codes.
const (
	OK                 = sfq.CodeOK
	Invalid            = sfq.CodeInvalid
	NotFound           = sfq.CodeNotFound
	AlreadyExists      = sfq.CodeAlreadyExists
	FailedPrecondition = sfq.CodeFailedPrecondition
	ResourceExhausted  = sfq.CodeResourceExhausted
	Internal           = sfq.CodeInternal
	PermissionDenied   = sfq.CodePermissionDenied
)

// Refusal is a refused command, as data (sfq.Refusal).
type Refusal = sfq.Refusal

// Result is what Apply returns for one command.
type Result struct {
	// Code, Field, Reason and Msg are the refusal's (Code OK: none; see
	// Refusal).
	Code   Code
	Field  string
	Reason string
	Msg    string
	// Job is the submitted or assigned job.
	Job sfq.JobID
	// Created is false when a submit returned an existing job.
	Created bool
	// Assigned reports that a dispatch found a job; Attempt and Size
	// describe it.
	Assigned bool
	Attempt  uint32
	Size     sfq.Size
	// Tenant is the tenant of the job concerned.
	Tenant string
	// Outcome is the lifecycle outcome of a worker event (a Stale or Zombie
	// outcome tells the leader to answer the worker with Reject).
	Outcome sfq.Outcome
	// HeartbeatOutcomes has one outcome per heartbeat of a batch.
	HeartbeatOutcomes []sfq.Outcome
	// Count is how many items a grant or prune touched.
	Count uint64
	// DeadlineMissed reports a dispatch of a job after its deadline.
	DeadlineMissed bool
	// Bulk is the outcome of a Redrive, CancelJobs or Purge (bulk.go).
	Bulk *BulkResult
	// Assign is what the worker of a dispatch that assigned a job is
	// told of it.
	Assign Assignment
	// Fire says what a ScheduleFire, ScheduleMiss or ScheduleRunNow did
	// with its slot (schedule.go).
	Fire FireOutcome
}

// Refused reports whether the command was refused.
func (r Result) Refused() bool { return r.Code != OK }

// Err returns the result's refusal as an error that prints as its line
// ("CODE_NAME: message") and unwraps to the *Refusal, or nil.
func (r Result) Err() error {
	if r.Code == OK {
		return nil
	}
	return resultError{r.Refusal()}
}

// resultError is a refused Result as an error.
type resultError struct{ r *Refusal }

func (e resultError) Error() string { return e.r.Line() }
func (e resultError) Unwrap() error { return e.r }

// Refusal returns the result's refusal (nil when it was not refused).
func (r Result) Refusal() *Refusal {
	if r.Code == OK {
		return nil
	}
	return &Refusal{Code: r.Code, Field: r.Field, Reason: r.Reason, Msg: r.Msg}
}

// refused is the result of a refusal.
func refused(r *Refusal) Result {
	return Result{Code: r.Code, Field: r.Field, Reason: r.Reason, Msg: r.Msg}
}

// refuse builds a refused result from an error of the core
// (sfq.RefusalOf: the one classification of an error).
func refuse(err error) Result { return refused(sfq.RefusalOf(err)) }

// refusef builds a refused result of field with no reason of its own.
func refusef(code Code, field, format string, args ...any) Result {
	return refused(sfq.Refusef(code, "", field, format, args...))
}

// refuseWhy builds a refused result that names its reason (a
// text.Reason name).
func refuseWhy(code Code, reason, field, format string, args ...any) Result {
	return refused(sfq.Refusef(code, reason, field, format, args...))
}

// invalidf refuses malformed or out-of-range input.
func invalidf(field, format string, args ...any) error {
	return sfq.Refusef(sfq.CodeInvalid, "", field, format, args...)
}
