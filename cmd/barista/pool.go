package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/baristahq/barista/client"
	"github.com/baristahq/barista/internal/termtext"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
)

// Pools and subscriptions (docs/scheduling.md, "Pools"; feature level 6).

const poolHelp = `A pool is a fleet of workers and the jobs that may run on it, each its own
fair share: a job names its pool at submit (barista submit --pool), a
worker when it connects (barista worker --pool), and a worker gets jobs
of its pool only. Every cluster has the pool default; an admin creates
others (at most the cluster's max_pools, default 64). Tenant-level limits
(caps, quotas, rate limits, pauses) count a tenant's jobs in every pool;
fair shares, usage and decay are per pool. Pools need cluster feature
level 6.`

type poolSetOpts struct {
	clientFlags
	fs            *flag.FlagSet
	weights       string
	subscriptions string
}

type poolReadOpts struct {
	clientFlags
	stale bool
}

func (o *poolReadOpts) register(fs *flag.FlagSet) {
	o.clientFlags.register(fs)
	fs.BoolVar(&o.stale, "stale", false, "read this node's state without asking the leader (faster, maybe behind; workers show 0)")
}

type subscriptionSetOpts struct {
	clientFlags
	burst string
}

type subscriptionListOpts struct {
	poolReadOpts
	tenant string
	pool   string
}

// classNames are the classes in the order of a pool's virtual_now_ms.
var classNames = [...]string{"critical", "high", "normal", "low"}

func poolJSON(p *pb.Pool) map[string]any {
	vnow := map[string]string{}
	for i, v := range p.VirtualNowMs {
		if i < len(classNames) {
			vnow[classNames[i]] = v
		}
	}
	return map[string]any{"name": p.Name, "weights": p.Weights, "subscriptions": subscriptionsText(p.SubscriptionsRequired), "paused": p.Paused,
		"scheduled": p.Scheduled, "queued": p.Queued, "running": p.Running, "tenants": p.Tenants, "workers": p.Workers, "virtual_now_ms": vnow}
}

