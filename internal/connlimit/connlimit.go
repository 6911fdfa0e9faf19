// Package connlimit bounds the connections a server's client listeners
// (gRPC, HTTP) hold, so that idle or silent connections cannot exhaust
// its file descriptors: at most Max over every listener, at most
// PerAddress from one source network (a /24 of IPv4, a /64 of IPv6: one
// host of a network holds many addresses), the last Reserve places of
// each listener kept for networks that hold none of its connections (a
// health probe, a new client), a connection that has not sent its first
// request FirstRequest after it was accepted (a TLS or HTTP/2 handshake
// included) is closed, and so is one that has made no call with a token
// (only health checks, say) once it has been idle UnauthenticatedIdle.
// A connection over a bound is closed as soon as it is accepted. Raft's
// listener is not wrapped: the descriptors left over are its own.
package connlimit

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"
)

// Config bounds the connections of a Limiter's listeners.
type Config struct {
	// Max bounds the connections of every listener together.
	Max int
	// PerAddress bounds those from one source address.
	PerAddress int
	// Reserve is how many of Max places a listener keeps for addresses
	// that hold none of its connections.
	Reserve int
	// FirstRequest is how long a connection may take to send its first
	// request.
	FirstRequest time.Duration
	// UnauthenticatedIdle is how long a connection that has made no call
	// with a token may stay without a call in progress (0: no bound).
	UnauthenticatedIdle time.Duration
	// Registerer, if set, gets the metrics.
	Registerer prometheus.Registerer
}

// Limiter admits and tracks the connections of its listeners.
type Limiter struct {
	cfg Config

	mu     sync.Mutex
	total  int
	byAddr map[netip.Prefix]int
	conns  map[connKey]*conn
	// pending counts connections that have not sent a request yet: the
	// interceptors look a connection up only while there are some.
	pending atomic.Int64

	open    *prometheus.GaugeVec
	refused *prometheus.CounterVec
	idle    *prometheus.CounterVec
}

// Reasons a connection is refused (metric labels).
const (
	ReasonTotal      = "total"
	ReasonPerAddress = "per_address"
	ReasonReserve    = "reserve"
)

// New returns a limiter.
func New(cfg Config) *Limiter {
	l := &Limiter{cfg: cfg, byAddr: map[netip.Prefix]int{}, conns: map[connKey]*conn{},
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "barista_connections",
			Help: "Client connections this server holds, by listener (grpc, http); at most limits.connections together."}, []string{"listener"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "barista_connections_refused_total",
			Help: "Client connections closed as soon as accepted, by listener and reason: total (limits.connections), " +
				"per_address (limits.connections_per_address), reserve (the last limits.connections_reserve places, kept for addresses without a connection)."},
			[]string{"listener", "reason"}),
		idle: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "barista_connections_closed_idle_total",
			Help: "Client connections closed because they sent no request within limits.first_request_timeout of being accepted, " +
				"or made no call with a token and were idle limits.unauthenticated_idle, by listener."},
			[]string{"listener"}),
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(l.open, l.refused, l.idle)
	}
	return l
}

// Listen wraps a listener; name labels its metrics.
func (l *Limiter) Listen(name string, ln net.Listener) net.Listener {
	l.open.WithLabelValues(name)
	l.idle.WithLabelValues(name)
	for _, r := range []string{ReasonTotal, ReasonPerAddress, ReasonReserve} {
		l.refused.WithLabelValues(name, r)
	}
	return &listener{Listener: ln, l: l, name: name, byAddr: map[netip.Prefix]int{}}
}

// network is the source network an address counts in: its /24 (IPv4) or
// /64 (IPv6).
func network(a netip.Addr) netip.Prefix {
	bits := 64
	if a.Is4() {
		bits = 24
	}
	p, _ := a.Prefix(bits)
	return p
}

type listener struct {
	net.Listener
	l    *Limiter
	name string
	// byAddr counts this listener's connections by source network (under
	// l.mu): the reserve is for networks holding none.
	byAddr map[netip.Prefix]int
}

