// Package ratelimit holds keys (a tenant, a caller) to a rate by GCRA on
// a wall clock, each key apart. The leader holds each tenant's submits
// to the cluster's submit_rate with it, and each caller's write calls to
// limits.write_rate: it protects the log, and is not part of the
// replicated state (a new leader starts every key with a full burst).
package ratelimit

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baristahq/barista/sfq"
)

// Limiter holds each key to a rate (sfq.RateLimit: N calls a period,
// in bursts of up to its burst) by GCRA on the clock it is given.
type Limiter struct {
	now func() time.Time
	mu  sync.Mutex
	// tat is each key's theoretical arrival time; a key whose tat has
	// passed is as if absent, and is dropped when the map grows.
	tat   map[string]time.Time
	sweep int
	// refused counts calls refused for the rate (nil: not counted).
	refused prometheus.Counter
}

// New returns a limiter on the clock now that counts the calls it
// refuses in refused (nil: not counted).
func New(now func() time.Time, refused prometheus.Counter) *Limiter {
	return &Limiter{now: now, tat: map[string]time.Time{}, sweep: 1024, refused: refused}
}

// Charge counts n more calls of key under r, admitted or not (a debt
// its next calls pay: the weight of a call that did more than one
// write's work, known only once it was applied).
func (l *Limiter) Charge(key string, r sfq.RateLimit, n int) {
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

// Take admits up to n calls of key under r and returns how many it
// admitted; when fewer than n, also how long until the next would be.
func (l *Limiter) Take(key string, r sfq.RateLimit, n int) (int, time.Duration) {
	if r.N == 0 || n == 0 {
		return n, 0
	}
	interval := (time.Duration(r.PeriodMs)*time.Millisecond + time.Duration(r.N) - 1) / time.Duration(r.N)
	tau := time.Duration(r.BurstOf()-1) * interval
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	tat, ok := l.tat[key]
	if !ok || tat.Before(now) {
		tat = now
	}
	admitted := 0
	for admitted < n && !now.Before(tat.Add(-tau)) {
		tat = tat.Add(interval)
		admitted++
	}
	l.tat[key] = tat
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
