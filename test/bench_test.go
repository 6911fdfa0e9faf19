package test

import (
	"context"
	"fmt"
	"sort"
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

// BenchmarkCommit measures committed commands per second on a 3-process
// cluster with 256 concurrent proposers, each sending one submit per Apply
// (one Raft entry per command; hashicorp/raft batches concurrent entries
// per fsync), through the leader and through a follower. Run with
// -benchtime 1x: each run lasts 5 s.
func BenchmarkCommit(b *testing.B) {
	c := cluster.Start(b, 3)
	ctx := context.Background()
	if _, err := c.Apply(ctx, tenantCmd("acme", pb.Tier_GOLD, 0)); err != nil {
		b.Fatal(err)
	}
	for _, via := range []string{"leader", "follower"} {
		b.Run(via, func(b *testing.B) {
			leader := c.WaitLeader(10 * time.Second)
			target := leader
			if via == "follower" {
				target = c.Followers(leader)[0]
			}
			for b.Loop() {
				ops, lat := hammer(b, target, 256, 5*time.Second)
				sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
				pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
				b.ReportMetric(ops, "cmds/s")
				b.ReportMetric(pct(0.50), "p50-ms")
				b.ReportMetric(pct(0.99), "p99-ms")
			}
		})
	}
}

func hammer(b *testing.B, n *cluster.Node, workers int, d time.Duration) (float64, []time.Duration) {
	client := n.Client()
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for i := 0; time.Now().Before(deadline); i++ {
				t := time.Now()
				_, err := client.Apply(context.Background(), &pb.ApplyRequest{Commands: []*pb.Command{submitCmd("acme", fmt.Sprintf("b%d-%d-%d", w, i, t.UnixNano()), pb.Size_SM, 1000)}})
				if err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return float64(len(lat)) / time.Since(start).Seconds(), lat
}

// BenchmarkDispatchWorkers measures dispatches per second with 1,000
// in-process workers (real gRPC streams, jobs that end at once) against a
// 3-process cluster, and the Ready-to-Assign latency each worker saw.
// Run with -benchtime 1x.
func BenchmarkDispatchWorkers(b *testing.B) {
	const workers, tenants, jobs = 1000, 100, 30_000
	c := cluster.Start(b, 3)
	ctx := context.Background()
	var setup []*pb.Command
	for i := range tenants {
		setup = append(setup, tenantCmd(fmt.Sprintf("t%03d", i), pb.Tier(1+i%5), 0))
	}
	if _, err := c.Apply(ctx, setup...); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < jobs; i += 1000 {
		var cmds []*pb.Command
		for j := i; j < i+1000; j++ {
			cmds = append(cmds, submitCmd(fmt.Sprintf("t%03d", j%tenants), "", pb.Size_SM, 1000))
		}
		if _, err := c.Apply(ctx, cmds...); err != nil {
			b.Fatal(err)
		}
	}
	var mu sync.Mutex
	var waits []time.Duration
	finished := 0
	done := make(chan struct{})
	observe := func(o agent.Observation) {
		mu.Lock()
		defer mu.Unlock()
		switch o.Kind {
		case "assigned":
			waits = append(waits, o.Wait)
		case "finished":
			finished++
			if finished == jobs {
				close(done)
			}
		}
	}
	for b.Loop() {
		start := time.Now()
		startFakeWorkersB(b, c, workers, observe)
		select {
		case <-done:
		case <-time.After(5 * time.Minute):
			b.Fatalf("only %d of %d jobs finished", finished, jobs)
		}
		elapsed := time.Since(start)
		mu.Lock()
		sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
		p := func(q float64) float64 { return float64(waits[int(q*float64(len(waits)-1))].Microseconds()) / 1000 }
		b.ReportMetric(float64(jobs)/elapsed.Seconds(), "dispatches/s")
		b.ReportMetric(p(0.5), "ready-assign-p50-ms")
		b.ReportMetric(p(0.99), "ready-assign-p99-ms")
		mu.Unlock()
	}
}

func startFakeWorkersB(b *testing.B, c *cluster.Cluster, n int, observe func(agent.Observation)) {
	var servers []string
	for _, node := range c.Nodes {
		servers = append(servers, node.GRPCAddr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range n {
		a, err := agent.New(agent.Config{ID: fmt.Sprintf("bench-%d", i), Size: sfq.MD, Servers: servers,
			Dial: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, Runner: agent.FakeRunner{}, Observer: observe})
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); a.Run(ctx) }()
	}
	b.Cleanup(func() { cancel(); wg.Wait() })
}

// BenchmarkClientSubmit measures Client.Submit with 64 concurrent clients
// (keyed submits, one job each) through the leader and through a follower.
// Run with -benchtime 1x: each run lasts 5 s.
func BenchmarkClientSubmit(b *testing.B) {
	c := cluster.Start(b, 3)
	if _, err := c.Apply(context.Background(), tenantCmd("acme", pb.Tier_GOLD, 0)); err != nil {
		b.Fatal(err)
	}
	for _, via := range []string{"leader", "follower"} {
		b.Run(via, func(b *testing.B) {
			leader := c.WaitLeader(10 * time.Second)
			target := leader
			if via == "follower" {
				target = c.Followers(leader)[0]
			}
			client := pb.NewClientClient(target.Conn())
			for b.Loop() {
				var mu sync.Mutex
				var lat []time.Duration
				var wg sync.WaitGroup
				start := time.Now()
				deadline := start.Add(5 * time.Second)
				for w := range 64 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						var mine []time.Duration
						for i := 0; time.Now().Before(deadline); i++ {
							key := fmt.Sprintf("%s-%d-%d-%d", via, w, i, start.UnixNano())
							t := time.Now()
							if _, err := client.Submit(context.Background(), &pb.SubmitRequest{Tenant: "acme", IdempotencyKey: &key, Size: pb.Size_SM, EstCostMs: 1000, Payload: []byte(`{"argv":["true"]}`)}); err != nil {
								b.Error(err)
								return
							}
							mine = append(mine, time.Since(t))
						}
						mu.Lock()
						lat = append(lat, mine...)
						mu.Unlock()
					}()
				}
				wg.Wait()
				sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
				pct := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000 }
				b.ReportMetric(float64(len(lat))/time.Since(start).Seconds(), "submits/s")
				b.ReportMetric(pct(0.5), "p50-ms")
				b.ReportMetric(pct(0.99), "p99-ms")
			}
		})
	}
}
