package rpc

import (
	"context"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/auth"
	"github.com/baristahq/barista/leader"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// WorkerService implements pb.WorkerServer. Any node accepts a worker's
// stream; a follower redirects it to the leader. On the leader a hub
// (hub.go) holds the sessions and runs the dispatcher (dispatch.go), the
// heartbeat batcher and the cancel relay (leases.go); it lives exactly as
// long as the leadership.
type WorkerService struct {
	pb.UnimplementedWorkerServer
	base
	mu      sync.Mutex
	hub     *hub
	hubWait chan struct{} // closed when a hub is installed
	// bindings bounds the worker records of each prefix binding
	// (workerbind.go; nil: no bound).
	bindings *bindingRecords
}

func newWorkerService(b base) *WorkerService {
	return &WorkerService{base: b, hubWait: make(chan struct{})}
}

func (s *WorkerService) setHub(h *hub) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hub = h
	if h != nil {
		close(s.hubWait)
	} else {
		s.hubWait = make(chan struct{})
	}
}

// currentHub waits briefly for the hub of a fresh leadership.
func (s *WorkerService) currentHub(ctx context.Context) *hub {
	for i := 0; i < 2; i++ {
		s.mu.Lock()
		h, wait := s.hub, s.hubWait
		s.mu.Unlock()
		if h != nil || !s.node.IsLeader() {
			return h
		}
		select {
		case <-wait:
		case <-time.After(3 * time.Second):
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// lead runs while this node leads (a leader loop: see leader.Establish).
func (s *WorkerService) lead(ctx context.Context) {
	h := newHub(ctx, leader.OnRaft(s.node), s.node.ID(), s.log, s.metrics)
	s.setHub(h)
	h.run(func() { s.setHub(nil) })
}

// Connect serves one worker's stream: one session, or, when its first
// Hello says mux, a session per slot (workermux.go).
func (s *WorkerService) Connect(stream grpc.BidiStreamingServer[pb.WorkerMessage, pb.LeaderMessage]) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	if first.GetHello().GetMux() && s.currentHub(stream.Context()) != nil {
		return s.serveMux(stream, first)
	}
	// A follower answers a multiplexed stream as a stream of one session:
	// it redirects the worker (or refuses it) as a whole.
	return s.serve(stream, first, false)
}

// workerStream is what a session reads and writes: a worker's whole
// stream, or one slot of a multiplexed one.
type workerStream interface {
	Context() context.Context
	Send(*pb.LeaderMessage) error
	Recv() (*pb.WorkerMessage, error)
}

// serve runs the session that first opens, on stream (a slot of a
// multiplexed stream when mux is set, which its Welcome says).
func (s *WorkerService) serve(stream workerStream, first *pb.WorkerMessage, mux bool) error {
	ctx := stream.Context()
	hello := first.GetHello()
	if hello == nil {
		return status.Error(codes.InvalidArgument, "the first message must be Hello")
	}
	size, pool, err := checkHello(hello)
	if err != nil {
		return err
	}
	if id := IdentityFrom(ctx); !id.MayBeWorker(hello.WorkerId) {
		return fieldErr(codes.PermissionDenied, "hello.worker_id", "%q is outside this token's binding (worker_id %q)", hello.WorkerId, id.Worker)
	}
	h := s.currentHub(ctx)
	made := func() {}
	if h != nil {
		if made, err = s.bindings.admit(IdentityFrom(ctx), hello.WorkerId); err != nil {
			return err
		}
	}
	if h == nil {
		id, _ := s.node.Leader()
		if m, ok := s.node.FSM.Member(id); ok && id != s.node.ID() && m.GRPCAddr != "" {
			return stream.Send(&pb.LeaderMessage{Msg: &pb.LeaderMessage_Redirect{Redirect: &pb.Redirect{LeaderId: id, LeaderAddr: m.GRPCAddr}}})
		}
		return status.Error(codes.Unavailable, "no leader is ready; retry")
	}
	sess, err := h.open(hello.WorkerId, size, pool)
	if err != nil {
		s.log.Info("worker session refused", "worker", hello.WorkerId, "pool", poolName(pool), "error", err)
		return err
	}
	defer h.close(sess)
	sess.mux = mux
	if recorded, err := h.hello(ctx, sess, hello); err != nil {
		s.log.Info("worker session refused", "worker", hello.WorkerId, "pool", poolName(pool), "error", err)
		return err
	} else if recorded {
		made() // the session's record counts toward its binding's
	}
	s.log.Info("worker connected", "worker", sess.id, "size", size, "pool", poolName(pool), "running", len(hello.Running),
		"commands", hello.Commands, "kinds", len(hello.Kinds))
	h.welcome(sess, hello)

	sctx, cancel := h.sessionCtx(ctx)
	defer cancel()
	recvErr := make(chan error, 1)
	go func() {
		for {
			msg, err := stream.Recv()
			if err == nil {
				h.touch(sess)
				err = h.handle(sctx, sess, msg)
			}
			if err != nil {
				recvErr <- err
				return
			}
		}
	}()
	// failed is the end of a session closed for its refused reports: the
	// answers queued before it go first.
	failed := func() error {
		err := h.failed(sess)
		if err == nil {
			return nil
		}
		for {
			select {
			case m := <-sess.out:
				if stream.Send(m) != nil {
					return err
				}
			default:
				return err
			}
		}
	}
	for {
		select {
		case m := <-sess.out:
			if err := stream.Send(m); err != nil {
				return err
			}
		case err := <-recvErr:
			if ferr := failed(); ferr != nil {
				return ferr
			}
			s.log.Info("worker stream ended", "worker", sess.id, "error", err)
			if status.Code(err) == codes.Canceled {
				return nil
			}
			return err
		case <-sess.done:
			if err := failed(); err != nil {
				return err
			}
			if h.ctx.Err() != nil {
				// The leadership ended (a transfer, a step-down): the
				// worker reconnects to the next leader, as it should.
				return notLeader("session closed: this node no longer leads; reconnect to the new leader")
			}
			return status.Error(codes.Unavailable, "session closed (a newer stream of this worker replaced a silent one); reconnect")
		case <-s.stopping:
			return notLeader("this node is shutting down; reconnect to another node")
		}
	}
}

// poolName names a pool in logs and messages: "default" for "".
func poolName(pool string) string {
	if pool == "" {
		return sfq.DefaultPoolName
	}
	return pool
}

// ConnectedWorkers counts the workers of pool ("" or "default": the pool
// default) connected to this node's hub, drained ones included; known is
// false off the leader, or before its hub is up.
func (s *WorkerService) ConnectedWorkers(ctx context.Context, pool string) (n int, known bool) {
	h := s.currentHub(ctx)
	if h == nil {
		return 0, false
	}
	if pool == sfq.DefaultPoolName {
		pool = ""
	}
	return h.connected(pool), true
}

// connectedNow counts the workers of pool connected to this node's hub
// without waiting for the hub: 0 off the leader or before its hub is up.
func (s *WorkerService) connectedNow(pool string) int {
	s.mu.Lock()
	h := s.hub
	s.mu.Unlock()
	if h == nil {
		return 0
	}
	if pool == sfq.DefaultPoolName {
		pool = ""
	}
	return h.connected(pool)
}

// GuardPoolDelete is the leader's check before it proposes the PoolDelete
// of pool: a pool is not deleted while a worker of it is connected. It
// refuses with FAILED_PRECONDITION naming the pool and how many of its
// workers are connected (and the first IDs); else no worker of the pool
// may connect until release is called, which the caller does once the
// PoolDelete has applied or failed (a worker refused meanwhile gets
// UNAVAILABLE and retries; once the pool is gone, NOT_FOUND). Off the
// leader, or before its hub is up, it is UNAVAILABLE: the caller forwards
// the delete to the leader first.
func (s *WorkerService) GuardPoolDelete(ctx context.Context, pool string) (release func(), err error) {
	h := s.currentHub(ctx)
	if h == nil {
		return nil, status.Error(codes.Unavailable, "this node is not the leader, or its worker sessions are not up yet; retry")
	}
	if pool == sfq.DefaultPoolName {
		pool = ""
	}
	return h.guardPoolDelete(pool)
}

// ListWorkers lists the leader's sessions and the drained workers.
func (s *WorkerService) ListWorkers(ctx context.Context, req *pb.ListWorkersRequest) (*pb.ListWorkersResponse, error) {
	if resp, handled, err := forward(ctx, &s.base, func(ctx context.Context, cc *grpc.ClientConn) (*pb.ListWorkersResponse, error) {
		return pb.NewWorkerClient(cc).ListWorkers(ctx, req)
	}); handled {
		return resp, err
	}
	out := &pb.ListWorkersResponse{LeaderId: s.node.ID()}
	seen := map[string]bool{}
	if h := s.currentHub(ctx); h != nil {
		h.mu.Lock()
		for _, sess := range h.sessions {
			state := "idle"
			if sess.job != 0 {
				state = "busy"
			}
			info := &pb.WorkerInfo{WorkerId: sess.id, Size: fsm.SizeToPB(sess.size), State: state, Job: uint64(sess.job), Attempt: sess.attempt, Connected: true, Pool: poolName(sess.pool)}
			if !sess.lastHB.IsZero() {
				info.LastHeartbeatMs = sess.lastHB.UnixMilli()
			}
			fsm.WorkerRunsToPB(nil, info) // every job, unless its record says otherwise
			out.Workers = append(out.Workers, info)
			seen[sess.id] = true
		}
		h.mu.Unlock()
	}
	for _, w := range s.node.FSM.Workers() {
		if seen[w.ID] {
			for _, info := range out.Workers {
				if info.WorkerId == w.ID {
					fsm.WorkerRunsToPB(w.Runs, info) // what its record says it runs
					if w.Drained {
						info.Drained, info.State = true, "drained"
					}
				}
			}
			continue
		}
		if w.Drained {
			info := &pb.WorkerInfo{WorkerId: w.ID, Size: fsm.SizeToPB(w.Size), State: "drained", Drained: true, Pool: poolName(w.Pool)}
			fsm.WorkerRunsToPB(w.Runs, info)
			out.Workers = append(out.Workers, info)
		}
	}
	sort.Slice(out.Workers, func(i, j int) bool { return out.Workers[i].WorkerId < out.Workers[j].WorkerId })
	return out, nil
}

// Drain stops (or resumes) new assignments to a worker. It takes the
// write path of every write (base.commit): the caller's write rate, and
// no entry for a drain that changes nothing; a drain that would make a
// record is held to the records of the caller's binding
// (workerbind.go) and the cluster's max_worker_records.
func (s *WorkerService) Drain(ctx context.Context, req *pb.DrainRequest) (*pb.DrainResponse, error) {
	if err := sfq.ValidateName("worker_id", req.WorkerId); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if id := IdentityFrom(ctx); !id.MayDrain(req.WorkerId) {
		if id.Worker == "" {
			return nil, fieldErr(codes.PermissionDenied, "worker_id", "draining worker %q needs an admin token or that worker's own token (a worker token bound to it); this worker token is bound to no worker ID", req.WorkerId)
		}
		return nil, fieldErr(codes.PermissionDenied, "worker_id", "draining worker %q needs an admin token or that worker's own token; this token is bound to worker_id %q", req.WorkerId, id.Worker)
	}
	cmd := &clusterpb.Command{Cmd: &clusterpb.Command_WorkerDrain{WorkerDrain: &clusterpb.WorkerDrain{WorkerId: req.WorkerId, Drain: !req.Undrain}}}
	if err := s.edgeCheck(cmd); err != nil {
		return nil, err
	}
	if resp, handled, err := forward(ctx, &s.base, func(ctx context.Context, cc *grpc.ClientConn) (*pb.DrainResponse, error) {
		return pb.NewWorkerClient(cc).Drain(ctx, req)
	}); handled {
		return resp, err
	}
	if req.Create && IdentityFrom(ctx).Role != auth.RoleAdmin {
		// A worker token may drain its workers as they are; only an admin
		// makes the record of a worker that never connected (each one
		// stays in the state).
		return nil, fieldErr(codes.PermissionDenied, "create", "draining a worker before it first connects needs an admin token")
	}
	h := s.currentHub(ctx)
	if !req.Create {
		_, known := s.node.FSM.Worker(req.WorkerId)
		if !known && h != nil {
			h.mu.Lock()
			known = h.sessions[req.WorkerId] != nil
			h.mu.Unlock()
		}
		if !known {
			return nil, fieldErr(codes.NotFound, "worker_id", "no worker %q is connected or known (create=true drains it before it first connects)", req.WorkerId)
		}
	}
	made, err := s.bindings.admit(IdentityFrom(ctx), req.WorkerId)
	if err != nil {
		return nil, err
	}
	res, err := s.commit(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if res.Outcome != sfq.Duplicate {
		made()
	}
	if h != nil {
		h.poke()
	}
	return &pb.DrainResponse{}, nil
}
