package rpc

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"barista/fsm"
	pb "barista/proto"
	"barista/sfq"
)

// WorkerService implements pb.WorkerServer. Any node accepts a worker's
// stream; a follower redirects it to the leader. On the leader a hub holds
// the sessions and runs the dispatcher, the heartbeat batcher, the cancel
// relay and the reaper; it lives exactly as long as the leadership.
type WorkerService struct {
	pb.UnimplementedWorkerServer
	base
	mu      sync.Mutex
	hub     *hub
	hubWait chan struct{} // closed when a hub is installed
}

func newWorkerService(b base) *WorkerService {
	s := &WorkerService{base: b, hubWait: make(chan struct{})}
	b.node.OnLeader("workers", s.lead)
	return s
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

// lead runs while this node leads.
func (s *WorkerService) lead(ctx context.Context) {
	h := &hub{svc: s, ctx: ctx, sessions: map[string]*session{}, wake: make(chan struct{}, 1), pending: map[string]*pendingHB{}}
	s.setHub(h)
	var wg sync.WaitGroup
	for _, loop := range []func(){h.dispatcher, h.heartbeats, h.cancels, h.reaper} {
		wg.Add(1)
		go func() { defer wg.Done(); loop() }()
	}
	<-ctx.Done()
	s.setHub(nil)
	h.closeAll()
	wg.Wait()
}

// session is one worker's stream on the leader.
type session struct {
	id    string
	size  sfq.Size
	out   chan *pb.LeaderMessage
	done  chan struct{}
	once  sync.Once
	since time.Time

	// Guarded by hub.mu.
	credit  uint64
	ready   bool
	readyAt time.Time
	job     sfq.JobID
	attempt uint32
	lastHB  time.Time
	lastMsg time.Time // the last message of the worker (Hello included)
}

func (s *session) end() { s.once.Do(func() { close(s.done) }) }

// send queues a message; a worker too slow to read loses its session.
func (s *session) send(m *pb.LeaderMessage) {
	select {
	case s.out <- m:
	case <-s.done:
	default:
		s.end()
	}
}

type pendingHB struct {
	sess *session
	hb   *pb.JobHeartbeat
}

type hub struct {
	svc *WorkerService
	ctx context.Context

	mu       sync.Mutex
	sessions map[string]*session
	pending  map[string]*pendingHB // the latest heartbeat of each worker not yet replicated
	wake     chan struct{}
}

func (h *hub) poke() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

func (h *hub) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.sessions {
		s.end()
	}
}

// open starts a session for worker id. A worker ID has one session: a
// second one is refused (ABORTED, which the worker retries) while the
// first is live, so that nobody can take over a worker's session, its
// job and its report. A session silent for two heartbeat intervals (a
// worker that vanished without its stream ending, e.g. cut off) is
// ended, and the new one wins.
func (h *hub) open(id string, size sfq.Size) (*session, error) {
	now := time.Now()
	limit := 2 * time.Duration(h.svc.node.FSM.Config().HeartbeatIntervalMs) * time.Millisecond
	s := &session{id: id, size: size, out: make(chan *pb.LeaderMessage, 256), done: make(chan struct{}), since: now, lastMsg: now}
	h.mu.Lock()
	defer h.mu.Unlock()
	if old := h.sessions[id]; old != nil {
		if silent := now.Sub(old.lastMsg); silent < limit {
			return nil, status.Errorf(codes.Aborted, "worker %q has a live session (its last message came %s ago); "+
				"another is refused until that one has been silent for %s (two heartbeat intervals); retry later",
				id, silent.Round(time.Millisecond), limit)
		}
		h.svc.log.Warn("ending a silent session: a new stream of its worker replaces it", "worker", id, "silent", now.Sub(old.lastMsg).Round(time.Millisecond))
		old.end()
	}
	h.sessions[id] = s
	return s, nil
}

