package main

// The latency scenario of bench.

import (
	"context"
	"fmt"
	"sync"
	"time"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/worker"
)

// assignTimes keeps when each job's Assign reached a worker, for one
// waiter at a time.
type assignTimes struct {
	mu   sync.Mutex
	at   map[uint64]time.Time
	wake chan struct{}
}

func (a *assignTimes) observe(ob worker.Observation) {
	if ob.What != "assigned" {
		return
	}
	a.mu.Lock()
	a.at[ob.Job] = ob.At
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// wait returns when job's Assign reached a worker, waiting at most d.
func (a *assignTimes) wait(job uint64, d time.Duration) (time.Time, error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		a.mu.Lock()
		at, ok := a.at[job]
		delete(a.at, job)
		a.mu.Unlock()
		if ok {
			return at, nil
		}
		select {
		case <-a.wake:
		case <-timer.C:
			return time.Time{}, fmt.Errorf("job %d: no worker was assigned it within %s", job, d)
		}
	}
}

// benchLatency measures, at a low load where nothing queues, each job's
// time from its submit's answer to its Assign at a worker: the two Raft
// commits (the submit's, then the dispatch's) and the hops between.
func benchLatency(ctx context.Context, o *benchOpts) ([]benchResult, error) {
	jobs, interval := 1000, 20*time.Millisecond
	if o.quick {
		jobs = 300
	}
	const tenants = 10
	lc, leader, cc, err := benchLeader(ctx, o, "latency", 3, tenants)
	if err != nil {
		return nil, err
	}
	defer lc.stop()
	defer cc.Close()
	assigned := &assignTimes{at: map[uint64]time.Time{}, wake: make(chan struct{}, 1)}
	sizes := []pb.Size{pb.Size_SM, pb.Size_MD, pb.Size_LG}
	wctx, stop := context.WithCancel(ctx)
	wg := fakeFleet(wctx, lc.servers(), 16*len(sizes), func(i int) pb.Size { return sizes[i%len(sizes)] }, assigned.observe,
		func(*pb.Assign) worker.FakeSpec { return worker.FakeSpec{} })
	defer func() { stop(); wg.Wait() }()
	time.Sleep(3 * time.Second) // connect and warm up
	var out []benchResult
	for _, via := range []string{"leader", "follower"} {
		node := leader
		if via == "follower" {
			node = (leader + 1) % len(lc.nodes)
		}
		vc, err := lc.dial(node)
		if err != nil {
			return nil, err
		}
		client := pb.NewClientClient(vc)
		var lat latencies
		var stages stageStats
		for j := range jobs + jobs/10 { // the first tenth warms up
			time.Sleep(interval)
			resp, err := client.Submit(ctx, &pb.SubmitRequest{Tenant: benchTenant(j % tenants), Size: sizes[j%len(sizes)], EstCostMs: 100, Payload: benchPayload})
			if err != nil {
				vc.Close()
				return nil, fmt.Errorf("latency via the %s: %w", via, err)
			}
			acked := time.Now()
			at, err := assigned.wait(resp.JobId, 10*time.Second)
			if err != nil {
				vc.Close()
				return nil, fmt.Errorf("latency via the %s: %w", via, err)
			}
			if j == jobs/10 {
				stages = sampleStages(lc.nodes[leader].http)
			}
			if j >= jobs/10 {
				lat.add(max(0, at.Sub(acked)))
			}
		}
		vc.Close()
		results := map[string]any{"unit": "ms from the submit's answer to the Assign's arrival at a worker"}
		sampleStages(lc.nodes[leader].http).since(stages, results)
		out = append(out, benchResult{Scenario: "latency", P50Ms: lat.pct(0.5), P99Ms: lat.pct(0.99), P999Ms: lat.pct(0.999),
			Params:  map[string]any{"via": via, "workers": 16 * len(sizes), "jobs": jobs, "interval_ms": interval.Milliseconds()},
			Results: results})
	}
	return out, nil
}
