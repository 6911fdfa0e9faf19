package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/baristahq/barista/client"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
)

type groupSetOpts struct {
	tenantFlags
	fs    *flag.FlagSet
	cap   string
	rate  string
	burst uint32
}

const groupHelp = `A group is a concurrency key inside a tenant (one per customer, document,
store...): jobs submitted with --group G. A group may have a cap on its
running jobs; a capped group never holds back the tenant's other groups.
The tenant's group_cap ("barista tenant set --group-cap") is the cap of
every named group whose own cap is inherit; jobs without a group are in
the unnamed group, which no group_cap covers. A group with no job and no
setting is forgotten.`

func groupJSON(g *pb.Group) map[string]any {
	return map[string]any{"tenant": g.Tenant, "name": g.Name, "cap": g.Cap, "tenant_cap": g.TenantCap, "limit": g.Limit,
		"running": g.Running, "queued": g.Queued, "rate": g.Rate, "burst": g.RateBurst, "rate_eligible_at_ms": g.RateEligibleAtMs, "paused": g.Paused}
}

func capText(n uint32) string {
	if n == 0 {
		return "none"
	}
	return fmt.Sprint(n)
}

// groupName shows a group's name; the unnamed group has none.
func groupName(name string) string {
	if name == "" {
		return "(unnamed)"
	}
	return name
}

func printGroup(env *cmdEnv, g *pb.Group, asJSON bool) error {
	if asJSON {
		return printJSON(env.stdout, groupJSON(g))
	}
	rows := [][2]string{{"tenant", g.Tenant}, {"group", groupName(g.Name)}, {"cap", g.Cap}, {"tenant_cap", capText(g.TenantCap)},
		{"limit", capText(g.Limit)}, {"running", fmt.Sprint(g.Running)}, {"queued", fmt.Sprint(g.Queued)}}
	printTable(env.stdout, append(rows, rateRows(g.Rate, g.RateBurst, g.RateEligibleAtMs, g.Now, g.Paused)...))
	return nil
}

func init() {
	register("group set", typed(&spec[groupSetOpts]{
		synopsis: "Set a group's cap (an admin's, or the tenant's own tighter one) or rate limit",
		usage:    "GROUP [--cap N|none|inherit] [--rate N/PERIOD|none [--burst N]] [--tenant NAME] [--json]",
		help: groupHelp + `

With an admin token --cap sets the group's cap: a number, none (no cap),
or inherit (the tenant's group_cap; the default). With the tenant's own
client token --cap sets the tenant's cap on the group, a second cap: the
group runs at most the lower of the two, so a tenant can tighten a group
below what the admin allows but never loosen it; --cap none clears the
tenant's own cap (the admin's stays). A cap change takes effect at the
next dispatch and preempts nothing. Setting a cap on a group without jobs
keeps it (it counts against max_groups).

--rate N/PERIOD (an admin's) limits the group's dispatches to N per
PERIOD, with bursts up to --burst (default N); none removes it. A
rate-limited group never holds back the tenant's other groups; the
tenant's own limit applies as well. Give --cap, --rate or both.`,
		flags: func(fs *flag.FlagSet, o *groupSetOpts) {
			*o = groupSetOpts{fs: fs}
			o.tenantFlags.register(fs)
			fs.StringVar(&o.cap, "cap", "", "`CAP`: a number of running jobs, none or inherit")
			fs.StringVar(&o.rate, "rate", "", "dispatch rate limit `N/PERIOD` (e.g. 10/1s), or none (admin)")
			numFlag(fs, &o.burst, "burst", 0, 1, sfq.MaxRateBurst, "burst `N` of the rate limit (default: its N)")
		},
		run: func(env *cmdEnv, opts *groupSetOpts, args []string) error {
			if len(args) != 1 {
				return usageError("group set needs one GROUP")
			}
			if err := sfq.ValidateGroupName(args[0]); err != nil {
				return usageError("GROUP: %v", err)
			}
			set := map[string]bool{}
			opts.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
			if set["burst"] && !set["rate"] {
				return usageError("--burst: give it with --rate")
			}
			if !set["cap"] && !set["rate"] {
				return usageError("--cap or --rate: required (--cap a number, none or inherit; --rate N/PERIOD or none)")
			}
			if set["cap"] {
				if _, err := sfq.ParseGroupCap(opts.cap); err != nil {
					return usageError("--cap: %q: want a number 1..%d, none or inherit", opts.cap, sfq.MaxGroupCap)
				}
			}
			rate := ""
			if set["rate"] {
				r, err := rateFlagValue(opts.rate, opts.burst, set["burst"])
				if err != nil {
					return err
				}
				rate = r
				if rate == "" {
					rate = "none"
				}
			}
			g, err := withCall(opts.with, (*client.Client).SetGroup, &pb.SetGroupRequest{Tenant: opts.tenant, Group: args[0], Cap: opts.cap,
				Rate: rate, Burst: opts.burst})
			if err != nil {
				return err
			}
			return printGroup(env, g, opts.json)
		},
	}))
	register("group get", typed(&spec[tenantFlags]{
		synopsis: "Show a group of a tenant: its caps and its jobs",
		usage:    "GROUP [--tenant NAME] [--json]",
		help:     groupHelp,
		run: func(env *cmdEnv, opts *tenantFlags, args []string) error {
			if len(args) != 1 {
				return usageError("group get needs one GROUP")
			}
			if err := sfq.ValidateGroupName(args[0]); err != nil {
				return usageError("GROUP: %v", err)
			}
			g, err := withCall(opts.with, (*client.Client).GetGroup, &pb.GetGroupRequest{Tenant: opts.tenant, Group: args[0],
				Read: &pb.ReadOptions{Stale: opts.stale}})
			if err != nil {
				return err
			}
			return printGroup(env, g, opts.json)
		},
	}))
	register("group list", typed(&spec[tenantFlags]{
		synopsis: "List a tenant's groups by name (the unnamed group first)",
		usage:    "[--tenant NAME] [--json]",
		help:     groupHelp + "\n\nWith --json prints one object per group.",
		run: func(env *cmdEnv, opts *tenantFlags, args []string) error {
			if len(args) > 0 {
				return usageError("unexpected argument %q", args[0])
			}
			var groups []*pb.Group
			err := opts.with(func(cl *client.Client) error {
				for g, err := range cl.Groups(context.Background(), &pb.ListGroupsRequest{Tenant: opts.tenant, PageSize: 1000,
					Read: &pb.ReadOptions{Stale: opts.stale}}) {
					if err != nil {
						return err
					}
					groups = append(groups, g)
				}
				return nil
			})
			if err != nil {
				return err
			}
			if opts.json {
				for _, g := range groups {
					if err := printJSON(env.stdout, groupJSON(g)); err != nil {
						return err
					}
				}
				return nil
			}
			fmt.Fprintf(env.stdout, "%-32s %-8s %-10s %-6s %7s %7s\n", "GROUP", "CAP", "TENANT_CAP", "LIMIT", "RUNNING", "QUEUED")
			for _, g := range groups {
				fmt.Fprintf(env.stdout, "%-32s %-8s %-10s %-6s %7d %7d\n", groupName(g.Name), g.Cap, capText(g.TenantCap), capText(g.Limit), g.Running, g.Queued)
			}
			return nil
		},
	}))
}