// touch records that s's worker just sent a message.
func (h *hub) touch(s *session) {
	h.mu.Lock()
	s.lastMsg = time.Now()
	h.mu.Unlock()
}

func (h *hub) close(s *session) {
	s.end()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sessions[s.id] == s {
		delete(h.sessions, s.id)
		delete(h.pending, s.id)
	}
}

func (h *hub) setJob(s *session, job sfq.JobID, attempt uint32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s.job, s.attempt = job, attempt
}

// clearJob forgets s's job if it is still (job, attempt).
func (h *hub) clearJob(s *session, job sfq.JobID, attempt uint32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.job == job && s.attempt == attempt {
		s.job, s.attempt = 0, 0
	}
	if p := h.pending[s.id]; p != nil && p.sess == s && sfq.JobID(p.hb.Job) == job {
		delete(h.pending, s.id)
	}
}

func reject(job uint64, attempt uint32, reason string) *pb.LeaderMessage {
	return &pb.LeaderMessage{Msg: &pb.LeaderMessage_Reject{Reject: &pb.Reject{Job: job, Attempt: attempt, Reason: reason}}}
}

func cancelOrder(j *sfq.Job, cfg fsm.Config) *pb.LeaderMessage {
	return &pb.LeaderMessage{Msg: &pb.LeaderMessage_Cancel{Cancel: &pb.CancelOrder{
		Job: uint64(j.ID), Attempt: j.Attempt, Reason: j.Cancel.String(), GraceMs: cfg.CancelGraceMs}}}
}

// Connect serves one worker's stream.
func (s *WorkerService) Connect(stream grpc.BidiStreamingServer[pb.WorkerMessage, pb.LeaderMessage]) error {
	ctx := stream.Context()
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	hello := first.GetHello()
	if hello == nil {
		return status.Error(codes.InvalidArgument, "the first message must be Hello")
	}
	size, err := checkHello(hello)
	if err != nil {
		return err
	}
	if id := IdentityFrom(ctx); !id.MayBeWorker(hello.WorkerId) {
		return status.Errorf(codes.PermissionDenied, "hello.worker_id: %q is outside this token's binding (worker_id %q)", hello.WorkerId, id.Worker)
	}
	h := s.currentHub(ctx)
	if h == nil {
		id, _ := s.node.Leader()
		if m, ok := s.node.FSM.Member(id); ok && id != s.node.ID() && m.GRPCAddr != "" {
			return stream.Send(&pb.LeaderMessage{Msg: &pb.LeaderMessage_Redirect{Redirect: &pb.Redirect{LeaderId: id, LeaderAddr: m.GRPCAddr}}})
		}
		return status.Error(codes.Unavailable, "no leader is ready; retry")
	}
	sess, err := h.open(hello.WorkerId, size)
	if err != nil {
		s.log.Info("second session of a worker refused", "worker", hello.WorkerId, "error", err)
		return err
	}
	defer h.close(sess)
	s.log.Info("worker connected", "worker", sess.id, "size", size, "running", len(hello.Running))
	h.welcome(sess, hello)

	recvErr := make(chan error, 1)
	go func() {
		for {
			msg, err := stream.Recv()
			if err == nil {
				h.touch(sess)
				err = h.handle(ctx, sess, msg)
			}
			if err != nil {
				recvErr <- err
				return
			}
		}
	}()
	for {
		select {
		case m := <-sess.out:
			if err := stream.Send(m); err != nil {
				return err
			}
		case err := <-recvErr:
			s.log.Info("worker stream ended", "worker", sess.id, "error", err)
			if status.Code(err) == codes.Canceled {
				return nil
			}
			return err
		case <-sess.done:
			return status.Error(codes.Unavailable, "session closed (leadership changed, or a newer stream of this worker replaced a silent one); reconnect")
		case <-s.stopping:
			return status.Error(codes.Unavailable, "this node is shutting down; reconnect to another node")
		}
	}
}

