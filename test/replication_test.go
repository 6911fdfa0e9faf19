package test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/test/cluster"
)

func tenantCmd(name string, tier pb.Tier, cap uint32) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: name, Tier: tier, Caps: &pb.Caps{MaxRunning: cap}}}}
}

// startWithAcme starts a cluster of n nodes with tenant acme at tier
// gold (applied as a command) and returns it with a context that ends
// after timeout or with the test.
func startWithAcme(t *testing.T, n int, timeout time.Duration) (*cluster.Cluster, context.Context) {
	t.Helper()
	c := cluster.Start(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	if _, err := c.Apply(ctx, tenantCmd("acme", pb.Tier_GOLD, 0)); err != nil {
		t.Fatal(err)
	}
	return c, ctx
}

func submitCmd(tenant, key string, size pb.Size, cost int64) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: tenant, IdempotencyKey: key, Size: size, EstCostMs: cost, Payload: []byte("sleep 1")}}}
}

// workload draws random commands against a small world: tenants, submits
// (some keyed), dispatches, starts, heartbeats, finishes, cancels and
// tenant changes, with job and worker numbers in range.
type workload struct {
	mu      sync.Mutex
	rng     *rand.Rand
	jobs    uint64
	credit  uint64
	tenants []string
}

func (w *workload) next() *clusterpb.Command {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.rng
	tenant := w.tenants[r.IntN(len(w.tenants))]
	job := uint64(1)
	if w.jobs > 0 {
		job = 1 + r.Uint64N(w.jobs)
	}
	worker := fmt.Sprintf("w%d", r.IntN(40))
	attempt := uint32(1 + r.IntN(2))
	switch k := r.IntN(100); {
	case k < 40:
		w.jobs++
		key := ""
		if r.IntN(3) == 0 {
			key = fmt.Sprintf("k%d", r.IntN(200))
		}
		return submitCmd(tenant, key, pb.Size(1+r.IntN(3)), int64(100+r.IntN(60_000)))
	case k < 60:
		w.credit++
		return &clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: worker, Size: pb.Size(1 + r.IntN(3)), Credit: w.credit}}}
	case k < 70:
		return &clusterpb.Command{Cmd: &clusterpb.Command_Started{Started: &clusterpb.Started{Job: job, Attempt: attempt, WorkerId: worker}}}
	case k < 75:
		return &clusterpb.Command{Cmd: &clusterpb.Command_Heartbeats{Heartbeats: &clusterpb.HeartbeatBatch{Heartbeats: []*clusterpb.Heartbeat{{Job: job, Attempt: attempt, WorkerId: worker, CpuMs: 100}}}}}
	case k < 90:
		return &clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: job, Attempt: attempt, WorkerId: worker, Outcome: pb.Outcome(1 + r.IntN(3)), CpuMs: int64(r.IntN(90_000))}}}
	case k < 96:
		return &clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Job: job}}}
	default:
		return tenantCmd(tenant, pb.Tier(1+r.IntN(5)), uint32(r.IntN(5)))
	}
}

func newWorkload(seed uint64) (*workload, []*clusterpb.Command) {
	w := &workload{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b9)), tenants: []string{"free1", "bronze1", "silver1", "gold1", "diamond1", "gold2"}}
	tiers := []pb.Tier{pb.Tier_FREE, pb.Tier_BRONZE, pb.Tier_SILVER, pb.Tier_GOLD, pb.Tier_DIAMOND, pb.Tier_GOLD}
	var setup []*clusterpb.Command
	for i, t := range w.tenants {
		setup = append(setup, tenantCmd(t, tiers[i], 0))
	}
	return w, setup
}

// startWorkload applies a new workload's tenants (seed as newWorkload's)
// to c and returns the workload.
func startWorkload(t *testing.T, ctx context.Context, c *cluster.Cluster, seed uint64) *workload {
	t.Helper()
	w, setup := newWorkload(seed)
	if _, err := c.Apply(ctx, setup...); err != nil {
		t.Fatal(err)
	}
	return w
}

