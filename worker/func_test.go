package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/baristahq/barista/proto"
)

// reports runs an agent with runner against a leader that assigns the
// jobs of assigns in turn, one per Ready (cancelling a job whose Cancel
// is set once it starts), and returns the Finished of each, in order.
func reports(t *testing.T, runner Runner, assigns []*pb.Assign, cancel map[uint64]bool) []*pb.JobFinished {
	t.Helper()
	return reportsWith(t, &pb.Welcome{HeartbeatIntervalMs: 1000, SelfKillAfterMs: 25_000, LeaderId: "n1"}, runner, assigns, cancel)
}

// reportsWith is reports from a leader that sends welcome.
func reportsWith(t *testing.T, welcome *pb.Welcome, runner Runner, assigns []*pb.Assign, cancel map[uint64]bool) []*pb.JobFinished {
	t.Helper()
	f := &fakeLeader{notify: make(chan struct{}, 1), welcome: welcome}
	var mu sync.Mutex
	var fins []*pb.JobFinished
	next := 0
	f.onMsg = func(_ int, m *pb.WorkerMessage) []*pb.LeaderMessage {
		switch x := m.Msg.(type) {
		case *pb.WorkerMessage_Ready:
			if next < len(assigns) {
				a := proto.CloneOf(assigns[next])
				a.Credit = x.Ready.Credit
				next++
				return []*pb.LeaderMessage{{Msg: &pb.LeaderMessage_Assign{Assign: a}}}
			}
		case *pb.WorkerMessage_Started:
			if cancel[x.Started.Job] {
				return []*pb.LeaderMessage{{Msg: &pb.LeaderMessage_Cancel{Cancel: &pb.CancelOrder{Job: x.Started.Job, Attempt: x.Started.Attempt, Reason: "requested", GraceMs: 60_000}}}}
			}
		case *pb.WorkerMessage_Finished:
			mu.Lock()
			fins = append(fins, x.Finished)
			mu.Unlock()
			return []*pb.LeaderMessage{{Msg: &pb.LeaderMessage_FinishedAck{FinishedAck: &pb.FinishedAck{Job: x.Finished.Job, Attempt: x.Finished.Attempt}}}}
		}
		return nil
	}
	runAgent(t, serve(t, f), runner)
	f.waitFor(t, fmt.Sprintf("%d reports", len(assigns)), func(m []string) bool {
		return strings.Count(strings.Join(m, "\n"), " finished ") == len(assigns)
	})
	mu.Lock()
	defer mu.Unlock()
	return fins
}

// TestFuncReportsItsEnds: a Func's answer is the job's stdout tail and
// its CPU the job's; an error fails the run (exit code 1, its text the
// stderr tail), for good when it wraps ErrUnrunnable; a cancelled run
// ends cancelled; a panic fails the run and leaves the worker standing.
func TestFuncReportsItsEnds(t *testing.T) {
	fn := Func(func(ctx context.Context, job *pb.Assign) (FuncResult, error) {
		switch string(job.Payload) {
		case "answer":
			return FuncResult{Output: "42 for " + job.Tenant, CPU: 1500 * time.Millisecond}, nil
		case "fail":
			return FuncResult{Output: "half done"}, errors.New("the printer is on fire")
		case "garbage":
			return FuncResult{}, fmt.Errorf("payload %q: %w", job.Payload, ErrUnrunnable)
		case "wait":
			<-ctx.Done()
			return FuncResult{}, ctx.Err()
		case "panic":
			panic("boom")
		}
		return FuncResult{}, nil
	})
	var assigns []*pb.Assign
	for i, p := range []string{"answer", "fail", "garbage", "wait", "panic", ""} {
		assigns = append(assigns, &pb.Assign{Job: uint64(i + 1), Attempt: 1, Tenant: "acme", Size: pb.Size_SM, TimeoutMs: 60_000, Payload: []byte(p)})
	}
	fins := reports(t, fn, assigns, map[uint64]bool{4: true})
	got := make([]string, len(fins))
	for i, f := range fins {
		stderr := f.StderrTail
		if strings.HasPrefix(string(assigns[i].Payload), "panic") {
			// The stack, then the panic: only its last line is exact.
			stderr = stderr[strings.LastIndex(stderr, "\n")+1:]
		}
		got[i] = fmt.Sprintf("%d %s exit=%d stdout=%q stderr=%q permanent=%t", f.Job, f.Outcome, f.ExitCode, f.StdoutTail, stderr, f.Permanent)
	}
	want := []string{
		`1 OK exit=0 stdout="42 for acme" stderr="" permanent=false`,
		`2 FAILED exit=1 stdout="half done" stderr="the printer is on fire" permanent=false`,
		`3 FAILED exit=1 stdout="" stderr="payload \"garbage\": the job can never run" permanent=true`,
		`4 CANCELLED exit=1 stdout="" stderr="context canceled" permanent=false`,
		`5 FAILED exit=1 stdout="" stderr="panic: boom" permanent=false`,
		`6 OK exit=0 stdout="" stderr="" permanent=false`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("reports:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if fins[0].CpuMs != 1500 {
		t.Errorf("job 1 reported %d ms of CPU, want the 1500 its function said", fins[0].CpuMs)
	}
}

// TestFuncCPUIsWallTimeWhenUnreported: a Func that reports no CPU is
// billed the wall time of its call: no less than the test saw it run, no
// more than from before Start to after its end.
func TestFuncCPUIsWallTimeWhenUnreported(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	fn := Func(func(context.Context, *pb.Assign) (FuncResult, error) {
		close(entered)
		<-release
		return FuncResult{Output: "done"}, nil
	})
	before := time.Now()
	run, err := fn.Start(&pb.Assign{Job: 1, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	<-entered
	held := time.Now()
	if so := run.CPU(); so < 0 || so > time.Since(before) {
		t.Fatalf("CPU so far %s, want the wall time since Start", so)
	}
	seen := time.Since(held)
	close(release)
	<-run.Done()
	bound := time.Since(before)
	res := run.Result()
	if res.CPU < seen || res.CPU > bound {
		t.Fatalf("CPU %s, want between %s (seen running) and %s (Start to end)", res.CPU, seen, bound)
	}
	if res.ExitCode != 0 || res.StdoutTail != "done" || run.CPU() != res.CPU {
		t.Fatalf("result %+v, CPU() after the end %s", res, run.CPU())
	}
}

// TestFuncKillWaitsForTheFunction: Kill cancels the call's context, and
// the run is done only once the function has returned (a goroutine
// cannot be stopped: the worker holds the job until then).
func TestFuncKillWaitsForTheFunction(t *testing.T) {
	stopped, release := make(chan struct{}), make(chan struct{})
	fn := Func(func(ctx context.Context, _ *pb.Assign) (FuncResult, error) {
		<-ctx.Done()
		close(stopped)
		<-release
		return FuncResult{}, ctx.Err()
	})
	run, err := fn.Start(&pb.Assign{Job: 1, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	run.Kill()
	<-stopped
	select {
	case <-run.Done():
		t.Fatal("the run was done while its function had not returned")
	default:
	}
	close(release)
	<-run.Done()
	if res := run.Result(); res.ExitCode != 1 || res.StderrTail != "context canceled" {
		t.Fatalf("result %+v", res)
	}
}
