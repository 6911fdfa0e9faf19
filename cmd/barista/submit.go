package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/baristahq/barista/client"
	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
	"github.com/baristahq/barista/worker/runner"
)

type submitOpts struct {
	tenantFlags
	jobFlags
	key      string
	fromFile string
}

// jobFlags are the flags that say a job: submit's, and schedule set's
// for the job each fire submits.
type jobFlags struct {
	fs          *flag.FlagSet
	size        string
	cost        time.Duration
	jobType     string
	maxAttempts uint32
	timeout     time.Duration
	env         multiFlag
	dir         string
	payload     string
	class       pb.Class
	deadline    time.Duration
	group       string
	delay       time.Duration
	expire      time.Duration
	backoff     time.Duration
	pool        string
	uses        multiFlag
}

// register defines the job's flags on fs.
func (o *jobFlags) register(fs *flag.FlagSet) {
	o.fs = fs
	fs.StringVar(&o.size, "size", "", "container `SIZE`: sm, md or lg (required)")
	defineFlag(fs, "cost", "estimated CPU time, a `DURATION` (required unless the cluster's estimate is auto)", costVal(&o.cost))
	defineFlag(fs, "class", "priority `CLASS` (default normal)", classVal(&o.class))
	defineFlag(fs, "deadline", "start the job within this `DURATION` of the submit (the tenant needs deadlines on)", deadlineVal(&o.deadline))
	fs.StringVar(&o.jobType, "type", "", "job `TYPE` (a label)")
	defineFlag(fs, "max-attempts", "runs allowed to fail before the job fails (`N`, 0 = the configured default)", attemptsVal(&o.maxAttempts))
	defineFlag(fs, "timeout", "kill the job after this running `DURATION` (ends timed_out, never retried)", timeoutVal(&o.timeout))
	fs.Var(&o.env, "env", "environment `KEY=VALUE` for the job (repeatable)")
	fs.StringVar(&o.dir, "dir", "", "working `DIR` of the job")
	fs.StringVar(&o.payload, "payload", "", "the job's payload, `TEXT` as given or @FILE, instead of a command")
	fs.StringVar(&o.group, "group", "", "the job's `GROUP` in its tenant (1..128 bytes of A-Z a-z 0-9 . _ : @ -)")
	fs.StringVar(&o.pool, "pool", "", "the job's `POOL`: only that pool's workers run it (default: the pool default; feature level 6)")
	fs.Var(&o.uses, "uses", "the resources the job uses, `RESOURCE:UNITS[,...]` (repeatable; held from dispatch until the run ends; feature level 8)")
	defineFlag(fs, "delay", "keep the job scheduled for this `DURATION` before it is queued", delayVal(&o.delay))
	defineFlag(fs, "expire", "drop the job if it was not dispatched within this `DURATION` of the submit", expireVal(&o.expire))
	defineFlag(fs, "retry-backoff", "wait this `DURATION` (doubling per failure) before retrying a failed run, instead of the cluster's retry_backoff", backoffVal(&o.backoff))
}

