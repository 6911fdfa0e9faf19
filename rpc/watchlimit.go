package rpc

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/internal/auth"
	"github.com/baristahq/barista/internal/connlimit"
	pb "github.com/baristahq/barista/proto"
)

// watchLimits bounds the watch streams (WatchEvents) a node serves: at
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
type watchLimits struct {
	total, perIdentity int
	stall              time.Duration
	// conns finds a stream's connection (nil: stuck streams are not
	// followed); gatewayKey marks the gateway's own calls.
	conns      *connlimit.Limiter
	gatewayKey string

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

// gatewayHeader carries Server.gatewayKey on the gateway's calls.
const gatewayHeader = "barista-gateway"

func newWatchLimits(l Limits, conns *connlimit.Limiter, gatewayKey string, reg prometheus.Registerer) *watchLimits {
	w := &watchLimits{total: l.WatchStreams, perIdentity: l.WatchStreamsPerIdentity, stall: l.WatchStall, conns: conns, gatewayKey: gatewayKey, byID: map[auth.Identity]int{},
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

// acquire counts a new watch of id in, closing the connection of the
// oldest stuck stream in the way if there is one, or refuses it
// RESOURCE_EXHAUSTED naming the limit. release counts it out; a stream
// ended for falling behind (on conn, not nil) stays counted as stuck
// until conn closes.
func (w *watchLimits) acquire(id auth.Identity) (release func(conn connlimit.Conn), err error) {
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

func (w *watchLimits) uncount(id auth.Identity) {
	if w.byID[id]--; w.byID[id] <= 0 {
		delete(w.byID, id)
	}
}

// purge drops the stuck streams whose connection has closed; the caller
// holds mu.
func (w *watchLimits) purge() {
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
func (w *watchLimits) closeStuck(i int) {
	w.stuck[i].conn.Close()
	w.closed.Inc()
	w.purge()
}

// stuckConn is the connection a watch ended for falling behind stays
// counted on: its own, unless it came through the gateway or its
// connection is not known.
func (w *watchLimits) stuckConn(ctx context.Context) connlimit.Conn {
	if w.conns == nil || fromGateway(ctx, w.gatewayKey) {
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

// watchSender sends a watch's events from a goroutine of its own, so
// that the watch can see its client fall behind: the handler hands it
// one batch at a time, and ends the stream when a send has been blocked
// for the stall time (the client's flow-control window and gRPC's own
// buffer full). It holds at most the batch it sends and the one handed
// to it.
type watchSender struct {
	stream  grpc.ServerStreamingServer[pb.Event]
	batches chan []*pb.Event
	done    chan struct{} // closed when the goroutine ends
	err     error         // why it ended early, read after done
	// blockedSince is when the send in progress began (unix ns; 0: none
	// in progress); next is the seq after the last event sent.
	blockedSince atomic.Int64
	next         atomic.Uint64
	// stop tells the goroutine to send nothing more (the handler is
	// returning).
	stop      atomic.Bool
	closeOnce sync.Once
	// behind is set (by the handler) when the watch is ended for falling
	// behind.
	behind bool
}

func startWatchSender(stream grpc.ServerStreamingServer[pb.Event], cursor uint64) *watchSender {
	s := &watchSender{stream: stream, batches: make(chan []*pb.Event), done: make(chan struct{})}
	s.next.Store(cursor)
	go s.run()
	return s
}

func (s *watchSender) run() {
	defer close(s.done)
	for batch := range s.batches {
		for _, ev := range batch {
			if s.stop.Load() {
				return
			}
			s.blockedSince.Store(time.Now().UnixNano())
			err := s.stream.Send(ev)
			s.blockedSince.Store(0)
			if err != nil {
				s.err = err
				return
			}
			s.next.Store(ev.Seq + 1)
		}
	}
}

// send hands a batch over, waiting while the previous one is being sent;
// a send blocked for longer than stall ends the watch.
func (w *watchLimits) send(ctx context.Context, s *watchSender, batch []*pb.Event) error {
	select {
	case s.batches <- batch:
		return nil
	default:
	}
	return w.wait(ctx, s, s.batches, batch)
}

// finish lets the sender send what it was handed and waits for it (a
// watch that ended: a job's, or an idle tenant's).
func (w *watchLimits) finish(ctx context.Context, s *watchSender) error {
	s.closeOnce.Do(func() { close(s.batches) })
	return w.wait(ctx, s, nil, nil)
}

// wait waits until batch is handed over on in (none: until the sender
// ends), the sender ends early, the watch's context ends, or a send has
// been blocked for stall.
func (w *watchLimits) wait(ctx context.Context, s *watchSender, in chan<- []*pb.Event, batch []*pb.Event) error {
	tick := time.NewTicker(max(w.stall/4, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case in <- batch:
			return nil
		case <-s.done:
			return s.err
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-tick.C:
			if since := s.blockedSince.Load(); since != 0 && time.Since(time.Unix(0, since)) >= w.stall {
				w.behind.Inc()
				s.behind = true
				return status.Errorf(codes.ResourceExhausted,
					"this watch fell behind: its client took no event for %s while more waited (limits.watch_stall_timeout); watch again with from_seq = the seq after the last event received (this node had sent up to %d)",
					w.stall, s.next.Load())
			}
		}
	}
}

// abandon tells the sender to send nothing more and to end: the handler
// returns without waiting for it (a send blocked on its client ends
// with the stream).
func (s *watchSender) abandon() {
	s.stop.Store(true)
	s.closeOnce.Do(func() { close(s.batches) })
}
