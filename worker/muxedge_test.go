package worker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/baristahq/barista/proto"
)

// sharedStream is a multiplexed stream of d to addr, decided (the leader
// said mux), with slots attached and nothing reading it: route and Close
// are driven by the test. Its connection never dials.
func sharedStream(t *testing.T, d *muxDialer, addr string, slots ...uint32) (*muxConn, []*muxSlot, *bool) {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	cancelled := new(bool)
	c := &muxConn{d: d, addr: addr, cc: cc, cancel: func() { *cancelled = true }, decided: make(chan struct{}), done: make(chan struct{}),
		slots: map[uint32]*muxSlot{}, mux: true}
	close(c.decided)
	var out []*muxSlot
	for _, k := range slots {
		out = append(out, c.attachLocked(context.Background(), k))
	}
	d.conns[addr] = c
	c.lastRecv.Store(time.Now().UnixNano())
	return c, out, cancelled
}

// TestWorkerSlotInboxBounded: a slot holds at most 64 of the leader's
// messages waiting; the 65th ends that slot's session
// RESOURCE_EXHAUSTED after the 64 it holds, and the stream's other slot
// goes on.
func TestWorkerSlotInboxBounded(t *testing.T) {
	d := newMuxDialer(nil, slog.New(slog.DiscardHandler))
	c, s, _ := sharedStream(t, d, "leader:1", 1, 2)
	for i := range slotInbox + 1 {
		c.route(&pb.LeaderMessage{Slot: 1, Msg: &pb.LeaderMessage_Cancel{Cancel: &pb.CancelOrder{Job: uint64(i + 1)}}})
	}
	c.route(&pb.LeaderMessage{Slot: 2, Msg: &pb.LeaderMessage_Cancel{Cancel: &pb.CancelOrder{Job: 7}}})
	for i := range slotInbox {
		m, err := s[0].Recv()
		if err != nil || m.GetCancel().GetJob() != uint64(i+1) {
			t.Fatalf("slot 1's message %d: %v, %v", i+1, m, err)
		}
	}
	if _, err := s[0].Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("slot 1 after its 64 messages: %v, want RESOURCE_EXHAUSTED", err)
	}
	if m, err := s[1].Recv(); err != nil || m.GetCancel().GetJob() != 7 {
		t.Fatalf("slot 2: %v, %v; want its message", m, err)
	}
	// A message that comes after the slot's end is dropped.
	c.route(&pb.LeaderMessage{Slot: 1, Msg: &pb.LeaderMessage_Cancel{Cancel: &pb.CancelOrder{Job: 99}}})
	if _, err := s[0].Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("slot 1 after a late message: %v", err)
	}
}

// TestWorkerSilentSlotClosesAQuietStream: a slot whose session ended for
// want of an answer closes the shared stream when nothing came on it for
// a handshake's time (its server is gone: every slot reconnects), and
// leaves it open when messages still come (another slot's session is
// alive: only this one reconnects). A slot that leaves for another
// reason never closes a stream others use.
func TestWorkerSilentSlotClosesAQuietStream(t *testing.T) {
	quiet := silent{errors.New("no heartbeat acknowledged")}
	for _, tc := range []struct {
		name      string
		err       error
		lastRecv  time.Duration // before now
		wantClose bool
	}{
		{"silent, nothing for 4 s", quiet, 4 * time.Second, true},
		{"silent, a message 1 s ago", quiet, time.Second, false},
		{"another end, nothing for 4 s", io.EOF, 4 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newMuxDialer(nil, slog.New(slog.DiscardHandler))
			c, s, cancelled := sharedStream(t, d, "leader:1", 1, 2)
			c.stream = nopStream{}
			c.lastRecv.Store(time.Now().Add(-tc.lastRecv).UnixNano())
			s[0].Close(tc.err)
			if *cancelled != tc.wantClose {
				t.Fatalf("stream closed %v, want %v", *cancelled, tc.wantClose)
			}
			d.mu.Lock()
			_, kept := d.conns["leader:1"]
			d.mu.Unlock()
			if kept == tc.wantClose {
				t.Fatalf("dialer still offers the stream: %v, want %v", kept, !tc.wantClose)
			}
		})
	}
}

// nopStream is a stream whose sends go nowhere (a leaving slot's
// SlotEnd).
type nopStream struct {
	grpc.BidiStreamingClient[pb.WorkerMessage, pb.LeaderMessage]
}

func (nopStream) Send(*pb.WorkerMessage) error { return nil }