func subscriptionsText(required bool) string {
	if required {
		return "required"
	}
	return "optional"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func printPool(env *cmdEnv, p *pb.Pool, asJSON bool) error {
	if asJSON {
		return printJSON(env.stdout, poolJSON(p))
	}
	var vnow []string
	for i, v := range p.VirtualNowMs {
		if i < len(classNames) {
			vnow = append(vnow, classNames[i]+" "+v)
		}
	}
	printTable(env.stdout, [][2]string{{"name", p.Name}, {"weights", termtext.Safe(p.Weights, false)},
		{"subscriptions", subscriptionsText(p.SubscriptionsRequired)}, {"paused", yesNo(p.Paused)},
		{"scheduled", fmt.Sprint(p.Scheduled)}, {"queued", fmt.Sprint(p.Queued)}, {"running", fmt.Sprint(p.Running)},
		{"tenants", fmt.Sprint(p.Tenants)}, {"workers", fmt.Sprint(p.Workers)}, {"virtual_now_ms", strings.Join(vnow, ", ")}})
	return nil
}

func subscriptionJSON(s *pb.Subscription) map[string]any {
	return map[string]any{"tenant": s.Tenant, "pool": s.Pool, "burst": s.Burst, "running": s.Running}
}

// parseBurst reads --burst: a number 0..4294967295, or none (nil).
func parseBurst(s string) (*uint32, error) {
	if s == "none" {
		return nil, nil
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return nil, usageError("--burst: %q: want a number 0..%d, or none", s, uint32(math.MaxUint32))
	}
	b := uint32(n)
	return &b, nil
}

func init() {
	register("pool set", typed(&spec[poolSetOpts]{
		synopsis: "Create a pool or change one: its weights and whether it requires subscriptions (admin)",
		usage:    "NAME [--weights default|equal|TENANT:W,...] [--subscriptions optional|required] [--json]",
		help: poolHelp + `

NAME is 1..63 of a-z, 0-9 and -, not starting with -. Flags not given
keep their value (a new pool: weights default, subscriptions optional).

--weights default weighs each tenant by its tier weight times its
multiplier, as everywhere; equal weighs every tenant 1; TENANT:W,...
(W 1..1000000, in the units of tier weights) weighs the tenants listed
so and every other tenant 1. A tenant named need not exist yet. Changing
the weights keeps every tag.

--subscriptions required makes the pool refuse the submits of a tenant
without a subscription there ("barista subscription set"): it fails
closed.`,
		flags: func(fs *flag.FlagSet, o *poolSetOpts) {
			*o = poolSetOpts{fs: fs}
			o.register(fs)
			fs.StringVar(&o.weights, "weights", "", "`WEIGHTS`: default, equal or TENANT:W,... (W 1..1000000; tenants not listed weigh 1)")
			fs.StringVar(&o.subscriptions, "subscriptions", "", "`MODE`: optional, or required (a tenant needs a subscription to submit)")
		},
		run: runPoolSet,
	}))
	register("pool get", typed(&spec[poolReadOpts]{
		synopsis: "Show a pool: its settings, jobs and connected workers (admin)",
		usage:    "NAME [--stale] [--json]",
		help: poolHelp + `

Shows the pool's weights and subscriptions setting, whether it is paused,
its scheduled, queued and running jobs, the tenants with a record in it,
its connected workers (as the leader counts them) and its virtual_now_ms
per class. --json prints {"name", "weights", "subscriptions", "paused",
"scheduled", "queued", "running", "tenants", "workers", "virtual_now_ms":
{"critical", "high", "normal", "low"}}.`,
		run: func(env *cmdEnv, opts *poolReadOpts, args []string) error {
			if len(args) != 1 {
				return usageError("pool get needs one NAME")
			}
			if err := sfq.ValidatePoolName(args[0]); err != nil {
				return usageError("NAME: %v", err)
			}
			p, err := withCall(opts.with, raw(client.Raw.PoolGet), &pb.PoolGetRequest{Name: args[0], Read: &pb.ReadOptions{Stale: opts.stale}})
			if err != nil {
				return err
			}
			return printPool(env, p, opts.json)
		},
	}))
	register("pool list", typed(&spec[poolReadOpts]{
		synopsis: "List the pools (admin)",
		usage:    "[--stale] [--json]",
		help:     poolHelp + "\n\nWith --json prints one object per pool, as pool get.",
		run: func(env *cmdEnv, opts *poolReadOpts, args []string) error {
			if len(args) != 0 {
				return usageError("unexpected argument %q", args[0])
			}
			resp, err := withCall(opts.with, raw(client.Raw.PoolList), &pb.PoolListRequest{Read: &pb.ReadOptions{Stale: opts.stale}})
			if err != nil {
				return err
			}
			if opts.json {
				for _, p := range resp.Pools {
					if err := printJSON(env.stdout, poolJSON(p)); err != nil {
						return err
					}
				}
				return nil
			}
			fmt.Fprintf(env.stdout, "%-24s %-13s %-6s %9s %7s %7s %7s  %s\n", "NAME", "SUBSCRIPTIONS", "PAUSED", "SCHEDULED", "QUEUED", "RUNNING", "WORKERS", "WEIGHTS")
			for _, p := range resp.Pools {
				fmt.Fprintf(env.stdout, "%-24s %-13s %-6s %9d %7d %7d %7d  %s\n", p.Name, subscriptionsText(p.SubscriptionsRequired), yesNo(p.Paused),
					p.Scheduled, p.Queued, p.Running, p.Workers, termtext.Safe(p.Weights, false))
			}
			return nil
		},
	}))
	register("pool delete", typed(&spec[clientFlags]{
		synopsis: "Delete a pool that has no job and no connected worker (admin)",
		usage:    "NAME",
		help: poolHelp + `

A pool is deleted only while it has no scheduled, queued or running job
(cancel or let them finish: barista cancel --filter --pool NAME) and no
connected worker (stop its workers, or start them with another --pool).
The pool default is never deleted. Ended jobs of a deleted pool keep its
name.`,
		run: func(env *cmdEnv, opts *clientFlags, args []string) error {
			if len(args) != 1 {
				return usageError("pool delete needs one NAME")
			}
			if err := sfq.ValidatePoolName(args[0]); err != nil {
				return usageError("NAME: %v", err)
			}
			if _, err := withCall(opts.with, raw(client.Raw.PoolDelete), &pb.PoolDeleteRequest{Name: args[0]}); err != nil {
				return err
			}
			if opts.json {
				return printJSON(env.stdout, map[string]any{"name": args[0], "deleted": true})
			}
			fmt.Fprintf(env.stdout, "pool %s deleted\n", args[0])
			return nil
		},
	}))
	for _, verb := range []string{"pause", "resume"} {
		register("pool "+verb, typed(&spec[clientFlags]{
			synopsis: map[string]string{"pause": "Pause dispatch in one pool (admin)", "resume": "Resume dispatch in a paused pool (admin)"}[verb],
			usage:    "NAME [--json]",
			help: `Pausing a pool is a gate on its dispatch only, like pausing all dispatch
(barista operator dispatch pause): its workers get no new job, running
jobs go on, submits are accepted, the other pools go on, and resuming
clamps nothing.`,
			run: func(env *cmdEnv, opts *clientFlags, args []string) error {
				if len(args) != 1 {
					return usageError("pool %s needs one NAME", verb)
				}
				if err := sfq.ValidatePoolName(args[0]); err != nil {
					return usageError("NAME: %v", err)
				}
				resp, err := ask(opts.call, pb.NewAdminClient, pb.AdminClient.PauseDispatch, &pb.PauseDispatchRequest{Pool: args[0], Resume: verb == "resume"})
				if err != nil {
					return err
				}
				if opts.json {
					return printJSON(env.stdout, map[string]any{"pool": args[0], "paused": resp.Paused, "changed": resp.Changed})
				}
				state, change := "running", "changed"
				if resp.Paused {
					state = "paused"
				}
				if !resp.Changed {
					change = "unchanged"
				}
				fmt.Fprintf(env.stdout, "pool %s %s (%s)\n", args[0], state, change)
				return nil
			},
		}))
	}
	register("subscription set", typed(&spec[subscriptionSetOpts]{
		synopsis: "Set or remove a tenant's subscription in a pool: its burst (admin)",
		usage:    "TENANT POOL --burst N|none [--json]",
		help: `A subscription caps a tenant's assigned and running jobs in one pool at
its burst, like a cap (a tenant-level limit): --burst 0 keeps the
tenant's jobs of the pool queued, never dispatched; --burst none removes
the subscription. A pool with "--subscriptions required" (barista pool
set) refuses the submits of a tenant without one there.`,
		flags: func(fs *flag.FlagSet, o *subscriptionSetOpts) {
			o.register(fs)
			fs.StringVar(&o.burst, "burst", "", "the tenant's assigned and running jobs in the pool at most (`N`, 0 holds them), or none to remove the subscription (required)")
		},
		run: func(env *cmdEnv, opts *subscriptionSetOpts, args []string) error {
			if len(args) != 2 {
				return usageError("subscription set needs TENANT and POOL")
			}
			if err := sfq.ValidatePoolName(args[1]); err != nil {
				return usageError("POOL: %v", err)
			}
			if opts.burst == "" {
				return usageError("--burst is required: a number, or none")
			}
			burst, err := parseBurst(opts.burst)
			if err != nil {
				return err
			}
			var resp *pb.SubscriptionSetResponse
			if burst == nil {
				resp, err = withCall(opts.with, raw(client.Raw.SubscriptionDelete), &pb.SubscriptionDeleteRequest{Tenant: args[0], Pool: args[1]})
			} else {
				resp, err = withCall(opts.with, raw(client.Raw.SubscriptionSet), &pb.SubscriptionSetRequest{Tenant: args[0], Pool: args[1], Burst: burst})
			}
			if err != nil {
				return err
			}
			if opts.json {
				m := map[string]any{"tenant": args[0], "pool": args[1], "changed": resp.Changed, "burst": nil}
				if s := resp.Subscription; s != nil {
					m = subscriptionJSON(s)
					m["changed"] = resp.Changed
				}
				return printJSON(env.stdout, m)
			}
			change := ""
			if !resp.Changed {
				change = " (unchanged)"
			}
			if resp.Subscription == nil {
				fmt.Fprintf(env.stdout, "tenant %s has no subscription in pool %s%s\n", termtext.Safe(args[0], false), args[1], change)
				return nil
			}
			fmt.Fprintf(env.stdout, "tenant %s: pool %s burst %d%s\n", termtext.Safe(args[0], false), args[1], resp.Subscription.Burst, change)
			return nil
		},
	}))
	register("subscription list", typed(&spec[subscriptionListOpts]{
		synopsis: "List subscriptions, of one tenant or one pool (admin)",
		usage:    "[--tenant T] [--pool P] [--stale] [--json]",
		help: `Lists every subscription (of a tenant, of a pool, if given) with its burst
and the tenant's assigned and running jobs in the pool now. With --json
prints one object per subscription: {"tenant", "pool", "burst",
"running"}.`,
		flags: func(fs *flag.FlagSet, o *subscriptionListOpts) {
			o.poolReadOpts.register(fs)
			fs.StringVar(&o.tenant, "tenant", "", "only this `TENANT`'s subscriptions")
			fs.StringVar(&o.pool, "pool", "", "only the subscriptions in this `POOL`")
		},
		run: func(env *cmdEnv, opts *subscriptionListOpts, args []string) error {
			if len(args) != 0 {
				return usageError("unexpected argument %q", args[0])
			}
			if opts.pool != "" {
				if err := sfq.ValidatePoolName(opts.pool); err != nil {
					return usageError("--pool: %v", err)
				}
			}
			req := &pb.SubscriptionListRequest{Tenant: opts.tenant, Pool: opts.pool, PageSize: 1000, Read: &pb.ReadOptions{Stale: opts.stale}}
			if !opts.json {
				fmt.Fprintf(env.stdout, "%-24s %-24s %10s %7s\n", "TENANT", "POOL", "BURST", "RUNNING")
			}
			return opts.with(func(cl *client.Client) error {
				for s, err := range cl.Raw().Subscriptions(context.Background(), req) {
					if err != nil {
						return err
					}
					if opts.json {
						if err := printJSON(env.stdout, subscriptionJSON(s)); err != nil {
							return err
						}
						continue
					}
					fmt.Fprintf(env.stdout, "%-24s %-24s %10d %7d\n", termtext.Safe(s.Tenant, false), s.Pool, s.Burst, s.Running)
				}
				return nil
			})
		},
	}))
}

func runPoolSet(env *cmdEnv, opts *poolSetOpts, args []string) error {
	if len(args) != 1 {
		return usageError("pool set needs one NAME")
	}
	if err := sfq.ValidatePoolName(args[0]); err != nil {
		return usageError("NAME: %v", err)
	}
	set := map[string]bool{}
	opts.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	req := &pb.PoolSetRequest{Name: args[0]}
	if set["weights"] {
		if _, err := sfq.ParsePoolWeights(opts.weights); err != nil || opts.weights == "" {
			why := "want default, equal or TENANT:W,..."
			if err != nil {
				why = err.Error()
			}
			return usageError("--weights: %s", why)
		}
		req.Weights = &opts.weights
	}
	if set["subscriptions"] {
		switch opts.subscriptions {
		case "required", "optional":
			req.SubscriptionsRequired = new(opts.subscriptions == "required")
		default:
			return usageError("--subscriptions: %q: want optional or required", opts.subscriptions)
		}
	}
	p, err := withCall(opts.with, raw(client.Raw.PoolSet), req)
	if err != nil {
		return err
	}
	return printSet(env, opts.json, "pool "+p.Name, p.Created, poolJSON(p), func() error { return printPool(env, p, false) })
}
