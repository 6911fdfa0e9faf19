package rpc

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/leader"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// The hub's loops on a leader.Memory: one process, no Raft, no clocks
// but the test's, so every order below is exact.

type memHub struct {
	t   *testing.T
	mem *leader.Memory
	h   *hub
}

func newMemHub(t *testing.T) *memHub {
	t.Helper()
	cfg := fsm.DefaultConfig()
	cfg.HeartbeatIntervalMs, cfg.SelfKillAfterMs = 1_000, 5_000
	cfg.Sched.AckTimeoutMs, cfg.Sched.LeaseTimeoutMs = 2_000, 10_000
	mem, err := leader.NewConfigured(cfg, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return &memHub{t: t, mem: mem, h: newHub(ctx, mem, "n1", hclog.NewNullLogger(), newWorkerMetrics())}
}

func (m *memHub) propose(cmds ...*clusterpb.Command) []fsm.Result {
	m.t.Helper()
	res, err := m.mem.Propose(context.Background(), cmds)
	if err != nil {
		m.t.Fatal(err)
	}
	for i, r := range res {
		if r.Code != fsm.OK {
			m.t.Fatalf("command %d refused: %s", i, r.Msg)
		}
	}
	return res
}

func (m *memHub) submit(tenant string, size pb.Size) uint64 {
	m.t.Helper()
	return uint64(m.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: tenant, Size: size, EstCostMs: 1000}}})[0].Job)
}

// ready opens a session for a worker and says it is ready.
func (m *memHub) ready(id string, size sfq.Size) *session {
	m.t.Helper()
	s, err := m.h.open(id, size, "")
	if err != nil {
		m.t.Fatal(err)
	}
	m.handle(s, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Ready{Ready: &pb.Ready{}}})
	return s
}

// assignedOne gives tenant acme (gold) one md job and worker w1 (md) that
// job, the Assign consumed.
func (m *memHub) assignedOne() (uint64, *session) {
	m.t.Helper()
	m.propose(tenant("acme", pb.Tier_GOLD))
	job := m.submit("acme", pb.Size_MD)
	w1 := m.ready("w1", sfq.MD)
	m.h.dispatchRound()
	if got := sent(w1); len(got) != 1 || got[0] != fmt.Sprintf("assign %d/1", job) {
		m.t.Fatalf("w1 got %q, want the assignment of job %d", got, job)
	}
	return job, w1
}

func (m *memHub) handle(s *session, msg *pb.WorkerMessage) {
	m.t.Helper()
	if err := m.h.handle(context.Background(), s, msg); err != nil {
		m.t.Fatal(err)
	}
	m.h.settleStarted(s) // a Started's result is acted on apart
}

// sent returns what the hub queued for s, as short strings.
func sent(s *session) []string {
	var out []string
	for {
		select {
		case msg := <-s.out:
			switch m := msg.Msg.(type) {
			case *pb.LeaderMessage_Assign:
				a := fmt.Sprintf("assign %d/%d", m.Assign.Job, m.Assign.Attempt)
				if f := m.Assign.Finished; f != nil {
					a += fmt.Sprintf(" +finished-ack %d/%d", f.Job, f.Attempt)
				}
				out = append(out, a)
			case *pb.LeaderMessage_Reject:
				out = append(out, fmt.Sprintf("reject %d/%d: %s", m.Reject.Job, m.Reject.Attempt, m.Reject.Reason))
			case *pb.LeaderMessage_HeartbeatAck:
				out = append(out, fmt.Sprintf("heartbeat-ack %d", m.HeartbeatAck.Seq))
			case *pb.LeaderMessage_FinishedAck:
				out = append(out, fmt.Sprintf("finished-ack %d/%d", m.FinishedAck.Job, m.FinishedAck.Attempt))
			default:
				out = append(out, fmt.Sprintf("%T", msg.Msg))
			}
		default:
			return out
		}
	}
}

func tenant(name string, tier pb.Tier) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: name, Tier: tier}}}
}

