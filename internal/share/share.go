// Package share bounds what callers hold at once of a server's shared
// capacity (calls in progress, reads waiting, ...), per identity and in
// total, the way the scheduler shares workers: a caller at its own bound
// is refused at once, never queued, so that it cannot make another
// caller wait or fail; past the total every caller is refused alike.
package share

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Which bound refused a place.
type Which uint8

const (
	// None: the place was taken.
	None Which = iota
	// PerIdentity: the caller holds its bound.
	PerIdentity
	// Total: every place is taken.
	Total
)

// Limiter counts the places each identity holds. The zero value is not
// usable: New.
type Limiter struct {
	perIdentity, total int

	mu   sync.Mutex
	used map[string]int
	all  int

	held    prometheus.Gauge
	refused *prometheus.CounterVec
}

// New returns a limiter of perIdentity places for each identity and
// total places in all (a bound of 0 or less: none). Its metrics are
// barista_<name> (the places held) and barista_<name>_refused_total (by
// bound: per_identity, total), help their help text; reg, if set, gets
// them.
func New(name, help string, perIdentity, total int, reg prometheus.Registerer) *Limiter {
	l := &Limiter{perIdentity: perIdentity, total: total, used: map[string]int{},
		held: prometheus.NewGauge(prometheus.GaugeOpts{Name: "barista_" + name, Help: help}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "barista_" + name + "_refused_total",
			Help: "Refused at once, by the bound reached: per_identity (the caller's own) or total. " + help}, []string{"bound"}),
	}
	l.refused.WithLabelValues("per_identity")
	l.refused.WithLabelValues("total")
	if reg != nil {
		reg.MustRegister(l.held, l.refused)
	}
	return l
}

// Take takes a place for identity. release gives it back (once; later
// calls do nothing). Past a bound nothing is taken: which names the
// bound, and release is nil.
func (l *Limiter) Take(identity string) (release func(), which Which) {
	l.mu.Lock()
	switch {
	case l.perIdentity > 0 && l.used[identity] >= l.perIdentity:
		l.mu.Unlock()
		l.refused.WithLabelValues("per_identity").Inc()
		return nil, PerIdentity
	case l.total > 0 && l.all >= l.total:
		l.mu.Unlock()
		l.refused.WithLabelValues("total").Inc()
		return nil, Total
	}
	l.used[identity]++
	l.all++
	l.mu.Unlock()
	l.held.Inc()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			if l.used[identity]--; l.used[identity] <= 0 {
				delete(l.used, identity)
			}
			l.all--
			l.mu.Unlock()
			l.held.Dec()
		})
	}, None
}

// Held returns the places identity holds, and all of them.
func (l *Limiter) Held(identity string) (mine, all int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.used[identity], l.all
}

// PerIdentity returns the bound of each identity (0: none).
func (l *Limiter) PerIdentity() int { return l.perIdentity }

// Total returns the bound of all (0: none).
func (l *Limiter) Total() int { return l.total }
