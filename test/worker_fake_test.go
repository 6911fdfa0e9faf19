package test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "barista/proto"
	"barista/rpc/agent"
	"barista/sfq"
	"barista/test/cluster"
)

// startFakeWorkers runs n in-process agents with fake jobs against every
// node of the cluster; they stop when the test ends.
func startFakeWorkers(t *testing.T, c *cluster.Cluster, n int, size sfq.Size, runner agent.Runner, observe func(agent.Observation)) []*agent.Agent {
	t.Helper()
	var servers []string
	for _, node := range c.Nodes {
		servers = append(servers, node.GRPCAddr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var agents []*agent.Agent
	for i := range n {
		a, err := agent.New(agent.Config{ID: fmt.Sprintf("fake-%s-%d", size, i), Size: size, Servers: servers,
			Dial: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, Runner: runner, Observer: observe})
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
	for _, tn := range []*pb.UpsertTenantRequest{{Name: "gold", Tier: pb.Tier_GOLD}, {Name: "free", Tier: pb.Tier_FREE}} {
		if _, err := admin.UpsertTenant(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	startFakeWorkers(t, c, 4, sfq.MD, agent.FakeRunner{Plan: func(a *pb.Assign) agent.FakeSpec {
		return agent.FakeSpec{Duration: 20 * time.Millisecond, CPU: 300 * time.Millisecond}
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
