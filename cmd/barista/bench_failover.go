package main

// The failover scenario of bench.

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/worker"
)

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func benchFailover(ctx context.Context, o *benchOpts) ([]benchResult, error) {
	reps := 5
	if o.quick {
		reps = 3
	}
	lc, _, cc, err := benchLeader(ctx, o, "failover", 3, 10)
	if err != nil {
		return nil, err
	}
	defer lc.stop()
	if err := preload(ctx, cc, 10, 20_000); err != nil {
		return nil, err
	}
	cc.Close()
	// Only an assignment whose Ready was sent after the kill counts.
	var lastAssigned atomic.Pointer[[2]time.Time] // ready sent, assigned
	observe := func(ob worker.Observation) {
		if ob.What == "assigned" {
			lastAssigned.Store(&[2]time.Time{ob.At.Add(-ob.Wait), ob.At})
		}
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	fakeWorkers(wctx, lc.servers(), 50, observe, func(*pb.Assign) worker.FakeSpec {
		return worker.FakeSpec{Duration: 20 * time.Millisecond, CPU: 20 * time.Millisecond}
	})
	// A prober submits every 5 ms to every live node, recording successes.
	// Only a submit sent after the kill counts: an answer in flight from
	// the old leader says nothing of the failover.
	var lastAccepted atomic.Pointer[[2]time.Time] // sent, acknowledged
	var conns []*grpc.ClientConn
	for i := range lc.nodes {
		c, _ := lc.dial(i)
		conns = append(conns, c)
		defer c.Close()
	}
	for i := range conns {
		go func() {
			client := pb.NewClientClient(conns[i])
			for k := 0; wctx.Err() == nil; k++ {
				sctx, cancel := context.WithTimeout(wctx, 10*time.Second)
				sent := time.Now()
				_, err := client.Submit(sctx, &pb.SubmitRequest{Tenant: benchTenant(0), Size: pb.Size_SM, EstCostMs: 10, Payload: benchPayload})
				cancel()
				if err == nil {
					lastAccepted.Store(&[2]time.Time{sent, time.Now()})
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	var toSubmit, toDispatch []time.Duration
	for range reps {
		time.Sleep(2 * time.Second)
		victim, err := lc.leader(ctx)
		if err != nil {
			return nil, err
		}
		killed := time.Now()
		lc.kill(victim)
		var sub, disp time.Duration
		for sub == 0 || disp == 0 {
			if time.Since(killed) > 30*time.Second {
				return nil, fmt.Errorf("no recovery within 30 s of the leader kill")
			}
			if a := lastAccepted.Load(); sub == 0 && a != nil && a[0].After(killed) {
				sub = a[1].Sub(killed)
			}
			if a := lastAssigned.Load(); disp == 0 && a != nil && a[0].After(killed) {
				disp = a[1].Sub(killed)
			}
			time.Sleep(5 * time.Millisecond)
		}
		toSubmit, toDispatch = append(toSubmit, sub), append(toDispatch, disp)
		if err := lc.startNode(victim); err != nil {
			return nil, err
		}
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err = lc.waitCaughtUp(cctx, victim)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("the restarted node did not catch up: %w", err)
		}
	}
	maxOf := func(d []time.Duration) time.Duration {
		m := d[0]
		for _, x := range d {
			m = max(m, x)
		}
		return m
	}
	ms := func(d time.Duration) float64 { return round(float64(d.Microseconds()) / 1000) }
	return []benchResult{{Scenario: "failover", P50Ms: ms(median(toSubmit)),
		Params: map[string]any{"repetitions": reps, "nodes": 3, "raft_timeouts": "500ms"},
		Results: map[string]any{
			"submit_median_ms": ms(median(toSubmit)), "submit_max_ms": ms(maxOf(toSubmit)),
			"dispatch_median_ms": ms(median(toDispatch)), "dispatch_max_ms": ms(maxOf(toDispatch)),
		}}}, nil
}