// welcome resumes the leases the worker still holds, rejects the rest,
// and sends Welcome with the replicated intervals and pending cancels.
func (h *hub) welcome(s *session, hello *pb.Hello) {
	f := h.svc.node.FSM
	cfg := f.Config()
	welcome := &pb.Welcome{HeartbeatIntervalMs: cfg.HeartbeatIntervalMs, SelfKillAfterMs: cfg.SelfKillAfterMs, LeaderId: h.svc.node.ID()}
	var rejects []*pb.LeaderMessage
	for _, r := range hello.Running {
		j, _, ok := f.Job(sfq.JobID(r.Job))
		switch {
		case r.Finished:
			// Its Finished follows; Apply decides whether it is accepted.
		case ok && j.State.Live() && j.Worker == s.id && j.Attempt == r.Attempt:
			h.setJob(s, j.ID, j.Attempt)
			if j.Cancel != sfq.CancelNone {
				welcome.PendingCancels = append(welcome.PendingCancels, cancelOrder(&j, cfg).GetCancel())
			}
		default:
			rejects = append(rejects, reject(r.Job, r.Attempt, "the cluster no longer gives this worker that attempt"))
		}
	}
	s.send(&pb.LeaderMessage{Msg: &pb.LeaderMessage_Welcome{Welcome: welcome}})
	for _, m := range rejects {
		s.send(m)
	}
}

// proposeCtx ends when the stream or the leadership does.
func (h *hub) proposeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	stop := context.AfterFunc(h.ctx, cancel)
	return c, func() { stop(); cancel() }
}

