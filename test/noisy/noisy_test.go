package noisy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/test/cluster"
)

// Noisy neighbour at the door (make noisy-neighbour): a three-server
// cluster with TLS and tokens on addresses of their own (network
// namespaces), where tenant acme — or someone without a token — floods
// each of the edge's shared resources in turn from the many networks of
// an attacker's namespace, while tenant beta submits, reads (gRPC and
// HTTP/JSON) and watches through every node at a steady rate and two
// workers run beta's jobs. For each flood it asserts that 99 % or more
// of beta's calls succeed, that every node's watch delivers each of
// beta's jobs (none lost to retention), and that its workers run them,
// and it reports beta's p50 and p99 against its quiet baseline. It runs
// only with BARISTA_NOISY=1 (as root, with iproute2): the floods take
// minutes.

func TestMain(m *testing.M) {
	if spec := os.Getenv(attackEnv); spec != "" {
		os.Exit(runAttack(spec))
	}
	os.Exit(m.Run())
}

const (
	adminToken     = "noisy-admin-s3cr3t-0001"
	acmeToken      = "noisy-acme-s3cr3t-00001"
	betaToken      = "noisy-beta-s3cr3t-00001"
	workerToken    = "noisy-worker-s3cr3t-001"
	atkWorkerToken = "noisy-atk-worker-s3cr3t"
)

const tokens = `
[[auth.tokens]]
role = "admin"
token = "` + adminToken + `"
[[auth.tokens]]
role = "client"
tenant = "acme"
token = "` + acmeToken + `"
[[auth.tokens]]
role = "client"
tenant = "beta"
token = "` + betaToken + `"
[[auth.tokens]]
role = "worker"
token = "` + workerToken + `"
[[auth.tokens]]
role = "worker"
worker_id = "atk-*"
token = "` + atkWorkerToken + `"
`

// floods are the attacks, in the order they run.
var floods = []string{"health-watches", "connections", "stalled-forward", "held-reads", "bulk-storm", "drain-loop"}

func durationEnv(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}

