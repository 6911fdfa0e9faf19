package rpc

import (
	"context"

	"github.com/baristahq/barista/internal/evidencecall"
	"github.com/baristahq/barista/internal/ratelimit"
	"github.com/baristahq/barista/internal/watchlimit"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// ClientService implements pb.ClientServer.
type ClientService struct {
	pb.UnimplementedClientServer
	base
	// workers holds the leader's worker sessions (ExplainJob's no_worker).
	workers *WorkerService
	// submits holds tenants to the submit rate (on the leader, where
	// every node's submits arrive).
	submits *ratelimit.Limiter
	// forwarder carries single submits to the leader in batches (on a
	// follower).
	forwarder *submitForwarder
	// forwardSingly plays a build before batched forwarding (Options).
	forwardSingly bool
	// watches bounds the watch streams and ends those that fall behind.
	watches *watchlimit.Limiter
	// evidence bounds the statements and certificates being issued.
	evidence evidencecall.Limit
}

// ListJobs pages: at most MaxPage jobs (defaultPage unless asked), and
// no more than maxPageBytes of encoded jobs, so that a page always fits
// one message (fsm.MaxMessageBytes) with room to spare. One job larger
// than maxPageBytes comes alone: MaxPayloadLimit keeps it within a
// message.
const (
	defaultPage  = 100
	MaxPage      = 1000
	maxPageBytes = 3 << 20
)

// CancelJob cancels a job of the caller's tenant.
func (s *ClientService) CancelJob(ctx context.Context, req *pb.CancelJobRequest) (*pb.CancelJobResponse, error) {
	tenant, err := scopeTenant(ctx, req.Tenant, false)
	if err != nil {
		return nil, err
	}
	fwd := &pb.CancelJobRequest{Tenant: tenant, JobId: req.JobId}
	cmd := &clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Tenant: tenant, Job: req.JobId}}}
	if _, resp, done, err := write(ctx, &s.base, cmd, remote(pb.ClientClient.CancelJob, fwd)); done {
		return resp, err
	}
	var out pb.CancelJobResponse
	s.node.FSM.Read(func(sc *sfq.Scheduler) {
		if j, ok := sc.Job(sfq.JobID(req.JobId)); ok {
			out.State, out.CancelRequested = j.State.String(), j.State.Live() && j.Cancel != sfq.CancelNone
		}
	})
	return &out, nil
}
