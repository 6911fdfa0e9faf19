package rpc

import (
	"context"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// RunJobNow releases a scheduled job of the caller's tenant at once (an
// admin names the tenant, or none for any job): a Release with now set,
// which Apply refuses for a job that is not scheduled or whose expire_at
// has passed, and for another tenant's job (NOT_FOUND, as a missing one).
func (s *ClientService) RunJobNow(ctx context.Context, req *pb.RunJobNowRequest) (*pb.RunJobNowResponse, error) {
	tenant, err := scopeTenant(ctx, req.Tenant, false)
	if err != nil {
		return nil, err
	}
	if req.JobId == 0 {
		return nil, JobNotFound(0)
	}
	cmd := &clusterpb.Command{Cmd: &clusterpb.Command_Release{Release: &clusterpb.Release{Jobs: []uint64{req.JobId}, Now: true, Tenant: tenant}}}
	fwd := &pb.RunJobNowRequest{Tenant: tenant, JobId: req.JobId}
	if _, resp, done, err := write(ctx, &s.base, cmd, remote(pb.ClientClient.RunJobNow, fwd)); done {
		return resp, err
	}
	var out pb.RunJobNowResponse
	s.node.FSM.Read(func(sc *sfq.Scheduler) {
		if j, ok := sc.Job(sfq.JobID(req.JobId)); ok {
			out.State = j.State.String()
		}
	})
	return &out, nil
}
