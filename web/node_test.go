package web

import (
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/client"
	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/auth"
	"github.com/baristahq/barista/internal/nodetest"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/rpc"
	"github.com/baristahq/barista/sfq"
	"github.com/baristahq/barista/webhook"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Secrets of the in-process tests (at least 16 bytes).
const (
	gwAdmin = "admin-secret-0001"
	gwAcme  = "acme-secret-00001"
	gwBeta  = "beta-secret-00001"
)

// testNode is a one-node cluster, its gRPC server and its HTTP side in
// this process.
type testNode struct {
	t    testing.TB
	node *raftnode.Node
	srv  *rpc.Server
	web  *Server
	addr string
	stop func()
}

// nodeOptions configure a test node: its tokens (none: an open
// development server), its seed configuration adjusted by seed, the
// options of its gRPC server and of its HTTP side, and, if set, the
// webhook deliverer of its server.
type nodeOptions struct {
	tokens   []auth.Token
	seed     func(*fsm.Config)
	rpc      rpc.Options
	web      Options
	webhooks func(*raftnode.Node) *webhook.Deliverer
}

// startNode bootstraps a one-node cluster serving gRPC on a free
// loopback port, with short election timeouts.
func startNode(t testing.TB, o nodeOptions) *testNode {
	t.Helper()
	cfg, lis := nodetest.Config(t)
	cfg.Seed.HeartbeatIntervalMs, cfg.Seed.SelfKillAfterMs, cfg.Seed.Sched.LeaseTimeoutMs = 100, 2000, 4000
	if o.seed != nil {
		o.seed(&cfg.Seed)
	}
	node, err := raftnode.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if o.rpc.Auth, err = rpc.NewAuth(o.tokens, len(o.tokens) == 0); err != nil {
		t.Fatal(err)
	}
	if o.webhooks != nil {
		o.rpc.Webhooks = o.webhooks(node)
	}
	srv := rpc.NewServer(node, o.rpc)
	served := make(chan struct{})
	go func() { defer close(served); srv.Serve(lis) }()
	n := &testNode{t: t, node: node, srv: srv, web: New(srv, o.web), addr: lis.Addr().String()}
	var once sync.Once
	n.stop = func() {
		once.Do(func() {
			srv.Stop(5 * time.Second)
			<-served
			node.Shutdown()
		})
	}
	t.Cleanup(n.stop)
	waitFor(t, 20*time.Second, "a configured leader", func() bool { return node.IsLeader() && node.FSM.Configured() })
	return n
}

// startTestNode is startNode with tokens and seed.
func startTestNode(t testing.TB, tokens []auth.Token, seed func(*fsm.Config)) *testNode {
	t.Helper()
	return startNode(t, nodeOptions{tokens: tokens, seed: seed})
}

// serve serves the node's HTTP side on a test server.
func (n *testNode) serve() *httptest.Server {
	ts := httptest.NewServer(n.web)
	n.t.Cleanup(ts.Close)
	return ts
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	nodetest.WaitFor(t, timeout, what, cond)
}

// dial connects with a bearer token ("" sends none).
func (n *testNode) dial(token string) *grpc.ClientConn {
	n.t.Helper()
	cc, err := grpc.NewClient(n.addr, client.DialOptions(token, nil)...)
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { cc.Close() })
	return cc
}

// propose applies commands on the node and fails the test on a refusal.
func (n *testNode) propose(cmds ...*clusterpb.Command) []fsm.Result {
	n.t.Helper()
	return nodetest.Propose(n.t, n.node, cmds...)
}

// submit creates tenant acme (once) and queues one md job.
func (n *testNode) submit() sfq.JobID {
	n.t.Helper()
	return nodetest.SubmitOne(n.t, n.node)
}

// clockMoves waits until the cluster time has moved (nodetest.ClockMoves).
func (n *testNode) clockMoves() { n.t.Helper(); nodetest.ClockMoves(n.t, n.node) }

func wantStatus(t *testing.T, err error, code codes.Code, msg string) {
	t.Helper()
	if st := status.Convert(err); st.Code() != code || st.Message() != msg {
		t.Fatalf("got %v %q, want %v %q", st.Code(), st.Message(), code, msg)
	}
}
