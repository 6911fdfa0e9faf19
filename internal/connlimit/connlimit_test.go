package connlimit

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// dialFrom connects to addr from a loopback source address.
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// counts is the listener's open connections and its refusals by reason.
func counts(l *Limiter, name string) string {
	return fmt.Sprintf("open %v, refused total %v per_address %v reserve %v, idle %v",
		testutil.ToFloat64(l.open.WithLabelValues(name)),
		testutil.ToFloat64(l.refused.WithLabelValues(name, ReasonTotal)),
		testutil.ToFloat64(l.refused.WithLabelValues(name, ReasonPerAddress)),
		testutil.ToFloat64(l.refused.WithLabelValues(name, ReasonReserve)),
		testutil.ToFloat64(l.idle.WithLabelValues(name)))
}

// TestBounds: with at most 6 connections, 3 per source network and the
// last 2 places kept for networks without one, connections from one
// network stop at 3 (127.0.0.2 and 127.0.0.9 are one /24), a second one
// from a network past 4 in all is refused while a first one from a new
// network is not, and nothing passes 6; every connection that sends
// nothing is closed after FirstRequest.
func TestBounds(t *testing.T) {
	l := New(Config{Max: 6, PerAddress: 3, Reserve: 2, Unauthenticated: 6, FirstRequest: 300 * time.Millisecond, Registerer: prometheus.NewRegistry()})
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := l.Listen("test", raw)
	defer ln.Close()
	held := make(chan net.Conn, 100)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(held)
				return
			}
			held <- c
		}
	}()
	addr := raw.Addr().String()
	steps := []struct{ src, want string }{
		{"127.0.0.2", "open 1, refused total 0 per_address 0 reserve 0, idle 0"},
		{"127.0.0.2", "open 2, refused total 0 per_address 0 reserve 0, idle 0"},
		{"127.0.0.9", "open 3, refused total 0 per_address 0 reserve 0, idle 0"},
		{"127.0.0.2", "open 3, refused total 0 per_address 1 reserve 0, idle 0"},
		{"127.0.1.3", "open 4, refused total 0 per_address 1 reserve 0, idle 0"},
		{"127.0.1.4", "open 4, refused total 0 per_address 1 reserve 1, idle 0"},
		{"127.0.2.4", "open 5, refused total 0 per_address 1 reserve 1, idle 0"},
		{"127.0.3.5", "open 6, refused total 0 per_address 1 reserve 1, idle 0"},
		{"127.0.4.6", "open 6, refused total 1 per_address 1 reserve 1, idle 0"},
	}
	for i, s := range steps {
		dialFrom(t, s.src, addr)
		waitFor(t, fmt.Sprintf("step %d (%s): %s", i, s.src, s.want), func() bool { return counts(l, "test") == s.want })
	}
	waitFor(t, "the silent connections closed", func() bool {
		return counts(l, "test") == "open 0, refused total 1 per_address 1 reserve 1, idle 6"
	})
	ln.Close()
	for c := range held {
		c.Close()
	}
}

// TestHTTPFirstRequest: an HTTP connection that sent a request stays
// open past FirstRequest (its next request is served on it); one that
// sent nothing is closed.
func TestHTTPFirstRequest(t *testing.T) {
	l := New(Config{Max: 10, PerAddress: 10, Reserve: 1, FirstRequest: 200 * time.Millisecond, Registerer: prometheus.NewRegistry()})
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }), ConnState: l.ConnState}
	go srv.Serve(l.Listen("http", raw))
	defer srv.Close()
	busy := dialFrom(t, "127.0.0.1", raw.Addr().String())
	silent := dialFrom(t, "127.0.0.1", raw.Addr().String())
	r := bufio.NewReader(busy)
	get := func() string {
		fmt.Fprint(busy, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		line, _ := r.ReadString('\n')
		for {
			h, err := r.ReadString('\n')
			if err != nil || h == "\r\n" {
				break
			}
		}
		body := make([]byte, 2)
		r.Read(body)
		return strings.TrimSpace(line) + " " + string(body)
	}
	if got := get(); got != "HTTP/1.1 200 OK ok" {
		t.Fatalf("first request: %q", got)
	}
	waitFor(t, "the silent connection closed", func() bool { return testutil.ToFloat64(l.idle.WithLabelValues("http")) == 1 })
	silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := silent.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("the silent connection: read %d, %v; want it closed", n, err)
	}
	if got := get(); got != "HTTP/1.1 200 OK ok" {
		t.Errorf("a second request after FirstRequest on the busy connection: %q", got)
	}
}