// request is the submit of the job the flags and the command args (after
// --) say, of tenant, without a key.
func (o *jobFlags) request(tenant string, args []string) (*pb.SubmitRequest, error) {
	if o.pool != "" {
		if err := sfq.ValidatePoolName(o.pool); err != nil {
			return nil, usageError("--pool: %v", err)
		}
	}
	size, err := sfq.ParseSize(o.size)
	if err != nil {
		return nil, usageError("--size: %v", err)
	}
	// The group, like every field the cluster checks, is the cluster's to
	// refuse, in the words every other path gets.
	var payload []byte
	switch {
	case o.payload != "" && len(args) > 0:
		return nil, usageError("give either --payload or a command after --, not both")
	case o.payload != "" && (len(o.env) > 0 || o.dir != ""):
		return nil, usageError("--env and --dir are part of a command's payload: give them with a command after --, not with --payload")
	case o.payload != "":
		if payload, err = payloadArg(o.payload); err != nil {
			return nil, err
		}
	case len(args) == 0:
		return nil, usageError("give the job's command after --, e.g. -- sleep 60")
	default:
		spec := runner.Spec{Argv: args, Dir: o.dir, Env: map[string]string{}}
		for _, kv := range o.env {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, usageError("--env %q: want KEY=VALUE", kv)
			}
			spec.Env[k] = v
		}
		if payload, err = runner.EncodePayload(spec); err != nil {
			return nil, usageError("%v", err)
		}
	}
	// Without --cost, 0: the server takes it only under estimate=auto
	// and says so otherwise.
	req := &pb.SubmitRequest{Tenant: tenant, JobType: o.jobType, Size: fsm.SizeToPB(size), EstCostMs: o.cost.Milliseconds(),
		Payload: payload, MaxAttempts: o.maxAttempts, TimeoutMs: o.timeout.Milliseconds(),
		Class: o.class, DeadlineMs: o.deadline.Milliseconds(), Group: o.group,
		DelayMs: o.delay.Milliseconds(), ExpireMs: o.expire.Milliseconds(), Pool: o.pool, Form: jobForm(o.payload == "", o.jobType)}
	if req.Uses, err = usesFlag(o.uses); err != nil {
		return nil, err
	}
	set := map[string]bool{}
	o.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["retry-backoff"] {
		req.RetryBackoffMs = new(o.backoff.Milliseconds())
	}
	return req, nil
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func init() {
	register("submit", typed(&spec[submitOpts]{
		synopsis: "Submit a job",
		usage:    "--tenant NAME --size sm|md|lg --cost DUR [--pool P] [--class C] [--deadline DUR] [--group G] [--delay DUR] [--expire DUR] [--retry-backoff DUR] [--key K] [--type T] [--max-attempts N] [--timeout DUR] -- COMMAND [ARGS...]",
		help: `Submits a job that runs COMMAND ARGS... on a worker of at least the given
size (of its pool: --pool, default the pool default; see "barista pool
--help"). With an admin token --tenant may be left out once the
cluster's default_tenant is set. --cost is the estimated CPU time: the scheduler charges it at
dispatch and corrects it by the measured CPU when the job ends. While the
cluster's estimate is auto (barista config set estimate=auto) --cost may
be left out: the job type's moving average, once it has 3 completed runs,
or the configured default_cost is used (and wins over --cost too once the
average has its runs).

--class critical|high|normal|low (default normal) is the job's priority
class: a worker takes the highest class it fits first. A tenant may use
classes up to its max_class (low always); above it the submit is
PERMISSION_DENIED. --deadline DUR (1s .. 1 year) asks that the job start
within DUR: jobs with a deadline go before the rest of their class,
earliest first, if the tenant is allowed deadlines (barista tenant set
--deadlines on). A deadline is urgency, not expiry: a late job still runs.
See docs/scheduling.md.

--delay DUR keeps the job scheduled, in no queue, for DUR; the leader
releases it into its queue, at its job ID's place, within a second of its
due time (barista job run-now ID releases it at once). --expire DUR drops
the job, ended expired, if it has not been dispatched DUR after the
submit (1s .. 1 year, after --delay); a job dispatched once never
expires. --retry-backoff DUR replaces the cluster's retry_backoff for this
job: a failed run waits DUR × 2^(failures−1), at most retry_backoff_max,
before its retry (0: at once).

With --key the submit is idempotent: the same key and content returns the
existing job ("created": false); the same key with other content is
ALREADY_EXISTS.
The command after -- becomes the payload a command worker ("barista
worker") runs: {"argv": [...]}, with --env KEY=VALUE (repeatable) and
--dir for its environment and working directory; it is a command job,
which only a worker that runs commands gets. --payload TEXT sends TEXT as
the payload, byte for byte, instead of a command (--payload @FILE sends
FILE's bytes), for workers that read their own payloads: with --type it
is a function job of that kind, which only a worker that registered the
kind gets (an SDK worker: docs/workers.md, "Kinds"); without, any worker
may get it. A job no connected worker runs waits (explain: no_worker
kind=K). --group puts the job in a group of its tenant (one per customer,
document, store...): a group may have a cap of its own, and under
group_order=fair the tenant's groups share its dispatches equally (see
"barista group --help"). With --json prints {"job_id": N, "created":
true|false}.

--from-file FILE submits many jobs with the batch API, one JSON object per
line (keys as the flags; cost and timeout are durations; the command is
"argv" with optional "env" and "dir", or "payload": a string sent as its
text, any other JSON value as its JSON):

  {"tenant": "acme", "size": "md", "cost": "90s", "key": "k1", "group": "store-7", "pool": "gpu", "argv": ["render", "7"]}
  {"size": "sm", "class": "high", "deadline": "10m", "type": "thumb", "argv": ["thumb", "9"]}

A line without "tenant" or "pool" takes --tenant and --pool. Jobs go in
requests of up to 1000 jobs and 3 MiB, so large payloads
split across requests; a job refused (too large to send, over a quota)
is reported on its line and never stops the others. It prints a summary
(or one JSON result per line with --json) and exits 1 if any job was
refused.`,
		flags: func(fs *flag.FlagSet, o *submitOpts) {
			*o = submitOpts{}
			o.tenantFlags.register(fs)
			o.jobFlags.register(fs)
			fs.StringVar(&o.key, "key", "", "idempotency `KEY` (1..256 bytes)")
			fs.StringVar(&o.fromFile, "from-file", "", "submit every job of a JSON-lines `FILE` (- for stdin), up to 1000 jobs and 3 MiB per request")
		},
		run: runSubmit,
	}))
}

