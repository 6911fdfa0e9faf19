package client

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	pb "github.com/baristahq/barista/proto"
)

// JobArgs are a job's typed arguments. Kind names the job's type (its
// job_type: a worker routes the job to the function registered for it,
// and cost estimates learn by it); the value, encoded as JSON, is the
// job's payload. Kind must not depend on the value: it is read from the
// type's zero value too.
//
//	type ResizeArgs struct {
//		Image string `json:"image"`
//		Width int    `json:"width"`
//	}
//
//	func (ResizeArgs) Kind() string { return "resize" }
type JobArgs interface {
	Kind() string
}

// Size is a job's size class: the smallest worker size that may run it.
type Size string

// The sizes; "" is SizeSM.
const (
	SizeSM Size = "sm"
	SizeMD Size = "md"
	SizeLG Size = "lg"
)

// Class is a job's priority class; "" is ClassNormal.
type Class string

// The classes, highest first.
const (
	ClassCritical Class = "critical"
	ClassHigh     Class = "high"
	ClassNormal   Class = "normal"
	ClassLow      Class = "low"
)

// NoRetryBackoff, as InsertOpts.RetryBackoff, requeues a failed run at
// once, whatever the cluster's retry_backoff.
const NoRetryBackoff time.Duration = -1

// InsertOpts are the options of one insert. The zero value is a job of
// the caller's tenant (a client token's) in the pool default, size sm,
// class normal, with the cluster's defaults for the rest.
type InsertOpts struct {
	// Tenant is the job's tenant: empty for a client token's own tenant;
	// an admin token names one (or the cluster's default_tenant).
	Tenant string
	// Pool is the job's pool ("": the pool default).
	Pool string
	// Size and Class of the job ("": sm, normal).
	Size  Size
	Class Class
	// Group is the job's group in its tenant ("": the unnamed group).
	Group string
	// Key is the job's idempotency key ("": none). An insert with a key
	// is retried on another node when a node fails: the same key and
	// content gives the job already made (Duplicate), other content
	// ErrKeyConflict.
	Key string
	// Cost is the job's estimated CPU (whole milliseconds); 0 leaves it
	// to the cluster's estimate=auto (refused under estimate=submitted).
	Cost time.Duration
	// Timeout ends a run that takes longer (0: none).
	Timeout time.Duration
	// MaxAttempts bounds the job's failed runs (0: the cluster's
	// max_attempts).
	MaxAttempts int
	// Delay keeps the job scheduled, in no queue, that long (0: none).
	Delay time.Duration
	// ExpireAfter drops the job if it was never dispatched that long
	// after the insert (0: never; at least 1 s, after Delay).
	ExpireAfter time.Duration
	// Deadline is the time the job should have started by (zero: none);
	// only a tenant with allow_deadlines may give one, at least a second
	// ahead.
	Deadline time.Time
	// RetryBackoff replaces the cluster's retry_backoff for this job (0:
	// the cluster's; NoRetryBackoff: a failed run is requeued at once).
	RetryBackoff time.Duration
	// Uses are the resources the job uses (SPEC §3 "Resources"), by name,
	// with the units of each (1 .. its capacity; at most 8 resources):
	// held from its dispatch until its run ends. An undeclared resource
	// is ErrResourceUnknown.
	Uses map[string]int
}

