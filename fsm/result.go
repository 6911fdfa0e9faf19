package fsm

import (
	"errors"
	"fmt"

	"github.com/baristahq/barista/sfq"
)

// Code classifies a refused command. The API layer maps it to a gRPC
// status code.
type Code uint8

// The result codes.
const (
	OK Code = iota
	Invalid
	NotFound
	AlreadyExists
	FailedPrecondition
	ResourceExhausted
	Internal
	PermissionDenied
)

var codeNames = [...]string{"OK", "INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS", "FAILED_PRECONDITION", "RESOURCE_EXHAUSTED", "INTERNAL", "PERMISSION_DENIED"}

func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("code(%d)", uint8(c))
}

// Result is what Apply returns for one command.
type Result struct {
	Code Code
	Msg  string
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
}

// Err returns the result's refusal as an error, or nil.
func (r Result) Err() error {
	if r.Code == OK {
		return nil
	}
	return &Refusal{Code: r.Code, Msg: r.Msg}
}

// Refusal is a command the state machine refused.
type Refusal struct {
	Code Code
	Msg  string
}

func (r *Refusal) Error() string { return r.Code.String() + ": " + r.Msg }

// refuse builds a refused result from an error of the core.
func refuse(err error) Result {
	code := Internal
	switch {
	case errors.Is(err, sfq.ErrInvalid):
		code = Invalid
	case errors.Is(err, sfq.ErrUnknownTenant), errors.Is(err, sfq.ErrUnknownJob), errors.Is(err, sfq.ErrUnknownPool):
		code = NotFound
	case errors.Is(err, sfq.ErrTenantBusy), errors.Is(err, sfq.ErrRefused), errors.Is(err, sfq.ErrPrecondition):
		code = FailedPrecondition
	case errors.Is(err, sfq.ErrPermission):
		code = PermissionDenied
	case errors.Is(err, sfq.ErrExhausted):
		code = ResourceExhausted
	case errors.Is(err, sfq.ErrOverflow):
		code = Internal
	}
	return Result{Code: code, Msg: err.Error()}
}

func refusef(code Code, format string, args ...any) Result {
	return Result{Code: code, Msg: fmt.Sprintf(format, args...)}
}
