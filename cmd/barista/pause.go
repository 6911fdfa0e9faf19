package main

import (
	"flag"
	"fmt"

	"github.com/baristahq/barista/client"
	"github.com/baristahq/barista/internal/termtext"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
)

type pauseOpts struct {
	clientFlags
	group string
}

const pauseHelp = `A paused tenant (or, with --group, one named group of it) keeps its
queued jobs waiting: running jobs go on, submits are accepted, and
"barista explain" says paused. A paused group never holds back the
tenant's other groups. On resume the tenant (or group) is treated like one
that was held by its own caps: it banks no credit for the time it was
paused, so it does not flood the workers to catch up.

An admin token may pause and resume any tenant; the tenant's own client
token its own tenant and groups (NAME must be its tenant), but it cannot
lift a pause an admin set. Each change is a "paused" or "resumed" event in
the tenant's event stream (job 0; the group, if any, in "group").`

func init() {
	for _, verb := range []string{"pause", "resume"} {
		register("tenant "+verb, typed(&spec[pauseOpts]{
			synopsis: map[string]string{"pause": "Pause a tenant, or one of its groups: its queued jobs wait",
				"resume": "Resume a paused tenant or group"}[verb],
			usage: "NAME [--group G] [--json]",
			help:  pauseHelp,
			flags: func(fs *flag.FlagSet, o *pauseOpts) {
				o.register(fs)
				fs.StringVar(&o.group, "group", "", "pause or resume only this named `GROUP` of the tenant")
			},
			run: func(env *cmdEnv, opts *pauseOpts, args []string) error {
				if len(args) != 1 {
					return usageError("tenant %s needs one NAME", verb)
				}
				if opts.group != "" {
					if err := sfq.ValidateGroupName(opts.group); err != nil {
						return usageError("--group: %v", err)
					}
				}
				resp, err := ask(opts.call, pb.NewClientClient, pb.ClientClient.Pause, &pb.PauseRequest{Tenant: args[0], Group: opts.group, Resume: verb == "resume"})
				if err != nil {
					return err
				}
				if opts.json {
					return printJSON(env.stdout, map[string]any{"tenant": args[0], "group": opts.group, "paused": resp.Paused, "changed": resp.Changed})
				}
				what := "tenant " + termtext.Safe(args[0], false)
				if opts.group != "" {
					what = "group " + opts.group + " of " + what
				}
				done := map[string]string{"pause": "paused", "resume": "resumed"}[verb]
				if !resp.Changed {
					done = "unchanged"
				}
				state := "not paused"
				if resp.Paused != "" {
					state = "paused by " + resp.Paused
				}
				fmt.Fprintf(env.stdout, "%s %s (%s)\n", what, done, state)
				return nil
			},
		}))
		register("operator dispatch "+verb, typed(&spec[clientFlags]{
			synopsis: map[string]string{"pause": "Pause all dispatch, for maintenance (admin)",
				"resume": "Resume all dispatch after maintenance (admin)"}[verb],
			usage: "[--json]",
			help: `Pausing all dispatch is a gate on dispatch only: no worker gets a new job,
running jobs go on and finish, workers stay connected, submits are
accepted, and no tenant's place in the fair share changes, so resuming
clamps nothing. "barista explain" says paused vertex=all meanwhile. Use it
for maintenance: pause, let running jobs drain ("barista status"), work,
resume. Needs an admin token.`,
			run: func(env *cmdEnv, opts *clientFlags, args []string) error {
				if len(args) != 0 {
					return usageError("unexpected argument %q", args[0])
				}
				resp, err := ask(opts.call, pb.NewAdminClient, pb.AdminClient.PauseDispatch, &pb.PauseDispatchRequest{Resume: verb == "resume"})
				if err != nil {
					return err
				}
				if opts.json {
					return printJSON(env.stdout, map[string]any{"paused": resp.Paused, "changed": resp.Changed})
				}
				state := "running"
				if resp.Paused {
					state = "paused"
				}
				change := "changed"
				if !resp.Changed {
					change = "unchanged"
				}
				fmt.Fprintf(env.stdout, "dispatch %s (%s)\n", state, change)
				return nil
			},
		}))
	}
}

// rateFlagValue checks --rate (N/PERIOD or none) and --burst for the CLI,
// naming the flag; it returns the API's rate text ("" for none).
func rateFlagValue(rate string, burst uint32, burstSet bool) (string, error) {
	r, err := sfq.ParseRate(rate, burst)
	if err != nil {
		return "", usageError("--rate: %q: want N/PERIOD (e.g. 100/1m, PERIOD in whole milliseconds) or none", rate)
	}
	if r.None() {
		if burstSet && burst != 0 {
			return "", usageError("--burst: needs a rate")
		}
		return "", nil
	}
	return rate, nil
}

// rateRows are the rate and pause rows of a tenant or group.
func rateRows(rate string, burst uint32, eligibleAt int64, now *pb.ClockNow, paused string) [][2]string {
	r := "none"
	if rate != "" {
		b := burst
		if b == 0 {
			if lim, err := sfq.ParseRate(rate, 0); err == nil {
				b = lim.N
			}
		}
		next := "now"
		if _, ok := client.WallAt(now, eligibleAt); (ok && eligibleAt > now.ClusterMs) || (!ok && eligibleAt > 0) {
			next = clusterWhen(now, eligibleAt)
		}
		r = fmt.Sprintf("%s burst %d (next allowed %s)", rate, b, next)
	}
	p := "no"
	if paused != "" {
		p = "by " + paused
	}
	return [][2]string{{"rate", r}, {"paused", p}}
}
