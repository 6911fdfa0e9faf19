// Package connlimit bounds the connections a server's client listeners
// (gRPC, HTTP) hold, so that idle or silent connections cannot exhaust
// its file descriptors, and so that callers without a token cannot take
// the places of callers with one: at most Max over every listener, at
// most PerAddress from one source network (a /24 of IPv4, a /48 of IPv6:
// one host or one site holds many addresses), the last Reserve places of
// each listener kept for networks that hold none of its connections (a
// health probe, a new client), at most Unauthenticated connections that
// have made no call with a token (past it a new connection from a network
// holding none of them takes the place of the oldest such connection of
// the network holding the most; one from another network is refused),
// at most PerIdentity connections of one identity (a client
// token's tenant), a connection that has not sent its first request
// FirstRequest after it was accepted (a TLS or HTTP/2 handshake
// included) is closed, and so is one that has made no call with a token
// UnauthenticatedIdle after its last call began or ended, whatever
// streams it holds (calls.go). A connection over a bound is closed as
// soon as it is accepted. Raft's listener is not wrapped: the
// descriptors left over are its own.
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
	"google.golang.org/grpc/stats"

	"github.com/baristahq/barista/internal/ratelimit"
)

// Config bounds the connections of a Limiter's listeners.
type Config struct {
	// Max bounds the connections of every listener together.
	Max int
	// PerAddress bounds those from one source network.
	PerAddress int
	// Reserve is how many of Max places a listener keeps for networks
	// that hold none of its connections.
	Reserve int
	// Unauthenticated bounds the connections that have made no call with
	// a token yet (0: half of Max); the rest of Max is kept for
	// connections that have.
	Unauthenticated int
	// PerIdentity bounds the connections whose first call with a token
	// came from one bounded identity (see Begin; 0: no bound).
	PerIdentity int
	// UnauthenticatedCalls bounds the calls without a token in progress
	// at once (health checks and watches; 0: no bound), a sixteenth of
	// them (at least 4) from one network.
	UnauthenticatedCalls int
	// FirstRequest is how long a connection may take to send its first
	// request.
	FirstRequest time.Duration
	// UnauthenticatedIdle is how long a connection that has made no call
	// with a token may stay after its last call began or ended, and how
	// long a call without a token may last (0: no bound).
	UnauthenticatedIdle time.Duration
	// AcceptRate bounds the new connections a second admitted from
	// networks that hold no connection which has made a call with a
	// token (0: no bound), a sixteenth of them (at least 4) from one
	// network (acceptrate.go).
	AcceptRate int
	// Registerer, if set, gets the metrics.
	Registerer prometheus.Registerer
}

// unauthenticatedPlaces is cfg's bound of connections without a token's
// call.
func (cfg Config) unauthenticatedPlaces() int {
	if cfg.Unauthenticated > 0 {
		return min(cfg.Unauthenticated, cfg.Max)
	}
	return max(cfg.Max/2, 1)
}

// Limiter admits and tracks the connections of its listeners.
type Limiter struct {
	cfg Config

	mu     sync.Mutex
	total  int
	byAddr map[netip.Prefix]int
	conns  map[connKey]*conn
	// anon holds the connections that have made no call with a token,
	// by network (under mu); anonN counts them.
	anon  map[netip.Prefix]map[*conn]struct{}
	anonN int
	// byIdentity counts the connections of each bounded identity.
	byIdentity map[string]int
	// anonCalls counts the calls without a token in progress, in all and
	// by network.
	anonCalls      int
	anonCallsByNet map[netip.Prefix]int
	seq            uint64 // numbers the admitted connections, oldest first
	// authedByNet counts the connections that have made a call with a
	// token, by network; accepts holds the accept rate (acceptrate.go);
	// now and exempt are its clock and the addresses it leaves alone
	// (loopback), apart for tests.
	authedByNet map[netip.Prefix]int
	accepts     *ratelimit.Limiter
	now         func() time.Time
	exempt      func(netip.Addr) bool
	// pending counts connections that have not sent a request yet: the
	// interceptors look a connection up only while there are some.
	pending atomic.Int64

	open          *prometheus.GaugeVec
	refused       *prometheus.CounterVec
	idle          *prometheus.CounterVec
	anonOpen      prometheus.Gauge
	callsRefused  *prometheus.CounterVec
	anonCallsOpen prometheus.Gauge
}

// Reasons a connection is refused or closed (metric labels).
const (
	ReasonTotal      = "total"
	ReasonPerAddress = "per_address"
	ReasonReserve    = "reserve"
	// ReasonUnauthenticated: the connection was closed to make room for
	// a new one, or the new one refused, past Config.Unauthenticated.
	ReasonUnauthenticated = "unauthenticated"
	// ReasonAcceptRate: a new connection from a network holding none with
	// a token's call, past Config.AcceptRate.
	ReasonAcceptRate = "accept_rate"
)

