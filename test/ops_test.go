package test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/test/cluster"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "rewrite the console's screenshots under docs/ (web-ui*.png) from the headless browser tests")

// scrape reads one metric family's samples by label value.
func scrape(t *testing.T, url, metric, label string) map[string]float64 {
	t.Helper()
	m, err := tryScrape(url, metric, label)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// scrapeMs reads a family in seconds by label value, in milliseconds.
func scrapeMs(t *testing.T, url, metric, label string) map[string]float64 {
	t.Helper()
	m := scrape(t, url, metric, label)
	for k, v := range m {
		m[k] = v * 1000
	}
	return m
}

func tryScrape(url, metric, label string) (map[string]float64, error) {
	all, err := cluster.Scrape(url)
	if err != nil {
		return nil, err
	}
	re := regexp.MustCompile(`^` + metric + `\{` + label + `="([^"]+)"\}$`)
	out := map[string]float64{}
	for k, v := range all {
		if m := re.FindStringSubmatch(k); m != nil {
			out[m[1]] = v
		}
	}
	return out, nil
}

// TestDevShares runs the README's run command (barista dev) for about 20
// s, scrapes /metrics and "barista top --once --json", and checks that the
// CPU (estimated cost) dispatched to the continuously backlogged demo
// tenants over the window is in their weight ratio within the SFQ bound
// of SPEC §8.6: |S_i/w_i - S_j/w_j| <= max_i/w_i + max_j/w_j, in each of
// its two pools (the cpu fleet's five tenants in the pool default, the
// gpu fleet's two in the pool gpu).
func TestDevShares(t *testing.T) {
	bin := cluster.Binary(t)
	base := devBasePort(0)
	dir := t.TempDir()
	var out bytes.Buffer
	dev := exec.Command(bin, "dev", "--base-port", strconv.Itoa(base), "--data-dir", dir, "--quiet", "--duration", "3m")
	dev.Stdout, dev.Stderr = &out, &out
	dev.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		dev.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- dev.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("barista dev exited with %v:\n%s", err, out.String())
			}
		case <-time.After(40 * time.Second):
			dev.Process.Kill()
			t.Errorf("barista dev did not stop within 40 s of Ctrl-C")
		}
	}()
	metrics := fmt.Sprintf("http://127.0.0.1:%d/metrics", base+80)
	weights := map[string]float64{"acme-diamond": 16, "globex-gold": 8, "initech-silver": 4, "umbrella-bronze": 2, "hooli-free": 1}
	gpuWeights := map[string]float64{"wayne-gold": 8, "stark-free": 1}
	// Warm up until every demo tenant has work dispatched.
	deadline := time.Now().Add(60 * time.Second)
	for {
		m, _ := tryScrape(metrics, "barista_dispatched_cost_seconds_total", "tenant")
		if len(m) == 7 && m["hooli-free"] > 0 && m["stark-free"] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo did not get going:\n%s", out.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
	m0 := scrapeMs(t, metrics, "barista_dispatched_cost_seconds_total", "tenant")
	time.Sleep(15 * time.Second)
	m1 := scrapeMs(t, metrics, "barista_dispatched_cost_seconds_total", "tenant")
	const maxCost = 400.0
	for _, pool := range []map[string]float64{weights, gpuWeights} {
		for a, wa := range pool {
			for b, wb := range pool {
				na, nb := (m1[a]-m0[a])/wa, (m1[b]-m0[b])/wb
				if bound := maxCost/wa + maxCost/wb; na-nb > bound {
					t.Errorf("normalised service of %s (%.0f ms per unit of weight) exceeds %s's (%.0f) by more than the SFQ bound %.0f", a, na, b, nb, bound)
				}
			}
		}
		for name, w := range pool {
			t.Logf("%-16s weight %2.0f dispatched %6.0f ms CPU in the window: %5.0f per unit of weight", name, w, m1[name]-m0[name], (m1[name]-m0[name])/w)
		}
	}
	// barista top --once --json: the contract's keys, every tenant backlogged.
	stdout, stderr, err := (&cluster.Cluster{Bin: bin}).Run("top", "--once", "--json", "--server", fmt.Sprintf("127.0.0.1:%d", base))
	if err != nil {
		t.Fatalf("top: %v %s", err, stderr)
	}
	var top struct {
		LeaderID     *string `json:"leader_id"`
		AppliedIndex *uint64 `json:"applied_index"`
		Tenants      []struct {
			Name          string   `json:"name"`
			Tier          string   `json:"tier"`
			Weight        float64  `json:"weight"`
			Queued        uint32   `json:"queued"`
			Running       *uint32  `json:"running"`
			Dispatches1m  *uint64  `json:"dispatches_1m"`
			Share         *float64 `json:"share"`
			EntitledShare *float64 `json:"entitled_share"`
			Class         string   `json:"class"`
			Ratio         *float64 `json:"ratio"`
			Eligible      bool     `json:"eligible"`
			Lag           *float64 `json:"lag_cpu_s"`
			Fairness      []struct {
				Window    string
				SpanMs    int64    `json:"span_ms"`
				ChargedMs int64    `json:"charged_ms"`
				Ratio     *float64 `json:"ratio"`
			} `json:"fairness"`
		} `json:"tenants"`
	}
	if err := json.Unmarshal([]byte(stdout), &top); err != nil || top.LeaderID == nil || top.AppliedIndex == nil || len(top.Tenants) != 7 {
		t.Fatalf("top --once --json: %v\n%s", err, stdout)
	}
	for _, tn := range top.Tenants {
		// A share is the tenant's in its pool; a pool's tenants' shares
		// add up to 1.
		w, ok := weights[tn.Name]
		if !ok {
			w = gpuWeights[tn.Name]
		}
		if tn.Running == nil || tn.Dispatches1m == nil || tn.Share == nil || tn.EntitledShare == nil || w != tn.Weight {
			t.Errorf("top line %+v lacks a key or has the wrong weight", tn)
		}
		if tn.Queued == 0 {
			t.Errorf("%s is not backlogged", tn.Name)
		}
		if d := *tn.Share - *tn.EntitledShare; d > 0.08 || d < -0.08 {
			t.Errorf("%s: share %.3f vs entitled %.3f", tn.Name, *tn.Share, *tn.EntitledShare)
		}
		// The fairness report: one class, three windows, each with a
		// ratio; a backlogged tenant has a lag. Over a minute of 200-400
		// ms jobs even the free tenant's ratio stays near 1.
		if tn.Class != "normal" || !tn.Eligible || tn.Lag == nil || tn.Ratio == nil || len(tn.Fairness) != 3 || tn.Fairness[2].Window != "1h" {
			t.Errorf("%s: class %q eligible %v lag %v ratio %v, %d windows", tn.Name, tn.Class, tn.Eligible, tn.Lag, tn.Ratio, len(tn.Fairness))
			continue
		}
		for _, w := range tn.Fairness {
			if w.Ratio == nil || *w.Ratio < 0.5 || *w.Ratio > 2 || w.ChargedMs <= 0 || w.SpanMs <= 0 {
				t.Errorf("%s %s: ratio %v, charged %d ms over %d ms", tn.Name, w.Window, w.Ratio, w.ChargedMs, w.SpanMs)
			}
		}
		t.Logf("%-16s share %.3f entitled %.3f ratio %.3f lag %+.2fs", tn.Name, *tn.Share, *tn.EntitledShare, *tn.Ratio, *tn.Lag)
	}
	// /metrics has the ratio of each demo tenant in each window.
	all, err := cluster.Scrape(metrics)
	if err != nil {
		t.Fatal(err)
	}
	ratios := 0
	for name := range weights {
		for _, w := range []string{"1m", "10m", "1h"} {
			if v, ok := all[`barista_fairness_ratio{class="normal",pool="default",tenant="`+name+`",window="`+w+`"}`]; ok && v > 0.5 && v < 2 {
				ratios++
			}
		}
	}
	if ratios != 15 {
		t.Errorf("%d barista_fairness_ratio series between 0.5 and 2, want 15", ratios)
	}
}

