package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/auth"
	"github.com/baristahq/barista/internal/nodetest"
	"github.com/baristahq/barista/internal/workercompat"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/sfq"
	"github.com/baristahq/barista/snapshot"
	"github.com/baristahq/barista/worker"
)

// Secrets of the in-process tests (at least 16 bytes).
const (
	testAdmin  = "admin-secret-in-process"
	testWorker = "worker-secret-shared-0"
	gwAdmin    = "admin-secret-0001"
	gwAcme     = "acme-secret-00001"
	gwBeta     = "beta-secret-00001"
)

// testNode is a one-node cluster and its gRPC server in this process.
type testNode struct {
	t    testing.TB
	node *raftnode.Node
	srv  *Server
	addr string
	dir  string
	stop func()
}

// startTestNode bootstraps a one-node cluster serving gRPC on a free
// loopback port, with the given tokens (none: an open development
// server) and its seed configuration adjusted by seed.
func startTestNode(t testing.TB, tokens []auth.Token, seed func(*fsm.Config)) *testNode {
	t.Helper()
	return startTestNodeWith(t, tokens, seed, Options{})
}

// startTestNodeWith is startTestNode with options (its Auth is set from
// tokens).
func startTestNodeWith(t testing.TB, tokens []auth.Token, seed func(*fsm.Config), opt Options) *testNode {
	t.Helper()
	cfg, lis := nodetest.Config(t)
	cfg.Seed.HeartbeatIntervalMs, cfg.Seed.SelfKillAfterMs, cfg.Seed.Sched.LeaseTimeoutMs = 100, 2000, 4000
	if seed != nil {
		seed(&cfg.Seed)
	}
	node, err := raftnode.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	auth, err := NewAuth(tokens, len(tokens) == 0)
	if err != nil {
		t.Fatal(err)
	}
	opt.Auth = auth
	srv := NewServer(node, opt)
	served := make(chan struct{})
	var serving net.Listener = lis
	if opt.Conns != nil {
		serving = opt.Conns.Listen("grpc", lis)
	}
	go func() { defer close(served); srv.Serve(serving) }()
	n := &testNode{t: t, node: node, srv: srv, addr: lis.Addr().String(), dir: cfg.DataDir}
	var once bool
	n.stop = func() {
		if once {
			return
		}
		once = true
		srv.Stop(5 * time.Second)
		<-served
		node.Shutdown()
	}
	t.Cleanup(n.stop)
	waitFor(t, 20*time.Second, "a configured leader", func() bool { return node.IsLeader() && node.FSM.Configured() })
	return n
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	nodetest.WaitFor(t, timeout, what, cond)
}

// clockMoves waits until the cluster time has moved (nodetest.ClockMoves).
func (n *testNode) clockMoves() { n.t.Helper(); nodetest.ClockMoves(n.t, n.node) }

// dial connects with a bearer token ("" sends none).
func (n *testNode) dial(token string) *grpc.ClientConn {
	n.t.Helper()
	cc, err := grpc.NewClient(n.addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer{token: token}))
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { cc.Close() })
	return cc
}

// propose applies commands on the node and fails the test on a refusal.
func (n *testNode) propose(cmds ...*clusterpb.Command) []fsm.Result {
	n.t.Helper()
	return nodetest.Propose(n.t, n.node, cmds...)
}

// submit creates tenant acme (once) and queues one md job.
func (n *testNode) submit() sfq.JobID {
	n.t.Helper()
	return nodetest.SubmitOne(n.t, n.node)
}

// rawWorker is one worker stream driven message by message.
type rawWorker struct {
	t      testing.TB
	stream grpc.BidiStreamingClient[pb.WorkerMessage, pb.LeaderMessage]
	cancel context.CancelFunc
	msgs   chan *pb.LeaderMessage
	ended  chan error
}

// connect opens a stream with hello and returns it with the Welcome, or
// the stream's error. An UNAVAILABLE answer (the leader's hub is not up
// yet) is retried.
func (n *testNode) connect(token string, hello *pb.Hello) (*rawWorker, *pb.Welcome, error) {
	n.t.Helper()
	return n.connectOn(n.dial(token), hello)
}

// connectOn is connect on a given connection.
func (n *testNode) connectOn(cc *grpc.ClientConn, hello *pb.Hello) (*rawWorker, *pb.Welcome, error) {
	n.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithCancel(context.Background())
		stream, err := pb.NewWorkerClient(cc).Connect(ctx)
		if err == nil {
			err = stream.Send(&pb.WorkerMessage{Msg: &pb.WorkerMessage_Hello{Hello: hello}})
		}
		var first *pb.LeaderMessage
		if err == nil {
			first, err = stream.Recv()
		}
		if err != nil {
			cancel()
			if status.Code(err) == codes.Unavailable && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			return nil, nil, err
		}
		w := &rawWorker{t: n.t, stream: stream, cancel: cancel, msgs: make(chan *pb.LeaderMessage, 64), ended: make(chan error, 1)}
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
		n.t.Cleanup(cancel)
		if first.GetWelcome() == nil {
			n.t.Fatalf("first answer to Hello: %v", first)
		}
		return w, first.GetWelcome(), nil
	}
}

