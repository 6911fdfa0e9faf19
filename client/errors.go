package client

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/baristahq/barista/internal/text"
	"github.com/baristahq/barista/internal/wire"
	pb "github.com/baristahq/barista/proto"
	"google.golang.org/genproto/googleapis/rpc/code"
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

// The sentinels of the causes a caller acts on, read from the reason the
// cluster gives with a refusal (docs/api.md, "Submit validation"). An
// error matching one also matches the sentinel of its code:
// ErrQuotaExceeded and ErrRateLimited are ErrResourceExhausted,
// ErrKeyConflict ErrAlreadyExists, ErrTenantUnknown ErrNotFound,
// ErrTooLarge ErrInvalid.
var (
	// ErrQuotaExceeded: the tenant holds its max_queued jobs or
	// max_queued_bytes of payload; retry once some of its jobs have run.
	ErrQuotaExceeded = errors.New("quota exceeded")
	// ErrRateLimited: the tenant's submit_rate, or a node's write rate,
	// refused the call for now; RetryAfter says how long to wait.
	ErrRateLimited = errors.New("rate limited")
	// ErrKeyConflict: the idempotency key names a job of other content.
	ErrKeyConflict = errors.New("idempotency key conflict")
	// ErrTenantUnknown: no such tenant (and the cluster makes none
	// implicitly).
	ErrTenantUnknown = errors.New("unknown tenant")
	// ErrTooLarge: the payload is over the cluster's max_payload_bytes,
	// or the request over what any server takes; no retry helps.
	ErrTooLarge = errors.New("too large")
)

var reasonSentinels = map[string]error{
	text.ReasonQuotaExceeded: ErrQuotaExceeded,
	text.ReasonRateLimited:   ErrRateLimited,
	text.ReasonKeyConflict:   ErrKeyConflict,
	text.ReasonTenantUnknown: ErrTenantUnknown,
	text.ReasonTooLarge:      ErrTooLarge,
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
	// Reason is the cause the cluster gave (QUOTA_EXCEEDED, RATE_LIMITED,
	// KEY_CONFLICT, ...: docs/api.md), "" when it gave none.
	Reason string
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
	case e.Reason != "" && target == reasonSentinels[e.Reason]:
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
	if e.st == nil {
		return status.New(e.Code, e.Message)
	}
	return e.st
}

// CodeName is a gRPC code's canonical name ("INVALID_ARGUMENT"), the form
// the cluster writes in messages and SubmitResult.Error.
func CodeName(c codes.Code) string { return code.Code(c).String() }

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
	e = &Error{Code: st.Code(), Message: st.Message(), Reason: Reason(err), st: st}
	e.RetryAfter, _ = RetryDelay(err)
	return e
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

// RetryDelay returns how long the cluster asked the caller to wait before
// it tries again (a RetryInfo detail, sent with RESOURCE_EXHAUSTED by a
// tenant's submit_rate), and whether it asked.
func RetryDelay(err error) (time.Duration, bool) {
	st, ok := status.FromError(err)
	if !ok {
		return 0, false
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.RetryDelay != nil {
			return ri.RetryDelay.AsDuration(), true
		}
	}
	return 0, false
}

// Reason returns the reason the cluster gave for refusing a call, in the
// ErrorInfo detail of its status (QUOTA_EXCEEDED, TOO_LARGE,
// FEATURE_LEVEL, ...: docs/api.md, "Submit validation"), or "" if it gave
// none.
func Reason(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return ""
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == ErrorDomain {
			return info.Reason
		}
	}
	return ""
}

// ResultError returns the error of one job's SubmitResult in a batch
// ("CODE_NAME: message"), as an *Error matching its code's sentinel, or
// nil if the job was accepted.
//
// SubmitResultError reads a whole SubmitResult, its reason and retry
// delay included.
func ResultError(msg string) error {
	if msg == "" {
		return nil
	}
	name, rest, ok := strings.Cut(msg, ": ")
	c, known := code.Code_value[name]
	if !ok || !known {
		return &Error{Code: codes.Unknown, Message: msg}
	}
	return &Error{Code: codes.Code(c), Message: rest}
}

// SubmitResultError returns the refusal of one job of a batch as an
// *Error matching its code's and its reason's sentinels (ErrQuotaExceeded
// ...), with its RetryAfter, or nil if the job was accepted.
func SubmitResultError(r *pb.SubmitResult) error {
	err := ResultError(r.GetError())
	var e *Error
	if errors.As(err, &e) {
		e.Reason = r.GetReason()
		e.RetryAfter = time.Duration(r.GetRetryAfterMs()) * time.Millisecond
	}
	return err
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
