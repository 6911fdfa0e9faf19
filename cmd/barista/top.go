package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/baristahq/barista/internal/termtext"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/web"
)

type topOpts struct {
	clientFlags
	once     bool
	interval time.Duration
	window   time.Duration
	stale    bool
}

func init() {
	register("top", typed(&spec[topOpts]{
		synopsis: "Live view of fair shares: per tenant and class, share vs entitlement, their ratio and the tag's lag",
		usage:    "[--once] [--json] [--interval 1s] [--window 60s]",
		help: `Shows, refreshed every --interval, the fairness report of every tenant
(docs/scheduling.md, "The fairness report"), one line per tenant and
class it is active in: its tier, weight, queued and running jobs (all
classes), its dispatches in the class in the last --window, then

  SHARE     its part of the CPU charged in the class in the last minute
            (estimates at dispatch, corrected by the actual CPU at finish)
  ENTITLED  its weight over the weights of the tenants with eligible work
            in the class, time-weighted over the minute
  RATIO     SHARE / ENTITLED over 1 min, 10 min and 1 h: 1 is exactly the
            entitlement ("-": undefined, e.g. nothing charged)
  LAG       how far its tag is behind the class's virtual_now, in CPU
            seconds at its weight: positive, it is owed service and goes
            first; negative, it is ahead ("-": no eligible work)

and the cluster's leader and applied index, and each pool's fairness
error: over the last 10 minutes, the largest difference between a
tenant's SHARE and its ENTITLED share, among the tenants that had
eligible work (docs/fairness.md). Under a tenant with named
groups, its groups with the most queued jobs (at most 5) follow its first
line, each with its queued and running jobs and its cap. Once the
cluster has pools besides default (docs/scheduling.md, "Pools"), each
line names its POOL: a tenant active in two pools has lines in each, its
share, entitlement, ratio and lag, and its queued and running jobs,
those of the pool, and a table of the pools
follows, with their jobs and connected workers. Once resources are
declared (docs/resources.md), a tenant's first line is followed by what
it holds of each resource it holds units of or has its own limit on
("holds api 2/3": 2 units held, its limit 3), and a table of the
resources follows: capacity, tenant_max, units held, queued jobs that
use it, unfinished jobs that use it, and the job holding its
reservation. The windows
cover cluster time since the node started or last loaded a snapshot at
most. --once prints one view and exits; with --json it prints one
object:

  {"leader_id", "applied_index", "window_ms", "fairness_since_ms",
   "tenants": [{"name", "pool", "tier", "class", "weight", "queued",
   "running", "dispatches_1m", "dispatched_cost_ms_1m", "share",
   "entitled_share", "ratio", "eligible", "lag_cpu_s", "fairness":
   [{"window", "span_ms", "charged_ms", "class_charged_ms", "busy_ms",
   "share", "entitled", "ratio"}], "groups": [{"name", "running",
   "queued", "limit"}], "resources": [{"resource", "held", "max"}]}],
   "pools": [{"name", "weights", "subscriptions", "paused", "scheduled",
   "queued", "running", "workers"}],
   "fairness_errors": [{"pool", "window", "error", "tenant", "class",
   "share", "entitled"}],
   "resources": [{"name", "capacity", "tenant_max", "held", "users",
   "queued", "reserved_job_id"}]}

(share, entitled_share and ratio are the 1 min window's, share and
entitled_share 0 when undefined; shares are fractions; in "fairness",
share, entitled and ratio are null when undefined, as are ratio and
lag_cpu_s; dispatches_1m counts --window).`,
		flags: func(fs *flag.FlagSet, o *topOpts) {
			o.register(fs)
			fs.BoolVar(&o.once, "once", false, "print one view and exit")
			durFlag(fs, &o.interval, "interval", time.Second, 10*time.Millisecond, time.Hour, "", "refresh every `DURATION`")
			msFlag(fs, &o.window, "window", time.Minute, time.Millisecond, 24*time.Hour, "", "count dispatches over the last `DURATION` of cluster time")
			fs.BoolVar(&o.stale, "stale", false, "read the connected node's state without asking the leader")
		},
		run: runTop,
	}))
}

func fetchTop(opts *topOpts) (*pb.TopResponse, error) {
	return ask(opts.call, pb.NewAdminClient, pb.AdminClient.Top, &pb.TopRequest{WindowMs: opts.window.Milliseconds(), Read: &pb.ReadOptions{Stale: opts.stale}})
}