// TestDispatchRoundOrder: one round is one entry of one Dispatch per
// ready worker, smallest workers first and by ID within a size, so the
// oldest small jobs go to the smallest containers.
func TestDispatchRoundOrder(t *testing.T) {
	m := newMemHub(t)
	m.propose(tenant("acme", pb.Tier_GOLD))
	var jobs []uint64
	for range 4 {
		jobs = append(jobs, m.submit("acme", pb.Size_SM))
	}
	lg := m.ready("w-lg", sfq.LG)
	md2 := m.ready("w-md2", sfq.MD)
	sm := m.ready("w-sm", sfq.SM)
	md1 := m.ready("w-md1", sfq.MD)
	before := len(m.mem.Entries())
	if !m.h.dispatchRound() {
		t.Fatal("the round assigned nothing")
	}
	entries := m.mem.Entries()[before:]
	if len(entries) != 1 {
		t.Fatalf("the round proposed %d entries, want 1", len(entries))
	}
	var order []string
	for _, c := range entries[0] {
		order = append(order, c.GetDispatch().WorkerId)
	}
	if got := strings.Join(order, " "); got != "w-sm w-md1 w-md2 w-lg" {
		t.Fatalf("dispatch order %q", got)
	}
	for i, s := range []*session{sm, md1, md2, lg} {
		want := fmt.Sprintf("assign %d/1", jobs[i])
		if got := sent(s); len(got) != 1 || got[0] != want {
			t.Errorf("%s got %q, want %q", s.id, got, want)
		}
	}
	// Nobody is ready any more: the next round proposes nothing.
	if m.h.dispatchRound() || len(m.mem.Entries()) != before+1 {
		t.Fatal("a second round proposed without a ready worker")
	}
}

// TestHeartbeatFencing: a lease the leader expired is not renewed by a
// late heartbeat: it is answered with Reject without a proposal, the
// batch acknowledges the other worker's heartbeat, and the fenced count
// says so.
func TestHeartbeatFencing(t *testing.T) {
	m := newMemHub(t)
	m.propose(tenant("acme", pb.Tier_GOLD))
	a, b := m.submit("acme", pb.Size_MD), m.submit("acme", pb.Size_MD)
	w1, w2 := m.ready("w1", sfq.MD), m.ready("w2", sfq.MD)
	m.h.dispatchRound()
	if got := append(sent(w1), sent(w2)...); strings.Join(got, ",") != fmt.Sprintf("assign %d/1,assign %d/1", a, b) {
		t.Fatalf("assignments %q", got)
	}
	for _, s := range []*session{w1, w2} {
		m.handle(s, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Started{Started: &pb.JobStarted{Job: uint64(s.job), Attempt: 1}}})
	}
	// w2 renews its lease in time; w1 falls silent past lease_timeout.
	m.mem.Advance(6 * time.Second)
	m.handle(w2, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Heartbeat{Heartbeat: &pb.JobHeartbeat{Job: b, Attempt: 1, Seq: 7}}})
	m.h.flushHeartbeats()
	m.mem.Advance(5 * time.Second)
	now, _ := m.mem.ClusterNow()
	n, err := leader.ExpireDue(context.Background(), m.mem, now, hclog.NewNullLogger(), nil)
	if err != nil || n != 1 {
		t.Fatalf("expired %d (%v), want w1's lease only", n, err)
	}
	if j, _, _ := m.mem.State().Job(sfq.JobID(a)); j.State != sfq.Queued {
		t.Fatalf("job %d is %v after its lease expired, want queued", a, j.State)
	}
	m.handle(w1, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Heartbeat{Heartbeat: &pb.JobHeartbeat{Job: a, Attempt: 1, Seq: 3}}})
	m.handle(w2, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Heartbeat{Heartbeat: &pb.JobHeartbeat{Job: b, Attempt: 1, Seq: 8}}})
	m.h.flushHeartbeats()
	if got := sent(w1); len(got) != 1 || got[0] != fmt.Sprintf("reject %d/1: lease no longer held: stale", a) {
		t.Errorf("w1 got %q", got)
	}
	if got := sent(w2); strings.Join(got, ",") != "heartbeat-ack 7,heartbeat-ack 8" {
		t.Errorf("w2 got %q", got)
	}
	if w1.job != 0 {
		t.Errorf("w1 still holds job %d after the reject", w1.job)
	}
	if got := testutil.ToFloat64(m.h.metrics.fenced.WithLabelValues("heartbeat")); got != 1 {
		t.Errorf("fenced heartbeats %v, want 1", got)
	}
	// The leader's state showed it fenced off: it was not proposed.
	if got := testutil.ToFloat64(m.h.metrics.unproposed.WithLabelValues("heartbeat", "stale")); got != 1 {
		t.Errorf("stale heartbeats answered without a proposal %v, want 1", got)
	}
}

