package client

import (
	"context"
	"errors"
	"time"

	"github.com/baristahq/barista/internal/wire"
	pb "github.com/baristahq/barista/proto"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The sentinels an *Error matches with errors.Is, one per gRPC code.
// An error with code DEADLINE_EXCEEDED also matches
// context.DeadlineExceeded, and one with code CANCELLED context.Canceled.
var (
	ErrCanceled           = errors.New("cancelled")
	ErrUnknown            = errors.New("unknown error")
	ErrInvalid            = errors.New("invalid argument")
	ErrDeadlineExceeded   = errors.New("deadline exceeded")
	ErrNotFound           = errors.New("not found")
	ErrAlreadyExists      = errors.New("already exists")
	ErrPermissionDenied   = errors.New("permission denied")
	ErrResourceExhausted  = errors.New("resource exhausted")
	ErrFailedPrecondition = errors.New("failed precondition")
	ErrAborted            = errors.New("aborted")
	ErrOutOfRange         = errors.New("out of range")
	ErrUnimplemented      = errors.New("unimplemented")
	ErrInternal           = errors.New("internal error")
	ErrUnavailable        = errors.New("unavailable")
	ErrDataLoss           = errors.New("data loss")
	ErrUnauthenticated    = errors.New("unauthenticated")
)

// The sentinels of the causes a caller acts on, one per reason the
// cluster gives with a refusal (pb.Reason; docs/api.md, "Reasons"). An
// error matching one also matches the sentinel of its code: for example
// ErrQuotaExceeded and ErrRateLimited are ErrResourceExhausted,
// ErrKeyConflict ErrAlreadyExists, ErrTenantUnknown ErrNotFound,
// ErrTooLarge ErrInvalid.
var (
	// ErrQuotaExceeded: the tenant holds its max_queued jobs or
	// max_queued_bytes of payload (or the cluster its
	// max_total_queued_bytes); retry once some of its jobs have run.
	ErrQuotaExceeded = errors.New("quota exceeded")
	// ErrRateLimited: the tenant's submit_rate, or a node's write rate,
	// refused the call for now; RetryAfter says how long to wait.
	ErrRateLimited = errors.New("rate limited")
	// ErrKeyConflict: the idempotency key names a job of other content.
	ErrKeyConflict = errors.New("idempotency key conflict")
	// ErrKeyJobGone: the idempotency key names a job that no longer
	// exists (purged or pruned), within the key's dedupe window.
	ErrKeyJobGone = errors.New("idempotency key's job is gone")
	// ErrTenantUnknown: no such tenant (and the cluster makes none
	// implicitly).
	ErrTenantUnknown = errors.New("unknown tenant")
	// ErrPoolUnknown: no such pool.
	ErrPoolUnknown = errors.New("unknown pool")
	// ErrResourceUnknown: no such resource (a job's uses, or a resource
	// command).
	ErrResourceUnknown = errors.New("unknown resource")
	// ErrTooLarge: the payload is over the cluster's max_payload_bytes,
	// or the request over what any server takes; no retry helps.
	ErrTooLarge = errors.New("too large")
	// ErrMaxClass: the job's class is above the tenant's max_class.
	ErrMaxClass = errors.New("class above the tenant's max_class")
	// ErrDeadlinesNotAllowed: the tenant may not submit deadlines.
	ErrDeadlinesNotAllowed = errors.New("deadlines not allowed")
	// ErrMaxGroups: a job of a new group would pass the tenant's
	// max_groups.
	ErrMaxGroups = errors.New("too many groups")
	// ErrSubscriptionRequired: the pool admits only tenants with a
	// subscription there.
	ErrSubscriptionRequired = errors.New("subscription required")
	// ErrFeatureLevel: the call needs a higher cluster feature level (a
	// cluster still being upgraded).
	ErrFeatureLevel = errors.New("feature level too low")
	// ErrNotLeader: the node does not lead and did nothing with the call
	// (the Client asks another node itself; a caller sees it only when
	// no node could serve the call).
	ErrNotLeader = errors.New("not the leader")
)

// reasonSentinels is the sentinel of each reason (a test checks it
// against pb.Reason, the Python SDK's classes and docs/api.md).
var reasonSentinels = map[pb.Reason]error{
	pb.Reason_QUOTA_EXCEEDED:        ErrQuotaExceeded,
	pb.Reason_RATE_LIMITED:          ErrRateLimited,
	pb.Reason_KEY_CONFLICT:          ErrKeyConflict,
	pb.Reason_KEY_JOB_GONE:          ErrKeyJobGone,
	pb.Reason_TENANT_UNKNOWN:        ErrTenantUnknown,
	pb.Reason_POOL_UNKNOWN:          ErrPoolUnknown,
	pb.Reason_TOO_LARGE:             ErrTooLarge,
	pb.Reason_MAX_CLASS:             ErrMaxClass,
	pb.Reason_DEADLINES_NOT_ALLOWED: ErrDeadlinesNotAllowed,
	pb.Reason_MAX_GROUPS:            ErrMaxGroups,
	pb.Reason_SUBSCRIPTION_REQUIRED: ErrSubscriptionRequired,
	pb.Reason_FEATURE_LEVEL:         ErrFeatureLevel,
	pb.Reason_NOT_LEADER:            ErrNotLeader,
	pb.Reason_RESOURCE_UNKNOWN:      ErrResourceUnknown,
}

// reasonSentinel is the sentinel of a reason's name, or nil.
func reasonSentinel(name string) error {
	if r, ok := pb.Reason_value[name]; ok && r != 0 {
		return reasonSentinels[pb.Reason(r)]
	}
	return nil
}

// ErrClosed is returned by the calls of a Client after Close.
var ErrClosed = errors.New("client: closed")

var sentinels = map[codes.Code]error{
	codes.Canceled:           ErrCanceled,
	codes.Unknown:            ErrUnknown,
	codes.InvalidArgument:    ErrInvalid,
	codes.DeadlineExceeded:   ErrDeadlineExceeded,
	codes.NotFound:           ErrNotFound,
	codes.AlreadyExists:      ErrAlreadyExists,
	codes.PermissionDenied:   ErrPermissionDenied,
	codes.ResourceExhausted:  ErrResourceExhausted,
	codes.FailedPrecondition: ErrFailedPrecondition,
	codes.Aborted:            ErrAborted,
	codes.OutOfRange:         ErrOutOfRange,
	codes.Unimplemented:      ErrUnimplemented,
	codes.Internal:           ErrInternal,
	codes.Unavailable:        ErrUnavailable,
	codes.DataLoss:           ErrDataLoss,
	codes.Unauthenticated:    ErrUnauthenticated,
}

// Error is a call refused or failed by the cluster (or by the transport
// to it): its gRPC code and the server's message. It prints as the code's
// name and the message ("NOT_FOUND: job 7 not found"), matches the
// sentinel of its code and that of its Reason with errors.Is, and
// status.Code and status.FromError read its code.
type Error struct {
	Code    codes.Code
	Message string
	// Reason is the cause the cluster gave (a pb.Reason's name:
	// QUOTA_EXCEEDED, RATE_LIMITED, KEY_CONFLICT, ...: docs/api.md), ""
	// when it gave none.
	Reason string
	// Field is the request field at fault, when the cluster names one
	// (est_cost_ms, payload, group, ...).
	Field string
	// RetryAfter is how long the cluster asked the caller to wait before
	// it tries again (a rate limit's RetryInfo); 0 when it asked nothing.
	RetryAfter time.Duration
	st         *status.Status
}

// Error returns "CODE_NAME: message".
func (e *Error) Error() string { return CodeName(e.Code) + ": " + e.Message }

// Is reports whether target is the sentinel of e's code (or the context
// error of DEADLINE_EXCEEDED and CANCELLED).
func (e *Error) Is(target error) bool {
	switch {
	case target == sentinels[e.Code]:
		return true
	case e.Reason != "" && target == reasonSentinel(e.Reason):
		return true
	case e.Code == codes.DeadlineExceeded:
		return target == context.DeadlineExceeded
	case e.Code == codes.Canceled:
		return target == context.Canceled
	}
	return false
}

// GRPCStatus returns the status the error came from, details included.
func (e *Error) GRPCStatus() *status.Status {
	if e.st != nil {
		return e.st
	}
	st := status.New(e.Code, e.Message)
	if e.Reason == "" && e.Field == "" {
		return st
	}
	info := &errdetails.ErrorInfo{Reason: e.Reason, Domain: ErrorDomain}
	if e.Field != "" {
		info.Metadata = map[string]string{wire.FieldKey: e.Field}
	}
	if d, err := st.WithDetails(info); err == nil {
		return d
	}
	return st
}

// CodeName is a gRPC code's canonical name ("INVALID_ARGUMENT"), the form
// the cluster writes in messages and SubmitResult.Error.
func CodeName(c codes.Code) string { return wire.CodeName(c) }

// wrap turns an error carrying a gRPC status into an *Error; nil stays
// nil, and an error without a status (the caller's own) is returned as it
// is.
func wrap(err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	return fromStatus(st)
}

// RetryAfter returns how long the cluster asked the caller to wait before
// it tries again, and whether it asked (ErrRateLimited's delay).
func RetryAfter(err error) (time.Duration, bool) {
	var e *Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		return e.RetryAfter, true
	}
	return RetryDelay(err)
}