// New returns a limiter.
func New(cfg Config) *Limiter {
	l := &Limiter{cfg: cfg, byAddr: map[netip.Prefix]int{}, conns: map[connKey]*conn{}, anon: map[netip.Prefix]map[*conn]struct{}{},
		byIdentity: map[string]int{}, anonCallsByNet: map[netip.Prefix]int{},
		authedByNet: map[netip.Prefix]int{}, now: time.Now, exempt: netip.Addr.IsLoopback,
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "barista_connections",
			Help: "Client connections this server holds, by listener (grpc, http); at most limits.connections together."}, []string{"listener"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "barista_connections_refused_total",
			Help: "Client connections closed as soon as accepted, by listener and reason: total (limits.connections), " +
				"per_address (limits.connections_per_address), reserve (the last limits.connections_reserve places, kept for addresses without a connection), " +
				"unauthenticated (past limits.connections_unauthenticated: the new connection of a network holding some of those places, or the oldest one without a token's call of the network holding the most, which a connection of a network holding none replaced), " +
				"accept_rate (past limits.unauthenticated_accept_rate: a new connection of a network holding none with a token's call)."},
			[]string{"listener", "reason"}),
		idle: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "barista_connections_closed_idle_total",
			Help: "Client connections closed because they sent no request within limits.first_request_timeout of being accepted, " +
				"or made no call with a token within limits.unauthenticated_idle of their last call, by listener."},
			[]string{"listener"}),
		anonOpen: prometheus.NewGauge(prometheus.GaugeOpts{Name: "barista_connections_unauthenticated",
			Help: "Client connections that have made no call with a token (at most limits.connections_unauthenticated)."}),
		callsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "barista_calls_refused_total",
			Help: "Calls refused RESOURCE_EXHAUSTED by a bound of the connections: unauthenticated_calls (limits.unauthenticated_calls, in all or from one network), " +
				"connections_per_identity (the caller's identity holds limits.connections_per_identity connections)."},
			[]string{"bound"}),
		anonCallsOpen: prometheus.NewGauge(prometheus.GaugeOpts{Name: "barista_calls_unauthenticated",
			Help: "Calls without a token in progress (at most limits.unauthenticated_calls)."}),
	}
	l.accepts = l.newAcceptRate()
	l.callsRefused.WithLabelValues(boundUnauthenticatedCalls)
	l.callsRefused.WithLabelValues(boundPerIdentity)
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(l.open, l.refused, l.idle, l.anonOpen, l.callsRefused, l.anonCallsOpen)
	}
	return l
}

// Listen wraps a listener; name labels its metrics.
func (l *Limiter) Listen(name string, ln net.Listener) net.Listener {
	l.open.WithLabelValues(name)
	l.idle.WithLabelValues(name)
	for _, r := range []string{ReasonTotal, ReasonPerAddress, ReasonReserve, ReasonUnauthenticated, ReasonAcceptRate} {
		l.refused.WithLabelValues(name, r)
	}
	return &listener{Listener: ln, l: l, name: name, byAddr: map[netip.Prefix]int{}}
}

