package test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/test/cluster"
)

// raftAttacker speaks the Raft protocol to a node's Raft port with
// hashicorp/raft's own network transport, holding no credential but what
// its stream layer presents: the attack of a program on the network.
type raftAttacker struct {
	trans *raft.NetworkTransport
}

// attackerStream is a raft.StreamLayer that dials with a TLS client
// certificate (and verifies nothing), and listens with the same
// certificate, as a node would.
type attackerStream struct {
	net.Listener
	cfg *tls.Config
}

func (s attackerStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(addr), s.cfg)
}

// newPlainAttacker speaks Raft over plain TCP.
func newPlainAttacker(t *testing.T) *raftAttacker {
	t.Helper()
	trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { trans.Close() })
	return &raftAttacker{trans: trans}
}

// newTLSAttacker speaks Raft over TLS with the certificate in dir/NAME.pem.
func newTLSAttacker(t *testing.T, dir, name string) *raftAttacker {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	trans := raft.NewNetworkTransport(attackerStream{Listener: ln, cfg: cfg}, 1, 5*time.Second, io.Discard)
	t.Cleanup(func() { trans.Close() })
	return &raftAttacker{trans: trans}
}

// Addr is the address of the attacker's own Raft listener.
func (a *raftAttacker) Addr() string { return string(a.trans.LocalAddr()) }

// appendEntries sends one AppendEntries as a leader of term would.
func (a *raftAttacker) appendEntries(target string, term, prev uint64, entries [][]byte) (*raft.AppendEntriesResponse, error) {
	req := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte(a.Addr())},
		Term:      term,
	}
	for i, data := range entries {
		req.Entries = append(req.Entries, &raft.Log{Index: prev + 1 + uint64(i), Term: term, Type: raft.LogCommand, Data: data})
		req.LeaderCommitIndex = prev + 1 + uint64(i)
	}
	var resp raft.AppendEntriesResponse
	err := a.trans.AppendEntries("victim", raft.ServerAddress(target), req, &resp)
	return &resp, err
}

// inject claims leadership of a term above the node's and appends data as
// committed entries after the node's last one: asking first for its last
// index (the response's hint), then sending the entries with no previous
// entry to match.
func (a *raftAttacker) inject(target string, term uint64, data ...[]byte) (*raft.AppendEntriesResponse, error) {
	probe, err := a.appendEntries(target, term, 0, nil)
	if err != nil {
		return probe, err
	}
	return a.appendEntries(target, term+1, probe.LastLog, data)
}

