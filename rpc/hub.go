package rpc

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/leader"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// session is one worker's stream on the leader.
type session struct {
	id   string
	size sfq.Size
	// pool is the pool the worker serves ("" for the pool default): it
	// is given jobs of that pool only.
	pool  string
	out   chan *pb.LeaderMessage
	done  chan struct{}
	once  sync.Once
	since time.Time
	// mux: the session is a slot of a multiplexed stream (its Welcome
	// says so).
	mux bool

	// Guarded by hub.mu.
	credit  uint64
	ready   bool
	readyAt time.Time
	job     sfq.JobID
	attempt uint32
	lastHB  time.Time
	lastMsg time.Time // the last message of the worker (Hello included)
	// started is closed once the session's latest Started is settled
	// (its result acted on); nil before the first.
	started chan struct{}
	// refused holds when the session's latest refused reports came;
	// failure is why the session was ended for them (nil: it was not).
	refused refusals
	failure error
}

func (s *session) end() { s.once.Do(func() { close(s.done) }) }

// A worker session may have at most maxRefusals reports refused (answered
// with Reject, or dropped as a stale heartbeat) within any refusalWindow;
// the next ends its stream with RESOURCE_EXHAUSTED. A worker in good
// health has a few (a late report of a run whose lease was lost, a
// heartbeat crossing its job's end); a stream of reports of jobs and
// attempts the worker does not hold costs the leader a read and an answer
// each, never a log entry, and is cut off by this bound.
const (
	maxRefusals   = 100
	refusalWindow = 10 * time.Second
)

// refusals records when a session's latest maxRefusals refused reports
// came (as time since the session began), in a ring allocated at the
// first.
type refusals struct {
	at   []time.Duration
	next int
}

// add records a refusal at now and reports whether the session stays
// within maxRefusals in refusalWindow.
func (r *refusals) add(now time.Duration) bool {
	if len(r.at) < maxRefusals {
		if r.at == nil {
			r.at = make([]time.Duration, 0, maxRefusals)
		}
		r.at = append(r.at, now)
		return true
	}
	if now-r.at[r.next] < refusalWindow {
		return false
	}
	r.at[r.next] = now
	r.next = (r.next + 1) % maxRefusals
	return true
}

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

// hub holds the worker sessions of one leadership and runs their loops:
// the dispatcher, the heartbeat batcher and the cancel relay. It sees the
// node only as a leader.Node, so a test drives it on a leader.Memory.
type hub struct {
	node    leader.Node
	id      string // this node's ID, which Welcome names as the leader
	log     hclog.Logger
	metrics *metrics
	ctx     context.Context // ends with the leadership

	mu       sync.Mutex
	sessions map[string]*session
	pending  map[string]*pendingHB // the latest heartbeat of each worker not yet replicated
	closed   bool                  // the leadership ended: no new session
	// deleting counts, per pool, the deletes of it being proposed: no
	// worker of that pool connects meanwhile (guardPoolDelete).
	deleting map[string]int
	wake     chan struct{}
}

func newHub(ctx context.Context, node leader.Node, id string, log hclog.Logger, m *metrics) *hub {
	return &hub{node: node, id: id, log: log, metrics: m, ctx: ctx, sessions: map[string]*session{}, wake: make(chan struct{}, 1), pending: map[string]*pendingHB{},
		deleting: map[string]int{}}
}

// run runs the hub's loops until its context ends, then calls detach (so
// that no new stream finds this hub) and closes every session.
func (h *hub) run(detach func()) {
	var wg sync.WaitGroup
	for _, loop := range []func(){h.dispatcher, h.heartbeats, h.cancels} {
		wg.Add(1)
		go func() { defer wg.Done(); loop() }()
	}
	<-h.ctx.Done()
	detach()
	h.closeAll()
	wg.Wait()
}

// propose replicates cmds; errors are gRPC statuses.
func (h *hub) propose(ctx context.Context, cmds ...*clusterpb.Command) ([]fsm.Result, error) {
	res, err := h.node.Propose(ctx, cmds)
	if err != nil {
		return nil, proposeErr(err)
	}
	return res, nil
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
	h.closed = true
	for _, s := range h.sessions {
		s.end()
	}
}