// handle processes one message of a worker, in stream order. Every field
// is checked (checkMessage) before anything is proposed, and every
// command names the session's worker ID, never one the message claims.
func (h *hub) handle(ctx context.Context, s *session, msg *pb.WorkerMessage) error {
	msg, refused, err := checkMessage(msg)
	if err != nil {
		return err
	}
	if refused != "" {
		job, attempt := reportRef(msg)
		h.svc.metrics.unproposed.WithLabelValues(messageName(msg), "invalid").Inc()
		h.svc.log.Warn("invalid worker report refused", "worker", s.id, "job", job, "attempt", attempt, "error", refused)
		h.clearJob(s, sfq.JobID(job), attempt)
		s.send(reject(job, attempt, "invalid report: "+refused))
		return nil
	}
	switch m := msg.Msg.(type) {
	case *pb.WorkerMessage_Ready:
		h.mu.Lock()
		s.credit, s.ready, s.readyAt = m.Ready.Credit, true, time.Now()
		h.mu.Unlock()
		h.poke()
		return nil
	case *pb.WorkerMessage_Heartbeat:
		hb := m.Heartbeat
		h.mu.Lock()
		s.lastHB = time.Now()
		if hb.Job != 0 {
			h.pending[s.id] = &pendingHB{sess: s, hb: hb}
		}
		h.mu.Unlock()
		if hb.Job == 0 {
			// An idle slot's heartbeat renews nothing: acknowledge at once.
			s.send(&pb.LeaderMessage{Msg: &pb.LeaderMessage_HeartbeatAck{HeartbeatAck: &pb.HeartbeatAck{Seq: hb.Seq}}})
		}
		return nil
	case *pb.WorkerMessage_Started:
		st := m.Started
		switch known, out := h.precheck(sfq.EvStart, st.Job, st.Attempt, s.id); {
		case !known:
			h.unknownJob(s, "started", st.Job, st.Attempt)
			return nil
		case out == sfq.Duplicate: // already started: Apply could only say so again
			h.svc.metrics.unproposed.WithLabelValues("started", "repeat").Inc()
			h.setJob(s, sfq.JobID(st.Job), st.Attempt)
			return nil
		}
		pctx, cancel := h.proposeCtx(ctx)
		defer cancel()
		res, err := h.svc.propose(pctx, startedCommand(s.id, st))
		if err != nil {
			return err
		}
		switch res[0].Outcome {
		case sfq.Changed, sfq.Duplicate:
			h.setJob(s, sfq.JobID(st.Job), st.Attempt)
		default:
			h.svc.metrics.fenced.WithLabelValues("started").Inc()
			s.send(reject(st.Job, st.Attempt, res[0].Msg))
		}
		return nil
	case *pb.WorkerMessage_Finished:
		fin := m.Finished
		switch known, out := h.precheck(sfq.EvFinish, fin.Job, fin.Attempt, s.id); {
		case !known:
			h.clearJob(s, sfq.JobID(fin.Job), fin.Attempt)
			h.unknownJob(s, "finished", fin.Job, fin.Attempt)
			return nil
		case out == sfq.Duplicate:
			// The CPU of a (job, attempt) is billed once: a report the
			// state shows settled (accepted, or billed as a zombie's) is
			// acknowledged as Apply would, without a log entry.
			h.clearJob(s, sfq.JobID(fin.Job), fin.Attempt)
			h.svc.metrics.unproposed.WithLabelValues("finished", "repeat").Inc()
			s.send(&pb.LeaderMessage{Msg: &pb.LeaderMessage_FinishedAck{FinishedAck: &pb.FinishedAck{Job: fin.Job, Attempt: fin.Attempt}}})
			return nil
		}
		pctx, cancel := h.proposeCtx(ctx)
		defer cancel()
		res, err := h.svc.propose(pctx, finishedCommand(s.id, fin))
		if err != nil {
			return err
		}
		h.clearJob(s, sfq.JobID(fin.Job), fin.Attempt)
		switch r := res[0]; r.Outcome {
		case sfq.Changed, sfq.Duplicate:
			s.send(&pb.LeaderMessage{Msg: &pb.LeaderMessage_FinishedAck{FinishedAck: &pb.FinishedAck{Job: fin.Job, Attempt: fin.Attempt}}})
		case sfq.Zombie:
			h.svc.metrics.fenced.WithLabelValues("finished").Inc()
			h.svc.log.Warn("late report of a stale attempt: CPU billed, result dropped", "worker", s.id, "job", fin.Job, "attempt", fin.Attempt, "cpu_ms", fin.CpuMs)
			s.send(reject(fin.Job, fin.Attempt, "stale attempt: its CPU was billed, its result dropped"))
		default:
			h.svc.metrics.fenced.WithLabelValues("finished").Inc()
			s.send(reject(fin.Job, fin.Attempt, r.Msg))
		}
		return nil
	}
	return status.Error(codes.InvalidArgument, "empty worker message") // checkMessage let through a kind it does not know
}

// precheck reads what Apply would do with a report of (job, attempt) by
// worker, from the leader's applied state: known is false for a job the
// state does not hold (never submitted, or pruned), which no proposal
// could change. Only answers that cannot change before the report would
// apply are acted on: a Duplicate stays one (an attempt once started or
// settled stays so).
func (h *hub) precheck(kind sfq.EventKind, job uint64, attempt uint32, worker string) (known bool, out sfq.Outcome) {
	j, _, ok := h.svc.node.FSM.Job(sfq.JobID(job))
	if !ok {
		return false, 0
	}
	_, out = sfq.Apply(j.Life, sfq.Event{Kind: kind, Attempt: attempt, Worker: worker})
	return true, out
}

// unknownJob rejects a report of a job the state does not hold.
func (h *hub) unknownJob(s *session, message string, job uint64, attempt uint32) {
	h.svc.metrics.unproposed.WithLabelValues(message, "unknown_job").Inc()
	s.send(reject(job, attempt, fmt.Sprintf("job %d is unknown (never submitted, or pruned)", job)))
}

