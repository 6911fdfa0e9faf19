package main

import (
	"context"
	"flag"
	"fmt"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/rpc/client"
)

func init() {
	register("cancel", typed(&spec[tenantFlags]{
		synopsis: "Cancel a job",
		usage:    "ID [--tenant NAME]",
		help: `A queued job is cancelled at once. An assigned or running job is marked
cancel-requested; its worker is told to stop (SIGTERM, then SIGKILL after
the grace) and the job ends cancelled when the worker confirms or its lease
expires.`,
		flags: func(fs *flag.FlagSet, o *tenantFlags) { o.register(fs) },
		run: func(env *cmdEnv, opts *tenantFlags, args []string) error {
			if len(args) != 1 {
				return usageError("cancel needs one ID")
			}
			id, err := parseJobID(args[0])
			if err != nil {
				return err
			}
			var resp *pb.CancelJobResponse
			if err := opts.with(func(cl *client.Client) (err error) {
				resp, err = cl.CancelJob(context.Background(), &pb.CancelJobRequest{Tenant: opts.tenant, JobId: id})
				return err
			}); err != nil {
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
