// Package watchlimit bounds the watch streams a node's gRPC server
// serves (docs/security.md, "Limits"): per identity and in all, counting
// a stream ended for falling behind as stuck until its connection closes
// (Limiter), and sends a watch's events from a goroutine of its own so
// that a client that falls behind is seen and its watch ended (Sender).
// rpc's WatchEvents reads the events and hands them over.
package watchlimit

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/internal/auth"
	"github.com/baristahq/barista/internal/connlimit"
)

// Limiter bounds the watch streams (WatchEvents) a node serves: at
// most perIdentity of one identity (a client token's tenant, the admin,
// a worker binding) and at most total in all, and ends a stream whose
// client has taken nothing for stall while events wait for it.
//
// A stream ended so may leave what it had sent (gRPC's buffer, up to 64
// KiB of events, a few hundred KiB of memory) queued on its connection
// until the client reads it, which a client that reads nothing never
// does. So such a stream stays counted against both limits ("stuck")
// until its connection closes; when its identity, or the node, needs
// the place for a new watch, the oldest stuck stream's connection is
// closed, which frees them all. Streams of the HTTP/JSON gateway are not
// kept: the gateway cancels a stream its HTTP client does not read
// (statusOnce), which drops what was queued.
type Limiter struct {
	total, perIdentity int
	stall              time.Duration
	// conns finds a stream's connection (nil: stuck streams are not
	// followed); gateway tells the gateway's own calls.
	conns   *connlimit.Limiter
	gateway func(context.Context) bool

	mu    sync.Mutex
	live  int
	byID  map[auth.Identity]int // live and stuck
	stuck []stuckStream         // oldest first

	streams, stuckStreams prometheus.Gauge
	refused               *prometheus.CounterVec
	behind, closed        prometheus.Counter
}

// stuckStream is a watch ended for falling behind whose connection is
// open.
type stuckStream struct {
	id   auth.Identity
	conn connlimit.Conn
}

// Config is what a Limiter bounds and how it finds a stream's connection.
type Config struct {
	// Streams bounds the watch streams of the node, and PerIdentity those
	// of one identity. A watch whose client has taken no event for Stall
	// while more wait is ended.
	Streams, PerIdentity int
	Stall                time.Duration
	// Conns finds a stream's connection (nil: stuck streams are not
	// followed), and Gateway reports whether a call is the node's own
	// HTTP/JSON gateway's (whose streams are not kept).
	Conns   *connlimit.Limiter
	Gateway func(context.Context) bool
}

// New returns the limiter of c, its instruments registered on reg.
func New(c Config, reg prometheus.Registerer) *Limiter {
	w := &Limiter{total: c.Streams, perIdentity: c.PerIdentity, stall: c.Stall, conns: c.Conns, gateway: c.Gateway, byID: map[auth.Identity]int{},
		streams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "barista_watch_streams",
			Help: "Watch streams this node serves (with the stuck ones, at most limits.watch_streams)."}),
		stuckStreams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "barista_watch_streams_stuck",
			Help: "Watch streams ended for falling behind whose connection is open: what they had sent may wait there unread, so they count against the limits."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "barista_watch_streams_refused_total",
			Help: "Watches refused RESOURCE_EXHAUSTED, by the limit reached: identity (limits.watch_streams_per_identity) or node (limits.watch_streams)."},
			[]string{"limit"}),
		behind: prometheus.NewCounter(prometheus.CounterOpts{Name: "barista_watch_streams_behind_total",
			Help: "Watch streams ended RESOURCE_EXHAUSTED because their client took no event for limits.watch_stall_timeout while more waited."}),
		closed: prometheus.NewCounter(prometheus.CounterOpts{Name: "barista_watch_connections_closed_total",
			Help: "Connections closed to free the places of the stuck watch streams on them, for a new watch."}),
	}
	w.refused.WithLabelValues("identity")
	w.refused.WithLabelValues("node")
	reg.MustRegister(w.streams, w.stuckStreams, w.refused, w.behind, w.closed)
	return w
}

// Acquire counts a new watch of id in, closing the connection of the
// oldest stuck stream in the way if there is one, or refuses it
// RESOURCE_EXHAUSTED naming the limit. release counts it out; a stream
// ended for falling behind (on conn, not nil) stays counted as stuck
// until conn closes.
func (w *Limiter) Acquire(id auth.Identity) (release func(conn connlimit.Conn), err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.purge()
	for w.byID[id] >= w.perIdentity {
		i := slices.IndexFunc(w.stuck, func(s stuckStream) bool { return s.id == id })
		if i < 0 {
			w.refused.WithLabelValues("identity").Inc()
			return nil, status.Errorf(codes.ResourceExhausted,
				"this token has %d watch streams open on this node, the most it may (limits.watch_streams_per_identity): end one, or watch a tenant's events in one stream rather than a stream per job", w.byID[id])
		}
		w.closeStuck(i)
	}
	for w.live+len(w.stuck) >= w.total {
		if len(w.stuck) == 0 {
			w.refused.WithLabelValues("node").Inc()
			return nil, status.Errorf(codes.ResourceExhausted,
				"this node serves %d watch streams, the most it may (limits.watch_streams): try again later or on another node", w.live)
		}
		w.closeStuck(0)
	}
	w.live++
	w.byID[id]++
	w.streams.Inc()
	var once sync.Once
	return func(conn connlimit.Conn) {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.live--
			w.streams.Dec()
			if conn != nil {
				w.stuck = append(w.stuck, stuckStream{id, conn})
				w.stuckStreams.Set(float64(len(w.stuck)))
				return
			}
			w.uncount(id)
		})
	}, nil
}

func (w *Limiter) uncount(id auth.Identity) {
	if w.byID[id]--; w.byID[id] <= 0 {
		delete(w.byID, id)
	}
}

// purge drops the stuck streams whose connection has closed; the caller
// holds mu.
func (w *Limiter) purge() {
	w.stuck = slices.DeleteFunc(w.stuck, func(s stuckStream) bool {
		select {
		case <-s.conn.Done():
			w.uncount(s.id)
			return true
		default:
			return false
		}
	})
	w.stuckStreams.Set(float64(len(w.stuck)))
}

// closeStuck closes the connection of stuck stream i, which frees every
// stuck stream on it; the caller holds mu.
func (w *Limiter) closeStuck(i int) {
	w.stuck[i].conn.Close()
	w.closed.Inc()
	w.purge()
}

// StuckConn is the connection a watch ended for falling behind stays
// counted on: its own, unless it came through the gateway or its
// connection is not known.
func (w *Limiter) StuckConn(ctx context.Context) connlimit.Conn {
	if w.conns == nil || w.gateway != nil && w.gateway(ctx) {
		return nil
	}
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	c, ok := w.conns.Lookup(p.LocalAddr, p.Addr)
	if !ok {
		return nil
	}
	return c
}
