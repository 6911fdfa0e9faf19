package worker

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/baristahq/barista/proto"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeLeader is a Worker service that records what each stream sends and
// answers as a script of the test says.
type fakeLeader struct {
	pb.UnimplementedWorkerServer
	mu      sync.Mutex
	got     []string // every message, as text, streams numbered from 1
	streams int      // streams opened so far
	onMsg   func(stream int, m *pb.WorkerMessage) []*pb.LeaderMessage
	welcome *pb.Welcome
	// welcomeOf, if set, is the Welcome of each stream instead.
	welcomeOf func(stream int) *pb.Welcome
	// endAfter, if set, ends the stream once it returns true for a
	// message (after the answers to it are sent).
	endAfter func(stream int, m *pb.WorkerMessage) bool
	// refuse, if set, ends a stream with its error instead of the
	// Welcome when it returns one for the stream's Hello.
	refuse func(stream int, h *pb.Hello) error
	notify chan struct{}
}

func (f *fakeLeader) Connect(s grpc.BidiStreamingServer[pb.WorkerMessage, pb.LeaderMessage]) error {
	f.mu.Lock()
	f.streams++
	n := f.streams
	f.mu.Unlock()
	first := true
	for {
		m, err := s.Recv()
		if err != nil {
			return nil
		}
		f.mu.Lock()
		f.got = append(f.got, fmt.Sprintf("%d %s", n, describe(m)))
		f.mu.Unlock()
		select {
		case f.notify <- struct{}{}:
		default:
		}
		var out []*pb.LeaderMessage
		if first && f.refuse != nil {
			if err := f.refuse(n, m.GetHello()); err != nil {
				return err
			}
		}
		if first {
			w := f.welcome
			if f.welcomeOf != nil {
				w = f.welcomeOf(n)
			}
			out = append(out, &pb.LeaderMessage{Msg: &pb.LeaderMessage_Welcome{Welcome: w}})
			first = false
		}
		if f.onMsg != nil {
			out = append(out, f.onMsg(n, m)...)
		}
		for _, o := range out {
			if err := s.Send(o); err != nil {
				return nil
			}
		}
		if f.endAfter != nil && f.endAfter(n, m) {
			return nil
		}
	}
}

// describe renders a worker message without its varying parts (the
// credit's value, CPU, sequence numbers).
func describe(m *pb.WorkerMessage) string {
	switch x := m.Msg.(type) {
	case *pb.WorkerMessage_Hello:
		var running []string
		for _, r := range x.Hello.Running {
			running = append(running, fmt.Sprintf("%d/%d", r.Job, r.Attempt))
		}
		d := fmt.Sprintf("hello %s %s running=[%s]", x.Hello.WorkerId, x.Hello.Size, strings.Join(running, " "))
		if x.Hello.Pool != "" {
			d += " pool=" + x.Hello.Pool
		}
		return d
	case *pb.WorkerMessage_Ready:
		return "ready"
	case *pb.WorkerMessage_Started:
		return fmt.Sprintf("started %d/%d", x.Started.Job, x.Started.Attempt)
	case *pb.WorkerMessage_Heartbeat:
		return fmt.Sprintf("heartbeat job=%d", x.Heartbeat.Job)
	case *pb.WorkerMessage_Finished:
		d := fmt.Sprintf("finished %d/%d %s exit=%d stderr=%q", x.Finished.Job, x.Finished.Attempt, x.Finished.Outcome, x.Finished.ExitCode, x.Finished.StderrTail)
		if x.Finished.ReadyCredit != 0 {
			d += " +ready"
		}
		if x.Finished.StartUnreported {
			d += " start-unreported"
		}
		if x.Finished.CpuSource != pb.CpuSource_CPU_SOURCE_UNSPECIFIED {
			d += " cpu_source=" + cpuSourceName(x.Finished.CpuSource)
		}
		if x.Finished.Failure != pb.RunFailure_RUN_FAILURE_UNSPECIFIED {
			d += " failure=" + x.Finished.Failure.String()
		}
		return d
	}
	return "empty"
}