// messageName names a worker message's kind for metrics and logs.
func messageName(msg *pb.WorkerMessage) string {
	switch msg.GetMsg().(type) {
	case *pb.WorkerMessage_Hello:
		return "hello"
	case *pb.WorkerMessage_Ready:
		return "ready"
	case *pb.WorkerMessage_Started:
		return "started"
	case *pb.WorkerMessage_Heartbeat:
		return "heartbeat"
	case *pb.WorkerMessage_Finished:
		return "finished"
	}
	return "empty"
}

// maxDispatchBatch bounds the Dispatch commands of one round (one entry).
const maxDispatchBatch = 512

// dispatcher gives ready workers jobs whenever the state machine shows
// eligible work, one log entry per round.
func (h *hub) dispatcher() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		changed := h.svc.node.FSM.Changed()
		for h.dispatchRound() {
		}
		select {
		case <-h.ctx.Done():
			return
		case <-h.wake:
		case <-changed:
		case <-tick.C:
		}
	}
}

// dispatchRound proposes one Dispatch per ready worker that can take a job
// now, smallest workers first (so small jobs go to small containers when
// both are free), within the state machine's dispatch budget. It reports
// whether any job was assigned.
func (h *hub) dispatchRound() bool {
	f := h.svc.node.FSM
	h.mu.Lock()
	var ready []*session
	for _, s := range h.sessions {
		if s.ready {
			ready = append(ready, s)
		}
	}
	h.mu.Unlock()
	if len(ready) == 0 {
		return false
	}
	sort.Slice(ready, func(i, j int) bool {
		if ready[i].size != ready[j].size {
			return ready[i].size < ready[j].size
		}
		return ready[i].id < ready[j].id
	})
	var cmds []*pb.Command
	var who []*session
	used := 0
	for _, s := range ready {
		if len(cmds) == maxDispatchBatch || used >= f.DispatchBudget(s.size) {
			continue
		}
		if w, ok := f.Worker(s.id); ok {
			if w.Drained {
				continue
			}
			if w.Job != 0 {
				if j, _, ok := f.Job(w.Job); ok && j.State.Live() && j.Worker == s.id && j.Attempt == w.Attempt {
					continue // still holds a job; its Finished is not in yet
				}
			}
		}
		h.mu.Lock()
		credit := s.credit
		h.mu.Unlock()
		cmds = append(cmds, &pb.Command{Cmd: &pb.Command_Dispatch{Dispatch: &pb.Dispatch{WorkerId: s.id, Size: fsm.SizeToPB(s.size), Credit: credit}}})
		who = append(who, s)
		used++
	}
	if len(cmds) == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	res, err := h.svc.propose(ctx, cmds...)
	if err != nil {
		h.svc.log.Warn("dispatch round failed", "workers", len(cmds), "error", err)
		return false
	}
	progress := false
	for i, r := range res {
		s := who[i]
		if !r.Assigned {
			continue
		}
		j, tenant, ok := f.Job(r.Job)
		if !ok {
			continue
		}
		h.mu.Lock()
		s.ready, s.job, s.attempt = false, r.Job, r.Attempt
		waited := time.Since(s.readyAt)
		h.mu.Unlock()
		h.svc.metrics.dispatchLatency.Observe(waited.Seconds())
		s.send(&pb.LeaderMessage{Msg: &pb.LeaderMessage_Assign{Assign: &pb.Assign{
			Job: uint64(j.ID), Attempt: r.Attempt, TimeoutMs: j.TimeoutMs, Payload: []byte(j.Payload()), Tenant: tenant,
			Size: fsm.SizeToPB(j.Size), Credit: cmds[i].GetDispatch().Credit, EstCostMs: j.EstCostMs}}})
		progress = true
	}
	return progress
}

