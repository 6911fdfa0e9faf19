package rpc

import (
	"github.com/prometheus/client_golang/prometheus"

	"barista/raftnode"
	"barista/sfq"
)

// metrics are the RPC layer's instruments.
type metrics struct {
	dispatchLatency prometheus.Histogram
	expiries        *prometheus.CounterVec
	fenced          *prometheus.CounterVec
	unproposed      *prometheus.CounterVec
}

func newMetrics(reg *prometheus.Registry, node *raftnode.Node) *metrics {
	m := &metrics{
		dispatchLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "barista_dispatch_latency_seconds", Help: "Time from a worker's Ready to its Assign, on the leader.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		expiries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "barista_expiries_total", Help: "Deadlines the reaper expired, by kind (ack, lease, timeout)."}, []string{"kind"}),
		fenced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "barista_fenced_writes_total", Help: "Worker writes refused by fencing, by message (started, heartbeat, finished)."}, []string{"message"}),
		unproposed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "barista_worker_reports_unproposed_total",
			Help: "Worker reports answered at the edge without a log entry, by message and reason (repeat: the state shows it applied; unknown_job; invalid)."},
			[]string{"message", "reason"}),
	}
	reg.MustRegister(m.dispatchLatency, m.expiries, m.fenced, m.unproposed, &stateCollector{node: node})
	return m
}

// stateCollector reports the replicated state at scrape time. Every node
// reports the same values for the same applied index.
type stateCollector struct{ node *raftnode.Node }

var (
	descQueued     = prometheus.NewDesc("barista_queued_jobs", "Queued jobs by tenant and size.", []string{"tenant", "size"}, nil)
	descRunning    = prometheus.NewDesc("barista_running_jobs", "Assigned and running jobs by tenant.", []string{"tenant"}, nil)
	descDispatches = prometheus.NewDesc("barista_dispatches_total", "Dispatches by tenant.", []string{"tenant"}, nil)
	descCost       = prometheus.NewDesc("barista_dispatched_cost_ms_total", "Estimated CPU milliseconds dispatched, by tenant.", []string{"tenant"}, nil)
	descCPU        = prometheus.NewDesc("barista_cpu_billed_ms_total", "CPU milliseconds billed (zombies included), by tenant.", []string{"tenant"}, nil)
	descEnded      = prometheus.NewDesc("barista_jobs_ended_total", "Jobs that ended, by tenant and final state.", []string{"tenant", "state"}, nil)
	descFailures   = prometheus.NewDesc("barista_run_failures_total", "Failed runs and lost leases, by tenant.", []string{"tenant"}, nil)
	descWeight     = prometheus.NewDesc("barista_tenant_weight", "Current weight (tier x multiplier x decay), by tenant.", []string{"tenant", "tier"}, nil)
	descApplied    = prometheus.NewDesc("barista_applied_index", "Last Raft index applied by this node.", nil, nil)
	descLeader     = prometheus.NewDesc("barista_is_leader", "1 if this node is the leader.", nil, nil)
	descVnow       = prometheus.NewDesc("barista_virtual_now_ms", "Virtual time now, in virtual milliseconds.", nil, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQueued, descRunning, descDispatches, descCost, descCPU, descEnded, descFailures, descWeight, descApplied, descLeader, descVnow} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.node.FSM
	clock, _ := f.Clock()
	ch <- prometheus.MustNewConstMetric(descApplied, prometheus.GaugeValue, float64(c.node.Raft().AppliedIndex()))
	leader := 0.0
	if c.node.IsLeader() {
		leader = 1
	}
	ch <- prometheus.MustNewConstMetric(descLeader, prometheus.GaugeValue, leader)
	// Built under the read lock, sent after it: a slow scrape must not
	// hold up Apply.
	var out []prometheus.Metric
	f.Read(func(s *sfq.Scheduler) {
		out = append(out, prometheus.MustNewConstMetric(descVnow, prometheus.GaugeValue, float64(s.VirtualNow())/1000))
		s.Tenants(func(_ uint32, t *sfq.Tenant) bool {
			for sz := sfq.Size(0); sz < sfq.NumSizes; sz++ {
				out = append(out, prometheus.MustNewConstMetric(descQueued, prometheus.GaugeValue, float64(t.Queued[sz]), t.Name, sz.String()))
			}
			b := t.Billing
			out = append(out, prometheus.MustNewConstMetric(descRunning, prometheus.GaugeValue, float64(t.Running), t.Name))
			out = append(out, prometheus.MustNewConstMetric(descDispatches, prometheus.CounterValue, float64(b.Dispatches), t.Name))
			out = append(out, prometheus.MustNewConstMetric(descCost, prometheus.CounterValue, float64(b.DispatchedCostMs), t.Name))
			out = append(out, prometheus.MustNewConstMetric(descCPU, prometheus.CounterValue, float64(b.CPUMs), t.Name))
			for state, n := range map[string]uint64{"completed": b.Completed, "failed": b.Failed, "cancelled": b.Cancelled, "timed_out": b.TimedOut} {
				out = append(out, prometheus.MustNewConstMetric(descEnded, prometheus.CounterValue, float64(n), t.Name, state))
			}
			out = append(out, prometheus.MustNewConstMetric(descFailures, prometheus.CounterValue, float64(b.Failures), t.Name))
			out = append(out, prometheus.MustNewConstMetric(descWeight, prometheus.GaugeValue, float64(s.Weight(t, clock))/float64(sfq.WeightOne), t.Name, t.Tier.String()))
			return true
		})
	})
	for _, m := range out {
		ch <- m
	}
}