// TestGRPCFirstRequest: a gRPC connection that made a call stays open
// past FirstRequest; its next call needs no new connection.
func TestGRPCFirstRequest(t *testing.T) {
	l := New(Config{Max: 10, PerAddress: 10, Reserve: 1, FirstRequest: 200 * time.Millisecond, Registerer: prometheus.NewRegistry()})
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unary, stream := l.Interceptors(func(context.Context) Caller { return Caller{Authenticated: true} })
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream), grpc.StatsHandler(l.StatsHandler()))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(l.Listen("grpc", raw))
	defer srv.Stop()
	cc, err := grpc.NewClient(raw.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	check := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	if err := check(); err != nil {
		t.Fatal(err)
	}
	// A silent connection opened after the call is closed once
	// FirstRequest has passed for the first one too.
	dialFrom(t, "127.0.0.1", raw.Addr().String())
	waitFor(t, "the silent connection closed", func() bool {
		return counts(l, "grpc") == "open 1, refused total 0 per_address 0 reserve 0, idle 1"
	})
	if err := check(); err != nil {
		t.Fatal(err)
	}
	if got := counts(l, "grpc"); got != "open 1, refused total 0 per_address 0 reserve 0, idle 1" {
		t.Errorf("after two calls on one connection: %s", got)
	}
}

// TestFit: Max is lowered to what the descriptor limit leaves, and the
// reserve to a quarter of Max.
func TestFit(t *testing.T) {
	for _, c := range []struct {
		limit          uint64
		max, reserve   int
		lowered        bool
		wantMax, wantR int
	}{
		{0, 4096, 64, false, 4096, 64},
		{1 << 20, 4096, 64, false, 4096, 64},
		{1024, 4096, 64, true, 896, 64},
		{256, 4096, 64, true, 128, 32},
	} {
		got, lowered := Fit(Config{Max: c.max, Reserve: c.reserve}, c.limit)
		if got.Max != c.wantMax || got.Reserve != c.wantR || lowered != c.lowered {
			t.Errorf("Fit(max %d, reserve %d, limit %d) = max %d, reserve %d, lowered %v; want %d, %d, %v",
				c.max, c.reserve, c.limit, got.Max, got.Reserve, lowered, c.wantMax, c.wantR, c.lowered)
		}
	}
}

// TestNetwork: an IPv4 address counts in its /24, an IPv6 one in its /48
// (an IPv4-mapped IPv6 address as its IPv4 one): the 65,536 /64s of a
// site are one network.
func TestNetwork(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7": "192.0.2.0/24", "192.0.2.250": "192.0.2.0/24", "2001:db8:1:2:3:4:5:6": "2001:db8:1::/48",
		"2001:db8:1:ffff::1": "2001:db8:1::/48", "2001:db8:2::1": "2001:db8:2::/48", "::ffff:192.0.2.9": "192.0.2.0/24",
	} {
		if got := Network(netip.MustParseAddr(in)).String(); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}

