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
			r.Reason == text.ReasonPoolUnknown && target == ErrUnknownPool
	}
	return false
}

// RefusalOf classifies an error of the core: a *Refusal as it is, any
// other by the sentinel it wraps, its message its text. It is the one
// place an error becomes a refusal.
func RefusalOf(err error) *Refusal {
	var r *Refusal
	if errors.As(err, &r) {
		if error(r) == err {
			return r
		}
		out := *r // wrapped: its code and reason, the whole text
		out.Msg = err.Error()
		out.Field = RefusalField(out.Msg)
		return &out
	}
	out := &Refusal{Code: CodeInternal, Msg: err.Error()}
	switch {
	case errors.Is(err, ErrInvalid):
		out.Code, out.Field = CodeInvalid, RefusalField(out.Msg)
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

// Refusef builds a refusal; the field is read from the message when it
// starts with one ("class: ...").
func Refusef(code Code, reason, format string, args ...any) *Refusal {
	msg := fmt.Errorf(format, args...).Error()
	return &Refusal{Code: code, Field: RefusalField(msg), Reason: reason, Msg: msg}
}

// RefusalField reads the field a message starts with ("est_cost_ms: must be
// positive" names est_cost_ms), or "".
func RefusalField(msg string) string {
	for i := 0; i < len(msg); i++ {
		switch b := msg[i]; {
		case b >= 'a' && b <= 'z', b >= '0' && b <= '9' && i > 0, b == '_', b == '.' && i > 0, b == '[' || b == ']':
		case b == ':' && i > 0 && i+1 < len(msg) && msg[i+1] == ' ':
			return msg[:i]
		default:
			return ""
		}
	}
	return ""
}

// invalidf refuses malformed or out-of-range input (Invalid).
func invalidf(format string, args ...any) error { return Refusef(CodeInvalid, "", format, args...) }

// permissionf refuses what the tenant is not allowed (PermissionDenied).
func permissionf(reason, format string, args ...any) error {
	return Refusef(CodePermissionDenied, reason, format, args...)
}

// preconditionf refuses what the state does not allow as it stands.
func preconditionf(reason, format string, args ...any) error {
	return Refusef(CodeFailedPrecondition, reason, format, args...)
}

// exhaustedf refuses what would pass a bound (ResourceExhausted).
func exhaustedf(reason, format string, args ...any) error {
	return Refusef(CodeResourceExhausted, reason, format, args...)
}

// UnknownTenant is the refusal of a tenant name that names no tenant.
func UnknownTenant(name string) error {
	return Refusef(CodeNotFound, text.ReasonTenantUnknown, "unknown tenant %q", name)
}

// UnknownPool is the refusal of a pool name that names no live pool.
func UnknownPool(name string) error {
	return Refusef(CodeNotFound, text.ReasonPoolUnknown, "unknown pool %q", name)
}
