package chaos

// The chaos run: its configuration, the cluster it starts (tenants, the
// pool gpu), Execute, and the settling of the nodes at the end.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/snapshot"
	"github.com/baristahq/barista/test/cluster"
	"google.golang.org/protobuf/proto"
)

// Config is one chaos run.
type Config struct {
	Seed     uint64
	Duration time.Duration // how long faults are injected
	Nodes    int           // 3 or 5
	// Workers by size.
	SM, MD, LG int
	// GPU is the number of md workers of the pool gpu (SPEC §3 "Pools"),
	// beside the workers above, which serve the pool default.
	GPU int
	// Submitters is the number of concurrent submitting clients.
	Submitters int
	// Partitions puts every process in its own network namespace and
	// adds partitions to the fault mix (needs root and iproute2).
	Partitions bool
	// Schedules is the number of schedules the leader fires through the
	// faults (schedwork.go).
	Schedules int
	// Resources declares three resources that part of every tenant's
	// jobs use (resources.go).
	Resources bool
}

// Timeouts of the chaos cluster: leases outlive a failover with
// reconnects, workers kill their job before the lease expires.
const schedulerConfig = `[scheduler]
heartbeat_interval = "250ms"
self_kill_after = "4s"
lease_timeout = "5s"
ack_timeout = "5s"
cancel_grace = "1s"
`

const (
	leaseTimeout = 5 * time.Second
	journalTick  = 100 * time.Millisecond
)

// Run is a chaos run in progress.
type Run struct {
	t       testing.TB
	cfg     Config
	rng     *rand.Rand
	c       *cluster.Cluster
	net     *Net
	journal string
	attempt string // the job program
	rec     recorder
	faults  []Fault
	fmu     sync.Mutex
	// lastAssign is when a watcher last received an "assigned" event
	// (Unix ns), for failover times.
	lastAssign atomic.Int64
	acked      struct {
		sync.Mutex
		jobs    []uint64
		tenants []string
	}
	fair []string
	// gpuFair are the fairness tenants of the pool gpu.
	gpuFair []string
}

// tenants of a run: three fairness tenants (sm jobs of class normal
// without a deadline only, no caps, in groups without caps: fair-silver's
// in group_order fair), two capped tenants and two of mixed sizes, which
// also submit jobs of classes high (mix-gold, capped) and low, and jobs
// with deadlines (the mixed ones). Every tenant's jobs are spread over
// groups g0-g3 and its unnamed group; the capped and mixed tenants' groups
// are capped (group_cap), in both group orders.
var tenantSpecs = []*pb.UpsertTenantRequest{
	{Name: "fair-free", Tier: pb.Tier_FREE.Enum()},
	{Name: "fair-silver", Tier: pb.Tier_SILVER.Enum(), GroupOrder: pb.GroupOrder_GROUP_FAIR.Enum()},
	{Name: "fair-gold", Tier: pb.Tier_GOLD.Enum()},
	capBronze(1),
	{Name: "cap-diamond", Tier: pb.Tier_DIAMOND.Enum(), Caps: &pb.CapsUpdate{MaxRunningMd: proto.Uint32(1), MaxInflightCpuMs: proto.Int64(1500)}, GroupCap: proto.Uint32(2), GroupOrder: pb.GroupOrder_GROUP_FAIR.Enum()},
	{Name: "mix-bronze", Tier: pb.Tier_BRONZE.Enum(), AllowDeadlines: proto.Bool(true), Caps: &pb.CapsUpdate{MaxRunningDeadline: proto.Uint32(2)}, GroupCap: proto.Uint32(1), GroupOrder: pb.GroupOrder_GROUP_FAIR.Enum()},
	{Name: "mix-gold", Tier: pb.Tier_GOLD.Enum(), MaxClass: pb.Class_HIGH.Enum(), AllowDeadlines: proto.Bool(true), Caps: &pb.CapsUpdate{MaxRunningHigh: proto.Uint32(2)}, GroupCap: proto.Uint32(2)},
	// Delayed, expiring and failing (backing off) jobs (SPEC §8 rule 9).
	{Name: "delay-silver", Tier: pb.Tier_SILVER.Enum(), Caps: &pb.CapsUpdate{MaxRunning: proto.Uint32(2)}},
	// The schedules' jobs (SPEC §8 rule 14; schedwork.go).
	{Name: schedTenant, Tier: pb.Tier_SILVER.Enum()},
	// The fairness tenants of the pool gpu: md jobs there only, no caps
	// (the pool's weights are equal: they share it 1:1).
	{Name: "gfair-bronze", Tier: pb.Tier_BRONZE.Enum()},
	{Name: "gfair-gold", Tier: pb.Tier_GOLD.Enum()},
}

// gpuPool is the run's second pool (SPEC §3 "Pools"), with its own
// workers (Config.GPU), its own fairness tenants and equal weights. The
// capped and mixed tenants submit some of their jobs there too, so that
// their caps bind across both pools, and cap-diamond has a subscription
// of burst 1 in it (SPEC §8 rule 11).
const gpuPool = "gpu"

