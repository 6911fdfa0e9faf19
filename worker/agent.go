package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/baristahq/barista/internal/wire"
	"github.com/baristahq/barista/internal/workercompat"
	pb "github.com/baristahq/barista/proto"
)

// Run is one running job as the agent sees it.
type Run interface {
	// CPU is the CPU used so far.
	CPU() time.Duration
	// Terminate asks the job to stop, then kills it after grace.
	Terminate(grace time.Duration)
	// Kill kills the job at once.
	Kill()
	// Done is closed when the job (and everything it started) is gone.
	Done() <-chan struct{}
	// Result is valid after Done.
	Result() Result
}

// Result is how a run ended.
type Result struct {
	ExitCode   int
	Signaled   bool
	CPU        time.Duration
	StderrTail string // the end of stderr, any length and bytes
	StdoutTail string // the end of stdout, any length and bytes
	// Permanent, in a failed run, says no run of the job can succeed (a
	// Func's error wrapping ErrUnrunnable): the job ends failed with no
	// retry, as when Start refuses it.
	Permanent bool
	// CPUSource says how CPU was measured (unspecified: the runner does
	// not say, as a Func's); OOMKilled, that the kernel killed the run for
	// its memory limit (a failed run is then reported oom_killed).
	CPUSource pb.CpuSource
	OOMKilled bool
	// Snooze, when positive, ends the run snoozed (a Func that returned
	// Snooze(d)): the job is tried again that much later, and the run is
	// not counted a failure. The cluster takes 1 s .. 24 h; the agent
	// holds it to those bounds.
	Snooze time.Duration
}

// Runner starts jobs: ProcessRunner as child processes (what barista
// worker runs), Func as calls of a Go function in this process,
// FakeRunner as runs that only take time. An error of Start that wraps
// ErrUnrunnable says no run of the job can succeed, on this worker or any
// other (its payload is not something the runner can run): the job ends
// failed with no retry (at feature level 6). Any other error fails this
// run only.
type Runner interface {
	Start(job *pb.Assign) (Run, error)
}

// ErrUnrunnable marks a job no run of which can succeed (see Runner).
var ErrUnrunnable = errors.New("the job can never run")

// Config configures an agent.
type Config struct {
	// ID names the worker (1..256 bytes of UTF-8, no space and no control
	// or bidirectional formatting character; a worker token's binding
	// must cover it).
	ID string
	// Size is the largest job size it runs: SizeSM ("", the default),
	// SizeMD or SizeLG.
	Size Size
	// Pool is the pool it serves ("" or "default": the pool default): it
	// gets jobs of that pool only. A pool the cluster does not hold is
	// refused (NOT_FOUND): Run returns that error.
	Pool string
	// Servers are the gRPC addresses of any of the cluster's nodes.
	Servers []string
	// Dial are the options for every connection (credentials, token).
	Dial   []grpc.DialOption
	Runner Runner
	// Logger receives the agent's log (nil: slog.Default(), which writes
	// to stderr unless the program set another default).
	Logger *slog.Logger
	// Observer, if set, hears about every job the agent assigns, starts
	// and stops, as it happens (a program's own metrics or traces; the
	// tests record histories with it). It must return quickly.
	Observer func(ev Observation)
	// MaxConcurrent is how many jobs a Worker (NewWorker) runs at once:
	// one agent, one session to the cluster, per slot (0: 1). An Agent
	// (New) runs one.
	MaxConcurrent int

	compat workercompat.Options
}

func init() {
	workercompat.Set = func(cfg any, o workercompat.Options) { cfg.(*Config).compat = o }
}

