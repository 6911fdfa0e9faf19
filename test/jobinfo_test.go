package test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/baristahq/barista/test/cluster"
)

// cliJSON runs the CLI with --json and decodes its one object.
func cliJSON(t *testing.T, c *cluster.Cluster, args ...string) map[string]any {
	t.Helper()
	if i := slices.Index(args, "--"); i >= 0 {
		args = slices.Insert(slices.Clone(args), i, "--json")
	} else {
		args = append(args, "--json")
	}
	out, errOut, err := c.Run(args...)
	if err != nil {
		t.Fatalf("barista %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("barista %s printed %q: %v", strings.Join(args, " "), out, err)
	}
	return m
}

// submitCLI submits a job by the CLI and returns its ID and the real
// time just before and just after the call.
func submitCLI(t *testing.T, c *cluster.Cluster, tenant string, argv ...string) (uint64, time.Time, time.Time) {
	t.Helper()
	before := time.Now()
	m := cliJSON(t, c, append([]string{"submit", "--server", c.Servers(), "--tenant", tenant, "--size", "sm", "--cost", "1s", "--"}, argv...)...)
	after := time.Now()
	id, _ := m["job_id"].(float64)
	if id == 0 {
		t.Fatalf("submit printed %v", m)
	}
	return uint64(id), before, after
}

// wallOf reads an RFC 3339 time of a JSON object.
func wallOf(t *testing.T, m map[string]any, key string) time.Time {
	t.Helper()
	s, _ := m[key].(string)
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("%s is %q (%v) in %v", key, s, err, m)
	}
	return at
}

// within reports whether at lies in [from-slack, to+slack].
func within(at, from, to time.Time, slack time.Duration) bool {
	return !at.Before(from.Add(-slack)) && !at.After(to.Add(slack))
}

// TestWallTimeAcrossClusterRestart: cluster time pauses while no leader
// runs, so after the whole cluster was stopped for a few seconds it lags
// the wall clock; the wall time a job and its events show is the
// leader's clock when they happened (within 1 s of the real time), and
// their cluster time, shown apart, is not. A job submitted before the
// stop keeps its wall time through the restart (replicated state).
func TestWallTimeAcrossClusterRestart(t *testing.T) {
	c := cluster.Start(t, 3)
	if _, _, err := c.Run("tenant", "set", "acme", "--server", c.Servers(), "--tier", "gold"); err != nil {
		t.Fatal(err)
	}
	first, b1, a1 := submitCLI(t, c, "acme", "true")

	const pause = 4 * time.Second
	for _, n := range c.Nodes {
		if err := n.Stop(); err != nil {
			t.Logf("%s: %v", n.ID, err)
		}
	}
	stopped := time.Now()
	// The pause is what is tested: real time passes while no node runs.
	time.Sleep(pause)
	for _, n := range c.Nodes {
		n.Start()
	}
	c.WaitLeader(30 * time.Second)
	t.Logf("cluster down for %s", time.Since(stopped).Round(time.Millisecond))

	second, b2, a2 := submitCLI(t, c, "acme", "true")
	job := cliJSON(t, c, "job", fmt.Sprint(second), "--server", c.Servers(), "--tenant", "acme")
	wall := wallOf(t, job, "submitted_at")
	if !within(wall, b2, a2, time.Second) {
		t.Errorf("job %d: submitted_at %s, but it was submitted between %s and %s (real clock)",
			second, wall.Format(time.RFC3339Nano), b2.Format(time.RFC3339Nano), a2.Format(time.RFC3339Nano))
	}
	cms, ok := job["cluster_submitted_at_ms"].(float64)
	if !ok {
		t.Fatalf("job %d has no cluster_submitted_at_ms: %v", second, job)
	}
	if lag := b2.Sub(time.UnixMilli(int64(cms))); lag < pause-time.Second {
		t.Errorf("job %d: cluster time %d lags the real clock by %s only; the cluster was down %s", second, int64(cms), lag, pause)
	} else {
		t.Logf("job %d: wall %s, cluster time %s behind", second, wall.Format(time.RFC3339Nano), lag.Round(time.Millisecond))
	}

	// The web page says how far cluster time is behind.
	resp, err := http.Get("http://" + c.WaitLeader(10*time.Second).HTTPAddr + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if m := regexp.MustCompile(`\(cluster time ([0-9.]+)s behind wall time: it loses elections and stops of the whole cluster\)`).FindSubmatch(body); m == nil {
		t.Errorf("the web page does not say that cluster time is behind:\n%s", body)
	} else if lag, _ := strconv.ParseFloat(string(m[1]), 64); lag < (pause - time.Second).Seconds() {
		t.Errorf("the web page says cluster time is %ss behind; the cluster was down %s", m[1], pause)
	}

	// The job submitted before the stop kept its wall time.
	old := cliJSON(t, c, "job", fmt.Sprint(first), "--server", c.Servers(), "--tenant", "acme")
	if w := wallOf(t, old, "submitted_at"); !within(w, b1, a1, time.Second) {
		t.Errorf("job %d: submitted_at %s after the restart, submitted between %s and %s", first, w, b1, a1)
	}

	// jobs shows the same wall time.
	out, errOut, err := c.Run("jobs", "--server", c.Servers(), "--tenant", "acme", "--json", "--oldest-first")
	if err != nil {
		t.Fatalf("jobs: %v %s", err, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("jobs printed %d lines:\n%s", len(lines), out)
	}
	var listed map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &listed); err != nil {
		t.Fatal(err)
	}
	if listed["submitted_at"] != job["submitted_at"] || listed["cluster_submitted_at_ms"] != job["cluster_submitted_at_ms"] {
		t.Errorf("jobs shows %v / %v, job shows %v / %v", listed["submitted_at"], listed["cluster_submitted_at_ms"], job["submitted_at"], job["cluster_submitted_at_ms"])
	}

	// watch: the queued event of the second job carries the same wall
	// time, and its cluster time apart.
	watch := exec.Command(c.Bin, "watch", "--server", c.Servers(), "--tenant", "acme", "--from", "1", "--json")
	stdout, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		watch.Process.Kill()
		watch.Wait()
	}()
	events := make(chan map[string]any)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev map[string]any
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				events <- ev
			}
		}
	}()
	timeout := time.After(30 * time.Second)
	for {
		var ev map[string]any
		select {
		case ev = <-events:
		case <-timeout:
			t.Fatal("watch never showed the queued event of the second job")
		}
		if ev == nil {
			t.Fatal("watch ended before the queued event of the second job")
		}
		if ev["job_id"] != float64(second) || ev["kind"] != "queued" {
			continue
		}
		if ev["at"] != job["submitted_at"] || ev["cluster_at_ms"] != job["cluster_submitted_at_ms"] {
			t.Errorf("queued event at %v (cluster %v), job submitted at %v (cluster %v)", ev["at"], ev["cluster_at_ms"], job["submitted_at"], job["cluster_submitted_at_ms"])
		}
		break
	}
}