// poolSetup is what the run applies before its load: the pool gpu and
// cap-diamond's subscription there.
func poolSetup() []*clusterpb.Command {
	equal, burst := "equal", uint32(1)
	return []*clusterpb.Command{
		{Cmd: &clusterpb.Command_PoolSet{PoolSet: &clusterpb.PoolSet{Name: gpuPool, Weights: &equal}}},
		{Cmd: &clusterpb.Command_SubscriptionSet{SubscriptionSet: &clusterpb.SubscriptionSet{Tenant: "cap-diamond", Pool: gpuPool, Burst: &burst}}},
	}
}

// capBronze is cap-bronze's settings with max_running n: group_cap 1,
// group_order fifo.
func capBronze(n uint32) *pb.UpsertTenantRequest {
	return &pb.UpsertTenantRequest{Name: "cap-bronze", Tier: pb.Tier_BRONZE.Enum(), Caps: &pb.CapsUpdate{MaxRunning: proto.Uint32(n)}, GroupCap: proto.Uint32(1)}
}

// Start boots the cluster, the workers and the network of a run.
func Start(t testing.TB, cfg Config) *Run {
	r := &Run{t: t, cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5eed)), fair: []string{"fair-free", "fair-silver", "fair-gold"},
		gpuFair: []string{"gfair-bronze", "gfair-gold"}}
	r.attempt = cluster.Helper(t, "./test/testdata/attempt")
	cfgPath := filepath.Join(t.TempDir(), "barista.toml")
	if err := os.WriteFile(cfgPath, []byte(schedulerConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	// The whole log is kept (the audit replays it from index 1);
	// snapshots are still taken and installed.
	r.c = cluster.New(t, "--config", cfgPath, "--trailing-logs", "100000000", "--snapshot-threshold", "3000", "--snapshot-interval", "5s")
	r.journal = filepath.Join(r.c.Dir, "journal")
	var n *Net
	if cfg.Partitions {
		var err error
		if n, err = NewNet(); err != nil {
			// Root without the right to make namespaces (a container):
			// run the other faults.
			t.Logf("partitions skipped: network namespaces: %v", err)
		}
	}
	if n != nil {
		r.net = n
		t.Cleanup(n.Close)
		r.c.Host = func(id string) string {
			if a := n.IP(id); a != "" {
				return a
			}
			a, err := n.Add(id)
			if err != nil {
				t.Fatalf("network namespace of %s: %v", id, err)
			}
			return a
		}
		r.c.Wrap = n.Exec
		// Raft without TLS on the namespaces' private addresses.
		r.c.Args = append(r.c.Args, "--insecure-raft")
	}
	for i := 1; i <= cfg.Nodes; i++ {
		node := r.c.Add(fmt.Sprintf("n%d", i))
		if i == 2 {
			// A wall clock off by ten seconds, either way: cluster time
			// must make it harmless.
			off := "10s"
			if r.rng.IntN(2) == 0 {
				off = "-10s"
			}
			node.Args = append(node.Args, "--test-clock-offset", off)
		}
		if i == 1 {
			node.Start("--bootstrap")
			r.c.WaitLeader(20 * time.Second)
		} else {
			node.Start("--join", r.c.Nodes[0].GRPCAddr)
		}
	}
	r.c.WaitVoters(cfg.Nodes, 60*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, spec := range tenantSpecs {
		if _, err := r.retry(ctx, 0, func(ctx context.Context, n *cluster.Node) error {
			_, err := pb.NewAdminClient(n.Conn()).UpsertTenant(ctx, spec)
			return err
		}); err != nil {
			t.Fatalf("tenant %s: %v", spec.Name, err)
		}
	}
	// The pool first (once the cluster's feature level allows it): its
	// workers would be refused until it exists.
	if cfg.GPU > 0 {
		for {
			resp, err := r.c.Apply(ctx, poolSetup()...)
			if err == nil && resp.Results[0].Code == clusterpb.Code_CODE_OK && resp.Results[1].Code == clusterpb.Code_CODE_OK {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("pool %s: %v %v", gpuPool, resp, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	r.setReserveAfter(ctx)
	r.applyAll(ctx, "resources", r.resourceCommands())
	r.applyAll(ctx, "schedules", r.scheduleCommands())
	for size, count := range map[string]int{"sm": cfg.SM, "md": cfg.MD, "lg": cfg.LG, "gpu-md": cfg.GPU} {
		for i := 1; i <= count; i++ {
			id := fmt.Sprintf("w-%s-%d", size, i)
			if r.net != nil {
				r.net.Add(id)
			}
			if pool, sz, ok := strings.Cut(size, "-"); ok {
				r.c.AddWorker(id, sz).Args = []string{"--pool", pool}
				continue
			}
			r.c.AddWorker(id, size)
		}
	}
	sort.Slice(r.c.Workers, func(i, j int) bool { return r.c.Workers[i].ID < r.c.Workers[j].ID })
	for _, w := range r.c.Workers {
		w.Start("")
	}
	return r
}

// Dir is the run's directory: logs, data directories, the job journal.
func (r *Run) Dir() string { return r.c.Dir }

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// Result is a finished run: its history, violations and report.
type Result struct {
	History    *History
	Violations []Violation
	Report     string
	// Certificates are the fairness tenants' certificates of fairness
	// over the middle half of the log, verified.
	Certificates []CertificateCheck
}

// Execute runs load and faults for the configured duration, lets the
// cluster settle, stops it, audits the final leader's log and checks the
// history.
func (r *Run) Execute() *Result {
	t := r.t
	loadCtx, stopLoad := context.WithCancel(context.Background())
	var loadWG sync.WaitGroup
	r.load(loadCtx, &loadWG)
	faultCtx, stopFaults := context.WithTimeout(context.Background(), r.cfg.Duration)
	r.inject(faultCtx)
	stopFaults()
	// Everything back: heal the network, resume and restart what is down.
	if r.net != nil {
		r.net.Heal()
	}
	for _, n := range r.c.Nodes {
		n.Signal(syscall.SIGCONT)
		if !n.Running() {
			n.Start()
		}
	}
	for _, w := range r.c.Workers {
		w.Signal(syscall.SIGCONT)
	}
	sleepCtx(context.Background(), 5*time.Second) // a last stretch of load without faults
	stopLoad()
	loadWG.Wait()
	pauseCtx, pauseDone := context.WithTimeout(context.Background(), time.Minute)
	r.applyAll(pauseCtx, "pausing the schedules", r.pauseSchedules())
	pauseDone()
	// The workers stop (their running jobs' leases expire and requeue),
	// then the cluster must converge.
	for _, w := range r.c.Workers {
		w.Kill()
	}
	time.Sleep(leaseTimeout + 2*time.Second)
	h := &History{Fair: r.fair, Overlap: journalTick}
	if r.cfg.GPU > 0 {
		h.PoolFair = map[string][]string{gpuPool: r.gpuFair}
	}
	index := r.settle(h)
	fenced := 0.0
	for _, n := range r.c.Nodes {
		fenced += scrapeSum(n.HTTPAddr, "barista_fenced_writes_total")
	}
	leader := r.leader()
	if leader < 0 {
		leader = 0
	}
	for _, n := range r.c.Nodes {
		if err := n.Stop(); err != nil {
			t.Logf("stopping %s: %v", n.ID, err)
		}
	}
	out, errOut, err := r.c.Run("replay", "--data-dir", r.c.Nodes[leader].DataDir, "--audit", "--until", strconv.FormatUint(index, 10))
	if err != nil {
		t.Fatalf("replay --audit of %s: %v\n%s", r.c.Nodes[leader].ID, err, errOut)
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "index="); ok {
			idx, hsh, _ := strings.Cut(v, " hash=")
			h.AuditIndex, _ = strconv.ParseUint(idx, 10, 64)
			h.AuditHash = hsh
			continue
		}
		var f snapshot.AuditFact
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		h.Audit = append(h.Audit, f)
	}
	if h.Attempts, err = ReadJournal(r.journal, journalTick); err != nil {
		t.Fatal(err)
	}
	r.rec.mu.Lock()
	h.Ops, h.Events = r.rec.ops, r.rec.events
	r.rec.mu.Unlock()
	if b, err := json.MarshalIndent(r.faults, "", " "); err == nil {
		os.WriteFile(filepath.Join(r.c.Dir, "faults.json"), b, 0o644)
	}
	res := &Result{History: h, Violations: Check(h)}
	var bad []Violation
	res.Certificates, bad = r.certify(r.c.Nodes[leader].DataDir, index)
	res.Violations = append(res.Violations, bad...)
	res.Report = r.report(h, fenced) + certificateReport(res.Certificates)
	return res
}

// settle polls every node's applied index and hash until they agree (up
// to a minute), records the last poll in h and returns the index.
func (r *Run) settle(h *History) uint64 {
	deadline := time.Now().Add(time.Minute)
	for {
		h.Nodes = h.Nodes[:0]
		agree := true
		for _, n := range r.c.Nodes {
			st, err := n.Status()
			if err != nil {
				agree = false
				h.Nodes = append(h.Nodes, NodeFinal{ID: n.ID, Hash: "unreachable: " + err.Error()})
				continue
			}
			h.Nodes = append(h.Nodes, NodeFinal{ID: n.ID, Index: st.AppliedIndex, Hash: st.StateHash})
			if f := h.Nodes[0]; st.AppliedIndex != f.Index || st.StateHash != f.Hash {
				agree = false
			}
		}
		if agree || time.Now().After(deadline) {
			return h.Nodes[0].Index
		}
		time.Sleep(200 * time.Millisecond)
	}
}