// Accept returns the next connection within the bounds; those over a
// bound are closed at once.
func (ln *listener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tc := ln.l.admit(ln, c); tc != nil {
			return tc, nil
		}
		c.Close()
	}
}

type connKey struct{ local, remote netip.AddrPort }

func addrPort(a net.Addr) netip.AddrPort {
	if t, ok := a.(*net.TCPAddr); ok {
		ap := t.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}

// admit counts a new connection in, or returns nil for one over a bound.
func (l *Limiter) admit(ln *listener, c net.Conn) *conn {
	key := connKey{addrPort(c.LocalAddr()), addrPort(c.RemoteAddr())}
	addr := network(key.remote.Addr())
	l.mu.Lock()
	reason := ""
	switch {
	case l.byAddr[addr] >= l.cfg.PerAddress:
		reason = ReasonPerAddress
	case l.total >= l.cfg.Max:
		reason = ReasonTotal
	case l.total >= l.cfg.Max-l.cfg.Reserve && ln.byAddr[addr] > 0:
		reason = ReasonReserve
	}
	if reason != "" {
		l.mu.Unlock()
		l.refused.WithLabelValues(ln.name, reason).Inc()
		return nil
	}
	l.total++
	l.byAddr[addr]++
	ln.byAddr[addr]++
	tc := &conn{Conn: c, ln: ln, key: key, closed: make(chan struct{})}
	l.conns[key] = tc
	l.mu.Unlock()
	l.open.WithLabelValues(ln.name).Inc()
	l.pending.Add(1)
	tc.timer = time.AfterFunc(l.cfg.FirstRequest, tc.expire)
	return tc
}

// conn is an admitted connection.
type conn struct {
	net.Conn
	ln        *listener
	key       connKey
	timer     *time.Timer
	active    atomic.Bool
	closeOnce sync.Once
	closed    chan struct{}

	// Calls in progress, whether one carried a token, and the timer that
	// closes the connection once it has made none with a token and been
	// idle UnauthenticatedIdle (under mu).
	mu     sync.Mutex
	calls  int
	authed bool
	idle   *time.Timer
}

// Conn is a connection a Limiter admitted, as Lookup finds it.
type Conn interface {
	// Done is closed once the connection is closed.
	Done() <-chan struct{}
	// Close closes it (and every call and stream on it).
	Close() error
}

// Done is closed once the connection is closed.
func (c *conn) Done() <-chan struct{} { return c.closed }

// Lookup finds the admitted connection between local and remote (a
// call's peer addresses).
func (l *Limiter) Lookup(local, remote net.Addr) (Conn, bool) {
	key := connKey{addrPort(local), addrPort(remote)}
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.conns[key]
	return c, ok
}

// markActive notes the connection's first request.
func (c *conn) markActive() {
	if c.active.CompareAndSwap(false, true) {
		c.timer.Stop()
		c.ln.l.pending.Add(-1)
	}
}

// expire closes a connection that has sent no request yet.
func (c *conn) expire() {
	if c.active.CompareAndSwap(false, true) {
		c.ln.l.pending.Add(-1)
		c.Close()
		c.ln.l.idle.WithLabelValues(c.ln.name).Inc()
	}
}

// Close closes the connection and counts it out.
func (c *conn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() {
		c.markActive()
		l := c.ln.l
		addr := network(c.key.remote.Addr())
		l.mu.Lock()
		l.total--
		if l.byAddr[addr]--; l.byAddr[addr] <= 0 {
			delete(l.byAddr, addr)
		}
		if c.ln.byAddr[addr]--; c.ln.byAddr[addr] <= 0 {
			delete(c.ln.byAddr, addr)
		}
		if l.conns[c.key] == c {
			delete(l.conns, c.key)
		}
		l.mu.Unlock()
		l.open.WithLabelValues(c.ln.name).Dec()
		close(c.closed)
	})
	return err
}