func runTop(env *cmdEnv, opts *topOpts, args []string) error {
	if len(args) > 0 {
		return usageError("unexpected argument %q", args[0])
	}
	if opts.once {
		t, err := fetchTop(opts)
		if err != nil {
			return err
		}
		if opts.json {
			return printJSON(env.stdout, web.TopToJSON(t))
		}
		renderTop(env.stdout, t)
		return nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	for {
		t, err := fetchTop(opts)
		fmt.Fprint(env.stdout, "\x1b[H\x1b[2J")
		if err != nil {
			fmt.Fprintln(env.stdout, "barista top:", err)
		} else if opts.json {
			printJSON(env.stdout, web.TopToJSON(t))
		} else {
			renderTop(env.stdout, t)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(opts.interval):
		}
	}
}

func renderTop(w io.Writer, t *pb.TopResponse) {
	j := web.TopToJSON(t)
	fmt.Fprintf(w, "barista · leader %s · applied index %d · %s\n", j.LeaderID, j.AppliedIndex, time.Now().Format("15:04:05"))
	fmt.Fprintf(w, "SHARE of the CPU charged in the class, ENTITLED by weight among the tenants with eligible work: last minute · RATIO = SHARE/ENTITLED · LAG: CPU s owed (+) or ahead (-) · DISP: dispatches in %s\n",
		time.Duration(j.WindowMs)*time.Millisecond)
	fmt.Fprintf(w, "fairness error (largest |SHARE - ENTITLED|, 10 min): %s\n\n", fairnessErrorText(j.FairnessErrors))
	// A POOL column once there are pools besides default: one pool's view
	// stays as it always was.
	pools := len(j.Pools) > 1
	pool := func(name string) string {
		if !pools {
			return ""
		}
		return fmt.Sprintf("%-12s ", name)
	}
	fmt.Fprintf(w, "%-20s %s%-8s %-8s %7s %7s %7s %6s %7s %8s %6s %6s %6s %8s  %s\n", "TENANT", pool("POOL"), "TIER", "CLASS", "WEIGHT", "QUEUED", "RUNNING", "DISP",
		"SHARE", "ENTITLED", "R/1M", "R/10M", "R/1H", "LAG", "share (#) vs entitled (|)")
	for _, r := range j.Tenants {
		entitled := fmt.Sprintf("%8s", "-")
		var ratios [3]string
		for i := range ratios {
			ratios[i] = "-"
			if i < len(r.Fairness) && r.Fairness[i].Ratio != nil {
				ratios[i] = fmt.Sprintf("%.2f", *r.Fairness[i].Ratio)
			}
		}
		if len(r.Fairness) > 0 && r.Fairness[0].Entitled != nil {
			entitled = fmt.Sprintf("%7.1f%%", 100**r.Fairness[0].Entitled)
		}
		lag := "-"
		if r.LagCPUSeconds != nil {
			lag = fmt.Sprintf("%+.1fs", *r.LagCPUSeconds)
		}
		bar := []byte(strings.Repeat(" ", 30))
		for i := 0; i < int(r.Share*30+0.5) && i < 30; i++ {
			bar[i] = '#'
		}
		if e := int(r.EntitledShare*30 + 0.5); e > 0 && e <= 30 {
			bar[e-1] = '|'
		}
		fmt.Fprintf(w, "%-20s %s%-8s %-8s %7.3g %7d %7d %6d %6.1f%% %s %6s %6s %6s %8s  [%s]\n", termtext.Safe(r.Name, false), pool(r.Pool), r.Tier, r.Class, r.Weight, r.Queued, r.Running,
			r.Dispatches1m, 100*r.Share, entitled, ratios[0], ratios[1], ratios[2], lag, bar)
		if r.Paused != "" {
			fmt.Fprintf(w, "  paused by %s\n", r.Paused)
		}
		if r.Rate != "" {
			fmt.Fprintf(w, "  rate %s\n", r.Rate)
		}
		for _, g := range r.Groups {
			limit := ""
			if g.Limit > 0 {
				limit = fmt.Sprintf("cap %d", g.Limit)
			}
			fmt.Fprintf(w, "  group %-20.20s %25d %7d  %s\n", groupName(g.Name), g.Queued, g.Running, limit)
		}
		if len(r.Resources) > 0 {
			fmt.Fprintf(w, "  holds %s\n", tenantResourcesText(r.Resources))
		}
	}
	if pools {
		renderTopPools(w, j.Pools)
	}
	if len(j.Resources) > 0 {
		fmt.Fprintf(w, "\n%-20s %8s %10s %8s %7s %7s %7s  %s\n", "RESOURCE", "CAPACITY", "TENANT_MAX", "HELD", "QUEUED", "BLOCKED", "USERS", "RESERVED")
		for _, r := range j.Resources {
			fmt.Fprintf(w, "%-20s %8d %10s %8d %7d %7d %7d  %s\n", r.Name, r.Capacity, web.LimitText(r.TenantMax), r.Held, r.Queued, r.Blocked, r.Users, jobOrNone(r.Reserved))
		}
	}
}

// tenantResourcesText says what a tenant holds of each resource: "api
// 2/3" (units held, its limit), or "db 1" without a limit.
func tenantResourcesText(rs []web.TenantResourceJSON) string {
	var parts []string
	for _, r := range rs {
		s := fmt.Sprintf("%s %d", r.Resource, r.Held)
		if r.Max != nil {
			s += fmt.Sprintf("/%d", *r.Max)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " · ")
}

// jobOrNone is a job ID, or "-" for none.
func jobOrNone(id uint64) string {
	if id == 0 {
		return "-"
	}
	return fmt.Sprint(id)
}

// renderTopPools prints the table of the pools.
func renderTopPools(w io.Writer, ps []web.PoolTopJSON) {
	fmt.Fprintf(w, "\n%-20s %-13s %-6s %9s %7s %7s %7s  %s\n", "POOL", "SUBSCRIPTIONS", "PAUSED", "SCHEDULED", "QUEUED", "RUNNING", "WORKERS", "WEIGHTS")
	for _, p := range ps {
		paused := "no"
		if p.Paused {
			paused = "yes"
		}
		fmt.Fprintf(w, "%-20s %-13s %-6s %9d %7d %7d %7d  %s\n", p.Name, p.Subscriptions, paused, p.Scheduled, p.Queued, p.Running, p.Workers,
			termtext.Safe(p.Weights, false))
	}
}

// fairnessErrorText says each pool's live fairness error, and the tenant
// and class it is in.
func fairnessErrorText(errs []web.FairnessErrorJSON) string {
	var parts []string
	for _, e := range errs {
		if e.Error == nil {
			parts = append(parts, e.Pool+" -")
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.2f%% (%s, %s)", e.Pool, 100**e.Error, termtext.Safe(e.Tenant, false), e.Class))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " · ")
}
