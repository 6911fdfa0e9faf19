// Package statemetrics is the Prometheus collectors of a node's /metrics
// page over its replicated state: every live tenant's, tier's, pool's and resource's
// jobs, counters, weights and fairness, read at scrape time (Collector),
// and the leader's connected workers per pool (PoolWorkers). It reads the
// node (raftnode) and serves nothing: rpc registers both on the node's
// registry.
package statemetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/fsm/fairness"
	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/sfq"
)

// Collector reports the replicated state at scrape time. Every node
// reports the same values for the same applied index (given the same
// metrics.max_tenants).
//
// Cardinality is bounded by the tenants, pools and resources an admin
// allows, never by load: per-tenant series exist for every live tenant
// while there are at most maxTenants of them, and beyond that only for
// the tenants marked export_metrics; the per-tier aggregates always
// exist; the per-pool gauges exist for every live pool (at most
// max_pools), the per-resource ones for every declared resource (at most
// max_resources); the fairness series of a tenant with its own series are per pool and class it is
// active in (at most max_pools × 4 classes of them). A counter series
// either exists with its whole value or not at all (see fsm.Metrics), so
// none ever decreases.
type Collector struct {
	node       *raftnode.Node
	maxTenants int
}

// New returns the collector of node's replicated state, with per-tenant
// series for every live tenant while there are at most maxTenants of
// them, otherwise (always, when maxTenants is negative) for those marked
// export_metrics.
func New(node *raftnode.Node, maxTenants int) *Collector {
	return &Collector{node: node, maxTenants: maxTenants}
}

// Per-tenant families (help strings name the bound: see Collector).
var (
	descQueued     = prometheus.NewDesc("barista_queued_jobs", "Queued jobs by tenant and size (tenants with their own series only).", []string{"tenant", "size"}, nil)
	descRunning    = prometheus.NewDesc("barista_running_jobs", "Assigned and running jobs by tenant (tenants with their own series only).", []string{"tenant"}, nil)
	descDispatches = prometheus.NewDesc("barista_dispatches_total", "Dispatches by tenant name, over every tenant that held the name.", []string{"tenant"}, nil)
	descCost       = prometheus.NewDesc("barista_dispatched_cost_seconds_total", "Estimated CPU seconds dispatched, by tenant name, over every tenant that held the name.", []string{"tenant"}, nil)
	descCPU        = prometheus.NewDesc("barista_cpu_billed_seconds_total", "CPU seconds billed (zombies included), by tenant name, over every tenant that held the name.", []string{"tenant"}, nil)
	descEnded      = prometheus.NewDesc("barista_jobs_ended_total", "Jobs that ended, by tenant name and final state, over every tenant that held the name.", []string{"tenant", "state"}, nil)
	descFailures   = prometheus.NewDesc("barista_run_failures_total", "Failed runs and lost leases, by tenant name, over every tenant that held the name.", []string{"tenant"}, nil)
	descWeight     = prometheus.NewDesc("barista_tenant_weight", "Current weight (tier x multiplier x decay), by tenant (tenants with their own series only).", []string{"tenant", "tier"}, nil)
	descFairRatio  = prometheus.NewDesc("barista_fairness_ratio",
		"The fairness report's ratio of a tenant's share of the CPU charged in its class of a pool to its time-weighted entitled share, over the window (1m, 10m, 1h); 1 is exactly its entitlement. "+
			"Tenants with their own series only, in the pools and classes they are active in, while defined.", []string{"tenant", "pool", "class", "window"}, nil)
	descFairLag = prometheus.NewDesc("barista_fairness_lag_seconds",
		"How far a tenant's finish tag in a class of a pool is behind the class's virtual_now there, in CPU seconds at its weight: positive when it is owed service. "+
			"Tenants with their own series only, while they have eligible work in the pool and class.", []string{"tenant", "pool", "class"}, nil)
)

// Per-pool gauges, for every live pool (at most the cluster's max_pools).
var (
	descFairError = prometheus.NewDesc("barista_fairness_error",
		"The live fairness error of a pool (docs/fairness.md): over the fairness report's 10-minute window, the largest difference between a tenant's share of its class's charged CPU and its entitled share, "+
			"among the tenants with eligible work in the window (0.02: two percentage points). Absent while no tenant had both.", []string{"pool"}, nil)
	descPoolQueued    = prometheus.NewDesc("barista_pool_queued_jobs", "Queued jobs by pool.", []string{"pool"}, nil)
	descPoolRunning   = prometheus.NewDesc("barista_pool_running_jobs", "Assigned and running jobs by pool.", []string{"pool"}, nil)
	descPoolScheduled = prometheus.NewDesc("barista_pool_scheduled_jobs", "Jobs delayed or backing off, by pool.", []string{"pool"}, nil)
	descPoolPaused    = prometheus.NewDesc("barista_pool_paused", "1 if dispatch in the pool is paused (barista pool pause), by pool.", []string{"pool"}, nil)
)

