package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/baristahq/barista/client"
	pb "github.com/baristahq/barista/proto"
)

// JobArgs are a job's typed arguments (client.JobArgs): Kind names the
// job type, and the value is the job's JSON payload.
type JobArgs = client.JobArgs

// Kinds routes jobs to Go functions by their kind (job_type). It is a
// Runner: each job runs as a call of the function registered for its
// kind, in a goroutine of this process, as a Func's does. Its worker
// tells the cluster the registered kinds (Declarer), and a cluster at
// feature level 8 gives it only jobs of those kinds; a job of another
// kind (or a command job) it is handed anyway ends unknown_kind and goes
// to a worker that runs it (ErrUnknownKind). A job whose payload does not
// decode into the function's arguments, or a job of no form of a kind
// no function is registered for, fails with no retry, saying why.
type Kinds struct {
	mu  sync.RWMutex
	fns map[string]Func
	// canceller asks the cluster to cancel a job whose function returned
	// Cancel (CancelWith).
	canceller *client.Client
}

// CancelWith gives the registry a client to cancel jobs with: a job
// whose function returns Cancel(err) is cancelled through it
// (Client.JobCancel) before its run is reported, and ends cancelled.
// The client's token must be allowed to cancel the jobs: an admin token,
// or, on a worker that runs one tenant's jobs only, that tenant's client
// token. Without one, Cancel ends the job as Discard does: failed, with
// no retry.
func (k *Kinds) CancelWith(c *client.Client) {
	k.mu.Lock()
	k.canceller = c
	k.mu.Unlock()
}

// NewKinds returns an empty registry; Register adds to it.
func NewKinds() *Kinds { return &Kinds{fns: map[string]Func{}} }

// Register makes fn run every job of kind T{}.Kind(): the job's payload
// is decoded (JSON) into Job.Args. What fn returns is the run's end:
//
//   - nil: completed (the output set with Job.Output kept as the job's
//     stdout tail);
//   - Snooze(d): tried again d later, not counted a failure;
//   - Cancel(err): cancelled, no retry, when the registry has a client
//     to cancel it with (CancelWith); without one, as Discard;
//   - Discard(err): failed with no retry;
//   - any other error: failed, retried as the job's max_attempts allow
//     (the error's text kept as its stderr tail);
//   - after a cancel of the job (its context ends), cancelled, whatever
//     it returns; a panic fails the run with its stack.
//
// Register panics if T's kind is empty or already registered: both are
// mistakes of the program, found at its start.
func Register[T JobArgs](k *Kinds, fn func(ctx context.Context, job *Job[T]) error) {
	var zero T
	kind := zero.Kind()
	if kind == "" {
		panic(fmt.Sprintf("worker.Register: %T has an empty Kind", zero))
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, dup := k.fns[kind]; dup {
		panic(fmt.Sprintf("worker.Register: kind %q is registered twice", kind))
	}
	k.fns[kind] = func(ctx context.Context, as *pb.Assign) (FuncResult, error) {
		job := &Job[T]{ID: as.Job, Attempt: int(as.Attempt), Tenant: as.Tenant, Pool: poolOf(as.Pool), Kind: kind,
			Size: Size(strings.ToLower(as.Size.String())), Cost: time.Duration(as.EstCostMs) * time.Millisecond,
			Timeout: time.Duration(as.TimeoutMs) * time.Millisecond, Payload: as.Payload}
		if err := json.Unmarshal(as.Payload, &job.Args); err != nil {
			return FuncResult{}, Discard(fmt.Errorf("job %d: its payload is not the arguments of kind %q (%T): %v", as.Job, kind, zero, err))
		}
		err := fn(ctx, job)
		if ce := (*CancelError)(nil); errors.As(err, &ce) && ctx.Err() == nil {
			err = k.cancel(ctx, as, err)
		}
		return FuncResult{Output: job.output, CPU: job.cpu}, err
	}
}

// Kinds lists the registered kinds, sorted.
func (k *Kinds) Kinds() []string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	out := make([]string, 0, len(k.fns))
	for kind := range k.fns {
		out = append(out, kind)
	}
	slices.Sort(out)
	return out
}

// Start implements Runner: the call of the function of the job's kind.
func (k *Kinds) Start(as *pb.Assign) (Run, error) {
	k.mu.RLock()
	fn, ok := k.fns[as.JobType]
	k.mu.RUnlock()
	switch {
	case as.Form == pb.JobForm_COMMAND:
		return nil, fmt.Errorf("job %d is a command job, which this worker of functions does not run (%w)", as.Job, ErrUnknownKind)
	case !ok:
		return nil, fmt.Errorf("job %d is of kind %q, which this worker has no function for (it runs %s) (%w)",
			as.Job, as.JobType, strings.Join(k.Kinds(), ", "), ErrUnknownKind)
	}
	return fn.Start(as)
}

