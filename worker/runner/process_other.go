//go:build !linux

package runner

import (
	"errors"
	"fmt"
	"time"
)

// Process is a started job. Jobs can only be started on Linux.
type Process struct{}

// Start runs a job on Linux; on other systems it returns an error wrapping
// [errors.ErrUnsupported].
func Start(spec Spec, opt Options) (*Process, error) {
	if err := validateSpec(spec); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("runner: start: %w", errors.ErrUnsupported)
}

// PID returns the pid of the job's main process.
func (p *Process) PID() int { return 0 }

// CPU returns the CPU time used by the job's process tree.
func (p *Process) CPU() (time.Duration, error) {
	return 0, fmt.Errorf("runner: cpu: %w", errors.ErrUnsupported)
}

// Terminate sends SIGTERM to the job's tree, then SIGKILL after grace.
func (p *Process) Terminate(grace time.Duration) {}

// Kill sends SIGKILL to the job's tree.
func (p *Process) Kill() {}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Done is closed when the job's whole tree is gone.
func (p *Process) Done() <-chan struct{} { return closed }

// Result returns the job's outcome.
func (p *Process) Result() Result { return Result{} }
