package rpc

import (
	"context"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/baristahq/barista/internal/apiview"
	"github.com/baristahq/barista/internal/pbcodec"
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
	return read(ctx, &s.base, req.Read, func(ctx context.Context, cc *grpc.ClientConn) (*pb.Job, error) {
		return pb.NewClientClient(cc).GetJob(ctx, fwd)
	}, func() (out *pb.Job, err error) {
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

// PageToken encodes where the next page of ListJobs starts.
func PageToken(next sfq.JobID) string { return "p" + strconv.FormatUint(uint64(next), 10) }

// DownToken encodes where the next page of a newest-first list starts
// (that job, then older ones).
func DownToken(next sfq.JobID) string { return "d" + strconv.FormatUint(uint64(next), 10) }

// ParseListToken reads a ListJobs page token: "p" tokens go up, "d"
// tokens down; a token of the other direction is refused.
func ParseListToken(tok string, down bool) (sfq.JobID, error) {
	if !down || tok == "" {
		return ParsePageToken(tok)
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(tok, "d"), 10, 64)
	if err != nil || !strings.HasPrefix(tok, "d") || v == 0 {
		return 0, fieldErr(codes.InvalidArgument, "page_token", "%q is not a token this server issued for a newest-first list", tok)
	}
	return sfq.JobID(v), nil
}

// ParsePageToken reads a PageToken.
func ParsePageToken(tok string) (sfq.JobID, error) {
	if tok == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(tok, "p"), 10, 64)
	if err != nil || !strings.HasPrefix(tok, "p") || v == 0 {
		return 0, fieldErr(codes.InvalidArgument, "page_token", "%q is not a token this server issued", tok)
	}
	return sfq.JobID(v), nil
}

// listPage reads one page of ListJobs from the state: the jobs of tenant
// (every tenant's if empty) from ID from on, of one state unless state is
// 0 and of one pool unless pool is "" (the caller checked that it
// exists), at most size of them and no more than maxBytes once encoded (but
// never none while one remains). The next page token names the first job
// left out, so the next page starts exactly there. ok is false when the
// tenant does not exist. With down the page goes from ID from (0: the
// newest) down, and its token goes on downwards.
func listPage(sc *sfq.Scheduler, tenant string, state sfq.State, pool string, from sfq.JobID, down bool, size int, payload bool, maxBytes int) (out *pb.ListJobsResponse, ok bool) {
	pid, _ := sc.PoolID(pool)
	out = &pb.ListJobsResponse{}
	total := 0
	walk, token := sc.TenantJobs, PageToken
	if down {
		walk, token = sc.TenantJobsDown, DownToken
	}
	ok = walk(tenant, from, func(j *sfq.Job) bool {
		if (state != 0 && j.State != state) || (pool != "" && sc.LanePool(j.Tenant) != pid) {
			return true
		}
		if len(out.Jobs) == size {
			out.NextPageToken = token(j.ID)
			return false
		}
		pj := apiview.Job(sc, j, payload)
		// The bytes this job adds to the response: field tag, length, body.
		n := protowire.SizeTag(1) + protowire.SizeBytes(pbcodec.Size(pj))
		if len(out.Jobs) > 0 && total+n > maxBytes {
			out.NextPageToken = token(j.ID)
			return false
		}
		total += n
		out.Jobs = append(out.Jobs, pj)
		return true
	})
	return out, ok
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
	from, err := ParseListToken(req.PageToken, newest)
	if err != nil {
		return nil, err
	}
	size, err := pageSize(req.PageSize)
	if err != nil {
		return nil, err
	}
	fwd := &pb.ListJobsRequest{Tenant: tenant, State: req.State, PageSize: req.PageSize, PageToken: req.PageToken, IncludePayload: req.IncludePayload,
		NewestFirst: newest, OldestFirst: !newest, Pool: req.Pool} // newest_first for a leader of an older build
	return read(ctx, &s.base, req.Read, func(ctx context.Context, cc *grpc.ClientConn) (*pb.ListJobsResponse, error) {
		return pb.NewClientClient(cc).ListJobs(ctx, fwd)
	}, func() (out *pb.ListJobsResponse, err error) {
		s.node.FSM.Read(func(sc *sfq.Scheduler) {
			if err = knownPool(sc, "pool", req.Pool); err != nil {
				return
			}
			var ok bool
			if out, ok = listPage(sc, tenant, state, req.Pool, from, newest, size, req.IncludePayload, maxPageBytes); !ok {
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
	return read(ctx, &s.base, req.Read, func(ctx context.Context, cc *grpc.ClientConn) (*pb.TenantUsageResponse, error) {
		return pb.NewClientClient(cc).TenantUsage(ctx, fwd)
	}, func() (*pb.TenantUsageResponse, error) {
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