// Network is the source network an address counts in: its /24 (IPv4)
// or its /48 (IPv6: a site's prefix, which holds 65,536 /64s).
func Network(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	bits := 48
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
// Past the places of connections without a token's call, a connection
// from a network that holds none of them takes the place of the oldest
// such connection of the network that holds the most; one from a
// network that holds some is refused (closed before any handshake, which
// costs the server nothing): a flood from many networks cannot keep a
// client from another network out, nor make the server do a handshake
// for each of its attempts.
func (l *Limiter) admit(ln *listener, c net.Conn) *conn {
	key := connKey{addrPort(c.LocalAddr()), addrPort(c.RemoteAddr())}
	addr := Network(key.remote.Addr())
	l.mu.Lock()
	reason := ""
	var victim *conn
	switch {
	case l.byAddr[addr] >= l.cfg.PerAddress:
		reason = ReasonPerAddress
	case l.total >= l.cfg.Max:
		reason = ReasonTotal
	case l.total >= l.cfg.Max-l.cfg.Reserve && ln.byAddr[addr] > 0:
		reason = ReasonReserve
	case l.acceptRefused(addr, key.remote.Addr()):
		reason = ReasonAcceptRate
	case l.anonN >= l.cfg.unauthenticatedPlaces():
		if victim = l.evictable(addr); victim == nil {
			reason = ReasonUnauthenticated
		} else {
			// Counted out now, in the same step as the newcomer is
			// counted in: no other accept takes the place meanwhile.
			l.uncountLocked(victim)
		}
	}
	if reason != "" {
		l.mu.Unlock()
		l.refused.WithLabelValues(ln.name, reason).Inc()
		return nil
	}
	l.total++
	l.byAddr[addr]++
	ln.byAddr[addr]++
	l.seq++
	tc := &conn{Conn: c, ln: ln, key: key, net: addr, seq: l.seq, counted: true, closed: make(chan struct{})}
	// Its timer is set before another admit can find it (and close it
	// to make room).
	l.pending.Add(1)
	tc.timer = time.AfterFunc(l.cfg.FirstRequest, tc.expire)
	l.conns[key] = tc
	l.addAnon(tc)
	l.mu.Unlock()
	l.open.WithLabelValues(ln.name).Inc()
	if victim != nil {
		victim.Close()
		l.refused.WithLabelValues(victim.ln.name, ReasonUnauthenticated).Inc()
	}
	return tc
}

// uncountLocked counts c out of every bound, once (under l.mu).
func (l *Limiter) uncountLocked(c *conn) {
	if !c.counted {
		return
	}
	c.counted = false
	l.total--
	if l.byAddr[c.net]--; l.byAddr[c.net] <= 0 {
		delete(l.byAddr, c.net)
	}
	if c.ln.byAddr[c.net]--; c.ln.byAddr[c.net] <= 0 {
		delete(c.ln.byAddr, c.net)
	}
	if l.conns[c.key] == c {
		delete(l.conns, c.key)
	}
	l.dropAnon(c)
	if c.authed {
		if l.authedByNet[c.net]--; l.authedByNet[c.net] <= 0 {
			delete(l.authedByNet, c.net)
		}
	}
	if c.identity != "" {
		if l.byIdentity[c.identity]--; l.byIdentity[c.identity] <= 0 {
			delete(l.byIdentity, c.identity)
		}
	}
}

// evictable returns the oldest connection without a token's call of the
// network that holds the most such connections, when the newcomer's
// network, addr, holds none (nil otherwise). Under l.mu.
func (l *Limiter) evictable(addr netip.Prefix) *conn {
	if len(l.anon[addr]) > 0 {
		return nil
	}
	most, mostNet := 0, addr
	for n, set := range l.anon {
		if len(set) > most {
			most, mostNet = len(set), n
		}
	}
	if mostNet == addr {
		return nil
	}
	var oldest *conn
	for c := range l.anon[mostNet] {
		if oldest == nil || c.seq < oldest.seq {
			oldest = c
		}
	}
	return oldest
}

// addAnon counts c among the connections without a token's call (under
// l.mu).
func (l *Limiter) addAnon(c *conn) {
	set := l.anon[c.net]
	if set == nil {
		set = map[*conn]struct{}{}
		l.anon[c.net] = set
	}
	set[c] = struct{}{}
	l.anonN++
	l.anonOpen.Inc()
}

// dropAnon counts c out of them, if it is counted (under l.mu).
func (l *Limiter) dropAnon(c *conn) {
	set := l.anon[c.net]
	if _, ok := set[c]; !ok {
		return
	}
	delete(set, c)
	if len(set) == 0 {
		delete(l.anon, c.net)
	}
	l.anonN--
	l.anonOpen.Dec()
}

// conn is an admitted connection.
type conn struct {
	net.Conn
	ln        *listener
	key       connKey
	net       netip.Prefix // its source network
	seq       uint64
	counted   bool // in the limiter's counts (under the limiter's mu)
	timer     *time.Timer
	active    atomic.Bool
	closeOnce sync.Once
	closed    chan struct{}

	// Calls in progress, whether one carried a token (and the bounded
	// identity it counts for, if any), and the timer that closes the
	// connection while it has made none with a token (under mu).
	mu       sync.Mutex
	calls    int
	authed   bool
	identity string
	idle     *time.Timer
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
		c.mu.Lock()
		if c.idle != nil {
			c.idle.Stop()
		}
		c.mu.Unlock()
		l := c.ln.l
		l.mu.Lock()
		l.uncountLocked(c)
		l.mu.Unlock()
		l.open.WithLabelValues(c.ln.name).Dec()
		close(c.closed)
	})
	return err
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
	if tc, ok := unwrap(c); ok {
		tc.markActive()
	}
}

// ConnContext is an http.Server's ConnContext hook: it puts the
// admitted connection on the context of its requests, for
// Authenticated.
func (l *Limiter) ConnContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := unwrap(c); ok {
		return context.WithValue(ctx, connCtxKey{}, tc)
	}
	return ctx
}

// unwrap finds the admitted connection under a TLS one.
func unwrap(c net.Conn) (*conn, bool) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	tc, ok := c.(*conn)
	return tc, ok
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