// open starts a session for worker id, of size size, serving pool ("" for
// the pool default). A pool the state does not hold is refused with
// NOT_FOUND naming it (the worker retries: an admin may create it), and
// so, with UNAVAILABLE, is a pool whose delete is being proposed. A
// worker ID has one session: a second one is refused (ABORTED, which the
// worker retries) while the first is live, so that nobody can take over
// a worker's session, its job and its report. A session silent for two
// heartbeat intervals (a worker that vanished without its stream ending,
// e.g. cut off) is ended, and the new one wins.
func (h *hub) open(id string, size sfq.Size, pool string) (*session, error) {
	now := time.Now()
	f := h.node.State()
	limit := 2 * time.Duration(f.Config().HeartbeatIntervalMs) * time.Millisecond
	s := &session{id: id, size: size, pool: pool, out: make(chan *pb.LeaderMessage, 256), done: make(chan struct{}), since: now, lastMsg: now}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, status.Error(codes.Unavailable, "the leadership this stream found has just ended; reconnect")
	}
	// Under h.mu, so that a delete's check (guardPoolDelete) sees this
	// session or this session sees the delete.
	if h.deleting[pool] > 0 {
		return nil, fieldErr(codes.Unavailable, "hello.pool", "pool %s is being deleted; retry (once it is, a worker of it is refused with NOT_FOUND)", pool)
	}
	if !poolKnown(f, pool) {
		return nil, unknownPoolErr(pool)
	}
	if old := h.sessions[id]; old != nil {
		if silent := now.Sub(old.lastMsg); silent < limit {
			return nil, status.Errorf(codes.Aborted, "worker %q has a live session (its last message came %s ago); "+
				"another is refused until that one has been silent for %s (two heartbeat intervals); retry later",
				id, silent.Round(time.Millisecond), limit)
		}
		h.log.Warn("ending a silent session: a new stream of its worker replaces it", "worker", id, "silent", now.Sub(old.lastMsg).Round(time.Millisecond))
		old.end()
	}
	h.sessions[id] = s
	return s, nil
}

// poolKnown reports whether the state holds pool ("": the pool default).
func poolKnown(f *fsm.FSM, pool string) bool {
	known := false
	f.Read(func(sc *sfq.Scheduler) { _, known = sc.PoolID(pool) })
	return known
}

// unknownPoolErr is the refusal of a worker of a pool the state does not
// hold.
func unknownPoolErr(pool string) error {
	return fieldErr(codes.NotFound, "hello.pool", "unknown pool %q (an admin creates it: barista pool set %s)", pool, pool)
}

// poolGone ends s, whose pool the state no longer holds (it was deleted
// while the session began): its worker is told so (NOT_FOUND) and
// retries, refused until the pool is created again.
func (h *hub) poolGone(s *session) {
	h.mu.Lock()
	first := s.failure == nil
	if first {
		s.failure = unknownPoolErr(s.pool)
	}
	h.mu.Unlock()
	if first {
		h.log.Warn("closing a worker session: its pool was deleted", "worker", s.id, "pool", s.pool)
	}
	s.end()
}

// connected counts the connected workers of pool ("": the pool default),
// drained ones included.
func (h *hub) connected(pool string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, s := range h.sessions {
		if s.pool == pool {
			n++
		}
	}
	return n
}

// guardPoolDelete is the leader's check before a PoolDelete of pool (a
// delete is refused while a worker of the pool is connected): it refuses
// with FAILED_PRECONDITION naming the pool and its connected workers, or
// else refuses every new worker of the pool until release is called.
func (h *hub) guardPoolDelete(pool string) (release func(), err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ids []string
	for _, s := range h.sessions {
		if s.pool == pool {
			ids = append(ids, s.id)
		}
	}
	if n := len(ids); n > 0 {
		slices.Sort(ids)
		list := strings.Join(ids[:min(n, 3)], ", ")
		if n > 3 {
			list += ", ..."
		}
		workers := "workers"
		if n == 1 {
			workers = "worker"
		}
		return nil, status.Errorf(codes.FailedPrecondition, "pool %s has %d connected %s (%s): stop them, or start them in another pool, before deleting it", pool, n, workers, list)
	}
	h.deleting[pool]++
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.deleting[pool]--; h.deleting[pool] == 0 {
				delete(h.deleting, pool)
			}
		})
	}, nil
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