// Per-resource gauges, for every declared resource (at most the cluster's
// max_resources).
var (
	descResHeld     = prometheus.NewDesc("barista_resource_units_held", "Units of a resource that live (assigned or running) jobs hold, by resource.", []string{"resource"}, nil)
	descResCapacity = prometheus.NewDesc("barista_resource_capacity", "Capacity of a resource in units, by resource (below units_held after a decrease, which preempts nothing).", []string{"resource"}, nil)
	descResQueued   = prometheus.NewDesc("barista_resource_queued_jobs", "Queued jobs that use a resource (waiting for its units, or for a worker), by resource.", []string{"resource"}, nil)
	descResBlocked  = prometheus.NewDesc("barista_resource_blocked_jobs", "Queued jobs a resource holds back now (their units do not fit in its free units, or another job's reservation of it stands), by resource.", []string{"resource"}, nil)
)

// Per-tier aggregates, always present for every tier.
var (
	descTierTenants    = prometheus.NewDesc("barista_tier_tenants", "Live tenants by tier.", []string{"tier"}, nil)
	descTierQueued     = prometheus.NewDesc("barista_tier_queued_jobs", "Queued jobs by tier and size.", []string{"tier", "size"}, nil)
	descTierRunning    = prometheus.NewDesc("barista_tier_running_jobs", "Assigned and running jobs by tier.", []string{"tier"}, nil)
	descTierDispatches = prometheus.NewDesc("barista_tier_dispatches_total", "Dispatches by tier (each counted in the tier its tenant was in).", []string{"tier"}, nil)
	descTierCost       = prometheus.NewDesc("barista_tier_dispatched_cost_seconds_total", "Estimated CPU seconds dispatched, by tier.", []string{"tier"}, nil)
	descTierCPU        = prometheus.NewDesc("barista_tier_cpu_billed_seconds_total", "CPU seconds billed (zombies included), by tier.", []string{"tier"}, nil)
	descTierEnded      = prometheus.NewDesc("barista_tier_jobs_ended_total", "Jobs that ended, by tier and final state.", []string{"tier", "state"}, nil)
	descTierFailures   = prometheus.NewDesc("barista_tier_run_failures_total", "Failed runs and lost leases, by tier.", []string{"tier"}, nil)
)

var (
	descExported = prometheus.NewDesc("barista_exported_tenants", "Tenants with their own series on this node: every live tenant while there are at most metrics.max_tenants, otherwise those marked export_metrics.", nil, nil)
	descApplied  = prometheus.NewDesc("barista_applied_index", "Last Raft index applied by this node.", nil, nil)
	descLeader   = prometheus.NewDesc("barista_is_leader", "1 if this node is the leader.", nil, nil)
	descVnow     = prometheus.NewDesc("barista_virtual_now_seconds", "Virtual time now, in virtual seconds (a weight-1 tenant's CPU second advances its tag by one).", nil, nil)
)

// Describe sends every family the collector reports.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQueued, descRunning, descDispatches, descCost, descCPU, descEnded, descFailures, descWeight,
		descFairRatio, descFairLag, descFairError, descPoolQueued, descPoolRunning, descPoolScheduled, descPoolPaused,
		descResHeld, descResCapacity, descResQueued, descResBlocked, descTierTenants, descTierQueued, descTierRunning, descTierDispatches, descTierCost, descTierCPU, descTierEnded, descTierFailures,
		descExported, descApplied, descLeader, descVnow} {
		ch <- d
	}
}

// endedStates names the final states of jobs_ended_total, in a fixed order.
var endedStates = [...]string{"completed", "failed", "cancelled", "timed_out"}

func ended(c *fsm.Counters) [len(endedStates)]int64 {
	return [...]int64{c.Completed, c.Failed, c.Cancelled, c.TimedOut}
}

func msToSeconds(ms int64) float64 { return float64(ms) / 1000 }