func runSubmit(env *cmdEnv, opts *submitOpts, args []string) error {
	if opts.fromFile != "" {
		if opts.pool != "" {
			if err := sfq.ValidatePoolName(opts.pool); err != nil {
				return usageError("--pool: %v", err)
			}
		}
		if len(args) > 0 {
			return usageError("--from-file takes no command")
		}
		return submitFile(env, opts)
	}
	req, err := opts.request(opts.tenant, args)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	opts.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["key"] {
		req.IdempotencyKey = &opts.key
	}
	resp, err := withCall(opts.with, (*client.Client).Submit, req)
	if err != nil {
		return err
	}
	if opts.json {
		return printJSON(env.stdout, map[string]any{"job_id": resp.JobId, "created": resp.Created})
	}
	if resp.Created {
		fmt.Fprintf(env.stdout, "job %d submitted\n", resp.JobId)
	} else {
		fmt.Fprintf(env.stdout, "job %d already exists for key %q\n", resp.JobId, opts.key)
	}
	return nil
}

// The bounds of a job's numbers, shared by the flags and the fields of a
// --from-file line. Durations are sent in whole milliseconds: a finer one
// is refused, not rounded (1ns is not "no timeout").
func costVal(p *time.Duration) value {
	return durationVal(p, time.Millisecond, sfq.MaxEstCostMs*time.Millisecond).wholeMs()
}

func timeoutVal(p *time.Duration) value {
	return durationVal(p, time.Millisecond, sfq.MaxTimeoutMs*time.Millisecond).orZero("no timeout").wholeMs()
}

func attemptsVal(p *uint32) value { return &intVal[uint32]{p, 0, sfq.MaxMaxAttempts} }

func deadlineVal(p *time.Duration) value {
	return durationVal(p, sfq.MinDeadlineMs*time.Millisecond, sfq.MaxDeadlineMs*time.Millisecond).wholeMs()
}

func delayVal(p *time.Duration) value {
	return durationVal(p, time.Millisecond, sfq.MaxDelayMs*time.Millisecond).wholeMs()
}

func expireVal(p *time.Duration) value {
	return durationVal(p, sfq.MinExpireMs*time.Millisecond, sfq.MaxExpireMs*time.Millisecond).wholeMs()
}

func backoffVal(p *time.Duration) value {
	return durationVal(p, 0, sfq.MaxRetryBackoffMs*time.Millisecond).wholeMs()
}

// classVal is a class name: critical, high, normal or low.
func classVal(p *pb.Class) value {
	return &parsedVal[pb.Class]{p: p, want: "critical, high, normal or low",
		parse: func(s string) (pb.Class, error) {
			c, err := sfq.ParseClass(s)
			if err != nil {
				return 0, fmt.Errorf("%q is not a class (critical, high, normal or low)", s)
			}
			return fsm.ClassToPB(c), nil
		},
		format: func(c pb.Class) string {
			if c == pb.Class_CLASS_UNSPECIFIED {
				return ""
			}
			k, _ := fsm.ClassFromPB(c)
			return k.String()
		}}
}