// clearJob forgets s's job if it is still (job, attempt). A heartbeat of
// that job still waiting for its batch has nothing left to renew: it is
// acknowledged now (the worker counts acknowledgements as contact with
// the leader), not replicated.
func (h *hub) clearJob(s *session, job sfq.JobID, attempt uint32) {
	h.mu.Lock()
	if s.job == job && s.attempt == attempt {
		s.job, s.attempt = 0, 0
	}
	var ack *pb.JobHeartbeat
	if p := h.pending[s.id]; p != nil && p.sess == s && sfq.JobID(p.hb.Job) == job {
		delete(h.pending, s.id)
		ack = p.hb
	}
	h.mu.Unlock()
	if ack != nil {
		s.send(&pb.LeaderMessage{Msg: &pb.LeaderMessage_HeartbeatAck{HeartbeatAck: &pb.HeartbeatAck{Seq: ack.Seq}}})
	}
}

func reject(job uint64, attempt uint32, reason string) *pb.LeaderMessage {
	return &pb.LeaderMessage{Msg: &pb.LeaderMessage_Reject{Reject: &pb.Reject{Job: job, Attempt: attempt, Reason: reason}}}
}

// refuse answers a refused report of s's worker with Reject (none when
// answer is false) and counts it: one past maxRefusals within
// refusalWindow is not answered but ends the session, and refuse returns
// the RESOURCE_EXHAUSTED status its stream ends with (as does every
// refusal after it).
func (h *hub) refuse(s *session, job uint64, attempt uint32, reason string, answer bool) error {
	now := time.Since(s.since)
	h.mu.Lock()
	first := false
	if s.failure == nil && !s.refused.add(now) {
		first = true
		s.failure = status.Errorf(codes.ResourceExhausted,
			"worker %q had more than %d reports refused within %s (reports of jobs or attempts it does not hold; the last: %s): its session is closed",
			s.id, maxRefusals, refusalWindow, reason)
	}
	failure := s.failure
	h.mu.Unlock()
	if failure == nil {
		if answer {
			s.send(reject(job, attempt, reason))
		}
		return nil
	}
	if first {
		h.metrics.refusedSessions.Inc()
		h.log.Warn("closing a worker session: too many refused reports", "worker", s.id, "limit", maxRefusals, "window", refusalWindow, "last_job", job, "last_attempt", attempt, "last_reason", reason)
	}
	s.end()
	return failure
}

// failed returns why s was ended for its refused reports (nil: it was
// not).
func (h *hub) failed(s *session) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return s.failure
}

func cancelOrder(j *sfq.Job, cfg fsm.Config) *pb.LeaderMessage {
	return &pb.LeaderMessage{Msg: &pb.LeaderMessage_Cancel{Cancel: &pb.CancelOrder{
		Job: uint64(j.ID), Attempt: j.Attempt, Reason: j.Cancel.String(), GraceMs: cfg.CancelGraceMs}}}
}