// Agent is a worker agent.
type Agent struct {
	cfg  Config
	size pb.Size // cfg.Size
	log  *slog.Logger

	mu        sync.Mutex
	cur       *job
	credit    uint64
	seq       uint64
	sentAt    map[uint64]time.Time
	contact   time.Time
	failed    string // the server of the last failed session
	interval  time.Duration
	selfKill  time.Duration
	leader    string // address from the last Redirect
	welcomes  uint64 // sessions that got their Welcome
	readyAt   time.Time
	draining  bool
	wakeReady chan struct{}
	// abandon asks the session to report the running job's run failed
	// now (a Stop whose context ended: stop.go).
	abandon chan struct{}
	// foldReady: this session's leader takes the next Ready folded into
	// a Finished (Welcome.finish_ready). offered: the leader holds a
	// credit of this session that no Assign has spent yet.
	foldReady bool
	offered   bool
	// startDelay is how long this session's leader lets a run's Started
	// wait (Welcome.started_delay_ms); 0: Started goes at once.
	startDelay time.Duration
	// snoozeOK: this session's leader takes a snoozed run
	// (Welcome.snooze).
	snoozeOK bool
	// stop is the cancel of the running Run's context (nil while none
	// runs), and stopped is closed when that Run returns.
	stop    context.CancelFunc
	stopped chan struct{}
	// mux, when set, gives the agent its stream: slot of the stream its
	// Worker shares with the leader.
	mux  *muxDialer
	slot uint32
	// firstWelcome, when set, is shared by the slots of a Worker: the
	// runner's FirstWelcome is called once for them all.
	firstWelcome *sync.Once
}

// job is the agent's one job slot.
type job struct {
	assign     *pb.Assign
	run        Run
	cancelling bool
	finished   *pb.JobFinished // sent, not yet acknowledged
	dropped    bool            // killed by Reject or self-kill: no result
	// startSent: the run's Started went out. Until then startDue, when
	// set, fires when it is due; a run that ends first is reported by its
	// Finished alone (start_unreported).
	startSent bool
	startDue  *time.Timer
}

// New returns an agent.
func New(cfg Config) (*Agent, error) {
	if err := wire.ValidateName("worker id", cfg.ID); err != nil {
		return nil, err
	}
	size, err := sizeToPB(cfg.Size)
	if err != nil {
		return nil, err
	}
	if cfg.Pool != "" {
		if err := wire.ValidatePoolName(cfg.Pool); err != nil {
			return nil, err
		}
	}
	if len(cfg.Servers) == 0 {
		return nil, errors.New("agent: no server address")
	}
	if cfg.Runner == nil {
		return nil, errors.New("agent: no runner")
	}
	if cfg.MaxConcurrent > 1 {
		return nil, fmt.Errorf("agent: MaxConcurrent %d: an Agent runs one job at a time (NewWorker runs one agent per slot)", cfg.MaxConcurrent)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Agent{
		cfg: cfg, size: size, log: cfg.Logger, sentAt: map[uint64]time.Time{},
		credit: uint64(time.Now().UnixNano()), interval: 5 * time.Second, selfKill: 25 * time.Second,
		wakeReady: make(chan struct{}, 1),
		abandon:   make(chan struct{}, 1),
	}, nil
}

// Drain makes the agent finish its current job and take no new one; Run
// returns once the slot is empty.
func (a *Agent) Drain() {
	a.mu.Lock()
	a.draining = true
	a.mu.Unlock()
	a.poke()
}

// Stop stops the agent gracefully: it takes no new job, lets the running
// one end and report its result, and returns once Run has returned. If
// ctx ends first, the running job is cancelled and its run reported
// failed at once (retried as its max_attempts allow, as StopAndCancel's),
// then Run ends; Stop then returns ctx's error. Stop returns at once when
// Run is not running.
func (a *Agent) Stop(ctx context.Context) error {
	a.Drain()
	return a.waitStopped(ctx, false)
}

// StopAndCancel stops the agent now: it takes no new job, and stops the
// running one (a Func's context ends; a process gets SIGTERM, then
// SIGKILL after StopGrace). The run is reported as it ended — failed,
// so retried as the job's max_attempts allow — and StopAndCancel returns
// once Run has returned. If ctx ends first, the run is reported failed
// at once without waiting for it to end, then Run ends; StopAndCancel
// returns ctx's error.
func (a *Agent) StopAndCancel(ctx context.Context) error {
	a.Drain()
	a.terminateCurrent()
	return a.waitStopped(ctx, true)
}

// StopGrace is how long a run StopAndCancel stops may take to end after
// SIGTERM before it is killed.
const StopGrace = 10 * time.Second

// terminateCurrent asks the running job, if any, to stop.
func (a *Agent) terminateCurrent() {
	a.mu.Lock()
	j := a.cur
	var run Run
	if j != nil && j.run != nil && j.finished == nil && !j.dropped {
		run = j.run
	}
	a.mu.Unlock()
	if run != nil {
		a.log.Info("stopping: cancelling the running job", "job", j.assign.Job, "attempt", j.assign.Attempt)
		run.Terminate(StopGrace)
	}
}

// waitStopped waits for Run to return; when ctx ends first it cancels
// the running job (unless cancelled already) and ends Run.
func (a *Agent) waitStopped(ctx context.Context, cancelled bool) error {
	a.mu.Lock()
	stop, stopped := a.stop, a.stopped
	a.mu.Unlock()
	if stop == nil {
		return nil
	}
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
	}
	if !cancelled {
		a.terminateCurrent()
	}
	a.abandonCurrent(abandonWait)
	stop()
	<-stopped
	return ctx.Err()
}

