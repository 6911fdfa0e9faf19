package rpc

import (
	"context"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/internal/apiview"
	"github.com/baristahq/barista/internal/joblist"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
)

// The client service's reads: a job, the pages of a tenant's jobs, a
// tenant's usage.

// JobNotFound is the refusal of a job that does not exist or is another
// tenant's: the same NOT_FOUND either way.
func JobNotFound(id uint64) error { return status.Errorf(codes.NotFound, "job %d not found", id) }

// GetJob returns one job of the caller's tenant.
func (s *ClientService) GetJob(ctx context.Context, req *pb.GetJobRequest) (*pb.Job, error) {
	tenant, err := scopeTenant(ctx, req.Tenant, false)
	if err != nil {
		return nil, err
	}
	fwd := &pb.GetJobRequest{Tenant: tenant, JobId: req.JobId}
	return read(ctx, &s.base, req.Read, remote(pb.ClientClient.GetJob, fwd), func() (out *pb.Job, err error) {
		s.node.FSM.Read(func(sc *sfq.Scheduler) {
			j, ok := sc.TenantJob(tenant, sfq.JobID(req.JobId))
			if !ok {
				err = JobNotFound(req.JobId)
				return
			}
			out = apiview.Job(sc, &j, true)
		})
		if out != nil {
			clock, _ := s.node.FSM.Clock()
			apiview.MarkDeadlineMissed(clock, out)
			if out.State == sfq.Queued.String() {
				out.Place = placeToPB(s.node.FSM, sfq.JobID(out.JobId))
			}
			out.Now = s.clockNow()
		}
		return out, err
	})
}

// ListJobs pages through a tenant's jobs from the newest down (or,
// oldest_first, in ID order), optionally of one state, without their
// payloads unless asked.
func (s *ClientService) ListJobs(ctx context.Context, req *pb.ListJobsRequest) (*pb.ListJobsResponse, error) {
	tenant, err := scopeTenant(ctx, req.Tenant, false)
	if err != nil {
		return nil, err
	}
	var state sfq.State
	if req.State != "" {
		if state, err = sfq.ParseState(strings.ToLower(req.State)); err != nil {
			return nil, fieldErr(codes.InvalidArgument, "state", "%q (want queued, assigned, running, completed, failed, cancelled, timed_out, scheduled or expired)", req.State)
		}
	}
	if err := poolNameErr("pool", req.Pool); err != nil {
		return nil, err
	}
	if req.NewestFirst && req.OldestFirst {
		return nil, fieldErr(codes.InvalidArgument, "oldest_first", "true with newest_first: true; give one of them (newest first is the default)")
	}
	newest := !req.OldestFirst
	from, err := joblist.ParseListToken(req.PageToken, newest)
	if err != nil {
		return nil, refusalErr(sfq.RefusalOf(err))
	}
	size, err := pageSize(req.PageSize)
	if err != nil {
		return nil, err
	}
	fwd := &pb.ListJobsRequest{Tenant: tenant, State: req.State, PageSize: req.PageSize, PageToken: req.PageToken, IncludePayload: req.IncludePayload,
		NewestFirst: newest, OldestFirst: !newest, Pool: req.Pool} // newest_first for a leader of an older build
	return read(ctx, &s.base, req.Read, remote(pb.ClientClient.ListJobs, fwd), func() (out *pb.ListJobsResponse, err error) {
		s.node.FSM.Read(func(sc *sfq.Scheduler) {
			if err = knownPool(sc, "pool", req.Pool); err != nil {
				return
			}
			var ok bool
			if out, ok = joblist.Page(sc, tenant, state, req.Pool, from, newest, size, req.IncludePayload, maxPageBytes); !ok {
				err = tenantNotFound(tenant)
			}
		})
		if err == nil {
			clock, _ := s.node.FSM.Clock()
			apiview.MarkDeadlineMissed(clock, out.Jobs...)
			now := s.clockNow()
			for _, j := range out.Jobs {
				j.Now = now
			}
		}
		return out, err
	})
}

// TenantUsage reports a tenant's counters, weight and tag.
func (s *ClientService) TenantUsage(ctx context.Context, req *pb.TenantUsageRequest) (*pb.TenantUsageResponse, error) {
	tenant, err := scopeTenant(ctx, req.Tenant, true)
	if err != nil {
		return nil, err
	}
	top := int(req.TopGroups)
	switch {
	case top == 0:
		top = defaultTopGroups
	case top > MaxPage:
		return nil, fieldErr(codes.InvalidArgument, "top_groups", "%d, at most %d", top, MaxPage)
	}
	fwd := &pb.TenantUsageRequest{Tenant: tenant, TopGroups: req.TopGroups}
	return read(ctx, &s.base, req.Read, remote(pb.ClientClient.TenantUsage, fwd), func() (*pb.TenantUsageResponse, error) {
		clock, _ := s.node.FSM.Clock()
		var out *pb.TenantUsageResponse
		s.node.FSM.Read(func(sc *sfq.Scheduler) { out = apiview.TenantUsage(sc, tenant, clock, top) })
		if out == nil {
			return nil, tenantNotFound(tenant)
		}
		out.Now = s.clockNow()
		return out, nil
	})
}

// defaultTopGroups is how many groups TenantUsage lists unless asked.
const defaultTopGroups = 10

// pageSize reads a request's page_size: 0 is the default page, above
// MaxPage is refused.
func pageSize(n uint32) (int, error) {
	switch {
	case n == 0:
		return defaultPage, nil
	case n > MaxPage:
		return 0, fieldErr(codes.InvalidArgument, "page_size", "%d, at most %d", n, MaxPage)
	}
	return int(n), nil
}