// TestUnauthenticatedIdle: a connection whose calls carried no token is
// closed UnauthenticatedIdle after its last call began or ended, even
// while a call is in progress (a health watch, say); one that made a
// call with a token is not.
func TestUnauthenticatedIdle(t *testing.T) {
	l := New(Config{Max: 10, PerAddress: 10, Reserve: 1, FirstRequest: time.Minute, UnauthenticatedIdle: 200 * time.Millisecond,
		Registerer: prometheus.NewRegistry()})
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := l.Listen("test", raw)
	defer ln.Close()
	accepted := make(chan net.Conn, 3)
	go func() {
		for range 3 {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	var conns []net.Conn
	var ctxs []context.Context
	for range 3 {
		dialFrom(t, "127.0.0.1", raw.Addr().String())
		c := <-accepted
		conns = append(conns, c)
		ctxs = append(ctxs, peer.NewContext(context.Background(), &peer.Peer{Addr: c.RemoteAddr(), LocalAddr: c.LocalAddr()}))
	}
	begin := func(ctx context.Context, caller Caller) context.Context {
		ctx, err := l.Begin(ctx, caller)
		if err != nil {
			t.Fatal(err)
		}
		return ctx
	}
	anon := begin(ctxs[0], Caller{})
	l.End(anon) // idle from now
	l.End(begin(ctxs[1], Caller{Authenticated: true}))
	busy := begin(ctxs[2], Caller{}) // a health watch, say: in progress
	waitFor(t, "both connections without a token closed", func() bool { return counts(l, "test") == "open 1, refused total 0 per_address 0 reserve 0, idle 2" })
	time.Sleep(400 * time.Millisecond) // twice the idle time: the one with a token stays
	if got := counts(l, "test"); got != "open 1, refused total 0 per_address 0 reserve 0, idle 2" {
		t.Fatalf("after twice the idle time: %s", got)
	}
	l.End(busy)
	for _, c := range conns {
		c.Close()
	}
}

// acceptAll accepts every connection of ln onto a channel, until ln
// closes.
// limitedListener is a loopback listener of a new Limiter of cfg, closed
// when the test ends: the limiter, its address and what it admits.
func limitedListener(t *testing.T, cfg Config) (*Limiter, string, <-chan net.Conn) {
	t.Helper()
	l := New(cfg)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := l.Listen("test", raw)
	t.Cleanup(func() { ln.Close() })
	return l, raw.Addr().String(), acceptAll(ln)
}

func acceptAll(ln net.Listener) <-chan net.Conn {
	out := make(chan net.Conn, 100)
	go func() {
		defer close(out)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			out <- c
		}
	}()
	return out
}

// TestUnauthenticatedPlaces: of 8 places, 4 go to connections that have
// made no call with a token. A fifth from a network holding some of them
// is refused (before any handshake); one from a network holding none
// takes the place of the oldest of the network holding the most; a
// connection that makes a call with a token leaves those places (and is
// never closed for them).
func TestUnauthenticatedPlaces(t *testing.T) {
	l, addr, accepted := limitedListener(t, Config{Max: 8, PerAddress: 8, Reserve: 0, Unauthenticated: 4, FirstRequest: time.Minute, Registerer: prometheus.NewRegistry()})
	refused := func() float64 { return testutil.ToFloat64(l.refused.WithLabelValues("test", ReasonUnauthenticated)) }
	var flood []net.Conn
	for i := range 3 {
		flood = append(flood, dialFrom(t, fmt.Sprintf("127.0.1.%d", i+1), addr))
		<-accepted
	}
	dialFrom(t, "127.0.3.1", addr) // a second network's
	<-accepted
	// A fifth from the flood's network: refused, the others kept.
	dialFrom(t, "127.0.1.9", addr)
	waitFor(t, "the fifth refused", func() bool { return refused() == 1 })
	// A new network's connection takes the place of the flood's oldest.
	dialFrom(t, "127.0.2.1", addr)
	fresh := <-accepted
	waitFor(t, "the flood's oldest closed", func() bool { return refused() == 2 })
	flood[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := flood[0].Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("the flood's oldest connection: read %d, %v; want it closed", n, err)
	}
	// Another from a network holding one now (127.0.3.0/24): refused.
	dialFrom(t, "127.0.3.2", addr)
	waitFor(t, "the second network's next refused", func() bool { return refused() == 3 })
	// The new one makes a call with a token: its place is no longer one
	// of the four, and new networks' connections cannot take it.
	ctx, err := l.Begin(peer.NewContext(context.Background(), &peer.Peer{Addr: fresh.RemoteAddr(), LocalAddr: fresh.LocalAddr()}), Caller{Authenticated: true})
	if err != nil {
		t.Fatal(err)
	}
	l.End(ctx)
	if got := testutil.ToFloat64(l.anonOpen); got != 3 {
		t.Errorf("%v connections without a token's call, want 3", got)
	}
	// The first takes the fourth place; each of the next five (each of a
	// network of its own) that of the oldest of a network holding the
	// most.
	for i := range 6 {
		dialFrom(t, fmt.Sprintf("127.0.%d.1", 10+i), addr)
	}
	waitFor(t, "the flood's places taken by new networks", func() bool { return refused() == 3+5 })
	if got := testutil.ToFloat64(l.open.WithLabelValues("test")); got != 5 {
		t.Errorf("%v connections open, want 5 (4 without a token's call, 1 with)", got)
	}
	fresh.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := fresh.Read(make([]byte, 1)); !isTimeout(err) {
		t.Errorf("the connection with a token's call: %v; want it open", err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestCallBounds: a connection whose identity holds PerIdentity
// connections already gets its first call with a token refused (and
// stays without one); calls without a token stop at UnauthenticatedCalls,
// 4 from one network; each of them lasts at most UnauthenticatedIdle.
func TestCallBounds(t *testing.T) {
	l := New(Config{Max: 20, PerAddress: 20, Reserve: 0, Unauthenticated: 20, PerIdentity: 2, UnauthenticatedCalls: 6,
		FirstRequest: time.Minute, UnauthenticatedIdle: time.Minute, Registerer: prometheus.NewRegistry()})
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := l.Listen("test", raw)
	defer ln.Close()
	accepted := acceptAll(ln)
	conn := func(src string) context.Context {
		dialFrom(t, src, raw.Addr().String())
		c := <-accepted
		return peer.NewContext(context.Background(), &peer.Peer{Addr: c.RemoteAddr(), LocalAddr: c.LocalAddr()})
	}
	acme := Caller{Authenticated: true, Identity: "client:acme:"}
	for i := range 3 {
		_, err := l.Begin(conn("127.0.0.1"), acme)
		if want := error(nil); i == 2 {
			if err != ErrIdentityConnections {
				t.Errorf("acme's third connection: %v, want %v", err, ErrIdentityConnections)
			}
		} else if err != want {
			t.Errorf("acme's connection %d: %v", i+1, err)
		}
	}
	if _, err := l.Begin(conn("127.0.0.1"), Caller{Authenticated: true, Identity: "client:beta:"}); err != nil {
		t.Errorf("beta's first connection: %v", err)
	}
	// Calls without a token: 4 from 127.0.5.0/24, then 2 from another
	// network, then none.
	var errs []string
	for _, src := range []string{"127.0.5.1", "127.0.5.2", "127.0.5.3", "127.0.5.4", "127.0.5.5", "127.0.6.1", "127.0.6.2", "127.0.7.1"} {
		_, err := l.Begin(conn(src), Caller{})
		errs = append(errs, fmt.Sprint(err == nil))
	}
	if got, want := strings.Join(errs, " "), "true true true true false true true false"; got != want {
		t.Errorf("calls without a token admitted: %s, want %s", got, want)
	}
}

// TestUnauthenticatedStreamLifetime: a health watch without a token ends
// after UnauthenticatedIdle, and its connection closes; one made with a
// token goes on.
func TestUnauthenticatedStreamLifetime(t *testing.T) {
	l := New(Config{Max: 10, PerAddress: 10, Reserve: 1, FirstRequest: time.Minute, UnauthenticatedIdle: 300 * time.Millisecond,
		Registerer: prometheus.NewRegistry()})
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unary, stream := l.Interceptors(func(ctx context.Context) Caller {
		md, _ := metadata.FromIncomingContext(ctx)
		return Caller{Authenticated: len(md.Get("authorization")) > 0}
	})
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream), grpc.StatsHandler(l.StatsHandler()))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(l.Listen("grpc", raw))
	defer srv.Stop()
	watch := func(token bool) (time.Duration, error) {
		cc, err := grpc.NewClient(raw.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if token {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer x")
		}
		start := time.Now()
		w, err := healthpb.NewHealthClient(cc).Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return 0, err
		}
		for {
			if _, err := w.Recv(); err != nil {
				return time.Since(start), err
			}
		}
	}
	took, err := watch(false)
	if took > 1500*time.Millisecond {
		t.Errorf("the watch without a token lasted %s (%v); want it ended after 300ms", took, err)
	}
	took, err = watch(true)
	// Its own deadline ends it (the server may see it first: CANCELLED).
	if code := status.Code(err); took < 1900*time.Millisecond || code != codes.DeadlineExceeded && code != codes.Canceled {
		t.Errorf("the watch with a token: ended after %s: %v; want its own deadline (2s)", took, err)
	}
}