func (w *rawWorker) send(m *pb.WorkerMessage) {
	w.t.Helper()
	if err := w.stream.Send(m); err != nil {
		w.t.Fatalf("send %v: %v", m, err)
	}
}

// next waits for the next leader message.
func (w *rawWorker) next() *pb.LeaderMessage {
	w.t.Helper()
	select {
	case m := <-w.msgs:
		return m
	case err := <-w.ended:
		w.t.Fatalf("stream ended: %v", err)
	case <-time.After(10 * time.Second):
		w.t.Fatal("no message from the leader within 10s")
	}
	return nil
}

// ready offers the slot and returns the Assign it gets.
func (w *rawWorker) ready(credit uint64) *pb.Assign {
	w.t.Helper()
	w.send(&pb.WorkerMessage{Msg: &pb.WorkerMessage_Ready{Ready: &pb.Ready{Credit: credit}}})
	for {
		if a := w.next().GetAssign(); a != nil {
			return a
		}
	}
}

func finished(job uint64, attempt uint32, cpuMs int64, tail string) *pb.WorkerMessage {
	return &pb.WorkerMessage{Msg: &pb.WorkerMessage_Finished{Finished: &pb.JobFinished{
		Job: job, Attempt: attempt, Outcome: pb.Outcome_OK, CpuMs: cpuMs, StderrTail: tail}}}
}

func hello(id string) *pb.Hello { return &pb.Hello{WorkerId: id, Size: pb.Size_MD, Version: "1"} }

// TestSecondSessionForLiveWorkerRefused is the reported attack: with the
// shared worker token, a second stream sends Hello with the victim's
// worker_id, then a forged Finished{ok, cpu_ms 0} for the victim's job.
// The second stream is refused (ABORTED) and the victim keeps its
// session; a Finished naming the victim's job from another worker ID is
// fenced off; the job completes with the victim's real CPU.
func TestSecondSessionForLiveWorkerRefused(t *testing.T) {
	n := startTestNode(t, []auth.Token{{Secret: testAdmin, Role: auth.RoleAdmin}, {Secret: testWorker, Role: auth.RoleWorker}}, nil)
	job := n.submit()
	victim, _, err := n.connect(testWorker, hello("victim"))
	if err != nil {
		t.Fatal(err)
	}
	a := victim.ready(1)
	if sfq.JobID(a.Job) != job || a.Attempt != 1 {
		t.Fatalf("assign %v, want job %d attempt 1", a, job)
	}
	victim.send(&pb.WorkerMessage{Msg: &pb.WorkerMessage_Started{Started: &pb.JobStarted{Job: a.Job, Attempt: a.Attempt}}})

	_, _, err = n.connect(testWorker, hello("victim"))
	if status.Code(err) != codes.Aborted || !strings.Contains(err.Error(), `worker "victim" has a live session`) {
		t.Fatalf("second Hello as the victim: %v, want ABORTED naming the live session", err)
	}
	// Under its own name, the attacker's forged report is fenced off.
	attacker, _, err := n.connect(testWorker, hello("attacker"))
	if err != nil {
		t.Fatal(err)
	}
	attacker.send(finished(a.Job, a.Attempt, 0, "forged"))
	if r := attacker.next().GetReject(); r == nil || r.Job != a.Job || r.Attempt != a.Attempt {
		t.Fatalf("forged Finished: want Reject of job %d attempt %d, got %v", a.Job, a.Attempt, r)
	}
	// The victim's session is intact: its real report completes the job.
	victim.send(finished(a.Job, a.Attempt, 1234, "done"))
	for {
		m := victim.next()
		if ack := m.GetFinishedAck(); ack != nil {
			if ack.Job != a.Job || ack.Attempt != a.Attempt {
				t.Fatalf("ack %v", ack)
			}
			break
		}
		if m.GetReject() != nil {
			t.Fatalf("the victim's report was rejected: %v", m)
		}
	}
	j, _, _ := n.node.FSM.Job(job)
	if j.State != sfq.Completed || j.CPUMs != 1234 {
		t.Fatalf("job: state %s cpu %d, want completed 1234", j.State, j.CPUMs)
	}
	if cpu, zombie := billed(n); cpu != 1234 || zombie != 0 {
		t.Fatalf("billed %d ms (zombie %d), want 1234 (0)", cpu, zombie)
	}
}

