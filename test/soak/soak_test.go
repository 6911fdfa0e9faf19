package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/test/cluster"
	"github.com/baristahq/barista/worker/runner"
)

// env reads a setting of the soak from the environment.
func env[T any](name string, def T, parse func(string) (T, error)) T {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	x, err := parse(v)
	if err != nil {
		panic(fmt.Sprintf("%s=%q: %v", name, v, err))
	}
	return x
}

// TestSoak runs three servers and real workers under a steady load of
// SOAK_RATE jobs a second for SOAK_DURATION, with snapshots, log
// compaction and pruning running all along, and samples every server
// each minute. It fails if anything grew by more than 10 % after the
// warm-up (Growth). The report goes to SOAK_REPORT (JSON lines) and to
// the test log as a table. Only `make soak` (BARISTA_SOAK=1) runs it.
func TestSoak(t *testing.T) {
	if os.Getenv("BARISTA_SOAK") == "" {
		t.Skip("a soak run: make soak (BARISTA_SOAK=1)")
	}
	duration := env("SOAK_DURATION", time.Hour, time.ParseDuration)
	rate := env("SOAK_RATE", 300, strconv.Atoi)
	warmup := env("SOAK_WARMUP", duration/6, time.ParseDuration)
	every := env("SOAK_SAMPLE", time.Minute, time.ParseDuration)
	reportPath := env("SOAK_REPORT", filepath.Join(t.TempDir(), "soak.jsonl"), func(s string) (string, error) { return s, nil })

	cfg := filepath.Join(t.TempDir(), "barista.toml")
	os.WriteFile(cfg, []byte(`[scheduler]
job_retention = "2m"
event_retention = "2m"
dedupe_window = "2m"
`), 0o644)
	c := cluster.Start(t, 3, "--config", cfg, "--log-level", "warn", "--snapshot-threshold", "20000",
		"--snapshot-interval", "10s", "--trailing-logs", "10000", "--prune-interval", "5s")
	tenants := []string{}
	var cmds []*clusterpb.Command
	for i := range 20 {
		name := fmt.Sprintf("t%02d", i)
		tenants = append(tenants, name)
		cmds = append(cmds, &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: name, Tier: pb.Tier(1 + i%5)}}})
	}
	ctx := context.Background()
	if _, err := c.Apply(ctx, cmds...); err != nil {
		t.Fatal(err)
	}
	for i, size := range []string{"sm", "sm", "sm", "sm", "md", "md", "md", "md", "lg", "lg", "lg", "lg"} {
		w := c.AddWorker(fmt.Sprintf("w%02d", i), size)
		w.LogDir = "" // a million jobs' output files are not what this measures
		w.Args = []string{"--log-level", "warn"}
		w.Start("")
	}
	job, err := runner.EncodePayload(runner.Spec{Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}

	// The load: a batch of 100 every 100/rate seconds, through the nodes
	// in turn (followers forward).
	var submitted atomic.Uint64
	var latMu sync.Mutex
	var lat []float64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Duration(float64(time.Second) * 100 / float64(rate)))
		defer tick.Stop()
		sizes := []pb.Size{pb.Size_SM, pb.Size_SM, pb.Size_MD, pb.Size_LG}
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			req := &pb.SubmitBatchRequest{}
			for k := range 100 {
				req.Jobs = append(req.Jobs, &pb.SubmitRequest{Tenant: tenants[(n+k)%len(tenants)], Size: sizes[k%len(sizes)], EstCostMs: 10, Payload: job})
			}
			node := c.Nodes[n%len(c.Nodes)]
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			start := time.Now()
			resp, err := pb.NewClientClient(node.Conn()).SubmitBatch(cctx, req)
			cancel()
			if err != nil {
				t.Logf("submit batch via %s: %v", node.ID, err)
				continue
			}
			ok := 0
			for _, r := range resp.Results {
				if r.Error == "" {
					ok++
				}
			}
			submitted.Add(uint64(ok))
			latMu.Lock()
			lat = append(lat, float64(time.Since(start).Microseconds())/1000)
			latMu.Unlock()
		}
	}()

	report, err := os.Create(reportPath)
	if err != nil {
		t.Fatal(err)
	}
	defer report.Close()
	var samples []Sample
	began := time.Now()
	prevBuckets := map[float64]float64{}
	var prevEnded uint64
	prevWorkerCPU := workersCPUMs(c)
	for time.Since(began) < duration {
		time.Sleep(time.Until(began.Add(time.Duration(len(samples)+1) * every)))
		s := Sample{At: time.Since(began).Round(time.Second), Submitted: submitted.Load()}
		s.AtS = int64(s.At / time.Second)
		buckets := map[float64]float64{}
		for _, n := range c.Nodes {
			m, err := cluster.Scrape("http://" + n.HTTPAddr + "/metrics")
			if err != nil {
				t.Fatalf("scraping %s: %v", n.ID, err)
			}
			s.Servers = append(s.Servers, Server{ID: n.ID, RSSBytes: rss(n.PID()), Goroutines: uint64(m["go_goroutines"]),
				OpenFiles: openFiles(n.PID()), RaftDB: fileSize(filepath.Join(n.DataDir, "raft.db"))})
			if m["barista_is_leader"] == 1 {
				for k, v := range m {
					switch {
					case strings.HasPrefix(k, "barista_tier_jobs_ended_total{"):
						s.Ended += uint64(v)
					case strings.HasPrefix(k, "barista_tier_queued_jobs{"):
						s.Queued += uint64(v)
					}
				}
			}
			for k, v := range m {
				if le, ok := strings.CutPrefix(k, `barista_dispatch_latency_seconds_bucket{le="`); ok {
					if b, err := strconv.ParseFloat(strings.TrimSuffix(le, `"}`), 64); err == nil {
						buckets[b] += v
					}
				}
			}
		}
		s.DispatchP99Ms = histP99(prevBuckets, buckets) * 1000
		if cpu := workersCPUMs(c); s.Ended > prevEnded {
			s.WorkerCPUPerJobMs = (cpu - prevWorkerCPU) / float64(s.Ended-prevEnded)
			prevWorkerCPU, prevEnded = cpu, s.Ended
		}
		prevBuckets = buckets
		latMu.Lock()
		s.SubmitP99Ms, lat = p99(lat), nil
		latMu.Unlock()
		samples = append(samples, s)
		line, _ := json.Marshal(s)
		fmt.Fprintf(report, "%s\n", line)
		t.Logf("soak %s: submitted %d, ended %d, queued %d", s.At, s.Submitted, s.Ended, s.Queued)
	}
	close(stop)
	wg.Wait()
	t.Logf("soak report (%s):\n%s", reportPath, Table(samples))
	if last := samples[len(samples)-1]; last.Ended < last.Submitted*9/10 {
		t.Errorf("only %d of %d submitted jobs ended", last.Ended, last.Submitted)
	}
	for _, g := range Growth(samples, warmup, 0.10) {
		t.Error(g)
	}
}

