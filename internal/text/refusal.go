package text

import "fmt"

// InvalidError is input refused by a rule of this package: the field at
// fault (as data, "" when no one field is) and a message that names it
// and what is wrong with it, shown as it is (the status code already says
// "invalid argument").
type InvalidError struct{ Field, Msg string }

func (e *InvalidError) Error() string { return e.Msg }

// Is makes an InvalidError match ErrInvalid.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// Invalidf is an InvalidError of field with a formatted message (%w is
// allowed: its text is kept), which starts "field: " when field is not
// "".
func Invalidf(field, format string, args ...any) error {
	return &InvalidError{Field: field, Msg: Message(field, format, args...)}
}

// Message is a refusal's message: the formatted text, after "field: "
// when field is not "". It is the one place a refusal's field is written
// into its text; nothing reads it back.
func Message(field, format string, args ...any) string {
	msg := fmt.Errorf(format, args...).Error()
	if field != "" {
		return field + ": " + msg
	}
	return msg
}

// invalidName is an InvalidError of field whose message names the field
// in its own words ("tenant is empty").
func invalidName(field, format string, args ...any) error {
	return &InvalidError{Field: field, Msg: fmt.Errorf(format, args...).Error()}
}

// The reasons a refusal names: stable names a client branches on, sent
// as the reason of the status's google.rpc.ErrorInfo (domain
// barista.dev). The servers set them (package sfq's Refusal), the Go
// client matches them (client.ErrQuotaExceeded and its siblings); the
// message beside them is for people and may change.
const (
	// ReasonQuotaExceeded: the tenant holds its max_queued jobs (or the
	// cluster's default_max_queued), or its max_queued_bytes of payloads.
	ReasonQuotaExceeded = "QUOTA_EXCEEDED"
	// ReasonRateLimited: the submit rate refused it; try again after the
	// time the status's RetryInfo gives.
	ReasonRateLimited = "RATE_LIMITED"
	// ReasonKeyConflict: the idempotency key was used for a job with
	// other content.
	ReasonKeyConflict = "KEY_CONFLICT"
	// ReasonKeyJobGone: the idempotency key names a job that no longer
	// exists (purged or pruned), within the key's dedupe window.
	ReasonKeyJobGone = "KEY_JOB_GONE"
	// ReasonTenantUnknown: the tenant does not exist (and the cluster
	// makes none implicitly).
	ReasonTenantUnknown = "TENANT_UNKNOWN"
	// ReasonPoolUnknown: the pool does not exist.
	ReasonPoolUnknown = "POOL_UNKNOWN"
	// ReasonResourceUnknown: the resource a job uses, or a command
	// names, is not declared.
	ReasonResourceUnknown = "RESOURCE_UNKNOWN"
	// ReasonTooLarge: the payload is larger than the cluster's limit: a
	// permanent refusal, never worth a retry.
	ReasonTooLarge = "TOO_LARGE"
	// ReasonMaxClass: the job's class is above the tenant's max_class.
	ReasonMaxClass = "MAX_CLASS"
	// ReasonDeadlinesNotAllowed: the tenant may not submit deadlines.
	ReasonDeadlinesNotAllowed = "DEADLINES_NOT_ALLOWED"
	// ReasonMaxGroups: a new group would pass the tenant's max_groups.
	ReasonMaxGroups = "MAX_GROUPS"
	// ReasonSubscriptionRequired: the pool admits only tenants with a
	// subscription there.
	ReasonSubscriptionRequired = "SUBSCRIPTION_REQUIRED"
	// ReasonFeatureLevel: the command needs a higher cluster feature
	// level.
	ReasonFeatureLevel = "FEATURE_LEVEL"
)
