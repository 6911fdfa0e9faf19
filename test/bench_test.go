package test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	pb "barista/proto"
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
				for _, n := range c.Nodes {
					if n != leader {
						target = n
						break
					}
				}
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
