package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	pb "github.com/baristahq/barista/proto"
)

type addArgs struct{ A, B int }

func (addArgs) Kind() string { return "add" }

type echoArgs struct {
	Text string `json:"text"`
}

func (echoArgs) Kind() string { return "echo" }

type napArgs struct{ Ms int }

func (napArgs) Kind() string { return "nap" }

type refuseArgs struct{}

func (refuseArgs) Kind() string { return "refuse" }

type dropArgs struct{}

func (dropArgs) Kind() string { return "drop" }

// testKinds routes add, echo, nap (snoozes Ms), refuse (Discard) and
// drop (Cancel).
func testKinds() *Kinds {
	k := NewKinds()
	Register(k, func(_ context.Context, j *Job[addArgs]) error {
		j.Output(fmt.Sprint(j.Args.A + j.Args.B))
		j.ReportCPU(7 * time.Millisecond)
		return nil
	})
	Register(k, func(_ context.Context, j *Job[echoArgs]) error {
		j.Output(fmt.Sprintf("%s %s/%s attempt %d %s", j.Args.Text, j.Tenant, j.Pool, j.Attempt, j.Size))
		return nil
	})
	Register(k, func(_ context.Context, j *Job[napArgs]) error {
		return Snooze(time.Duration(j.Args.Ms) * time.Millisecond)
	})
	Register(k, func(_ context.Context, j *Job[refuseArgs]) error {
		return Discard(errors.New("the invoice was deleted"))
	})
	Register(k, func(_ context.Context, j *Job[dropArgs]) error {
		return Cancel(errors.New("no longer wanted"))
	})
	return k
}

func assign(job uint64, kind, payload string) *pb.Assign {
	return &pb.Assign{Job: job, Attempt: 1, Tenant: "acme", Size: pb.Size_MD, JobType: kind, Payload: []byte(payload)}
}

func describeFinished(f *pb.JobFinished) string {
	d := fmt.Sprintf("%d %s exit=%d", f.Job, f.Outcome, f.ExitCode)
	if f.StdoutTail != "" {
		d += fmt.Sprintf(" out=%q", f.StdoutTail)
	}
	if f.Permanent {
		d += " permanent"
	}
	if f.SnoozeMs != 0 {
		d += fmt.Sprintf(" snooze=%dms", f.SnoozeMs)
	}
	return d
}

// TestKindsRouteByKind: each job runs the function of its kind with its
// payload decoded; its output and reported CPU are the run's; a job of a
// kind no function is registered for, or whose payload does not decode,
// fails for good saying why; Snooze ends the run snoozed (held to 1 s ..
// 24 h); Discard fails the job for good, and so does Cancel on a registry
// without a client to cancel the job with (CancelWith), saying so.
func TestKindsRouteByKind(t *testing.T) {
	welcome := &pb.Welcome{HeartbeatIntervalMs: 1000, SelfKillAfterMs: 25_000, LeaderId: "n1", JobTypes: true, Snooze: true}
	fins := reportsWith(t, welcome, testKinds(), []*pb.Assign{
		assign(1, "add", `{"A": 2, "B": 3}`),
		assign(2, "echo", `{"text": "hi"}`),
		assign(3, "resize", `{}`),
		assign(4, "add", `{"A": "two"}`),
		assign(5, "nap", `{"Ms": 1500}`),
		assign(6, "nap", `{"Ms": 20}`),
		assign(7, "nap", `{"Ms": 172800000}`),
		assign(8, "refuse", `{}`),
		assign(9, "drop", `{}`),
	}, nil)
	var got []string
	for _, f := range fins {
		got = append(got, describeFinished(f))
	}
	want := []string{
		`1 OK exit=0 out="5"`,
		`2 OK exit=0 out="hi acme/default attempt 1 md"`,
		`3 FAILED exit=127 permanent`,
		`4 FAILED exit=1 permanent`,
		`5 SNOOZED exit=0 snooze=1500ms`,
		`6 SNOOZED exit=0 snooze=1000ms`,
		`7 SNOOZED exit=0 snooze=86400000ms`,
		`8 FAILED exit=1 permanent`,
		`9 FAILED exit=1 permanent`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("reports:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if fins[0].CpuMs != 7 {
		t.Errorf("add's CPU %d ms, want the 7 ms it reported", fins[0].CpuMs)
	}
	for i, want := range map[int]string{
		2: `job 3 is of kind "resize", which this worker has no function for (it runs add, drop, echo, nap, refuse)`,
		3: `job 4: its payload is not the arguments of kind "add" (worker.addArgs)`,
		7: "the invoice was deleted",
		8: "no longer wanted (the worker has no client to cancel the job with, Kinds.CancelWith: it ends failed, with no retry)",
	} {
		if !strings.Contains(fins[i].StderrTail, want) {
			t.Errorf("job %d's stderr %q, want it to say %q", fins[i].Job, fins[i].StderrTail, want)
		}
	}
}

// TestSnoozeToAnEarlierLeader: a leader whose Welcome does not say it
// takes a snooze (an earlier build) gets the snoozed run as failed,
// saying so, not an outcome it would reject.
func TestSnoozeToAnEarlierLeader(t *testing.T) {
	welcome := &pb.Welcome{HeartbeatIntervalMs: 1000, SelfKillAfterMs: 25_000, LeaderId: "n1", JobTypes: true}
	fins := reportsWith(t, welcome, testKinds(), []*pb.Assign{assign(1, "nap", `{"Ms": 5000}`)}, nil)
	if got := describeFinished(fins[0]); got != "1 FAILED exit=1" || !strings.Contains(fins[0].StderrTail, "cannot snooze a job") {
		t.Errorf("report %s, stderr %q; want a failed run saying the leader cannot snooze", got, fins[0].StderrTail)
	}
}

// TestKindsWaitForALeaderThatNamesKinds: a worker that routes by kind
// offers no slot to a leader whose Assigns do not name the kind (an
// earlier build): it ends the session and tries again later.
func TestKindsWaitForALeaderThatNamesKinds(t *testing.T) {
	f := &fakeLeader{notify: make(chan struct{}, 1), welcome: &pb.Welcome{HeartbeatIntervalMs: 1000, SelfKillAfterMs: 25_000, LeaderId: "n1"}}
	runAgent(t, serve(t, f), testKinds())
	f.waitFor(t, "a second hello", func(m []string) bool { return strings.Contains(strings.Join(m, "\n"), "2 hello") })
	for _, m := range f.messages() {
		if strings.HasSuffix(m, " ready") {
			t.Fatalf("the worker offered its slot to a leader that does not name kinds: %s", strings.Join(f.messages(), "\n"))
		}
	}
}

// TestRegisterRefusesMistakes: an empty kind and a kind registered twice
// are the program's mistakes, found when it starts.
func TestRegisterRefusesMistakes(t *testing.T) {
	k := testKinds()
	for name, f := range map[string]func(){
		"twice": func() { Register(k, func(context.Context, *Job[addArgs]) error { return nil }) },
		"empty": func() { Register(k, func(context.Context, *Job[emptyKind]) error { return nil }) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Register did not panic", name)
				}
			}()
			f()
		}()
	}
}

type emptyKind struct{}

func (emptyKind) Kind() string { return "" }