// submitRequest builds the submit of args under opts at time now (a deadline
// is sent as the time left until it).
func submitRequest(args JobArgs, opts *InsertOpts, now time.Time) (*pb.SubmitRequest, error) {
	if args == nil {
		return nil, invalidArg("args: nil")
	}
	kind := args.Kind()
	if kind == "" {
		return nil, invalidArg(fmt.Sprintf("args: %T has an empty Kind", args))
	}
	payload, err := json.Marshal(args)
	if err != nil {
		return nil, invalidArg(fmt.Sprintf("args: %T as JSON: %v", args, err))
	}
	if opts == nil {
		opts = &InsertOpts{}
	}
	// A function job of its kind: only a worker that registered the kind
	// runs it (SPEC §3 "Kinds"; a cluster below feature level 8 ignores
	// the form, and any worker may get it).
	req := &pb.SubmitRequest{Tenant: opts.Tenant, Pool: opts.Pool, JobType: kind, Payload: payload, Group: opts.Group,
		EstCostMs: opts.Cost.Milliseconds(), TimeoutMs: opts.Timeout.Milliseconds(), DelayMs: opts.Delay.Milliseconds(),
		ExpireMs: opts.ExpireAfter.Milliseconds(), Form: pb.JobForm_FUNCTION}
	if opts.MaxAttempts < 0 {
		return nil, invalidArg(fmt.Sprintf("max_attempts: %d", opts.MaxAttempts))
	}
	req.MaxAttempts = uint32(min(opts.MaxAttempts, 1<<31))
	if req.Uses, err = usesToPB(opts.Uses); err != nil {
		return nil, err
	}
	if opts.Key != "" {
		req.IdempotencyKey = proto.String(opts.Key)
	}
	if req.Size, err = sizeToPB(opts.Size); err != nil {
		return nil, err
	}
	if req.Class, err = classToPB(opts.Class); err != nil {
		return nil, err
	}
	if !opts.Deadline.IsZero() {
		// Rounded up: the cluster's deadline is never before the caller's.
		left := opts.Deadline.Sub(now)
		req.DeadlineMs = (left + time.Millisecond - 1).Milliseconds()
		if req.DeadlineMs < 1 {
			return nil, invalidArg(fmt.Sprintf("deadline: %s has passed", opts.Deadline.Format(time.RFC3339)))
		}
	}
	switch {
	case opts.RetryBackoff == NoRetryBackoff:
		req.RetryBackoffMs = proto.Int64(0)
	case opts.RetryBackoff > 0:
		req.RetryBackoffMs = proto.Int64(opts.RetryBackoff.Milliseconds())
	case opts.RetryBackoff < 0:
		return nil, invalidArg(fmt.Sprintf("retry_backoff: %s", opts.RetryBackoff))
	}
	return req, nil
}

func invalidArg(msg string) error { return &Error{Code: codes.InvalidArgument, Message: msg} }

func sizeToPB(s Size) (pb.Size, error) {
	return enumToPB[pb.Size]("size", string(s), pb.Size_value, pb.Size_SM, "sm, md or lg")
}

func classToPB(c Class) (pb.Class, error) {
	return enumToPB[pb.Class]("class", string(c), pb.Class_value, pb.Class_CLASS_UNSPECIFIED, "critical, high, normal or low")
}

// enumToPB reads an enum's lower-case name ("": def) by its proto values.
func enumToPB[E ~int32](field, name string, values map[string]int32, def E, want string) (E, error) {
	if name == "" {
		return def, nil
	}
	if v, ok := values[strings.ToUpper(name)]; ok && v != 0 {
		return E(v), nil
	}
	return 0, invalidArg(fmt.Sprintf("%s: %q (want %s)", field, name, want))
}

// InsertResult is what an insert made: the job, and whether its
// idempotency key named a job made before (Duplicate: nothing new was
// made).
type InsertResult struct {
	Job       *Job
	Duplicate bool
}