// histP99 is the upper bound of the bucket holding the 99th percentile
// of what a cumulative histogram counted between two scrapes.
func histP99(prev, cur map[float64]float64) float64 {
	var les []float64
	for le := range cur {
		les = append(les, le)
	}
	sort.Float64s(les)
	if len(les) == 0 {
		return 0
	}
	total := cur[les[len(les)-1]] - prev[les[len(les)-1]]
	if total <= 0 {
		return 0
	}
	for _, le := range les {
		if cur[le]-prev[le] >= 0.99*total {
			if math.IsInf(le, 1) {
				return les[max(len(les)-2, 0)]
			}
			return le
		}
	}
	return les[len(les)-1]
}

func p99(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sort.Float64s(xs)
	return xs[min(len(xs)-1, len(xs)*99/100)]
}

// workersCPUMs is the user and system CPU the cluster's worker processes
// have used, in milliseconds: their own, not that of the jobs they ran
// and waited for.
func workersCPUMs(c *cluster.Cluster) float64 {
	total := 0.0
	for _, w := range c.Workers {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", w.PID()))
		if err != nil {
			continue
		}
		// The fields after the command's closing parenthesis start at the
		// third (state); utime and stime are the 14th and 15th, in ticks
		// of USER_HZ (100 on Linux).
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		total += (u + st) * 10
	}
	return total
}

func rss(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func openFiles(pid int) uint64 {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0
	}
	return uint64(len(ents))
}

func fileSize(path string) uint64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return uint64(st.Size())
}
