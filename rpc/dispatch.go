package rpc

import (
	"context"
	"sort"
	"time"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// maxDispatchBatch bounds the Dispatch commands of one round (one entry).
const maxDispatchBatch = 512

// dispatcher gives ready workers jobs whenever the state machine shows
// eligible work, one log entry per round. It also wakes when a rate limit
// that holds a head stops holding it (rateWake), so that an idle worker
// gets a rate-limited tenant's next job on time, not at the next tick.
func (h *hub) dispatcher() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	rate := time.NewTimer(time.Hour)
	defer rate.Stop()
	for {
		changed := h.node.State().Changed()
		for h.dispatchRound() {
		}
		rate.Stop()
		select {
		case <-rate.C:
		default:
		}
		if d, ok := h.rateWake(); ok {
			rate.Reset(d)
		}
		select {
		case <-h.ctx.Done():
			return
		case <-h.wake:
		case <-changed:
		case <-tick.C:
		case <-rate.C:
		}
	}
}

// rateWake returns how long until the earliest rate-limited head becomes
// eligible, if that is in the future. One already due is left to the
// next change or poke (a worker becoming ready), so the loop never spins.
func (h *hub) rateWake() (time.Duration, bool) {
	at, ok := h.node.State().NextRateEligible()
	if !ok {
		return 0, false
	}
	now, leading := h.node.ClusterNow()
	if !leading || at <= now {
		return 0, false
	}
	return time.Duration(at-now) * time.Millisecond, true
}

// dispatchRound proposes one Dispatch per ready worker that can take a job
// now, smallest workers first (so small jobs go to small containers when
// both are free), within the state machine's dispatch budget (a worker
// that runs some kinds only, when a job it runs is queued). A worker is
// asked for only when its own pool has a job it fits (a pause of one pool
// holds that pool's workers alone), and its Dispatch names its pool, the
// only one it is given a job of. A worker whose pool was deleted under it
// loses its session. It reports whether any job was assigned.
func (h *hub) dispatchRound() bool {
	f := h.node.State()
	h.mu.Lock()
	var ready []*session
	for _, s := range h.sessions {
		if s.ready {
			ready = append(ready, s)
		}
	}
	h.mu.Unlock()
	if len(ready) == 0 {
		return false
	}
	sort.Slice(ready, func(i, j int) bool {
		if ready[i].size != ready[j].size {
			return ready[i].size < ready[j].size
		}
		return ready[i].id < ready[j].id
	})
	var cmds []*clusterpb.Command
	var who []*session
	used := 0
	now, _ := h.node.ClusterNow()
	// The budgets of the (pool, size) pairs met so far, each read once a
	// round (past budgetSlots pairs, once per worker).
	var budgets [budgetSlots]poolBudget
	nb := 0
	hasJob := map[string]bool{} // by what a worker of some kinds runs (RunsSome)
	for _, s := range ready {
		if len(cmds) == maxDispatchBatch {
			break
		}
		i := 0
		for i < nb && (budgets[i].pool != s.pool || budgets[i].size != s.size) {
			i++
		}
		if i == nb {
			b := poolBudget{pool: s.pool, size: s.size}
			b.budget, b.known = f.DispatchBudgetIn(s.pool, s.size, now)
			if nb < budgetSlots {
				nb++
			} else {
				i = budgetSlots - 1
			}
			budgets[i] = b
		}
		budget, known := budgets[i].budget, budgets[i].known
		if !known {
			h.poolGone(s)
			continue
		}
		if f.CheckDispatch(s.id).Refused() {
			continue
		}
		// A worker that runs only some kinds is asked for only when a job
		// it runs is there (SPEC §3 "Kinds"): the budget counts jobs of
		// every kind.
		restricted, runs := f.RunsSome(s.id)
		if restricted {
			// Workers that run the same kinds get the same answer: asked
			// once a round.
			has, asked := hasJob[runs]
			if !asked {
				has = f.HasJobFor(s.id, s.pool, s.size)
				hasJob[runs] = has
			}
			if !has {
				continue
			}
		} else if used >= budget {
			continue
		}
		h.mu.Lock()
		credit := s.credit
		h.mu.Unlock()
		cmds = append(cmds, dispatchCommand(s, credit))
		who = append(who, s)
		if !restricted {
			used++
		}
	}
	if len(cmds) == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	times := dispatchTimes{path: pathRound, proposed: time.Now()}
	res, err := h.propose(ctx, cmds...)
	if err != nil {
		h.log.Warn("dispatch round failed", "workers", len(cmds), "error", err)
		return false
	}
	times.applied = time.Now()
	progress := false
	for i, r := range res {
		if h.assign(who[i], r, cmds[i].GetDispatch().Credit, nil, &times) {
			progress = true
		}
	}
	return progress
}

