package raftnode

import (
	"runtime"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/baristahq/barista/internal/version"
)

// Metrics are the node's Prometheus instruments; the registry also holds
// the Go runtime and process collectors, and the RPC layer adds its own.
type Metrics struct {
	Registry        *prometheus.Registry
	Propose         prometheus.Histogram
	ApplyBatch      prometheus.Histogram
	LeaderChanges   prometheus.Counter
	SnapshotPersist prometheus.Histogram
	SnapshotFreeze  prometheus.Histogram
	EntryCommands   prometheus.Histogram
}

func newMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		Propose: histogram("barista_raft_propose_seconds", "Time from proposing an entry to its applied result on the leader (commit and apply).",
			0.0005, 2, 16),
		ApplyBatch: histogram("barista_fsm_apply_batch_seconds", "Time the state machine took to apply one batch of entries.",
			0.00001, 2, 18),
		LeaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "barista_leader_changes_total", Help: "Leader changes this node observed."}),
		SnapshotPersist: histogram("barista_snapshot_persist_seconds", "Time to write a snapshot (Apply continues meanwhile).",
			0.001, 2, 16),
		EntryCommands: histogram("barista_entry_commands", "Commands per proposed log entry (coalescing).",
			1, 2, 13),
		SnapshotFreeze: histogram("barista_snapshot_freeze_seconds", "Apply pause of a snapshot: freezing the state.",
			0.000001, 4, 12),
	}
	m.Registry.MustRegister(m.Propose, m.ApplyBatch, m.LeaderChanges, m.SnapshotPersist, m.SnapshotFreeze, m.EntryCommands,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfo())
	return m
}

// buildInfo is the gauge barista_build_info, always 1, whose labels name
// the node's build: version (its release), commit and goversion.
func buildInfo() prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "barista_build_info",
		Help:        "The node's build: its release (version), the commit it was built from and the Go release that built it; always 1.",
		ConstLabels: prometheus.Labels{"version": version.Version, "commit": version.Commit(), "goversion": runtime.Version()}})
	g.Set(1)
	return g
}

// histogram makes a histogram of exponential buckets (start, factor,
// count as prometheus.ExponentialBuckets).
func histogram(name, help string, start, factor float64, count int) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: prometheus.ExponentialBuckets(start, factor, count)})
}

// observeLeaders counts leader changes until done is closed.
func (n *Node) observeLeaders(done <-chan struct{}) {
	ch := make(chan raft.Observation, 16)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(obs)
	defer n.raft.DeregisterObserver(obs)
	for {
		select {
		case <-done:
			return
		case <-ch:
			n.Metrics.LeaderChanges.Inc()
		}
	}
}