func (f *fakeLeader) messages() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.got...)
}

// waitFor waits until the recorded messages satisfy cond.
func (f *fakeLeader) waitFor(t *testing.T, what string, cond func([]string) bool) []string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if got := f.messages(); cond(got) {
			return got
		}
		select {
		case <-f.notify:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%s: not within 10s; messages:\n%s", what, strings.Join(f.messages(), "\n"))
		}
	}
}

func serve(t *testing.T, f pb.WorkerServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterWorkerServer(srv, f)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// instant is a runner whose runs end at once with a fixed result.
type instant struct{ res Result }

func (r instant) Start(*pb.Assign) (Run, error) {
	done := make(chan struct{})
	close(done)
	return instantRun{r.res, done}, nil
}

type instantRun struct {
	res  Result
	done chan struct{}
}

func (r instantRun) CPU() time.Duration      { return r.res.CPU }
func (r instantRun) Terminate(time.Duration) {}
func (r instantRun) Kill()                   {}
func (r instantRun) Done() <-chan struct{}   { return r.done }
func (r instantRun) Result() Result          { return r.res }

func runAgent(t *testing.T, addr string, runner Runner) {
	t.Helper()
	a, err := New(Config{ID: "w1", Size: SizeMD, Servers: []string{addr}, Runner: runner,
		Dial: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// TestAgentRunsAnAssignment: the agent says hello, offers its slot, runs
// what it is assigned, reports Started then Finished with the run's exit
// code and stderr tail, and offers its slot again once the report is
// acknowledged. The leader's Welcome does not say finish_ready (a leader
// of an older build): the agent sends its Ready apart.
func TestAgentRunsAnAssignment(t *testing.T) {
	f := &fakeLeader{notify: make(chan struct{}, 1), welcome: &pb.Welcome{HeartbeatIntervalMs: 1000, SelfKillAfterMs: 25_000, LeaderId: "n1"}}
	assigned := false
	f.onMsg = func(_ int, m *pb.WorkerMessage) []*pb.LeaderMessage {
		switch x := m.Msg.(type) {
		case *pb.WorkerMessage_Ready:
			if !assigned {
				assigned = true
				return []*pb.LeaderMessage{{Msg: &pb.LeaderMessage_Assign{Assign: &pb.Assign{Job: 7, Attempt: 2, TimeoutMs: 60_000, Size: pb.Size_MD, Credit: x.Ready.Credit}}}}
			}
		case *pb.WorkerMessage_Finished:
			return []*pb.LeaderMessage{{Msg: &pb.LeaderMessage_FinishedAck{FinishedAck: &pb.FinishedAck{Job: x.Finished.Job, Attempt: x.Finished.Attempt}}}}
		}
		return nil
	}
	runAgent(t, serve(t, f), instant{Result{ExitCode: 3, CPU: 40 * time.Millisecond, StderrTail: "boom\n"}})
	got := f.waitFor(t, "a second Ready", func(m []string) bool { return strings.Count(strings.Join(m, "\n"), "ready") == 2 })
	var seq []string
	for _, m := range got {
		if !strings.Contains(m, "heartbeat") {
			seq = append(seq, m)
		}
	}
	want := []string{"1 hello w1 MD running=[]", "1 ready", "1 started 7/2", `1 finished 7/2 FAILED exit=3 stderr="boom\n"`, "1 ready"}
	if strings.Join(seq, "\n") != strings.Join(want, "\n") {
		t.Fatalf("messages:\n%s\nwant:\n%s", strings.Join(seq, "\n"), strings.Join(want, "\n"))
	}
}

// TestAgentLeavesASilentLeader: a leader that acknowledges no heartbeat
// is given up after four intervals (at least a second) and the agent
// opens a new stream, saying hello again.
func TestAgentLeavesASilentLeader(t *testing.T) {
	f := &fakeLeader{notify: make(chan struct{}, 1), welcome: &pb.Welcome{HeartbeatIntervalMs: 100, SelfKillAfterMs: 10_000, LeaderId: "n1"}}
	start := time.Now()
	runAgent(t, serve(t, f), instant{})
	f.waitFor(t, "a second stream", func(m []string) bool {
		for _, s := range m {
			if strings.HasPrefix(s, "2 hello w1") {
				return true
			}
		}
		return false
	})
	if took := time.Since(start); took < time.Second {
		t.Fatalf("the agent gave up on a silent leader after %s, before the limit of 1s", took)
	}
}

func TestSilenceLimit(t *testing.T) {
	for _, c := range []struct{ interval, selfKill, want time.Duration }{
		{100 * time.Millisecond, 10 * time.Second, time.Second},
		{5 * time.Second, 25 * time.Second, 12500 * time.Millisecond},
		{5 * time.Second, 0, 20 * time.Second},
		{time.Second, 60 * time.Second, 4 * time.Second},
	} {
		if got := silenceLimit(c.interval, c.selfKill); got != c.want {
			t.Errorf("silenceLimit(%s, %s) = %s, want %s", c.interval, c.selfKill, got, c.want)
		}
	}
}

// TestAgentFoldsReadyIntoFinished: to a leader whose Welcome says
// finish_ready the agent reports each run with its next Ready folded in
// (one credit each, never spent twice), takes the Assign that carries the
// acknowledgement, and sends no Ready of its own while the leader holds a
// credit: after a bare FinishedAck it waits.
func TestAgentFoldsReadyIntoFinished(t *testing.T) {
	f := &fakeLeader{notify: make(chan struct{}, 1), welcome: &pb.Welcome{HeartbeatIntervalMs: 1000, SelfKillAfterMs: 25_000, LeaderId: "n1", FinishReady: true}}
	credits := map[uint64]bool{}
	f.onMsg = func(_ int, m *pb.WorkerMessage) []*pb.LeaderMessage {
		switch x := m.Msg.(type) {
		case *pb.WorkerMessage_Ready:
			credits[x.Ready.Credit] = true
			return []*pb.LeaderMessage{{Msg: &pb.LeaderMessage_Assign{Assign: &pb.Assign{Job: 7, Attempt: 2, TimeoutMs: 60_000, Size: pb.Size_MD, Credit: x.Ready.Credit}}}}
		case *pb.WorkerMessage_Finished:
			fin := x.Finished
			if fin.ReadyCredit == 0 || credits[fin.ReadyCredit] {
				t.Errorf("finished %d/%d with credit %d (credits so far %v)", fin.Job, fin.Attempt, fin.ReadyCredit, credits)
			}
			credits[fin.ReadyCredit] = true
			ack := &pb.FinishedAck{Job: fin.Job, Attempt: fin.Attempt}
			if fin.Job == 7 {
				return []*pb.LeaderMessage{{Msg: &pb.LeaderMessage_Assign{Assign: &pb.Assign{Job: 8, Attempt: 1, TimeoutMs: 60_000, Size: pb.Size_MD, Credit: fin.ReadyCredit, Finished: ack}}}}
			}
			return []*pb.LeaderMessage{{Msg: &pb.LeaderMessage_FinishedAck{FinishedAck: ack}}}
		}
		return nil
	}
	runAgent(t, serve(t, f), instant{Result{CPU: 5 * time.Millisecond}})
	f.waitFor(t, "the report of job 8", func(m []string) bool { return strings.Contains(strings.Join(m, "\n"), "finished 8/1") })
	time.Sleep(300 * time.Millisecond) // a Ready after the bare FinishedAck would be in by now
	var seq []string
	for _, m := range f.messages() {
		if !strings.Contains(m, "heartbeat") {
			seq = append(seq, m)
		}
	}
	want := []string{"1 hello w1 MD running=[]", "1 ready", "1 started 7/2", `1 finished 7/2 OK exit=0 stderr="" +ready`,
		"1 started 8/1", `1 finished 8/1 OK exit=0 stderr="" +ready`}
	if strings.Join(seq, "\n") != strings.Join(want, "\n") {
		t.Fatalf("messages:\n%s\nwant:\n%s", strings.Join(seq, "\n"), strings.Join(want, "\n"))
	}
}

// withoutHeartbeats drops the heartbeats from recorded messages.
func withoutHeartbeats(got []string) string {
	var seq []string
	for _, m := range got {
		if !strings.Contains(m, "heartbeat") {
			seq = append(seq, m)
		}
	}
	return strings.Join(seq, "\n")
}

// TestAgentHoldsStartedBack: to a leader whose Welcome gives a
// started_delay_ms the agent sends a run's Started only once it is due:
// a run that ends sooner is reported by its Finished alone, marked
// start_unreported; a longer one sends its Started when the delay is up,
// not before, and its Finished unmarked.
func TestAgentHoldsStartedBack(t *testing.T) {
	f := &fakeLeader{notify: make(chan struct{}, 1), welcome: &pb.Welcome{HeartbeatIntervalMs: 5_000, SelfKillAfterMs: 25_000, LeaderId: "n1",
		FinishReady: true, StartedDelayMs: 150}}
	var mu sync.Mutex
	var assigned8, started8 time.Time
	f.onMsg = func(_ int, m *pb.WorkerMessage) []*pb.LeaderMessage {
		switch x := m.Msg.(type) {
		case *pb.WorkerMessage_Ready:
			return []*pb.LeaderMessage{{Msg: &pb.LeaderMessage_Assign{Assign: &pb.Assign{Job: 7, Attempt: 2, TimeoutMs: 60_000, Size: pb.Size_MD, Credit: x.Ready.Credit}}}}
		case *pb.WorkerMessage_Started:
			mu.Lock()
			started8 = time.Now()
			mu.Unlock()
		case *pb.WorkerMessage_Finished:
			fin := x.Finished
			ack := &pb.FinishedAck{Job: fin.Job, Attempt: fin.Attempt}
			if fin.Job == 7 {
				mu.Lock()
				assigned8 = time.Now()
				mu.Unlock()
				return []*pb.LeaderMessage{{Msg: &pb.LeaderMessage_Assign{Assign: &pb.Assign{Job: 8, Attempt: 1, TimeoutMs: 60_000, Size: pb.Size_MD, Credit: fin.ReadyCredit, Finished: ack}}}}
			}
			return []*pb.LeaderMessage{{Msg: &pb.LeaderMessage_FinishedAck{FinishedAck: ack}}}
		}
		return nil
	}
	runner := FakeRunner{Plan: func(a *pb.Assign) FakeSpec {
		if a.Job == 8 {
			return FakeSpec{Duration: 600 * time.Millisecond}
		}
		return FakeSpec{}
	}}
	runAgent(t, serve(t, f), runner)
	got := f.waitFor(t, "the report of job 8", func(m []string) bool { return strings.Contains(strings.Join(m, "\n"), "finished 8/1") })
	want := strings.Join([]string{"1 hello w1 MD running=[]", "1 ready", `1 finished 7/2 OK exit=0 stderr="" +ready start-unreported`,
		"1 started 8/1", `1 finished 8/1 OK exit=0 stderr="" +ready`}, "\n")
	if seq := withoutHeartbeats(got); seq != want {
		t.Fatalf("messages:\n%s\nwant:\n%s", seq, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if held := started8.Sub(assigned8); held < 150*time.Millisecond {
		t.Fatalf("the Started of job 8 came %s after its Assign, before its delay of 150ms", held)
	}
}

// TestAgentSendsHeldStartedToALeaderThatWillNotWait: a run whose Started
// is held back when its session ends is reported to the next leader at
// once if that leader's Welcome gives no delay (a leader of an earlier
// build), right after Hello, and its Finished is not marked.
func TestAgentSendsHeldStartedToALeaderThatWillNotWait(t *testing.T) {
	f := &fakeLeader{notify: make(chan struct{}, 1)}
	f.welcomeOf = func(stream int) *pb.Welcome {
		w := &pb.Welcome{HeartbeatIntervalMs: 200, SelfKillAfterMs: 25_000, LeaderId: "n1", FinishReady: true}
		if stream == 1 {
			w.StartedDelayMs = 60_000 // held back for the whole of the first session
		}
		return w
	}
	f.onMsg = func(stream int, m *pb.WorkerMessage) []*pb.LeaderMessage {
		switch x := m.Msg.(type) {
		case *pb.WorkerMessage_Ready:
			if stream == 1 {
				return []*pb.LeaderMessage{{Msg: &pb.LeaderMessage_Assign{Assign: &pb.Assign{Job: 7, Attempt: 2, TimeoutMs: 60_000, Size: pb.Size_MD, Credit: x.Ready.Credit}}}}
			}
		case *pb.WorkerMessage_Finished:
			return []*pb.LeaderMessage{{Msg: &pb.LeaderMessage_FinishedAck{FinishedAck: &pb.FinishedAck{Job: x.Finished.Job, Attempt: x.Finished.Attempt}}}}
		}
		return nil
	}
	// The first session ends at the run's first heartbeat.
	f.endAfter = func(stream int, m *pb.WorkerMessage) bool { return stream == 1 && m.GetHeartbeat().GetJob() == 7 }
	runAgent(t, serve(t, f), FakeRunner{Plan: func(*pb.Assign) FakeSpec { return FakeSpec{Duration: time.Second} }})
	got := f.waitFor(t, "the report of job 7", func(m []string) bool { return strings.Contains(strings.Join(m, "\n"), "finished 7/2") })
	want := strings.Join([]string{"1 hello w1 MD running=[]", "1 ready",
		"2 hello w1 MD running=[7/2]", "2 started 7/2", `2 finished 7/2 OK exit=0 stderr="" +ready`}, "\n")
	if seq := withoutHeartbeats(got); seq != want {
		t.Fatalf("messages:\n%s\nwant:\n%s", seq, want)
	}
}

// sequence runs jobs one after another: each Start takes the next result.
type sequence struct {
	mu   sync.Mutex
	runs []Result
}

func (r *sequence) Start(*pb.Assign) (Run, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := r.runs[0]
	if len(r.runs) > 1 {
		r.runs = r.runs[1:]
	}
	return instant{res}.Start(nil)
}

// TestAgentReportsOOMKill: a run the kernel killed for its memory limit is
// reported failed with the failure oom_killed and its CPU source, and the
// agent goes on to its next job; a run that ends well says its source
// and no failure.
func TestAgentReportsOOMKill(t *testing.T) {
	f := &fakeLeader{notify: make(chan struct{}, 1), welcome: &pb.Welcome{HeartbeatIntervalMs: 1000, SelfKillAfterMs: 25_000, LeaderId: "n1"}}
	next := uint64(7)
	f.onMsg = func(_ int, m *pb.WorkerMessage) []*pb.LeaderMessage {
		switch x := m.Msg.(type) {
		case *pb.WorkerMessage_Ready:
			if next < 9 {
				next++
				return []*pb.LeaderMessage{{Msg: &pb.LeaderMessage_Assign{Assign: &pb.Assign{Job: next - 1, Attempt: 1, Size: pb.Size_MD, Credit: x.Ready.Credit}}}}
			}
		case *pb.WorkerMessage_Finished:
			return []*pb.LeaderMessage{{Msg: &pb.LeaderMessage_FinishedAck{FinishedAck: &pb.FinishedAck{Job: x.Finished.Job, Attempt: x.Finished.Attempt}}}}
		}
		return nil
	}
	runAgent(t, serve(t, f), &sequence{runs: []Result{
		{ExitCode: -1, Signaled: true, CPU: 900 * time.Millisecond, CPUSource: pb.CpuSource_CPU_SOURCE_CGROUP, OOMKilled: true},
		{ExitCode: 0, CPU: 10 * time.Millisecond, CPUSource: pb.CpuSource_CPU_SOURCE_CGROUP},
	}})
	got := f.waitFor(t, "three Readies", func(m []string) bool { return strings.Count(strings.Join(m, "\n"), "ready") == 3 })
	want := []string{"1 hello w1 MD running=[]", "1 ready", "1 started 7/1",
		`1 finished 7/1 FAILED exit=-1 stderr="" cpu_source=cgroup failure=OOM_KILLED`, "1 ready", "1 started 8/1",
		`1 finished 8/1 OK exit=0 stderr="" cpu_source=cgroup`, "1 ready"}
	if seq := withoutHeartbeats(got); seq != strings.Join(want, "\n") {
		t.Fatalf("messages:\n%s\nwant:\n%s", seq, strings.Join(want, "\n"))
	}
}

// welcomeRunner records its FirstWelcome and Start calls in order.
type welcomeRunner struct {
	mu    sync.Mutex
	calls []string
}

func (r *welcomeRunner) FirstWelcome() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "first-welcome")
	return nil
}

func (r *welcomeRunner) Start(a *pb.Assign) (Run, error) {
	r.mu.Lock()
	r.calls = append(r.calls, fmt.Sprintf("start %d", a.Job))
	r.mu.Unlock()
	return instant{}.Start(a)
}

// TestAgentFirstWelcome: a runner that clears what an earlier agent of
// its ID left hears of the agent's first Welcome once, before its first
// run, and not again on a new session.
func TestAgentFirstWelcome(t *testing.T) {
	f := &fakeLeader{notify: make(chan struct{}, 1), welcome: &pb.Welcome{HeartbeatIntervalMs: 1000, SelfKillAfterMs: 25_000, LeaderId: "n1"}}
	// One job a stream: the second stream's next Ready gets nothing, so
	// that no third start races the check below.
	var mu sync.Mutex
	assigned := map[int]bool{}
	f.onMsg = func(stream int, m *pb.WorkerMessage) []*pb.LeaderMessage {
		switch x := m.Msg.(type) {
		case *pb.WorkerMessage_Ready:
			mu.Lock()
			first := !assigned[stream]
			assigned[stream] = true
			mu.Unlock()
			if stream <= 2 && first {
				return []*pb.LeaderMessage{{Msg: &pb.LeaderMessage_Assign{Assign: &pb.Assign{Job: uint64(stream), Attempt: 1, Size: pb.Size_MD, Credit: x.Ready.Credit}}}}
			}
		case *pb.WorkerMessage_Finished:
			return []*pb.LeaderMessage{{Msg: &pb.LeaderMessage_FinishedAck{FinishedAck: &pb.FinishedAck{Job: x.Finished.Job, Attempt: x.Finished.Attempt}}}}
		}
		return nil
	}
	// The first stream ends after its run's result: the agent opens a
	// second one.
	f.endAfter = func(stream int, m *pb.WorkerMessage) bool { return stream == 1 && m.GetFinished() != nil }
	r := &welcomeRunner{}
	runAgent(t, serve(t, f), r)
	f.waitFor(t, "the second stream's run", func(m []string) bool { return strings.Contains(strings.Join(m, "\n"), "2 finished 2/1") })
	r.mu.Lock()
	defer r.mu.Unlock()
	if got := strings.Join(r.calls, ", "); got != "first-welcome, start 1, start 2" {
		t.Errorf("calls: %s, want first-welcome, start 1, start 2", got)
	}
}