// billed sums the CPU billed to every tenant, and its zombie part.
func billed(n *testNode) (cpu, zombie int64) {
	n.node.FSM.Read(func(s *sfq.Scheduler) {
		s.Tenants(func(_ uint32, t *sfq.Tenant) bool {
			cpu += t.Billing.CPUMs
			zombie += t.Billing.ZombieCPUMs
			return true
		})
	})
	return cpu, zombie
}

// TestStaleFinishedProposedOnce: five stale Finished reports of one
// attempt, each with a 4 MB stderr tail. The first is proposed once (its
// CPU is billed as a zombie's) carrying only the last 4 KiB of the tail;
// the repeats are answered from the leader's state and never reach the
// log. Read back from raft.db after the node stops.
func TestStaleFinishedProposedOnce(t *testing.T) {
	n := startTestNode(t, nil, func(c *fsm.Config) { c.Sched.AckTimeoutMs = 200 })
	job := n.submit()
	w, _, err := n.connect("", hello("w1"))
	if err != nil {
		t.Fatal(err)
	}
	a := w.ready(1)
	// No Started: the ack deadline passes and the job is requeued, so
	// attempt 1 is stale.
	waitFor(t, 10*time.Second, "the ack timeout", func() bool {
		j, _, _ := n.node.FSM.Job(job)
		return j.State == sfq.Queued
	})
	first := n.node.Raft().LastIndex()
	tail := strings.Repeat("x", 4_000_000-5) + "\nend\n"
	for i := range 5 {
		w.send(finished(a.Job, a.Attempt, 700+int64(i), tail))
		m := w.next()
		if i == 0 && m.GetReject() == nil {
			t.Fatalf("first stale report: %v, want Reject", m)
		}
		if i > 0 && m.GetFinishedAck() == nil {
			t.Fatalf("repeat %d: %v, want FinishedAck (a repeat of a settled report)", i, m)
		}
	}
	var m dto.Metric
	if err := n.srv.base.metrics.unproposed.WithLabelValues("finished", "repeat").Write(&m); err != nil || m.GetCounter().GetValue() != 4 {
		got := m.GetCounter().GetValue()
		t.Errorf("barista_worker_reports_unproposed_total{finished,repeat} = %v, want 4", got)
	}
	if cpu, zombie := billed(n); cpu != 700 || zombie != 700 {
		t.Errorf("billed %d ms (zombie %d), want 700 (700): the first report, once", cpu, zombie)
	}
	var reports []*clusterpb.Finished
	for _, c := range n.loggedAfter(first) {
		if f := c.GetFinished(); f != nil {
			reports = append(reports, f)
		}
	}
	if len(reports) != 1 {
		t.Fatalf("%d Finished commands in the log, want 1", len(reports))
	}
	if got := reports[0]; len(got.StderrTail) != sfq.MaxOutputTail || got.StderrTail != tail[len(tail)-sfq.MaxOutputTail:] || got.CpuMs != 700 {
		t.Errorf("logged report: %d bytes of tail (want the last %d), cpu %d", len(got.StderrTail), sfq.MaxOutputTail, got.CpuMs)
	}
}

// loggedAfter stops the node and returns the commands of its log after
// index first, read back from raft.db.
func (n *testNode) loggedAfter(first uint64) []*clusterpb.Command {
	t := n.t
	t.Helper()
	n.stop()
	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(n.dir, snapshot.LogFile)})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	last, err := store.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	var cmds []*clusterpb.Command
	for i := first + 1; i <= last; i++ {
		var l raft.Log
		if err := store.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		if l.Type != raft.LogCommand {
			continue
		}
		env, err := fsm.Decode(l.Data)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		cmds = append(cmds, env.Commands...)
	}
	return cmds
}

