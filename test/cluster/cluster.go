// Package cluster starts real barista server processes on 127.0.0.1 ports
// chosen at run time, for multi-process tests. Every process it starts is
// killed by PID when the test ends, whatever the outcome; node logs are
// shown when a test fails.
package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/internal/proc"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/worker/runner"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// Binary returns the barista binary to run: $BARISTA_BIN, or one built
// once per test process from this module.
func Binary(t testing.TB) string {
	t.Helper()
	if b := os.Getenv("BARISTA_BIN"); b != "" {
		return b
	}
	buildOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "barista-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "barista")
		cmd := exec.Command("go", "build", "-o", builtBin, "./cmd/barista")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

var helpers sync.Map // package path -> *helperBuild

type helperBuild struct {
	once sync.Once
	path string
	err  error
}

// Helper builds (once per test process) a helper program of this module,
// e.g. "./test/testdata/burn", and returns the binary's path.
func Helper(t testing.TB, pkg string) string {
	t.Helper()
	v, _ := helpers.LoadOrStore(pkg, &helperBuild{})
	hb := v.(*helperBuild)
	hb.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			hb.err = err
			return
		}
		dir, err := os.MkdirTemp("", "barista-helper-")
		if err != nil {
			hb.err = err
			return
		}
		hb.path = filepath.Join(dir, filepath.Base(pkg))
		cmd := exec.Command("go", "build", "-o", hb.path, pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			hb.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if hb.err != nil {
		t.Fatal(hb.err)
	}
	return hb.path
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago and
// that this process has not handed out before. Ports come from below the
// usual ephemeral range (32768 and up on Linux), so an outbound
// connection's source port cannot take one between the pick and the
// server's bind.
func FreePort(t testing.TB) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 200 {
		p := 20000 + rand.IntN(12000)
		if portsGiven[p] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		l.Close()
		portsGiven[p] = true
		return p
	}
	for range 200 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !portsGiven[p] {
			portsGiven[p] = true
			return p
		}
	}
	t.Fatal("no free TCP port on 127.0.0.1")
	return 0
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// Cluster is a set of server processes.
type Cluster struct {
	T       testing.TB
	Bin     string
	Dir     string
	Nodes   []*Node
	Workers []*Worker
	// Args are added to every node's command line.
	Args []string
	// Token, if set, is sent by every connection the harness makes.
	Token string
	// TLS, if set, is used by every gRPC connection the harness makes.
	TLS *tls.Config
	// Host, if set, gives the address a node (by ID) listens on, with
	// ports 7000 (Raft), 7001 (gRPC) and 7002 (HTTP), instead of
	// 127.0.0.1 and free ports; Wrap, if set, is a command prefix that
	// runs its process (e.g. in a network namespace). Both are called
	// once per Add and start.
	Host func(id string) string
	Wrap func(id string) []string

	procs proc.Set
	// cgroups holds the cgroups of the workers' runs (each worker's
	// --cgroup-parent is a child of it), made at the first worker's start
	// and removed with everything in it at cleanup, whatever the workers'
	// end; nil where the host gives no cgroup v2 (cgOnce made it).
	cgroups *runner.Cgroups
	cgOnce  sync.Once
}

// cgroupSeq numbers the clusters' cgroups of one test process.
var cgroupSeq atomic.Uint64

// cgroupParent is the cgroup the runs of worker id go in, "" where the
// host gives none (the worker then finds that out itself).
func (c *Cluster) cgroupParent(id string) string {
	c.cgOnce.Do(func() {
		cg, err := runner.OpenCgroups(runner.CgroupConfig{Parent: fmt.Sprintf("barista-test-%d-%d", os.Getpid(), cgroupSeq.Add(1))})
		if err != nil {
			c.T.Logf("the workers' runs get no cgroup of the harness's: %v", err)
			return
		}
		c.cgroups = cg
	})
	if c.cgroups == nil {
		return ""
	}
	return filepath.Join(c.cgroups.Dir(), id)
}

// Node is one server process (running or not).
type Node struct {
	c        *Cluster
	ID       string
	DataDir  string
	RaftAddr string
	GRPCAddr string
	HTTPAddr string
	// Args are added to this node's command line at every start.
	Args []string
	// Process is the node's process (LogPath is its log).
	proc.Process

	mu sync.Mutex
	cc *grpc.ClientConn
}

// New returns an empty cluster whose processes are all killed when the
// test ends.
func New(t testing.TB, args ...string) *Cluster {
	c := &Cluster{T: t, Bin: Binary(t), Dir: t.TempDir(), Args: args}
	t.Cleanup(c.cleanup)
	return c
}

// Start starts n nodes: the first bootstraps, the others join it, and it
// waits until every node sees the same leader.
func Start(t testing.TB, n int, args ...string) *Cluster {
	c := New(t, args...)
	c.Boot(n)
	return c
}

// Boot adds and starts n nodes: the first bootstraps, the others join it,
// and it waits until they all are voters.
func (c *Cluster) Boot(n int) { c.BootWith(n, nil) }

// BootWith is Boot with setup, if not nil, called on each node (i counts
// from 0) before it starts, to give it arguments or a data directory of
// its own.
func (c *Cluster) BootWith(n int, setup func(i int, node *Node)) {
	for i := 1; i <= n; i++ {
		node := c.Add(fmt.Sprintf("n%d", i))
		if setup != nil {
			setup(i-1, node)
		}
		if i == 1 {
			node.Start("--bootstrap")
			c.WaitLeader(20 * time.Second)
		} else {
			node.Start("--join", c.Nodes[0].GRPCAddr)
		}
	}
	c.WaitVoters(n, 30*time.Second)
}

// Add creates a node with fresh ports and data directory (not started).
func (c *Cluster) Add(id string) *Node {
	n := &Node{c: c, ID: id, DataDir: filepath.Join(c.Dir, id)}
	if c.Host != nil {
		// A node of its own address uses fixed ports.
		host := c.Host(id)
		n.RaftAddr, n.GRPCAddr, n.HTTPAddr = host+":7000", host+":7001", host+":7002"
	} else {
		n.RaftAddr = fmt.Sprintf("127.0.0.1:%d", FreePort(c.T))
		n.GRPCAddr = fmt.Sprintf("127.0.0.1:%d", FreePort(c.T))
		n.HTTPAddr = fmt.Sprintf("127.0.0.1:%d", FreePort(c.T))
	}
	n.LogPath = filepath.Join(c.Dir, id+".log")
	c.Nodes = append(c.Nodes, n)
	return n
}

func (c *Cluster) cleanup() {
	c.procs.KillAll()
	for _, n := range c.Nodes {
		n.Process.Wait(10 * time.Second)
		n.closeConn()
	}
	for _, w := range c.Workers {
		w.Wait(10 * time.Second)
	}
	if c.cgroups != nil {
		if err := c.cgroups.RemoveAll(10 * time.Second); err != nil {
			c.T.Errorf("removing the workers' cgroups: %v", err)
		}
	}
	if c.T.Failed() {
		for _, n := range c.Nodes {
			c.T.Logf("---- log of %s (last 60 lines)\n%s", n.ID, Tail(n.LogPath, 60))
		}
		for _, w := range c.Workers {
			c.T.Logf("---- log of worker %s (last 40 lines)\n%s", w.ID, Tail(w.LogPath, 40))
		}
	}
}

// command builds the command line of a process of member id.
func (c *Cluster) command(id string, args []string) *exec.Cmd { return c.commandOf(c.Bin, id, args) }

// commandOf is command with bin instead of the cluster's binary.
func (c *Cluster) commandOf(bin, id string, args []string) *exec.Cmd {
	if c.Wrap == nil {
		return exec.Command(bin, args...)
	}
	w := c.Wrap(id)
	return exec.Command(w[0], append(append(w[1:len(w):len(w)], bin), args...)...)
}

// Tail returns the last lines of a file.
func Tail(path string, lines int) string { return proc.Tail(path, lines) }

// Start launches the node's process with its standard flags, the
// cluster's and node's extra arguments, and args.
func (n *Node) Start(args ...string) {
	n.c.T.Helper()
	full := []string{"server", "--node-id", n.ID, "--data-dir", n.DataDir, "--raft-addr", n.RaftAddr,
		"--grpc-addr", n.GRPCAddr, "--http-addr", n.HTTPAddr, "--log-level", "debug", "--insecure-dev"}
	full = append(append(append(full, n.c.Args...), n.Args...), args...)
	if err := n.Process.Start(n.c.command(n.ID, full), false, &n.c.procs); err != nil {
		n.c.T.Fatalf("starting %s: %v", n.ID, err)
	}
}

// Kill sends SIGKILL and waits for the process to exit.
func (n *Node) Kill() {
	n.Signal(syscall.SIGKILL)
	n.Process.Wait(10 * time.Second)
	n.closeConn()
}

// Stop sends SIGTERM (a clean shutdown) and waits up to 30 s.
func (n *Node) Stop() error {
	n.Signal(syscall.SIGTERM)
	if !n.Process.Wait(30 * time.Second) {
		n.c.T.Errorf("%s did not stop within 30s of SIGTERM (its goroutines are in its log)", n.ID)
		n.Signal(syscall.SIGQUIT) // the Go runtime dumps every goroutine
		if !n.Process.Wait(5 * time.Second) {
			n.Kill()
		}
	}
	n.closeConn()
	return n.ExitErr()
}

// Wait waits for the process to exit on its own and returns its error.
func (n *Node) Wait(timeout time.Duration) (error, bool) {
	ok := n.Process.Wait(timeout)
	return n.ExitErr(), ok
}

// quickReconnect redials a node that refused a connection within 50 ms,
// growing to at most 1 s: the tests ask nodes that are still starting, or
// were just restarted, and gRPC's own backoff (1 s, growing to 2 min)
// would make each such test wait for it.
var quickReconnect = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
	MinConnectTimeout: 5 * time.Second,
})