// TestJobOutputAndWorker: a real worker runs a job that writes more than
// 4 KiB to stdout and a line to stderr. The ended job keeps the worker
// that ran it, its stderr tail and the last 4 KiB of its stdout (cut at a
// character boundary); the full output is in the worker's log directory.
func TestJobOutputAndWorker(t *testing.T) {
	c := cluster.Start(t, 1, "--config", configFile(t, workerTimeouts))
	if _, _, err := c.Run("tenant", "set", "acme", "--server", c.Servers(), "--tier", "gold"); err != nil {
		t.Fatal(err)
	}
	w := c.AddWorker("w-out", "sm")
	w.Start("")
	// 1,500 lines of 10 bytes ("€€0000\n" without the first digit): the
	// 4 KiB cut falls inside a "€", which the tail drops.
	script := `i=0; while [ $i -lt 1500 ]; do printf '€€%03d\n' $((i % 1000)); i=$((i+1)); done; echo 'to stderr' >&2`
	id, _, _ := submitCLI(t, c, "acme", "sh", "-c", script)
	waitFor(t, 60*time.Second, "the job completes", func() (bool, string) {
		out, _, err := c.Run("job", fmt.Sprint(id), "--server", c.Servers(), "--tenant", "acme", "--json")
		return err == nil && strings.Contains(out, `"state":"completed"`), out
	})
	job := cliJSON(t, c, "job", fmt.Sprint(id), "--server", c.Servers(), "--tenant", "acme")

	var full strings.Builder
	for i := range 1500 {
		fmt.Fprintf(&full, "€€%03d\n", i%1000)
	}
	want := full.String()[full.Len()-4096:]
	for len(want) > 0 && !utf8.RuneStart(want[0]) {
		want = want[1:]
	}
	if len(want) != 4094 {
		t.Fatalf("the expected tail is %d bytes; the script no longer cuts inside a character", len(want))
	}
	if job["worker_id"] != "w-out" {
		t.Errorf("worker_id %q, want w-out", job["worker_id"])
	}
	if job["stdout_tail"] != want {
		got, _ := job["stdout_tail"].(string)
		t.Errorf("stdout_tail has %d bytes (%q...), want the last %d: %q...", len(got), got[:min(len(got), 20)], len(want), want[:20])
	}
	if job["stderr_tail"] != "to stderr\n" {
		t.Errorf("stderr_tail %q", job["stderr_tail"])
	}
	if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(job["ended_at"])); err != nil {
		t.Errorf("ended_at %v: %v", job["ended_at"], err)
	}
	if ms, _ := job["cluster_ended_at_ms"].(float64); ms <= 0 {
		t.Errorf("cluster_ended_at_ms %v", job["cluster_ended_at_ms"])
	}

	// The text form shows the worker and both tails.
	text, errOut, err := c.Run("job", fmt.Sprint(id), "--server", c.Servers(), "--tenant", "acme")
	if err != nil {
		t.Fatalf("job: %v %s", err, errOut)
	}
	for _, s := range []string{"worker", "w-out", "stdout (tail):\n" + want, "stderr (tail):\nto stderr\n"} {
		if !strings.Contains(text, s) {
			t.Errorf("barista job does not show %q:\n%s", s[:min(len(s), 40)], text)
		}
	}

	// The full output is on the worker's disk.
	log, err := os.ReadFile(filepath.Join(w.LogDir, fmt.Sprintf("job-%d-attempt-1.log", id)))
	if err != nil {
		t.Fatal(err)
	}
	// Both pipes are copied to it as they are read: the stderr line is
	// whole, but may come before the last of stdout.
	if strings.Replace(string(log), "to stderr\n", "", 1) != full.String() {
		t.Errorf("the worker's log holds %d bytes (%q...), want all %d of stdout and the stderr line", len(log), log[:min(len(log), 20)], full.Len()+len("to stderr\n"))
	}
}
