package rpc

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
)

// pausedText is who paused a tenant or a group, as the API shows it: "",
// "tenant" or "admin".
func pausedText(p sfq.PausedBy) string {
	if p == sfq.NotPaused {
		return ""
	}
	return p.String()
}

// rateText is a rate limit as the API shows it ("N/PERIOD"; the burst is
// a field of its own).
func rateText(r sfq.RateLimit) string {
	r.Burst = 0
	return r.String()
}

// parseRate reads a rate limit field ("N/PERIOD", "none" or empty) and its
// burst, naming the field in the error.
func parseRate(field, rate string, burst uint32) (sfq.RateLimit, error) {
	r, err := sfq.ParseRate(rate, burst)
	if err != nil {
		return r, status.Errorf(codes.InvalidArgument, "%s: %v", field, err)
	}
	return r, nil
}

// setGroupRequestCommand builds the command of a SetGroup request: its cap
// (the admin's, or the tenant's own) and, from an admin, its rate limit.
func setGroupRequestCommand(tenant string, req *pb.SetGroupRequest, asTenant bool) (*pb.SetGroup, error) {
	if req.Rate == "" && req.Burst == 0 {
		return setGroupCommand(tenant, req.Group, req.Cap, asTenant)
	}
	r, err := parseRate("rate", req.Rate, req.Burst)
	if err != nil {
		return nil, err
	}
	c := &pb.SetGroup{Tenant: tenant, Group: req.Group, AsTenant: asTenant}
	if req.Cap != "" {
		if c, err = setGroupCommand(tenant, req.Group, req.Cap, asTenant); err != nil {
			return nil, err
		}
	}
	c.SetRate, c.RateN, c.RatePeriodMs, c.RateBurst = true, r.N, r.PeriodMs, r.Burst
	return c, nil
}

// Pause pauses or resumes a tenant or one of its groups. The tenant's own
// client token may pause and resume its own tenant and groups, but not
// lift a pause an admin set (Apply checks it).
func (s *ClientService) Pause(ctx context.Context, req *pb.PauseRequest) (*pb.PauseResponse, error) {
	tenant, err := scopeGroup(ctx, req.Tenant, req.Group)
	if err != nil {
		return nil, err
	}
	command := &pb.Command{Cmd: &pb.Command_Pause{Pause: &pb.Pause{Tenant: tenant, Group: req.Group, Resume: req.Resume,
		AsTenant: IdentityFrom(ctx).Role == RoleClient}}}
	fwd := &pb.PauseRequest{Tenant: tenant, Group: req.Group, Resume: req.Resume}
	res, resp, done, err := write(ctx, &s.base, command, func(ctx context.Context, cc *grpc.ClientConn) (*pb.PauseResponse, error) {
		return pb.NewClientClient(cc).Pause(ctx, fwd)
	})
	if done {
		return resp, err
	}
	out := &pb.PauseResponse{Changed: res.Outcome == sfq.Changed}
	s.node.FSM.Read(func(sc *sfq.Scheduler) {
		if req.Group == "" {
			t, _ := sc.Tenant(tenant)
			out.Paused = pausedText(t.PausedBy())
		} else if g, ok := sc.Group(tenant, req.Group); ok {
			out.Paused = pausedText(g.PausedBy())
		}
	})
	return out, nil
}

// PauseDispatch pauses or resumes all dispatch (maintenance), or with a
// pool dispatch in that pool alone.
func (s *AdminService) PauseDispatch(ctx context.Context, req *pb.PauseDispatchRequest) (*pb.PauseDispatchResponse, error) {
	command := &pb.Command{Cmd: &pb.Command_Pause{Pause: &pb.Pause{All: req.Pool == "", Pool: req.Pool, Resume: req.Resume}}}
	res, resp, done, err := write(ctx, &s.base, command, func(ctx context.Context, cc *grpc.ClientConn) (*pb.PauseDispatchResponse, error) {
		return pb.NewAdminClient(cc).PauseDispatch(ctx, req)
	})
	if done {
		return resp, err
	}
	out := &pb.PauseDispatchResponse{Changed: res.Outcome == sfq.Changed}
	s.node.FSM.Read(func(sc *sfq.Scheduler) {
		if req.Pool == "" {
			out.Paused = sc.DispatchPaused()
		} else if id, ok := sc.PoolID(req.Pool); ok {
			out.Paused = sc.PoolPaused(id)
		}
	})
	return out, nil
}

// eventGroup is the group a tenant-level event names (paused, resumed).
func eventGroup(ev *fsm.Event) string {
	if ev.Kind.TenantLevel() {
		return ev.Worker
	}
	return ""
}