// applyPairs applies rounds entries of two of the workload's commands.
func (w *workload) applyPairs(t *testing.T, ctx context.Context, c *cluster.Cluster, rounds int) {
	t.Helper()
	for range rounds {
		if _, err := c.Apply(ctx, w.next(), w.next()); err != nil {
			t.Fatal(err)
		}
	}
}

// untilSnapshots applies the workload's commands one an entry until node
// n has logged writing count snapshots (within 30 s).
func (w *workload) untilSnapshots(t *testing.T, ctx context.Context, c *cluster.Cluster, n *cluster.Node, count int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); strings.Count(n.Log(), "snapshot written") < count; {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d snapshots written in 30s", count)
		}
		if _, err := c.Apply(ctx, w.next()); err != nil {
			t.Fatal(err)
		}
	}
}

// snapshottedNode starts a one-node cluster that snapshots every 20
// entries, keeping trailingLogs entries behind a snapshot, and applies the
// workload of seed until the node has written count snapshots.
func snapshottedNode(t *testing.T, trailingLogs string, seed uint64, count int) *cluster.Cluster {
	t.Helper()
	c := cluster.Start(t, 1, "--snapshot-threshold", "20", "--trailing-logs", trailingLogs, "--snapshot-interval", "100ms")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := startWorkload(t, ctx, c, seed)
	w.untilSnapshots(t, ctx, c, c.Nodes[0], count)
	return c
}

// TestReplicatedWorkload drives thousands of random commands through all
// three nodes (followers forward to the leader) from concurrent clients;
// every node then reports the same state hash at the same applied index.
func TestReplicatedWorkload(t *testing.T) {
	c := cluster.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := startWorkload(t, ctx, c, 1)
	const clients, batches, perBatch = 12, 50, 5
	var applied atomic.Int64
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			node := c.Nodes[i%len(c.Nodes)]
			for range batches {
				var cmds []*clusterpb.Command
				for range perBatch {
					cmds = append(cmds, w.next())
				}
				resp, err := node.Client().Apply(ctx, &clusterpb.ApplyRequest{Commands: cmds})
				if err != nil {
					t.Errorf("apply via %s: %v", node.ID, err)
					return
				}
				applied.Add(int64(len(resp.Results)))
			}
		}()
	}
	wg.Wait()
	if got := applied.Load(); got != clients*batches*perBatch {
		t.Fatalf("%d commands applied", got)
	}
	index, hash := c.WaitConverged(30 * time.Second)
	t.Logf("%d commands; all nodes at index %d with hash %.16s", applied.Load(), index, hash)
	st, _ := c.Nodes[0].Status()
	if st.Jobs == 0 || st.Tenants != 6 {
		t.Fatalf("state looks empty: %d jobs, %d tenants", st.Jobs, st.Tenants)
	}
}

