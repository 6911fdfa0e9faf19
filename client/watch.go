package client

import (
	"context"
	"errors"
	"io"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/internal/wire"
	pb "github.com/baristahq/barista/proto"
)

// HeaderWatchCursor is the header of a WatchEvents stream that gives the
// sequence number it starts at: the first event it may send. A watch
// that asked for the next new event (from_seq 0) or the oldest one
// resumes from there if it breaks before its first event.
const HeaderWatchCursor = wire.HeaderWatchCursor

// HeaderWatchNext is the header of a WatchEvents stream that gives the
// sequence number the tenant's next new event will have (one past the
// newest so far): a stream that starts beyond it waits for events that
// do not exist yet.
const HeaderWatchNext = wire.HeaderWatchNext

// HeaderIndex is the header of a write's answer that gives the index of
// the log entry that applied it; HeaderMinIndex, sent with a read, asks
// the node to answer only once its state has applied that index (the
// Client sends the highest index of its own writes: read-your-writes on
// any node).
const (
	HeaderIndex    = wire.HeaderIndex
	HeaderMinIndex = wire.HeaderMinIndex
)

// Watch streams the events req selects to fn, in order, and follows them
// across failures: when the stream breaks or its node fails, it
// reconnects — to the next node at once, and after Options.WatchBackoff
// once it has tried every node — and resumes after the last event fn was
// given, so fn sees every event
// once, with no gap. It returns
//   - nil when the stream ends by itself: req.JobId's job ended, or, with
//     req.UntilIdle, the tenant has nothing queued or running, nor a job
//     scheduled to run again (a retry backing off, a snooze);
//   - fn's error, as it is, when fn returns one (the watch stops);
//   - the context's error when ctx ends;
//   - an *Error when the cluster refuses the watch in a way retrying
//     cannot clear (PERMISSION_DENIED, NOT_FOUND, UNAUTHENTICATED,
//     OUT_OF_RANGE: events were pruned before they could be read ...).
//
// UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED and RESOURCE_EXHAUSTED are
// retried until ctx ends. req is not modified.
func (c *Client) Watch(ctx context.Context, req *pb.WatchEventsRequest, fn func(*pb.Event) error) error {
	next, oldest := req.FromSeq, req.FromOldest
	bo := c.opts.WatchBackoff
	wait := bo.First
	for {
		// broke is the error of a stream the round moves on from to the
		// next node at once: reported when the next stream opens.
		var broke error
		err := c.run(ctx, false, func(ctx context.Context, cc grpc.ClientConnInterface) (err error) {
			if broke != nil && c.opts.OnWatchRetry != nil {
				c.opts.OnWatchRetry(wrap(broke), next, 0)
			}
			defer func() { broke = err }()
			stream, err := pb.NewClientClient(cc).WatchEvents(ctx, &pb.WatchEventsRequest{Tenant: req.Tenant, FromSeq: next,
				FromOldest: oldest, JobId: req.JobId, UntilIdle: req.UntilIdle})
			if err != nil {
				return err
			}
			if md, err := stream.Header(); err == nil {
				cursor, newest := headerSeq(md.Get(HeaderWatchCursor)), headerSeq(md.Get(HeaderWatchNext))
				if cursor > 0 && (next == 0 || oldest) {
					// Where the stream starts: resume from there if it
					// breaks before an event comes.
					next, oldest = cursor, false
				}
				if c.opts.OnWatchOpen != nil && cursor > 0 && newest > 0 {
					c.opts.OnWatchOpen(cursor, newest)
				}
			}
			for {
				ev, err := stream.Recv()
				if err != nil {
					return err
				}
				if ev.Seq < next {
					continue // delivered before the reconnect
				}
				if err := fn(ev); err != nil {
					return &callbackError{err}
				}
				next, oldest = ev.Seq+1, false
				wait = bo.First
			}
		})
		var cb *callbackError
		switch {
		case errors.As(err, &cb):
			return cb.err
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, io.EOF) && (req.JobId != 0 || req.UntilIdle):
			return nil // the job ended, or the tenant is idle
		case errors.Is(err, io.EOF):
			err = nil // the node ended the stream (it is stopping)
		case errors.Is(err, ErrClosed) || !watchRetryable(err):
			return err
		}
		if c.opts.OnWatchRetry != nil {
			c.opts.OnWatchRetry(err, next, wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, bo.Max)
	}
}

// callbackError carries the error of Watch's fn out of the stream.
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }

// watchRetryable reports whether a failed watch may succeed if tried
// again: the connection or the node failed (UNAVAILABLE), it timed out,
// was aborted or was turned away for load. Any other code
// (PERMISSION_DENIED, NOT_FOUND, UNAUTHENTICATED, OUT_OF_RANGE ...) does
// not clear by itself.
func watchRetryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted, codes.ResourceExhausted:
		return true
	}
	return false
}

// headerSeq reads a sequence number of a stream's header (0: none).
func headerSeq(v []string) uint64 {
	if len(v) != 1 {
		return 0
	}
	seq, err := strconv.ParseUint(v[0], 10, 64)
	if err != nil {
		return 0
	}
	return seq
}
