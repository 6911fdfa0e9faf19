package connlimit

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/peer"
)

// TestAcceptRate: at AcceptRate 64 (4 a second from one network), with
// the clock stopped, a network's fifth new connection is refused at
// accept; 16 networks take the 64 of the second and a seventeenth is
// refused; a second later each network has 4 again. A network that holds
// a connection which made a call with a token is not bounded (its new
// connections take no tokens), and is again once that connection closes.
// (The limiter's clock and exemptions are set before it listens: the
// accept loop reads them.)
func TestAcceptRate(t *testing.T) {
	l := New(Config{Max: 1000, PerAddress: 1000, Unauthenticated: 1000, FirstRequest: time.Minute, AcceptRate: 64, Registerer: prometheus.NewRegistry()})
	var mu sync.Mutex
	clock := time.Unix(1_800_000_000, 0)
	l.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	l.exempt = func(netip.Addr) bool { return false }
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := l.Listen("test", raw)
	accepted := acceptAll(ln)
	var conns []net.Conn
	go func() {
		for c := range accepted {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	defer func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()
	addr := raw.Addr().String()
	admittedN := func() int { mu.Lock(); defer mu.Unlock(); return len(conns) }
	// dial opens one connection from src and reports whether the limiter
	// admitted it.
	dial := func(src string) bool {
		t.Helper()
		refused := func() float64 { return testutil.ToFloat64(l.refused.WithLabelValues("test", ReasonAcceptRate)) }
		r0, a0 := refused(), admittedN()
		dialFrom(t, src, addr)
		waitFor(t, "the connection from "+src+" admitted or refused", func() bool { return refused() > r0 || admittedN() > a0 })
		return admittedN() > a0
	}
	// fourThenNoMore checks that src's network gets 4 connections now,
	// and not a fifth.
	fourThenNoMore := func(src, when string) {
		t.Helper()
		for i := range 4 {
			if !dial(src) {
				t.Fatalf("%s: the network's connection %d refused", when, i+1)
			}
		}
		if dial(src) {
			t.Fatalf("%s: the network's fifth connection in a second admitted", when)
		}
	}
	fourThenNoMore("127.0.1.1", "at first")
	for n := range 15 {
		for i := range 4 {
			if !dial(fmt.Sprintf("127.0.%d.1", 10+n)) {
				t.Fatalf("network %d's connection %d refused", n, i+1)
			}
		}
	}
	if dial("127.0.30.1") {
		t.Fatal("a 65th connection in a second admitted")
	}
	mu.Lock()
	clock = clock.Add(time.Second)
	mu.Unlock()
	fourThenNoMore("127.0.1.3", "a second later")
	// A connection of 127.0.10.0/24 makes a call with a token: its
	// network's new connections are admitted whatever the rate.
	var authed net.Conn
	mu.Lock()
	for _, c := range conns {
		if c.RemoteAddr().(*net.TCPAddr).IP.String() == "127.0.10.1" {
			authed = c
			break
		}
	}
	mu.Unlock()
	ctx, err := l.Begin(peer.NewContext(context.Background(), &peer.Peer{Addr: authed.RemoteAddr(), LocalAddr: authed.LocalAddr()}), Caller{Authenticated: true})
	if err != nil {
		t.Fatal(err)
	}
	l.End(ctx)
	for i := range 10 {
		if !dial("127.0.10.7") {
			t.Fatalf("a network with a token's call: its connection %d refused", i+1)
		}
	}
	// Once that connection closes, the network has its second's 4 again,
	// not one more.
	authed.Close()
	fourThenNoMore("127.0.10.8", "once its connection with a token's call closed")
	if got := testutil.ToFloat64(l.refused.WithLabelValues("test", ReasonAcceptRate)); got != 4 {
		t.Errorf("%v refused for the accept rate, want 4", got)
	}
}

// TestAcceptRateSparesLoopback: a loopback address is not bounded by the
// accept rate (by default).
func TestAcceptRateSparesLoopback(t *testing.T) {
	l, addr, accepted := limitedListener(t, Config{Max: 1000, PerAddress: 1000, Unauthenticated: 1000, FirstRequest: time.Minute, AcceptRate: 16, Registerer: prometheus.NewRegistry()})
	for range 40 {
		dialFrom(t, "127.0.0.5", addr)
		c := <-accepted
		defer c.Close()
	}
	if got := testutil.ToFloat64(l.refused.WithLabelValues("test", ReasonAcceptRate)); got != 0 {
		t.Errorf("%v loopback connections refused for the accept rate, want 0", got)
	}
}
