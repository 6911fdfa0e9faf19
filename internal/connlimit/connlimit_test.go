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
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
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
	l := New(Config{Max: 6, PerAddress: 3, Reserve: 2, FirstRequest: 300 * time.Millisecond, Registerer: prometheus.NewRegistry()})
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
	unary, stream := l.Interceptors(func(context.Context) bool { return true })
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

// TestNetwork: an IPv4 address counts in its /24, an IPv6 one in its /64
// (an IPv4-mapped IPv6 address as its IPv4 one).
func TestNetwork(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7": "192.0.2.0/24", "192.0.2.250": "192.0.2.0/24", "2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff::1": "2001:db8:1:2::/64", "::ffff:192.0.2.9": "192.0.2.0/24",
	} {
		if got := network(netip.MustParseAddr(in).Unmap()).String(); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}

// TestUnauthenticatedIdle: a connection whose calls carried no token is
// closed once it has been idle UnauthenticatedIdle (not while a call is
// in progress); one that made a call with a token is not.
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
	anon := l.Begin(ctxs[0], false)
	l.End(anon) // idle from now
	authed := l.Begin(ctxs[1], true)
	l.End(authed)
	busy := l.Begin(ctxs[2], false) // a health watch, say: in progress
	waitFor(t, "the idle connection without a token closed", func() bool { return counts(l, "test") == "open 2, refused total 0 per_address 0 reserve 0, idle 1" })
	time.Sleep(400 * time.Millisecond) // twice the idle time: nothing else closes
	if got := counts(l, "test"); got != "open 2, refused total 0 per_address 0 reserve 0, idle 1" {
		t.Fatalf("after twice the idle time: %s", got)
	}
	l.End(busy)
	waitFor(t, "the other one closed once idle", func() bool { return counts(l, "test") == "open 1, refused total 0 per_address 0 reserve 0, idle 2" })
	for _, c := range conns {
		c.Close()
	}
}
