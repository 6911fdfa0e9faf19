package main

// The submit and submit-batch scenarios of bench.

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"

	pb "github.com/baristahq/barista/proto"
)

func benchSubmit(ctx context.Context, o *benchOpts) ([]benchResult, error) {
	lc, leader, cc, err := benchLeader(ctx, o, "submit", 3, 1)
	if err != nil {
		return nil, err
	}
	defer lc.stop()
	defer cc.Close()
	d := 10 * time.Second
	if o.quick {
		d = 3 * time.Second
	}
	var out []benchResult
	var failed error
	run := func(name string, clients, target int, params map[string]any, op func(cc *grpc.ClientConn, w, i int) error) {
		var conns []*grpc.ClientConn
		for range max(1, clients/32) {
			c, _ := lc.dial(target)
			conns = append(conns, c)
		}
		prof := profileWindow(o, lc, target, fmt.Sprintf("%s-%d-%v", name, clients, params["via"]), d-time.Second)
		before := sampleRaft(lc.nodes[leader].http)
		r, lat := drive(conns, clients, d, op)
		if err := r.check(fmt.Sprintf("%s from %d clients via the %v", name, clients, params["via"])); err != nil && failed == nil {
			failed = err
		}
		ops := round(float64(r.calls) / r.elapsed.Seconds())
		results := map[string]any{}
		if name != "read-floor" {
			sampleRaft(lc.nodes[leader].http).since(before, results)
		}
		prof()
		for _, c := range conns {
			c.Close()
		}
		params["clients"], params["nodes"], params["seconds"] = clients, 3, d.Seconds()
		out = append(out, benchResult{Scenario: name, OpsPerS: ops, P50Ms: lat.pct(0.5), P99Ms: lat.pct(0.99), P999Ms: lat.pct(0.999), Params: params, Results: results})
	}
	stamp := time.Now().UnixNano()
	for _, clients := range []int{1, 64, 256} {
		for _, via := range []string{"leader", "follower"} {
			target := leader
			if via == "follower" {
				target = (leader + 1) % len(lc.nodes)
			}
			run("submit", clients, target, map[string]any{"via": via}, func(cc *grpc.ClientConn, w, i int) error {
				key := fmt.Sprintf("%s-%d-%d-%d-%d", via, clients, w, i, stamp)
				_, err := pb.NewClientClient(cc).Submit(ctx, &pb.SubmitRequest{Tenant: benchTenant(0), IdempotencyKey: &key, Size: pb.Size_SM, EstCostMs: 1000, Payload: benchPayload})
				return err
			})
		}
	}
	// The floor: a local read of one job, the same gRPC round trip with no
	// Raft behind it, from as many clients on the same machine.
	run("read-floor", 256, leader, map[string]any{"via": "leader", "rpc": "GetJob"}, func(cc *grpc.ClientConn, w, i int) error {
		_, err := pb.NewClientClient(cc).GetJob(ctx, &pb.GetJobRequest{Tenant: benchTenant(0), JobId: 1})
		return err
	})
	if failed != nil {
		return nil, failed
	}
	// Each submit figure against the floor of the same run.
	if floor := out[len(out)-1].OpsPerS; floor > 0 {
		for _, r := range out[:len(out)-1] {
			r.Results["ratio_to_read_floor"] = round(r.OpsPerS / floor)
		}
	}
	return out, nil
}

func benchSubmitBatch(ctx context.Context, o *benchOpts) ([]benchResult, error) {
	lc, leader, cc, err := benchLeader(ctx, o, "submit-batch", 3, 100)
	if err != nil {
		return nil, err
	}
	defer lc.stop()
	defer cc.Close()
	d := 10 * time.Second
	if o.quick {
		d = 5 * time.Second
	}
	const clients, size = 16, 100
	prof := profileWindow(o, lc, leader, "submit-batch", d-time.Second)
	cpu0 := lc.serverCPU()
	r, lat := drive([]*grpc.ClientConn{cc}, clients, d, func(cc *grpc.ClientConn, w, i int) error {
		req := &pb.SubmitBatchRequest{}
		for j := range size {
			key := fmt.Sprintf("b-%d-%d-%d", w, i, j)
			req.Jobs = append(req.Jobs, &pb.SubmitRequest{Tenant: benchTenant((w*size + j) % 100), IdempotencyKey: &key, Size: pb.Size_SM, EstCostMs: 1000, Payload: benchPayload})
		}
		resp, err := pb.NewClientClient(cc).SubmitBatch(ctx, req)
		if err != nil {
			return err
		}
		for _, item := range resp.Results {
			if item.Error != "" {
				return fmt.Errorf("an item of the batch was refused: %s", item.Error)
			}
		}
		return nil
	})
	if err := r.check("submit-batch"); err != nil {
		return nil, err
	}
	jobs := r.calls * size
	cpu := lc.serverCPU() - cpu0
	prof()
	return []benchResult{{Scenario: "submit-batch", OpsPerS: round(float64(jobs) / r.elapsed.Seconds()), P50Ms: lat.pct(0.5), P99Ms: lat.pct(0.99),
		Params: map[string]any{"clients": clients, "batch": size, "via": "leader", "seconds": d.Seconds()},
		Results: map[string]any{"unit": "jobs/s; latency per batch; cluster CPU (every server, from /proc) per job",
			"cluster_cpu_us_per_job": cpuPer(cpu, jobs)}}}, nil
}