// fileJob is one line of a --from-file submit. Numbers are kept as text
// and read by the same values as the flags.
type fileJob struct {
	Tenant      string            `json:"tenant"`
	Size        string            `json:"size"`
	Cost        string            `json:"cost"`
	EstCostMs   json.Number       `json:"est_cost_ms"`
	Key         *string           `json:"key"`
	Type        string            `json:"type"`
	MaxAttempts json.Number       `json:"max_attempts"`
	Timeout     string            `json:"timeout"`
	Class       string            `json:"class"`
	Deadline    string            `json:"deadline"`
	Argv        []string          `json:"argv"`
	Env         map[string]string `json:"env"`
	Dir         string            `json:"dir"`
	Payload     json.RawMessage   `json:"payload"`
	Group       string            `json:"group"`
	Delay       string            `json:"delay"`
	Expire      string            `json:"expire"`
	Backoff     *string           `json:"retry_backoff"`
	Pool        string            `json:"pool"`
}

func (f *fileJob) request(defaultTenant, defaultPool string) (*pb.SubmitRequest, error) {
	size, err := sfq.ParseSize(f.Size)
	if err != nil {
		return nil, fmt.Errorf("size: %v", err)
	}
	req := &pb.SubmitRequest{Tenant: f.Tenant, IdempotencyKey: f.Key, JobType: f.Type, Size: fsm.SizeToPB(size), Group: f.Group, Pool: f.Pool}
	if req.Tenant == "" {
		req.Tenant = defaultTenant
	}
	if req.Pool == "" {
		req.Pool = defaultPool
	}
	if req.Pool != "" {
		if err := sfq.ValidatePoolName(req.Pool); err != nil {
			return nil, fmt.Errorf("pool: %v", err)
		}
	}
	if f.Group != "" {
		if err := sfq.ValidateGroupName(f.Group); err != nil {
			return nil, fmt.Errorf("group: %v", err)
		}
	}
	var cost, timeout, deadline, delay, expire, backoff time.Duration
	backoffText := ""
	if f.Backoff != nil {
		backoffText = *f.Backoff
	}
	fields := []struct {
		name, text string
		val        value
	}{
		{"cost", f.Cost, costVal(&cost)},
		{"est_cost_ms", f.EstCostMs.String(), &intVal[int64]{&req.EstCostMs, 1, sfq.MaxEstCostMs}},
		{"max_attempts", f.MaxAttempts.String(), attemptsVal(&req.MaxAttempts)},
		{"timeout", f.Timeout, timeoutVal(&timeout)},
		{"deadline", f.Deadline, deadlineVal(&deadline)},
		{"class", f.Class, classVal(&req.Class)},
		{"delay", f.Delay, delayVal(&delay)},
		{"expire", f.Expire, expireVal(&expire)},
		{"retry_backoff", backoffText, backoffVal(&backoff)},
	}
	for _, fd := range fields {
		if fd.text == "" {
			continue
		}
		if err := fd.val.Set(fd.text); err != nil {
			return nil, named(fd.name, err)
		}
	}
	switch {
	case f.Cost != "" && f.EstCostMs != "":
		return nil, errors.New("give cost or est_cost_ms, not both")
	case f.Cost != "":
		req.EstCostMs = cost.Milliseconds()
	}
	// Without either, 0: the server takes it only under estimate=auto.
	req.TimeoutMs, req.DeadlineMs = timeout.Milliseconds(), deadline.Milliseconds()
	req.DelayMs, req.ExpireMs = delay.Milliseconds(), expire.Milliseconds()
	if f.Backoff != nil {
		req.RetryBackoffMs = new(backoff.Milliseconds())
	}
	switch {
	case len(f.Payload) > 0 && len(f.Argv) > 0:
		return nil, errors.New("give argv or payload, not both")
	case len(f.Payload) > 0:
		// As given: a string is its text, any other value its JSON.
		var text string
		if json.Unmarshal(f.Payload, &text) == nil {
			req.Payload = []byte(text)
		} else {
			req.Payload = f.Payload
		}
	default:
		if req.Payload, err = runner.EncodePayload(runner.Spec{Argv: f.Argv, Env: f.Env, Dir: f.Dir}); err != nil {
			return nil, err
		}
	}
	req.Form = jobForm(len(f.Payload) == 0, req.JobType)
	return req, nil
}

