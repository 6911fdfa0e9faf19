package main

// The slots scenario of bench: 1,000 worker slots as 1,000 sessions of
// their own, as 10 workers of 100 slots and as one of 1,000 (each worker
// one stream to the leader).

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/worker"
)

// benchSlots measures, for each shape of 1,000 slots: the leader's CPU
// over a window before the workers connect, its gRPC connections and CPU
// over a window with every slot idle, then the dispatch rate and latency
// of 0-second jobs.
func benchSlots(ctx context.Context, o *benchOpts) ([]benchResult, error) {
	const slots, tenants = 1000, 100
	jobs, window := 1_000_000, 20*time.Second
	if o.quick {
		jobs, window = 200_000, 8*time.Second
	}
	var out []benchResult
	for _, per := range []int{1, 100, 1000} {
		name := fmt.Sprintf("slots-%dx%d", slots/per, per)
		lc, leader, cc, err := benchLeader(ctx, o, name, 3, tenants)
		if err != nil {
			return nil, err
		}
		// The idle leader's own CPU, before any worker.
		time.Sleep(2 * time.Second)
		pid := lc.nodes[leader].PID()
		cpu0, start := procCPU(pid), time.Now()
		time.Sleep(window)
		bareCPU, bareFor := procCPU(pid)-cpu0, time.Since(start)
		var aw assignWatch
		plan := func(a *pb.Assign) worker.FakeSpec {
			return worker.FakeSpec{CPU: time.Duration(a.EstCostMs) * time.Millisecond}
		}
		wctx, stop := context.WithCancel(ctx)
		wg, err := slotFleet(wctx, lc.servers(), slots, per, aw.observe, plan)
		if err == nil {
			err = waitSessions(ctx, cc, slots)
		}
		if err != nil {
			stop()
			lc.stop()
			return nil, err
		}
		time.Sleep(2 * time.Second) // the Hellos' entries are behind
		http := lc.nodes[leader].http
		conns := scrapeMetrics(http, `barista_connections{listener="grpc"}`)[0]
		cpu0, start = procCPU(pid), time.Now()
		time.Sleep(window)
		idleCPU, idleFor := procCPU(pid)-cpu0, time.Since(start)

		if err := preloadShaped(ctx, cc, tenants, jobs, benchPayload, nil); err != nil {
			stop()
			lc.stop()
			return nil, err
		}
		time.Sleep(2 * time.Second) // every slot busy
		aw.measuring.Store(true)
		before := sampleRaft(http)
		cpu0, start = procCPU(pid), time.Now()
		time.Sleep(window)
		aw.measuring.Store(false)
		elapsed, busyCPU := time.Since(start), procCPU(pid)-cpu0
		results := map[string]any{
			"unit":                                     "dispatches/s of 0-second jobs; latency from the slot's Ready (or the Finished that carries it) to its Assign",
			"leader_grpc_connections":                  conns,
			"leader_idle_cpu_pct_of_core":              round(100 * idleCPU.Seconds() / idleFor.Seconds()),
			"leader_idle_cpu_ms_per_min":               round(float64(idleCPU.Milliseconds()) / idleFor.Minutes()),
			"leader_cpu_ms_per_min_before_the_workers": round(float64(bareCPU.Milliseconds()) / bareFor.Minutes()),
			"leader_cpu_us_per_dispatch":               cpuPer(busyCPU, aw.assigned.Load()),
			"leader_busy_cpu_pct_of_core":              round(100 * busyCPU.Seconds() / elapsed.Seconds()),
			"worker_streams_to_the_leader":             slots / per,
		}
		sampleRaft(http).since(before, results)
		out = append(out, benchResult{Scenario: "slots", OpsPerS: round(float64(aw.assigned.Load()) / elapsed.Seconds()), P50Ms: aw.lat.pct(0.5), P99Ms: aw.lat.pct(0.99),
			Params: map[string]any{"slots": slots, "workers": slots / per, "slots_per_worker": per, "tenants": tenants, "queued": jobs, "seconds": window.Seconds()}, Results: results})
		stop()
		wg.Wait()
		cc.Close()
		lc.stop()
	}
	return out, nil
}

// slotFleet runs n slots of fake runs in this process, as n/per workers
// of per slots each (per 1: agents of one session each, as a worker of
// one slot is).
func slotFleet(ctx context.Context, servers string, n, per int, observe func(worker.Observation), plan func(*pb.Assign) worker.FakeSpec) (*sync.WaitGroup, error) {
	var wg sync.WaitGroup
	for i := range n / per {
		w, err := worker.NewWorker(worker.Config{ID: fmt.Sprintf("bench-%04d", i), Size: worker.SizeSM, Servers: strings.Split(servers, ","), MaxConcurrent: per,
			Logger: slog.New(slog.DiscardHandler), Dial: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
			Runner: worker.FakeRunner{Plan: plan}, Observer: observe})
		if err != nil {
			return nil, err
		}
		wg.Add(1)
		go func() { defer wg.Done(); w.Run(ctx) }()
	}
	return &wg, nil
}

// waitSessions waits until the leader has n worker sessions.
func waitSessions(ctx context.Context, cc *grpc.ClientConn, n int) error {
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := pb.NewWorkerClient(cc).ListWorkers(ctx, &pb.ListWorkersRequest{})
		got := 0
		if err == nil {
			for _, w := range resp.Workers {
				if w.Connected {
					got++
				}
			}
			if got == n {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d worker sessions at the leader after a minute, want %d (%v)", got, n, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