// Interceptors mark a gRPC call's connection active (Begin) and note its
// end (End); authenticated says whether a call carries a token the
// server knows. The connection is found on the call's context, where the
// stats handler (StatsHandler) put it.
func (l *Limiter) Interceptors(authenticated func(context.Context) bool) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			ctx = l.Begin(ctx, authenticated(ctx))
			defer l.End(ctx)
			return h(ctx, req)
		}, func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			ctx := l.Begin(ss.Context(), authenticated(ss.Context()))
			defer l.End(ctx)
			return h(srv, ss)
		}
}

// StatsHandler finds, once per gRPC connection, the connection the
// limiter admitted and puts it on the connection's context, which every
// call's context derives from (Begin reads it there).
func (l *Limiter) StatsHandler() stats.Handler { return connTagger{l} }

type connTagger struct{ l *Limiter }

type connCtxKey struct{}

func (t connTagger) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	key := connKey{addrPort(info.LocalAddr), addrPort(info.RemoteAddr)}
	t.l.mu.Lock()
	c := t.l.conns[key]
	t.l.mu.Unlock()
	if c == nil {
		return ctx
	}
	return context.WithValue(ctx, connCtxKey{}, c)
}

func (connTagger) HandleConn(context.Context, stats.ConnStats)                     {}
func (connTagger) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (connTagger) HandleRPC(context.Context, stats.RPCStats)                       {}

// ConnState is an http.Server's ConnState hook: it marks a connection
// active once a request has begun on it.
func (l *Limiter) ConnState(c net.Conn, st http.ConnState) {
	if st != http.StateActive {
		return
	}
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if tc, ok := c.(*conn); ok {
		tc.markActive()
	}
}

// DescriptorReserve is how many file descriptors Fit keeps out of the
// client listeners' connections: Raft's connections, its log and
// snapshots, the connections to other members, a worker's files.
const DescriptorReserve = 128

// Fit lowers cfg.Max so that the client listeners' connections and
// DescriptorReserve stay within a limit of open files (0: none known),
// and the reserve within a quarter of Max. It reports whether Max was
// lowered.
func Fit(cfg Config, limit uint64) (Config, bool) {
	lowered := false
	if limit > 0 && uint64(cfg.Max)+DescriptorReserve > limit {
		cfg.Max = int(max(limit, DescriptorReserve+16) - DescriptorReserve)
		lowered = true
	}
	cfg.Reserve = min(cfg.Reserve, cfg.Max/4)
	return cfg, lowered
}

// callKey marks a call's context with its connection (Begin, End).
type callKey struct{}

// Begin notes a call beginning on its connection (ctx carries its peer);
// authenticated says it carries a token the server knows. It returns the
// context End takes.
func (l *Limiter) Begin(ctx context.Context, authenticated bool) context.Context {
	c, ok := ctx.Value(connCtxKey{}).(*conn)
	if !ok {
		p, ok := peer.FromContext(ctx)
		if !ok {
			return ctx
		}
		l.mu.Lock()
		c = l.conns[connKey{addrPort(p.LocalAddr), addrPort(p.Addr)}]
		l.mu.Unlock()
		if c == nil {
			return ctx
		}
	}
	c.markActive()
	c.mu.Lock()
	c.calls++
	c.authed = c.authed || authenticated
	if c.idle != nil {
		c.idle.Stop()
	}
	c.mu.Unlock()
	return context.WithValue(ctx, callKey{}, c)
}

// End notes the end of a call Begin saw. A connection that has made no
// call with a token is closed once it has been idle UnauthenticatedIdle.
func (l *Limiter) End(ctx context.Context) {
	c, ok := ctx.Value(callKey{}).(*conn)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls--; c.calls > 0 || c.authed || l.cfg.UnauthenticatedIdle <= 0 {
		return
	}
	if c.idle == nil {
		c.idle = time.AfterFunc(l.cfg.UnauthenticatedIdle, c.idleClose)
	} else {
		c.idle.Reset(l.cfg.UnauthenticatedIdle)
	}
}

// idleClose closes a connection without a token's call that stayed idle.
func (c *conn) idleClose() {
	c.mu.Lock()
	busy := c.calls > 0 || c.authed
	c.mu.Unlock()
	if busy {
		return
	}
	c.Close()
	c.ln.l.idle.WithLabelValues(c.ln.name).Inc()
}