// Insert submits one job of kind args.Kind() with args as its JSON
// payload, a function job of that kind (only a worker that registered
// the kind is given it; a job no connected worker runs waits), and
// returns the job as the cluster holds it just after, from the submit's
// own answer (SubmitRequest.return_job; a server of a build before it
// answers no job, and Insert then reads it back, one more call, from the
// node that answered or one at least as far along). Job.Payload is the
// payload sent.
// A refusal is an *Error matching the sentinel of its cause
// (ErrQuotaExceeded, ErrRateLimited with RetryAfter, ErrKeyConflict,
// ErrTenantUnknown, ErrTooLarge) and of its code.
func (c *Client) Insert(ctx context.Context, args JobArgs, opts *InsertOpts) (*InsertResult, error) {
	req, err := submitRequest(args, opts, time.Now())
	if err != nil {
		return nil, err
	}
	req.ReturnJob = true
	resp, err := c.Submit(ctx, req)
	if err != nil {
		return nil, err
	}
	var job *Job
	if resp.Job != nil && resp.Job.JobId == resp.JobId {
		job = JobFromProto(resp.Job)
		// The answer leaves the payload out: it is the one sent (a key
		// that matched another payload would have been refused).
		job.Payload = req.Payload
	} else if job, err = c.JobGet(ctx, req.Tenant, resp.JobId); err != nil {
		return nil, fmt.Errorf("job %d was inserted, but reading it back failed: %w", resp.JobId, err)
	}
	return &InsertResult{Job: job, Duplicate: !resp.Created}, nil
}

// InsertManyParams is one job of InsertMany.
type InsertManyParams struct {
	Args JobArgs
	Opts *InsertOpts
}

// InsertManyResult is one job's outcome in InsertMany: its ID and
// Duplicate, or Err, the job's refusal (an *Error matching its cause's
// sentinel) — one job refused does not stop the others.
type InsertManyResult struct {
	ID        uint64
	Duplicate bool
	Err       error
}

// InsertMany submits jobs in as few requests as fit (SubmitBatch), each a
// function job of its kind as Insert's, and returns one result per job, in
// order. A job whose arguments cannot be
// sent (no kind, not JSON) is refused alone. The error is the batch's:
// the cluster could not be reached for some of the jobs; results then
// hold the jobs before them.
func (c *Client) InsertMany(ctx context.Context, jobs []InsertManyParams) ([]InsertManyResult, error) {
	now := time.Now()
	out := make([]InsertManyResult, len(jobs))
	reqs := make([]*pb.SubmitRequest, 0, len(jobs))
	which := make([]int, 0, len(jobs))
	for i, p := range jobs {
		req, err := submitRequest(p.Args, p.Opts, now)
		if err != nil {
			out[i].Err = err
			continue
		}
		reqs = append(reqs, req)
		which = append(which, i)
	}
	res, err := c.SubmitBatch(ctx, reqs)
	for k, r := range res {
		i := which[k]
		if out[i].Err = SubmitResultError(r); out[i].Err == nil {
			out[i].ID, out[i].Duplicate = r.JobId, !r.Created
		}
	}
	if err != nil && len(res) < len(which) {
		return out[:which[len(res)]], err
	}
	return out, err
}

// Job is a job as the cluster holds it, in Go types: times are wall
// clock (the leader's, converted from cluster time), durations whole
// milliseconds.
type Job struct {
	ID     uint64
	Tenant string
	Pool   string
	Kind   string // its job_type
	// Form says which workers run it: FormFunction (a worker that
	// registered its Kind: Insert's jobs), FormCommand (a worker that runs
	// command lines) or FormAny (every worker: a job submitted without a
	// form, or read from a cluster below feature level 8).
	Form  Form
	Group string
	Key   string // its idempotency key
	// Uses are the resources it uses, by name, with their units (nil:
	// none).
	Uses map[string]int
	// State: JobScheduled, JobQueued, JobAssigned, JobRunning,
	// JobCompleted, JobFailed, JobCancelled, JobTimedOut or JobExpired.
	State JobState
	Size  Size
	Class Class
	// Attempt counts its dispatches so far: 1 during its first run, and
	// one more for each run after it (a retry, a snooze, a run after an
	// unknown_kind or a lost lease): the next run of a job is never the
	// same Attempt.
	Attempt int
	// Failures counts its failed or lost runs, against MaxAttempts: the
	// job is retried while Failures < MaxAttempts.
	Failures    int
	MaxAttempts int
	// Snoozes counts its runs snoozed in a row so far (worker.Snooze): 0
	// once a run did not snooze (it completed, failed, or was cancelled),
	// and after a redrive. At the cluster's max_snoozes (100) in a row
	// the job ends failed, reason snoozed_too_often.
	Snoozes int
	// Cost is its estimate (from EstSource: submitted, ema or default);
	// CPU the CPU its last run used.
	Cost      time.Duration
	EstSource string
	CPU       time.Duration
	// Worker is the worker of its current or last run.
	Worker string
	// SubmittedAt and EndedAt (zero while it runs on), DueAt (while
	// scheduled), ExpireAt and Deadline (zero: none).
	SubmittedAt, EndedAt, DueAt, ExpireAt, Deadline time.Time
	// The last run's end, when HasResult: its exit code, the tails of
	// its output, how its CPU was measured and why it failed.
	HasResult bool
	ExitCode  int
	Stdout    string
	Stderr    string
	CPUSource string
	Failure   string
	Cancel    string // a cancel asked for it: requested or timeout ("none")
	// Place is a queued job's place in line (JobGet only; nil when it has
	// none: not queued, or held by something JobExplain names).
	Place   *Place
	Payload []byte
	Proto   *pb.Job // as the cluster sent it
}