// TestExpireAckTimeout: an assignment never acknowledged by Started goes
// back to the queue after ack_timeout, once, and the job's next attempt
// goes to the next ready worker.
func TestExpireAckTimeout(t *testing.T) {
	m := newMemHub(t)
	job, _ := m.assignedOne()
	met := leader.NewDeadlineMetrics(nil)
	now, _ := m.mem.ClusterNow()
	if n, _ := leader.ExpireDue(context.Background(), m.mem, now+1_999, hclog.NewNullLogger(), met); n != 0 {
		t.Fatalf("expired %d before ack_timeout", n)
	}
	m.mem.Advance(2 * time.Second)
	now, _ = m.mem.ClusterNow()
	for i, want := range []int{1, 0} {
		if n, err := leader.ExpireDue(context.Background(), m.mem, now, hclog.NewNullLogger(), met); err != nil || n != want {
			t.Fatalf("pass %d expired %d (%v), want %d", i, n, err, want)
		}
	}
	w2 := m.ready("w2", sfq.MD)
	m.h.dispatchRound()
	if got := sent(w2); len(got) != 1 || got[0] != fmt.Sprintf("assign %d/2", job) {
		t.Fatalf("w2 got %q, want the second attempt", got)
	}
	if got := testutil.ToFloat64(met.Expiries("ack")); got != 1 {
		t.Errorf("ack expiries %v, want 1", got)
	}
}

// TestLeadershipLoss: once the node no longer leads, a round proposes
// nothing and assigns nothing; when the leadership's context ends, run
// detaches the hub, ends every session and returns, and the hub takes no
// new session.
func TestLeadershipLoss(t *testing.T) {
	m := newMemHub(t)
	m.propose(tenant("acme", pb.Tier_GOLD))
	m.submit("acme", pb.Size_MD)
	w1 := m.ready("w1", sfq.MD)
	m.mem.SetLeading(false)
	entries := len(m.mem.Entries())
	if m.h.dispatchRound() || len(m.mem.Entries()) != entries || len(sent(w1)) != 0 {
		t.Fatal("a node that does not lead dispatched")
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := newHub(ctx, m.mem, "n1", hclog.NewNullLogger(), newWorkerMetrics())
	s, err := h.open("w2", sfq.MD, "")
	if err != nil {
		t.Fatal(err)
	}
	detached, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(done); h.run(func() { close(detached) }) }()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after the leadership ended")
	}
	select {
	case <-detached:
	default:
		t.Fatal("run returned without detaching the hub")
	}
	select {
	case <-s.done:
	default:
		t.Fatal("a session outlived the leadership")
	}
	if _, err := h.open("w3", sfq.MD, ""); status.Code(err) != codes.Unavailable {
		t.Fatalf("a closed hub opened a session: %v", err)
	}
}

// TestHeartbeatOfAFinishedJobIsAcknowledged: a heartbeat still waiting
// for its batch when the job's Finished arrives is acknowledged, not
// dropped. A worker running short jobs back to back sends most of its
// heartbeats while a job runs; when every one was dropped it heard no
// acknowledgement for 2.5 intervals and reconnected, again and again.
func TestHeartbeatOfAFinishedJobIsAcknowledged(t *testing.T) {
	m := newMemHub(t)
	job, w1 := m.assignedOne()
	m.handle(w1, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Started{Started: &pb.JobStarted{Job: job, Attempt: 1}}})
	m.handle(w1, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Heartbeat{Heartbeat: &pb.JobHeartbeat{Job: job, Attempt: 1, Seq: 5, CpuMs: 3}}})
	m.handle(w1, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Finished{Finished: &pb.JobFinished{Job: job, Attempt: 1, Outcome: pb.Outcome_OK, CpuMs: 4}}})
	m.h.flushHeartbeats()
	if got := strings.Join(sent(w1), ","); got != fmt.Sprintf("heartbeat-ack 5,finished-ack %d/1", job) {
		t.Fatalf("w1 got %q", got)
	}
}