// heartbeats replicates the pending lease renewals as one batch per
// heartbeat interval, then acknowledges them (and re-sends pending
// cancels); a fenced heartbeat is answered with Reject.
func (h *hub) heartbeats() {
	for {
		interval := time.Duration(h.svc.node.FSM.Config().HeartbeatIntervalMs) * time.Millisecond
		select {
		case <-h.ctx.Done():
			return
		case <-time.After(max(interval, 20*time.Millisecond)):
		}
		h.mu.Lock()
		batch := make([]*pendingHB, 0, len(h.pending))
		for _, p := range h.pending {
			batch = append(batch, p)
		}
		h.pending = map[string]*pendingHB{}
		h.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		sort.Slice(batch, func(i, j int) bool { return batch[i].sess.id < batch[j].sess.id })
		hbs := make([]*pb.Heartbeat, len(batch))
		for i, p := range batch {
			hbs[i] = &pb.Heartbeat{Job: p.hb.Job, Attempt: p.hb.Attempt, WorkerId: p.sess.id, CpuMs: p.hb.CpuMs}
		}
		ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
		res, err := h.svc.propose(ctx, &pb.Command{Cmd: &pb.Command_Heartbeats{Heartbeats: &pb.HeartbeatBatch{Heartbeats: hbs}}})
		cancel()
		if err != nil {
			h.svc.log.Warn("heartbeat batch failed", "heartbeats", len(hbs), "error", err)
			continue
		}
		cfg := h.svc.node.FSM.Config()
		for i, out := range res[0].HeartbeatOutcomes {
			p := batch[i]
			job, attempt := sfq.JobID(p.hb.Job), p.hb.Attempt
			switch out {
			case sfq.Changed, sfq.Duplicate:
				p.sess.send(&pb.LeaderMessage{Msg: &pb.LeaderMessage_HeartbeatAck{HeartbeatAck: &pb.HeartbeatAck{Seq: p.hb.Seq}}})
				if j, _, ok := h.svc.node.FSM.Job(job); ok && j.State.Live() && j.Cancel != sfq.CancelNone {
					p.sess.send(cancelOrder(&j, cfg))
				}
			default:
				h.mu.Lock()
				current := p.sess.job == job && p.sess.attempt == attempt
				if current {
					p.sess.job, p.sess.attempt = 0, 0
				}
				h.mu.Unlock()
				if current {
					h.svc.metrics.fenced.WithLabelValues("heartbeat").Inc()
					p.sess.send(reject(p.hb.Job, attempt, "lease no longer held: "+out.String()))
				}
			}
		}
	}
}

// cancels sends a CancelOrder to the worker of every job whose cancel
// was just committed.
func (h *hub) cancels() {
	f := h.svc.node.FSM
	_, cursor := f.Events(^uint64(0), func(*fsm.Event) bool { return false })
	for {
		changed := f.Changed()
		var jobs []sfq.JobID
		first, next := f.Events(cursor, func(ev *fsm.Event) bool {
			if ev.Kind == fsm.EvCancelRequested {
				jobs = append(jobs, ev.Job)
			}
			return true
		})
		cursor = max(next, first)
		if len(jobs) > 0 {
			cfg := f.Config()
			for _, id := range jobs {
				j, _, ok := f.Job(id)
				if !ok || !j.State.Live() {
					continue
				}
				h.mu.Lock()
				s := h.sessions[j.Worker]
				h.mu.Unlock()
				if s != nil {
					s.send(cancelOrder(&j, cfg))
				}
			}
		}
		select {
		case <-h.ctx.Done():
			return
		case <-changed:
		}
	}
}

