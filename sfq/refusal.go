package sfq

import (
	"errors"
	"fmt"

	"github.com/baristahq/barista/internal/text"
)

// Code classifies a refusal. The API maps it to a gRPC status code.
type Code uint8

// The refusal codes.
const (
	CodeOK Code = iota
	CodeInvalid
	CodeNotFound
	CodeAlreadyExists
	CodeFailedPrecondition
	CodeResourceExhausted
	CodeInternal
	CodePermissionDenied
)

var codeNames = [...]string{"OK", "INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS", "FAILED_PRECONDITION", "RESOURCE_EXHAUSTED", "INTERNAL", "PERMISSION_DENIED"}

func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("code(%d)", uint8(c))
}

// Refusal is a command refused by a rule, as data: its code, the field of
// the command at fault ("" when no one field is), the rule's reason (one
// of the text.Reason names clients branch on, or ""), and the message: one
// sentence that names what was given and what is allowed. Every path
// shows the message as it is (the API after its status code, the CLI,
// HTTP, replay); nothing rewords it or cuts it.
type Refusal struct {
	Code   Code
	Field  string
	Reason string
	Msg    string
}

// Error returns the message.
func (r *Refusal) Error() string { return r.Msg }

// Line is the refusal as one line: "CODE_NAME: message".
func (r *Refusal) Line() string { return r.Code.String() + ": " + r.Msg }

// Is makes a refusal match the sentinel of its code.
func (r *Refusal) Is(target error) bool {
	switch r.Code {
	case CodeInvalid:
		return target == ErrInvalid
	case CodePermissionDenied:
		return target == ErrPermission
	case CodeResourceExhausted:
		return target == ErrExhausted
	case CodeFailedPrecondition:
		return target == ErrPrecondition
	case CodeNotFound:
		return r.Reason == text.ReasonTenantUnknown && target == ErrUnknownTenant ||
			r.Reason == text.ReasonPoolUnknown && target == ErrUnknownPool ||
			r.Reason == text.ReasonResourceUnknown && target == ErrUnknownResource
	}
	return false
}

// RefusalOf classifies an error of the core: a *Refusal as it is, any
// other by the sentinel it wraps, its message its text. It is the one
// place an error becomes a refusal. A wrapped refusal keeps its code,
// reason and field, with the whole text as its message.
func RefusalOf(err error) *Refusal {
	var r *Refusal
	if errors.As(err, &r) {
		if error(r) == err {
			return r
		}
		out := *r
		out.Msg = err.Error()
		return &out
	}
	out := &Refusal{Code: CodeInternal, Msg: err.Error()}
	switch {
	case errors.Is(err, ErrInvalid):
		out.Code = CodeInvalid
		var inv *text.InvalidError
		if errors.As(err, &inv) {
			out.Field = inv.Field
		}
	case errors.Is(err, ErrUnknownTenant):
		out.Code, out.Reason = CodeNotFound, text.ReasonTenantUnknown
	case errors.Is(err, ErrUnknownPool):
		out.Code, out.Reason = CodeNotFound, text.ReasonPoolUnknown
	case errors.Is(err, ErrUnknownJob):
		out.Code = CodeNotFound
	case errors.Is(err, ErrTenantBusy), errors.Is(err, ErrRefused), errors.Is(err, ErrPrecondition):
		out.Code = CodeFailedPrecondition
	case errors.Is(err, ErrPermission):
		out.Code = CodePermissionDenied
	case errors.Is(err, ErrExhausted):
		out.Code = CodeResourceExhausted
	}
	return out
}

// Refusef builds a refusal of field ("" when no one field is at fault):
// its message is the formatted text, after "field: " when there is one
// (text.Message).
func Refusef(code Code, reason, field, format string, args ...any) *Refusal {
	return &Refusal{Code: code, Field: field, Reason: reason, Msg: text.Message(field, format, args...)}
}

// invalidf refuses malformed or out-of-range input (Invalid).
func invalidf(field, format string, args ...any) error {
	return Refusef(CodeInvalid, "", field, format, args...)
}

// permissionf refuses what the tenant is not allowed (PermissionDenied).
func permissionf(reason, field, format string, args ...any) error {
	return Refusef(CodePermissionDenied, reason, field, format, args...)
}

// preconditionf refuses what the state does not allow as it stands.
func preconditionf(reason, field, format string, args ...any) error {
	return Refusef(CodeFailedPrecondition, reason, field, format, args...)
}

// exhaustedf refuses what would pass a bound (ResourceExhausted).
func exhaustedf(reason, field, format string, args ...any) error {
	return Refusef(CodeResourceExhausted, reason, field, format, args...)
}

// UnknownTenant is the refusal of a tenant name that names no tenant.
func UnknownTenant(name string) error {
	return Refusef(CodeNotFound, text.ReasonTenantUnknown, "", "unknown tenant %q", name)
}

// UnknownPool is the refusal of a pool name that names no live pool.
func UnknownPool(name string) error {
	return Refusef(CodeNotFound, text.ReasonPoolUnknown, "", "unknown pool %q", name)
}
