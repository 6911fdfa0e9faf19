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

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
	"github.com/baristahq/barista/worker"
)

// frameCounter counts the HTTP/2 frames of one direction of a
// connection by type; PINGs are counted apart from PING acks.
type frameCounter struct {
	mu     sync.Mutex
	skip   int // bytes of the client preface still to pass over
	buf    []byte
	counts map[string]int
}

// frameNames names the HTTP/2 frame types by their type byte.
var frameNames = map[byte]string{0: "data", 1: "headers", 3: "rst", 4: "settings", 6: "ping", 7: "goaway", 8: "window_update"}

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
		name := frameNames[c.buf[3]]
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

// countingDialer dials TCP and counts the frames of its connections:
// those sent, those received, and the connections dialled.
func countingDialer() (sent, received *frameCounter, dials *atomic.Int32, dial func(context.Context, string) (net.Conn, error)) {
	sent = &frameCounter{skip: len("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), counts: map[string]int{}}
	received = &frameCounter{counts: map[string]int{}}
	dials = &atomic.Int32{}
	return sent, received, dials, func(ctx context.Context, addr string) (net.Conn, error) {
		dials.Add(1)
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return countedConn{Conn: c, sent: sent, received: received}, nil
	}
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
	sent, received, dials, dialer := countingDialer()
	n.startAgent("w1", "", fixedRunner{worker.Result{CPU: time.Millisecond}}, nil, grpc.WithContextDialer(dialer))
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
	// Each job took an Assign one way and a Finished the other (the run
	// ended before its Started was due): the counters saw the frames that
	// carried them.
	if got := received.count("data"); got < jobs {
		t.Fatalf("the worker received %d DATA frames for %d jobs", got, jobs)
	}
	if got := sent.count("data"); got < jobs {
		t.Fatalf("the worker sent %d DATA frames for %d jobs", got, jobs)
	}
	if s, r := sent.count("ping"), received.count("ping"); s != 0 || r != 0 {
		t.Fatalf("PINGs: the worker sent %d, the leader sent %d; want none (flow-control windows are fixed)", s, r)
	}
}

// TestWorkerOfEarlierBuildPings: a worker of a build before the fixed
// windows lets gRPC estimate them, so it PINGs after the leader's
// messages; the leader answers every PING and serves it as before.
func TestWorkerOfEarlierBuildPings(t *testing.T) {
	n := startTestNode(t, nil, nil)
	sent, received, _, dialer := countingDialer()
	cc, err := grpc.NewClient(n.addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(dialer))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	w, _, err := n.connectOn(cc, hello("old"))
	if err != nil {
		t.Fatal(err)
	}
	const jobs = 5
	for i := range jobs {
		job := n.submit()
		a := w.ready(uint64(i + 1))
		if a.Job != uint64(job) {
			t.Fatalf("assigned job %d, want %d", a.Job, job)
		}
		w.send(&pb.WorkerMessage{Msg: &pb.WorkerMessage_Started{Started: &pb.JobStarted{Job: a.Job, Attempt: a.Attempt}}})
		w.send(finished(a.Job, a.Attempt, 10, ""))
		for w.next().GetFinishedAck() == nil {
		}
		if j, _, _ := n.node.FSM.Job(job); j.State != sfq.Completed {
			t.Fatalf("job %d is %v after its FinishedAck", job, j.State)
		}
	}
	// Every PING of the worker is answered.
	waitFor(t, 5*time.Second, "an answer to every PING of the worker", func() bool {
		return sent.count("ping") > 0 && received.count("ping_ack") == sent.count("ping")
	})
	if got := received.count("ping"); got != 0 {
		t.Fatalf("the leader sent %d PINGs; want none", got)
	}
}
