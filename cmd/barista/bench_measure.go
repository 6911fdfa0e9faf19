package main

// Measurements for bench: latency percentiles, CPU profiles, server CPU
// and memory, and the Raft and stage metrics scraped from a server.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baristahq/barista/web"
	"github.com/baristahq/barista/worker"
)

// latencies collects durations from many goroutines.
// assignWatch counts the Assigns a bench's workers observe while
// measuring is set, and their latencies.
type assignWatch struct {
	measuring atomic.Bool
	assigned  atomic.Int64
	lat       latencies
}

// observe is the workers' Observer.
func (a *assignWatch) observe(ob worker.Observation) {
	if ob.What == "assigned" && a.measuring.Load() {
		a.assigned.Add(1)
		a.lat.add(ob.Wait)
	}
}

type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) { l.mu.Lock(); l.d = append(l.d, d); l.mu.Unlock() }

func (l *latencies) reset() { l.mu.Lock(); l.d = l.d[:0]; l.mu.Unlock() }

func (l *latencies) pct(q float64) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	sort.Slice(l.d, func(i, j int) bool { return l.d[i] < l.d[j] })
	return float64(l.d[int(q*float64(len(l.d)-1))].Microseconds()) / 1000
}

// profileWindow records CPU profiles of every server (name.nX.pprof,
// the target node marked) and of this process (name.bench.pprof) for d,
// when --profile is set; call the returned function before reading them.
func profileWindow(o *benchOpts, lc *localCluster, target int, name string, d time.Duration) func() {
	if o.profile == "" {
		return func() {}
	}
	var wg sync.WaitGroup
	for i, n := range lc.nodes {
		file := name + "." + n.id
		if i == target {
			file += "-target"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", n.http, max(1, int(d.Seconds()))))
			if err != nil {
				return
			}
			defer resp.Body.Close()
			if f, err := os.Create(filepath.Join(o.profile, file+".pprof")); err == nil {
				io.Copy(f, resp.Body)
				f.Close()
			}
		}()
	}
	if f, err := os.Create(filepath.Join(o.profile, name+".bench.pprof")); err == nil {
		if pprof.StartCPUProfile(f) == nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(d)
				pprof.StopCPUProfile()
				f.Close()
			}()
		} else {
			f.Close()
		}
	}
	return wg.Wait
}

func round(v float64) float64 { return float64(int64(v*100+0.5)) / 100 }

// rss is a process's resident set size in bytes.
func rss(pid int) int64 { return procStatus(pid, "VmRSS") }

// clockTick is the unit of /proc/PID/stat's CPU times (USER_HZ, 100 on
// Linux).
const clockTick = 10 * time.Millisecond

// serverCPU is the CPU time (user and system) every server of lc has
// used so far, read from /proc/PID/stat: the cluster's CPU, without the
// load generator's.
func (lc *localCluster) serverCPU() time.Duration {
	var total time.Duration
	for _, n := range lc.nodes {
		total += procCPU(n.PID())
	}
	return total
}

// procCPU is the CPU time (user and system) process pid has used so far,
// read from /proc/PID/stat (0 if it cannot be read).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command's ")" start at field 3 (state);
	// utime and stime are fields 14 and 15.
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0
	}
	user, _ := strconv.ParseInt(f[11], 10, 64)
	sys, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(user+sys) * clockTick
}

// cpuPer is CPU time per operation, in µs.
func cpuPer(cpu time.Duration, ops int64) float64 {
	if ops == 0 {
		return 0
	}
	return round(float64(cpu.Microseconds()) / float64(ops))
}

// procStatus reads a kB field of /proc/PID/status, in bytes (0 if absent).
func procStatus(pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// scrapeMetrics reads the named unlabelled metrics from one scrape of a
// server's /metrics (0 for a metric it does not find).
func scrapeMetrics(addr string, names ...string) []float64 {
	out := make([]float64, len(names))
	m, _ := web.Scrape(context.Background(), "http://"+addr+"/metrics", "")
	for i, name := range names {
		out[i] = m[name]
	}
	return out
}

// raftStats samples a server's commit counters; since reports the mean
// entry commit time (propose to applied result) and commands per entry
// between two samples.
type raftStats struct {
	at                                         time.Time
	proposeSum, proposeCount, cmdSum, cmdCount float64
}

func sampleRaft(addr string) raftStats {
	m := scrapeMetrics(addr, "barista_raft_propose_seconds_sum", "barista_raft_propose_seconds_count",
		"barista_entry_commands_sum", "barista_entry_commands_count")
	return raftStats{time.Now(), m[0], m[1], m[2], m[3]}
}

func (a raftStats) since(b raftStats, into map[string]any) {
	if n := a.proposeCount - b.proposeCount; n > 0 {
		into["commit_mean_ms"] = round((a.proposeSum - b.proposeSum) / n * 1000)
		into["entries_per_s"] = round(n / a.at.Sub(b.at).Seconds())
	}
	if n := a.cmdCount - b.cmdCount; n > 0 {
		into["cmds_per_entry"] = round((a.cmdSum - b.cmdSum) / n)
	}
}

// stageStats samples a leader's barista_dispatch_stage_seconds: per
// "path/stage", the count, the sum and the cumulative bucket counts by
// upper bound.
type stageStats map[string]*stageHist

type stageHist struct {
	count, sum float64
	buckets    map[float64]float64
}

var stageSeries = regexp.MustCompile(`^barista_dispatch_stage_seconds_(bucket|sum|count)\{path="([a-z]+)",stage="([a-z]+)"(?:,le="([^"]+)")?\}$`)

func sampleStages(addr string) stageStats {
	out := stageStats{}
	m, _ := web.Scrape(context.Background(), "http://"+addr+"/metrics", "")
	for key, v := range m {
		g := stageSeries.FindStringSubmatch(key)
		if g == nil {
			continue
		}
		name := g[2] + "/" + g[3]
		h := out[name]
		if h == nil {
			h = &stageHist{buckets: map[float64]float64{}}
			out[name] = h
		}
		switch g[1] {
		case "count":
			h.count = v
		case "sum":
			h.sum = v
		default:
			if le, err := strconv.ParseFloat(g[4], 64); err == nil {
				h.buckets[le] = v
			}
		}
	}
	return out
}

// since reports, per stage with observations between b and a, their
// count, mean and the bucket bound at or under which 99 % of them fell
// (ms), under into["stages"].
func (a stageStats) since(b stageStats, into map[string]any) {
	stages := map[string]any{}
	for name, h := range a {
		prev := b[name]
		if prev == nil {
			prev = &stageHist{buckets: map[float64]float64{}}
		}
		n := h.count - prev.count
		if n <= 0 {
			continue
		}
		var les []float64
		for le := range h.buckets {
			les = append(les, le)
		}
		sort.Float64s(les)
		p99 := math.Inf(1)
		for _, le := range les {
			if h.buckets[le]-prev.buckets[le] >= 0.99*n {
				p99 = le
				break
			}
		}
		st := map[string]any{"n": n, "mean_ms": round((h.sum - prev.sum) / n * 1000)}
		if !math.IsInf(p99, 1) {
			st["p99_at_most_ms"] = round(p99 * 1000)
		}
		stages[name] = st
	}
	if len(stages) > 0 {
		into["stages"] = stages
	}
}
