package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/baristahq/barista/client"
	"github.com/baristahq/barista/internal/proc"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/worker/runner"
)

type devOpts struct {
	dataDir  string
	basePort int
	nodes    int
	workers  string
	gpu      int
	backlog  int
	noLoad   bool
	quiet    bool
	duration time.Duration
}

// demoTenant is a tenant of the demo load, and the pool and size of its
// jobs.
type demoTenant struct {
	name string
	tier pb.Tier
	pool string // "" for the pool default
	size pb.Size
}

// demoTenants are the demo load's tenants of the cpu fleet (the pool
// default), one per tier, with sm jobs, which every worker may run: one
// shared size, where the shares follow the weights (the SFQ bound of
// SPEC §8.6 is for one worker size).
var demoTenants = []demoTenant{
	{"acme-diamond", pb.Tier_DIAMOND, "", pb.Size_SM}, {"globex-gold", pb.Tier_GOLD, "", pb.Size_SM},
	{"initech-silver", pb.Tier_SILVER, "", pb.Size_SM}, {"umbrella-bronze", pb.Tier_BRONZE, "", pb.Size_SM},
	{"hooli-free", pb.Tier_FREE, "", pb.Size_SM},
}

// devGPUPool is the pool of the demo's gpu fleet, and demoGPUTenants the
// tenants of its load, with md jobs (a fair share of their own, 8:1).
const devGPUPool = "gpu"

var demoGPUTenants = []demoTenant{
	{"wayne-gold", pb.Tier_GOLD, devGPUPool, pb.Size_MD}, {"stark-free", pb.Tier_FREE, devGPUPool, pb.Size_MD},
}

func init() {
	register("dev", typed(&spec[devOpts]{
		synopsis: "Run a local cluster with workers and demo load, and watch the fair shares",
		usage:    "[--data-dir DIR] [--base-port 7400] [--nodes 3] [--workers sm:2,md:2,lg:1] [--gpu-workers 2]",
		help: `Starts, as child processes of this one: a cluster of --nodes servers (real
Raft over loopback TCP, a data directory each), two fleets of workers and
a demo load. The cpu fleet (--workers, every size) serves the pool
default; the gpu fleet (--gpu-workers md workers) serves the pool gpu,
which dev creates (docs/scheduling.md, "Pools"). The demo load keeps one
tenant per tier backlogged in the pool default with sm jobs that burn
200-400 ms of CPU, and two tenants (gold and free) in the pool gpu with
md jobs. Then shows the live share table (as "barista top"): in each
pool, every tenant gets the share of the dispatched CPU its weight
entitles it to. The first node listens on 127.0.0.1:7400 (gRPC), :7440 (Raft) and :7480
(HTTP: the web console, /metrics); the others on the next ports; --base-port
moves them all (gRPC BASE+i, Raft BASE+40+i, HTTP BASE+80+i).

Webhooks work as in production (docs/webhooks.md), with a key made for
the cluster (DIR/webhooks.toml) and endpoints allowed on 127.0.0.0/8 so
that a receiver on this machine can take them.

Ctrl-C stops the load, drains the workers, shuts the servers down, and
deletes the temporary data directory; with --data-dir it is kept (and a
restart there resumes the cluster).`,
		flags: func(fs *flag.FlagSet, o *devOpts) {
			fs.StringVar(&o.dataDir, "data-dir", "", "keep the cluster's data in `DIR` (default: a temporary directory, removed at exit)")
			numFlag(fs, &o.basePort, "base-port", 7400, 1, 65535-80-7, "first gRPC `PORT`")
			numFlag(fs, &o.nodes, "nodes", 3, 1, 7, "number of servers (`N`, 1, 3 or 5 for a quorum that survives failures)")
			fs.StringVar(&o.workers, "workers", "sm:2,md:2,lg:1", "workers of the cpu fleet (the pool default) per size (`SIZE:N,...`)")
			numFlag(fs, &o.gpu, "gpu-workers", 2, 0, 64, "md workers of the gpu fleet (the pool gpu; `N`, 0: no pool gpu)")
			numFlag(fs, &o.backlog, "backlog", 20, 0, 100_000, "queued jobs the demo load keeps per tenant (`N`)")
			fs.BoolVar(&o.noLoad, "no-load", false, "start the cluster and workers without demo tenants or load")
			fs.BoolVar(&o.quiet, "quiet", false, "do not draw the live table")
			durFlag(fs, &o.duration, "duration", 0, time.Millisecond, 365*24*time.Hour, "run until Ctrl-C", "stop by itself after this `DURATION`")
		},
		run: runDev,
	}))
}

// child is a process dev started.
type child struct {
	name string
	proc.Process
}

