package webhook

import "github.com/prometheus/client_golang/prometheus"

// metrics are the deliverer's Prometheus instruments (docs/webhooks.md).
// Their labels are bounded: no tenant names.
type metrics struct {
	requests   *prometheus.CounterVec
	events     prometheus.Counter
	failing    prometheus.Gauge
	unsignable prometheus.Gauge
	slow       prometheus.Gauge
	inFlight   *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "barista_webhook_requests_total",
			Help: "Webhook requests this node sent while it led, by result: delivered (2xx) or failed."}, []string{"result"}),
		events: prometheus.NewCounter(prometheus.CounterOpts{Name: "barista_webhook_events_delivered_total",
			Help: "Events in webhook requests answered 2xx (repeats included)."}),
		failing: prometheus.NewGauge(prometheus.GaugeOpts{Name: "barista_webhook_endpoints_failing",
			Help: "Webhook endpoints whose last request failed (on the leader; 0 elsewhere)."}),
		unsignable: prometheus.NewGauge(prometheus.GaugeOpts{Name: "barista_webhook_endpoints_unsignable",
			Help: "Webhook endpoints the leader cannot sign for: it has no webhook key, or another key than the endpoint's (0 elsewhere)."}),
	}
	m.slow = prometheus.NewGauge(prometheus.GaugeOpts{Name: "barista_webhook_endpoints_slow",
		Help: "Webhook endpoints whose last request was out webhooks.slow_after or longer: their requests share webhooks.slow_workers (on the leader; 0 elsewhere)."})
	m.inFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "barista_webhook_requests_in_flight",
		Help: "Webhook requests out, by share: prompt (at most webhooks.workers − webhooks.slow_workers) or slow (webhooks.slow_workers, and the prompt ones that turned slow)."},
		[]string{"lane"})
	m.requests.WithLabelValues("delivered")
	m.requests.WithLabelValues("failed")
	m.inFlight.WithLabelValues("prompt")
	m.inFlight.WithLabelValues("slow")
	if reg != nil {
		reg.MustRegister(m.requests, m.events, m.failing, m.unsignable, m.slow, m.inFlight)
	}
	return m
}
