package rpc

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/baristahq/barista/internal/auth"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
	spb "google.golang.org/genproto/googleapis/rpc/status"
)

// muxWorker is one multiplexed stream driven message by message.
type muxWorker struct {
	t      *testing.T
	stream grpc.BidiStreamingClient[pb.WorkerMessage, pb.LeaderMessage]
	msgs   chan *pb.LeaderMessage
	ended  chan error
}

func (n *testNode) openMux(token string) *muxWorker {
	n.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	n.t.Cleanup(cancel)
	stream, err := pb.NewWorkerClient(n.dial(token)).Connect(ctx)
	if err != nil {
		n.t.Fatal(err)
	}
	w := &muxWorker{t: n.t.(*testing.T), stream: stream, msgs: make(chan *pb.LeaderMessage, 256), ended: make(chan error, 1)}
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				w.ended <- err
				return
			}
			w.msgs <- m
		}
	}()
	return w
}

func (w *muxWorker) send(slot uint32, m *pb.WorkerMessage) {
	w.t.Helper()
	m.Slot = slot
	if err := w.stream.Send(m); err != nil {
		w.t.Fatalf("send %v: %v", m, err)
	}
}

func (w *muxWorker) hello(slot uint32, id string) {
	w.t.Helper()
	h := hello(id)
	h.Mux = true
	w.send(slot, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Hello{Hello: h}})
}

// next waits for the next message of slot, failing on one of another.
func (w *muxWorker) next(slot uint32) *pb.LeaderMessage {
	w.t.Helper()
	select {
	case m := <-w.msgs:
		if m.Slot != slot {
			w.t.Fatalf("message %v for slot %d, want slot %d", m, m.Slot, slot)
		}
		return m
	case err := <-w.ended:
		w.t.Fatalf("stream ended: %v", err)
	case <-time.After(10 * time.Second):
		w.t.Fatal("no message from the leader within 10s")
	}
	return nil
}

// slotEnd decodes a SlotEnd's status (nil: a normal end).
func slotEnd(t *testing.T, m *pb.LeaderMessage) *status.Status {
	t.Helper()
	e := m.GetEnd()
	if e == nil {
		t.Fatalf("got %v, want SlotEnd", m)
	}
	if len(e.Status) == 0 {
		return nil
	}
	var st spb.Status
	if err := proto.Unmarshal(e.Status, &st); err != nil {
		t.Fatal(err)
	}
	return status.FromProto(&st)
}

