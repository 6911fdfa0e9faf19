package rpc

// The levers of a tenant's work: its groups' caps and rates (SetGroup,
// GetGroup, ListGroups) and pauses (of a tenant, a group, a pool, all
// dispatch).

import (
	"context"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/apiview"
	"github.com/baristahq/barista/internal/auth"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// Who sets a group's cap. An admin sets the group's cap (inherit, none or
// a number). A tenant's client token sets its own cap on the group: a
// second, separate cap — the group runs at most the lower of the two — so
// a tenant can tighten a group below what the admin allows and never
// loosen it; clearing its own cap leaves the admin's. Both are checked
// again when the command is applied.

// groupNameErr checks a group name (of a read) and names the field.
func groupNameErr(field, name string) error {
	if err := sfq.ValidateGroupName(name); err != nil {
		return fieldErr(codes.InvalidArgument, field, "%v", err)
	}
	return nil
}

// setGroupCommand builds the command of a SetGroup: the admin's cap, or
// (asTenant) the tenant's own.
func setGroupCommand(tenant, group, value string, asTenant bool) (*clusterpb.SetGroup, error) {
	c := &clusterpb.SetGroup{Tenant: tenant, Group: group, AsTenant: asTenant}
	cp, err := sfq.ParseGroupCap(value)
	if err != nil {
		return nil, fieldErr(codes.InvalidArgument, "cap", "%q (want inherit, none or a number 1..%d)", value, sfq.MaxGroupCap)
	}
	c.CapKind, c.Limit = fsm.GroupCapToPB(cp)
	if asTenant && cp == sfq.GroupCapInherit {
		c.CapKind = clusterpb.GroupCapKind_GROUP_CAP_NONE // the tenant clears its own cap
	}
	return c, nil
}

// SetGroup sets a group's cap: the admin's with an admin token, the
// tenant's own (tighter) cap with its client token.
func (s *ClientService) SetGroup(ctx context.Context, req *pb.SetGroupRequest) (*pb.Group, error) {
	tenant, err := scopeTenant(ctx, req.Tenant, true)
	if err != nil {
		return nil, err
	}
	asTenant := IdentityFrom(ctx).Role == auth.RoleClient
	cmd, err := setGroupRequestCommand(tenant, req, asTenant)
	if err != nil {
		return nil, err
	}
	command := &clusterpb.Command{Cmd: &clusterpb.Command_SetGroup{SetGroup: cmd}}
	fwd := &pb.SetGroupRequest{Tenant: tenant, Group: req.Group, Cap: req.Cap, Rate: req.Rate, Burst: req.Burst}
	if _, resp, done, err := write(ctx, &s.base, command, remote(pb.ClientClient.SetGroup, fwd)); done {
		return resp, err
	}
	var out *pb.Group
	s.node.FSM.Read(func(sc *sfq.Scheduler) {
		t, _ := sc.Tenant(tenant)
		if g, ok := sc.Group(tenant, req.Group); ok {
			out = apiview.Group(&t, &g)
		} else {
			// Nothing set and no job: the group is forgotten.
			out = &pb.Group{Tenant: tenant, Name: req.Group, Cap: sfq.GroupCapInherit.String(), Limit: t.GroupCap}
		}
	})
	out.Now = s.clockNow()
	return out, nil
}

// scopeGroup checks a call naming a tenant's group ("" is its unnamed
// group): the caller's tenant (scopeTenant), and the group's name.
func scopeGroup(ctx context.Context, tenant, group string) (string, error) {
	tenant, err := scopeTenant(ctx, tenant, true)
	if err != nil {
		return "", err
	}
	if group != "" {
		if err := groupNameErr("group", group); err != nil {
			return "", err
		}
	}
	return tenant, nil
}

// GetGroup returns one group of the caller's tenant ("" is its unnamed
// group). A group without jobs or settings does not exist: NOT_FOUND.
func (s *ClientService) GetGroup(ctx context.Context, req *pb.GetGroupRequest) (*pb.Group, error) {
	tenant, err := scopeGroup(ctx, req.Tenant, req.Group)
	if err != nil {
		return nil, err
	}
	fwd := &pb.GetGroupRequest{Tenant: tenant, Group: req.Group}
	return read(ctx, &s.base, req.Read, remote(pb.ClientClient.GetGroup, fwd), func() (out *pb.Group, err error) {
		s.node.FSM.Read(func(sc *sfq.Scheduler) {
			t, ok := sc.Tenant(tenant)
			if !ok {
				err = tenantNotFound(tenant)
				return
			}
			g, ok := sc.Group(tenant, req.Group)
			if !ok {
				err = fieldErr(codes.NotFound, "group", "tenant %q has no group %q (a group without jobs or settings is forgotten)", tenant, req.Group)
				return
			}
			out = apiview.Group(&t, &g)
		})
		if out != nil {
			out.Now = s.clockNow()
		}
		return out, err
	})
}

// groupPageToken encodes the name a page of groups continues after.
func groupPageToken(last string) string { return "g" + strconv.Quote(last) }

func parseGroupPageToken(tok string) (after string, first bool, err error) {
	if tok == "" {
		return "", true, nil
	}
	if len(tok) < 3 || tok[0] != 'g' {
		return "", false, fieldErr(codes.InvalidArgument, "page_token", "%q is not a token this server issued", tok)
	}
	after, err = strconv.Unquote(tok[1:])
	if err != nil {
		return "", false, fieldErr(codes.InvalidArgument, "page_token", "%q is not a token this server issued", tok)
	}
	return after, false, nil
}

// ListGroups pages through the caller's tenant's groups by name, the
// unnamed one ("") first.
func (s *ClientService) ListGroups(ctx context.Context, req *pb.ListGroupsRequest) (*pb.ListGroupsResponse, error) {
	tenant, err := scopeTenant(ctx, req.Tenant, true)
	if err != nil {
		return nil, err
	}
	after, first, err := parseGroupPageToken(req.PageToken)
	if err != nil {
		return nil, err
	}
	size, err := pageSize(req.PageSize)
	if err != nil {
		return nil, err
	}
	fwd := &pb.ListGroupsRequest{Tenant: tenant, PageSize: req.PageSize, PageToken: req.PageToken}
	return read(ctx, &s.base, req.Read, remote(pb.ClientClient.ListGroups, fwd), func() (out *pb.ListGroupsResponse, err error) {
		s.node.FSM.Read(func(sc *sfq.Scheduler) {
			gs, more, ok := sc.SortedGroups(tenant, after, first, size)
			if !ok {
				err = tenantNotFound(tenant)
				return
			}
			t, _ := sc.Tenant(tenant)
			out = &pb.ListGroupsResponse{}
			for i := range gs {
				out.Groups = append(out.Groups, apiview.Group(&t, &gs[i]))
			}
			if more && len(gs) > 0 {
				out.NextPageToken = groupPageToken(gs[len(gs)-1].Name)
			}
		})
		if out != nil {
			now := s.clockNow()
			for _, g := range out.Groups {
				g.Now = now
			}
		}
		return out, err
	})
}

// parseRate reads a rate limit field ("N/PERIOD", "none" or empty) and its
// burst, naming the field in the error.
func parseRate(field, rate string, burst uint32) (sfq.RateLimit, error) {
	r, err := sfq.ParseRate(rate, burst)
	if err != nil {
		return r, fieldErr(codes.InvalidArgument, field, "%v", err)
	}
	return r, nil
}

// setGroupRequestCommand builds the command of a SetGroup request: its cap
// (the admin's, or the tenant's own) and, from an admin, its rate limit.
func setGroupRequestCommand(tenant string, req *pb.SetGroupRequest, asTenant bool) (*clusterpb.SetGroup, error) {
	if req.Rate == "" && req.Burst == 0 {
		return setGroupCommand(tenant, req.Group, req.Cap, asTenant)
	}
	r, err := parseRate("rate", req.Rate, req.Burst)
	if err != nil {
		return nil, err
	}
	c := &clusterpb.SetGroup{Tenant: tenant, Group: req.Group, AsTenant: asTenant}
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
	command := &clusterpb.Command{Cmd: &clusterpb.Command_Pause{Pause: &clusterpb.Pause{Tenant: tenant, Group: req.Group, Resume: req.Resume,
		AsTenant: IdentityFrom(ctx).Role == auth.RoleClient}}}
	fwd := &pb.PauseRequest{Tenant: tenant, Group: req.Group, Resume: req.Resume}
	res, resp, done, err := write(ctx, &s.base, command, remote(pb.ClientClient.Pause, fwd))
	if done {
		return resp, err
	}
	out := &pb.PauseResponse{Changed: res.Outcome == sfq.Changed}
	s.node.FSM.Read(func(sc *sfq.Scheduler) {
		if req.Group == "" {
			t, _ := sc.Tenant(tenant)
			out.Paused = apiview.Paused(t.PausedBy())
		} else if g, ok := sc.Group(tenant, req.Group); ok {
			out.Paused = apiview.Paused(g.PausedBy())
		}
	})
	return out, nil
}

// PauseDispatch pauses or resumes all dispatch (maintenance), or with a
// pool dispatch in that pool alone.
func (s *AdminService) PauseDispatch(ctx context.Context, req *pb.PauseDispatchRequest) (*pb.PauseDispatchResponse, error) {
	command := &clusterpb.Command{Cmd: &clusterpb.Command_Pause{Pause: &clusterpb.Pause{All: req.Pool == "", Pool: req.Pool, Resume: req.Resume}}}
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