// fromStatus is the *Error of a status: its code and message, and what
// its details say (reason, field, retry delay), never read from the
// message.
func fromStatus(st *status.Status) *Error {
	r := wire.RefusalOf(st)
	return &Error{Code: st.Code(), Message: st.Message(), Reason: r.Reason, Field: r.Field, RetryAfter: r.RetryAfter, st: st}
}

// RetryDelay returns how long the cluster asked the caller to wait before
// it tries again (a RetryInfo detail, sent with RESOURCE_EXHAUSTED by a
// tenant's submit_rate), and whether it asked.
func RetryDelay(err error) (time.Duration, bool) { return wire.RetryDelay(err) }

// Reason returns the reason the cluster gave for refusing a call, in the
// ErrorInfo detail of its status (a pb.Reason's name: QUOTA_EXCEEDED,
// TOO_LARGE, FEATURE_LEVEL, ...: docs/api.md, "Reasons"), or "" if it gave
// none. For a job of a batch, SubmitResultError's *Error carries it.
func Reason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return wire.Reason(err)
}

// SubmitResultError returns the refusal of one job of a batch as an
// *Error matching its code's and its reason's sentinels (ErrQuotaExceeded
// ...), with its Reason, Field and RetryAfter, read from the result's
// status, or nil if the job was accepted.
func SubmitResultError(r *pb.SubmitResult) error {
	st := wire.ResultStatus(r)
	if st == nil {
		return nil
	}
	return fromStatus(st)
}

// Where the cluster says, in an ErrorInfo detail of an UNAVAILABLE
// status, that the node no longer leads and did nothing with the call.
const (
	ErrorDomain     = wire.ErrorDomain
	ReasonNotLeader = wire.ReasonNotLeader
)

// IsNotLeader reports whether a call was refused by a node that no longer
// leads, before it did anything: another node may be asked, whatever the
// call.
func IsNotLeader(err error) bool { return wire.IsNotLeader(err) }