func (a *Agent) poke() {
	select {
	case a.wakeReady <- struct{}{}:
	default:
	}
}

// Busy reports whether a job occupies the slot.
func (a *Agent) Busy() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cur != nil
}

// Run connects and serves until ctx ends (or, when draining, until the
// slot is empty), and then returns nil. On return any running job is
// killed. A failed session is retried with backoff (ABORTED too: another
// session of this worker ID is still live), but a refusal no retry can
// change ends Run with that error (ErrRefused): a token the cluster does
// not know (UNAUTHENTICATED), one that may not be this worker
// (PERMISSION_DENIED: its worker_id binding), a pool the cluster does not
// hold (NOT_FOUND) or a Hello the cluster refuses (INVALID_ARGUMENT, an ID
// or size it does not take).
func (a *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped := make(chan struct{})
	a.mu.Lock()
	if a.stop != nil {
		a.mu.Unlock()
		return errors.New("agent: Run is already running")
	}
	a.stop, a.stopped = cancel, stopped
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.stop = nil
		a.mu.Unlock()
		close(stopped)
	}()
	go a.watchdog(ctx)
	defer a.killCurrent("agent stopping")
	backoff := minBackoff
	for i := 0; ctx.Err() == nil; i++ {
		if a.doneDraining() {
			return nil
		}
		addr := a.nextServer(i)
		a.mu.Lock()
		welcomes := a.welcomes
		a.mu.Unlock()
		err := a.session(ctx, addr)
		a.mu.Lock()
		a.failed = ""
		if err != nil {
			a.failed = addr // try another server next
		}
		if a.welcomes != welcomes {
			backoff = minBackoff // the session got going: reconnect promptly
		}
		a.mu.Unlock()
		if ctx.Err() != nil || a.doneDraining() {
			return nil
		}
		if refusal(err) {
			// Returned, not logged: the caller says it (barista worker
			// in one line, and exits 1).
			return &RefusedError{Worker: a.cfg.ID, Server: addr, Err: err}
		}
		// A redirect is followed at once; failures back off, and a
		// redirect in between does not reset the backoff (a refused
		// worker goes follower, redirect, leader, refused again).
		wait := backoff
		var redirect *redirectError
		if errors.As(err, &redirect) {
			a.log.Info("redirected to the leader", "leader", redirect.id, "addr", redirect.addr)
			wait = 50 * time.Millisecond
		} else if wire.IsNotLeader(err) {
			// A leadership handed over, or a leader stopping: the
			// cluster goes on, this worker with it.
			a.log.Info("the leader changed; reconnecting", "server", addr, "reason", status.Convert(err).Message(), "retry_in", wait)
			backoff = min(2*backoff, maxBackoff)
		} else {
			a.log.Warn("stream to the cluster ended; reconnecting", "server", addr, "error", err, "retry_in", wait)
			backoff = min(2*backoff, maxBackoff)
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	return nil
}

// poolName names the agent's pool in its log.
func (a *Agent) poolName() string {
	if a.cfg.Pool == "" {
		return "default"
	}
	return a.cfg.Pool
}

// The agent's reconnect backoff: it doubles with every failed session
// from minBackoff to maxBackoff, and starts over after a session that
// got its Welcome.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 2 * time.Second
)

func (a *Agent) doneDraining() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.draining && a.cur == nil
}

