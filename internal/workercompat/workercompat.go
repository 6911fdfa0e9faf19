// Package workercompat holds the switches that make a worker agent of
// this build speak as one of an earlier build did, for the tests and
// benchmarks of mixed clusters. They are not part of the worker's public
// configuration.
package workercompat

// Options are the compatibility switches of an agent.
type Options struct {
	// SeparateReady sends every Ready apart from the Finished before it,
	// as a worker of a build before Welcome.finish_ready does, even to a
	// leader that takes it folded.
	SeparateReady bool
	// StartedAtOnce sends every run's Started as soon as it starts, as a
	// worker of a build before Welcome.started_delay_ms does, even to a
	// leader that lets it wait.
	StartedAtOnce bool
	// SaysNothing says nothing of what the worker runs in its Hello, and
	// reports a job of a kind it does not run as failed for good, as a
	// worker of a build before kinds does.
	SaysNothing bool
}

// Set sets the switches of a *worker.Config; package worker installs it.
var Set func(cfg any, o Options)