// TestRefusedReportsBounded: a worker token sends 1,000 Finished reports
// of an attempt its job never had (the job is queued, never dispatched).
// The leader refuses each from its state without proposing it, with
// Apply's words; the 101st refused report within 10 s closes the stream
// with RESOURCE_EXHAUSTED naming the worker. A Started and a heartbeat of
// such an attempt are refused the same way. The log does not grow.
func TestRefusedReportsBounded(t *testing.T) {
	n := startTestNode(t, nil, nil)
	job := n.submit()
	first := n.node.Raft().LastIndex()
	w, _, err := n.connect("", hello("w1"))
	if err != nil {
		t.Fatal(err)
	}
	const sent = 1000
	go func() {
		for range sent {
			if w.stream.Send(finished(uint64(job), 5, 100, "")) != nil {
				return // the stream was closed
			}
		}
	}()
	wantReason := fmt.Sprintf(`finish of job %d (attempt 5, worker "w1") is stale: job is queued at attempt 0`, job)
	rejects := 0
	answer := func(m *pb.LeaderMessage) {
		if r := m.GetReject(); r == nil || r.Job != uint64(job) || r.Attempt != 5 || r.Reason != wantReason {
			t.Fatalf("answer %d: %v, want Reject %q", rejects+1, m, wantReason)
		}
		rejects++
	}
	var end error
	for end == nil {
		select {
		case m := <-w.msgs:
			answer(m)
		case end = <-w.ended:
		case <-time.After(10 * time.Second):
			t.Fatalf("the stream is still open after %d Rejects", rejects)
		}
	}
	for len(w.msgs) > 0 { // those read before the end
		answer(<-w.msgs)
	}
	wantEnd := fmt.Sprintf(`worker "w1" had more than %d reports refused within 10s (reports of jobs or attempts it does not hold; the last: %s): its session is closed`, maxRefusals, wantReason)
	if st, _ := status.FromError(end); st.Code() != codes.ResourceExhausted || st.Message() != wantEnd {
		t.Fatalf("the stream ended with %v\nwant RESOURCE_EXHAUSTED: %s", end, wantEnd)
	}
	if rejects != maxRefusals || maxRefusals != 100 {
		t.Fatalf("%d Rejects before the stream was closed, want %d", rejects, 100)
	}
	m := n.srv.base.metrics
	if got := testutil.ToFloat64(m.unproposed.WithLabelValues("finished", "stale")); got != 101 {
		t.Errorf("barista_worker_reports_unproposed_total{finished,stale} = %v, want 101", got)
	}
	if got := testutil.ToFloat64(m.refusedSessions); got != 1 {
		t.Errorf("barista_worker_sessions_refused_total = %v, want 1", got)
	}

	// A Started and a heartbeat of an attempt the job never had.
	w2, _, err := n.connect("", hello("w2"))
	if err != nil {
		t.Fatal(err)
	}
	w2.send(&pb.WorkerMessage{Msg: &pb.WorkerMessage_Heartbeat{Heartbeat: &pb.JobHeartbeat{Job: uint64(job), Attempt: 7, Seq: 1}}})
	w2.send(&pb.WorkerMessage{Msg: &pb.WorkerMessage_Started{Started: &pb.JobStarted{Job: uint64(job), Attempt: 7}}})
	want := fmt.Sprintf(`start of job %d (attempt 7, worker "w2") is stale: job is queued at attempt 0`, job)
	if r := w2.next().GetReject(); r == nil || r.Reason != want {
		t.Fatalf("Started of attempt 7: %v, want Reject %q (the heartbeat, of no job the session runs, unanswered)", r, want)
	}
	for _, msg := range []string{"started", "heartbeat"} {
		if got := testutil.ToFloat64(m.unproposed.WithLabelValues(msg, "stale")); got != 1 {
			t.Errorf("barista_worker_reports_unproposed_total{%s,stale} = %v, want 1", msg, got)
		}
	}
	// Only the sessions' Hellos (what each worker runs) are logged.
	hellos := 0
	for _, c := range n.loggedAfter(first) {
		if c.GetWorkerHello() != nil {
			hellos++
			continue
		}
		t.Errorf("logged: %v", c)
	}
	if hellos != 2 {
		t.Errorf("%d worker hellos logged, want 2", hellos)
	}
}

// TestRefusalWindow: a session has at most maxRefusals refused reports in
// any refusalWindow.
func TestRefusalWindow(t *testing.T) {
	var r refusals
	for i := range maxRefusals {
		if !r.add(time.Duration(i) * time.Millisecond) {
			t.Fatalf("refusal %d refused", i+1)
		}
	}
	// The oldest came at 0: another is allowed from refusalWindow on.
	if r.add(refusalWindow - time.Nanosecond) {
		t.Fatal("refusal 101 within the window allowed")
	}
	if !r.add(refusalWindow) {
		t.Fatal("refusal 101 once the first left the window refused")
	}
	if r.add(refusalWindow + 500*time.Microsecond) {
		t.Fatal("refusal 102 with the second (at 1 ms) still in the window allowed")
	}
	if !r.add(refusalWindow+time.Millisecond) || len(r.at) != maxRefusals {
		t.Fatalf("refusal 102 refused, or the ring grew to %d", len(r.at))
	}
}

