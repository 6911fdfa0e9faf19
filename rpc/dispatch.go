package rpc

import (
	"context"
	"sort"
	"time"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
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
// both are free), within the state machine's dispatch budget. It reports
// whether any job was assigned.
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
	var cmds []*pb.Command
	var who []*session
	used := 0
	now, _ := h.node.ClusterNow()
	for _, s := range ready {
		if len(cmds) == maxDispatchBatch || used >= f.DispatchBudget(s.size, now) {
			continue
		}
		if w, ok := f.Worker(s.id); ok {
			if w.Drained {
				continue
			}
			if w.Job != 0 {
				if j, _, ok := f.Job(w.Job); ok && j.HeldBy(s.id, w.Attempt) {
					continue // still holds a job; its Finished is not in yet
				}
			}
		}
		h.mu.Lock()
		credit := s.credit
		h.mu.Unlock()
		cmds = append(cmds, &pb.Command{Cmd: &pb.Command_Dispatch{Dispatch: &pb.Dispatch{WorkerId: s.id, Size: fsm.SizeToPB(s.size), Credit: credit}}})
		who = append(who, s)
		used++
	}
	if len(cmds) == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	res, err := h.propose(ctx, cmds...)
	if err != nil {
		h.log.Warn("dispatch round failed", "workers", len(cmds), "error", err)
		return false
	}
	progress := false
	for i, r := range res {
		s := who[i]
		if !r.Assigned {
			continue
		}
		j, tenant, ok := f.Job(r.Job)
		if !ok {
			continue
		}
		h.mu.Lock()
		s.ready, s.job, s.attempt = false, r.Job, r.Attempt
		waited := time.Since(s.readyAt)
		h.mu.Unlock()
		h.metrics.dispatchLatency.Observe(waited.Seconds())
		s.send(&pb.LeaderMessage{Msg: &pb.LeaderMessage_Assign{Assign: &pb.Assign{
			Job: uint64(j.ID), Attempt: r.Attempt, TimeoutMs: j.TimeoutMs, Payload: []byte(j.Payload()), Tenant: tenant,
			Size: fsm.SizeToPB(j.Size), Credit: cmds[i].GetDispatch().Credit, EstCostMs: j.EstCostMs}}})
		progress = true
	}
	return progress
}
