package raftnode

import (
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
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
		Propose: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "barista_raft_propose_seconds", Help: "Time from proposing an entry to its applied result on the leader (commit and apply).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		ApplyBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "barista_fsm_apply_batch_seconds", Help: "Time the state machine took to apply one batch of entries.",
			Buckets: prometheus.ExponentialBuckets(0.00001, 2, 18)}),
		LeaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "barista_leader_changes_total", Help: "Leader changes this node observed."}),
		SnapshotPersist: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "barista_snapshot_persist_seconds", Help: "Time to write a snapshot (Apply continues meanwhile).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		EntryCommands: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "barista_entry_commands", Help: "Commands per proposed log entry (coalescing).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 13)}),
		SnapshotFreeze: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "barista_snapshot_freeze_seconds", Help: "Apply pause of a snapshot: freezing the state.",
			Buckets: prometheus.ExponentialBuckets(0.000001, 4, 12)}),
	}
	m.Registry.MustRegister(m.Propose, m.ApplyBatch, m.LeaderChanges, m.SnapshotPersist, m.SnapshotFreeze, m.EntryCommands,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
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