// TestWorkerTokenBinding: a worker token bound to an ID or a prefix opens
// sessions only for the IDs its binding covers; an unbound one and an
// admin token for any.
func TestWorkerTokenBinding(t *testing.T) {
	const gpu, cpu7 = "worker-secret-gpu-prefix", "worker-secret-cpu-7-only"
	n := startTestNode(t, []auth.Token{{Secret: testAdmin, Role: auth.RoleAdmin}, {Secret: testWorker, Role: auth.RoleWorker},
		{Secret: gpu, Role: auth.RoleWorker, Worker: "gpu-*"}, {Secret: cpu7, Role: auth.RoleWorker, Worker: "cpu-7"}}, nil)
	cases := []struct {
		token, id string
		want      string // "" = welcomed
	}{
		{gpu, "gpu-1", ""},
		{gpu, "gpu-", ""},
		{gpu, "cpu-1", `rpc error: code = PermissionDenied desc = hello.worker_id: "cpu-1" is outside this token's binding (worker_id "gpu-*")`},
		{gpu, "gpu", `rpc error: code = PermissionDenied desc = hello.worker_id: "gpu" is outside this token's binding (worker_id "gpu-*")`},
		{cpu7, "cpu-7", ""},
		{cpu7, "cpu-70", `rpc error: code = PermissionDenied desc = hello.worker_id: "cpu-70" is outside this token's binding (worker_id "cpu-7")`},
		{testWorker, "any-1", ""},
		{testAdmin, "any-2", ""},
	}
	for _, c := range cases {
		w, _, err := n.connect(c.token, hello(c.id))
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			w.cancel()
		}
		if got != c.want {
			t.Errorf("Hello %q with the %q token: %q, want %q", c.id, c.token, got, c.want)
		}
	}
}

// TestSilentSessionReplaced: while a worker's session is live (it
// heartbeats), a second Hello with its ID is refused ABORTED; once it has
// been silent for two heartbeat intervals, the new session replaces it
// and the old stream ends.
func TestSilentSessionReplaced(t *testing.T) {
	const interval = 300 * time.Millisecond
	n := startTestNode(t, nil, func(c *fsm.Config) { c.HeartbeatIntervalMs = interval.Milliseconds() })
	old, _, err := n.connect("", hello("w1"))
	if err != nil {
		t.Fatal(err)
	}
	// Live: heartbeats every quarter interval, for four intervals.
	var lastSent time.Time
	for i := uint64(1); i <= 16; i++ {
		old.send(&pb.WorkerMessage{Msg: &pb.WorkerMessage_Heartbeat{Heartbeat: &pb.JobHeartbeat{Seq: i}}})
		lastSent = time.Now()
		if i%4 == 0 {
			if _, _, err := n.connect("", hello("w1")); status.Code(err) != codes.Aborted {
				t.Fatalf("second Hello while the first session heartbeats: %v, want ABORTED", err)
			}
		}
		time.Sleep(interval / 4)
	}
	// Silent: retried, the new session wins after two intervals.
	var fresh *rawWorker
	for fresh == nil {
		w, _, err := n.connect("", hello("w1"))
		switch {
		case err == nil:
			fresh = w
		case status.Code(err) != codes.Aborted:
			t.Fatalf("second Hello after silence: %v", err)
		default:
			time.Sleep(interval / 10)
		}
	}
	if silent := time.Since(lastSent); silent < 2*interval {
		t.Fatalf("the old session was replaced after %s of silence, before two heartbeat intervals (%s)", silent, 2*interval)
	}
	select {
	case err := <-old.ended:
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("the replaced stream ended with %v, want UNAVAILABLE", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the replaced stream did not end")
	}
	fresh.send(&pb.WorkerMessage{Msg: &pb.WorkerMessage_Heartbeat{Heartbeat: &pb.JobHeartbeat{Seq: 1}}})
	if ack := fresh.next().GetHeartbeatAck(); ack == nil || ack.Seq != 1 {
		t.Fatalf("the new session: %v", ack)
	}
}

// TestDrainNeedsOwnToken: drain (and undrain) needs an admin token or the
// worker's own: a worker token whose binding covers that ID. An unbound
// worker token is every worker's and no one's own: it may drain none.
// Only an admin drains a worker before it first connects (create), which
// makes its record: a worker token cannot fill the state with records.
func TestDrainNeedsOwnToken(t *testing.T) {
	const gpu, cpu7, acme = "worker-secret-gpu-prefix", "worker-secret-cpu-7-only", "client-secret-acme-00"
	n := startTestNode(t, []auth.Token{{Secret: testAdmin, Role: auth.RoleAdmin}, {Secret: testWorker, Role: auth.RoleWorker},
		{Secret: gpu, Role: auth.RoleWorker, Worker: "gpu-*"}, {Secret: cpu7, Role: auth.RoleWorker, Worker: "cpu-7"},
		{Secret: acme, Role: auth.RoleClient, Tenant: "acme"}}, nil)
	cases := []struct {
		token, id string
		want      string // "" = drained
	}{
		{testAdmin, "cpu-7", ""},
		{testAdmin, "gpu-1", ""},
		{gpu, "gpu-1", ""},
		{gpu, "gpu-9", `rpc error: code = PermissionDenied desc = create: draining a worker before it first connects needs an admin token`},
		{cpu7, "cpu-7", ""},
		{gpu, "cpu-7", `rpc error: code = PermissionDenied desc = worker_id: draining worker "cpu-7" needs an admin token or that worker's own token; this token is bound to worker_id "gpu-*"`},
		{cpu7, "cpu-70", `rpc error: code = PermissionDenied desc = worker_id: draining worker "cpu-70" needs an admin token or that worker's own token; this token is bound to worker_id "cpu-7"`},
		{testWorker, "gpu-1", `rpc error: code = PermissionDenied desc = worker_id: draining worker "gpu-1" needs an admin token or that worker's own token (a worker token bound to it); this worker token is bound to no worker ID`},
		{acme, "gpu-1", `rpc error: code = PermissionDenied desc = a client token may not call /barista.v1.Worker/Drain`},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range cases {
		for _, undrain := range []bool{false, true} {
			create := c.token == testAdmin || c.id == "gpu-9"
			_, err := pb.NewWorkerClient(n.dial(c.token)).Drain(ctx, &pb.DrainRequest{WorkerId: c.id, Undrain: undrain, Create: create})
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != c.want {
				t.Errorf("drain %q (undrain %v) with the %q token: %q, want %q", c.id, undrain, c.token, got, c.want)
			}
		}
	}
	// Only the permitted calls reached the log: every worker they named
	// is undrained again, and no other worker exists.
	var ids []string
	for _, w := range n.node.FSM.Workers() {
		if w.Drained {
			t.Errorf("worker %s is drained", w.ID)
		}
		ids = append(ids, w.ID)
	}
	if strings.Join(ids, ",") != "cpu-7,gpu-1" {
		t.Errorf("workers in the state: %v, want cpu-7 and gpu-1", ids)
	}
}

// fixedRunner starts runs that end at once with a given result.
type fixedRunner struct{ res worker.Result }

func (r fixedRunner) Start(*pb.Assign) (worker.Run, error) {
	done := make(chan struct{})
	close(done)
	return fixedRun{r.res, done}, nil
}

type fixedRun struct {
	res  worker.Result
	done chan struct{}
}

func (r fixedRun) CPU() time.Duration      { return r.res.CPU }
func (r fixedRun) Terminate(time.Duration) {}
func (r fixedRun) Kill()                   {}
func (r fixedRun) Done() <-chan struct{}   { return r.done }
func (r fixedRun) Result() worker.Result   { return r.res }

// startAgent runs an agent until the test ends, with extra dial options
// if any; its Run error arrives on the returned channel.
func (n *testNode) startAgent(id, token string, runner worker.Runner, observe func(worker.Observation), extra ...grpc.DialOption) <-chan error {
	n.t.Helper()
	return n.startAgentWith(worker.Config{ID: id, Size: worker.SizeMD, Runner: runner, Observer: observe}, token, extra...)
}

// startAgentWith runs an agent of cfg (its servers and connection
// options filled in) against n until the test ends.
func (n *testNode) startAgentWith(cfg worker.Config, token string, extra ...grpc.DialOption) <-chan error {
	n.t.Helper()
	cfg.Servers = []string{n.addr}
	cfg.Dial = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer{token: token})}, extra...)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	a, err := worker.New(cfg)
	if err != nil {
		n.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() { defer close(done); errc <- a.Run(ctx) }()
	n.t.Cleanup(func() { cancel(); <-done })
	return errc
}

