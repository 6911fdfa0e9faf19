package test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
	"github.com/baristahq/barista/test/cluster"
	"github.com/baristahq/barista/worker"
)

// startFakeWorkers runs n in-process agents with fake jobs against every
// node of the cluster; they stop when the test ends.
func startFakeWorkers(t *testing.T, c *cluster.Cluster, n int, size sfq.Size, runner worker.Runner, observe func(worker.Observation)) []*worker.Agent {
	t.Helper()
	var servers []string
	for _, node := range c.Nodes {
		servers = append(servers, node.GRPCAddr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var agents []*worker.Agent
	for i := range n {
		a, err := worker.New(worker.Config{ID: fmt.Sprintf("fake-%s-%d", size, i), Size: worker.Size(size.String()), Servers: servers,
			Dial: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, Runner: runner, Observer: observe, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
		wg.Add(1)
		go func() { defer wg.Done(); a.Run(ctx) }()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	return agents
}

// TestFakeWorkersRunJobs: jobs submitted through any node are dispatched to
// in-process workers and complete, each with the event sequence queued,
// assigned, started, completed.
func TestFakeWorkersRunJobs(t *testing.T) {
	c := cluster.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := pb.NewAdminClient(c.Nodes[0].Conn())
	for _, tn := range []*pb.UpsertTenantRequest{{Name: "gold", Tier: pb.Tier_GOLD.Enum()}, {Name: "free", Tier: pb.Tier_FREE.Enum()}} {
		if _, err := admin.UpsertTenant(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	startFakeWorkers(t, c, 4, sfq.MD, worker.FakeRunner{Plan: func(a *pb.Assign) worker.FakeSpec {
		return worker.FakeSpec{Duration: 20 * time.Millisecond, CPU: 300 * time.Millisecond}
	}}, nil)
	const jobs = 40
	for i := range jobs {
		tenant := []string{"gold", "free"}[i%2]
		if _, err := pb.NewClientClient(c.Nodes[i%3].Conn()).Submit(ctx, &pb.SubmitRequest{Tenant: tenant, Size: pb.Size_SM, EstCostMs: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	client := pb.NewClientClient(c.Nodes[1].Conn())
	deadline := time.Now().Add(60 * time.Second)
	for {
		list, err := client.ListJobs(ctx, &pb.ListJobsRequest{State: "completed", PageSize: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Jobs) == jobs {
			for _, j := range list.Jobs {
				if j.CpuMs != 300 || j.Attempt != 1 {
					t.Errorf("job %d: cpu %d attempt %d", j.JobId, j.CpuMs, j.Attempt)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs completed", len(list.Jobs), jobs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Every job's events, in order.
	s, err := client.WatchEvents(ctx, &pb.WatchEventsRequest{FromSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[uint64][]string{}
	for n := 0; n < jobs*4; n++ {
		ev, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		kinds[ev.JobId] = append(kinds[ev.JobId], ev.Kind)
	}
	for id, k := range kinds {
		if fmt.Sprint(k) != "[queued assigned started completed]" {
			t.Errorf("job %d events %v", id, k)
		}
	}
	if len(kinds) != jobs {
		t.Errorf("events of %d jobs", len(kinds))
	}
}

// TestIdleWorkersAndDrain: idle workers add nothing to the log; a drained
// worker gets no job while another does, and gets one once undrained.
func TestIdleWorkersAndDrain(t *testing.T) {
	// The log is compared before and after 2 idle seconds: no clock tick
	// may come in between.
	c := cluster.Start(t, 3, "--config", configFile(t, quietClock))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := pb.NewAdminClient(c.Nodes[0].Conn()).UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "acme", Tier: pb.Tier_GOLD.Enum()}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	ran := map[uint64]string{}
	observe := func(who string) func(worker.Observation) {
		return func(o worker.Observation) {
			if o.What == "started" {
				mu.Lock()
				ran[o.Job] = who
				mu.Unlock()
			}
		}
	}
	startFakeWorkers(t, c, 5, sfq.MD, worker.FakeRunner{}, nil)
	time.Sleep(time.Second)
	before, _ := c.WaitConverged(10 * time.Second)
	time.Sleep(2 * time.Second)
	after, _ := c.WaitConverged(10 * time.Second)
	if after != before {
		t.Fatalf("5 idle workers grew the log from %d to %d in 2 s", before, after)
	}
	// Two more workers: one drained before it connects.
	workers := pb.NewWorkerClient(c.Nodes[1].Conn())
	if _, err := workers.Drain(ctx, &pb.DrainRequest{WorkerId: "drained-0", Create: true}); err != nil {
		t.Fatal(err)
	}
	var servers []string
	for _, n := range c.Nodes {
		servers = append(servers, n.GRPCAddr)
	}
	for _, id := range []string{"drained-0", "open-0"} {
		a, err := worker.New(worker.Config{ID: id, Size: worker.SizeLG, Servers: servers, Observer: observe(id),
			Dial: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, Runner: worker.FakeRunner{}})
		if err != nil {
			t.Fatal(err)
		}
		actx, acancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); a.Run(actx) }()
		t.Cleanup(func() { acancel(); <-done })
	}
	client := pb.NewClientClient(c.Nodes[2].Conn())
	var ids []uint64
	for range 5 {
		r, err := client.Submit(ctx, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_LG, EstCostMs: 10})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.JobId)
	}
	waitAll := func() {
		for _, id := range ids {
			deadline := time.Now().Add(20 * time.Second)
			for {
				j, err := client.GetJob(ctx, &pb.GetJobRequest{JobId: id})
				if err == nil && j.State == "completed" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("job %d: %v %v", id, j, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	waitAll()
	mu.Lock()
	for id, who := range ran {
		if who != "open-0" {
			t.Errorf("job %d ran on %s", id, who)
		}
	}
	mu.Unlock()
	list, err := workers.ListWorkers(ctx, &pb.ListWorkersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, w := range list.Workers {
		states[w.WorkerId] = w.State
	}
	if states["drained-0"] != "drained" || states["open-0"] != "idle" || len(list.Workers) != 7 {
		t.Fatalf("workers: %v", states)
	}
	// Undrained, it works again: drain the other one and submit more.
	if _, err := workers.Drain(ctx, &pb.DrainRequest{WorkerId: "drained-0", Undrain: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := workers.Drain(ctx, &pb.DrainRequest{WorkerId: "open-0"}); err != nil {
		t.Fatal(err)
	}
	ids = ids[:0]
	for range 3 {
		r, _ := client.Submit(ctx, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_LG, EstCostMs: 10})
		ids = append(ids, r.JobId)
	}
	waitAll()
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if ran[id] != "drained-0" {
			t.Errorf("after undrain, job %d ran on %q", id, ran[id])
		}
	}
}

// slowFakes runs each fake job for 100 ms at its estimated CPU.
func slowFakes() worker.Runner {
	return worker.FakeRunner{Plan: func(a *pb.Assign) worker.FakeSpec {
		return worker.FakeSpec{Duration: 100 * time.Millisecond, CPU: time.Duration(a.EstCostMs) * time.Millisecond}
	}}
}