func (a *Agent) nextServer(i int) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.leader != "" {
		l := a.leader
		a.leader = ""
		return l
	}
	addr := a.cfg.Servers[i%len(a.cfg.Servers)]
	if addr == a.failed && len(a.cfg.Servers) > 1 {
		addr = a.cfg.Servers[(i+1)%len(a.cfg.Servers)]
	}
	return addr
}

// watchdog kills the job when contact is older than self_kill_after,
// whether or not a stream is up. After a pause of the agent itself (its
// tick came far too late: SIGSTOP, a frozen VM) it first gives the runner
// a tick to reap a job that ended meanwhile: a finished job is reported
// (and fenced off by the leader if its lease is gone), only a live one is
// killed.
func (a *Agent) watchdog(ctx context.Context) {
	last := time.Now()
	for {
		a.mu.Lock()
		period := max(a.selfKill/20, 10*time.Millisecond)
		var stale time.Duration
		var run Run
		if a.cur != nil && a.cur.finished == nil && !a.cur.dropped && !a.contact.IsZero() {
			stale, run = time.Since(a.contact), a.cur.run
		}
		limit := a.selfKill
		a.mu.Unlock()
		paused := time.Since(last) > 5*period
		last = time.Now()
		if stale > limit && run != nil && !paused {
			select {
			case <-run.Done(): // ended on its own: the session reports it
			default:
				a.killCurrent(fmt.Sprintf("no contact with the cluster for %s (self_kill_after %s)", stale.Round(time.Millisecond), limit))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(period):
		}
	}
}

// killCurrent kills the running job at once and drops its result.
func (a *Agent) killCurrent(reason string) {
	a.mu.Lock()
	j := a.cur
	if j == nil || j.dropped || j.finished != nil {
		a.mu.Unlock()
		return
	}
	j.dropped = true
	a.mu.Unlock()
	a.log.Warn("killing job", "job", j.assign.Job, "attempt", j.assign.Attempt, "reason", reason)
	if j.run != nil {
		j.run.Kill()
		<-j.run.Done()
		a.observe("killed", j.assign, j.run.Result().CPU, reason)
	}
	a.mu.Lock()
	if a.cur == j {
		a.cur = nil
	}
	a.mu.Unlock()
	a.poke()
}

// handshakeTimeout bounds the wait for a server's Welcome or Redirect.
const handshakeTimeout = 3 * time.Second

// session runs one stream.
func (a *Agent) session(ctx context.Context, addr string) (err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A server that cannot answer (down, or cut off one way) must not hold
	// the worker: the handshake has handshakeTimeout.
	var handshakeExpired atomic.Bool
	hs := time.AfterFunc(handshakeTimeout, func() { handshakeExpired.Store(true); cancel() })
	defer hs.Stop()
	var stream leaderStream
	if a.mux != nil {
		stream, err = a.mux.open(sctx, addr, a.slot)
	} else {
		stream, err = openPlain(sctx, addr, a.cfg.Dial)
	}
	if err != nil {
		if handshakeExpired.Load() {
			return silent{fmt.Errorf("no answer from %s within %s", addr, handshakeTimeout)}
		}
		return err
	}
	defer func() { stream.Close(err) }()
	hello := &pb.Hello{WorkerId: a.cfg.ID, Size: a.size, Version: "1", Pool: a.cfg.Pool}
	if d, ok := a.cfg.Runner.(Declarer); ok && !a.cfg.compat.SaysNothing {
		hello.Commands, hello.Kinds = d.Declares()
	}
	a.mu.Lock()
	if j := a.cur; j != nil && !j.dropped {
		r := &pb.RunningJob{Job: j.assign.Job, Attempt: j.assign.Attempt, Finished: j.finished != nil}
		if j.run != nil {
			r.CpuMs = j.run.CPU().Milliseconds()
		}
		hello.Running = append(hello.Running, r)
	}
	a.mu.Unlock()
	if err := stream.Send(&pb.WorkerMessage{Msg: &pb.WorkerMessage_Hello{Hello: hello}}); err != nil {
		return err
	}
	first, err := stream.Recv()
	if err != nil {
		if handshakeExpired.Load() {
			return silent{fmt.Errorf("no answer from %s within %s", addr, handshakeTimeout)}
		}
		return err
	}
	hs.Stop()
	if r := first.GetRedirect(); r != nil {
		a.mu.Lock()
		a.leader = r.LeaderAddr
		a.mu.Unlock()
		return &redirectError{id: r.LeaderId, addr: r.LeaderAddr}
	}
	w := first.GetWelcome()
	if w == nil {
		return errors.New("the leader's first message is not Welcome")
	}
	a.mu.Lock()
	a.interval = time.Duration(w.HeartbeatIntervalMs) * time.Millisecond
	a.selfKill = time.Duration(w.SelfKillAfterMs) * time.Millisecond
	a.contact = time.Now()
	a.welcomes++
	firstWelcome := a.welcomes == 1
	a.foldReady, a.offered = w.FinishReady && !a.cfg.compat.SeparateReady, false
	a.snoozeOK = w.Snooze
	fold := a.foldReady
	a.startDelay = 0
	if !a.cfg.compat.StartedAtOnce {
		a.startDelay = time.Duration(max(0, w.StartedDelayMs)) * time.Millisecond
	}
	delay := a.startDelay
	a.mu.Unlock()
	a.log.Info("connected", "server", addr, "leader", w.LeaderId, "pool", a.poolName(), "heartbeat", a.interval, "self_kill_after", a.selfKill, "ready_with_finished", fold, "started_delay", delay)
	if _, routes := a.cfg.Runner.(*Kinds); routes && !w.JobTypes {
		// An earlier build's leader does not say a job's kind: no job
		// could be routed. Wait for a leader that does.
		return errLeaderWithoutKinds
	}
	if fw, ok := a.cfg.Runner.(FirstWelcome); ok && firstWelcome {
		clear := func() {
			if err := fw.FirstWelcome(); err != nil {
				a.log.Warn("cannot clear what an earlier agent of this worker ID left running", "error", err)
			}
		}
		if a.firstWelcome != nil {
			// The slots of a Worker share the runner: it clears once,
			// before any slot offers itself (so before any run of it).
			a.firstWelcome.Do(clear)
		} else {
			clear()
		}
	}

	var sendMu sync.Mutex
	send := func(m *pb.WorkerMessage) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(m)
	}
	for _, c := range w.PendingCancels {
		a.cancel(c)
	}
	// A run whose Started has not gone out: a leader that lets it wait
	// no more gets it now (before the run's result, if there is one).
	// Then resend an unacknowledged result, or offer the slot.
	a.mu.Lock()
	var resend, start *pb.WorkerMessage
	if j := a.cur; j != nil && !j.startSent && !j.dropped && a.startDelay == 0 {
		j.startSent = true
		start = startedMessage(j.assign)
	}
	if a.cur != nil && a.cur.finished != nil {
		resend = a.reportLocked(a.cur)
	}
	a.mu.Unlock()
	if start != nil {
		if err := send(start); err != nil {
			return err
		}
	}
	if resend != nil {
		if err := send(resend); err != nil {
			return err
		}
	}
	a.poke()

	msgs := make(chan *pb.LeaderMessage, 16)
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case msgs <- m:
			case <-sctx.Done():
				return
			}
		}
	}()
	hb := time.NewTicker(a.interval)
	defer hb.Stop()
	beat := hb.C
	if a.mux != nil {
		// The slots of a Worker beat together, so that their heartbeats
		// go out on the shared stream in one write (and reach the leader
		// in one read): the first beat waits for the Worker's next tick.
		first := time.NewTimer(a.mux.untilBeat(a.interval))
		defer first.Stop()
		beat = first.C
	}
	silence := silenceLimit(a.interval, a.selfKill)
	for {
		a.mu.Lock()
		var done <-chan struct{}
		var startDue <-chan time.Time
		if j := a.cur; j != nil && j.run != nil && j.finished == nil && !j.dropped {
			done = j.run.Done()
			if !j.startSent && j.startDue != nil {
				startDue = j.startDue.C
			}
		}
		a.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return errors.New("the leader closed the stream")
			}
			return err
		case m := <-msgs:
			if err := a.handle(m, send); err != nil {
				return err
			}
		case <-beat:
			if beat != hb.C {
				hb.Reset(a.interval)
				beat = hb.C
			}
			a.mu.Lock()
			quiet := time.Since(a.contact)
			a.mu.Unlock()
			if quiet > silence {
				// The stream may look open while the leader is gone or cut
				// off: reconnect (perhaps to a new leader) well before the
				// self-kill deadline.
				return silent{fmt.Errorf("no heartbeat acknowledged for %s (limit %s)", quiet.Round(time.Millisecond), silence)}
			}
			if err := a.heartbeat(send); err != nil {
				return err
			}
		case <-startDue:
			if err := a.reportStarted(send); err != nil {
				return err
			}
		case <-done:
			if err := a.finish(send); err != nil {
				return err
			}
		case <-a.wakeReady:
			if err := a.offer(send); err != nil {
				return err
			}
		case <-a.abandon:
			if err := a.reportAbandoned(send); err != nil {
				return err
			}
		}
	}
}

