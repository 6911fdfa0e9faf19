package worker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/baristahq/barista/internal/wire"
	pb "github.com/baristahq/barista/proto"
)

// leaderStream is an agent's stream to a server: a gRPC stream of its
// own, or its slot of the stream its Worker shares (muxDialer).
type leaderStream interface {
	Send(*pb.WorkerMessage) error
	Recv() (*pb.LeaderMessage, error)
	// Close ends the agent's use of the stream; err is why its session
	// ended (nil: it did not fail).
	Close(err error)
}

// plainStream is a stream of one session on a connection of its own.
type plainStream struct {
	grpc.BidiStreamingClient[pb.WorkerMessage, pb.LeaderMessage]
	cc *grpc.ClientConn
}

func (p *plainStream) Close(error) { p.cc.Close() }

// openPlain opens a stream of one session to addr; it ends with ctx.
func openPlain(ctx context.Context, addr string, dial []grpc.DialOption) (leaderStream, error) {
	cc, err := grpc.NewClient(addr, slices.Concat(dial, wire.StaticWindows)...)
	if err != nil {
		return nil, err
	}
	stream, err := pb.NewWorkerClient(cc).Connect(ctx)
	if err != nil {
		cc.Close()
		return nil, err
	}
	return &plainStream{BidiStreamingClient: stream, cc: cc}, nil
}

// The slots of a multiplexed stream (the leader's bound), and how many
// leader messages one slot may have waiting: an agent reads its own at
// once, so a slot that has this many is stuck, and its session ends (the
// others go on).
const (
	maxStreamSlots = 1024
	slotInbox      = 64
)

// plainFor is how long an address whose leader did not multiplex a
// stream (a leader of an earlier build) gets streams of one session
// before the next stream tries again.
const plainFor = time.Minute

// muxDialer gives the agents of one Worker their streams: slots of one
// shared stream per server address, opened by the first agent that
// connects and closed when the last leaves. The first slot's Hello asks
// for a multiplexed stream (Hello.mux); a leader of an earlier build
// serves it as that slot's session alone (its Welcome does not say mux),
// and the other agents then open streams of their own, as before.
type muxDialer struct {
	dial []grpc.DialOption
	log  *slog.Logger

	// born is when the dialer was made: the slots' heartbeats go at
	// born + k * interval (untilBeat), each process at its own phase.
	born time.Time

	mu    sync.Mutex
	conns map[string]*muxConn
	plain map[string]time.Time // address -> when its leader did not multiplex
}

func newMuxDialer(dial []grpc.DialOption, log *slog.Logger) *muxDialer {
	return &muxDialer{dial: dial, log: log, born: time.Now(), conns: map[string]*muxConn{}, plain: map[string]time.Time{}}
}

// untilBeat is the time from now to the slots' next heartbeat, of
// interval.
func (d *muxDialer) untilBeat(interval time.Duration) time.Duration {
	if interval <= 0 {
		return time.Second
	}
	return interval - time.Since(d.born)%interval
}

// muxConn is one shared stream.
type muxConn struct {
	d      *muxDialer
	addr   string
	cc     *grpc.ClientConn
	stream grpc.BidiStreamingClient[pb.WorkerMessage, pb.LeaderMessage]
	cancel context.CancelFunc
	sendMu sync.Mutex
	// decided is closed once the leader's first answer says whether it
	// multiplexes (mux); redirect is that answer if it was a Redirect.
	// done is closed when the stream ends, err saying why.
	decided  chan struct{}
	done     chan struct{}
	lastRecv atomic.Int64 // when the last message came (Unix nanoseconds)
	mux      bool
	redirect *pb.LeaderMessage
	err      error

	mu    sync.Mutex // guards what follows
	slots map[uint32]*muxSlot
	// owner is the slot that opened the stream, while the leader has not
	// answered, and for good if it did not multiplex (the stream is then
	// that slot's alone).
	owner *muxSlot
	refs  int
}

// muxSlot is one agent's slot of a shared stream.
type muxSlot struct {
	c    *muxConn
	slot uint32
	ctx  context.Context
	in   chan *pb.LeaderMessage // closed when the slot ends, err saying why
	err  error
	// ended: in is closed. left: the leader's session of the slot is over
	// (its SlotEnd came, or the stream ended). closing: the agent left
	// and its SlotEnd went out, the leader's answer is awaited. released
	// is closed when the slot may be opened again on this stream.
	ended    bool
	left     bool
	closing  bool
	released chan struct{}
}