// jobForm is the form of a job the CLI submits (SPEC §3 "Kinds"): a
// command line is a command job, which any command worker runs; a
// payload of a type is a function job of that kind, which only a worker
// that registered it runs; a payload without a type runs on any worker,
// as before kinds. A cluster below feature level 8 ignores the form.
func jobForm(command bool, jobType string) pb.JobForm {
	switch {
	case command:
		return pb.JobForm_COMMAND
	case jobType != "":
		return pb.JobForm_FUNCTION
	}
	return pb.JobForm_JOB_FORM_UNSPECIFIED
}

// maxFileLine is the longest line --from-file reads: twice what any
// request can carry, so that a line too large for one is refused with
// its size by the client's own check.
const maxFileLine = 2 * client.MaxMessageBytes

func submitFile(env *cmdEnv, opts *submitOpts) error {
	in, err := openInput(opts.fromFile)
	if err != nil {
		return err
	}
	defer in.Close()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), maxFileLine)
	var batch []*pb.SubmitRequest
	var lines []int
	created, existing, refused := 0, 0, 0
	report := func(line int, r *pb.SubmitResult) {
		switch {
		case r.Error != "":
			refused++
			if !opts.json {
				fmt.Fprintf(env.stderr, "line %d: %s\n", line, r.Error)
			}
		case r.Created:
			created++
		default:
			existing++
		}
		if opts.json {
			m := map[string]any{"line": line}
			if r.Error != "" {
				m["error"] = r.Error
			} else {
				m["job_id"], m["created"] = r.JobId, r.Created
			}
			printJSON(env.stdout, m)
		}
	}
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		results, err := withCall(opts.with, (*client.Client).SubmitBatch, batch)
		// The jobs of the requests that went through are reported, even
		// when a later request could not be sent.
		for i, r := range results {
			report(lines[i], r)
		}
		if err != nil {
			if e := (*client.Error)(nil); errors.As(err, &e) && len(results) < len(lines) {
				return fmt.Errorf("lines %d..%d not submitted: %w", lines[len(results)], lines[len(lines)-1], e)
			}
			return err
		}
		batch, lines = batch[:0], lines[:0]
		return nil
	}
	n := 0
	for sc.Scan() {
		n++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		var fj fileJob
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&fj); err != nil {
			report(n, &pb.SubmitResult{Error: "INVALID_ARGUMENT: " + err.Error()})
			continue
		}
		if _, err := dec.Token(); err != io.EOF {
			report(n, &pb.SubmitResult{Error: "INVALID_ARGUMENT: data after the job's JSON object (one object per line)"})
			continue
		}
		req, err := fj.request(opts.tenant, opts.pool)
		if err != nil {
			report(n, &pb.SubmitResult{Error: "INVALID_ARGUMENT: " + err.Error()})
			continue
		}
		batch = append(batch, req)
		lines = append(lines, n)
		if len(batch) == client.MaxBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			// What came before it is still sent, and said.
			if ferr := flush(); ferr != nil {
				return ferr
			}
			return fmt.Errorf("line %d: longer than %d bytes, more than any job can be (a request is at most %d bytes): it and the lines after it were not submitted",
				n+1, maxFileLine, client.MaxMessageBytes)
		}
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	if !opts.json {
		fmt.Fprintf(env.stdout, "%d submitted, %d already existed, %d refused\n", created, existing, refused)
	}
	if refused > 0 {
		return &silentError{code: 1}
	}
	return nil
}

// payloadArg reads --payload: TEXT as given, or @FILE's bytes.
func payloadArg(v string) ([]byte, error) {
	name, ok := strings.CutPrefix(v, "@")
	if !ok {
		return []byte(v), nil
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, usageError("--payload @%s: %v", name, err)
	}
	return b, nil
}

// usesFlag reads the --uses flags: RESOURCE:UNITS, each flag one or a
// comma list (sfq.ParseUses: each resource once, at most 8, units >= 1).
func usesFlag(flags multiFlag) ([]*pb.ResourceUse, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	uses, err := sfq.ParseUses(strings.Join(flags, ","))
	if err != nil {
		return nil, usageError("--uses: %v", err)
	}
	return fsm.UsesToPB(uses), nil
}