// JobFromProto converts a job as the cluster sends it.
func JobFromProto(j *pb.Job) *Job {
	wall := func(clusterMs int64) time.Time {
		if clusterMs == 0 {
			return time.Time{}
		}
		t, _ := WallAt(j.GetNow(), clusterMs)
		return t
	}
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	out := &Job{ID: j.JobId, Tenant: j.Tenant, Pool: j.Pool, Kind: j.JobType, Form: formOf(j.Form), Group: j.Group, Key: j.IdempotencyKey, Uses: usesOf(j.Uses), State: JobState(j.State),
		Size: sizeOf(j.Size), Class: classOf(j.Class), Place: placeOf(j.Now, j.Place), Attempt: int(j.Attempt), Failures: int(j.Failures),
		MaxAttempts: int(j.MaxAttempts), Snoozes: int(j.Snoozes), Cost: ms(j.EstCostMs), EstSource: j.EstSource, CPU: ms(j.CpuMs),
		Worker: j.WorkerId, DueAt: wall(j.DueAtMs), ExpireAt: wall(j.ExpireAtMs), Deadline: wall(j.DeadlineAtMs),
		HasResult: j.HasResult, ExitCode: int(j.ExitCode), Stdout: j.StdoutTail, Stderr: j.StderrTail, CPUSource: j.CpuSource,
		Failure: j.Failure, Cancel: j.Cancel, Payload: j.Payload, Proto: j}
	if j.SubmittedWallMs != 0 {
		out.SubmittedAt = time.UnixMilli(j.SubmittedWallMs)
	}
	if j.EndedWallMs != 0 {
		out.EndedAt = time.UnixMilli(j.EndedWallMs)
	}
	return out
}

func formOf(f pb.JobForm) Form {
	switch f {
	case pb.JobForm_COMMAND:
		return FormCommand
	case pb.JobForm_FUNCTION:
		return FormFunction
	}
	return FormAny
}

func classOf(c pb.Class) Class {
	if c == pb.Class_CLASS_UNSPECIFIED {
		return ClassNormal
	}
	return Class(strings.ToLower(c.String()))
}

// JobGet returns a job of the tenant ("" for a client token's own) with
// its payload.
func (c *Client) JobGet(ctx context.Context, tenant string, id uint64) (*Job, error) {
	j, err := c.GetJob(ctx, &pb.GetJobRequest{Tenant: tenant, JobId: id})
	if err != nil {
		return nil, err
	}
	return JobFromProto(j), nil
}

// UnmarshalArgs decodes the job's payload into args (the JSON an Insert
// of such args sent).
func (j *Job) UnmarshalArgs(args JobArgs) error { return json.Unmarshal(j.Payload, args) }
