package rpc

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baristahq/barista/internal/evidencecall"
	"github.com/baristahq/barista/internal/statemetrics"
	"github.com/baristahq/barista/raftnode"
)

// metrics are the RPC layer's instruments.
type metrics struct {
	dispatchLatency prometheus.Histogram
	// dispatchStages splits dispatchLatency by stage and path (see
	// dispatchTimes).
	dispatchStages *prometheus.HistogramVec
	// stages holds dispatchStages' six series by dispatchPath and stage
	// (wait, commit, send), resolved once, off the dispatch path.
	stages          [numDispatchPaths][3]prometheus.Observer
	fenced          *prometheus.CounterVec
	unproposed      *prometheus.CounterVec
	refusedSessions prometheus.Counter
	// submitsLimited counts submits this node refused, as leader, for
	// their tenant's submit_rate.
	submitsLimited prometheus.Counter
	// forwardBatches and forwardedSubmits count this node's ForwardCommands
	// calls to the leader, as a follower, and the submits they carried.
	forwardBatches, forwardedSubmits prometheus.Counter
	// startsWithFinished counts runs whose Started the leader replicated
	// with their Finished (the run ended before its Started was due).
	startsWithFinished prometheus.Counter
	// writesUnproposed counts the writes this node, as leader, answered
	// without a log entry, by command and reason (refused: the command's
	// check refused it; unchanged: it would change nothing).
	writesUnproposed *prometheus.CounterVec
	// evidenceRefused counts the statements and certificates this node
	// refused for its bounds, by limit (caller, node).
	evidenceRefused *prometheus.CounterVec
}

func newMetrics(reg *prometheus.Registry, node *raftnode.Node, maxTenants int) *metrics {
	m := newWorkerMetrics()
	reg.MustRegister(m.dispatchLatency, m.dispatchStages, m.fenced, m.unproposed, m.refusedSessions, m.submitsLimited, m.forwardBatches, m.forwardedSubmits, m.startsWithFinished, m.writesUnproposed, m.evidenceRefused, statemetrics.New(node, maxTenants))
	return m
}

// newWorkerMetrics makes the worker sessions' instruments, unregistered.
func newWorkerMetrics() *metrics {
	m := &metrics{
		dispatchLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "barista_dispatch_latency_seconds", Help: "Time from a worker's Ready (or the Finished that carries it) to its Assign, on the leader.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		dispatchStages: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "barista_dispatch_stage_seconds",
			Help: "The stages of barista_dispatch_latency_seconds, by path (round: a Ready the dispatcher took; finished: a Ready folded into a Finished, proposed with it) and stage " +
				"(wait: from the Ready to its Dispatch's proposal; commit: from the proposal to its applied result; send: from the result to the Assign handed to the worker's stream).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 17)}, []string{"path", "stage"}),
		fenced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "barista_fenced_writes_total", Help: "Worker writes refused by fencing, by message (started, heartbeat, finished)."}, []string{"message"}),
		unproposed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "barista_worker_reports_unproposed_total",
			Help: "Worker reports answered at the edge without a log entry, by message and reason (repeat: the state shows it applied; stale: the state shows it fenced off; unknown_job; invalid)."},
			[]string{"message", "reason"}),
		refusedSessions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "barista_worker_sessions_refused_total",
			Help: fmt.Sprintf("Worker sessions this node, as leader, closed for having more than %d reports refused within %s.", maxRefusals, refusalWindow)}),
		submitsLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "barista_submits_rate_limited_total", Help: "Submits refused on this node, as leader, for their tenant's submit_rate."}),
		forwardBatches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "barista_submit_forward_calls_total", Help: "Calls this node made, as a follower, to carry single submits to the leader in batches."}),
		forwardedSubmits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "barista_submits_forwarded_total", Help: "Single submits this node carried, as a follower, to the leader in batched calls."}),
		writesUnproposed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "barista_writes_unproposed_total",
			Help: "Writes this node, as leader, answered without a log entry, by command and reason (refused: the command's check, the one Apply makes, refused it; unchanged: it would change nothing)."},
			[]string{"command", "reason"}),
		startsWithFinished: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "barista_worker_starts_with_finished_total",
			Help: "Runs that ended before their worker's Started was due, whose Started this node, as leader, replicated with their Finished."}),
		evidenceRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "barista_evidence_refused_total",
			Help: fmt.Sprintf("Usage statements and certificates this node refused for its bounds, by limit (caller: the caller was issued %d already; node: the node was issuing %d).",
				evidencecall.MaxReplaysPerCaller, evidencecall.MaxReplays)}, []string{"limit"}),
	}
	m.evidenceRefused.WithLabelValues("caller")
	m.evidenceRefused.WithLabelValues("node")
	for p, path := range dispatchPathNames {
		for i, stage := range []string{"wait", "commit", "send"} {
			m.stages[p][i] = m.dispatchStages.WithLabelValues(path, stage)
		}
	}
	// Series that exist from the start read as 0 instead of missing.
	for _, msg := range []string{"started", "heartbeat", "finished"} {
		m.fenced.WithLabelValues(msg)
	}
	for _, msg := range []string{"started", "finished"} {
		m.unproposed.WithLabelValues(msg, "repeat")
	}
	for _, msg := range []string{"started", "heartbeat", "finished"} {
		m.unproposed.WithLabelValues(msg, "unknown_job")
		m.unproposed.WithLabelValues(msg, "stale")
	}
	return m
}

// DefaultMetricsMaxTenants is the default of Options.MetricsMaxTenants.
const DefaultMetricsMaxTenants = 1000

// MetricsOnlyMarked as Options.MetricsMaxTenants gives per-tenant series
// only to the tenants marked export_metrics.
const MetricsOnlyMarked = -1