// errDrained ends a session once a draining agent's slot is empty.
var errDrained = errors.New("drained")

// offer sends Ready if the slot is free; a draining agent with an empty
// slot ends its session instead.
func (a *Agent) offer(send func(*pb.WorkerMessage) error) error {
	a.mu.Lock()
	if a.draining && a.cur == nil {
		a.mu.Unlock()
		return errDrained
	}
	if a.cur != nil || a.draining || a.offered {
		a.mu.Unlock()
		return nil
	}
	credit := a.nextCreditLocked()
	a.mu.Unlock()
	return send(&pb.WorkerMessage{Msg: &pb.WorkerMessage_Ready{Ready: &pb.Ready{Credit: credit}}})
}

// nextCreditLocked numbers a new Ready, which the leader now holds.
func (a *Agent) nextCreditLocked() uint64 {
	a.credit++
	a.readyAt = time.Now()
	a.offered = true
	return a.credit
}

// reportLocked is the message that reports j's result to this session's
// leader: with the next Ready folded in when the leader takes it and the
// agent is not draining, and marked start_unreported when no Started of
// the run went out.
func (a *Agent) reportLocked(j *job) *pb.WorkerMessage {
	if j.startDue != nil {
		j.startDue.Stop()
	}
	fin := proto.CloneOf(j.finished)
	fin.StartUnreported = !j.startSent
	fin.ReadyCredit = 0
	if a.foldReady && !a.draining && !a.offered {
		fin.ReadyCredit = a.nextCreditLocked()
	}
	return &pb.WorkerMessage{Msg: &pb.WorkerMessage_Finished{Finished: fin}}
}

