package rpc

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/internal/explain"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
)

// ExplainJob says why a job of the caller's tenant is where it is (SPEC §3
// "Why a job waits"). The leader serves it after confirming its leadership
// (a follower forwards the call): the reason is computed from the state,
// and the leader, which holds the worker sessions, turns waiting into
// no_worker when no connected, undrained worker fits the job.
func (s *ClientService) ExplainJob(ctx context.Context, req *pb.ExplainJobRequest) (*pb.ExplainJobResponse, error) {
	tenant, err := scopeTenant(ctx, req.Tenant, false)
	if err != nil {
		return nil, err
	}
	fwd := &pb.ExplainJobRequest{Tenant: tenant, JobId: req.JobId}
	return read(ctx, &s.base, nil, remote(pb.ClientClient.ExplainJob, fwd), func() (*pb.ExplainJobResponse, error) {
		var r sfq.Reason
		var j sfq.Job
		var t sfq.Tenant
		var pool string // the job's pool, "" for the pool default
		err := JobNotFound(req.JobId)
		s.node.FSM.Read(func(sc *sfq.Scheduler) {
			var ok bool
			// Scoped like GetJob: another tenant's job (or one of a
			// deleted tenant of the same name) is not found.
			if j, ok = sc.TenantJob(tenant, sfq.JobID(req.JobId)); ok {
				t, _ = sc.TenantAt(j.Tenant)
				r, err = sc.Explain(j.ID)
				if id := sc.LanePool(j.Tenant); id != sfq.DefaultPool {
					pool = sc.PoolName(id)
				}
			}
		})
		if err != nil {
			if _, ok := status.FromError(err); ok {
				return nil, err
			}
			return nil, status.Error(codes.Internal, err.Error())
		}
		var fit, idle, larger, sized int
		known := false
		if r.Kind == sfq.ReasonWaiting {
			// The workers that fit it and run its kind (SPEC §3 "Kinds").
			if fit, idle, larger, sized, known = s.workers.fitting(ctx, pool, &j); known && fit == 0 {
				r = sfq.Reason{Kind: sfq.ReasonNoWorker}
				if sized > 0 {
					r.NoWorkerKind = j.KindName()
				}
			}
			if larger == 0 {
				// No larger worker fits it: the larger jobs that wait
				// take none of its workers.
				r.Larger = 0
			}
		}
		out := explain.ToPB(&j, &t, r, s.clockNow())
		if j.State == sfq.Queued {
			out.Place = placeToPB(s.node.FSM, j.ID)
		}
		if r.Kind == sfq.ReasonWaiting && known {
			out.FittingWorkers, out.WorkersBusy = uint32(fit), idle == 0
		}
		if pool != "" || (r.Kind == sfq.ReasonWaiting && known) {
			out.Text = explain.TextIn(&j, &t, pool, r, out.Now, explain.BusyWorkers(fit, idle))
		}
		if out.Place != nil {
			out.Text += " " + PlaceText(out.Place, j.Size.String(), out.Now)
		}
		return out, nil
	})
}

// fitting counts the connected, undrained workers of pool ("": the pool
// default) of job j's size or larger that run its kind and, of them,
// those ready for a job (idle) and those larger than its size; sized
// counts those of its size or larger whatever they run. Off the leader
// (or before its hub is up, when the leader has just gained leadership
// and the sessions are not known yet) known is false: a reason is never
// no_worker for want of knowing.
func (s *WorkerService) fitting(ctx context.Context, pool string, j *sfq.Job) (fit, idle, larger, sized int, known bool) {
	sz := j.Size
	h := s.currentHub(ctx)
	if h == nil {
		return 0, 0, 0, 0, false
	}
	h.mu.Lock()
	type cand struct {
		id            string
		ready, bigger bool
	}
	var cands []cand
	for id, sess := range h.sessions {
		if sess.pool == pool && sess.size >= sz {
			cands = append(cands, cand{id, sess.ready && sess.job == 0, sess.size > sz})
		}
	}
	h.mu.Unlock()
	for _, c := range cands {
		w, ok := s.node.FSM.Worker(c.id)
		if ok && w.Drained {
			continue
		}
		sized++
		if ok && !w.Runs.RunsForm(j.Form(), j.Type()) {
			continue
		}
		fit++
		if c.ready {
			idle++
		}
		if c.bigger {
			larger++
		}
	}
	return fit, idle, larger, sized, true
}
