package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/baristahq/barista/proto"
)

// send sends events of the given seqs.
func send(s grpc.ServerStreamingServer[pb.Event], seqs ...uint64) error {
	for _, seq := range seqs {
		if err := s.Send(&pb.Event{Seq: seq, JobId: 1, Tenant: "acme", Kind: "queued"}); err != nil {
			return err
		}
	}
	return nil
}

// cursorHeader sends the header of an accepted watch.
func cursorHeader(s grpc.ServerStreamingServer[pb.Event], seq uint64) error {
	return s.SendHeader(metadata.Pairs(HeaderWatchCursor, fmt.Sprint(seq)))
}

func froms(f *fakeNode) (seqs []uint64, oldest []bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.watches {
		seqs = append(seqs, w.FromSeq)
		oldest = append(oldest, w.FromOldest)
	}
	return seqs, oldest
}

type retry struct {
	err  string
	from uint64
	wait time.Duration
}

// recordRetries returns Options whose OnWatchRetry records each call.
func recordRetries(retries *[]retry, mu *sync.Mutex) Options {
	return Options{
		WatchBackoff: Backoff{First: time.Millisecond, Max: 4 * time.Millisecond},
		OnWatchRetry: func(err error, from uint64, wait time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			msg := "<nil>"
			if err != nil {
				msg = err.Error()
			}
			*retries = append(*retries, retry{msg, from, wait})
		},
	}
}

var errStop = errors.New("seen enough")

