package main

import (
	"context"
	"flag"

	"github.com/baristahq/barista/client"
	pb "github.com/baristahq/barista/proto"
)

func init() {
	register("purge", typed(&spec[bulkFlags]{
		synopsis: "Delete ended jobs now",
		usage:    "--tenant NAME (--filter [--state STATES] [--type TYPE] [--group GROUP] [--pool POOL] [--since DURATION] | --ids IDS) [--dry-run]",
		help: `Deletes a tenant's ended jobs (completed, failed, cancelled, timed_out,
expired) before their retention would: by --ids, or with --filter by the
same filter as redrive (--filter alone: every ended job of the tenant).
A job that has not ended is skipped. The cluster takes at most 10000 jobs
a call; the command calls again until every match is done. --dry-run
lists the jobs it would delete. Needs cluster feature level 5.`,
		flags: func(fs *flag.FlagSet, o *bulkFlags) {
			o.register(fs, "completed, failed, cancelled, timed_out, expired; default all")
			fs.BoolVar(&o.filter, "filter", false, "take the jobs the filter flags match")
		},
		run: func(env *cmdEnv, opts *bulkFlags, args []string) error {
			if len(args) != 0 {
				return usageError("purge takes no arguments (job IDs go in --ids)")
			}
			if opts.ids == "" && !opts.filter {
				return usageError("purge needs --ids, or --filter with the filter flags")
			}
			if opts.ids != "" && opts.filter {
				return usageError("--ids and --filter: give one, not both")
			}
			return runBulk(env, opts, "purged", func(cl *client.Client, req *pb.BulkJobsRequest) (*pb.BulkJobsResponse, error) {
				return cl.PurgeJobs(context.Background(), req)
			})
		},
	}))
}