// open returns slot's stream to addr for an agent; it ends with ctx.
func (d *muxDialer) open(ctx context.Context, addr string, slot uint32) (leaderStream, error) {
	for {
		d.mu.Lock()
		if at, ok := d.plain[addr]; ok && time.Since(at) < plainFor {
			d.mu.Unlock()
			return openPlain(ctx, addr, d.dial)
		}
		c := d.conns[addr]
		if c == nil {
			_, s, err := d.start(ctx, addr, slot)
			d.mu.Unlock()
			if err != nil {
				return nil, err
			}
			return s, nil
		}
		d.mu.Unlock()
		// Wait for the leader's first answer, or the stream's end.
		select {
		case <-c.decided:
		case <-c.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		select {
		case <-c.done:
			if !c.decidedNow() {
				return nil, c.err
			}
		default:
		}
		if c.redirect != nil {
			return &redirectOnly{m: c.redirect}, nil
		}
		if !c.mux {
			continue // the address is marked plain, or the stream is gone
		}
		c.mu.Lock()
		old := c.slots[slot]
		if old == nil {
			d.mu.Lock()
			live := d.conns[addr] == c
			d.mu.Unlock()
			if live {
				s := c.attachLocked(ctx, slot)
				c.mu.Unlock()
				return s, nil
			}
			c.mu.Unlock()
			continue
		}
		c.mu.Unlock()
		// The slot's previous session is still closing on this stream.
		select {
		case <-old.released:
		case <-c.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// start opens a shared stream to addr, slot its first; d.mu is held.
func (d *muxDialer) start(ctx context.Context, addr string, slot uint32) (*muxConn, *muxSlot, error) {
	cc, err := grpc.NewClient(addr, slices.Concat(d.dial, wire.StaticWindows)...)
	if err != nil {
		return nil, nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	stream, err := pb.NewWorkerClient(cc).Connect(sctx)
	if err != nil {
		cancel()
		cc.Close()
		return nil, nil, err
	}
	c := &muxConn{d: d, addr: addr, cc: cc, stream: stream, cancel: cancel, decided: make(chan struct{}), done: make(chan struct{}),
		slots: map[uint32]*muxSlot{}}
	s := c.attachLocked(ctx, slot)
	c.owner = s
	d.conns[addr] = c
	go c.read()
	return c, s, nil
}

func (c *muxConn) decidedNow() bool {
	select {
	case <-c.decided:
		return true
	default:
		return false
	}
}

// attachLocked adds slot to the stream (c.mu is held, or the stream is
// not read yet).
func (c *muxConn) attachLocked(ctx context.Context, slot uint32) *muxSlot {
	s := &muxSlot{c: c, slot: slot, ctx: ctx, in: make(chan *pb.LeaderMessage, slotInbox), released: make(chan struct{})}
	c.slots[slot] = s
	c.refs++
	return s
}

// read hands the stream's messages to the slots until it ends.
func (c *muxConn) read() {
	for {
		m, err := c.stream.Recv()
		if err != nil {
			c.end(err)
			return
		}
		c.lastRecv.Store(time.Now().UnixNano())
		c.route(m)
	}
}

// route hands m to its slot; the leader's first answer decides whether
// the stream is multiplexed.
func (c *muxConn) route(m *pb.LeaderMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.decidedNow() {
		c.mux = m.GetWelcome().GetMux() || m.GetEnd() != nil
		if !c.mux {
			if m.GetRedirect() != nil {
				c.redirect = m
			} else {
				c.d.log.Info("the leader does not multiplex slots on one stream (an earlier build): each slot opens a stream of its own", "server", c.addr)
				c.d.mu.Lock()
				c.d.plain[c.addr] = time.Now()
				c.d.mu.Unlock()
			}
			c.d.mu.Lock()
			if c.d.conns[c.addr] == c {
				delete(c.d.conns, c.addr)
			}
			c.d.mu.Unlock()
		} else {
			c.owner = nil
		}
		close(c.decided)
	}
	s := c.owner
	if s == nil {
		s = c.slots[m.Slot]
	}
	if s == nil {
		return // a message that crossed its slot's end
	}
	if e := m.GetEnd(); e != nil && c.owner == nil {
		s.endLocked(slotEndErr(e))
		s.left = true
		delete(c.slots, s.slot)
		close(s.released)
		return
	}
	if s.ended {
		return // a message that crossed the slot's end
	}
	select {
	case s.in <- m:
	default:
		s.endLocked(status.Errorf(codes.ResourceExhausted, "slot %d has %d messages of the leader waiting: its session is closed", s.slot, slotInbox))
	}
}

// slotEndErr is the error a SlotEnd from the leader ends its slot's
// session with.
func slotEndErr(e *pb.SlotEnd) error {
	if len(e.Status) == 0 {
		return io.EOF
	}
	var st spb.Status
	if err := proto.Unmarshal(e.Status, &st); err != nil {
		return status.Errorf(codes.Internal, "the leader ended the slot with a status that does not decode: %v", err)
	}
	if st.Code == int32(codes.OK) {
		return io.EOF
	}
	return status.FromProto(&st).Err()
}

// end ends every slot with the stream's error.
func (c *muxConn) end(err error) {
	c.d.mu.Lock()
	if c.d.conns[c.addr] == c {
		delete(c.d.conns, c.addr)
	}
	c.d.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
	for k, s := range c.slots {
		s.endLocked(err)
		s.left = true
		delete(c.slots, k)
		close(s.released)
	}
	close(c.done)
}

// endLocked closes s's inbox with err; c.mu is held.
func (s *muxSlot) endLocked(err error) {
	if s.ended {
		return
	}
	s.ended, s.err = true, err
	close(s.in)
}

// Send writes m as the slot's: every Hello asks for a multiplexed stream.
func (s *muxSlot) Send(m *pb.WorkerMessage) error {
	if h := m.GetHello(); h != nil {
		h.Mux = true
	}
	m.Slot = s.slot
	c := s.c
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	select {
	case <-c.done:
		return c.err
	default:
	}
	return c.stream.Send(m)
}

// Recv returns the slot's next message, the slot's end, or ctx's.
func (s *muxSlot) Recv() (*pb.LeaderMessage, error) {
	select {
	case m, ok := <-s.in:
		if ok {
			return m, nil
		}
		return nil, s.err
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}

// Close leaves the stream: a slot whose session the leader has not ended
// sends SlotEnd, and the slot is free again once the leader answers. The
// last slot to leave closes the stream, and so does a slot whose session
// ended for want of an answer when nothing has come on the stream for a
// handshake's time (the stream looks open, but its server is gone or cut
// off: every slot reconnects).
func (s *muxSlot) Close(err error) {
	c := s.c
	var quiet silent
	if errors.As(err, &quiet) && time.Since(time.Unix(0, c.lastRecv.Load())) > handshakeTimeout {
		c.d.log.Warn("nothing from the server on the slots' stream: closing it", "server", c.addr, "slot", s.slot, "error", err)
		defer c.close()
	}
	c.mu.Lock()
	owned := c.owner == s
	switch {
	case owned:
		// A stream of this slot alone (or not shared yet): it closes.
		if !s.left {
			s.left = true
			delete(c.slots, s.slot)
			close(s.released)
		}
	case !s.left && !s.closing:
		s.endLocked(io.EOF)
		s.closing = true
		go func() {
			c.sendMu.Lock()
			defer c.sendMu.Unlock()
			_ = c.stream.Send(&pb.WorkerMessage{Msg: &pb.WorkerMessage_End{End: &pb.SlotEnd{}}, Slot: s.slot})
		}()
	}
	c.refs--
	last := c.refs == 0
	c.mu.Unlock()
	if last || owned {
		c.close()
	}
}

// close ends the shared stream and its connection.
func (c *muxConn) close() {
	c.d.mu.Lock()
	if c.d.conns[c.addr] == c {
		delete(c.d.conns, c.addr)
	}
	c.d.mu.Unlock()
	c.cancel()
	c.cc.Close()
}

// redirectOnly is what an agent gets that waited for a shared stream
// whose server redirected it: that Redirect, then the stream's end.
type redirectOnly struct {
	m    *pb.LeaderMessage
	read bool
}

func (r *redirectOnly) Send(*pb.WorkerMessage) error { return nil }

func (r *redirectOnly) Recv() (*pb.LeaderMessage, error) {
	if r.read {
		return nil, io.EOF
	}
	r.read = true
	return r.m, nil
}

func (r *redirectOnly) Close(error) {}