func (a *Agent) heartbeat(send func(*pb.WorkerMessage) error) error {
	a.mu.Lock()
	a.seq++
	hb := &pb.JobHeartbeat{Seq: a.seq}
	if j := a.cur; j != nil && j.finished == nil && !j.dropped && j.run != nil {
		hb.Job, hb.Attempt, hb.CpuMs = j.assign.Job, j.assign.Attempt, j.run.CPU().Milliseconds()
	}
	a.sentAt[hb.Seq] = time.Now()
	for s := range a.sentAt {
		if s+64 < hb.Seq {
			delete(a.sentAt, s)
		}
	}
	a.mu.Unlock()
	return send(&pb.WorkerMessage{Msg: &pb.WorkerMessage_Heartbeat{Heartbeat: hb}})
}

func (a *Agent) handle(m *pb.LeaderMessage, send func(*pb.WorkerMessage) error) error {
	switch msg := m.Msg.(type) {
	case *pb.LeaderMessage_Assign:
		return a.start(msg.Assign, send)
	case *pb.LeaderMessage_Cancel:
		a.cancel(msg.Cancel)
	case *pb.LeaderMessage_HeartbeatAck:
		a.mu.Lock()
		if t, ok := a.sentAt[msg.HeartbeatAck.Seq]; ok && t.After(a.contact) {
			a.contact = t
		}
		a.mu.Unlock()
	case *pb.LeaderMessage_Reject:
		r := msg.Reject
		a.mu.Lock()
		j := a.cur
		match := j != nil && j.assign.Job == r.Job && j.assign.Attempt == r.Attempt
		reported := match && j.finished != nil
		if reported {
			a.cur = nil // the result was refused (a stale attempt): drop it
		}
		a.mu.Unlock()
		if reported {
			a.log.Warn("the leader rejected this run's result; dropping it", "job", r.Job, "attempt", r.Attempt, "reason", r.Reason)
		}
		if match {
			a.killCurrent("rejected by the leader: " + r.Reason)
			a.poke()
		}
	case *pb.LeaderMessage_FinishedAck:
		a.acked(msg.FinishedAck)
		a.poke()
	case *pb.LeaderMessage_Welcome, *pb.LeaderMessage_Redirect:
		return errors.New("unexpected Welcome or Redirect within a session")
	}
	return nil
}

