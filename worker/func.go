package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	pb "github.com/baristahq/barista/proto"
)

// Func is a Runner that runs each job in this process, as a call of a Go
// function: no child process, no payload format but the one the function
// reads. Each call gets a goroutine of its own, the job's Assign (its
// payload, tenant, job ID and attempt) and a context that is cancelled
// when the leader cancels the job (a cancel or its timeout) or the agent
// must stop it (a Reject, no contact with the cluster for
// self_kill_after, the agent stopping). What it returns is the run's end:
//
//   - nil: the run completed (exit code 0), FuncResult.Output kept as the
//     job's stdout tail (its last 4 KiB, as GetJob and the console show);
//   - an error: the run failed (exit code 1), the error's text kept as the
//     stderr tail, and the job is retried as its max_attempts allows; an
//     error wrapping ErrUnrunnable (Discard's) fails the job with no retry;
//   - Snooze(d): the run ends snoozed, the job tried again d later
//     without counting a failure;
//   - after a cancel, the run ends cancelled whatever the function returns;
//   - a panic fails the run with the panic and its stack as the stderr tail.
//
// The run's CPU, which the tenant is billed and its fair share charged,
// is FuncResult.CPU: what the function measured (the CPU of the work it
// did, or of the machine it drove), or, if it reports none (zero), the
// wall time the call took. While it runs, heartbeats report the wall time
// so far.
//
// A goroutine cannot be killed: the function must return soon after its
// context ends. Until it returns the worker holds the job (it takes no
// other, and an agent that stops waits for it), so that a job the cluster
// believes stopped never runs on behind its back.
type Func func(ctx context.Context, job *pb.Assign) (FuncResult, error)

// FuncResult is what a Func reports of a run that ended.
type FuncResult struct {
	// Output is the job's result, kept as its stdout tail (the last 4 KiB,
	// as valid UTF-8).
	Output string
	// CPU is the CPU the run used; zero bills the wall time the call took.
	CPU time.Duration
}

// Start implements Runner: it calls f in a goroutine of its own.
func (f Func) Start(job *pb.Assign) (Run, error) {
	ctx, cancel := context.WithCancel(context.Background())
	r := &funcRun{start: time.Now(), cancel: cancel, done: make(chan struct{})}
	go r.call(ctx, f, job)
	return r, nil
}

// funcRun is one call of a Func.
type funcRun struct {
	start  time.Time
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	res    Result
}

func (r *funcRun) call(ctx context.Context, f Func, job *pb.Assign) {
	var out FuncResult
	var err error
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s\npanic: %v", debug.Stack(), p)
		}
		res := Result{CPU: out.CPU, StdoutTail: out.Output}
		if res.CPU <= 0 {
			res.CPU = time.Since(r.start)
		}
		var snooze *SnoozeError
		switch {
		case errors.As(err, &snooze) && ctx.Err() == nil:
			res.Snooze = max(snooze.After, time.Millisecond)
		case err != nil:
			res.ExitCode, res.StderrTail, res.Permanent = 1, err.Error(), errors.Is(err, ErrUnrunnable)
		}
		r.mu.Lock()
		r.res = res
		r.mu.Unlock()
		r.cancel()
		close(r.done)
	}()
	out, err = f(ctx, job)
}

// CPU is the wall time so far: what the function will report is known
// only when it returns.
func (r *funcRun) CPU() time.Duration {
	select {
	case <-r.done:
		return r.Result().CPU
	default:
		return time.Since(r.start)
	}
}

// Terminate cancels the call's context; a function has no grace to
// outlive.
func (r *funcRun) Terminate(time.Duration) { r.cancel() }

// Kill cancels the call's context; Done waits for the function to return.
func (r *funcRun) Kill() { r.cancel() }

func (r *funcRun) Done() <-chan struct{} { return r.done }

func (r *funcRun) Result() Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.res
}