// Collect reads the state and sends its series.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge(descApplied, float64(c.node.Raft().AppliedIndex()))
	leader := 0.0
	if c.node.IsLeader() {
		leader = 1
	}
	gauge(descLeader, leader)
	// Computed under the read lock, sent after it: a slow scrape must not
	// hold up Apply.
	v := c.node.FSM.Metrics(c.maxTenants)
	gauge(descVnow, float64(v.VirtualNow)/1e6)
	gauge(descExported, float64(len(v.Tenants)))
	for t := range v.Tiers {
		m, tier := &v.Tiers[t], sfq.Tier(t).String()
		gauge(descTierTenants, float64(m.Tenants), tier)
		for sz := sfq.Size(0); sz < sfq.NumSizes; sz++ {
			gauge(descTierQueued, float64(m.Queued[sz]), tier, sz.String())
		}
		gauge(descTierRunning, float64(m.Running), tier)
		counter(descTierDispatches, float64(m.Counters.Dispatches), tier)
		counter(descTierCost, msToSeconds(m.Counters.DispatchedCostMs), tier)
		counter(descTierCPU, msToSeconds(m.Counters.CPUMs), tier)
		for k, n := range ended(&m.Counters) {
			counter(descTierEnded, float64(n), tier, endedStates[k])
		}
		counter(descTierFailures, float64(m.Counters.Failures), tier)
	}
	for i := range v.Tenants {
		m := &v.Tenants[i]
		for sz := sfq.Size(0); sz < sfq.NumSizes; sz++ {
			gauge(descQueued, float64(m.Queued[sz]), m.Name, sz.String())
		}
		gauge(descRunning, float64(m.Running), m.Name)
		counter(descDispatches, float64(m.Counters.Dispatches), m.Name)
		counter(descCost, msToSeconds(m.Counters.DispatchedCostMs), m.Name)
		counter(descCPU, msToSeconds(m.Counters.CPUMs), m.Name)
		for k, n := range ended(&m.Counters) {
			counter(descEnded, float64(n), m.Name, endedStates[k])
		}
		counter(descFailures, float64(m.Counters.Failures), m.Name)
		gauge(descWeight, float64(m.Weight)/float64(sfq.WeightOne), m.Name, m.Tier.String())
		for _, r := range m.Fair {
			pool := r.Pool
			if pool == "" {
				pool = sfq.DefaultPoolName
			}
			if r.Eligible {
				gauge(descFairLag, msToSeconds(r.LagCPUMs), m.Name, pool, r.Class.String())
			}
			for g, w := range fairness.Windows {
				if ratio, ok := r.Windows[g].Ratio(); ok {
					gauge(descFairRatio, ratio, m.Name, pool, r.Class.String(), w.Name)
				}
			}
		}
	}
	var pools []sfq.Pool
	var resources []sfq.ResourceInfo
	c.node.FSM.Read(func(sc *sfq.Scheduler) {
		sc.Pools(func(p sfq.Pool) bool { pools = append(pools, p); return true })
		resources = resourcesOf(sc)
	})
	for _, e := range c.node.FSM.FairnessErrors(fsm.DefaultErrorWindow) {
		if e.OK {
			gauge(descFairError, e.Value, e.Pool)
		}
	}
	for _, p := range pools {
		gauge(descPoolQueued, float64(p.Queued), p.Name)
		gauge(descPoolRunning, float64(p.Running), p.Name)
		gauge(descPoolScheduled, float64(p.Scheduled), p.Name)
		paused := 0.0
		if p.Paused {
			paused = 1
		}
		gauge(descPoolPaused, paused, p.Name)
	}
	for _, r := range resources {
		gauge(descResHeld, float64(r.Held), r.Name)
		gauge(descResCapacity, float64(r.Capacity), r.Name)
		gauge(descResQueued, float64(r.Queued), r.Name)
		gauge(descResBlocked, float64(r.Blocked), r.Name)
	}
}

// resourcesOf returns a picture of every declared resource of sc, by
// name.
func resourcesOf(sc *sfq.Scheduler) []sfq.ResourceInfo {
	var out []sfq.ResourceInfo
	for _, name := range sc.ResourceNames() {
		if info, ok := sc.Resource(name); ok {
			out = append(out, info)
		}
	}
	return out
}

// descPoolWorkers is the leader's count of each pool's connected workers.
var descPoolWorkers = prometheus.NewDesc("barista_pool_workers", "Connected workers by pool, on the leader (which holds the worker sessions; a follower reports none).", []string{"pool"}, nil)

// PoolWorkers reports, on the leader, the connected workers of every live
// pool.
type PoolWorkers struct {
	node  *raftnode.Node
	count func(pool string) int
}

// NewPoolWorkers returns the collector of the connected workers of each
// pool of node, counted by count (the leader's worker sessions).
func NewPoolWorkers(node *raftnode.Node, count func(pool string) int) *PoolWorkers {
	return &PoolWorkers{node: node, count: count}
}

// Describe sends barista_pool_workers.
func (c *PoolWorkers) Describe(ch chan<- *prometheus.Desc) { ch <- descPoolWorkers }

// Collect sends each live pool's count, on the leader only.
func (c *PoolWorkers) Collect(ch chan<- prometheus.Metric) {
	if !c.node.IsLeader() {
		return
	}
	var names []string
	c.node.FSM.Read(func(sc *sfq.Scheduler) {
		sc.Pools(func(p sfq.Pool) bool { names = append(names, p.Name); return true })
	})
	for _, name := range names {
		ch <- prometheus.MustNewConstMetric(descPoolWorkers, prometheus.GaugeValue, float64(c.count(name)), name)
	}
}
