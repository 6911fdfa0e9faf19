package rpc

import (
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/baristahq/barista/internal/text"
	"github.com/baristahq/barista/internal/wire"
	"github.com/baristahq/barista/sfq"
)

// The submit rate and the write rate are held on the leader by
// internal/ratelimit (ClientService.submits, base.writes); here are
// their refusals.

// submitRateError is the refusal of a submit over the rate: the rate, and
// when to retry, in the message and as a RetryInfo detail.
func submitRateError(tenant string, r sfq.RateLimit, wait time.Duration) error {
	wait = max(wait.Round(time.Millisecond), time.Millisecond)
	st := status.New(codes.ResourceExhausted, fmt.Sprintf("submit_rate: tenant %q may submit %s (bursts of %d); retry in %s", tenant, r.PerPeriod(), r.BurstOf(), wait))
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)},
		&errdetails.ErrorInfo{Reason: text.ReasonRateLimited, Domain: wire.ErrorDomain}); err == nil {
		st = d
	}
	return st.Err()
}

// writeRateError is the refusal of a write call over the write rate
// (limits.write_rate): when to retry, in the message and as a RetryInfo.
func writeRateError(r sfq.RateLimit, wait time.Duration) error {
	wait = max(wait.Round(time.Millisecond), time.Millisecond)
	st := status.New(codes.ResourceExhausted, fmt.Sprintf("write_rate: a caller may make %s write calls (bursts of %d; limits.write_rate); retry in %s", r.PerPeriod(), r.BurstOf(), wait))
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)},
		&errdetails.ErrorInfo{Reason: text.ReasonRateLimited, Domain: wire.ErrorDomain}); err == nil {
		st = d
	}
	return st.Err()
}
