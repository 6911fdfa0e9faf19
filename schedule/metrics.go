package schedule

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/sfq"
)

// Metrics are the leader's counts of the slots it proposed and how late
// their entries committed. The counts of every schedule, the same on
// every node, are the state's (internal/statemetrics).
type Metrics struct {
	slots    *prometheus.CounterVec
	lateness prometheus.Histogram
}

// NewMetrics registers the loop's metrics with reg (none if nil). A nil
// *Metrics counts nothing.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		slots: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "barista_schedule_slots_proposed_total",
			Help: "Slots of schedules this node proposed as leader, by what Apply did: fired (its job submitted), skipped (overlap policy), refused (its submit refused), missed (behind the catch-up window), stale (its schedule changed, or the slot was spent)."},
			[]string{"outcome"}),
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "barista_schedule_fire_lateness_seconds",
			Help:    "From when a slot was due (its time plus its jitter) to the commit of the entry that fired it, on the leader's cluster clock.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}),
	}
	for _, o := range []string{"fired", "skipped", "refused", "missed", "stale"} {
		m.slots.WithLabelValues(o)
	}
	if reg != nil {
		reg.MustRegister(m.slots, m.lateness)
	}
	return m
}

// observe counts one command's result; at is when its slot was due (0
// for a miss), done when its entry committed.
func (m *Metrics) observe(r fsm.Result, at, done sfq.Time) {
	if m == nil {
		return
	}
	outcome := r.Fire.String()
	if outcome == "" || r.Refused() || r.Outcome == sfq.Duplicate {
		outcome = "stale"
	}
	n := 1.0
	if outcome == "missed" {
		n = float64(r.Count) // the slots one miss spent
	}
	m.slots.WithLabelValues(outcome).Add(n)
	if at != 0 && outcome != "stale" && outcome != "missed" {
		m.lateness.Observe(float64(max(done-at, 0)) / 1000)
	}
}