// welcome resumes the leases the worker still holds, rejects the rest,
// and sends Welcome with the replicated intervals and pending cancels.
func (h *hub) welcome(s *session, hello *pb.Hello) {
	f := h.node.State()
	cfg := f.Config()
	welcome := &pb.Welcome{HeartbeatIntervalMs: cfg.HeartbeatIntervalMs, SelfKillAfterMs: cfg.SelfKillAfterMs, LeaderId: h.id,
		FinishReady: true, StartedDelayMs: startedDelayMs(cfg), JobTypes: true, Snooze: true, Kinds: f.Level() >= fsm.Level8, Mux: s.mux}
	var rejects []*pb.LeaderMessage
	for _, r := range hello.Running {
		j, _, ok := f.Job(sfq.JobID(r.Job))
		switch {
		case r.Finished:
			// Its Finished follows; Apply decides whether it is accepted.
		case ok && j.HeldBy(s.id, r.Attempt):
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

// maxStartedDelayMs is the longest a worker holds a run's Started back.
const maxStartedDelayMs = 100

// startedDelayMs is how long a worker may hold a run's Started back
// (Welcome.started_delay_ms): maxStartedDelayMs, and at most a tenth of
// the ack timeout and of the heartbeat interval, so that a run's Started
// is in long before its ack deadline and its first heartbeat. A run that
// ends sooner is reported by its Finished alone, and the leader
// replicates its Started with it: a zero-length or at once failing job
// costs one report and one proposal, not two.
func startedDelayMs(cfg fsm.Config) int64 {
	return max(0, min(maxStartedDelayMs, cfg.Sched.AckTimeoutMs/10, cfg.HeartbeatIntervalMs/10))
}

// sessionCtx is the context of a session's proposals: it ends when the
// stream or the leadership does. A proposal has no timeout of its own: it
// commits, or fails when the leadership ends (the hub's context) or the
// node stops; a worker whose reports hang gets no HeartbeatAck either,
// gives up on the stream after its silence limit, and so ends the wait.
func (h *hub) sessionCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(h.ctx, cancel)
	return c, func() { stop(); cancel() }
}

// handle processes one message of a worker, in stream order; ctx is the
// session's (sessionCtx). Every field
// is checked (checkMessage) before anything is proposed, and every
// command names the session's worker ID, never one the message claims.
func (h *hub) handle(ctx context.Context, s *session, msg *pb.WorkerMessage) error {
	msg, refused, err := checkMessage(msg)
	if err != nil {
		return err
	}
	if refused != "" {
		job, attempt := reportRef(msg)
		h.metrics.unproposed.WithLabelValues(messageName(msg), "invalid").Inc()
		h.log.Warn("invalid worker report refused", "worker", s.id, "job", job, "attempt", attempt, "error", refused)
		h.clearJob(s, sfq.JobID(job), attempt)
		return h.refuse(s, job, attempt, "invalid report: "+refused, true)
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
		if hb.Job != 0 {
			if known, out, _, _ := h.precheck(sfq.InHeartbeat, hb.Job, hb.Attempt, s.id); !known || out == sfq.Stale {
				return h.staleHeartbeat(s, hb, known)
			}
		}
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
		switch known, out, _, why := h.precheck(sfq.InStart, st.Job, st.Attempt, s.id); {
		case !known:
			return h.unknownJob(s, "started", st.Job, st.Attempt)
		case out == sfq.Duplicate: // already started: Apply could only say so again
			h.metrics.unproposed.WithLabelValues("started", "repeat").Inc()
			h.setJob(s, sfq.JobID(st.Job), st.Attempt)
			return nil
		case out == sfq.Stale: // Apply could only refuse it
			h.metrics.fenced.WithLabelValues("started").Inc()
			h.metrics.unproposed.WithLabelValues("started", "stale").Inc()
			return h.refuse(s, st.Job, st.Attempt, why, true)
		}
		return h.start(ctx, s, st)
	case *pb.WorkerMessage_Finished:
		return h.finished(ctx, s, m.Finished)
	}
	return status.Error(codes.InvalidArgument, "empty worker message") // checkMessage let through a kind it does not know
}

// start replicates a worker's Started without holding up the worker's
// next message: a job that ends at once has its Finished queued behind
// the Started, often in the same entry, and proposals apply in the order
// they were queued. The result is acted on when it comes (s.started is
// closed then); a failed proposal ends the session.
func (h *hub) start(ctx context.Context, s *session, st *pb.JobStarted) error {
	q, err := h.node.Enqueue(ctx, []*clusterpb.Command{startedCommand(s.id, st)})
	if err != nil {
		return proposeErr(err)
	}
	done := make(chan struct{})
	h.mu.Lock()
	s.started = done
	h.mu.Unlock()
	go func() {
		defer close(done)
		// The entry commits, or the leadership that queued it ends.
		res, err := q.Wait(h.ctx)
		if err != nil {
			h.log.Warn("a worker's Started was not replicated; ending its session", "worker", s.id, "job", st.Job, "attempt", st.Attempt, "error", err)
			s.end()
			return
		}
		switch res[0].Outcome {
		case sfq.Changed, sfq.Duplicate:
			h.setJob(s, sfq.JobID(st.Job), st.Attempt)
		default:
			h.metrics.fenced.WithLabelValues("started").Inc()
			h.refuse(s, st.Job, st.Attempt, res[0].Msg, true) // ends the session if over the limit
		}
	}()
	return nil
}

// settleStarted waits until s's latest Started is settled, so that what
// a later report does to the session comes after it.
func (h *hub) settleStarted(s *session) {
	h.mu.Lock()
	started := s.started
	h.mu.Unlock()
	if started != nil {
		<-started
	}
}

// finished handles a worker's Finished. One that carries ready_credit
// (the worker's next Ready) is replicated with a Dispatch for the worker
// in the same proposal when the state has work it could take, and
// answered with one Assign carrying the FinishedAck; otherwise the credit
// is taken as a Ready once the report is settled.
func (h *hub) finished(ctx context.Context, s *session, fin *pb.JobFinished) error {
	arrived := time.Now() // when the worker became ready, if it did
	known, out, state, why := h.precheck(sfq.InFinish, fin.Job, fin.Attempt, s.id)
	if !known || out == sfq.Stale || out == sfq.Duplicate {
		// Answered from the state, without a log entry.
		h.settleStarted(s)
		h.clearJob(s, sfq.JobID(fin.Job), fin.Attempt)
		var err error
		switch {
		case !known:
			err = h.unknownJob(s, "finished", fin.Job, fin.Attempt)
		case out == sfq.Stale:
			// A future attempt, another worker's live one, or one too
			// old to bill: Apply could only refuse it.
			h.metrics.fenced.WithLabelValues("finished").Inc()
			h.metrics.unproposed.WithLabelValues("finished", "stale").Inc()
			err = h.refuse(s, fin.Job, fin.Attempt, why, true)
		default:
			// The CPU of a (job, attempt) is billed once: a report the
			// state shows settled (accepted, or billed as a zombie's) is
			// acknowledged as Apply would.
			h.metrics.unproposed.WithLabelValues("finished", "repeat").Inc()
			s.send(&pb.LeaderMessage{Msg: &pb.LeaderMessage_FinishedAck{FinishedAck: &pb.FinishedAck{Job: fin.Job, Attempt: fin.Attempt}}})
		}
		if err != nil {
			return err
		}
		h.readyAfter(s, fin.ReadyCredit, arrived)
		return nil
	}
	var cmds []*clusterpb.Command
	if fin.StartUnreported && out == sfq.Changed && state == sfq.Assigned {
		// The run ended before its Started was due: its Started goes
		// first in the Finished's entry, as the worker's would have.
		cmds = append(cmds, startedCommand(s.id, &pb.JobStarted{Job: fin.Job, Attempt: fin.Attempt}))
	}
	started := len(cmds)
	if fin.Outcome == pb.Outcome_UNKNOWN_KIND && h.node.State().Level() < fsm.Level8 {
		fin = proto.Clone(fin).(*pb.JobFinished)
		unknownKindBelow8(fin)
	}
	if fin.Outcome == pb.Outcome_SNOOZED && h.node.State().Level() < fsm.Level7 {
		// A cluster below level 7 knows no snooze: the run counts as a
		// failed one, retried as max_attempts allows.
		fin = proto.Clone(fin).(*pb.JobFinished)
		fin.Outcome, fin.SnoozeMs = pb.Outcome_FAILED, 0
		fin.StderrTail = sfq.OutputTail(fin.StderrTail + "\nsnoozed: the cluster's feature level is below 7, so the run counts as failed")
	}
	cmds = append(cmds, finishedCommand(s.id, fin))
	if h.mayDispatchWith(s, fin) {
		h.mu.Lock()
		s.readyAt = arrived
		h.mu.Unlock()
		cmds = append(cmds, dispatchCommand(s, fin.ReadyCredit))
	}
	times := dispatchTimes{path: pathFinished, proposed: time.Now()}
	res, err := h.propose(ctx, cmds...)
	times.applied = time.Now()
	h.settleStarted(s)
	if err != nil {
		return err
	}
	if started > 0 {
		h.metrics.startsWithFinished.Inc()
	}
	res = res[started:] // the Finished's result decides; a Started's adds nothing
	h.clearJob(s, sfq.JobID(fin.Job), fin.Attempt)
	var ack *pb.FinishedAck
	var refused error
	switch r := res[0]; r.Outcome {
	case sfq.Changed, sfq.Duplicate:
		ack = &pb.FinishedAck{Job: fin.Job, Attempt: fin.Attempt}
	case sfq.Zombie:
		h.metrics.fenced.WithLabelValues("finished").Inc()
		h.log.Warn("late report of a stale attempt: CPU billed, result dropped", "worker", s.id, "job", fin.Job, "attempt", fin.Attempt, "cpu_ms", fin.CpuMs)
		refused = h.refuse(s, fin.Job, fin.Attempt, "stale attempt: its CPU was billed, its result dropped", true)
	default:
		h.metrics.fenced.WithLabelValues("finished").Inc()
		refused = h.refuse(s, fin.Job, fin.Attempt, r.Msg, true)
	}
	if refused != nil {
		return refused
	}
	if len(res) == 2 && h.assign(s, res[1], fin.ReadyCredit, ack, &times) {
		return nil // the credit is spent
	}
	if ack != nil {
		s.send(&pb.LeaderMessage{Msg: &pb.LeaderMessage_FinishedAck{FinishedAck: ack}})
	}
	h.readyAfter(s, fin.ReadyCredit, arrived)
	return nil
}

// mayDispatchWith reports whether a Finished's folded Ready should be
// replicated with it as a Dispatch: it carries one, the state has
// eligible work for the worker's size and lets the worker have a job once
// the Finished applies, and the cluster's feature level keeps the credit
// of a Dispatch that finds nothing (so that a guess that misses leaves
// the worker ready for the dispatcher).
func (h *hub) mayDispatchWith(s *session, fin *pb.JobFinished) bool {
	if fin.ReadyCredit == 0 {
		return false
	}
	f := h.node.State()
	now, leading := h.node.ClusterNow()
	if !leading || f.Level() < fsm.Level5 {
		return false
	}
	if n, _ := f.DispatchBudgetIn(s.pool, s.size, now); n == 0 {
		return false
	}
	w, ok := f.Worker(s.id)
	return !ok || !w.Drained
}

// readyAfter takes a Finished's folded Ready (credit, if not 0), which
// arrived at since, as a Ready once the report is settled.
func (h *hub) readyAfter(s *session, credit uint64, since time.Time) {
	if credit == 0 {
		return
	}
	h.mu.Lock()
	s.credit, s.ready, s.readyAt = credit, true, since
	h.mu.Unlock()
	h.poke()
}

// precheck reads what Apply would do with a report of (job, attempt) by
// worker, from the leader's applied state: known is false for a job the
// state does not hold (never submitted, or pruned), which no proposal
// could change. Only answers that cannot change before the report would
// apply are acted on: a Duplicate stays one (an attempt once started or
// settled stays so), and so does a Stale (a future attempt, another
// worker's, one over): only a Dispatch of that very attempt to this very
// worker could make the report match, and a worker learns of its attempt
// from the Assign sent once that Dispatch has applied here (a new leader
// serves workers after its barrier). state is the job's state as read;
// why, for a Stale, is Apply's refusal.
func (h *hub) precheck(kind sfq.InputKind, job uint64, attempt uint32, worker string) (known bool, out sfq.Outcome, state sfq.State, why string) {
	j, _, ok := h.node.State().Job(sfq.JobID(job))
	if !ok {
		return false, 0, 0, ""
	}
	e := sfq.Input{Kind: kind, Attempt: attempt, Worker: worker}
	_, out = sfq.Step(j.Life, e)
	if out == sfq.Stale {
		why = sfq.LifecycleRefusal(&j, e, out).Error()
	}
	return true, out, j.State, why
}

// unknownJob rejects a report of a job the state does not hold.
func (h *hub) unknownJob(s *session, message string, job uint64, attempt uint32) error {
	h.metrics.unproposed.WithLabelValues(message, "unknown_job").Inc()
	return h.refuse(s, job, attempt, fmt.Sprintf("job %d is unknown (never submitted, or pruned)", job), true)
}

// staleHeartbeat refuses, without proposing it, a heartbeat of a job the
// state does not hold or of an attempt it fences off: answered with Reject
// as the batch's Apply would, when it is of the job the session runs, and
// dropped otherwise (a heartbeat that crossed its job's end).
func (h *hub) staleHeartbeat(s *session, hb *pb.JobHeartbeat, known bool) error {
	if known {
		h.metrics.fenced.WithLabelValues("heartbeat").Inc()
		h.metrics.unproposed.WithLabelValues("heartbeat", "stale").Inc()
	} else {
		h.metrics.unproposed.WithLabelValues("heartbeat", "unknown_job").Inc()
	}
	h.mu.Lock()
	current := s.job == sfq.JobID(hb.Job) && s.attempt == hb.Attempt
	if current {
		s.job, s.attempt = 0, 0
	}
	h.mu.Unlock()
	return h.refuse(s, hb.Job, hb.Attempt, "lease no longer held: "+sfq.Stale.String(), current)
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
