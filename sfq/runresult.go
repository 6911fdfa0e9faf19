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
		return fmt.Errorf("%w: cpu_source %d", ErrInvalid, r.CPUSource)
	}
	if r.Failure >= numRunFailures {
		return fmt.Errorf("%w: failure %d", ErrInvalid, r.Failure)
	}
	return nil
}

// hasDetails reports whether the result says how its CPU was measured or
// why it failed: what the encodings before version 7 cannot hold.
func (r *RunResult) hasDetails() bool { return r.CPUSource != CPUUnknown || r.Failure != FailureNone }

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
