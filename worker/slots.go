package worker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/baristahq/barista/internal/wire"
)

// Worker runs up to Config.MaxConcurrent jobs at once in this process:
// one Agent per slot, each a session of its own at the cluster's leader,
// named Config.ID-1 .. Config.ID-N (Config.ID itself when N is 1; a
// worker token's binding must cover every name, e.g. "thumbs-*"). The
// slots share one connection and one stream to the leader (Hello.mux);
// a leader of an earlier build, which does not multiplex, gets a stream
// per slot. Each slot's log lines name it (slot=ID-N).
// The slots share the Runner, which must start runs concurrently (a
// Kinds, a Func and a ProcessRunner do).
type Worker struct {
	agents []*Agent
}

// NewAgent returns an agent: one slot, one session to the cluster, the
// unit a Worker runs cfg.MaxConcurrent of. New is its former name, kept.
func NewAgent(cfg Config) (*Agent, error) { return New(cfg) }

// NewWorker returns a worker of cfg.MaxConcurrent slots (0: 1).
func NewWorker(cfg Config) (*Worker, error) {
	n := max(cfg.MaxConcurrent, 1)
	if n > maxSlots {
		return nil, fmt.Errorf("worker: MaxConcurrent %d (at most %d)", n, maxSlots)
	}
	w := &Worker{}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	var mux *muxDialer
	if n > 1 {
		mux = newMuxDialer(cfg.Dial, logger)
	}
	once := &sync.Once{}
	for i := range n {
		c := cfg
		c.MaxConcurrent = 0
		if n > 1 {
			c.ID = fmt.Sprintf("%s-%d", cfg.ID, i+1)
			if err := wire.ValidateName("worker id", c.ID); err != nil {
				return nil, fmt.Errorf("worker: slot %d: %w", i+1, err)
			}
		}
		// Every line of a slot's log names it: its worker ID.
		c.Logger = logger.With("slot", c.ID)
		a, err := New(c)
		if err != nil {
			return nil, err
		}
		a.mux, a.slot, a.firstWelcome = mux, uint32(i+1), once
		w.agents = append(w.agents, a)
	}
	return w, nil
}

// maxSlots bounds MaxConcurrent: the slots a leader serves on one
// stream. (A leader of an earlier build gets a connection per slot, and
// takes at most limits.connections_per_address, 256 by default, from one
// source network.)
const maxSlots = maxStreamSlots

// IDs returns the worker IDs of the slots, in order.
func (w *Worker) IDs() []string {
	out := make([]string, len(w.agents))
	for i, a := range w.agents {
		out[i] = a.cfg.ID
	}
	return out
}

// Busy returns how many slots run a job.
func (w *Worker) Busy() int {
	n := 0
	for _, a := range w.agents {
		if a.Busy() {
			n++
		}
	}
	return n
}

// Run runs every slot until ctx ends or the worker is stopped, and
// returns once all have returned. If the cluster refuses a slot for good
// (ErrRefused: a bad token, an unknown pool), the others are stopped too
// and Run returns that error.
func (w *Worker) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The slots share their token and pool: one refused, all are.
	return w.each(func(a *Agent) error {
		err := a.Run(ctx)
		if err != nil {
			cancel()
		}
		return err
	})
}

// Drain drains every slot as Agent.Drain does: each finishes its job and
// takes no new one; Run returns once all have.
func (w *Worker) Drain() {
	for _, a := range w.agents {
		a.Drain()
	}
}

// Stop stops every slot as Agent.Stop does: no new job, the running
// ones end and report, until ctx ends (then they are cancelled). It
// returns once Run has returned, with ctx's error if it ended first.
func (w *Worker) Stop(ctx context.Context) error {
	return w.each(func(a *Agent) error { return a.Stop(ctx) })
}

// StopAndCancel stops every slot as Agent.StopAndCancel does: the running
// jobs are cancelled now and reported failed (retried as their
// max_attempts allow).
func (w *Worker) StopAndCancel(ctx context.Context) error {
	return w.each(func(a *Agent) error { return a.StopAndCancel(ctx) })
}

// each runs f on every slot at once and returns the first slot's error.
func (w *Worker) each(f func(a *Agent) error) error {
	errs := make([]error, len(w.agents))
	var wg sync.WaitGroup
	for i, a := range w.agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(a)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
