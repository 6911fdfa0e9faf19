// Package inflight bounds the bytes of requests a server holds while it
// receives them: per caller identity and in total. A request reserves
// its size (or, when it cannot be known before it is read, the largest
// it may be) before any of it is read, and gives it back once it has
// been read and handled; a request that would pass a bound is refused,
// unread (at once, or after waiting while the requests ahead of it are
// read: ReserveWait), so that callers who stall their bodies can hold at
// most the bounds, not memory without end.
package inflight

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Which bound refused a reservation.
type Which uint8

const (
	// None: the reservation was made.
	None Which = iota
	// PerIdentity: the caller's own bound (answer 429 / RESOURCE_EXHAUSTED:
	// it may retry once its other requests are in).
	PerIdentity
	// Total: the server's bound (answer 503 / UNAVAILABLE: another node
	// may take it).
	Total
)

// Budget holds the reservations. The zero value is not usable: New.
type Budget struct {
	perIdentity, total int64

	mu   sync.Mutex
	used map[string]int64
	all  int64
	// waiters counts the ReserveWait calls waiting for bytes; freed is
	// closed (and replaced) when bytes are given back while any wait.
	waiters int
	freed   chan struct{}
	bytes   prometheus.Gauge
	// refused counts refusals by bound.
	refused *prometheus.CounterVec
}

// New returns a budget of perIdentity bytes for each identity and total
// bytes in all (a bound of 0 or less: none). name prefixes its metrics
// (barista_<name>_inflight_bytes, barista_<name>_inflight_refused_total);
// reg, if set, gets them.
func New(name string, perIdentity, total int64, reg prometheus.Registerer) *Budget {
	b := &Budget{perIdentity: perIdentity, total: total, used: map[string]int64{},
		bytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "barista_" + name + "_inflight_bytes",
			Help: "Bytes of " + name + " requests this node holds reserved while it receives and serves them."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "barista_" + name + "_inflight_refused_total",
			Help: "Requests (" + name + ") refused unread because their bytes would pass a bound: per_identity or total."}, []string{"bound"}),
	}
	b.refused.WithLabelValues("per_identity")
	b.refused.WithLabelValues("total")
	if reg != nil {
		reg.MustRegister(b.bytes, b.refused)
	}
	return b
}

// Reserve reserves n bytes for identity; release gives them back (once;
// later calls do nothing). A reservation that would pass a bound is not
// made: which names the bound, and release is nil.
func (b *Budget) Reserve(identity string, n int64) (release func(), which Which) {
	return b.ReserveWait(context.Background(), identity, n, 0, 0)
}

// ReserveWait is Reserve that, when a bound refuses, waits for bytes to
// be given back and tries again, for as long as some are given back at
// least every progress (and at most wait, or until ctx ends). A request
// reserves the largest it may be only for the moment it takes to be read:
// a burst of small requests then waits those moments rather than being
// refused, while behind requests that stall (nothing given back for
// progress) the others are refused, unread, as Reserve refuses them.
func (b *Budget) ReserveWait(ctx context.Context, identity string, n int64, progress, wait time.Duration) (release func(), which Which) {
	b.mu.Lock()
	release, which = b.reserveLocked(identity, n)
	if which == None || wait <= 0 {
		b.mu.Unlock()
		if which != None {
			b.countRefused(which)
		}
		return release, which
	}
	timer := time.NewTimer(wait) // the whole wait, however often woken
	defer timer.Stop()
	stalled := time.NewTimer(progress)
	defer stalled.Stop()
	for {
		if b.freed == nil {
			b.freed = make(chan struct{})
		}
		freed := b.freed
		b.waiters++
		b.mu.Unlock()
		expired := false
		select {
		case <-freed:
			stalled.Reset(progress)
		case <-stalled.C:
			expired = true
		case <-timer.C:
			expired = true
		case <-ctx.Done():
			expired = true
		}
		b.mu.Lock()
		b.waiters--
		release, which = b.reserveLocked(identity, n)
		if which == None || expired {
			b.mu.Unlock()
			if which != None {
				b.countRefused(which)
			}
			return release, which
		}
	}
}

func (b *Budget) countRefused(which Which) {
	if which == PerIdentity {
		b.refused.WithLabelValues("per_identity").Inc()
	} else {
		b.refused.WithLabelValues("total").Inc()
	}
}

// reserveLocked is Reserve under b.mu, without counting a refusal.
func (b *Budget) reserveLocked(identity string, n int64) (release func(), which Which) {
	switch {
	case b.perIdentity > 0 && b.used[identity]+n > b.perIdentity && b.used[identity] > 0:
		return nil, PerIdentity
	case b.total > 0 && b.all+n > b.total && b.all > 0:
		return nil, Total
	}
	b.used[identity] += n
	b.all += n
	b.bytes.Add(float64(n))
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			if b.used[identity] -= n; b.used[identity] <= 0 {
				delete(b.used, identity)
			}
			b.all -= n
			if b.waiters > 0 && b.freed != nil {
				close(b.freed) // wake the waiters: they try again
				b.freed = nil
			}
			b.mu.Unlock()
			b.bytes.Sub(float64(n))
		})
	}, None
}

// PerIdentity returns the bound of each identity.
func (b *Budget) PerIdentity() int64 { return b.perIdentity }

// Held returns the bytes reserved now, by identity and in all.
func (b *Budget) Held(identity string) (mine, all int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used[identity], b.all
}