// TestSnapshotBackupRestore saves a snapshot of a running cluster and
// restores it into a fresh cluster: same state hash on every node.
func TestSnapshotBackupRestore(t *testing.T) {
	// Hashes taken at different times are compared: no clock tick may
	// move the clock in between.
	quiet := configFile(t, quietClock)
	a := cluster.Start(t, 3, "--config", quiet)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := startWorkload(t, ctx, a, 11)
	w.applyPairs(t, ctx, a, 200)
	_, hashA := a.WaitConverged(30 * time.Second)
	file := filepath.Join(t.TempDir(), "backup.snap")
	out, errOut, err := a.Run("operator", "snapshot", "save", file, "--server", a.Nodes[1].GRPCAddr, "--json")
	if err != nil {
		t.Fatalf("save: %v %s", err, errOut)
	}
	var saved struct {
		StateHash string `json:"state_hash"`
	}
	json.Unmarshal([]byte(out), &saved)
	if saved.StateHash != hashA {
		t.Fatalf("saved hash %s, cluster hash %s", saved.StateHash, hashA)
	}

	b := cluster.Start(t, 3, "--config", quiet)
	if _, err := b.Apply(ctx, tenantCmd("somebody-else", pb.Tier_FREE, 0)); err != nil {
		t.Fatal(err)
	}
	out, errOut, err = b.Run("operator", "snapshot", "restore", file, "--server", b.Nodes[2].GRPCAddr, "--json")
	if err != nil {
		t.Fatalf("restore: %v %s", err, errOut)
	}
	var restored struct {
		StateHash string `json:"state_hash"`
	}
	json.Unmarshal([]byte(out), &restored)
	_, hashB := b.WaitConverged(30 * time.Second)
	if restored.StateHash != hashA || hashB != hashA {
		t.Fatalf("restored cluster hash %s (reported %s), saved %s", hashB, restored.StateHash, hashA)
	}
	// A corrupt file is refused before it reaches the cluster.
	bad := filepath.Join(t.TempDir(), "bad.snap")
	data, _ := os.ReadFile(file)
	data[len(data)/3] ^= 1
	os.WriteFile(bad, data, 0o644)
	if _, errOut, err := b.Run("operator", "snapshot", "restore", bad, "--server", b.Nodes[0].GRPCAddr); err == nil || !strings.Contains(errOut, "checksum") {
		t.Fatalf("a corrupt backup was accepted: %v %s", err, errOut)
	}
}

