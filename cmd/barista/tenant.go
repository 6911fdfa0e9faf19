package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/baristahq/barista/client"
	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/termtext"
	"github.com/baristahq/barista/internal/text"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
)

type tenantSetOpts struct {
	clientFlags
	fs          *flag.FlagSet
	tier        string
	multiplier  uint32
	cap         uint32
	capSM       uint32
	capMD       uint32
	capLG       uint32
	inflightCPU time.Duration
	maxQueued   uint32
	export      bool
	maxClass    pb.Class
	capCritical uint32
	capHigh     uint32
	deadlines   bool
	deadlineCap uint32
	groupCap    string
	groupOrder  string
	maxGroups   uint32
	rate        string
	burst       uint32
}

func tenantJSON(t *pb.Tenant) map[string]any {
	tier, _ := fsm.TierFromPB(t.Tier)
	c := t.Caps
	return map[string]any{
		"name": t.Name, "tier": tier.String(), "multiplier": t.Multiplier,
		"cap": c.GetMaxRunning(), "cap_sm": c.GetMaxRunningSm(), "cap_md": c.GetMaxRunningMd(), "cap_lg": c.GetMaxRunningLg(),
		"inflight_cpu_ms": c.GetMaxInflightCpuMs(), "max_queued": c.GetMaxQueued(), "export_metrics": t.ExportMetrics,
		"max_class": className(t.MaxClass), "cap_critical": c.GetMaxRunningCritical(), "cap_high": c.GetMaxRunningHigh(),
		"deadlines": t.AllowDeadlines, "deadline_cap": c.GetMaxRunningDeadline(),
		"group_cap": t.GroupCap, "group_order": groupOrderName(t.GroupOrder), "max_groups": maxGroupsOf(t), "groups": t.Groups,
		"rate": t.Rate, "burst": t.RateBurst, "rate_eligible_at_ms": t.RateEligibleAtMs, "paused": t.Paused,
	}
}

// className names a proto class (unspecified is normal).
func className(c pb.Class) string {
	k, err := fsm.ClassFromPB(c)
	if err != nil {
		return c.String()
	}
	return k.String()
}

// onOff is "on" or "off".
func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// groupOrderName names a proto group order (unspecified is fifo).
func groupOrderName(o pb.GroupOrder) string {
	g, _ := fsm.GroupOrderFromPB(o)
	return g.String()
}

// maxGroupsOf is a tenant's max_groups in force.
func maxGroupsOf(t *pb.Tenant) uint32 {
	if t.MaxGroups == 0 {
		return sfq.DefaultMaxGroups
	}
	return t.MaxGroups
}

// orNone shows a cap or quota of 0 (no limit) as "none".
func orNone(v any) string {
	if s := fmt.Sprint(v); s != "0" {
		return s
	}
	return "none"
}

func printTenant(env *cmdEnv, t *pb.Tenant, asJSON bool) error {
	if asJSON {
		return printJSON(env.stdout, tenantJSON(t))
	}
	m := tenantJSON(t)
	rows := [][2]string{{"name", t.Name}, {"tier", fmt.Sprint(m["tier"])}, {"multiplier", fmt.Sprint(t.Multiplier)},
		{"max_class", className(t.MaxClass)}, {"deadlines", onOff(t.AllowDeadlines)}}
	for _, k := range []string{"cap", "cap_sm", "cap_md", "cap_lg", "cap_critical", "cap_high", "deadline_cap", "max_queued"} {
		rows = append(rows, [2]string{k, orNone(m[k])})
	}
	inflight := "none"
	if ms := t.Caps.GetMaxInflightCpuMs(); ms > 0 {
		inflight = (time.Duration(ms) * time.Millisecond).String()
	}
	rows = append(rows, [2]string{"inflight_cpu", inflight}, [2]string{"export_metrics", fmt.Sprint(t.ExportMetrics)})
	groupCap := "none"
	if t.GroupCap > 0 {
		groupCap = fmt.Sprint(t.GroupCap)
	}
	rows = append(rows, [2]string{"group_cap", groupCap}, [2]string{"group_order", groupOrderName(t.GroupOrder)},
		[2]string{"max_groups", fmt.Sprint(maxGroupsOf(t))}, [2]string{"groups", fmt.Sprint(t.Groups)})
	rows = append(rows, rateRows(t.Rate, t.RateBurst, t.RateEligibleAtMs, t.Now, t.Paused)...)
	printTable(env.stdout, rows)
	return nil
}

