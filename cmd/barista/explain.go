package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/baristahq/barista/client"
	pb "github.com/baristahq/barista/proto"
)

func init() {
	register("explain", typed(&spec[explainOpts]{
		synopsis: "Say why a job is waiting (or where it is)",
		usage:    "JOB [--tenant NAME] [--json]",
		help: `Asks the leader why a job of the tenant waits: the first of these that
applies (docs/scheduling.md, "Why a job waits"):

  behind        older jobs of its queue (tenant, class, group, size) go
                first
  cap           it is next in its queue but a cap of its tenant, or of
                its group (vertex group_running), holds it
  held          an older job of its tenant and size, blocked by a cap of
                the tenant, holds it back (jobs of one size keep their
                order, whatever their group)
  group_turn    it could run, but another group of its tenant goes first
                (the oldest job under group_order fifo, the group with the
                lowest group tag under fair)
  higher_class  a higher class has an eligible job that fits the same workers
  no_worker     no connected, undrained worker of its size or larger
  waiting       it can run and waits its turn (candidates ahead, its
                tenant's tag and its class's virtual_now)

or assigned/running (and the worker), or the state it ended in. Prints
one paragraph; --json prints one object: job_id, reason, class, size,
text, group (for a job of a named group), and the reason's fields as
numbers (position; vertex, current, limit; ahead, tag_ms, vnow_ms;
worker; group_order for group_turn). Another tenant's job is
NOT_FOUND, like a missing one.`,
		flags: func(fs *flag.FlagSet, o *explainOpts) {
			// No --stale: the leader answers (it knows the workers).
			o.register(fs)
			fs.StringVar(&o.tenant, "tenant", os.Getenv("BARISTA_TENANT"), "`TENANT` (may be omitted with a client token; $BARISTA_TENANT)")
		},
		run: func(env *cmdEnv, opts *explainOpts, args []string) error {
			_, r, err := withJob(&opts.clientFlags, args, "explain needs one JOB id", func(cl *client.Client, id uint64) (*pb.ExplainJobResponse, error) {
				return cl.ExplainJob(context.Background(), &pb.ExplainJobRequest{Tenant: opts.tenant, JobId: id})
			})
			if err != nil {
				return err
			}
			if opts.json {
				return printJSON(env.stdout, explainJSON(r))
			}
			_, err = fmt.Fprintln(env.stdout, r.Text)
			return err
		},
	}))
}

type explainOpts struct {
	clientFlags
	tenant string
}

// explainJSON is the JSON form of a reason: its fields as numbers, like
// barista replay --json prints an explain line.
func explainJSON(r *pb.ExplainJobResponse) map[string]any {
	m := map[string]any{"job_id": r.JobId, "reason": r.Reason, "class": className(r.Class), "size": sizeName(r.Size), "text": r.Text}
	if r.Group != "" {
		m["group"] = r.Group
	}
	switch r.Reason {
	case "group_turn":
		m["group_order"] = r.GroupOrder
	case "scheduled":
		m["due_ms"] = r.DueMs
	case "paused":
		m["vertex"] = r.Vertex
	case "behind":
		m["position"] = r.Position
	case "cap":
		m["vertex"], m["current"], m["limit"] = r.Vertex, r.Current, r.Limit
	case "rate":
		m["vertex"], m["eligible_at_ms"] = r.Vertex, r.EligibleAtMs
	case "waiting":
		m["ahead"], m["tag_ms"], m["vnow_ms"] = r.Ahead, json.RawMessage(r.TagMs), json.RawMessage(r.VnowMs)
		if r.FittingWorkers > 0 {
			m["fitting_workers"], m["workers_busy"] = r.FittingWorkers, r.WorkersBusy
		}
	case "assigned", "running":
		m["worker"] = r.WorkerId
	}
	if r.Place != nil {
		m["place"] = placeJSON(r.Place)
	}
	return m
}
