// Package nodetest holds what the in-process tests of the packages that
// serve a node (rpc, web) need to run one: the configuration of a
// one-node cluster on free loopback ports, proposing commands and
// waiting for conditions. Only tests import it.
package nodetest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/sfq"
)

// Config returns the configuration of node n1 bootstrapping a one-node
// cluster on free loopback ports, with short election timeouts, and the
// listener for its gRPC address.
func Config(t testing.TB) (raftnode.Config, net.Listener) {
	t.Helper()
	raftLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	raftAddr := raftLis.Addr().String()
	raftLis.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := raftnode.DefaultConfig()
	cfg.ID, cfg.DataDir, cfg.RaftAddr, cfg.GRPCAddr, cfg.Bootstrap = "n1", t.TempDir(), raftAddr, lis.Addr().String(), true
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
	return cfg, lis
}

// WaitFor polls cond until it holds, failing the test after timeout.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Propose applies commands on node and fails the test on a refusal.
func Propose(t testing.TB, node *raftnode.Node, cmds ...*clusterpb.Command) []fsm.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, res, err := node.Propose(ctx, cmds)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Code != fsm.OK {
			t.Fatalf("command %d refused: %s", i, r.Msg)
		}
	}
	return res
}

// ClockMoves waits until the cluster time of the applied entries has
// moved past that of the last one, proposing entries that change nothing
// (each is stamped with the time), so that what was eligible was so for a
// while.
func ClockMoves(t testing.TB, node *raftnode.Node) {
	t.Helper()
	start, _ := node.FSM.Clock()
	for {
		if now, _ := node.FSM.Clock(); now > start {
			return
		}
		Propose(t, node, &clusterpb.Command{Cmd: &clusterpb.Command_GrantLeases{GrantLeases: &clusterpb.GrantLeases{}}})
	}
}

// SubmitOne creates tenant acme (gold, once) and queues one md job of it.
func SubmitOne(t testing.TB, node *raftnode.Node) sfq.JobID {
	t.Helper()
	Propose(t, node, &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD}}})
	res := Propose(t, node, &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_MD, EstCostMs: 1000}}})
	return res[0].Job
}

// SubmitMany queues count sm jobs of tenant, 500 a log entry.
func SubmitMany(t testing.TB, node *raftnode.Node, tenant string, count int) {
	t.Helper()
	for count > 0 {
		k := min(count, 500)
		cmds := make([]*clusterpb.Command, k)
		for i := range cmds {
			cmds[i] = &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: tenant, Size: pb.Size_SM, EstCostMs: 10}}}
		}
		Propose(t, node, cmds...)
		count -= k
	}
}