// TestWatchResumesAcrossDrops: a stream drops mid-way on one node, the
// watch moves to the next node at once and asks from the seq after the
// last event it delivered; that node (wrongly) sends two old events again
// and drops too; after a pause the first node resumes the stream. fn
// sees every event once, in order: no gap, no duplicate.
func TestWatchResumesAcrossDrops(t *testing.T) {
	a := serve(t, &fakeNode{watch: func(n int, req *pb.WatchEventsRequest, s grpc.ServerStreamingServer[pb.Event]) error {
		switch n {
		case 1:
			if err := cursorHeader(s, 5); err != nil {
				return err
			}
			if err := send(s, 5, 6, 7); err != nil {
				return err
			}
			return status.Error(codes.Unavailable, "node stopping")
		case 2:
			if err := cursorHeader(s, req.FromSeq); err != nil {
				return err
			}
			if err := send(s, 10, 11, 12); err != nil {
				return err
			}
			<-s.Context().Done()
			return nil
		}
		return status.Error(codes.Internal, "unexpected third watch")
	}})
	b := serve(t, &fakeNode{watch: func(n int, req *pb.WatchEventsRequest, s grpc.ServerStreamingServer[pb.Event]) error {
		if n > 1 {
			return status.Error(codes.Internal, "unexpected second watch")
		}
		if err := cursorHeader(s, req.FromSeq); err != nil {
			return err
		}
		if err := send(s, 6, 7, 8, 9); err != nil {
			return err
		}
		return status.Error(codes.Unavailable, "connection reset")
	}})
	var mu sync.Mutex
	var retries []retry
	c := newClient(t, recordRetries(&retries, &mu), a.addr, b.addr)
	var seen []uint64
	err := c.Watch(context.Background(), &pb.WatchEventsRequest{Tenant: "acme"}, func(ev *pb.Event) error {
		seen = append(seen, ev.Seq)
		if ev.Seq == 11 {
			return errStop
		}
		return nil
	})
	if err != errStop {
		t.Fatalf("Watch returned %v, want fn's error as it is", err)
	}
	if !slices.Equal(seen, []uint64{5, 6, 7, 8, 9, 10, 11}) {
		t.Errorf("events %v, want 5..11 once each", seen)
	}
	if fa, _ := froms(a); !slices.Equal(fa, []uint64{0, 10}) {
		t.Errorf("node a asked from %v, want [0 10]", fa)
	}
	if fb, _ := froms(b); !slices.Equal(fb, []uint64{8}) {
		t.Errorf("node b asked from %v, want [8]", fb)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []retry{{"UNAVAILABLE: node stopping", 8, 0}, {"UNAVAILABLE: connection reset", 10, time.Millisecond}}; !slices.Equal(retries, want) {
		t.Errorf("retries %v, want %v", retries, want)
	}
}

// TestWatchResumesFromTheCursorHeader: a watch from the oldest event
// breaks before its first event; it resumes at the seq the node said the
// stream started at (not the oldest again, not the next new event), and
// a job's watch ends, returning nil, when the node ends the stream.
func TestWatchResumesFromTheCursorHeader(t *testing.T) {
	f := serve(t, &fakeNode{watch: func(n int, req *pb.WatchEventsRequest, s grpc.ServerStreamingServer[pb.Event]) error {
		if n == 1 {
			if err := cursorHeader(s, 42); err != nil {
				return err
			}
			return status.Error(codes.Unavailable, "node stopping")
		}
		if err := cursorHeader(s, req.FromSeq); err != nil {
			return err
		}
		return send(s, 42, 43)
	}})
	var mu sync.Mutex
	var retries []retry
	c := newClient(t, recordRetries(&retries, &mu), f.addr)
	var seen []uint64
	err := c.Watch(context.Background(), &pb.WatchEventsRequest{Tenant: "acme", JobId: 1, FromOldest: true}, func(ev *pb.Event) error {
		seen = append(seen, ev.Seq)
		return nil
	})
	if err != nil || !slices.Equal(seen, []uint64{42, 43}) {
		t.Fatalf("events %v, err %v", seen, err)
	}
	seqs, oldest := froms(f)
	if !slices.Equal(seqs, []uint64{0, 42}) || !slices.Equal(oldest, []bool{true, false}) {
		t.Errorf("asked from %v (oldest %v), want [0 42] [true false]", seqs, oldest)
	}
	if want := []retry{{"UNAVAILABLE: node stopping", 42, time.Millisecond}}; !slices.Equal(retries, want) {
		t.Errorf("retries %v", retries)
	}
}

// TestWatchBacksOff: failures that may clear are retried with a doubling
// pause up to the maximum, reset once an event arrives; a clean end of a
// plain watch (the node stopping) is retried too.
func TestWatchBacksOff(t *testing.T) {
	f := serve(t, &fakeNode{watch: func(n int, req *pb.WatchEventsRequest, s grpc.ServerStreamingServer[pb.Event]) error {
		switch n {
		case 1, 2, 3, 4:
			return status.Error([]codes.Code{codes.Unavailable, codes.Aborted, codes.ResourceExhausted, codes.DeadlineExceeded}[n-1], "try again")
		case 5:
			return send(s, 5, 6) // the stream ends without an error
		}
		return status.Error(codes.PermissionDenied, "no more")
	}})
	var mu sync.Mutex
	var retries []retry
	c := newClient(t, recordRetries(&retries, &mu), f.addr)
	var seen []uint64
	err := c.Watch(context.Background(), &pb.WatchEventsRequest{Tenant: "acme"}, func(ev *pb.Event) error {
		seen = append(seen, ev.Seq)
		return nil
	})
	if !errors.Is(err, ErrPermissionDenied) || err.Error() != "PERMISSION_DENIED: no more" {
		t.Fatalf("err %v", err)
	}
	ms := time.Millisecond
	want := []retry{
		{"UNAVAILABLE: try again", 0, ms}, {"ABORTED: try again", 0, 2 * ms}, {"RESOURCE_EXHAUSTED: try again", 0, 4 * ms},
		{"DEADLINE_EXCEEDED: try again", 0, 4 * ms}, {"<nil>", 7, ms},
	}
	if !slices.Equal(retries, want) || !slices.Equal(seen, []uint64{5, 6}) {
		t.Errorf("retries %v\nwant %v\nevents %v", retries, want, seen)
	}
	if seqs, _ := froms(f); !slices.Equal(seqs, []uint64{0, 0, 0, 0, 0, 7}) {
		t.Errorf("asked from %v", seqs)
	}
}

// TestWatchStopsOnPermanentErrors: an error retrying cannot clear ends
// the watch at once with it; the context's end ends it with ctx.Err().
func TestWatchStopsOnPermanentErrors(t *testing.T) {
	for _, code := range []codes.Code{codes.PermissionDenied, codes.NotFound, codes.Unauthenticated, codes.OutOfRange, codes.InvalidArgument} {
		f := serve(t, &fakeNode{watch: func(int, *pb.WatchEventsRequest, grpc.ServerStreamingServer[pb.Event]) error {
			return status.Error(code, "refused")
		}})
		c := newClient(t, Options{OnWatchRetry: func(error, uint64, time.Duration) { t.Errorf("%v retried", code) }}, f.addr)
		err := c.Watch(context.Background(), &pb.WatchEventsRequest{Tenant: "acme"}, func(*pb.Event) error { return nil })
		if status.Code(err) != code || err.Error() != CodeName(code)+": refused" || count(f, &f.watches) != 1 {
			t.Errorf("%v: %v after %d calls", code, err, count(f, &f.watches))
		}
	}
	started := make(chan struct{})
	f := serve(t, &fakeNode{watch: func(_ int, _ *pb.WatchEventsRequest, s grpc.ServerStreamingServer[pb.Event]) error {
		close(started)
		<-s.Context().Done()
		return nil
	}})
	c := newClient(t, Options{}, f.addr)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	if err := c.Watch(ctx, &pb.WatchEventsRequest{Tenant: "acme"}, func(*pb.Event) error { return nil }); err != context.Canceled {
		t.Errorf("cancelled watch: %v", err)
	}
}