// TestAgentReportsBinaryStderr: a run whose stderr ends in bytes that
// are not UTF-8 (and is longer than 4 KiB, cut inside a character) is
// still reported: the agent sends valid UTF-8, which gRPC requires of a
// string field, so the report is not refused by the encoder forever.
func TestAgentReportsBinaryStderr(t *testing.T) {
	// Retries at once: the backoff (5 s doubling) is not what this shows.
	n := startTestNode(t, nil, func(c *fsm.Config) { c.Sched.RetryBackoffMs, c.Sched.RetryBackoffMaxMs = 0, 0 })
	job := n.submit()
	stderr := strings.Repeat("€", 2000) + "\xff\xfe\x00binary"
	n.startAgent("w1", "", fixedRunner{worker.Result{ExitCode: 3, CPU: 40 * time.Millisecond, StderrTail: stderr}}, nil)
	waitFor(t, 20*time.Second, "the job to fail (every attempt exits 3)", func() bool {
		j, _, _ := n.node.FSM.Job(job)
		return j.State == sfq.Failed
	})
	j, _, _ := n.node.FSM.Job(job)
	want := sfq.OutputTail(stderr)
	if j.Result == nil || j.Result.StderrTail != want || j.Result.ExitCode != 3 || !strings.HasSuffix(want, "\uFFFD\x00binary") {
		t.Fatalf("result %+v, want exit 3 and the tail ...%q", j.Result, want[len(want)-21:])
	}
}