// TestFinishedWithReady: a Finished that carries the worker's next Ready
// (ready_credit) is replicated in one entry with a Dispatch for that
// worker, and answered by one Assign that acknowledges the run; with no
// work for it, by a FinishedAck, the worker staying ready with that
// credit for the dispatcher. A worker of an older build (Finished, then
// Ready) is served as before.
func TestFinishedWithReady(t *testing.T) {
	m := newMemHub(t)
	m.propose(tenant("acme", pb.Tier_GOLD))
	j1, j2 := m.submit("acme", pb.Size_SM), m.submit("acme", pb.Size_SM)
	w1 := m.ready("w1", sfq.SM)
	m.h.dispatchRound()
	if got := strings.Join(sent(w1), ","); got != fmt.Sprintf("assign %d/1", j1) {
		t.Fatalf("w1 got %q", got)
	}
	run := func(job, credit uint64) []*clusterpb.Command {
		t.Helper()
		m.handle(w1, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Started{Started: &pb.JobStarted{Job: job, Attempt: 1}}})
		before := len(m.mem.Entries())
		m.handle(w1, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Finished{Finished: &pb.JobFinished{Job: job, Attempt: 1, Outcome: pb.Outcome_OK, CpuMs: 4, ReadyCredit: credit}}})
		entries := m.mem.Entries()[before:]
		if len(entries) != 1 {
			t.Fatalf("the Finished of job %d proposed %d entries, want 1", job, len(entries))
		}
		return entries[0]
	}
	// Work is queued: the Finished and the Dispatch are one entry.
	if got, want := commandKinds(run(j1, 7)), fmt.Sprintf("finished %d/1 w1, dispatch w1 credit 7", j1); got != want {
		t.Fatalf("entry %q, want %q", got, want)
	}
	if got, want := strings.Join(sent(w1), ","), fmt.Sprintf("assign %d/1 +finished-ack %d/1", j2, j1); got != want {
		t.Fatalf("w1 got %q, want %q", got, want)
	}
	if w1.ready {
		t.Fatal("w1 is still ready after its credit was spent")
	}

	// Nothing is queued: the Finished alone, a FinishedAck, and the worker
	// stays ready with its credit; the next submit goes to it.
	if got, want := commandKinds(run(j2, 8)), fmt.Sprintf("finished %d/1 w1", j2); got != want {
		t.Fatalf("entry %q, want %q", got, want)
	}
	if got, want := strings.Join(sent(w1), ","), fmt.Sprintf("finished-ack %d/1", j2); got != want {
		t.Fatalf("w1 got %q, want %q", got, want)
	}
	if !w1.ready || w1.credit != 8 {
		t.Fatalf("w1 ready=%v credit=%d, want ready with credit 8", w1.ready, w1.credit)
	}
	j3 := m.submit("acme", pb.Size_SM)
	before := len(m.mem.Entries())
	m.h.dispatchRound()
	if got, want := commandKinds(m.mem.Entries()[before]), "dispatch w1 credit 8"; got != want {
		t.Fatalf("round %q, want %q", got, want)
	}
	if got, want := strings.Join(sent(w1), ","), fmt.Sprintf("assign %d/1", j3); got != want {
		t.Fatalf("w1 got %q, want %q", got, want)
	}

	// An older worker: Finished without a credit, then Ready.
	j4 := m.submit("acme", pb.Size_SM)
	if got, want := commandKinds(run(j3, 0)), fmt.Sprintf("finished %d/1 w1", j3); got != want {
		t.Fatalf("entry %q, want %q", got, want)
	}
	if got, want := strings.Join(sent(w1), ","), fmt.Sprintf("finished-ack %d/1", j3); got != want {
		t.Fatalf("w1 got %q, want %q", got, want)
	}
	if w1.ready {
		t.Fatal("an older worker's Finished made it ready")
	}
	m.handle(w1, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Ready{Ready: &pb.Ready{Credit: 9}}})
	m.h.dispatchRound()
	if got, want := strings.Join(sent(w1), ","), fmt.Sprintf("assign %d/1", j4); got != want {
		t.Fatalf("w1 got %q, want %q", got, want)
	}
}

// eventsOf lists job's events in f as "kind worker" (the worker of
// assigned and started), in order.
func eventsOf(f *fsm.FSM, job sfq.JobID) string {
	var evs []string
	f.Events(0, func(ev *fsm.Event) bool {
		if ev.Job == job {
			evs = append(evs, strings.TrimSpace(ev.Kind.String()+" "+ev.Worker))
		}
		return true
	})
	return strings.Join(evs, ", ")
}

// commandKinds names an entry's commands: "started JOB/ATTEMPT WORKER",
// "finished JOB/ATTEMPT WORKER", "dispatch WORKER credit N".
func commandKinds(cmds []*clusterpb.Command) string {
	var k []string
	for _, c := range cmds {
		switch x := c.Cmd.(type) {
		case *clusterpb.Command_Started:
			k = append(k, fmt.Sprintf("started %d/%d %s", x.Started.Job, x.Started.Attempt, x.Started.WorkerId))
		case *clusterpb.Command_Finished:
			k = append(k, fmt.Sprintf("finished %d/%d %s", x.Finished.Job, x.Finished.Attempt, x.Finished.WorkerId))
		case *clusterpb.Command_Dispatch:
			k = append(k, fmt.Sprintf("dispatch %s credit %d", x.Dispatch.WorkerId, x.Dispatch.Credit))
		default:
			k = append(k, fmt.Sprintf("%T", c.Cmd))
		}
	}
	return strings.Join(k, ", ")
}

