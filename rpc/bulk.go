package rpc

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/joblist"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// Redrive, CancelJobs and PurgeJobs (SPEC §3 "Dead letters and redrive"):
// one tenant's jobs by IDs or by a filter the state machine evaluates in
// Apply. The node that takes the call turns since_ms into an absolute
// submit time by its cluster clock, so a follower forwards a request that
// means the same on the leader.

// bulkCommand builds the command of a bulk call, checked as Apply checks
// it. now is the cluster time since_ms counts back from; resolve is false
// for a request a follower forwarded, whose filter holds the bound
// already.
func bulkCommand(op fsm.BulkOp, tenant string, req *pb.BulkJobsRequest, now sfq.Time, resolve bool) (*clusterpb.Command, error) {
	after, err := joblist.ParsePageToken(req.PageToken)
	if err != nil {
		return nil, refusalErr(sfq.RefusalOf(err))
	}
	c := &clusterpb.BulkJobs{Tenant: tenant, Jobs: req.JobIds, After: uint64(after), MaxAttempts: req.MaxAttempts,
		RequestKey: req.RequestKey, SinceMs: req.SinceMs}
	if req.Filter != nil {
		c.Filter = proto.Clone(req.Filter).(*pb.JobFilter)
		// A state may be named in either case, like the API's enums; the
		// command holds the names Apply knows.
		for i, st := range c.Filter.States {
			c.Filter.States[i] = strings.ToLower(st)
		}
	}
	if resolve && req.SinceMs > 0 && c.Filter != nil {
		if from := int64(now) - req.SinceMs; from > c.Filter.SubmittedFromMs {
			c.Filter.SubmittedFromMs = from
		}
	}
	switch op {
	case fsm.BulkRedrive:
		return &clusterpb.Command{Cmd: &clusterpb.Command_Redrive{Redrive: c}}, nil
	case fsm.BulkCancel:
		return &clusterpb.Command{Cmd: &clusterpb.Command_CancelJobs{CancelJobs: c}}, nil
	}
	return &clusterpb.Command{Cmd: &clusterpb.Command_Purge{Purge: c}}, nil
}

// bulkArgs returns the BulkJobs of a command built by bulkCommand.
func bulkArgs(c *clusterpb.Command) *clusterpb.BulkJobs {
	_, args, _ := fsm.BulkOf(c)
	return args
}

func bulkResponse(b *fsm.BulkResult, c *clusterpb.BulkJobs) *pb.BulkJobsResponse {
	out := &pb.BulkJobsResponse{Items: fsm.BulkItemsToPB(b.Items), Done: b.Done, Skipped: b.Skipped, Duplicate: b.Duplicate, Stopped: b.Stopped}
	if b.Next != 0 {
		out.NextPageToken = joblist.PageToken(b.Next)
	}
	if c.Filter != nil {
		out.SubmittedFromMs = c.Filter.SubmittedFromMs
	}
	return out
}

// bulk serves one bulk call: scope, validate, forward to the leader (the
// request as this node resolved it), propose, or for a dry run read.
func (s *ClientService) bulk(ctx context.Context, op fsm.BulkOp, req *pb.BulkJobsRequest,
	remote func(ctx context.Context, cc *grpc.ClientConn, fwd *pb.BulkJobsRequest) (*pb.BulkJobsResponse, error)) (*pb.BulkJobsResponse, error) {
	tenant, err := scopeTenant(ctx, req.Tenant, true)
	if err != nil {
		return nil, err
	}
	now, _ := s.node.FSM.Clock()
	cmd, err := bulkCommand(op, tenant, req, now, len(metadata.ValueFromIncomingContext(ctx, forwardedKey)) == 0)
	if err != nil {
		return nil, err
	}
	if err := s.edgeCheck(cmd); err != nil {
		return nil, err
	}
	c := bulkArgs(cmd)
	// Forwarded with the bound resolved here; the leader does not count
	// since_ms again, but keeps it for the request key's digest.
	fwd := &pb.BulkJobsRequest{Tenant: tenant, JobIds: req.JobIds, Filter: c.Filter, SinceMs: req.SinceMs, PageToken: req.PageToken,
		MaxAttempts: req.MaxAttempts, RequestKey: req.RequestKey, DryRun: req.DryRun}
	remoteCall := func(ctx context.Context, cc *grpc.ClientConn) (*pb.BulkJobsResponse, error) {
		return remote(ctx, cc, fwd)
	}
	if req.DryRun {
		return read(ctx, &s.base, nil, remoteCall, func() (out *pb.BulkJobsResponse, err error) {
			s.node.FSM.Read(func(sc *sfq.Scheduler) {
				if _, ok := sc.TenantIndex(tenant); !ok {
					err = tenantNotFound(tenant)
					return
				}
				if err = knownPool(sc, "filter.pool", c.GetFilter().GetPool()); err != nil {
					return
				}
				out = bulkResponse(fsm.DryRun(sc, op, c), c)
			})
			return out, err
		})
	}
	if resp, handled, err := forward(ctx, &s.base, remoteCall); handled {
		return resp, err
	}
	res, err := s.commit(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if res.Bulk == nil {
		return nil, status.Error(codes.Internal, "bulk command without a result")
	}
	return bulkResponse(res.Bulk, c), nil
}

// Redrive moves dead letters of the caller's tenant back to queued.
func (s *ClientService) Redrive(ctx context.Context, req *pb.BulkJobsRequest) (*pb.BulkJobsResponse, error) {
	return s.bulk(ctx, fsm.BulkRedrive, req, func(ctx context.Context, cc *grpc.ClientConn, fwd *pb.BulkJobsRequest) (*pb.BulkJobsResponse, error) {
		return pb.NewClientClient(cc).Redrive(ctx, fwd)
	})
}

// CancelJobs cancels jobs of the caller's tenant.
func (s *ClientService) CancelJobs(ctx context.Context, req *pb.BulkJobsRequest) (*pb.BulkJobsResponse, error) {
	return s.bulk(ctx, fsm.BulkCancel, req, func(ctx context.Context, cc *grpc.ClientConn, fwd *pb.BulkJobsRequest) (*pb.BulkJobsResponse, error) {
		return pb.NewClientClient(cc).CancelJobs(ctx, fwd)
	})
}

// PurgeJobs deletes ended jobs of the caller's tenant.
func (s *ClientService) PurgeJobs(ctx context.Context, req *pb.BulkJobsRequest) (*pb.BulkJobsResponse, error) {
	return s.bulk(ctx, fsm.BulkPurge, req, func(ctx context.Context, cc *grpc.ClientConn, fwd *pb.BulkJobsRequest) (*pb.BulkJobsResponse, error) {
		return pb.NewClientClient(cc).PurgeJobs(ctx, fwd)
	})
}
