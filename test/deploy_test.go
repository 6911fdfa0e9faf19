package test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/baristahq/barista/test/cluster"
)

// TestAdvertiseAndBootstrapNode: servers bind 0.0.0.0 and advertise
// 127.0.0.1 (a container binds everything and is reached by its name);
// all three start with one command line (--bootstrap-node n1 and every
// member in --join, as a StatefulSet does), and become one cluster whose
// members are recorded at their advertised addresses. A restarted
// bootstrap node rejoins instead of founding a second cluster.
func TestAdvertiseAndBootstrapNode(t *testing.T) {
	c := cluster.New(t)
	var join []string
	for i := 1; i <= 3; i++ {
		n := c.Add(fmt.Sprintf("n%d", i))
		raftPort, grpcPort := n.RaftAddr[strings.LastIndexByte(n.RaftAddr, ':')+1:], n.GRPCAddr[strings.LastIndexByte(n.GRPCAddr, ':')+1:]
		n.RaftAddr, n.GRPCAddr = "0.0.0.0:"+raftPort, "0.0.0.0:"+grpcPort
		n.Args = []string{"--raft-advertise", "127.0.0.1:" + raftPort, "--grpc-advertise", "127.0.0.1:" + grpcPort, "--insecure-raft",
			"--bootstrap-node", "n1", "--bootstrap-wait", "2s"}
		join = append(join, "127.0.0.1:"+grpcPort)
	}
	for _, n := range c.Nodes {
		n.Args = append(n.Args, "--join", strings.Join(join, ","))
		n.Start()
	}
	c.WaitVoters(3, 60*time.Second)
	out, errOut, err := c.Run("operator", "raft", "list-peers", "--server", join[1], "--json")
	if err != nil {
		t.Fatalf("list-peers: %v %s", err, errOut)
	}
	var resp struct {
		Peers []struct {
			ID       string `json:"id"`
			RaftAddr string `json:"raft_addr"`
			GRPCAddr string `json:"grpc_addr"`
		} `json:"peers"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil || len(resp.Peers) != 3 {
		t.Fatalf("list-peers: %v %s", err, out)
	}
	for _, p := range resp.Peers {
		if !strings.HasPrefix(p.RaftAddr, "127.0.0.1:") || !strings.HasPrefix(p.GRPCAddr, "127.0.0.1:") {
			t.Fatalf("member %s recorded at %s / %s, not its advertised addresses", p.ID, p.RaftAddr, p.GRPCAddr)
		}
	}
	if !strings.Contains(c.Nodes[0].Log(), "bootstrapped a new cluster") || strings.Contains(c.Nodes[1].Log()+c.Nodes[2].Log(), "bootstrapped a new cluster") {
		t.Fatal("n1 alone should have bootstrapped")
	}
	// The bootstrap node restarts on its data: it finds its cluster.
	c.Nodes[0].Stop()
	c.Nodes[0].Start()
	c.WaitVoters(3, 60*time.Second)
	index, hash := c.WaitConverged(30 * time.Second)
	t.Logf("one cluster at index %d hash %.12s", index, hash)
	if n := strings.Count(c.Nodes[0].Log(), "bootstrapped a new cluster"); n != 1 {
		t.Fatalf("n1 bootstrapped %d times", n)
	}

	// Binding 0.0.0.0 without an advertised address is refused, naming
	// the flag.
	m := c.Add("n9")
	m.RaftAddr = "0.0.0.0:" + m.RaftAddr[strings.LastIndexByte(m.RaftAddr, ':')+1:]
	m.Start("--insecure-raft", "--bootstrap")
	if err, exited := m.Wait(20 * time.Second); !exited || err == nil || !strings.Contains(m.Log(), "set --raft-advertise") {
		t.Fatalf("a 0.0.0.0 Raft address without --raft-advertise: exited %v, %v\n%s", exited, err, m.Log())
	}
}