// TestJoinAndRemoveWithCLI starts one node, joins two more with "barista
// join", removes one with remove-peer, and shows list-peers at each step.
func TestJoinAndRemoveWithCLI(t *testing.T) {
	c := cluster.New(t)
	for i := 1; i <= 3; i++ {
		c.Add(fmt.Sprintf("n%d", i))
	}
	c.Nodes[0].Start("--bootstrap")
	c.WaitLeader(20 * time.Second)
	c.Nodes[1].Start()
	c.Nodes[2].Start()
	server := c.Nodes[0].GRPCAddr
	peers := func() []string {
		t.Helper()
		out, errOut, err := c.Run("operator", "raft", "list-peers", "--server", server, "--json")
		if err != nil {
			t.Fatalf("list-peers: %v %s", err, errOut)
		}
		var resp struct {
			Peers []struct {
				ID     string `json:"id"`
				Voter  bool   `json:"voter"`
				Leader bool   `json:"leader"`
			} `json:"peers"`
		}
		json.Unmarshal([]byte(out), &resp)
		var ids []string
		for _, p := range resp.Peers {
			s := p.ID
			if p.Leader {
				s += "*"
			}
			ids = append(ids, s)
		}
		t.Logf("list-peers: %v", ids)
		return ids
	}
	if got := peers(); fmt.Sprint(got) != "[n1*]" {
		t.Fatalf("before joins: %v", got)
	}
	for _, n := range c.Nodes[1:] {
		for range 2 { // the second join is a no-op
			if out, errOut, err := c.Run("join", "--server", c.Nodes[1].GRPCAddr+","+server, "--node-id", n.ID, "--raft-addr", n.RaftAddr, "--grpc-addr", n.GRPCAddr); err != nil {
				t.Fatalf("join %s: %v %s %s", n.ID, err, out, errOut)
			}
		}
	}
	if got := peers(); fmt.Sprint(got) != "[n1* n2 n3]" {
		t.Fatalf("after joins: %v", got)
	}
	c.WaitConverged(30 * time.Second)
	if out, errOut, err := c.Run("operator", "raft", "remove-peer", "n3", "--server", c.Nodes[1].GRPCAddr); err != nil || !strings.Contains(out, "removed n3") {
		t.Fatalf("remove-peer: %v %s %s", err, out, errOut)
	}
	if got := peers(); fmt.Sprint(got) != "[n1* n2]" {
		t.Fatalf("after remove-peer: %v", got)
	}
	if _, errOut, err := c.Run("operator", "raft", "remove-peer", "n9", "--server", server); err == nil || !strings.HasPrefix(errOut, "NOT_FOUND:") {
		t.Fatalf("removing an unknown peer: %v %s", err, errOut)
	}
}

func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// TestWebPageInChromium renders the node's web page in headless Chromium:
// the tenants and members are on it, and a screenshot is taken (written to
// docs/web-ui.png with -update-screenshot). Skipped without Chromium.
func TestWebPageInChromium(t *testing.T) {
	browser := chromium()
	if browser == "" {
		t.Skip("Chromium is not installed (apt-get install chromium); .ci/run installs it")
	}
	c := cluster.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, tn := range demoTenantsForPage {
		cmds := []*clusterpb.Command{tenantCmd(tn, pb.Tier(5-i), 0)}
		for range 300 {
			cmds = append(cmds, submitCmd(tn, "", pb.Size_SM, 1000))
		}
		if _, err := c.Apply(ctx, cmds...); err != nil {
			t.Fatal(err)
		}
	}
	startFakeWorkers(t, c, 3, 0, slowFakes(), nil)
	time.Sleep(3 * time.Second) // every tenant stays backlogged meanwhile
	url := "http://" + c.Nodes[0].HTTPAddr + "/"
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--user-data-dir=" + t.TempDir()}
	dom, err := exec.CommandContext(ctx, browser, append(args, "--dump-dom", url)...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	for _, want := range append([]string{`id="tenants"`, `id="members"`, "leader", "n1", "n2", "n3"}, demoTenantsForPage...) {
		if !strings.Contains(string(dom), want) {
			t.Errorf("the rendered page lacks %q", want)
		}
	}
	shot := filepath.Join(t.TempDir(), "web-ui.png")
	if out, err := exec.CommandContext(ctx, browser, append(args, "--window-size=1100,560", "--hide-scrollbars", "--screenshot="+shot, url)...).CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, out)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil || img.Bounds().Dx() != 1100 {
		t.Fatalf("screenshot: %v %v", err, img)
	}
	if *updateScreenshot {
		screenshotDev(t, browser, args)
	}
}