// acked forgets the reported run f acknowledges.
func (a *Agent) acked(f *pb.FinishedAck) {
	a.mu.Lock()
	if j := a.cur; j != nil && j.finished != nil && j.assign.Job == f.Job && j.assign.Attempt == f.Attempt {
		a.cur = nil
	}
	a.mu.Unlock()
}

func (a *Agent) start(as *pb.Assign, send func(*pb.WorkerMessage) error) error {
	if as.Finished != nil {
		a.acked(as.Finished) // the Assign answers a Finished with a folded Ready
	}
	a.mu.Lock()
	a.offered = false
	if a.cur != nil {
		a.mu.Unlock()
		a.log.Error("assigned a job while busy; rejecting it locally", "job", as.Job)
		return nil
	}
	j := &job{assign: as}
	a.cur = j
	wait := time.Since(a.readyAt)
	a.mu.Unlock()
	a.observeWait(as, wait)
	run, err := a.cfg.Runner.Start(as)
	a.mu.Lock()
	j.run = run
	if err != nil {
		// A leader that lets Started wait takes the Finished alone.
		var start *pb.WorkerMessage
		if a.startDelay == 0 {
			j.startSent, start = true, startedMessage(as)
		}
		j.finished = &pb.JobFinished{Job: as.Job, Attempt: as.Attempt, Outcome: pb.Outcome_FAILED, ExitCode: 127, StderrTail: wire.OutputTail(err.Error()),
			Permanent: errors.Is(err, ErrUnrunnable) || errors.Is(err, ErrUnknownKind)}
		if errors.Is(err, ErrUnknownKind) && as.Form != pb.JobForm_JOB_FORM_UNSPECIFIED && !a.cfg.compat.SaysNothing {
			// Not a run of the job: the cluster gives it to a worker
			// that runs its kind.
			j.finished.Outcome, j.finished.ExitCode, j.finished.Permanent = pb.Outcome_UNKNOWN_KIND, 0, false
		}
		report := a.reportLocked(j)
		a.mu.Unlock()
		a.log.Warn("job could not start", "job", as.Job, "error", err)
		if start != nil {
			if err := send(start); err != nil {
				return err
			}
		}
		return send(report)
	}
	delay := a.startDelay
	if delay > 0 {
		j.startDue = time.NewTimer(delay)
	}
	a.mu.Unlock()
	a.log.Info("job started", "job", as.Job, "attempt", as.Attempt, "tenant", as.Tenant)
	a.observe("started", as, 0, "")
	if delay > 0 {
		return nil // the session sends Started when it is due, unless the run ends first
	}
	return a.reportStarted(send)
}

// reportStarted sends the current run's Started unless it went out, or
// the run was reported or dropped.
func (a *Agent) reportStarted(send func(*pb.WorkerMessage) error) error {
	a.mu.Lock()
	j := a.cur
	if j == nil || j.startSent || j.finished != nil || j.dropped {
		a.mu.Unlock()
		return nil
	}
	j.startSent = true
	a.mu.Unlock()
	return send(startedMessage(j.assign))
}

func startedMessage(as *pb.Assign) *pb.WorkerMessage {
	return &pb.WorkerMessage{Msg: &pb.WorkerMessage_Started{Started: &pb.JobStarted{Job: as.Job, Attempt: as.Attempt}}}
}

func (a *Agent) cancel(c *pb.CancelOrder) {
	a.mu.Lock()
	j := a.cur
	if j == nil || j.assign.Job != c.Job || j.assign.Attempt != c.Attempt || j.cancelling || j.finished != nil || j.dropped || j.run == nil {
		a.mu.Unlock()
		return
	}
	j.cancelling = true
	a.mu.Unlock()
	grace := time.Duration(c.GraceMs) * time.Millisecond
	a.log.Info("cancelling job", "job", c.Job, "attempt", c.Attempt, "reason", c.Reason, "grace", grace)
	j.run.Terminate(grace)
}