// Declares implements Declarer: the registered kinds, and no command
// jobs.
func (k *Kinds) Declares() (commands bool, kinds []string) { return false, k.Kinds() }

func poolOf(p string) string {
	if p == "" {
		return "default"
	}
	return p
}

// Job is one run of a job of kind T: the job's identity and its decoded
// arguments.
type Job[T JobArgs] struct {
	ID      uint64
	Attempt int // 1 for the job's first run
	Tenant  string
	Pool    string
	Kind    string
	Size    Size
	// Cost is the job's estimated CPU; Timeout ends a run that takes
	// longer (0: none).
	Cost, Timeout time.Duration
	// Args are the job's arguments, decoded from Payload.
	Args    T
	Payload []byte

	output string
	cpu    time.Duration
}

// Output keeps s as the job's output: its stdout tail (the last 4 KiB),
// which GetJob, the console and barista job show.
func (j *Job[T]) Output(s string) { j.output = s }

// ReportCPU bills the run d of CPU, instead of the wall time its call
// took: the CPU the work used (of a machine the function drove, say).
func (j *Job[T]) ReportCPU(d time.Duration) { j.cpu = d }

// Snooze returns the error that ends a run snoozed: the job is tried
// again d later (held to 1 s .. 24 h) and the run is not counted a
// failure (its CPU is billed as any run's). The cluster fails a job
// snoozed max_snoozes times in a row (default 100). A leader of an
// earlier build, which cannot snooze, records the run as failed.
func Snooze(d time.Duration) error { return &SnoozeError{After: d} }

// SnoozeError is Snooze's error.
type SnoozeError struct{ After time.Duration }

func (e *SnoozeError) Error() string { return fmt.Sprintf("snoozed for %s", e.After) }

// Discard returns the error that ends the job failed with no retry: no
// run of it can succeed (its arguments are wrong, what it works on is
// gone). err (nil: none) is kept as the run's stderr tail; the job's
// failed event has the reason unrunnable (feature level 6; below it the
// run is retried as any failed run).
func Discard(err error) error {
	if err == nil {
		err = errors.New("the job discarded itself")
	}
	return &DiscardError{Err: err}
}

// DiscardError is Discard's error; it matches ErrUnrunnable.
type DiscardError struct{ Err error }

func (e *DiscardError) Error() string { return e.Err.Error() }

// Unwrap returns the error and ErrUnrunnable.
func (e *DiscardError) Unwrap() []error { return []error{e.Err, ErrUnrunnable} }

// Cancel returns the error that ends the job cancelled, as a cancel of
// the job would (River's JobCancel): no retry, its state cancelled, its
// events cancel_requested and cancelled with the reason requested. err
// (nil: none) is kept as the run's stderr tail.
//
// A worker cannot end a job cancelled by itself: the cluster ends a job
// cancelled only when someone asked for it (a run that reports
// cancelled unasked counts as a failed run, SPEC §3 "Job lifecycle").
// So the registry asks, through its client (Kinds.CancelWith), before it
// reports the run; without a client, or when that call fails, the job
// ends as Discard ends it — failed, with no retry — and the stderr tail
// says why. A Func that returns Cancel's error is discarded so too.
func Cancel(err error) error {
	if err == nil {
		err = errors.New("the job cancelled itself")
	}
	return &CancelError{Err: err}
}

// CancelError is Cancel's error. It matches ErrUnrunnable, so that a job
// that cannot be cancelled is at least not run again.
type CancelError struct{ Err error }

func (e *CancelError) Error() string { return e.Err.Error() }

// Unwrap returns the error and ErrUnrunnable.
func (e *CancelError) Unwrap() []error { return []error{e.Err, ErrUnrunnable} }

// cancelWait bounds the cancel Cancel asks of the cluster.
const cancelWait = 10 * time.Second

// cancel asks the cluster to cancel the job of as, whose function
// returned err (a CancelError), and returns the run's error: err once the
// cluster holds the cancel (the job then ends cancelled however the run
// is reported), or err saying why the job ends failed instead. Once the
// cluster holds it, it waits (at most cancelWait) for the cancel to reach
// this run (runCtx ends), so that the run is reported cancelled, as a
// cancel's run is.
func (k *Kinds) cancel(runCtx context.Context, as *pb.Assign, err error) error {
	k.mu.RLock()
	c := k.canceller
	k.mu.RUnlock()
	if c == nil {
		return fmt.Errorf("%w (the worker has no client to cancel the job with, Kinds.CancelWith: it ends failed, with no retry)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cancelWait)
	defer cancel()
	if _, cerr := c.JobCancel(ctx, as.Tenant, as.Job); cerr != nil {
		return fmt.Errorf("%w (the cluster did not cancel the job: %v; it ends failed, with no retry)", err, cerr)
	}
	select {
	case <-runCtx.Done():
	case <-ctx.Done():
	}
	return err
}
