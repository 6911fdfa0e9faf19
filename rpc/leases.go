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

// heartbeats replicates the pending lease renewals as one batch per
// heartbeat interval (flushHeartbeats).
func (h *hub) heartbeats() {
	for {
		interval := time.Duration(h.node.State().Config().HeartbeatIntervalMs) * time.Millisecond
		select {
		case <-h.ctx.Done():
			return
		case <-time.After(max(interval, 20*time.Millisecond)):
		}
		h.flushHeartbeats()
	}
}

// flushHeartbeats replicates the pending lease renewals, in worker ID
// order, as one command, then acknowledges them (and re-sends pending
// cancels); a fenced heartbeat is answered with Reject.
func (h *hub) flushHeartbeats() {
	h.mu.Lock()
	batch := make([]*pendingHB, 0, len(h.pending))
	for _, p := range h.pending {
		batch = append(batch, p)
	}
	h.pending = map[string]*pendingHB{}
	h.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	sort.Slice(batch, func(i, j int) bool { return batch[i].sess.id < batch[j].sess.id })
	hbs := make([]*clusterpb.Heartbeat, len(batch))
	for i, p := range batch {
		hbs[i] = &clusterpb.Heartbeat{Job: p.hb.Job, Attempt: p.hb.Attempt, WorkerId: p.sess.id, CpuMs: p.hb.CpuMs}
	}
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	res, err := h.propose(ctx, &clusterpb.Command{Cmd: &clusterpb.Command_Heartbeats{Heartbeats: &clusterpb.HeartbeatBatch{Heartbeats: hbs}}})
	cancel()
	if err != nil {
		h.log.Warn("heartbeat batch failed", "heartbeats", len(hbs), "error", err)
		return
	}
	f := h.node.State()
	cfg := f.Config()
	for i, out := range res[0].HeartbeatOutcomes {
		p := batch[i]
		job, attempt := sfq.JobID(p.hb.Job), p.hb.Attempt
		switch out {
		case sfq.Changed, sfq.Duplicate:
			p.sess.send(&pb.LeaderMessage{Msg: &pb.LeaderMessage_HeartbeatAck{HeartbeatAck: &pb.HeartbeatAck{Seq: p.hb.Seq}}})
			if j, _, ok := f.Job(job); ok && j.State.Live() && j.Cancel != sfq.CancelNone {
				p.sess.send(cancelOrder(&j, cfg))
			}
		default:
			h.mu.Lock()
			current := p.sess.job == job && p.sess.attempt == attempt
			if current {
				p.sess.job, p.sess.attempt = 0, 0
			}
			h.mu.Unlock()
			if current {
				h.metrics.fenced.WithLabelValues("heartbeat").Inc()
				h.refuse(p.sess, p.hb.Job, attempt, "lease no longer held: "+out.String(), true) // ends the session if over the limit
			}
		}
	}
}

// cancels sends a CancelOrder to the worker of every job whose cancel
// was just committed.
func (h *hub) cancels() {
	f := h.node.State()
	_, cursor := f.Events(^uint64(0), func(*fsm.Event) bool { return false })
	for {
		changed := f.Changed()
		var jobs []sfq.JobID
		first, next := f.Events(cursor, func(ev *fsm.Event) bool {
			if ev.Kind == fsm.EvCancelRequested {
				jobs = append(jobs, ev.Job)
			}
			return true
		})
		cursor = max(next, first)
		if len(jobs) > 0 {
			cfg := f.Config()
			for _, id := range jobs {
				j, _, ok := f.Job(id)
				if !ok || !j.State.Live() {
					continue
				}
				h.mu.Lock()
				s := h.sessions[j.Worker]
				h.mu.Unlock()
				if s != nil {
					s.send(cancelOrder(&j, cfg))
				}
			}
		}
		select {
		case <-h.ctx.Done():
			return
		case <-changed:
		}
	}
}