func runDev(env *cmdEnv, opts *devOpts, args []string) error {
	if len(args) > 0 {
		return usageError("unexpected argument %q", args[0])
	}
	workers, err := parseWorkers(opts.workers)
	if err != nil {
		return usageError("--workers: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, keep := opts.dataDir, opts.dataDir != ""
	if !keep {
		if dir, err = os.MkdirTemp("", "barista-dev-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// SIGHUP (the terminal went away) and SIGPIPE (its output was piped to
	// a program that ended, as in "make run | tee log" and Ctrl-C) stop it
	// as cleanly as Ctrl-C: the children are stopped and the temporary data
	// removed. Without SIGPIPE here, Go would end the process at its next
	// write, before any of that.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	defer stop()
	if opts.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.duration)
		defer cancel()
	}

	var mu sync.Mutex
	var children []*child
	start := func(name string, argv ...string) (*child, error) {
		c := &child{name: name}
		c.LogPath = filepath.Join(dir, name+".log")
		// The children die with dev, even if dev is killed; Ctrl-C
		// reaches dev alone, which stops them in order.
		if err := c.Start(exec.Command(self, argv...), true, nil); err != nil {
			return nil, fmt.Errorf("starting %s: %w", name, err)
		}
		mu.Lock()
		children = append(children, c)
		mu.Unlock()
		return c, nil
	}
	stopAll := func() {
		mu.Lock()
		defer mu.Unlock()
		// Workers first (they finish their job), then servers; each group
		// gets 15 s before it is killed.
		for _, group := range []string{"worker", "node"} {
			var waiting []*child
			for _, c := range children {
				if strings.HasPrefix(c.name, group) {
					c.Signal(syscall.SIGTERM)
					waiting = append(waiting, c)
				}
			}
			deadline := time.Now().Add(15 * time.Second)
			for _, c := range waiting {
				if !c.Wait(time.Until(deadline)) {
					c.Stop(0)
				}
			}
		}
	}
	defer stopAll()

	hooks, err := devWebhookConfig(dir)
	if err != nil {
		return err
	}
	var grpcAddrs []string
	fmt.Fprintf(env.stdout, "barista dev: data in %s%s\n", dir, map[bool]string{true: " (kept)", false: " (removed at exit)"}[keep])
	for i := 0; i < opts.nodes; i++ {
		id := fmt.Sprintf("n%d", i+1)
		g, r, h := fmt.Sprintf("127.0.0.1:%d", opts.basePort+i), fmt.Sprintf("127.0.0.1:%d", opts.basePort+40+i), fmt.Sprintf("127.0.0.1:%d", opts.basePort+80+i)
		argv := []string{"server", "--node-id", id, "--data-dir", filepath.Join(dir, id), "--raft-addr", r, "--grpc-addr", g, "--http-addr", h, "--insecure-dev",
			"--config", hooks, "--webhook-allow-cidr", "127.0.0.0/8"}
		if i == 0 {
			argv = append(argv, "--bootstrap")
		} else {
			argv = append(argv, "--join", grpcAddrs[0])
		}
		if _, err := start("node-"+id, argv...); err != nil {
			return err
		}
		grpcAddrs = append(grpcAddrs, g)
		fmt.Fprintf(env.stdout, "  server %s  grpc %s  raft %s  http://%s/  log %s\n", id, g, r, h, filepath.Join(dir, "node-"+id+".log"))
		if i == 0 {
			if err := waitLeader(ctx, g); err != nil {
				return err
			}
		}
	}
	servers := strings.Join(grpcAddrs, ",")
	startWorker := func(id, size, pool string) error {
		_, err := start("worker-"+id, "worker", "--size", size, "--pool", pool, "--id", id, "--server", servers,
			"--log-dir", filepath.Join(dir, "jobs"), "--work-dir", filepath.Join(dir, "work", id))
		return err
	}
	for _, w := range workers {
		for i := 0; i < w.n; i++ {
			if err := startWorker(fmt.Sprintf("dev-%s-%d", w.size, i+1), w.size, "default"); err != nil {
				return err
			}
		}
		fmt.Fprintf(env.stdout, "  %d %s worker(s) of the cpu fleet (pool default)\n", w.n, w.size)
	}
	cl, err := client.New(grpcAddrs, client.Options{CallTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer cl.Close()
	if opts.gpu > 0 {
		// The pool first: a worker of a pool the cluster does not have
		// is refused until it does.
		if err := devPool(ctx, cl, devGPUPool); err != nil {
			return err
		}
		for i := 0; i < opts.gpu; i++ {
			if err := startWorker(fmt.Sprintf("dev-gpu-md-%d", i+1), "md", devGPUPool); err != nil {
				return err
			}
		}
		fmt.Fprintf(env.stdout, "  %d md worker(s) of the gpu fleet (pool %s)\n", opts.gpu, devGPUPool)
	}
	fmt.Fprintf(env.stdout, "  try: %s top --server %s   ·   %s jobs --tenant globex-gold --server %s\n", os.Args[0], grpcAddrs[0], os.Args[0], grpcAddrs[0])
	if !opts.noLoad {
		load := demoTenants
		if opts.gpu > 0 {
			load = append(slices.Clone(demoTenants), demoGPUTenants...)
		}
		if err := setupDemo(ctx, cl, load); err != nil {
			return err
		}
		go demoLoad(ctx, cl, self, opts.backlog, load)
	}
	top := &topOpts{clientFlags: clientFlags{servers: servers, timeout: 5 * time.Second}, window: time.Minute, stale: true}
	for {
		if !opts.quiet {
			if t, err := fetchTop(top); err == nil {
				fmt.Fprint(env.stdout, "\x1b[H\x1b[2J")
				renderTop(env.stdout, t)
				fmt.Fprintf(env.stdout, "\nweb console http://127.0.0.1:%d/ · data %s · Ctrl-C stops everything\n", opts.basePort+80, dir)
			}
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(env.stdout, "\nbarista dev: stopping the load, the workers and the servers...")
			return nil
		case <-time.After(time.Second):
		}
	}
}

type workerSpec struct {
	size string
	n    int
}

func parseWorkers(s string) ([]workerSpec, error) {
	var out []workerSpec
	for _, part := range strings.Split(s, ",") {
		size, n, ok := strings.Cut(strings.TrimSpace(part), ":")
		count, err := strconv.Atoi(n)
		if !ok || err != nil || count < 0 || count > 64 || (size != "sm" && size != "md" && size != "lg") {
			return nil, fmt.Errorf("%q: want SIZE:N with SIZE sm, md or lg", part)
		}
		out = append(out, workerSpec{size, count})
	}
	return out, nil
}

func waitLeader(ctx context.Context, addr string) error {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := clusterpb.NewNodeClient(cc).Status(sctx, &clusterpb.StatusRequest{})
		cancel()
		if err == nil && st.State == "leader" {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the first server at %s did not become leader within 30s (see its log)", addr)
}

// devRetry calls fn until it succeeds, at most about 10 s (the cluster
// may still be electing, or raising its feature level).
func devRetry(ctx context.Context, what string, fn func(ctx context.Context, cc grpc.ClientConnInterface) error, cl *client.Client) error {
	for try := 0; ; try++ {
		err := cl.Call(ctx, fn)
		if err == nil {
			return nil
		}
		if try > 50 || ctx.Err() != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// devPool creates pool name (or finds it there, in a kept data directory).
func devPool(ctx context.Context, cl *client.Client, name string) error {
	cmd := &clusterpb.Command{Cmd: &clusterpb.Command_PoolSet{PoolSet: &clusterpb.PoolSet{Name: name}}}
	return devRetry(ctx, "creating pool "+name, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		resp, err := clusterpb.NewNodeClient(cc).Apply(ctx, &clusterpb.ApplyRequest{Commands: []*clusterpb.Command{cmd}})
		if err != nil {
			return err
		}
		if r := resp.Results[0]; r.Code != clusterpb.Code_CODE_OK {
			return fmt.Errorf("%s: %s", r.Code, r.Message)
		}
		return nil
	}, cl)
}

func setupDemo(ctx context.Context, cl *client.Client, tenants []demoTenant) error {
	for _, t := range tenants {
		err := devRetry(ctx, "creating demo tenant "+t.name, func(ctx context.Context, cc grpc.ClientConnInterface) error {
			_, err := pb.NewAdminClient(cc).UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: t.name, Tier: t.tier.Enum()})
			return err
		}, cl)
		if err != nil {
			return err
		}
	}
	return nil
}

// demoLoad keeps every demo tenant's queue at backlog jobs of its pool and
// size that burn 200, 300 or 400 ms of CPU (their estimated cost exactly).
func demoLoad(ctx context.Context, cl *client.Client, self string, backlog int, tenants []demoTenant) {
	n := 0
	for ctx.Err() == nil {
		for _, t := range tenants {
			u, err := cl.TenantUsage(ctx, &pb.TenantUsageRequest{Tenant: t.name, Read: &pb.ReadOptions{Stale: true}})
			if err != nil {
				continue
			}
			var inPool []*clusterpb.Command
			for q := int(u.Queued); q < backlog && ctx.Err() == nil; q++ {
				n++
				ms := 200 + 100*(n%3)
				p, _ := runner.EncodePayload(runner.Spec{Argv: []string{self, "demo-burn", "--ms", strconv.Itoa(ms)}})
				if t.pool != "" {
					inPool = append(inPool, &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: t.name, JobType: "demo",
						Size: t.size, EstCostMs: int64(ms), Payload: p, Pool: t.pool}}})
					continue
				}
				_, err := cl.Submit(ctx, &pb.SubmitRequest{Tenant: t.name, JobType: "demo", Size: t.size, EstCostMs: int64(ms), Payload: p})
				if err != nil {
					break
				}
			}
			if len(inPool) > 0 {
				// Jobs of another pool than default go as the admin's
				// commands, in one entry.
				cl.Call(ctx, func(ctx context.Context, cc grpc.ClientConnInterface) error {
					_, err := clusterpb.NewNodeClient(cc).Apply(ctx, &clusterpb.ApplyRequest{Commands: inPool})
					return err
				})
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}
