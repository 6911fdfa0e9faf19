package sfq

import "fmt"

// CPUSource says how a worker measured a run's CPU. Billing and the cost
// correction use the CPU alike whatever its source; it is kept for people
// reading the job.
type CPUSource uint8

// The CPU sources.
const (
	// CPUUnknown: the worker did not say (a build before it, or a runner
	// of Go functions).
	CPUUnknown CPUSource = iota
	// CPUFromProc: the process tree in /proc and the reaped processes'
	// rusage.
	CPUFromProc
	// CPUFromCgroup: the run's cgroup v2, which counts every process that
	// ran in it.
	CPUFromCgroup
	numCPUSources
)

var cpuSourceNames = [numCPUSources]string{"", "proc", "cgroup"}

func (c CPUSource) String() string {
	if c < numCPUSources {
		return cpuSourceNames[c]
	}
	return fmt.Sprintf("cpu_source(%d)", uint8(c))
}

// RunFailure says why a failed run failed, when its worker knows.
type RunFailure uint8

// The run failures.
const (
	FailureNone RunFailure = iota
	// FailureOOMKilled: the kernel killed the run for its cgroup's memory
	// limit. The run is failed like any other (retried as max_attempts
	// allows); its event says oom_killed.
	FailureOOMKilled
	numRunFailures
)

var runFailureNames = [numRunFailures]string{"", "oom_killed"}

func (f RunFailure) String() string {
	if f < numRunFailures {
		return runFailureNames[f]
	}
	return fmt.Sprintf("failure(%d)", uint8(f))
}

// checkDetails refuses a CPU source or failure this build does not know.
func (r *RunResult) checkDetails() error {
	if r.CPUSource >= numCPUSources {
		return invalidf("cpu_source", "%d is not a source this build knows", r.CPUSource)
	}
	if r.Failure >= numRunFailures {
		return invalidf("failure", "%d is not a failure this build knows", r.Failure)
	}
	return nil
}

// hasDetails reports whether the result says how its CPU was measured or
// why it failed: what the encodings before version 7 cannot hold.
func (r *RunResult) hasDetails() bool {
	return r.CPUSource != CPUUnknown || r.Failure != FailureNone || r.Snoozes != 0
}

// carried is what a new run of the job keeps of its last run's result:
// the count of snoozes in a row, when the last run snoozed (nil
// otherwise: a run that failed, or whose lease or ack deadline passed,
// ends the row).
func (r *RunResult) carried() *RunResult {
	if r == nil || r.Snoozes == 0 || r.Pending() {
		return nil
	}
	return &RunResult{Snoozes: r.Snoozes}
}

// redriven is the result a redriven job keeps: its snoozes in a row start
// again from none, as its failures do.
func (r *RunResult) redriven() *RunResult {
	if r.Pending() {
		return nil
	}
	if r == nil || r.Snoozes == 0 {
		return r
	}
	c := *r
	c.Snoozes, c.SnoozeMs = 0, 0
	return &c
}

// Pending reports whether r is only the count of snoozes a run after a
// snooze carries (a snoozed run's own SnoozeMs is at least MinSnoozeMs):
// no run has ended since, so there is no result to show.
func (r *RunResult) Pending() bool { return r != nil && r.Snoozes != 0 && r.SnoozeMs == 0 }

// checkSnoozes refuses a decoded snooze count and snooze that no Finish
// could have written.
func (r *RunResult) checkSnoozes() error {
	if r.SnoozeMs != 0 && (r.Snoozes == 0 || checkSnooze(r.SnoozeMs) != nil) || r.Snoozes > MaxMaxSnoozes {
		return fmt.Errorf("%w: snoozes %d, snooze_ms %d", ErrInvalid, r.Snoozes, r.SnoozeMs)
	}
	return nil
}

// detailsByte packs the CPU source (low four bits) and the failure (high
// four bits) into the byte a version 7 state keeps after a job's result.
func (r *RunResult) detailsByte() byte { return byte(r.CPUSource) | byte(r.Failure)<<4 }

// setDetails unpacks detailsByte; false if either half is unknown.
func (r *RunResult) setDetails(b byte) bool {
	r.CPUSource, r.Failure = CPUSource(b&0x0f), RunFailure(b>>4)
	return r.checkDetails() == nil
}

// UsesRunDetails reports whether the state has ever kept a run's CPU
// source or failure (and so is written as version 7).
func (v *View) UsesRunDetails() bool { return v.details }
