package watchlimit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/baristahq/barista/proto"
)

// Sender sends a watch's events from a goroutine of its own, so
// that the watch can see its client fall behind: the handler hands it
// one batch at a time, and ends the stream when a send has been blocked
// for the stall time (the client's flow-control window and gRPC's own
// buffer full). It holds at most the batch it sends and the one handed
// to it.
type Sender struct {
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

// StartSender starts the sender of a watch's stream, whose next event
// is cursor.
func StartSender(stream grpc.ServerStreamingServer[pb.Event], cursor uint64) *Sender {
	s := &Sender{stream: stream, batches: make(chan []*pb.Event), done: make(chan struct{})}
	s.next.Store(cursor)
	go s.run()
	return s
}

func (s *Sender) run() {
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

// Send hands a batch over, waiting while the previous one is being sent;
// a send blocked for longer than stall ends the watch.
func (w *Limiter) Send(ctx context.Context, s *Sender, batch []*pb.Event) error {
	select {
	case s.batches <- batch:
		return nil
	default:
	}
	return w.wait(ctx, s, s.batches, batch)
}

// Finish lets the sender send what it was handed and waits for it (a
// watch that ended: a job's, or an idle tenant's).
func (w *Limiter) Finish(ctx context.Context, s *Sender) error {
	s.closeOnce.Do(func() { close(s.batches) })
	return w.wait(ctx, s, nil, nil)
}

// wait waits until batch is handed over on in (none: until the sender
// ends), the sender ends early, the watch's context ends, or a send has
// been blocked for stall.
func (w *Limiter) wait(ctx context.Context, s *Sender, in chan<- []*pb.Event, batch []*pb.Event) error {
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

// Abandon tells the sender to send nothing more and to end: the handler
// returns without waiting for it (a send blocked on its client ends
// with the stream).
func (s *Sender) Abandon() {
	s.stop.Store(true)
	s.closeOnce.Do(func() { close(s.batches) })
}

// Behind reports whether the watch was ended for falling behind (Send
// or Finish said so).
func (s *Sender) Behind() bool { return s.behind }

// Next is the seq after the last event sent.
func (s *Sender) Next() uint64 { return s.next.Load() }

// Done is closed when the sender's goroutine ends.
func (s *Sender) Done() <-chan struct{} { return s.done }

// Err is why the sender ended early (nil: it did not), once Done is
// closed.
func (s *Sender) Err() error { return s.err }
