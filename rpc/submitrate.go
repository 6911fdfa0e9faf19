package rpc

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/baristahq/barista/internal/text"
	"github.com/baristahq/barista/internal/wire"
	"github.com/baristahq/barista/sfq"
)

// submitLimiter holds each tenant to the cluster's submit_rate on the
// leader, where every node's submits arrive: GCRA by the leader's wall
// clock (it protects the log, and is not part of the replicated state: a
// new leader starts every tenant with a full burst).
type submitLimiter struct {
	now func() time.Time
	mu  sync.Mutex
	// tat is each tenant's theoretical arrival time; a tenant whose tat
	// has passed is as if absent, and is dropped when the map grows.
	tat   map[string]time.Time
	sweep int
	// refused counts submits refused for the rate (nil: not counted).
	refused prometheus.Counter
}

func newSubmitLimiter(now func() time.Time, refused prometheus.Counter) *submitLimiter {
	return &submitLimiter{now: now, tat: map[string]time.Time{}, sweep: 1024, refused: refused}
}

// charge counts n more calls of key under r, admitted or not (a debt
// its next calls pay: the weight of a call that did more than one
// write's work, known only once it was applied).
func (l *submitLimiter) charge(key string, r sfq.RateLimit, n int) {
	if r.N == 0 || n <= 0 {
		return
	}
	interval := (time.Duration(r.PeriodMs)*time.Millisecond + time.Duration(r.N) - 1) / time.Duration(r.N)
	l.mu.Lock()
	defer l.mu.Unlock()
	tat := l.tat[key]
	if now := l.now(); tat.Before(now) {
		tat = now
	}
	l.tat[key] = tat.Add(time.Duration(n) * interval)
}

// take admits up to n submits of tenant under r and returns how many it
// admitted; when fewer than n, also how long until the next would be.
func (l *submitLimiter) take(tenant string, r sfq.RateLimit, n int) (int, time.Duration) {
	if r.N == 0 || n == 0 {
		return n, 0
	}
	interval := (time.Duration(r.PeriodMs)*time.Millisecond + time.Duration(r.N) - 1) / time.Duration(r.N)
	tau := time.Duration(r.BurstOf()-1) * interval
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	tat, ok := l.tat[tenant]
	if !ok || tat.Before(now) {
		tat = now
	}
	admitted := 0
	for admitted < n && !now.Before(tat.Add(-tau)) {
		tat = tat.Add(interval)
		admitted++
	}
	l.tat[tenant] = tat
	if l.refused != nil && admitted < n {
		l.refused.Add(float64(n - admitted))
	}
	if len(l.tat) > l.sweep {
		for t, at := range l.tat {
			if !at.After(now) {
				delete(l.tat, t)
			}
		}
		l.sweep = max(1024, 2*len(l.tat))
	}
	if admitted == n {
		return n, 0
	}
	return admitted, tat.Add(-tau).Sub(now)
}

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
