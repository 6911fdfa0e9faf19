// Package soak runs barista for a long time under steady load and checks
// that nothing grows: memory, goroutines, open files, the Raft log on
// disk and latencies must be flat once warm. `make soak` runs it (an hour
// by default); `make test` runs only the checks of the report.
package soak

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// Sample is one minute of the soak: per server and for the load.
type Sample struct {
	At      time.Duration `json:"-"`
	AtS     int64         `json:"at_s"` // At in whole seconds, for the report
	Servers []Server      `json:"servers"`
	// Submitted and Ended count jobs since the start; Queued is the
	// backlog at the sample.
	Submitted uint64 `json:"submitted"`
	Ended     uint64 `json:"ended"`
	Queued    uint64 `json:"queued"`
	// SubmitP99Ms is the p99 of a SubmitBatch round trip over the
	// minute; DispatchP99Ms the p99 of Ready→Assign on the leader.
	SubmitP99Ms   float64 `json:"submit_p99_ms"`
	DispatchP99Ms float64 `json:"dispatch_p99_ms"`
	// WorkerCPUPerJobMs is the CPU the worker processes themselves (not
	// their jobs) used over the minute, per job ended in it.
	WorkerCPUPerJobMs float64 `json:"worker_cpu_ms_per_job"`
}

// Server is one server's resources at a sample.
type Server struct {
	ID         string `json:"id"`
	RSSBytes   uint64 `json:"rss_bytes"`
	Goroutines uint64 `json:"goroutines"`
	OpenFiles  uint64 `json:"open_files"`
	RaftDB     uint64 `json:"raft_db_bytes"`
}

// Growth names each measure that grew by more than limit (0.10 for 10 %)
// from its value at the end of the warm-up (the first sample at or after
// warmup) to the mean of the last three samples. A latency is the p99 of
// one minute, which one slow moment of the machine can move several-fold,
// so latencies compare medians instead: that of the last three samples
// against that of all the samples after the warm-up, which a single slow
// minute decides neither way. Small absolute values are given slack:
// goroutines and open files may grow by 10, latencies by 5 ms.
func Growth(samples []Sample, warmup time.Duration, limit float64) []string {
	start := -1
	for i, s := range samples {
		if s.At >= warmup {
			start = i
			break
		}
	}
	if start < 0 || len(samples)-start < 4 {
		return []string{fmt.Sprintf("too few samples after the warm-up of %s: %d", warmup, len(samples)-max(start, 0))}
	}
	base, tail := samples[start], samples[len(samples)-3:]
	var out []string
	grew := func(what string, from, to, slack float64) {
		if to > from*(1+limit)+slack {
			out = append(out, fmt.Sprintf("%s grew %.1f%%: %.0f → %.0f", what, 100*(to-from)/max(from, 1), from, to))
		}
	}
	check := func(what string, from float64, to func(Sample) float64, slack float64) {
		sum := 0.0
		for _, s := range tail {
			sum += to(s)
		}
		grew(what, from, sum/float64(len(tail)), slack)
	}
	ids := map[string]bool{}
	for _, sv := range base.Servers {
		ids[sv.ID] = true
	}
	var sorted []string
	for id := range ids {
		sorted = append(sorted, id)
	}
	sort.Strings(sorted)
	for _, id := range sorted {
		get := func(s Sample) Server {
			for _, sv := range s.Servers {
				if sv.ID == id {
					return sv
				}
			}
			return Server{}
		}
		b := get(base)
		check(id+" rss", float64(b.RSSBytes), func(s Sample) float64 { return float64(get(s).RSSBytes) }, 0)
		check(id+" goroutines", float64(b.Goroutines), func(s Sample) float64 { return float64(get(s).Goroutines) }, 10)
		check(id+" open files", float64(b.OpenFiles), func(s Sample) float64 { return float64(get(s).OpenFiles) }, 10)
		check(id+" raft.db", float64(b.RaftDB), func(s Sample) float64 { return float64(get(s).RaftDB) }, 0)
	}
	median := func(from []Sample, f func(Sample) float64) float64 {
		xs := make([]float64, len(from))
		for i, s := range from {
			xs[i] = f(s)
		}
		sort.Float64s(xs)
		if n := len(xs); n%2 == 0 {
			return (xs[n/2-1] + xs[n/2]) / 2
		}
		return xs[len(xs)/2]
	}
	submit := func(s Sample) float64 { return s.SubmitP99Ms }
	dispatch := func(s Sample) float64 { return s.DispatchP99Ms }
	grew("submit p99 ms", median(samples[start:], submit), median(tail, submit), 5)
	// The dispatch p99 is read from the leader's histogram: the upper
	// bound of a bucket, and the buckets double, so it moves by 100 % at
	// a time; one bucket is its resolution, and growth is more than that.
	dis := median(samples[start:], dispatch)
	grew("dispatch p99 ms", dis, median(tail, dispatch), dis*(1-limit)+5)
	return out
}

// Load reads a report written by the soak (JSON lines).
func Load(path string) ([]Sample, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Sample
	dec := json.NewDecoder(f)
	for dec.More() {
		var s Sample
		if err := dec.Decode(&s); err != nil {
			return nil, fmt.Errorf("%s: sample %d: %w", path, len(out)+1, err)
		}
		s.At = time.Duration(s.AtS) * time.Second
		out = append(out, s)
	}
	return out, nil
}

// Table renders samples as a fixed-width table.
func Table(samples []Sample) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%6s %9s %9s %7s %9s %9s %8s", "min", "submitted", "ended", "queued", "sub_p99", "disp_p99", "wcpu/job")
	if len(samples) > 0 {
		for _, sv := range samples[0].Servers {
			fmt.Fprintf(&b, " | %-3s %7s %5s %5s %8s", sv.ID, "rss_MB", "gor", "fds", "raftdb_MB")
		}
	}
	b.WriteString("\n")
	for _, s := range samples {
		fmt.Fprintf(&b, "%6.0f %9d %9d %7d %9.1f %9.1f %8.2f", s.At.Minutes(), s.Submitted, s.Ended, s.Queued, s.SubmitP99Ms, s.DispatchP99Ms, s.WorkerCPUPerJobMs)
		for _, sv := range s.Servers {
			fmt.Fprintf(&b, " | %-3s %7.1f %5d %5d %8.1f", sv.ID, float64(sv.RSSBytes)/1e6, sv.Goroutines, sv.OpenFiles, float64(sv.RaftDB)/1e6)
		}
		b.WriteString("\n")
	}
	return b.String()
}