// TestFinishedWithUnreportedStart: a run that ended before its Started
// was due is reported by its Finished alone (start_unreported); the
// leader replicates the run's Started first in the Finished's entry, so
// the log, the state and the events are those of a Started and a
// Finished, as a worker that sends both gets. A run whose Started did
// arrive gets no second one, and a Finished without the mark (a worker
// of an earlier build) is replicated alone, as before.
func TestFinishedWithUnreportedStart(t *testing.T) {
	m := newMemHub(t)
	job, w1 := m.assignedOne()
	finish := func(job uint64, unreported bool) string {
		t.Helper()
		before := len(m.mem.Entries())
		m.handle(w1, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Finished{Finished: &pb.JobFinished{
			Job: job, Attempt: 1, Outcome: pb.Outcome_OK, CpuMs: 4, StartUnreported: unreported}}})
		entries := m.mem.Entries()[before:]
		if len(entries) != 1 {
			t.Fatalf("the Finished of job %d proposed %d entries, want 1", job, len(entries))
		}
		return commandKinds(entries[0])
	}
	if got, want := finish(job, true), fmt.Sprintf("started %d/1 w1, finished %d/1 w1", job, job); got != want {
		t.Fatalf("entry %q, want %q", got, want)
	}
	if got, want := strings.Join(sent(w1), ","), fmt.Sprintf("finished-ack %d/1", job); got != want {
		t.Fatalf("w1 got %q, want %q", got, want)
	}
	if got, want := eventsOf(m.mem.State(), sfq.JobID(job)), "queued, assigned w1, started w1, completed"; got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	if got := testutil.ToFloat64(m.h.metrics.startsWithFinished); got != 1 {
		t.Fatalf("starts replicated with a Finished: %v, want 1", got)
	}

	// A run whose Started was replicated: the mark adds nothing.
	j2 := m.submit("acme", pb.Size_MD)
	m.handle(w1, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Ready{Ready: &pb.Ready{Credit: 2}}})
	m.h.dispatchRound()
	sent(w1)
	m.handle(w1, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Started{Started: &pb.JobStarted{Job: j2, Attempt: 1}}})
	if got, want := finish(j2, true), fmt.Sprintf("finished %d/1 w1", j2); got != want {
		t.Fatalf("entry %q, want %q", got, want)
	}

	// No mark, no Started (its Started lost, say, in a leader change):
	// the Finished alone, and the events say what the state saw.
	j3 := m.submit("acme", pb.Size_MD)
	m.handle(w1, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Ready{Ready: &pb.Ready{Credit: 3}}})
	m.h.dispatchRound()
	sent(w1)
	if got, want := finish(j3, false), fmt.Sprintf("finished %d/1 w1", j3); got != want {
		t.Fatalf("entry %q, want %q", got, want)
	}
	if got, want := eventsOf(m.mem.State(), sfq.JobID(j3)), "queued, assigned w1, completed"; got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	if got := testutil.ToFloat64(m.h.metrics.startsWithFinished); got != 1 {
		t.Fatalf("starts replicated with a Finished: %v, want 1", got)
	}
}

// TestStartedDelay: Welcome lets a run's Started wait 100 ms, and at
// most a tenth of the ack timeout and of the heartbeat interval.
func TestStartedDelay(t *testing.T) {
	for _, c := range []struct{ ack, hb, want int64 }{
		{10_000, 5_000, 100}, {500, 5_000, 50}, {10_000, 200, 20}, {5, 5_000, 0},
	} {
		cfg := fsm.DefaultConfig()
		cfg.Sched.AckTimeoutMs, cfg.HeartbeatIntervalMs = c.ack, c.hb
		if got := startedDelayMs(cfg); got != c.want {
			t.Errorf("ack %d ms, heartbeat %d ms: delay %d ms, want %d", c.ack, c.hb, got, c.want)
		}
	}
	m := newMemHub(t)
	s, err := m.h.open("w1", sfq.MD, "")
	if err != nil {
		t.Fatal(err)
	}
	m.h.welcome(s, &pb.Hello{WorkerId: "w1"})
	if w := (<-s.out).GetWelcome(); w.GetStartedDelayMs() != 100 || !w.GetFinishReady() {
		t.Fatalf("welcome %v, want started_delay_ms 100 and finish_ready", w)
	}
}