// reaper proposes an Expire for every passed deadline; Apply re-checks.
func (h *hub) reaper() {
	f := h.svc.node.FSM
	for {
		cfg := f.Config()
		period := time.Duration(min(cfg.Sched.AckTimeoutMs, cfg.Sched.LeaseTimeoutMs)) * time.Millisecond / 10
		select {
		case <-h.ctx.Done():
			return
		case <-time.After(min(max(period, 20*time.Millisecond), time.Second)):
		}
		now, ok := h.svc.node.ClusterNow()
		if !ok {
			continue
		}
		var cmds []*pb.Command
		f.Due(now, func(id sfq.JobID, attempt uint32, kind sfq.EventKind) bool {
			k := map[sfq.EventKind]pb.ExpireKind{sfq.EvExpireAck: pb.ExpireKind_ACK, sfq.EvExpireLease: pb.ExpireKind_LEASE, sfq.EvExpireTimeout: pb.ExpireKind_TIMEOUT}[kind]
			cmds = append(cmds, &pb.Command{Cmd: &pb.Command_Expire{Expire: &pb.Expire{Job: uint64(id), Attempt: attempt, Kind: k}}})
			return len(cmds) < 1000
		})
		if len(cmds) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
		res, err := h.svc.propose(ctx, cmds...)
		cancel()
		if err != nil {
			h.svc.log.Warn("reaper proposal failed", "expiries", len(cmds), "error", err)
			continue
		}
		for i, r := range res {
			if r.Outcome == sfq.Changed {
				e := cmds[i].GetExpire()
				kind := strings.ToLower(e.Kind.String())
				h.svc.metrics.expiries.WithLabelValues(kind).Inc()
				h.svc.log.Info("deadline expired", "job", e.Job, "attempt", e.Attempt, "kind", kind)
			}
		}
		h.poke()
	}
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
			info := &pb.WorkerInfo{WorkerId: sess.id, Size: fsm.SizeToPB(sess.size), State: state, Job: uint64(sess.job), Attempt: sess.attempt, Connected: true}
			if !sess.lastHB.IsZero() {
				info.LastHeartbeatMs = sess.lastHB.UnixMilli()
			}
			out.Workers = append(out.Workers, info)
			seen[sess.id] = true
		}
		h.mu.Unlock()
	}
	for _, w := range s.node.FSM.Workers() {
		if !w.Drained && seen[w.ID] {
			continue
		}
		if seen[w.ID] {
			for _, info := range out.Workers {
				if info.WorkerId == w.ID {
					info.Drained, info.State = true, "drained"
				}
			}
			continue
		}
		if w.Drained {
			out.Workers = append(out.Workers, &pb.WorkerInfo{WorkerId: w.ID, Size: fsm.SizeToPB(w.Size), State: "drained", Drained: true})
		}
	}
	sort.Slice(out.Workers, func(i, j int) bool { return out.Workers[i].WorkerId < out.Workers[j].WorkerId })
	return out, nil
}

// Drain stops (or resumes) new assignments to a worker.
func (s *WorkerService) Drain(ctx context.Context, req *pb.DrainRequest) (*pb.DrainResponse, error) {
	if err := sfq.ValidateName("worker_id", req.WorkerId); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if id := IdentityFrom(ctx); !id.MayDrain(req.WorkerId) {
		if id.Worker == "" {
			return nil, status.Errorf(codes.PermissionDenied, "worker_id: draining worker %q needs an admin token or that worker's own token (a worker token bound to it); this worker token is bound to no worker ID", req.WorkerId)
		}
		return nil, status.Errorf(codes.PermissionDenied, "worker_id: draining worker %q needs an admin token or that worker's own token; this token is bound to worker_id %q", req.WorkerId, id.Worker)
	}
	if resp, handled, err := forward(ctx, &s.base, func(ctx context.Context, cc *grpc.ClientConn) (*pb.DrainResponse, error) {
		return pb.NewWorkerClient(cc).Drain(ctx, req)
	}); handled {
		return resp, err
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
			return nil, status.Errorf(codes.NotFound, "worker_id: no worker %q is connected or known (create=true drains it before it first connects)", req.WorkerId)
		}
	}
	res, err := s.propose(ctx, &pb.Command{Cmd: &pb.Command_WorkerDrain{WorkerDrain: &pb.WorkerDrain{WorkerId: req.WorkerId, Drain: !req.Undrain}}})
	if err != nil {
		return nil, err
	}
	if h != nil {
		h.poke()
	}
	return &pb.DrainResponse{}, resultErr(res[0])
}
