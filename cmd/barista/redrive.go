package main

import (
	"context"
	"flag"

	"github.com/baristahq/barista/client"
	pb "github.com/baristahq/barista/proto"
)

type redriveOpts struct {
	bulkFlags
	maxAttempts uint
}

func init() {
	register("redrive", typed(&spec[redriveOpts]{
		synopsis: "Run dead letters again (failed, timed_out, expired or cancelled jobs)",
		usage:    "--tenant NAME [--state STATES] [--type TYPE] [--group GROUP] [--pool POOL] [--since DURATION] [--ids IDS] [--max-attempts N] [--dry-run]",
		help: `Moves a tenant's dead letters back to queued: by --ids, or by a filter
(--state, --type, --group, --pool, --since; none: every dead letter of
the tenant) that the cluster evaluates when it applies the call. A job
keeps its ID and its place by ID in its tenant's queue, its class and
cost estimate; its failures start again from 0 (--max-attempts sets a
new limit) and its attempt keeps counting. A completed job is never
redriven. The cluster takes at most 10000 jobs a call; the command calls
again until every match is done, then prints the totals. A job over the
tenant's max_queued quota stops it (exit code 1); run it again once the
queue drained. --dry-run lists the jobs a redrive would take and changes
nothing. Needs cluster feature level 5 (--pool: 6).`,
		flags: func(fs *flag.FlagSet, o *redriveOpts) {
			o.bulkFlags.register(fs, "failed, timed_out, expired, cancelled; default all four")
			fs.UintVar(&o.maxAttempts, "max-attempts", 0, "give each redriven job this max_attempts `N` (default: keep its own)")
		},
		run: func(env *cmdEnv, opts *redriveOpts, args []string) error {
			if len(args) != 0 {
				return usageError("redrive takes no arguments (job IDs go in --ids)")
			}
			if opts.maxAttempts > 1000 {
				return usageError("--max-attempts: %d (want 1..1000)", opts.maxAttempts)
			}
			return runBulk(env, &opts.bulkFlags, "redriven", func(cl *client.Client, req *pb.BulkJobsRequest) (*pb.BulkJobsResponse, error) {
				req.MaxAttempts = uint32(opts.maxAttempts)
				return cl.Redrive(context.Background(), req)
			})
		},
	}))
}