// screenshotDev rewrites docs/web-ui.png from what "make run" shows: a
// "barista dev" cluster on its default ports, its demo load after three
// minutes, when the chart shows each tenant's share settled onto its
// entitlement.
func screenshotDev(t *testing.T, browser string, args []string) {
	dev := exec.Command(cluster.Binary(t), "dev", "--quiet", "--duration", "5m")
	dev.Stdout, dev.Stderr = io.Discard, io.Discard
	dev.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		syscall.Kill(-dev.Process.Pid, syscall.SIGINT)
		dev.Wait()
	}()
	time.Sleep(190 * time.Second) // the demo tenants settle to their shares, and the chart has three minutes
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	shot := filepath.Join(t.TempDir(), "web-ui.png")
	if out, err := exec.CommandContext(ctx, browser, append(args, "--window-size=1100,1040", "--hide-scrollbars", "--screenshot="+shot, "http://127.0.0.1:7480/")...).CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(shot)
	if err := os.WriteFile("../docs/web-ui.png", b, 0o644); err != nil {
		t.Fatal(err)
	}
}

var demoTenantsForPage = []string{"acme-diamond", "globex-gold", "initech-silver", "umbrella-bronze", "hooli-free"}

// TestDevStopsCleanlyOnPipeAndHangup: "make run | tee log" and Ctrl-C (the
// reader of dev's output goes away: SIGPIPE), or a closed terminal
// (SIGHUP), stop barista dev as cleanly as Ctrl-C: every child stopped,
// the temporary data removed.
func TestDevStopsCleanlyOnPipeAndHangup(t *testing.T) {
	bin := cluster.Binary(t)
	for i, how := range []string{"pipe", "hangup"} {
		t.Run(how, func(t *testing.T) {
			tmp := t.TempDir()
			base := devBasePort(500 * (i + 1))
			var cmd *exec.Cmd
			if how == "pipe" {
				// head exits after 3000 bytes of the live table.
				cmd = exec.Command("sh", "-c", fmt.Sprintf("%s dev --base-port %d | head -c 3000 >/dev/null", bin, base))
			} else {
				cmd = exec.Command(bin, "dev", "--base-port", strconv.Itoa(base), "--quiet")
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pgid := cmd.Process.Pid
			defer syscall.Kill(-pgid, syscall.SIGKILL)
			// Wait for its temporary data directory and a server in it.
			var data string
			deadline := time.Now().Add(60 * time.Second)
			for data == "" || !fileExists(filepath.Join(data, "n1", "raft.db")) {
				if time.Now().After(deadline) {
					syscall.Kill(-pgid, syscall.SIGKILL)
					cmd.Wait() // its stderr is complete
					t.Fatalf("barista dev did not start (base port %d); its stderr:\n%s", base, stderr.String())
				}
				if m, _ := filepath.Glob(filepath.Join(tmp, "barista-dev-*")); len(m) == 1 {
					data = m[0]
				}
				time.Sleep(100 * time.Millisecond)
			}
			if how == "hangup" {
				time.Sleep(2 * time.Second)
				cmd.Process.Signal(syscall.SIGHUP)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("barista dev did not stop")
			}
			// Every process of the group is gone, and the data with them.
			deadline = time.Now().Add(40 * time.Second)
			for syscall.Kill(-pgid, 0) == nil || fileExists(data) || len(pidsWith(data)) > 0 {
				if time.Now().After(deadline) {
					left, _ := filepath.Glob(filepath.Join(tmp, "*"))
					t.Fatalf("after %s: process group left %v, children left %v, data left %v", how, syscall.Kill(-pgid, 0) == nil, pidsWith(data), left)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

// devBasePort is a base port for barista dev, which listens on the 83
// ports from it: spread by the test's PID and offset, and below Linux's
// ephemeral range (32768 and up), where a connection of an earlier test
// may hold a port.
func devBasePort(offset int) int {
	return 20000 + (os.Getpid()+offset)%12000
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
