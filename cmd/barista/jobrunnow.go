package main

import (
	"context"
	"fmt"

	"github.com/baristahq/barista/client"
	pb "github.com/baristahq/barista/proto"
)

func init() {
	register("job run-now", typed(&spec[tenantFlags]{
		synopsis: "Release a scheduled job at once",
		usage:    "ID [--tenant NAME] [--json]",
		help: `Releases a scheduled job (submitted with --delay, or backing off after a
failed run) into its queue now, at its job ID's place, instead of at its
due time. An admin may run any tenant's job; a tenant's client token only
its own. A job that is not scheduled, or whose expiry has passed, is
refused (FAILED_PRECONDITION).`,
		run: func(env *cmdEnv, opts *tenantFlags, args []string) error {
			id, resp, err := withJob(&opts.clientFlags, args, "job run-now needs one ID", func(cl *client.Client, id uint64) (*pb.RunJobNowResponse, error) {
				return cl.RunJobNow(context.Background(), &pb.RunJobNowRequest{Tenant: opts.tenant, JobId: id})
			})
			if err != nil {
				return err
			}
			if opts.json {
				return printJSON(env.stdout, map[string]any{"job_id": id, "state": resp.State})
			}
			fmt.Fprintf(env.stdout, "job %d released: %s\n", id, resp.State)
			return nil
		},
	}))
}
