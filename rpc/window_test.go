package rpc

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/baristahq/barista/rpc/agent"
	"github.com/baristahq/barista/sfq"
)

// frameCounter counts the HTTP/2 frames of one direction of a
// connection by type; PINGs are counted apart from PING acks.
type frameCounter struct {
	mu     sync.Mutex
	skip   int // bytes of the client preface still to pass over
	buf    []byte
	counts map[string]int
}

func (c *frameCounter) feed(p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := min(c.skip, len(p)); n > 0 {
		c.skip -= n
		p = p[n:]
	}
	c.buf = append(c.buf, p...)
	for len(c.buf) >= 9 {
		length := int(c.buf[0])<<16 | int(c.buf[1])<<8 | int(c.buf[2])
		if len(c.buf) < 9+length {
			return
		}
		name := map[byte]string{0: "data", 1: "headers", 3: "rst", 4: "settings", 6: "ping", 7: "goaway", 8: "window_update"}[c.buf[3]]
		if c.buf[3] == 6 && c.buf[4]&1 != 0 {
			name = "ping_ack"
		}
		c.counts[name]++
		c.buf = c.buf[9+length:]
	}
}

func (c *frameCounter) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[name]
}

// countedConn counts the frames a client connection sends and receives.
type countedConn struct {
	net.Conn
	sent, received *frameCounter
}

func (c countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.received.feed(p[:n])
	return n, err
}

func (c countedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.sent.feed(p[:n])
	return n, err
}

// TestWorkerStreamSendsNoFlowControlPings: a worker's stream carries its
// jobs' messages and no PING beside them, either way. gRPC's default
// flow control pings after a message arrives with no ping outstanding
// (to estimate the link's bandwidth-delay product), which on a worker's
// stream of small messages was a PING and its ack for nearly every
// message, and as many more writes and reads for the leader. The
// windows of the server and of the agent are fixed instead.
func TestWorkerStreamSendsNoFlowControlPings(t *testing.T) {
	n := startTestNode(t, nil, nil)
	const jobs = 30
	var ids []sfq.JobID
	for range jobs {
		ids = append(ids, n.submit())
	}
	sent := &frameCounter{skip: len("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), counts: map[string]int{}}
	received := &frameCounter{counts: map[string]int{}}
	var dials atomic.Int32
	dialer := func(ctx context.Context, addr string) (net.Conn, error) {
		dials.Add(1)
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return countedConn{Conn: c, sent: sent, received: received}, nil
	}
	a, err := agent.New(agent.Config{ID: "w1", Size: sfq.MD, Servers: []string{n.addr}, Runner: fixedRunner{agent.Result{CPU: time.Millisecond}},
		Dial: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(dialer)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, 20*time.Second, "every job to complete", func() bool {
		for _, id := range ids {
			if j, _, _ := n.node.FSM.Job(id); j.State != sfq.Completed {
				return false
			}
		}
		return true
	})
	if d := dials.Load(); d != 1 {
		t.Fatalf("%d connections, want 1", d)
	}
	// Each job took an Assign one way and a Started and a Finished the
	// other: the counters saw the frames that carried them.
	if got := received.count("data"); got < jobs {
		t.Fatalf("the worker received %d DATA frames for %d jobs", got, jobs)
	}
	if got := sent.count("data"); got < 2*jobs {
		t.Fatalf("the worker sent %d DATA frames for %d jobs", got, jobs)
	}
	if s, r := sent.count("ping"), received.count("ping"); s != 0 || r != 0 {
		t.Fatalf("PINGs: the worker sent %d, the leader sent %d; want none (flow-control windows are fixed)", s, r)
	}
}
