package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/baristahq/barista/client"
	pb "github.com/baristahq/barista/proto"
)

func init() {
	register("cancel", typed(&spec[bulkFlags]{
		synopsis: "Cancel a job, or many",
		usage:    "ID [--tenant NAME] | --tenant NAME (--filter [--state STATES] [--type TYPE] [--group GROUP] [--pool POOL] [--since DURATION] | --ids IDS) [--dry-run]",
		help: `A queued job is cancelled at once. An assigned or running job is marked
cancel-requested; its worker is told to stop (SIGTERM, then SIGKILL after
the grace) and the job ends cancelled when the worker confirms or its lease
expires.

With --ids, or --filter and the filter flags of redrive (--filter alone:
every queued, scheduled, assigned or running job of the tenant), it
cancels many jobs, at most 10000 a call, calling again until every match
is done, and prints each job's result and the totals; --dry-run lists
them. The bulk form needs cluster feature level 5.`,
		flags: func(fs *flag.FlagSet, o *bulkFlags) {
			o.register(fs, "queued, scheduled, assigned, running; default all")
			fs.BoolVar(&o.filter, "filter", false, "cancel the jobs the filter flags match")
		},
		run: func(env *cmdEnv, opts *bulkFlags, args []string) error {
			bulk := opts.filter || opts.ids != "" || opts.filtered() || opts.dryRun
			switch {
			case bulk && len(args) != 0:
				return usageError("cancel takes one ID, or --ids / --filter, not both")
			case bulk && opts.ids == "" && !opts.filter:
				return usageError("the filter flags need --filter")
			case bulk && opts.ids != "" && opts.filter:
				return usageError("--ids and --filter: give one, not both")
			case bulk:
				return runBulk(env, opts, "cancelled", func(cl *client.Client, req *pb.BulkJobsRequest) (*pb.BulkJobsResponse, error) {
					return cl.CancelJobs(context.Background(), req)
				})
			}
			id, resp, err := withJob(&opts.clientFlags, args, "cancel needs one ID", func(cl *client.Client, id uint64) (*pb.CancelJobResponse, error) {
				return cl.CancelJob(context.Background(), &pb.CancelJobRequest{Tenant: opts.tenant, JobId: id})
			})
			if err != nil {
				return err
			}
			if opts.json {
				return printJSON(env.stdout, map[string]any{"job_id": id, "state": resp.State, "cancel_requested": resp.CancelRequested})
			}
			if resp.CancelRequested {
				fmt.Fprintf(env.stdout, "job %d: cancel requested (it is %s; the worker is being told to stop)\n", id, resp.State)
			} else {
				fmt.Fprintf(env.stdout, "job %d: %s\n", id, resp.State)
			}
			return nil
		},
	}))
}
