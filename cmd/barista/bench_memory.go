package main

// The memory scenario of bench.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// benchMemory measures the resident bytes per queued job of a server,
// for jobs without a payload and with benchPayload, each on a cluster of
// its own.
func benchMemory(ctx context.Context, o *benchOpts) ([]benchResult, error) {
	var out []benchResult
	for _, payload := range [][]byte{nil, benchPayload} {
		r, err := benchMemoryOf(ctx, o, payload)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func benchMemoryOf(ctx context.Context, o *benchOpts, payload []byte) (benchResult, error) {
	jobs := 1_000_000
	if o.quick {
		jobs = 200_000
	}
	lc, _, cc, err := benchLeader(ctx, o, "memory", 1, 1000)
	if err != nil {
		return benchResult{}, err
	}
	defer lc.stop()
	defer cc.Close()
	time.Sleep(time.Second)
	pid := lc.nodes[0].PID()
	rss0, heap0 := rss(pid), scrapeMetrics(lc.nodes[0].http, "go_memstats_heap_inuse_bytes")[0]
	anon0 := procStatus(pid, "RssAnon")
	if err := preloadWith(ctx, cc, 1000, jobs, payload); err != nil {
		return benchResult{}, err
	}
	time.Sleep(3 * time.Second)
	rss1, heap1 := rss(pid), scrapeMetrics(lc.nodes[0].http, "go_memstats_heap_inuse_bytes")[0]
	anon1 := procStatus(pid, "RssAnon")
	if o.profile != "" {
		if resp, err := http.Get("http://" + lc.nodes[0].http + "/debug/pprof/heap?gc=1"); err == nil {
			if f, err := os.Create(filepath.Join(o.profile, fmt.Sprintf("memory-payload%d.heap.pprof", len(payload)))); err == nil {
				io.Copy(f, resp.Body)
				f.Close()
			}
			resp.Body.Close()
		}
	}
	return benchResult{Scenario: "memory", Params: map[string]any{"jobs": jobs, "tenants": 1000, "payload_bytes": len(payload)},
		Results: map[string]any{"rss_bytes_per_job": round(float64(rss1-rss0) / float64(jobs)), "heap_bytes_per_job": round((heap1 - heap0) / float64(jobs)),
			"anon_rss_bytes_per_job": round(float64(anon1-anon0) / float64(jobs)),
			"rss_mb":                 round(float64(rss1) / 1e6)}}, nil
}