// TestMuxStreamSlots: one stream carries the sessions of several slots,
// each its own worker record; a slot refused (a live ID) or ended by the
// worker leaves the others going; a message naming no slot ends the
// stream with INVALID_ARGUMENT.
func TestMuxStreamSlots(t *testing.T) {
	n := startTestNode(t, []auth.Token{{Secret: testAdmin, Role: auth.RoleAdmin}, {Secret: "worker-secret-w-prefix", Role: auth.RoleWorker, Worker: "w-*"}}, nil)
	const testWorker = "worker-secret-w-prefix"
	w := n.openMux(testWorker)
	w.hello(1, "w-1")
	if wel := w.next(1).GetWelcome(); wel == nil || !wel.Mux || wel.HeartbeatIntervalMs != 100 {
		t.Fatalf("slot 1: want a Welcome with mux, heartbeat 100 ms; got %v", wel)
	}
	w.hello(2, "w-2")
	if wel := w.next(2).GetWelcome(); wel == nil || !wel.Mux {
		t.Fatalf("slot 2: want a Welcome with mux, got %v", wel)
	}
	// A third slot with slot 1's ID is refused alone.
	w.hello(3, "w-1")
	if st := slotEnd(t, w.next(3)); st.Code() != codes.Aborted || !strings.Contains(st.Message(), `worker "w-1" has a live session`) {
		t.Fatalf("slot 3 as w-1: %v, want ABORTED naming the live session", st)
	}
	// Outside the token's binding: PERMISSION_DENIED for that slot alone.
	w.hello(4, "x-4")
	if st := slotEnd(t, w.next(4)); st.Code() != codes.PermissionDenied {
		t.Fatalf("slot 4 as x-4: %v, want PERMISSION_DENIED", st)
	}
	// Slot 2 still gets its job.
	job := n.submit()
	w.send(2, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Ready{Ready: &pb.Ready{Credit: 7}}})
	var a *pb.Assign
	for a == nil {
		a = w.next(2).GetAssign()
	}
	if sfq.JobID(a.Job) != job || a.Attempt != 1 || a.Credit != 7 {
		t.Fatalf("slot 2's assign %v, want job %d attempt 1 credit 7", a, job)
	}
	if j, _, _ := n.node.FSM.Job(job); j.Worker != "w-2" {
		t.Fatalf("job %d is held by %q, want w-2", job, j.Worker)
	}
	resp, err := pb.NewWorkerClient(n.dial(testAdmin)).ListWorkers(context.Background(), &pb.ListWorkersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, wi := range resp.Workers {
		ids = append(ids, wi.WorkerId+":"+wi.State)
	}
	if got := strings.Join(ids, ","); got != "w-1:idle,w-2:busy" {
		t.Fatalf("workers %s, want w-1:idle,w-2:busy", got)
	}
	// The worker ends slot 1: the leader answers, and the ID is free for
	// a new Hello on the same slot.
	w.send(1, &pb.WorkerMessage{Msg: &pb.WorkerMessage_End{End: &pb.SlotEnd{}}})
	if st := slotEnd(t, w.next(1)); st != nil {
		t.Fatalf("slot 1's end answered %v, want a normal end", st)
	}
	w.hello(1, "w-1")
	if wel := w.next(1).GetWelcome(); wel == nil || !wel.Mux {
		t.Fatalf("slot 1 again: want a Welcome, got %v", wel)
	}
	// A message naming no slot ends the stream.
	w.send(0, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Ready{Ready: &pb.Ready{Credit: 8}}})
	for {
		select {
		case <-w.msgs:
			continue
		case err := <-w.ended:
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "slot 0: every message of a multiplexed stream names its slot, 1..1024") {
				t.Fatalf("slot 0: stream ended %v, want INVALID_ARGUMENT naming the slot", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the stream did not end")
		}
		break
	}
	// Every slot's session ended with the stream.
	waitFor(t, 5*time.Second, "no session left", func() bool { return n.srv.workers.connectedNow("") == 0 })
	// A slot past the bound ends its stream too, its Hello unanswered.
	w = n.openMux(testWorker)
	w.hello(1025, "w-1025")
	select {
	case m := <-w.msgs:
		t.Fatalf("slot 1025 was answered: %v", m)
	case err := <-w.ended:
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "slot 1025: every message of a multiplexed stream names its slot, 1..1024") {
			t.Fatalf("slot 1025: stream ended %v, want INVALID_ARGUMENT naming the slot", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end")
	}
}

// TestMuxSlotInboxBounded: a slot with slotInbox messages waiting to be
// handled is ended RESOURCE_EXHAUSTED at the next (its session reads the
// waiting ones, then the error); the stream and its other slots go on,
// and the slot's later messages are dropped.
func TestMuxSlotInboxBounded(t *testing.T) {
	m := &muxStream{slots: map[uint32]*slotStream{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	full := &slotStream{m: m, slot: 1, ctx: ctx, cancel: cancel, in: make(chan *pb.WorkerMessage, slotInbox)}
	other := &slotStream{m: m, slot: 2, ctx: ctx, cancel: cancel, in: make(chan *pb.WorkerMessage, slotInbox)}
	m.slots[1], m.slots[2] = full, other
	hb := func(slot uint32) *pb.WorkerMessage {
		return &pb.WorkerMessage{Slot: slot, Msg: &pb.WorkerMessage_Heartbeat{Heartbeat: &pb.JobHeartbeat{Seq: 1}}}
	}
	for range slotInbox + 2 {
		if err := m.route(nil, hb(1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.route(nil, hb(2)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		_, err := full.Recv()
		if err != nil {
			if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "slot 1 has 64 messages waiting to be handled") {
				t.Fatalf("slot 1 ended %v, want RESOURCE_EXHAUSTED naming it", err)
			}
			break
		}
		n++
	}
	if n != slotInbox || m.slots[1] != nil || m.slots[2] != other || len(other.in) != 1 {
		t.Fatalf("slot 1 read %d messages (want %d) and is open: %v; slot 2 has %d waiting (want 1)", n, slotInbox, m.slots[1] != nil, len(other.in))
	}
}
