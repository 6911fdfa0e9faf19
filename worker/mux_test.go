package worker

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/baristahq/barista/proto"
)

// runWorker runs a Worker of n slots named w against addr until the test
// ends.
func runWorker(t *testing.T, addr string, n int, runner Runner) *Worker {
	t.Helper()
	w, err := NewWorker(Config{ID: "w", Size: SizeMD, Servers: []string{addr}, Runner: runner, MaxConcurrent: n,
		Dial: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

// TestWorkerSlotsOnAnEarlierLeader: a leader of an earlier build does not
// say Welcome.mux: it serves the first slot's stream as that slot's
// session, and the other slots open streams of their own, one session
// each, as before.
func TestWorkerSlotsOnAnEarlierLeader(t *testing.T) {
	f := &fakeLeader{notify: make(chan struct{}, 1), welcome: &pb.Welcome{HeartbeatIntervalMs: 1000, SelfKillAfterMs: 25_000, LeaderId: "n1"}}
	var mu sync.Mutex
	mux := map[string]bool{}
	f.onMsg = func(_ int, m *pb.WorkerMessage) []*pb.LeaderMessage {
		if h := m.GetHello(); h != nil {
			mu.Lock()
			mux[h.WorkerId] = h.Mux
			mu.Unlock()
		}
		return nil
	}
	runWorker(t, serve(t, f), 3, instant{})
	got := f.waitFor(t, "three slots ready", func(m []string) bool { return strings.Count(strings.Join(m, "\n"), "ready") == 3 })
	var hellos []string
	for _, m := range got {
		if strings.Contains(m, "hello") {
			hellos = append(hellos, m[strings.Index(m, " ")+1:])
		}
	}
	slices.Sort(hellos)
	if want := "hello w-1 MD running=[],hello w-2 MD running=[],hello w-3 MD running=[]"; strings.Join(hellos, ",") != want {
		t.Fatalf("hellos %v, want %s", hellos, want)
	}
	f.mu.Lock()
	streams := f.streams
	f.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	asked := 0
	for _, m := range mux {
		if m {
			asked++
		}
	}
	// One stream asked for a multiplexed stream (the first), the others
	// knew better.
	if streams != 3 || asked != 1 {
		t.Fatalf("%d streams, %d asked for mux; want 3 streams, 1 asking", streams, asked)
	}
}

// muxLeader is a leader that multiplexes: each slot's Hello gets a
// Welcome with mux, each Ready a job (job 100*stream+slot), each
// Finished its ack; script may answer a message otherwise.
type muxLeader struct {
	pb.UnimplementedWorkerServer
	mu      sync.Mutex
	streams int
	got     []string // "stream slot what"
	script  func(stream int, m *pb.WorkerMessage) []*pb.LeaderMessage
	end     chan struct{} // a receive ends the current stream
	// mute, if set, says which streams answer nothing after their
	// Welcomes (a server gone with its stream looking open).
	mute      func(stream int) bool
	welcomeMs int64 // the Welcomes' heartbeat interval (0: 1,000 ms)
}

func (l *muxLeader) Connect(s grpc.BidiStreamingServer[pb.WorkerMessage, pb.LeaderMessage]) error {
	l.mu.Lock()
	l.streams++
	n := l.streams
	l.mu.Unlock()
	msgs := make(chan *pb.WorkerMessage)
	go func() {
		defer close(msgs)
		for {
			m, err := s.Recv()
			if err != nil {
				return
			}
			select {
			case msgs <- m:
			case <-s.Context().Done():
				return
			}
		}
	}()
	for {
		var m *pb.WorkerMessage
		select {
		case <-l.end:
			return status.Error(codes.Unavailable, "the leader goes away")
		case m = <-msgs:
			if m == nil {
				return nil
			}
		}
		what := describe(m)
		if m.GetEnd() != nil {
			what = "end"
		}
		l.mu.Lock()
		l.got = append(l.got, fmt.Sprintf("%d %d %s", n, m.Slot, what))
		l.mu.Unlock()
		var out []*pb.LeaderMessage
		if l.mute != nil && l.mute(n) && m.GetHello() == nil {
			continue
		}
		if l.script != nil {
			out = l.script(n, m)
		}
		if out == nil {
			switch x := m.Msg.(type) {
			case *pb.WorkerMessage_Hello:
				out = append(out, &pb.LeaderMessage{Msg: &pb.LeaderMessage_Welcome{Welcome: &pb.Welcome{HeartbeatIntervalMs: cmp.Or(l.welcomeMs, 1000), SelfKillAfterMs: 25_000, Mux: true, FinishReady: true}}})
			case *pb.WorkerMessage_Ready:
				out = append(out, &pb.LeaderMessage{Msg: &pb.LeaderMessage_Assign{Assign: &pb.Assign{Job: uint64(100*n) + uint64(m.Slot), Attempt: 1, TimeoutMs: 60_000, Size: pb.Size_MD, Credit: x.Ready.Credit}}})
			case *pb.WorkerMessage_Finished:
				out = append(out, &pb.LeaderMessage{Msg: &pb.LeaderMessage_FinishedAck{FinishedAck: &pb.FinishedAck{Job: x.Finished.Job, Attempt: x.Finished.Attempt}}})
			case *pb.WorkerMessage_End:
				out = append(out, &pb.LeaderMessage{Msg: &pb.LeaderMessage_End{End: &pb.SlotEnd{}}})
			}
		}
		for _, o := range out {
			o.Slot = m.Slot
			if err := s.Send(o); err != nil {
				return nil
			}
		}
	}
}

// waitFor waits until the messages, without heartbeats, satisfy cond.
func (l *muxLeader) waitFor(t *testing.T, what string, cond func([]string) bool) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.mu.Lock()
		var got []string
		for _, m := range l.got {
			if !strings.Contains(m, "heartbeat") {
				got = append(got, m)
			}
		}
		l.mu.Unlock()
		if cond(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s; messages:\n%s", what, strings.Join(got, "\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func count(got []string, what string) int {
	n := 0
	for _, m := range got {
		if strings.HasSuffix(m, what) || strings.Contains(m, what+" ") {
			n++
		}
	}
	return n
}

// TestWorkerSlotsShareAStream: the slots of a Worker say Hello, run
// their jobs and report them on one stream, each message naming its
// slot; a slot the leader ends (ABORTED) says Hello again on the same
// stream, the others going on; when the stream breaks every slot joins
// one new stream.
func TestWorkerSlotsShareAStream(t *testing.T) {
	l := &muxLeader{end: make(chan struct{})}
	var once sync.Once
	l.script = func(n int, m *pb.WorkerMessage) []*pb.LeaderMessage {
		if m.Slot == 2 && m.GetFinished() != nil && n == 1 {
			var ended []*pb.LeaderMessage
			once.Do(func() {
				st, _ := proto.Marshal(status.New(codes.Aborted, "a newer session").Proto())
				ended = []*pb.LeaderMessage{{Msg: &pb.LeaderMessage_End{End: &pb.SlotEnd{Status: st}}}}
			})
			return ended
		}
		return nil
	}
	runWorker(t, serve(t, l), 3, instant{Result{CPU: time.Millisecond}})
	// Each slot runs its job; slot 2's session is ended by the leader
	// and opens again on the same stream, and runs a job there.
	got := l.waitFor(t, "slot 2 says hello again", func(g []string) bool { return count(g, "1 2 hello w-2 MD") == 2 && count(g, "1 2 finished 102/1") >= 2 })
	for _, want := range []string{"1 1 hello w-1 MD running=[]", "1 3 hello w-3 MD running=[]", "1 1 finished 101/1 OK exit=0 stderr=\"\" +ready", "1 3 finished 103/1 OK exit=0 stderr=\"\" +ready"} {
		if !slices.Contains(got, want) {
			t.Fatalf("no %q; messages:\n%s", want, strings.Join(got, "\n"))
		}
	}
	// The stream breaks: the three slots say Hello on one new stream.
	l.end <- struct{}{}
	l.waitFor(t, "three hellos on stream 2", func(g []string) bool {
		return count(g, "2 1 hello w-1") == 1 && count(g, "2 2 hello w-2") == 1 && count(g, "2 3 hello w-3") == 1
	})
	l.mu.Lock()
	streams := l.streams
	l.mu.Unlock()
	if streams != 2 {
		t.Fatalf("%d streams, want 2", streams)
	}
}

// TestWorkerSlotsLeaveASilentStream: a stream whose server stops
// answering (it looks open) is given up: the slots' heartbeats go
// unacknowledged, the slots leave it (a slot that says Hello on it again
// gets no answer within the handshake's time, and closes it), and every
// slot joins one new stream.
func TestWorkerSlotsLeaveASilentStream(t *testing.T) {
	l := &muxLeader{end: make(chan struct{}), welcomeMs: 200}
	var muted atomic.Bool
	l.mute = func(n int) bool { return n == 1 && muted.Load() }
	runWorker(t, serve(t, l), 3, instant{})
	l.waitFor(t, "three hellos on stream 1", func(g []string) bool { return count(g, "1 3 hello w-3") == 1 && count(g, "1 1 hello w-1") == 1 })
	muted.Store(true)
	got := l.waitFor(t, "three hellos on stream 2", func(g []string) bool {
		return count(g, "2 1 hello w-1") == 1 && count(g, "2 2 hello w-2") == 1 && count(g, "2 3 hello w-3") == 1
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.streams != 2 {
		t.Fatalf("%d streams, want 2; messages:\n%s", l.streams, strings.Join(got, "\n"))
	}
}