func init() {
	register("tenant set", typed(&spec[tenantSetOpts]{
		synopsis: "Create or update a tenant (tier, multiplier, caps, quota, classes, deadlines, groups, metrics)",
		usage: "NAME [--tier TIER] [--multiplier N] [--cap N] [--cap-sm N] [--cap-md N] [--cap-lg N] [--inflight-cpu DUR] [--max-queued N] " +
			"[--max-class CLASS] [--cap-critical N] [--cap-high N] [--deadlines on|off] [--deadline-cap N] " +
			"[--group-cap N|none] [--group-order fifo|fair] [--max-groups N] [--rate N/PERIOD|none] [--burst N] [--export-metrics[=false]]",
		help: `Creates the tenant, or updates it. --tier is required only to create
one. Flags not given keep their current values (the cluster keeps every
field an upsert leaves out: docs/api.md, "Upserts"), and an update keeps
the tenant's tags, usage and counters. A cap of 0 means no
cap. A cap decrease preempts nothing; it blocks new dispatches until usage
falls below it.

--max-class is the highest priority class the tenant may submit (normal
unless set; low is always allowed); --cap-critical and --cap-high bound
its running jobs of those classes, so that a grant of priority cannot
take every container. --deadlines on lets it submit jobs with a deadline,
which go before the rest of their class; --deadline-cap bounds its
running jobs with one. See docs/scheduling.md.

--group-cap caps the running jobs of each of the tenant's named groups
whose own cap is inherit (see "barista group set"); the unnamed group
(jobs submitted without --group) has no group cap. --group-order fifo
(default) runs the tenant's jobs in submission order whatever their
group; fair shares the tenant's dispatches equally between its groups,
in cost. --max-groups bounds the tenant's named groups with jobs or
settings (0 = the default, 10000); a submit to one more group is
RESOURCE_EXHAUSTED.

--rate N/PERIOD limits the tenant's dispatches to N per PERIOD (e.g.
100/1m; GCRA in cluster time), with bursts up to --burst (default N);
none removes the limit. A rate-limited tenant never holds back other
tenants: its jobs wait ("barista explain" says rate and when) while the
others use the workers. Changing the rate keeps the limit's state; the
burst is kept when only --rate changes. Pause and resume with "barista
tenant pause|resume".

--export-metrics keeps the tenant's own series on /metrics when the
cluster has more tenants than the servers' --metrics-max-tenants (below
that bound every tenant has them); --export-metrics=false removes the
mark.`,
		flags: func(fs *flag.FlagSet, o *tenantSetOpts) {
			*o = tenantSetOpts{fs: fs}
			o.register(fs)
			fs.StringVar(&o.tier, "tier", "", "`TIER`: free, bronze, silver, gold or diamond (required for a new tenant)")
			numFlag(fs, &o.multiplier, "multiplier", 0, 1, sfq.MaxMultiplier, "weight multiplier `N` (a new tenant: 1)")
			numFlag(fs, &o.cap, "cap", 0, 0, math.MaxUint32, "max running jobs over all sizes (`N`, 0 = none)")
			numFlag(fs, &o.capSM, "cap-sm", 0, 0, math.MaxUint32, "max running sm jobs (`N`, 0 = none)")
			numFlag(fs, &o.capMD, "cap-md", 0, 0, math.MaxUint32, "max running md jobs (`N`, 0 = none)")
			numFlag(fs, &o.capLG, "cap-lg", 0, 0, math.MaxUint32, "max running lg jobs (`N`, 0 = none)")
			// The server allows up to 1000 CPU-years; a time.Duration
			// stops at about 292 years.
			msFlag(fs, &o.inflightCPU, "inflight-cpu", 0, time.Millisecond, 2562047*time.Hour, "none",
				"max estimated CPU of running jobs (`DURATION`)")
			numFlag(fs, &o.maxQueued, "max-queued", 0, 0, math.MaxUint32, "quota of queued jobs (`N`, 0 = none)")
			defineFlag(fs, "max-class", "highest priority `CLASS` it may submit", classVal(&o.maxClass))
			numFlag(fs, &o.capCritical, "cap-critical", 0, 0, math.MaxUint32, "max running critical jobs (`N`, 0 = none)")
			numFlag(fs, &o.capHigh, "cap-high", 0, 0, math.MaxUint32, "max running high jobs (`N`, 0 = none)")
			defineFlag(fs, "deadlines", "may it submit jobs with a deadline (`ON|OFF`)", onOffVal(&o.deadlines))
			numFlag(fs, &o.deadlineCap, "deadline-cap", 0, 0, math.MaxUint32, "max running jobs with a deadline (`N`, 0 = none)")
			fs.BoolVar(&o.export, "export-metrics", false, "its own series on /metrics beyond the servers' --metrics-max-tenants")
			fs.StringVar(&o.groupCap, "group-cap", "", "max running jobs of each named group whose cap is inherit (`N`, or none)")
			fs.StringVar(&o.groupOrder, "group-order", "", "`ORDER` among the tenant's groups: fifo (default) or fair")
			numFlag(fs, &o.maxGroups, "max-groups", 0, 0, sfq.MaxMaxGroups, "max named groups with jobs or settings (`N`, 0 = the default 10000)")
			fs.StringVar(&o.rate, "rate", "", "dispatch rate limit `N/PERIOD` (e.g. 100/1m), or none")
			numFlag(fs, &o.burst, "burst", 0, 1, sfq.MaxRateBurst, "burst `N` of the rate limit (default: its N)")
		},
		run: runTenantSet,
	}))
	register("tenant get", typed(&spec[clientFlags]{
		synopsis: "Show a tenant's configuration",
		usage:    "NAME [--json]",
		run: func(env *cmdEnv, opts *clientFlags, args []string) error {
			if len(args) != 1 {
				return usageError("tenant get needs one NAME")
			}
			t, err := ask(opts.call, pb.NewAdminClient, pb.AdminClient.GetTenant, &pb.GetTenantRequest{Name: args[0]})
			if err != nil {
				return err
			}
			return printTenant(env, t, opts.json)
		},
	}))
	register("tenant list", typed(&spec[clientFlags]{
		synopsis: "List tenants",
		usage:    "[--json]",
		run: func(env *cmdEnv, opts *clientFlags, args []string) error {
			resp, err := ask(opts.call, pb.NewAdminClient, pb.AdminClient.ListTenants, &pb.ListTenantsRequest{})
			if err != nil {
				return err
			}
			if opts.json {
				for _, t := range resp.Tenants {
					if err := printJSON(env.stdout, tenantJSON(t)); err != nil {
						return err
					}
				}
				return nil
			}
			fmt.Fprintf(env.stdout, "%-24s %-8s %4s %5s %s\n", "NAME", "TIER", "MULT", "CAP", "QUOTA")
			for _, t := range resp.Tenants {
				m := tenantJSON(t)
				fmt.Fprintf(env.stdout, "%-24s %-8s %4d %5s %s\n", termtext.Safe(t.Name, false), m["tier"], t.Multiplier, orNone(t.Caps.GetMaxRunning()), orNone(t.Caps.GetMaxQueued()))
			}
			return nil
		},
	}))
	register("tenant delete", typed(&spec[clientFlags]{
		synopsis: "Delete a tenant that has no queued or running job",
		usage:    "NAME",
		run: func(env *cmdEnv, opts *clientFlags, args []string) error {
			if len(args) != 1 {
				return usageError("tenant delete needs one NAME")
			}
			_, err := ask(opts.call, pb.NewAdminClient, pb.AdminClient.DeleteTenant, &pb.DeleteTenantRequest{Name: args[0]})
			if err != nil {
				return err
			}
			fmt.Fprintf(env.stdout, "tenant %s deleted\n", args[0])
			return nil
		},
	}))
}

