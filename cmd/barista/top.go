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

	"google.golang.org/grpc"

	pb "barista/proto"
	"barista/rpc"
)

type topOpts struct {
	clientFlags
	once     bool
	interval time.Duration
	window   time.Duration
	stale    bool
}

func init() {
	register("top", &command{
		synopsis: "Live view of fair shares: per-tenant weight, queue, running, share vs entitlement",
		usage:    "[--once] [--json] [--interval 1s] [--window 60s]",
		help: `Shows, refreshed every --interval, each tenant's tier, weight, queued and
running jobs, its share of the dispatches of the last --window, and the
share its weight entitles it to among the active tenants (those with
queued, running or recent work); and the cluster's leader and applied
index. Under a tenant with named groups, its groups with the most queued
jobs (at most 5) follow, each with its running and queued jobs and its
cap. --once prints one view and exits; with --json it prints one object:

  {"leader_id", "applied_index", "window_ms", "tenants": [{"name", "tier",
   "weight", "queued", "running", "dispatches_1m", "dispatched_cost_ms_1m",
   "share", "entitled_share", "groups": [{"name", "running", "queued",
   "limit"}]}]}

(shares are fractions of the window's dispatches).`,
		flags: func(fs *flag.FlagSet) any {
			o := &topOpts{}
			o.register(fs)
			fs.BoolVar(&o.once, "once", false, "print one view and exit")
			durFlag(fs, &o.interval, "interval", time.Second, 10*time.Millisecond, time.Hour, "", "refresh every `DURATION`")
			msFlag(fs, &o.window, "window", time.Minute, time.Millisecond, 24*time.Hour, "", "shares over the last `DURATION` of cluster time")
			fs.BoolVar(&o.stale, "stale", false, "read the connected node's state without asking the leader")
			return o
		},
		run: runTop,
	})
}

func fetchTop(opts *topOpts) (*pb.TopResponse, error) {
	var t *pb.TopResponse
	err := opts.call(func(ctx context.Context, cc grpc.ClientConnInterface) (err error) {
		t, err = pb.NewAdminClient(cc).Top(ctx, &pb.TopRequest{WindowMs: opts.window.Milliseconds(), Read: &pb.ReadOptions{Stale: opts.stale}})
		return err
	})
	return t, err
}

func runTop(env *cmdEnv, o any, args []string) error {
	opts := o.(*topOpts)
	if len(args) > 0 {
		return usageError("unexpected argument %q", args[0])
	}
	if opts.once {
		t, err := fetchTop(opts)
		if err != nil {
			return err
		}
		if opts.json {
			return printJSON(env.stdout, rpc.TopToJSON(t))
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
			printJSON(env.stdout, rpc.TopToJSON(t))
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
	j := rpc.TopToJSON(t)
	fmt.Fprintf(w, "barista · leader %s · applied index %d · %s\n", j.LeaderID, j.AppliedIndex, time.Now().Format("15:04:05"))
	fmt.Fprintf(w, "SHARE: of the estimated CPU dispatched in the last %s · ENTITLED: weight among the tenants with queued jobs now (- without any)\n\n",
		time.Duration(j.WindowMs)*time.Millisecond)
	fmt.Fprintf(w, "%-20s %-8s %7s %7s %7s %8s %7s %8s  %s\n", "TENANT", "TIER", "WEIGHT", "QUEUED", "RUNNING", "DISP/1M", "SHARE", "ENTITLED", "share (#) vs entitled (|)")
	for _, r := range j.Tenants {
		entitled := fmt.Sprintf("%7.1f%%", 100*r.EntitledShare)
		if r.Queued == 0 {
			entitled = fmt.Sprintf("%8s", "-")
		}
		bar := []byte(strings.Repeat(" ", 30))
		for i := 0; i < int(r.Share*30+0.5) && i < 30; i++ {
			bar[i] = '#'
		}
		if e := int(r.EntitledShare*30 + 0.5); e > 0 && e <= 30 {
			bar[e-1] = '|'
		}
		fmt.Fprintf(w, "%-20s %-8s %7.3g %7d %7d %8d %6.1f%% %s  [%s]\n", r.Name, r.Tier, r.Weight, r.Queued, r.Running,
			r.Dispatches1m, 100*r.Share, entitled, bar)
		for _, g := range r.Groups {
			name := groupName(g.Name)
			limit := ""
			if g.Limit > 0 {
				limit = fmt.Sprintf("cap %d", g.Limit)
			}
			fmt.Fprintf(w, "  group %-20.20s %16d %7d  %s\n", name, g.Queued, g.Running, limit)
		}
	}
}
