package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"

	pb "barista/proto"
	"barista/rpc/agent/runner"
	"barista/sfq"
)

type submitOpts struct {
	tenantFlags
	fs          *flag.FlagSet
	size        string
	cost        time.Duration
	key         string
	jobType     string
	maxAttempts uint
	timeout     time.Duration
	env         multiFlag
	dir         string
	payload     string
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func init() {
	register("submit", &command{
		synopsis: "Submit a job",
		usage:    "--tenant NAME --size sm|md|lg --cost DUR [--key K] [--type T] [--max-attempts N] [--timeout DUR] -- COMMAND [ARGS...]",
		help: `Submits a job that runs COMMAND ARGS... on a worker of at least the given
size. --cost is the estimated CPU time: the scheduler charges it at
dispatch and corrects it by the measured CPU when the job ends. With --key
the submit is idempotent: the same key and content returns the existing
job ("created": false); the same key with other content is ALREADY_EXISTS.
--env KEY=VALUE (repeatable) and --dir set the job's environment and
working directory; --payload gives the raw JSON payload instead of a
command. With --json prints {"job_id": N, "created": true|false}.`,
		flags: func(fs *flag.FlagSet) any {
			o := &submitOpts{fs: fs}
			o.tenantFlags.register(fs)
			fs.StringVar(&o.size, "size", "", "container `SIZE`: sm, md or lg (required)")
			fs.DurationVar(&o.cost, "cost", 0, "estimated CPU time, a `DURATION` (required)")
			fs.StringVar(&o.key, "key", "", "idempotency `KEY` (1..256 bytes)")
			fs.StringVar(&o.jobType, "type", "", "job `TYPE` (a label)")
			fs.UintVar(&o.maxAttempts, "max-attempts", 0, "runs allowed to fail before the job fails (`N`, default from the config)")
			fs.DurationVar(&o.timeout, "timeout", 0, "kill the job after this running `DURATION` (ends timed_out, never retried)")
			fs.Var(&o.env, "env", "environment `KEY=VALUE` for the job (repeatable)")
			fs.StringVar(&o.dir, "dir", "", "working `DIR` of the job")
			fs.StringVar(&o.payload, "payload", "", "raw `JSON` payload instead of a command")
			return o
		},
		run: runSubmit,
	})
}

func runSubmit(env *cmdEnv, o any, args []string) error {
	opts := o.(*submitOpts)
	set := map[string]bool{}
	opts.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	size, err := sfq.ParseSize(opts.size)
	if err != nil {
		return usageError("--size: %v", err)
	}
	if opts.cost <= 0 {
		return usageError("--cost: a positive estimated CPU time is required (e.g. 90s)")
	}
	var payload []byte
	switch {
	case opts.payload != "" && len(args) > 0:
		return usageError("give either --payload or a command after --, not both")
	case opts.payload != "":
		if _, err := runner.ParsePayload([]byte(opts.payload)); err != nil {
			return usageError("--payload: %v", err)
		}
		payload = []byte(opts.payload)
	case len(args) == 0:
		return usageError("give the job's command after --, e.g. -- sleep 60")
	default:
		spec := runner.Spec{Argv: args, Dir: opts.dir, Env: map[string]string{}}
		for _, kv := range opts.env {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return usageError("--env %q: want KEY=VALUE", kv)
			}
			spec.Env[k] = v
		}
		if payload, err = runner.EncodePayload(spec); err != nil {
			return usageError("%v", err)
		}
	}
	req := &pb.SubmitRequest{Tenant: opts.tenant, JobType: opts.jobType, Size: pb.Size(size + 1), EstCostMs: opts.cost.Milliseconds(),
		Payload: payload, MaxAttempts: uint32(opts.maxAttempts), TimeoutMs: opts.timeout.Milliseconds()}
	if set["key"] {
		req.IdempotencyKey = &opts.key
	}
	var resp *pb.SubmitResponse
	if err := opts.call(func(ctx context.Context, cc *grpc.ClientConn) (err error) {
		resp, err = pb.NewClientClient(cc).Submit(ctx, req)
		return err
	}); err != nil {
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
