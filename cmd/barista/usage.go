package main

import (
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/baristahq/barista/client"
	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
)

func init() {
	register("usage", typed(&spec[usageOpts]{
		synopsis: "Show a tenant's running and queued jobs, billed CPU, weight and tag",
		usage:    "[--tenant NAME] [--groups N] [--json]",
		help: `Shows a tenant's running and queued jobs (by size), its billed CPU, weight,
finish tag and counters, and its groups with the most queued jobs (then
the most running, then by name; at most --groups), each with its running
and queued jobs and the cap in force.`,
		flags: func(fs *flag.FlagSet, o *usageOpts) {
			o.register(fs)
			numFlag(fs, &o.groups, "groups", 10, 1, 1000, "list at most `N` groups")
		},
		run: func(env *cmdEnv, opts *usageOpts, args []string) error {
			if len(args) > 0 {
				return usageError("unexpected argument %q", args[0])
			}
			u, err := withCall(opts.with, (*client.Client).TenantUsage, &pb.TenantUsageRequest{Tenant: opts.tenant, TopGroups: opts.groups,
				Read: &pb.ReadOptions{Stale: opts.stale}})
			if err != nil {
				return err
			}
			groups := make([]map[string]any, 0, len(u.Groups))
			for _, g := range u.Groups {
				groups = append(groups, map[string]any{"name": g.Name, "running": g.Running, "queued": g.Queued, "limit": g.Limit})
			}
			tier, _ := fsm.TierFromPB(u.Tier)
			m := map[string]any{
				"tenant": u.Tenant, "tier": tier.String(), "running": u.Running, "queued": u.Queued,
				"running_by_size": u.RunningBySize, "queued_by_size": u.QueuedBySize, "scheduled": u.Scheduled, "inflight_cpu_ms": u.InflightCpuMs,
				"cpu_billed_ms": u.CpuBilledMs, "zombie_cpu_ms": u.ZombieCpuMs, "weight": u.Weight,
				"finish_tag_ms": u.FinishTagMs, "virtual_now_ms": u.VirtualNowMs, "usage_ms": u.UsageMs,
				"submitted": u.Submitted, "dispatches": u.Dispatches, "completed": u.Completed, "failed": u.Failed,
				"cancelled": u.Cancelled, "timed_out": u.TimedOut, "failures": u.Failures, "requeues": u.Requeues,
				"groups": groups, "group_count": u.GroupCount,
				"paused": u.Paused, "rate": u.Rate, "rate_burst": u.RateBurst, "rate_eligible_at_ms": u.RateEligibleAtMs,
			}
			if opts.json {
				return printJSON(env.stdout, m)
			}
			rows := append([][2]string{
				{"tenant", u.Tenant + " (" + tier.String() + ")"},
				{"weight", strconv.FormatFloat(u.Weight, 'f', -1, 64)},
				{"running", fmt.Sprintf("%d (sm/md/lg %v)", u.Running, u.RunningBySize)},
				{"queued", fmt.Sprintf("%d (sm/md/lg %v)", u.Queued, u.QueuedBySize)},
				{"scheduled", fmt.Sprintf("%d (delayed or backing off)", u.Scheduled)},
				{"cpu billed", (time.Duration(u.CpuBilledMs) * time.Millisecond).String()},
				{"finish tag", u.FinishTagMs + " virtual ms (virtual now " + u.VirtualNowMs + ")"},
				{"jobs", fmt.Sprintf("%d submitted, %d completed, %d failed, %d cancelled, %d timed out", u.Submitted, u.Completed, u.Failed, u.Cancelled, u.TimedOut)},
				{"runs", fmt.Sprintf("%d dispatches, %d failed runs or lost leases, %d requeues", u.Dispatches, u.Failures, u.Requeues)},
			}, rateRows(u.Rate, u.RateBurst, u.RateEligibleAtMs, u.Now, u.Paused)...)
			printTable(env.stdout, append(rows, [2]string{"groups", fmt.Sprint(u.GroupCount)}))
			if len(u.Groups) > 0 {
				fmt.Fprintf(env.stdout, "\n%-32s %7s %7s %6s\n", "GROUP", "RUNNING", "QUEUED", "LIMIT")
				for _, g := range u.Groups {
					fmt.Fprintf(env.stdout, "%-32s %7d %7d %6s\n", groupName(g.Name), g.Running, g.Queued, capText(g.Limit))
				}
			}
			return nil
		},
	}))
}

// usageOpts are the flags of "barista usage".
type usageOpts struct {
	tenantFlags
	groups uint32
}