// budgetSlots bounds the (pool, size) pairs whose dispatch budget a round
// keeps: a pair beyond them takes the last slot in turn.
const budgetSlots = 16

// poolBudget is the dispatch budget of workers of one pool and size.
type poolBudget struct {
	pool   string
	size   sfq.Size
	budget int
	known  bool
}

// dispatchCommand asks for a job for s's worker, spending credit.
func dispatchCommand(s *session, credit uint64) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: s.id, Size: fsm.SizeToPB(s.size), Credit: credit, Pool: s.pool}}}
}

// dispatchPath is where a Dispatch was proposed: by the dispatcher's
// round, or with the Finished that carried the worker's Ready.
type dispatchPath int

const (
	pathRound dispatchPath = iota
	pathFinished
	numDispatchPaths
)

// dispatchPathNames are the path label's values.
var dispatchPathNames = [numDispatchPaths]string{"round", "finished"}

// dispatchTimes is when a Dispatch was proposed and its result applied,
// and on which path: the stages of a dispatch's latency
// (barista_dispatch_stage_seconds).
type dispatchTimes struct {
	path              dispatchPath
	proposed, applied time.Time
}

// observe records the stages of a dispatch for a worker ready since
// readyAt whose Assign was handed to its stream at sent.
func (t *dispatchTimes) observe(m *metrics, readyAt, sent time.Time) {
	o := &m.stages[t.path]
	o[0].Observe(max(0, t.proposed.Sub(readyAt).Seconds()))
	o[1].Observe(t.applied.Sub(t.proposed).Seconds())
	o[2].Observe(sent.Sub(t.applied).Seconds())
}

// assign sends s the job a Dispatch's result r gave it (with the
// acknowledgement of its previous run, acked, when the Dispatch came with
// its Finished), and reports whether there was one. times, when known,
// says when the Dispatch was proposed and applied.
func (h *hub) assign(s *session, r fsm.Result, credit uint64, acked *pb.FinishedAck, times *dispatchTimes) bool {
	if !r.Assigned {
		return false
	}
	a := r.Assign
	h.mu.Lock()
	s.ready, s.job, s.attempt = false, r.Job, r.Attempt
	readyAt := s.readyAt
	h.mu.Unlock()
	s.send(&pb.LeaderMessage{Msg: &pb.LeaderMessage_Assign{Assign: &pb.Assign{
		Job: uint64(r.Job), Attempt: r.Attempt, TimeoutMs: a.TimeoutMs, Payload: []byte(a.Payload), Tenant: r.Tenant,
		Size: fsm.SizeToPB(r.Size), Credit: credit, EstCostMs: a.EstCostMs, Finished: acked, JobType: a.Type, Pool: s.pool,
		Form: fsm.JobFormToPB(a.Form)}}})
	sent := time.Now()
	h.metrics.dispatchLatency.Observe(sent.Sub(readyAt).Seconds())
	if times != nil {
		times.observe(h.metrics, readyAt, sent)
	}
	return true
}