// finish reports a run that ended.
func (a *Agent) finish(send func(*pb.WorkerMessage) error) error {
	a.mu.Lock()
	j := a.cur
	if j == nil || j.finished != nil || j.dropped {
		a.mu.Unlock()
		return nil
	}
	res := j.run.Result()
	outcome := pb.Outcome_FAILED
	var snoozeMs int64
	switch {
	case j.cancelling:
		outcome = pb.Outcome_CANCELLED
	case res.Snooze > 0 && a.snoozeOK:
		held := snoozeBounds(res.Snooze)
		if held != res.Snooze.Truncate(time.Millisecond) && held != (res.Snooze+time.Millisecond-1).Truncate(time.Millisecond) {
			a.log.Warn("snooze held to the cluster's bounds", "job", j.assign.Job, "asked", res.Snooze, "snooze", held, "min", MinSnooze, "max", MaxSnooze)
		}
		outcome, snoozeMs = pb.Outcome_SNOOZED, held.Milliseconds()
	case res.Snooze > 0:
		res.ExitCode = 1
		res.StderrTail += fmt.Sprintf("\nthe run asked to be snoozed %s, but the leader (an earlier build) cannot snooze a job: the run counts as failed", res.Snooze)
	case res.ExitCode == 0 && !res.Signaled:
		outcome = pb.Outcome_OK
	}
	j.finished = &pb.JobFinished{Job: j.assign.Job, Attempt: j.assign.Attempt, Outcome: outcome, CpuMs: res.CPU.Milliseconds(),
		ExitCode: int32(res.ExitCode), StderrTail: wire.OutputTail(res.StderrTail), StdoutTail: wire.OutputTail(res.StdoutTail),
		Permanent: res.Permanent && outcome == pb.Outcome_FAILED, CpuSource: res.CPUSource, SnoozeMs: snoozeMs}
	if res.OOMKilled && outcome == pb.Outcome_FAILED {
		j.finished.Failure = pb.RunFailure_OOM_KILLED
	}
	fin := j.finished
	report := a.reportLocked(j)
	a.mu.Unlock()
	kind := "finished"
	if outcome == pb.Outcome_CANCELLED {
		kind = "cancelled"
	}
	a.observe(kind, j.assign, res.CPU, strings.ToLower(outcome.String()))
	if fin.Failure == pb.RunFailure_OOM_KILLED {
		a.log.Warn("job killed by its memory limit", "job", fin.Job, "attempt", fin.Attempt, "size", j.assign.Size)
	}
	if outcome == pb.Outcome_SNOOZED {
		a.log.Info("job snoozed", "job", fin.Job, "attempt", fin.Attempt, "snooze", time.Duration(snoozeMs)*time.Millisecond, "cpu", res.CPU)
	} else {
		a.log.Info("job ended", "job", fin.Job, "attempt", fin.Attempt, "outcome", outcome, "exit_code", res.ExitCode, "cpu", res.CPU, "cpu_source", cpuSourceName(res.CPUSource))
	}
	return send(report)
}

// The bounds of a snooze the cluster takes (internal/wire).
const (
	MinSnooze = time.Duration(wire.MinSnoozeMs) * time.Millisecond
	MaxSnooze = time.Duration(wire.MaxSnoozeMs) * time.Millisecond
)

// snoozeBounds holds a snooze to what the cluster takes, in whole
// milliseconds (rounded up).
func snoozeBounds(d time.Duration) time.Duration {
	d = (d + time.Millisecond - 1).Truncate(time.Millisecond)
	return min(max(d, MinSnooze), MaxSnooze)
}

// errLeaderWithoutKinds ends a session with a leader whose Assigns do not
// carry job_type, when the runner routes jobs by kind.
var errLeaderWithoutKinds = errors.New("the leader is of an earlier build: its assignments do not name a job's kind, which this worker routes by; waiting for an upgraded leader")

// cpuSourceName names a CPU source as the API does ("" when unsaid).
func cpuSourceName(s pb.CpuSource) string {
	switch s {
	case pb.CpuSource_CPU_SOURCE_PROC:
		return "proc"
	case pb.CpuSource_CPU_SOURCE_CGROUP:
		return "cgroup"
	}
	return ""
}