// TestKillAndRestart kills -9 a follower, then the leader, while clients
// submit with idempotency keys and retry; restarted nodes rejoin and
// converge, and every acknowledged submit exists exactly once.
func TestKillAndRestart(t *testing.T) {
	c := cluster.Start(t, 3, "--snapshot-threshold", "200", "--trailing-logs", "100", "--snapshot-interval", "500ms")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := c.Apply(ctx, tenantCmd("acme", pb.Tier_GOLD, 0), tenantCmd("beta", pb.Tier_FREE, 0)); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	acked := map[string]uint64{} // key -> job id
	stop := make(chan struct{})
	wg := keyedLoad(8, stop, func(_, i int, key string) bool {
		tenant := []string{"acme", "beta"}[i%2]
		resp, err := c.Apply(ctx, submitCmd(tenant, key, pb.Size_MD, 1000))
		if err != nil {
			return false
		}
		if r := resp.Results[0]; r.Code == clusterpb.Code_CODE_OK {
			mu.Lock()
			acked[tenant+"/"+key] = r.Job
			mu.Unlock()
		}
		return true
	})
	time.Sleep(1500 * time.Millisecond)
	leader := c.WaitLeader(20 * time.Second)
	follower := c.Followers(leader)[0]
	t.Logf("kill -9 follower %s", follower.ID)
	follower.Kill()
	time.Sleep(1500 * time.Millisecond)
	follower.Start()
	time.Sleep(1500 * time.Millisecond)
	t.Logf("kill -9 leader %s", leader.ID)
	leader.Kill()
	time.Sleep(2 * time.Second)
	leader.Start()
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()
	index, hash := c.WaitConverged(60 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d acknowledged submits; converged at index %d hash %.16s", len(acked), index, hash)
	if len(acked) < 50 {
		t.Fatalf("only %d submits acknowledged", len(acked))
	}
	// Every acknowledged submit exists: resubmitting its key returns the
	// same job and creates nothing.
	keys := make([]string, 0, len(acked))
	for k := range acked {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i := 0; i < len(keys); i += 200 {
		var cmds []*clusterpb.Command
		batch := keys[i:min(i+200, len(keys))]
		for _, k := range batch {
			tenant, key, _ := strings.Cut(k, "/")
			cmds = append(cmds, submitCmd(tenant, key, pb.Size_MD, 1000))
		}
		resp, err := c.Apply(ctx, cmds...)
		if err != nil {
			t.Fatal(err)
		}
		for j, r := range resp.Results {
			if r.Created || r.Job != acked[batch[j]] {
				t.Errorf("acknowledged submit %s (job %d) lost: resubmit gave job %d created=%v %s", batch[j], acked[batch[j]], r.Job, r.Created, r.Message)
			}
		}
	}
	// No duplicates: every job in the table is one acknowledged or
	// in-flight submit; the job count cannot be below the acked count.
	st, _ := c.WaitLeader(10 * time.Second).Status()
	if int(st.Jobs) < len(acked) {
		t.Errorf("%d jobs for %d acknowledged submits", st.Jobs, len(acked))
	}
	c.WaitConverged(30 * time.Second)
}

// TestCatchUpBySnapshot adds a fourth node after the log was compacted:
// it catches up through InstallSnapshot and reaches the same hash.
func TestCatchUpBySnapshot(t *testing.T) {
	c := cluster.Start(t, 3, "--snapshot-threshold", "64", "--trailing-logs", "16", "--snapshot-interval", "200ms")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := startWorkload(t, ctx, c, 7)
	w.applyPairs(t, ctx, c, 300)
	c.WaitConverged(30 * time.Second)
	// Wait for a snapshot on the leader.
	leader := c.WaitLeader(10 * time.Second)
	waitLogged(t, 20*time.Second, "a snapshot on the leader", leader, "snapshot written")
	n4 := c.Add("n4")
	n4.Start("--join", c.Nodes[1].GRPCAddr)
	c.WaitVoters(4, 30*time.Second)
	index, hash := c.WaitConverged(60 * time.Second)
	if !strings.Contains(n4.Log(), "installed snapshot restored") {
		t.Fatalf("n4 did not catch up through InstallSnapshot")
	}
	t.Logf("n4 caught up by snapshot to index %d hash %.16s", index, hash)
}

// TestReplayDataDir stops a node cleanly and rebuilds its state from the
// data directory: barista replay prints the index and hash the node
// recorded at shutdown, which are the cluster's.
func TestReplayDataDir(t *testing.T) {
	// The index the node records at its stop is compared with the
	// cluster's before it: no clock tick may come in between.
	c := cluster.Start(t, 3, "--snapshot-threshold", "100", "--trailing-logs", "1000", "--snapshot-interval", "300ms", "--config", configFile(t, quietClock))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := startWorkload(t, ctx, c, 3)
	w.applyPairs(t, ctx, c, 250)
	// A burst of concurrent single submits: the leader packs them into
	// shared entries, which replay like any other.
	leader := c.WaitLeader(10 * time.Second)
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				if _, err := leader.Client().Apply(ctx, &clusterpb.ApplyRequest{Commands: []*clusterpb.Command{submitCmd("gold1", fmt.Sprintf("burst-%d-%d", g, i), pb.Size_SM, 100)}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if packed := entriesOver(t, leader.HTTPAddr, 2); packed == 0 {
		t.Fatal("no entry carried more than 2 commands: the burst was not coalesced")
	}
	node := c.Nodes[2]
	// The replay must start from a snapshot: wait for the node's first
	// (its threshold is 100 entries, checked every 300-600 ms).
	waitLogged(t, 30*time.Second, "a snapshot", node, "snapshot written")
	index, hash := c.WaitConverged(30 * time.Second)
	if err := node.Stop(); err != nil {
		t.Fatalf("clean stop: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(node.DataDir, "applied.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Index  uint64
		Hash   string
		Reason string
	}
	json.Unmarshal(b, &rec)
	if rec.Reason != "shutdown" || rec.Index != index || rec.Hash != hash {
		t.Fatalf("recorded %+v, cluster at index %d hash %s", rec, index, hash)
	}
	out, errOut, err := c.Run("replay", "--data-dir", node.DataDir)
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, errOut)
	}
	if want := fmt.Sprintf("index=%d hash=%s\n", index, hash); out != want {
		t.Fatalf("replay printed %q, want %q", out, want)
	}
	// The audit replays the whole log command by command (the coalesced
	// entries too) to the same hash, with every submit accounted for.
	out, errOut, err = c.Run("replay", "--data-dir", node.DataDir, "--audit")
	if err != nil {
		t.Fatalf("replay --audit: %v\n%s", err, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if want := fmt.Sprintf("index=%d hash=%s", index, hash); lines[len(lines)-1] != want {
		t.Fatalf("audit ended with %q, want %q", lines[len(lines)-1], want)
	}
	kinds := map[string]int{}
	created, jobs := 0, 0
	for _, line := range lines[:len(lines)-1] {
		var f struct {
			Kind, Verify string
			Created      bool
		}
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		kinds[f.Kind]++
		if f.Verify != "" {
			t.Fatalf("audit: %s", line)
		}
		if f.Kind == "submit" && f.Created {
			created++
		}
		if f.Kind == "job" {
			jobs++
		}
	}
	if created != jobs || jobs < 640 || uint64(kinds["entry"]) > index || kinds["entry"] < 250 {
		t.Fatalf("audit facts %v: %d created submits, %d jobs at the end", kinds, created, jobs)
	}
	// The fairness report of the whole log: one line per tenant with
	// work, in each class the entitlements add up to 1 (time passed with
	// eligible work), and the shares too where anything was billed (the
	// workload's random reports seldom match a live attempt).
	out, errOut, err = c.Run("replay", "--data-dir", node.DataDir, "--report", "--json")
	if err != nil {
		t.Fatalf("replay --report: %v\n%s", err, errOut)
	}
	shares, entitled := map[string]float64{}, map[string]float64{}
	lines = strings.Split(strings.TrimSpace(out), "\n")
	for _, line := range lines {
		var r struct {
			Tenant, Class   string
			CPUBilledMs     *int64   `json:"cpu_billed_ms"`
			Share, Entitled *float64 // null when undefined
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.CPUBilledMs == nil || r.Tenant == "" {
			t.Fatalf("report line %q: %v", line, err)
		}
		if r.Share != nil {
			shares[r.Class] += *r.Share
		}
		if r.Entitled != nil {
			entitled[r.Class] += *r.Entitled
		}
	}
	for class, sum := range entitled {
		if sum < 0.999 || sum > 1.001 || (shares[class] != 0 && (shares[class] < 0.999 || shares[class] > 1.001)) {
			t.Errorf("class %s: shares add up to %.4f, entitlements to %.4f\n%s", class, shares[class], sum, out)
		}
	}
	if len(lines) < 6 || len(entitled) == 0 {
		t.Errorf("replay --report:\n%s", out)
	}
	t.Logf("replay --report:\n%s%s", out, errOut)
	// Replaying an earlier index gives another hash and says nothing of
	// uncommitted entries.
	out, errOut, err = c.Run("replay", "--data-dir", node.DataDir, "--until", fmt.Sprint(index-1), "--json")
	if err != nil || !strings.Contains(out, fmt.Sprintf(`"index":%d`, index-1)) || strings.Contains(out, "note") {
		t.Fatalf("replay --until: %v %s %s", err, out, errOut)
	}
}

// TestConfigFilesSeedOnlyAtBootstrap starts nodes with different config
// files: only the bootstrap node's file seeds the replicated config, and
// all nodes hold equal hashes.
func TestConfigFilesSeedOnlyAtBootstrap(t *testing.T) {
	c := cluster.New(t)
	dir := t.TempDir()
	files := []string{
		"[scheduler]\nlease_timeout = \"40s\"\nself_kill_after = \"30s\"\n[scheduler.weights]\ngold = 10\n",
		"[scheduler]\nlease_timeout = \"90s\"\nself_kill_after = \"60s\"\npolicy = \"reserve:2s\"\n[scheduler.weights]\ngold = 99\n",
		"[scheduler]\nclamp = \"dispatch\"\ndecay = \"half_life:1h,norm:100s\"\n",
	}
	c.BootWith(len(files), func(i int, n *cluster.Node) {
		path := filepath.Join(dir, n.ID+".toml")
		if err := os.WriteFile(path, []byte(files[i]), 0o644); err != nil {
			t.Fatal(err)
		}
		n.Args = []string{"--config", path}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Apply(ctx, tenantCmd("g", pb.Tier_GOLD, 0), submitCmd("g", "", pb.Size_MD, 1000)); err != nil {
		t.Fatal(err)
	}
	// Hand leadership to n2, whose file differs: nothing is re-seeded.
	if _, err := c.WaitLeader(10*time.Second).Client().TransferLeadership(ctx, &clusterpb.TransferLeadershipRequest{Id: "n2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Apply(ctx, &clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: "w", Size: pb.Size_MD, Credit: 1}}}); err != nil {
		t.Fatal(err)
	}
	_, hash := c.WaitConverged(30 * time.Second)
	// Every node replays to the same hash from its own data dir, and a
	// scenario-free check of the seed: gold weight 10 gives the first
	// dispatch's successor tag 100 (1000 ms / 10).
	for _, n := range c.Nodes {
		if err := n.Stop(); err != nil {
			t.Fatal(err)
		}
		out, errOut, err := c.Run("replay", "--data-dir", n.DataDir, "--dump")
		if err != nil {
			t.Fatalf("replay %s: %v %s", n.ID, err, errOut)
		}
		if !strings.HasSuffix(out, "hash="+hash+"\n") {
			t.Fatalf("%s replays to another hash:\n%s", n.ID, out)
		}
		if !strings.Contains(out, `"tierWeights":[1,2,4,10,16]`) || strings.Contains(out, `"tierWeights":[1,2,4,99`) || strings.Contains(out, "RESERVE") {
			t.Fatalf("%s: the seed config is not the bootstrap node's:\n%s", n.ID, out)
		}
	}
}

// TestSkewedLeaderClock makes a node whose wall clock is 60 s ahead the
// leader: cluster time advances only by the real time elapsed.
func TestSkewedLeaderClock(t *testing.T) {
	c := cluster.New(t)
	c.BootWith(3, func(_ int, n *cluster.Node) {
		if n.ID == "n2" {
			n.Args = []string{"--test-clock-offset", "60s"}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tick := func() int64 {
		t.Helper()
		if _, err := c.Apply(ctx, tenantCmd("t", pb.Tier_FREE, 0)); err != nil {
			t.Fatal(err)
		}
		c.WaitConverged(10 * time.Second)
		st, err := c.WaitLeader(10 * time.Second).Status()
		if err != nil {
			t.Fatal(err)
		}
		return st.ClusterTimeMs
	}
	t0, r0 := tick(), time.Now()
	if _, err := c.WaitLeader(10*time.Second).Client().TransferLeadership(ctx, &clusterpb.TransferLeadershipRequest{Id: "n2"}); err != nil {
		t.Fatal(err)
	}
	if l := c.WaitLeader(10 * time.Second); l.ID != "n2" {
		t.Fatalf("leader is %s", l.ID)
	}
	time.Sleep(time.Second)
	t1 := tick()
	elapsed := time.Since(r0).Milliseconds()
	if d := t1 - t0; d < 0 || d > elapsed+200 {
		t.Fatalf("cluster time moved %d ms in %d ms of real time under the skewed leader", d, elapsed)
	}
	t.Logf("cluster time moved %d ms in %d ms of real time (leader clock +60s)", t1-t0, elapsed)
}

// TestCorruptSnapshotRefused flips one byte of a node's newest snapshot:
// the node refuses to start and names the file; it never falls back to an
// older snapshot. Then the guide's "use the previous snapshot": with the
// corrupt one moved aside, the node starts from the older snapshot and
// the log after it (which still reaches back) and holds what it held.
func TestCorruptSnapshotRefused(t *testing.T) {
	c := snapshottedNode(t, "1000", 5, 2)
	n := c.Nodes[0]
	index, hash := c.WaitConverged(10 * time.Second)
	st, err := n.Status()
	if err != nil {
		t.Fatal(err)
	}
	jobs, tenants := st.Jobs, st.Tenants
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	// The snapshot plus the log rebuild exactly the state at shutdown.
	out, errOut, err := c.Run("replay", "--data-dir", n.DataDir)
	if want := fmt.Sprintf("index=%d hash=%s\n", index, hash); err != nil || out != want {
		t.Fatalf("replay: %q (%v %s), want %q", out, err, errOut, want)
	}
	// A clean restart starts from the snapshot.
	n.Start()
	c.WaitConverged(20 * time.Second)
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(n.Log(), "restored state from snapshot") {
		t.Fatal("the restart did not restore the snapshot")
	}
	snaps, _ := filepath.Glob(filepath.Join(n.DataDir, "snapshots", "*", "state.bin"))
	sort.Strings(snaps)
	if len(snaps) == 0 {
		t.Fatal("no snapshot files")
	}
	newest := newestSnapshot(t, snaps)
	b, _ := os.ReadFile(newest)
	b[len(b)/2] ^= 0x40
	os.WriteFile(newest, b, 0o644)
	n.Start()
	err, exited := n.Wait(20 * time.Second)
	if !exited || err == nil {
		t.Fatalf("the node started on a corrupt snapshot (exited %v, err %v)", exited, err)
	}
	if !strings.Contains(n.Log(), newest) || !strings.Contains(n.Log(), "unusable") {
		t.Fatalf("the error does not name %s:\n%s", newest, n.Log()[max(0, len(n.Log())-1500):])
	}

	// Move the corrupt snapshot aside and start from the previous one.
	if len(snaps) != 2 {
		t.Fatalf("%d snapshots retained, want 2", len(snaps))
	}
	quarantine := filepath.Join(n.DataDir, "snapshots-quarantine")
	os.MkdirAll(quarantine, 0o755)
	if err := os.Rename(filepath.Dir(newest), filepath.Join(quarantine, filepath.Base(filepath.Dir(newest)))); err != nil {
		t.Fatal(err)
	}
	older := filepath.Base(filepath.Dir(snaps[0]))
	if snaps[0] == newest {
		older = filepath.Base(filepath.Dir(snaps[1]))
	}
	mark := len(n.Log())
	n.Start()
	c.WaitLeader(20 * time.Second)
	if log := n.Log()[mark:]; !strings.Contains(log, "restored state from snapshot: id="+older) {
		t.Fatalf("the node did not start from the older snapshot %s:\n%s", older, log[max(0, len(log)-1500):])
	}
	st, err = n.Status()
	if err != nil || st.AppliedIndex <= index || st.Jobs != jobs || st.Tenants != tenants {
		t.Fatalf("restarted from the older snapshot: %v %v; before: index %d, %d jobs, %d tenants", st, err, index, jobs, tenants)
	}
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	// The older snapshot plus the log give the state the node had.
	out, errOut, err = c.Run("replay", "--data-dir", n.DataDir, "--until", fmt.Sprint(index))
	if want := fmt.Sprintf("index=%d hash=%s\n", index, hash); err != nil || out != want {
		t.Fatalf("replay --until %d: %q (%v %s), want %q", index, out, err, errOut, want)
	}
}

// newestSnapshot picks the snapshot file of the highest index from paths
// like .../snapshots/TERM-INDEX-MILLIS/state.bin.
func newestSnapshot(t *testing.T, paths []string) string {
	best, bestIndex := "", uint64(0)
	for _, p := range paths {
		var term, index, ms uint64
		fmt.Sscanf(filepath.Base(filepath.Dir(p)), "%d-%d-%d", &term, &index, &ms)
		if index >= bestIndex {
			best, bestIndex = p, index
		}
	}
	return best
}

// TestUnknownVersionStopsNodes proposes an entry of an unknown envelope
// version: every node stops with a non-zero exit naming the index, and a
// restarted node stops on it again rather than skip it.
func TestUnknownVersionStopsNodes(t *testing.T) {
	c := cluster.Start(t, 3, "--unsafe-debug")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Apply(ctx, tenantCmd("a", pb.Tier_FREE, 0)); err != nil {
		t.Fatal(err)
	}
	leader := c.WaitLeader(10 * time.Second)
	resp, err := leader.Client().Apply(ctx, &clusterpb.ApplyRequest{Commands: []*clusterpb.Command{tenantCmd("b", pb.Tier_FREE, 0)}, UnsafeVersion: 99})
	if err == nil {
		t.Fatalf("the bad entry was applied: %v", resp)
	}
	// Every node that hears the entry committed stops on it, naming it. A
	// follower learns of a commit from the leader's next AppendEntries: one
	// that had not when the leader stopped goes on without applying it (no
	// leader is left to tell it), and is stopped here.
	var bad uint64
	var running []*cluster.Node
	for _, n := range c.Nodes {
		err, exited := n.Wait(20 * time.Second)
		if !exited {
			running = append(running, n)
			continue
		}
		if err == nil {
			t.Fatalf("%s exited without an error", n.ID)
		}
		i := strings.Index(n.Log(), "log entry ")
		if !strings.Contains(n.Log(), "unknown command version 99") || i < 0 {
			t.Fatalf("%s did not name the entry:\n%s", n.ID, n.Log()[max(0, len(n.Log())-1500):])
		}
		var at uint64
		if _, err := fmt.Sscanf(n.Log()[i:], "log entry %d", &at); err != nil || (bad != 0 && at != bad) {
			t.Fatalf("%s stopped on entry %d (%v), another on %d", n.ID, at, err, bad)
		}
		bad = at
	}
	if bad == 0 {
		t.Fatal("no node stopped on the entry")
	}
	for _, n := range running {
		st, err := n.Status()
		if err != nil || st.AppliedIndex >= bad {
			t.Fatalf("%s runs on past the bad entry %d: %v %v", n.ID, bad, st, err)
		}
		t.Logf("%s had not heard entry %d committed (applied %d); stopping it", n.ID, bad, st.AppliedIndex)
		n.Stop()
	}
	// Restarted, a majority elects a leader, commits up to the bad entry,
	// and the leader stops on it again. Its follower may stop too, or may
	// not have heard that the entry committed before the leader stopped:
	// then it waits, alone, without applying past the entry. Nobody skips.
	restarted := c.Nodes[:2]
	for _, n := range restarted {
		n.Start()
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && len(c.Running()) == len(restarted) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // time for the other to stop as well, if it heard
	stopped := 0
	for _, n := range restarted {
		if !n.Running() {
			last := n.Log()[strings.LastIndex(n.Log(), "==== start"):]
			if err := n.ExitErr(); err == nil || !strings.Contains(last, fmt.Sprintf("log entry %d cannot be applied", bad)) {
				t.Fatalf("restarted %s exited (%v) without stopping on entry %d again:\n%s", n.ID, err, bad, n.Log()[max(0, len(n.Log())-1500):])
			}
			stopped++
			continue
		}
		st, err := n.Status()
		if err != nil {
			t.Fatalf("restarted %s runs but does not answer: %v", n.ID, err)
		}
		if st.AppliedIndex >= bad {
			t.Fatalf("restarted %s applied index %d: it skipped the bad entry %d", n.ID, st.AppliedIndex, bad)
		}
	}
	if stopped == 0 {
		t.Fatalf("no restarted node reached the bad entry %d in 30 s", bad)
	}
}

// entriesOver reads from a node's /metrics how many entries it proposed
// with more than n commands (n a bucket bound of barista_entry_commands).
func entriesOver(t *testing.T, httpAddr string, n int) float64 {
	t.Helper()
	m, err := cluster.Scrape("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return m["barista_entry_commands_count"] - m[fmt.Sprintf(`barista_entry_commands_bucket{le="%d"}`, n)]
}
