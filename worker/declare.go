package worker

import "errors"

// What a Runner may say of itself beside starting runs.

// FirstWelcome is implemented by a Runner that clears, before its first
// run, what an earlier agent of the same worker ID left running (as
// ProcessRunner does with its runs' cgroups). The agent calls it once, at
// its first Welcome, before it reads any Assign: until then another live
// agent may hold the ID (the leader refuses a second session of a live
// ID), and what runs under that ID is not this agent's to kill. An error
// is logged; the agent goes on.
type FirstWelcome interface {
	FirstWelcome() error
}

// ErrUnknownKind marks a job of a kind the runner does not run (a
// function job of a kind no function is registered for, a command job
// to a runner of functions, a function job to the command runner): the
// run ends unknown_kind, and the cluster gives the job to a worker that
// runs its kind, counting no failure (SPEC §3 "Kinds"). A job of a client
// of a build before kinds (Assign.form unspecified) fails for good
// instead, as before.
var ErrUnknownKind = errors.New("this worker does not run jobs of this kind")

// Declarer is implemented by a Runner that says what it runs: command
// jobs (ProcessRunner), and/or the function jobs of kinds (Kinds). Its
// worker's Hello says so, and a cluster at feature level 8 gives it only
// those jobs. A Runner that does not say runs every job (a Func).
type Declarer interface {
	Declares() (commands bool, kinds []string)
}