func runTenantSet(env *cmdEnv, opts *tenantSetOpts, args []string) error {
	if len(args) != 1 {
		return usageError("tenant set needs one NAME")
	}
	set := map[string]bool{}
	opts.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	// The request names only the flags given: the cluster keeps every
	// other field as it is (docs/api.md, "Upserts").
	req := &pb.UpsertTenantRequest{Name: args[0], Caps: &pb.CapsUpdate{}}
	if set["tier"] {
		t, err := sfq.ParseTier(strings.ToLower(opts.tier))
		if err != nil {
			return usageError("--tier: %v", err)
		}
		req.Tier = fsm.TierToPB(t).Enum()
	}
	if set["multiplier"] {
		req.Multiplier = &opts.multiplier
	}
	c := req.Caps
	for _, f := range []struct {
		name string
		dst  **uint32
		src  *uint32
	}{{"cap", &c.MaxRunning, &opts.cap}, {"cap-sm", &c.MaxRunningSm, &opts.capSM}, {"cap-md", &c.MaxRunningMd, &opts.capMD},
		{"cap-lg", &c.MaxRunningLg, &opts.capLG}, {"max-queued", &c.MaxQueued, &opts.maxQueued},
		{"cap-critical", &c.MaxRunningCritical, &opts.capCritical}, {"cap-high", &c.MaxRunningHigh, &opts.capHigh},
		{"deadline-cap", &c.MaxRunningDeadline, &opts.deadlineCap}} {
		if set[f.name] {
			*f.dst = f.src
		}
	}
	if set["inflight-cpu"] {
		ms := opts.inflightCPU.Milliseconds()
		c.MaxInflightCpuMs = &ms
	}
	if set["export-metrics"] {
		req.ExportMetrics = &opts.export
	}
	if set["max-class"] {
		req.MaxClass = opts.maxClass.Enum()
	}
	if set["deadlines"] {
		req.AllowDeadlines = &opts.deadlines
	}
	if set["group-cap"] {
		n, err := parseCapOrNone(opts.groupCap)
		if err != nil {
			return usageError("--group-cap: %v", err)
		}
		req.GroupCap = &n
	}
	if set["group-order"] {
		order, err := sfq.ParseGroupOrder(opts.groupOrder)
		if err != nil {
			return usageError("--group-order: %q: want fifo or fair", opts.groupOrder)
		}
		req.GroupOrder = fsm.GroupOrderToPB(order).Enum()
	}
	if set["max-groups"] {
		req.MaxGroups = &opts.maxGroups
	}
	if set["rate"] {
		rate, err := rateFlagValue(opts.rate, opts.burst, set["burst"])
		if err != nil {
			return err
		}
		req.Rate = &rate
	}
	if set["burst"] {
		req.RateBurst = &opts.burst
	}
	var out *pb.Tenant
	err := opts.call(func(ctx context.Context, cc grpc.ClientConnInterface) error {
		admin := pb.NewAdminClient(cc)
		var err error
		out, err = admin.UpsertTenant(ctx, req)
		if isLevelRefusal(err) {
			// A cluster below feature level 7 sets every field of an
			// upsert: send the tenant's own values for the others.
			var full *pb.UpsertTenantRequest
			if full, err = fullUpsert(ctx, admin, req); err == nil {
				out, err = admin.UpsertTenant(ctx, full)
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	return printSet(env, opts.json, "tenant "+out.Name, out.Created, tenantJSON(out), func() error { return printTenant(env, out, false) })
}

// isLevelRefusal reports whether err is the refusal of what the
// cluster's feature level does not allow yet.
func isLevelRefusal(err error) bool {
	return status.Code(err) == codes.FailedPrecondition && client.Reason(err) == text.ReasonFeatureLevel
}

// fullUpsert is req with every field it leaves out set to the tenant's
// current value (a new tenant: its default), as a cluster below feature
// level 7 needs it.
func fullUpsert(ctx context.Context, admin pb.AdminClient, req *pb.UpsertTenantRequest) (*pb.UpsertTenantRequest, error) {
	cur, err := admin.GetTenant(ctx, &pb.GetTenantRequest{Name: req.Name})
	switch status.Code(err) {
	case codes.OK:
	case codes.NotFound:
		cur = &pb.Tenant{Name: req.Name, Multiplier: 1}
	default:
		return nil, err
	}
	full := proto.Clone(req).(*pb.UpsertTenantRequest)
	or := func(p **uint32, v uint32) {
		if *p == nil {
			*p = &v
		}
	}
	if full.Tier == nil {
		full.Tier = cur.Tier.Enum()
	}
	or(&full.Multiplier, cur.Multiplier)
	if full.ExportMetrics == nil {
		full.ExportMetrics = &cur.ExportMetrics
	}
	if full.MaxClass == nil {
		full.MaxClass = cur.MaxClass.Enum()
	}
	if full.AllowDeadlines == nil {
		full.AllowDeadlines = &cur.AllowDeadlines
	}
	or(&full.GroupCap, cur.GroupCap)
	if full.GroupOrder == nil {
		full.GroupOrder = cur.GroupOrder.Enum()
	}
	or(&full.MaxGroups, cur.MaxGroups)
	if full.Rate == nil {
		full.Rate = &cur.Rate
	}
	if full.RateBurst == nil {
		burst := cur.RateBurst
		if full.GetRate() == "" || full.GetRate() == "none" {
			burst = 0
		}
		full.RateBurst = &burst
	}
	c, cc := full.Caps, cur.Caps
	or(&c.MaxRunning, cc.GetMaxRunning())
	or(&c.MaxRunningSm, cc.GetMaxRunningSm())
	or(&c.MaxRunningMd, cc.GetMaxRunningMd())
	or(&c.MaxRunningLg, cc.GetMaxRunningLg())
	or(&c.MaxQueued, cc.GetMaxQueued())
	or(&c.MaxRunningCritical, cc.GetMaxRunningCritical())
	or(&c.MaxRunningHigh, cc.GetMaxRunningHigh())
	or(&c.MaxRunningDeadline, cc.GetMaxRunningDeadline())
	if c.MaxInflightCpuMs == nil {
		ms := cc.GetMaxInflightCpuMs()
		c.MaxInflightCpuMs = &ms
	}
	return full, nil
}

// printSet prints the answer of a set that creates or updates what it
// names: with asJSON its JSON m with "created"; else "WHAT created" or
// "WHAT updated", then show's table.
func printSet(env *cmdEnv, asJSON bool, what string, created bool, m map[string]any, show func() error) error {
	if asJSON {
		m["created"] = created
		return printJSON(env.stdout, m)
	}
	verb := "updated"
	if created {
		verb = "created"
	}
	fmt.Fprintf(env.stdout, "%s %s\n", what, verb)
	return show()
}

// parseCapOrNone reads "none" (0) or a number 1..sfq.MaxGroupCap.
func parseCapOrNone(s string) (uint32, error) {
	if s == "none" {
		return 0, nil
	}
	cp, err := sfq.ParseGroupCap(s)
	if err != nil || cp == sfq.GroupCapInherit || cp == sfq.GroupCapNone {
		return 0, fmt.Errorf("%q: want none or a number 1..%d", s, sfq.MaxGroupCap)
	}
	return uint32(cp), nil
}