// TestAgentReportsStdoutTail: the agent reports the end of a run's
// stdout beside its stderr; the ended job keeps both and the worker it
// ran on.
func TestAgentReportsStdoutTail(t *testing.T) {
	n := startTestNode(t, nil, nil)
	job := n.submit()
	stdout := strings.Repeat("0123456789", 1000) + "€ done\n"
	n.startAgent("w1", "", fixedRunner{worker.Result{CPU: 40 * time.Millisecond, StdoutTail: stdout, StderrTail: "warn\n"}}, nil)
	waitFor(t, 20*time.Second, "the job to complete", func() bool {
		j, _, _ := n.node.FSM.Job(job)
		return j.State == sfq.Completed
	})
	j, _, _ := n.node.FSM.Job(job)
	if j.Result == nil || j.Result.StdoutTail != stdout[len(stdout)-sfq.MaxOutputTail:] || j.Result.StderrTail != "warn\n" || j.Worker != "w1" {
		t.Fatalf("worker %q, result %+v", j.Worker, j.Result)
	}
}

// TestFinishedWithoutStdoutTail: a worker of a build before stdout tails
// sends a Finished without one (field 7 absent: the bytes below are such
// a message). It is accepted and acknowledged; the job completes with its
// stderr tail, no stdout tail, and the worker it ran on.
func TestFinishedWithoutStdoutTail(t *testing.T) {
	n := startTestNode(t, nil, nil)
	job := n.submit()
	w, _, err := n.connect("", hello("w-old"))
	if err != nil {
		t.Fatal(err)
	}
	a := w.ready(1)
	w.send(&pb.WorkerMessage{Msg: &pb.WorkerMessage_Started{Started: &pb.JobStarted{Job: a.Job, Attempt: a.Attempt}}})
	// JobFinished{job: a.Job, attempt: a.Attempt, outcome: OK, cpu_ms: 300,
	// exit_code: 0, stderr_tail: "old worker\n"} as the old protocol wrote it.
	old := []byte{0x08, byte(a.Job), 0x10, byte(a.Attempt), 0x18, byte(pb.Outcome_OK), 0x20, 0xac, 0x02, 0x32, 11}
	old = append(old, "old worker\n"...)
	var fin pb.JobFinished
	if err := proto.Unmarshal(old, &fin); err != nil || fin.CpuMs != 300 || fin.StderrTail != "old worker\n" || a.Job > 127 || a.Attempt > 127 {
		t.Fatalf("old Finished: %v %v", &fin, err)
	}
	w.send(&pb.WorkerMessage{Msg: &pb.WorkerMessage_Finished{Finished: &fin}})
	for {
		m := w.next()
		if m.GetReject() != nil {
			t.Fatalf("an old-protocol Finished was rejected: %v", m)
		}
		if ack := m.GetFinishedAck(); ack != nil {
			if ack.Job != a.Job || ack.Attempt != a.Attempt {
				t.Fatalf("ack %v", ack)
			}
			break
		}
	}
	j, _, _ := n.node.FSM.Job(job)
	if j.State != sfq.Completed || j.Worker != "w-old" || j.CPUMs != 300 || j.Result == nil || j.Result.StderrTail != "old worker\n" || j.Result.StdoutTail != "" {
		t.Fatalf("job %s on %q cpu %d, result %+v", j.State, j.Worker, j.CPUMs, j.Result)
	}
}