func TestNoisyNeighbour(t *testing.T) {
	if os.Getenv("BARISTA_NOISY") == "" {
		t.Skip("make noisy-neighbour runs it (as root, with iproute2; a few minutes)")
	}
	phase := durationEnv("NOISY_PHASE", 20*time.Second)
	only := os.Getenv("NOISY_FLOODS") // comma-separated: a subset
	net, err := newTestNet()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(net.close)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "barista.toml")
	if err := os.WriteFile(cfgPath, []byte(tokens), 0o600); err != nil {
		t.Fatal(err)
	}
	c := cluster.New(t, "--config", cfgPath, "--prune-interval", "1s")
	tlsDir := filepath.Join(dir, "tls")
	var hosts []string
	var nodes []endpoint
	ns := map[string]string{}
	for i := 1; i <= 3; i++ {
		v4, v6 := serverAddrs(i)
		hosts = append(hosts, v4, v6)
		nodes = append(nodes, endpoint{V4: v4, V6: v6, GRPC: 7001, HTTP: 7002})
		if ns[fmt.Sprintf("n%d", i)], err = net.addHost(fmt.Sprintf("n%d", i), []string{v4, v6}); err != nil {
			t.Fatal(err)
		}
	}
	addrs := attackAddrs()
	var all []string
	for _, k := range []string{"v4", "v6", "site"} {
		all = append(all, addrs[k]...)
	}
	atkNS, err := net.addHost("attacker", all)
	if err != nil {
		t.Fatal(err)
	}
	if _, errOut, err := c.Run("tls", "init", "--dir", tlsDir, "--names", "n1,n2,n3", "--hosts", strings.Join(hosts, ",")); err != nil {
		t.Fatalf("tls init: %v %s", err, errOut)
	}
	caFile := filepath.Join(tlsDir, "ca.pem")
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	tlsFor := func(ip string) *tls.Config {
		return &tls.Config{RootCAs: roots, ServerName: ip, MinVersion: tls.VersionTLS12}
	}
	c.Token, c.TLS = adminToken, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	c.Host = func(id string) string { v4, _ := serverAddrs(int(id[1] - '0')); return v4 }
	c.Wrap = func(id string) []string {
		if n, ok := ns[id]; ok {
			return net.exec(n)
		}
		return []string{"env"} // the worker: in the test's namespace
	}
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("n%d", i)
		node := c.Add(id)
		node.Args = []string{"--tls-cert", filepath.Join(tlsDir, id+".pem"), "--tls-key", filepath.Join(tlsDir, id+"-key.pem"), "--tls-ca", caFile,
			"--grpc-addr", "[::]:7001", "--grpc-advertise", nodes[i-1].grpc4(), "--http-addr", "[::]:7002"}
		if i == 1 {
			node.Start("--bootstrap")
			c.WaitLeader(30 * time.Second)
		} else {
			node.Start("--join", c.Nodes[0].GRPCAddr)
		}
	}
	c.WaitVoters(3, 60*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := pb.NewAdminClient(c.Nodes[0].Conn())
	for _, name := range []string{"acme", "beta"} {
		if _, err := admin.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: name, Tier: pb.Tier_GOLD.Enum()}); err != nil {
			t.Fatal(err)
		}
	}
	// acme's jobs stay queued (the worker is beta's), and the log keeps
	// 100,000 events: the bulk storm passes that many within seconds.
	if _, err := pb.NewClientClient(c.Nodes[0].Conn()).Pause(ctx, &pb.PauseRequest{Tenant: "acme"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := admin.GetConfig(ctx, &pb.GetConfigRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.EventRetentionCount, cfg.EventRetentionPerTenant = 100_000, 50_000
	if _, err := admin.SetConfig(ctx, &pb.SetConfigRequest{Config: cfg}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		w := c.AddWorker(fmt.Sprintf("beta-worker-%d", i+1), "sm")
		w.Token, w.Args = workerToken, []string{"--tls-ca", caFile}
		w.Start("")
	}

	b, err := newTenantB(nodes, tlsFor, betaToken, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	bctx, bstop := context.WithCancel(context.Background())
	defer bstop()
	b.run(bctx)
	time.Sleep(3 * time.Second) // connections made, the worker in
	b.setPhase("baseline")
	time.Sleep(phase)
	phases := []string{"baseline"}
	for _, flood := range floods {
		if only != "" && !strings.Contains(","+only+",", ","+flood+",") {
			continue
		}
		leader := c.WaitLeader(30 * time.Second)
		var spec attackSpec
		for i, n := range c.Nodes {
			if n == leader {
				spec.Leader = nodes[i]
			} else {
				spec.Followers = append(spec.Followers, nodes[i])
			}
		}
		spec.Flood, spec.CAFile, spec.Token, spec.WorkerToken, spec.Addrs = flood, caFile, acmeToken, atkWorkerToken, addrs
		stop := startAttacker(t, net.exec(atkNS), spec, filepath.Join(c.Dir, "attack-"+flood+".log"))
		time.Sleep(3 * time.Second) // the flood builds up
		b.setPhase(flood)
		phases = append(phases, flood)
		time.Sleep(phase)
		b.setPhase("between")
		stop()
		time.Sleep(5 * time.Second) // what the flood left behind goes
	}
	// The last jobs run, and every node's watch catches up.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		st := b.summary(phases)
		pending := false
		for _, s := range st {
			if (s.Kind == "run" || s.Kind == "watch") && s.OK < s.N {
				pending = true
			}
		}
		if !pending {
			break
		}
		time.Sleep(time.Second)
	}
	bstop()
	b.wg.Wait()
	report(t, b.summary(phases), b.lost)
}

// startAttacker runs the flood of spec in the attacker's namespace (this
// test binary again, in its attack mode) and returns what stops it.
func startAttacker(t *testing.T, prefix []string, spec attackSpec, logPath string) (stop func()) {
	t.Helper()
	js, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prefix[0], append(prefix[1:], os.Args[0], "-test.run=^$")...)
	cmd.Env = append(os.Environ(), attackEnv+"="+string(js))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); out.Close(); close(done) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		t.Logf("%s", lastLine(logPath))
	}
	t.Cleanup(stop)
	return stop
}

func lastLine(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// report prints the figures, writes them to $NOISY_REPORT (JSON) if set,
// and asserts: per flood, 99 % or more of beta's calls of each kind
// succeed, its jobs are delivered by every watch and run, and no watch
// of beta was refused for events lost to retention.
func report(t *testing.T, st []stats, lost []string) {
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "phase\tkind\tcalls\tsuccess\tp50\tp99\tp99/baseline")
	for _, s := range st {
		ratio := "-"
		if s.P99OfBaseline > 0 {
			ratio = fmt.Sprintf("%.1fx", s.P99OfBaseline)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f%%\t%s\t%s\t%s\n", s.Phase, s.Kind, s.N, 100*s.SuccessRatio, s.P50.Round(100*time.Microsecond), s.P99.Round(100*time.Microsecond), ratio)
	}
	tw.Flush()
	t.Logf("tenant beta beside each flood:\n%s", sb.String())
	fmt.Print(sb.String())
	if path := os.Getenv("NOISY_REPORT"); path != "" {
		b, _ := json.MarshalIndent(map[string]any{"stats": st, "lost": lost}, "", "  ")
		os.WriteFile(path, b, 0o644)
	}
	for _, s := range st {
		if s.N > 0 && s.SuccessRatio < 0.99 {
			t.Errorf("%s: beta's %s succeeded %d of %d (%.2f%%), want 99%% or more; errors: %v", s.Phase, s.Kind, s.OK, s.N, 100*s.SuccessRatio, s.Errors)
		}
		if s.N == 0 && s.Phase != "between" {
			t.Errorf("%s: beta made no %s", s.Phase, s.Kind)
		}
	}
	if len(lost) > 0 {
		t.Errorf("beta's watches were refused for events lost to retention: %v", lost)
	}
}