// Conn returns a (cached) gRPC connection to the node.
func (n *Node) Conn() *grpc.ClientConn {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cc == nil {
		cc, err := newClient(n.GRPCAddr, n.c.Token, n.c.TLS)
		if err != nil {
			n.c.T.Fatal(err)
		}
		n.cc = cc
	}
	return n.cc
}

func (n *Node) closeConn() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cc != nil {
		n.cc.Close()
		n.cc = nil
	}
}

// Client returns a node service client.
func (n *Node) Client() clusterpb.NodeClient { return clusterpb.NewNodeClient(n.Conn()) }

// Status asks the node for its status (2 s timeout).
func (n *Node) Status() (*clusterpb.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return n.Client().Status(ctx, &clusterpb.StatusRequest{})
}

// Followers returns the nodes other than leader, in order.
func (c *Cluster) Followers(leader *Node) []*Node {
	var out []*Node
	for _, n := range c.Nodes {
		if n != leader {
			out = append(out, n)
		}
	}
	return out
}

// Running returns the nodes whose process is alive.
func (c *Cluster) Running() []*Node {
	var out []*Node
	for _, n := range c.Nodes {
		if n.Running() {
			out = append(out, n)
		}
	}
	return out
}

// WaitLeader waits until every running node reports the same leader, and
// returns it.
func (c *Cluster) WaitLeader(timeout time.Duration) *Node {
	c.T.Helper()
	var last string
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		leader := ""
		agree := true
		for _, n := range c.Running() {
			st, err := n.Status()
			if err != nil || st.LeaderId == "" || (leader != "" && st.LeaderId != leader) {
				agree = false
				if err != nil {
					last = err.Error()
				}
				break
			}
			leader = st.LeaderId
		}
		if agree && leader != "" {
			for _, n := range c.Nodes {
				if n.ID == leader && n.Running() {
					if st, err := n.Status(); err == nil && st.State == "leader" {
						return n
					}
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.T.Fatalf("no agreed leader within %s (last error: %s)", timeout, last)
	return nil
}

// WaitVoters waits until the leader's configuration has n voters.
func (c *Cluster) WaitVoters(n int, timeout time.Duration) {
	c.T.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		leader := c.WaitLeader(timeout)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := leader.Client().ListPeers(ctx, &clusterpb.ListPeersRequest{})
		cancel()
		if err == nil {
			voters := 0
			for _, p := range resp.Peers {
				if p.Voter {
					voters++
				}
			}
			if voters == n {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.T.Fatalf("the cluster did not reach %d voters within %s", n, timeout)
}

// WaitConverged waits until every running node reports the same applied
// index and state hash, and returns them.
func (c *Cluster) WaitConverged(timeout time.Duration) (uint64, string) {
	c.T.Helper()
	deadline := time.Now().Add(timeout)
	var report string
	for time.Now().Before(deadline) {
		index, hash, ok, r := c.Converged()
		if ok {
			return index, hash
		}
		report = r
		time.Sleep(100 * time.Millisecond)
	}
	c.T.Fatalf("nodes did not converge within %s: %s", timeout, report)
	return 0, ""
}

// Converged reports whether every running node answers with the same
// applied index and state hash, and says what each answered.
func (c *Cluster) Converged() (index uint64, hash string, ok bool, report string) {
	var b bytes.Buffer
	ok = true
	for i, n := range c.Running() {
		st, err := n.Status()
		if err != nil {
			ok = false
			fmt.Fprintf(&b, "%s: %v; ", n.ID, err)
			continue
		}
		fmt.Fprintf(&b, "%s: index %d hash %.12s; ", n.ID, st.AppliedIndex, st.StateHash)
		if i == 0 {
			index, hash = st.AppliedIndex, st.StateHash
		} else if st.AppliedIndex != index || st.StateHash != hash {
			ok = false
		}
	}
	return index, hash, ok && hash != "", b.String()
}

// Apply proposes commands through any running node, retrying on
// unavailability until the context ends.
func (c *Cluster) Apply(ctx context.Context, cmds ...*clusterpb.Command) (*clusterpb.ApplyResponse, error) {
	var lastErr error
	for attempt := 0; ; attempt++ {
		nodes := c.Running()
		if len(nodes) == 0 {
			return nil, fmt.Errorf("no node running")
		}
		n := nodes[attempt%len(nodes)]
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := n.Client().Apply(actx, &clusterpb.ApplyRequest{Commands: cmds})
		cancel()
		if err == nil {
			return resp, nil
		}
		if c := status.Code(err); c != codes.Unavailable && c != codes.DeadlineExceeded && c != codes.Canceled {
			return nil, err
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (last error: %v)", ctx.Err(), lastErr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Run runs the barista binary with args and returns its stdout, stderr
// and exit error.
func (c *Cluster) Run(args ...string) (string, string, error) {
	var out, errb bytes.Buffer
	cmd := exec.Command(c.Bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// Dial connects to addr with an optional bearer token and TLS config.
func Dial(t testing.TB, addr, token string, tlsCfg *tls.Config) *grpc.ClientConn {
	t.Helper()
	cc, err := newClient(addr, token, tlsCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// newClient connects to addr, with TLS if tlsCfg is set and the bearer
// token if one is given, redialling quickly.
func newClient(addr, token string, tlsCfg *tls.Config) (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if tlsCfg != nil {
		creds = credentials.NewTLS(tlsCfg)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds), quickReconnect}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(tokenCreds(token)))
	}
	return grpc.NewClient(addr, opts...)
}

// Bearer sends token with every call of a connection.
func Bearer(token string) grpc.DialOption { return grpc.WithPerRPCCredentials(tokenCreds(token)) }

type tokenCreds string

func (t tokenCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(t)}, nil
}

func (tokenCreds) RequireTransportSecurity() bool { return false }