// intruderTenant is a valid log entry: a TenantUpsert envelope of the
// version this build applies.
func intruderTenant(t *testing.T) []byte {
	t.Helper()
	data, err := fsm.Encode(&clusterpb.Envelope{Version: fsm.Version, Commands: []*clusterpb.Command{
		{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "intruder", Tier: pb.Tier_DIAMOND}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// garbage is an entry no node can decode: applying it stops the node.
var garbage = []byte{0xff, 0xff, 0xff, 0xff}

// nonLoopbackIP returns an IPv4 address of this machine that is not
// loopback, or "" if it has none.
func nonLoopbackIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
			if l, err := net.Listen("tcp", ipn.IP.String()+":0"); err == nil {
				l.Close()
				return ipn.IP.String()
			}
		}
	}
	return ""
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -1
}

// TestRaftRefusesExposedAddressWithoutTLS: a server whose Raft address is
// not loopback and that has no TLS exits at once, and the refusal naming
// --insecure-raft is the only line it prints. It used to start, and any
// program that reached the port could append entries to the log.
func TestRaftRefusesExposedAddressWithoutTLS(t *testing.T) {
	c := cluster.New(t, "--config", tokenConfig(t, ""))
	var hosts []string
	if ip := nonLoopbackIP(t); ip != "" {
		hosts = append(hosts, ip)
	}
	hosts = append(hosts, "0.0.0.0")
	for i, host := range hosts {
		n := c.Add(fmt.Sprintf("n%d", i+1))
		n.RaftAddr = fmt.Sprintf("%s:%d", host, cluster.FreePort(t))
		n.Start("--bootstrap")
		err, exited := n.Wait(20 * time.Second)
		if !exited {
			t.Fatalf("a server with --raft-addr %s and no TLS is running", n.RaftAddr)
		}
		want := fmt.Sprintf("refusing to start: --raft-addr %s is not a loopback address and TLS is off, so anyone who reaches it could rewrite the replicated log; set --tls-cert, --tls-key and --tls-ca, or pass --insecure-raft (raft.insecure = true) to accept the risk\n", n.RaftAddr)
		_, out, _ := strings.Cut(n.Log(), "\n") // after the harness's own start line
		if exitCode(err) != 1 || out != want {
			t.Fatalf("--raft-addr %s: exit %v, output:\n%s\nwant exit 1 and only:\n%s", n.RaftAddr, err, out, want)
		}
	}
}

// TestInsecureRaftIsOpenToInjection: with --insecure-raft the server
// starts on a non-loopback address and warns; and its Raft port is then
// open to the attack the refusal prevents: a program with no credential
// appends a tenant to the log, then stops the node for good with an entry
// it cannot decode. This is what the other tests' attacker would do if it
// got through.
func TestInsecureRaftIsOpenToInjection(t *testing.T) {
	ip := nonLoopbackIP(t)
	if ip == "" {
		t.Skip("this machine has no non-loopback IPv4 address")
	}
	c := cluster.New(t, "--config", tokenConfig(t, ""))
	c.Token = adminToken
	n := c.Add("n1")
	n.RaftAddr = fmt.Sprintf("%s:%d", ip, cluster.FreePort(t))
	n.Start("--bootstrap", "--insecure-raft")
	c.WaitLeader(20 * time.Second)
	warning := "--insecure-raft: Raft runs without TLS on a non-loopback address; anyone who reaches it can rewrite the replicated log and stop every node: raft_addr=" + n.RaftAddr
	if !strings.Contains(n.Log(), warning) {
		t.Fatalf("no warning in the log:\n%s", n.Log())
	}
	before, err := n.Status()
	if err != nil {
		t.Fatal(err)
	}

	attacker := newPlainAttacker(t)
	resp, err := attacker.inject(n.RaftAddr, before.Term+100, intruderTenant(t))
	if err != nil || !resp.Success {
		t.Fatalf("injection over plain TCP: %v (%+v)", err, resp)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		tr, err := pb.NewAdminClient(n.Conn()).ListTenants(ctx, &pb.ListTenantsRequest{Read: &pb.ReadOptions{Stale: true}})
		cancel()
		if err == nil && len(tr.Tenants) == 1 && tr.Tenants[0].Name == "intruder" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the injected tenant did not appear: %v %v", tr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	st, err := n.Status()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := attacker.inject(n.RaftAddr, st.Term+100, garbage); err != nil {
		t.Fatalf("injecting the undecodable entry: %v", err)
	}
	err, exited := n.Wait(20 * time.Second)
	if !exited || exitCode(err) != 3 || !strings.Contains(n.Log(), "cannot be applied") {
		t.Fatalf("after the undecodable entry: exited %v, %v", exited, err)
	}
	t.Logf("with --insecure-raft, a program with no credential created a tenant and stopped the node (exit 3)")
}

// tlsFiles returns a node's server flags for the certificate dir/NAME.pem.
func tlsFlags(dir, name string) []string {
	return []string{"--tls-cert", filepath.Join(dir, name+".pem"), "--tls-key", filepath.Join(dir, name+"-key.pem"), "--tls-ca", filepath.Join(dir, "ca.pem")}
}

// TestRaftNeedsMemberCertificate: on a cluster with tokens and mutual
// TLS, a client certificate of the cluster's own CA can neither inject
// entries into any node's log (the attack of the plain-TCP test, over
// TLS), nor join as a voter, nor run as a node. The same attacker code
// with a node certificate reaches Raft. A client certificate used to be a
// member: the injection created a tenant on every node and an
// undecodable entry stopped them all.
func TestRaftNeedsMemberCertificate(t *testing.T) {
	dir := t.TempDir()
	// The nodes' last indexes are compared before and after the attack:
	// no clock tick may move them.
	c := cluster.New(t, "--config", tokenConfig(t, quietClock))
	c.Token = adminToken
	if _, errOut, err := c.Run("tls", "init", "--dir", dir, "--names", "n1,n2,n3", "--clients", "client"); err != nil {
		t.Fatalf("tls init: %v %s", err, errOut)
	}
	// A spare node certificate for the control.
	if _, errOut, err := c.Run("tls", "init", "--dir", dir, "--ca", dir, "--names", "n9", "--clients", ""); err != nil {
		t.Fatalf("tls init: %v %s", err, errOut)
	}
	pool, err := raftnode.LoadCAPool(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	c.TLS = &tls.Config{RootCAs: pool}
	for i := 1; i <= 3; i++ {
		n := c.Add(fmt.Sprintf("n%d", i))
		n.Args = tlsFlags(dir, n.ID)
	}
	c.Nodes[0].Start("--bootstrap")
	c.WaitLeader(20 * time.Second)
	c.Nodes[1].Start("--join", c.Nodes[0].GRPCAddr)
	c.Nodes[2].Start("--join", c.Nodes[0].GRPCAddr)
	c.WaitVoters(3, 60*time.Second)
	c.WaitConverged(20 * time.Second)
	before := map[string]*clusterpb.StatusResponse{}
	for _, n := range c.Nodes {
		st, err := n.Status()
		if err != nil {
			t.Fatal(err)
		}
		before[n.ID] = st
	}

	// Inject: every node refuses the client certificate in the handshake.
	attacker := newTLSAttacker(t, dir, "client")
	for _, n := range c.Nodes {
		for _, entry := range [][]byte{intruderTenant(t), garbage} {
			resp, err := attacker.inject(n.RaftAddr, before[n.ID].Term+100, entry)
			if err == nil || !strings.Contains(err.Error(), "bad certificate") {
				t.Fatalf("%s: injection with a client certificate: %v (%+v), want a bad certificate alert", n.ID, err, resp)
			}
		}
	}
	// Nothing reached any log: an entry of the attacker's term would have
	// raised the node's term, and the node's last index would have moved.
	for _, n := range c.Nodes {
		st, err := n.Status()
		if err != nil {
			t.Fatalf("%s after the attack: %v", n.ID, err)
		}
		b := before[n.ID]
		if st.Term != b.Term || st.LastLogIndex != b.LastLogIndex || st.AppliedIndex != b.AppliedIndex || st.StateHash != b.StateHash || st.Tenants != 0 {
			t.Fatalf("%s changed: term %d→%d, last index %d→%d, applied %d→%d, hash %.12s→%.12s, tenants %d",
				n.ID, b.Term, st.Term, b.LastLogIndex, st.LastLogIndex, b.AppliedIndex, st.AppliedIndex, b.StateHash, st.StateHash, st.Tenants)
		}
	}

	// Join: even with the admin token, a voter whose Raft address presents
	// the client certificate is refused before the configuration changes.
	clientCert, err := tls.LoadX509KeyPair(filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	cc := cluster.Dial(t, c.Nodes[1].GRPCAddr, adminToken, &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{clientCert}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = clusterpb.NewNodeClient(cc).Join(ctx, &clusterpb.JoinRequest{Id: "n2", RaftAddr: attacker.Addr(), GrpcAddr: "127.0.0.1:1"})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "cannot speak Raft with the joining node at "+attacker.Addr()) ||
		!strings.Contains(err.Error(), "server.default.barista") {
		t.Fatalf("join with a client certificate's Raft address: %v", err)
	}
	peers, err := clusterpb.NewNodeClient(cc).ListPeers(ctx, &clusterpb.ListPeersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range peers.Peers {
		got = append(got, p.Id+"@"+p.RaftAddr)
	}
	want := []string{"n1@" + c.Nodes[0].RaftAddr, "n2@" + c.Nodes[1].RaftAddr, "n3@" + c.Nodes[2].RaftAddr}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("peers after the refused join: %v, want %v", got, want)
	}

	// Run as a node: a server given the client certificate refuses to start.
	n4 := c.Add("n4")
	n4.Args = tlsFlags(dir, "client")
	n4.Start("--join", c.Nodes[0].GRPCAddr)
	err, exited := n4.Wait(20 * time.Second)
	wantLine := filepath.Join(dir, "client.pem") + ` is not a member certificate of cluster "default": it lacks the DNS name server.default.barista (issue one with barista tls init --names)`
	if !exited || exitCode(err) != 1 || !strings.Contains(n4.Log(), wantLine) {
		t.Fatalf("a server with a client certificate: exited %v, %v:\n%s", exited, err, n4.Log())
	}

	// The control: the same attacker code with a node certificate reaches
	// Raft. Its term is below the cluster's, so the node only answers with
	// its own term and last index, and changes nothing.
	member := newTLSAttacker(t, dir, "n9")
	for _, n := range c.Nodes[:3] {
		resp, err := member.appendEntries(n.RaftAddr, 0, 0, nil)
		if err != nil || resp.Success || resp.Term != before[n.ID].Term || resp.LastLog < before[n.ID].LastLogIndex {
			t.Fatalf("%s: AppendEntries with a node certificate: %v %+v, want a refusal carrying term %d", n.ID, err, resp, before[n.ID].Term)
		}
	}

	// The cluster works on: a write reaches every node, which all still run.
	if _, err := pb.NewAdminClient(c.Nodes[2].Conn()).UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "legit", Tier: pb.Tier_GOLD.Enum()}); err != nil {
		t.Fatal(err)
	}
	c.WaitConverged(20 * time.Second)
	for _, n := range c.Nodes[:3] {
		tr, err := pb.NewAdminClient(n.Conn()).ListTenants(ctx, &pb.ListTenantsRequest{Read: &pb.ReadOptions{Stale: true}})
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.Tenants) != 1 || tr.Tenants[0].Name != "legit" || !n.Running() {
			t.Fatalf("%s: tenants %v, running %v", n.ID, tr.Tenants, n.Running())
		}
		if st, err := n.Status(); err != nil || st.Term != before[n.ID].Term {
			t.Fatalf("%s: term %v (%v), want %d", n.ID, st.GetTerm(), err, before[n.ID].Term)
		}
	}
}
