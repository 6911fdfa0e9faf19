package worker

import (
	"sync"
	"time"

	pb "github.com/baristahq/barista/proto"
)

// FakeSpec is what a fake run does.
type FakeSpec struct {
	Duration time.Duration // how long it runs
	CPU      time.Duration // the CPU it reports when it ends (spread evenly)
	ExitCode int
	// IgnoreTerm makes Terminate wait for the grace before the kill.
	IgnoreTerm bool
}

// FakeRunner starts no process: each job "runs" as Plan says. With an agent
// it is an in-process worker that speaks the real protocol, for tests and
// benchmarks. A nil Plan runs every job instantly at its estimated cost.
type FakeRunner struct {
	Plan func(a *pb.Assign) FakeSpec
}

// Start implements Runner.
func (r FakeRunner) Start(a *pb.Assign) (Run, error) {
	spec := FakeSpec{CPU: time.Duration(a.EstCostMs) * time.Millisecond}
	if r.Plan != nil {
		spec = r.Plan(a)
	}
	f := &fakeRun{spec: spec, start: time.Now(), done: make(chan struct{})}
	f.mu.Lock() // end waits for the timer to be stored, even at duration 0
	f.timer = time.AfterFunc(spec.Duration, func() { f.end(spec.ExitCode, false) })
	f.mu.Unlock()
	return f, nil
}

type fakeRun struct {
	spec  FakeSpec
	start time.Time
	timer *time.Timer
	once  sync.Once
	done  chan struct{}
	mu    sync.Mutex
	res   Result
}

func (f *fakeRun) CPU() time.Duration {
	if f.spec.Duration <= 0 {
		return f.spec.CPU
	}
	frac := float64(time.Since(f.start)) / float64(f.spec.Duration)
	return time.Duration(min(frac, 1) * float64(f.spec.CPU))
}

func (f *fakeRun) end(code int, signaled bool) {
	f.once.Do(func() {
		f.mu.Lock()
		f.timer.Stop()
		f.res = Result{ExitCode: code, Signaled: signaled, CPU: f.CPU()}
		f.mu.Unlock()
		close(f.done)
	})
}

func (f *fakeRun) Terminate(grace time.Duration) {
	if f.spec.IgnoreTerm {
		time.AfterFunc(grace, func() { f.end(-1, true) })
		return
	}
	f.end(143, false)
}

func (f *fakeRun) Kill() { f.end(-1, true) }

func (f *fakeRun) Done() <-chan struct{} { return f.done }

func (f *fakeRun) Result() Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.res
}
