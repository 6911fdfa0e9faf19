package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/rpc/agent/runner"
)

// ProcessRunner runs each job as a child process tree (see package
// runner): the payload is a JSON command line, the output goes to
// LogDir/job-ID-attempt-N.log (bounded; the last 4 KiB of stderr and of
// stdout are reported with the result), and the CPU is measured from the
// operating system. The child's environment names its run:
// BARISTA_JOB_ID, BARISTA_ATTEMPT, BARISTA_TENANT and BARISTA_WORKER_ID
// (these override the payload's env).
type ProcessRunner struct {
	LogDir      string
	MaxLogBytes int64
	WorkerID    string
}

// Start implements Runner.
func (r ProcessRunner) Start(a *pb.Assign) (Run, error) {
	spec, err := runner.ParsePayload(a.Payload)
	if err != nil {
		return nil, fmt.Errorf("job %d: bad payload: %w", a.Job, err)
	}
	if spec.Env == nil {
		spec.Env = map[string]string{}
	}
	spec.Env["BARISTA_JOB_ID"] = fmt.Sprint(a.Job)
	spec.Env["BARISTA_ATTEMPT"] = fmt.Sprint(a.Attempt)
	spec.Env["BARISTA_TENANT"] = a.Tenant
	spec.Env["BARISTA_WORKER_ID"] = r.WorkerID
	opt := runner.Options{MaxLogBytes: r.MaxLogBytes}
	if r.LogDir != "" {
		if err := os.MkdirAll(r.LogDir, 0o755); err != nil {
			return nil, err
		}
		opt.LogPath = filepath.Join(r.LogDir, fmt.Sprintf("job-%d-attempt-%d.log", a.Job, a.Attempt))
	}
	p, err := runner.Start(spec, opt)
	if err != nil {
		return nil, fmt.Errorf("job %d: %w", a.Job, err)
	}
	return processRun{p}, nil
}

type processRun struct{ p *runner.Process }

func (r processRun) CPU() time.Duration {
	cpu, _ := r.p.CPU()
	return cpu
}

func (r processRun) Terminate(grace time.Duration) { r.p.Terminate(grace) }
func (r processRun) Kill()                         { r.p.Kill() }
func (r processRun) Done() <-chan struct{}         { return r.p.Done() }

func (r processRun) Result() Result {
	res := r.p.Result()
	return Result{ExitCode: res.ExitCode, Signaled: res.Signal != "", CPU: res.CPU, StderrTail: res.StderrTail, StdoutTail: res.StdoutTail}
}
