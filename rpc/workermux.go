package rpc

import (
	"context"
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/baristahq/barista/proto"
)

// A multiplexed worker stream (Hello.mux) carries the sessions of many
// slots of one worker process: every message names its slot
// (1..maxStreamSlots), each slot is opened by its own Hello and runs the
// session code of a stream of one session (serve), as the worker record
// of its Hello's worker_id. One reader routes the stream's messages to
// the slots' inboxes; the slots' sessions write to the stream in turn.
const (
	maxStreamSlots = 1024
	// slotInbox bounds the messages of one slot read but not yet handled.
	// A worker sends a slot's reports one at a time and waits for most
	// answers; a slot that has this many waiting is ended
	// (RESOURCE_EXHAUSTED), the others going on.
	slotInbox = 64
)

// muxStream is the leader's side of one multiplexed stream.
type muxStream struct {
	stream grpc.BidiStreamingServer[pb.WorkerMessage, pb.LeaderMessage]
	// sendMu orders the stream's writes and guards each slot's gone.
	sendMu sync.Mutex
	// mu guards slots, the open slots, and the closing of their inboxes.
	mu    sync.Mutex
	slots map[uint32]*slotStream
	wg    sync.WaitGroup
}

// slotStream is one slot's session stream (a workerStream).
type slotStream struct {
	m      *muxStream
	slot   uint32
	ctx    context.Context
	cancel context.CancelFunc
	in     chan *pb.WorkerMessage // closed by the reader at the slot's end
	err    error                  // why in is closed; set before
	gone   bool                   // guarded by m.sendMu: nothing more is sent
}

func (v *slotStream) Context() context.Context { return v.ctx }

func (v *slotStream) Recv() (*pb.WorkerMessage, error) {
	if m, ok := <-v.in; ok {
		return m, nil
	}
	return nil, v.err
}

// Send writes m, stamped with the slot, unless the slot has ended.
func (v *slotStream) Send(m *pb.LeaderMessage) error {
	v.m.sendMu.Lock()
	defer v.m.sendMu.Unlock()
	if v.gone {
		return status.Error(codes.Canceled, "the slot's session has ended")
	}
	// A fresh envelope: a message may be queued to more than one session.
	return v.m.stream.Send(&pb.LeaderMessage{Msg: m.Msg, Slot: v.slot})
}

// end closes the slot for its session: nothing more is sent but a
// SlotEnd carrying err (nil: a normal end), unless it ended already.
func (v *slotStream) end(err error) {
	v.m.sendMu.Lock()
	defer v.m.sendMu.Unlock()
	if v.gone {
		return
	}
	v.gone = true
	v.cancel()
	_ = v.m.stream.Send(&pb.LeaderMessage{Msg: &pb.LeaderMessage_End{End: &pb.SlotEnd{Status: slotStatus(err)}}, Slot: v.slot})
}

// slotStatus is the SlotEnd.status of a session's end: a serialized
// google.rpc.Status, or nothing for a normal end.
func slotStatus(err error) []byte {
	if err == nil {
		return nil
	}
	b, merr := proto.Marshal(status.Convert(err).Proto())
	if merr != nil {
		b, _ = proto.Marshal(status.New(codes.Unknown, err.Error()).Proto())
	}
	return b
}

// serveMux serves a multiplexed stream whose first message is first (a
// Hello with mux). It returns when the stream ends, after every slot's
// session has.
func (s *WorkerService) serveMux(stream grpc.BidiStreamingServer[pb.WorkerMessage, pb.LeaderMessage], first *pb.WorkerMessage) error {
	m := &muxStream{stream: stream, slots: map[uint32]*slotStream{}}
	err := m.read(s, first)
	m.mu.Lock()
	for _, v := range m.slots {
		m.dropLocked(v, err)
		v.cancel()
	}
	m.mu.Unlock()
	m.wg.Wait()
	if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled {
		return nil
	}
	s.log.Info("multiplexed worker stream ended", "error", err)
	return err
}

// read routes the stream's messages to the slots until the stream ends
// or breaks the protocol, and returns why.
func (m *muxStream) read(s *WorkerService, msg *pb.WorkerMessage) error {
	for {
		if err := m.route(s, msg); err != nil {
			return err
		}
		var err error
		if msg, err = m.stream.Recv(); err != nil {
			return err
		}
	}
}

// route hands msg to its slot: a Hello of a free slot opens its session,
// a SlotEnd ends it, any other message goes to its inbox (a message of a
// slot with no session, one that crossed its end, is dropped).
func (m *muxStream) route(s *WorkerService, msg *pb.WorkerMessage) error {
	k := msg.Slot
	if k < 1 || k > maxStreamSlots {
		return fieldErr(codes.InvalidArgument, "slot", "slot %d: every message of a multiplexed stream names its slot, 1..%d", k, maxStreamSlots)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.slots[k]
	if v == nil {
		if msg.GetHello() == nil {
			return nil
		}
		ctx, cancel := context.WithCancel(m.stream.Context())
		v = &slotStream{m: m, slot: k, ctx: ctx, cancel: cancel, in: make(chan *pb.WorkerMessage, slotInbox)}
		m.slots[k] = v
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			err := s.serve(v, msg, true)
			// What the worker sends the slot from now on is dropped, until
			// its next Hello (after the SlotEnd).
			m.mu.Lock()
			if m.slots[k] == v {
				m.dropLocked(v, err)
			}
			m.mu.Unlock()
			v.end(err)
		}()
		return nil
	}
	if msg.GetEnd() != nil {
		// The worker leaves the slot: its session ends as at a stream's
		// end, and the SlotEnd answering says nothing of it follows.
		m.dropLocked(v, status.Error(codes.Canceled, "the worker ended the slot"))
		v.end(nil)
		return nil
	}
	select {
	case v.in <- msg:
	default:
		m.dropLocked(v, status.Errorf(codes.ResourceExhausted, "slot %d has %d messages waiting to be handled: its session is closed", k, slotInbox))
	}
	return nil
}

// dropLocked ends the reading of slot v with err: its session sees err
// next. m.mu is held.
func (m *muxStream) dropLocked(v *slotStream, err error) {
	delete(m.slots, v.slot)
	v.err = err
	close(v.in)
}