// TestAgentIdentity: an agent whose token's binding does not cover its
// ID stops with PERMISSION_DENIED; one whose ID has a live session
// retries (ABORTED) and takes over once that session is silent.
func TestAgentIdentity(t *testing.T) {
	const gpu = "worker-secret-gpu-prefix"
	// A holder heartbeating every 50 ms stays live: silence is 1 s.
	n := startTestNode(t, []auth.Token{{Secret: testAdmin, Role: auth.RoleAdmin}, {Secret: gpu, Role: auth.RoleWorker, Worker: "gpu-*"}},
		func(c *fsm.Config) { c.HeartbeatIntervalMs = 500 })
	select {
	case err := <-n.startAgent("cpu-1", gpu, worker.FakeRunner{}, nil):
		if status.Code(err) != codes.PermissionDenied || !errors.Is(err, worker.ErrRefused) || !strings.Contains(err.Error(), `worker "cpu-1": 127.0.0.1:`) {
			t.Fatalf("agent outside its binding: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("an agent outside its token's binding still runs")
	}

	// A live session of gpu-1 holds the ID while it heartbeats.
	holder, _, err := n.connect(gpu, hello("gpu-1"))
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan uint64, 1)
	n.startAgent("gpu-1", gpu, worker.FakeRunner{}, func(o worker.Observation) {
		if o.What == "started" {
			started <- o.Job
		}
	})
	job := n.submit()
	for i := uint64(1); i <= 10; i++ {
		holder.send(&pb.WorkerMessage{Msg: &pb.WorkerMessage_Heartbeat{Heartbeat: &pb.JobHeartbeat{Seq: i}}})
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case id := <-started:
		t.Fatalf("the agent ran job %d while another session of its ID was live", id)
	default:
	}
	// Silent: the agent's retries get through and it runs the job.
	select {
	case id := <-started:
		if sfq.JobID(id) != job {
			t.Fatalf("ran job %d, want %d", id, job)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the agent never replaced the silent session")
	}
}

// TestDrainUnknownWorker: draining (or undraining) a worker the cluster
// has never seen is NOT_FOUND, and lists nothing; create drains it ahead
// of its first connection.
func TestDrainUnknownWorker(t *testing.T) {
	n := startTestNode(t, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := pb.NewWorkerClient(n.dial(""))
	for _, undrain := range []bool{false, true} {
		_, err := w.Drain(ctx, &pb.DrainRequest{WorkerId: "nosuch", Undrain: undrain})
		if want := `rpc error: code = NotFound desc = worker_id: no worker "nosuch" is connected or known (create=true drains it before it first connects)`; err == nil || err.Error() != want {
			t.Fatalf("drain nosuch (undrain %v): %v, want %s", undrain, err, want)
		}
	}
	list, err := w.ListWorkers(ctx, &pb.ListWorkersRequest{})
	if err != nil || len(list.Workers) != 0 {
		t.Fatalf("workers after refused drains: %v %v", list, err)
	}
	if _, err := w.Drain(ctx, &pb.DrainRequest{WorkerId: "later", Create: true}); err != nil {
		t.Fatal(err)
	}
	if list, err = w.ListWorkers(ctx, &pb.ListWorkersRequest{}); err != nil || len(list.Workers) != 1 || list.Workers[0].State != "drained" {
		t.Fatalf("workers after drain --create: %v %v", list, err)
	}
}

// TestRunsEndingBeforeTheirStarted: with a heartbeat of a second the
// leader lets a Started wait 100 ms. An agent whose runs end at once
// reports each by its Finished alone, and the leader replicates every
// run's Started with it; an agent of an earlier build sends each Started
// itself. Either way every job's events are queued, assigned, started,
// completed.
func TestRunsEndingBeforeTheirStarted(t *testing.T) {
	for _, atOnce := range []bool{false, true} {
		t.Run(fmt.Sprintf("started_at_once=%v", atOnce), func(t *testing.T) {
			n := startTestNode(t, nil, func(c *fsm.Config) { c.HeartbeatIntervalMs = 1000 })
			const jobs = 30
			var ids []sfq.JobID
			for range jobs {
				ids = append(ids, n.submit())
			}
			cfg := worker.Config{ID: "w1", Size: worker.SizeMD, Runner: fixedRunner{worker.Result{CPU: time.Millisecond}}}
			workercompat.Set(&cfg, workercompat.Options{StartedAtOnce: atOnce})
			n.startAgentWith(cfg, "")
			waitFor(t, 20*time.Second, "every job to complete", func() bool {
				for _, id := range ids {
					if j, _, _ := n.node.FSM.Job(id); j.State != sfq.Completed {
						return false
					}
				}
				return true
			})
			for _, id := range ids {
				if got := eventsOf(n.node.FSM, id); got != "queued, assigned w1, started w1, completed" {
					t.Errorf("job %d: events %q", id, got)
				}
			}
			want := float64(jobs)
			if atOnce {
				want = 0
			}
			if got := testutil.ToFloat64(n.srv.base.metrics.startsWithFinished); got != want {
				t.Fatalf("Started replicated with the Finished for %v runs, want %v", got, want)
			}
		})
	}
}

// unrunnableRunner fails every job as one that can never run.
type unrunnableRunner struct{}

func (unrunnableRunner) Start(a *pb.Assign) (worker.Run, error) {
	return nil, fmt.Errorf("job %d: bad payload: %w", a.Job, worker.ErrUnrunnable)
}

// TestUnrunnableJobIsNotRetried: a worker whose runner says a job can
// never run reports its failure permanent, and the job (max_attempts 3)
// ends failed after that one run, as the worker said, not after three.
func TestUnrunnableJobIsNotRetried(t *testing.T) {
	n := startTestNode(t, nil, nil)
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD}}})
	res := n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_MD, EstCostMs: 1000, MaxAttempts: 3}}})
	id := res[0].Job
	n.startAgent("w1", "", unrunnableRunner{}, nil)
	waitFor(t, 10*time.Second, "the job to end", func() bool {
		j, _, _ := n.node.FSM.Job(id)
		return j.State.Terminal()
	})
	j, _, _ := n.node.FSM.Job(id)
	if j.State != sfq.Failed || j.Attempt != 1 || j.Failures != 1 || j.Result == nil || j.Result.ExitCode != 127 {
		t.Fatalf("job: %s attempt %d failures %d result %+v", j.State, j.Attempt, j.Failures, j.Result)
	}
	if got := eventsOf(n.node.FSM, id); got != "queued, assigned w1, started w1, failed" {
		t.Fatalf("events: %s", got)
	}
}
