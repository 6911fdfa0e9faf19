package web

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/internal/auth"
	"github.com/baristahq/barista/internal/nodetest"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/rpc"
)

// watchNode is a node with tenants acme and beta, tokens for them and
// the admin, and the limits of its gRPC server.
func watchNode(t *testing.T, limits rpc.Limits) *testNode {
	t.Helper()
	n := startNode(t, nodeOptions{tokens: []auth.Token{{Secret: gwAdmin, Role: auth.RoleAdmin}, {Secret: gwAcme, Role: auth.RoleClient, Tenant: "acme"},
		{Secret: gwBeta, Role: auth.RoleClient, Tenant: "beta"}}, rpc: rpc.Options{Limits: limits}})
	for _, name := range []string{"acme", "beta"} {
		n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: name, Tier: pb.Tier_GOLD}}})
	}
	return n
}

// gauge is the value of a metric of the node without labels (0 if it
// has none).
func (n *testNode) gauge(name string) float64 {
	n.t.Helper()
	mfs, err := n.node.Metrics.Registry.Gather()
	if err != nil {
		n.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.Metric) == 1 {
			if g := mf.Metric[0].GetGauge(); g != nil {
				return g.GetValue()
			}
			return mf.Metric[0].GetCounter().GetValue()
		}
	}
	return 0
}

// submitMany queues count jobs of tenant (nodetest.SubmitMany).
func submitMany(n *testNode, tenant string, count int) {
	nodetest.SubmitMany(n.t, n.node, tenant, count)
}

// TestWatchLimitsOverHTTP: with the node serving as many watch streams
// as it may (limits.watch_streams 1), a watch over HTTP is refused 429
// with the gRPC server's words, as over gRPC; once the stream ends, it is
// served.
func TestWatchLimitsOverHTTP(t *testing.T) {
	n := watchNode(t, rpc.Limits{WatchStreams: 1})
	ts := n.serve()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := pb.NewClientClient(n.dial(gwAcme)).WatchEvents(ctx, &pb.WatchEventsRequest{})
	if err == nil {
		_, err = s.Header()
	}
	if err != nil {
		t.Fatal(err)
	}
	want := "this node serves 1 watch streams, the most it may (limits.watch_streams): try again later or on another node"
	refused, err := pb.NewClientClient(n.dial(gwBeta)).WatchEvents(context.Background(), &pb.WatchEventsRequest{})
	if err == nil {
		_, err = refused.Recv()
	}
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || st.Message() != want {
		t.Fatalf("beta's watch over gRPC with the node full: %v\nwant RESOURCE_EXHAUSTED: %s", err, want)
	}
	r := gwDo(t, ts, "GET", "/v1/events", gwBeta, "")
	if r.status != 429 || canonical(t, r.body) != canonical(t, fmt.Sprintf(`{"code":"RESOURCE_EXHAUSTED","message":%q,"reason":"","field":"","retry_after_ms":0}`, want)) {
		t.Errorf("GET /v1/events with the node full: %d %s", r.status, r.body)
	}
	cancel()
	waitFor(t, 10*time.Second, "acme's watch to end", func() bool { return n.gauge("barista_watch_streams") == 0 })
	req, _ := http.NewRequest("GET", ts.URL+"/v1/events?until_idle=true", nil)
	req.Header.Set("Authorization", "Bearer "+gwBeta)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /v1/events once the node has room: %d", resp.StatusCode)
	}
}

// TestGatewayStreamNotRead: an HTTP client that reads nothing of its
// event stream (4 KiB socket buffers) while 30,000 events wait holds
// neither the watch nor the connection: the watch behind the gateway
// ends, its place is freed (not kept as stuck: the gateway cancels it),
// and the answer is cut or ends with the watch's end.
func TestGatewayStreamNotRead(t *testing.T) {
	n := watchNode(t, rpc.Limits{WatchStall: 300 * time.Millisecond})
	// The server's socket buffers 4 KiB, so that what the kernel holds
	// does not hide the client's not reading.
	ts := httptest.NewUnstartedServer(n.web)
	ts.Listener = smallSendBuffers{ts.Listener}
	ts.Start()
	defer ts.Close()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/events HTTP/1.1\r\nHost: node\r\nAuthorization: Bearer %s\r\n\r\n", gwAcme)
	waitFor(t, 10*time.Second, "the watch behind the stream", func() bool { return n.gauge("barista_watch_streams") == 1 })
	submitMany(n, "acme", 30_000)
	// Either the watch is ended first, or the gateway's write times out
	// and cancels it: its place is freed, and it is not kept as stuck.
	waitFor(t, 30*time.Second, "the watch to end and its place freed", func() bool {
		return n.gauge("barista_watch_streams") == 0 && n.gauge("barista_watch_streams_stuck") == 0
	})
	// The answer was cut (the node's write timed out), or it is complete,
	// its last line the stream's end for falling behind (the node then
	// waits for the connection's next request).
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var got bytes.Buffer
	_, err = io.Copy(&got, conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		body := got.String()
		end := strings.LastIndex(body, `{"error"`)
		if !strings.HasSuffix(body, "\r\n0\r\n\r\n") || end < 0 ||
			!strings.HasPrefix(body[end:], `{"error":{"code":"RESOURCE_EXHAUSTED","message":"this watch fell behind`) {
			t.Fatalf("the connection is open after %d bytes, and the answer did not end with the watch's end: ...%q", got.Len(), body[max(0, got.Len()-300):])
		}
	}
}

// smallSendBuffers gives every accepted connection a 4 KiB send buffer.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}
