package rpc

import (
	"context"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/internal/apiview"
	"github.com/baristahq/barista/internal/text"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// Pools at the edge (SPEC §3 "Pools", feature level 6): the admin calls
// on pools and subscriptions, and the checks of a job's pool that every
// client call shares. Each check is the one Apply makes again, with the
// field named.

// poolNameErr refuses a pool name that is not empty and not a valid name
// as INVALID_ARGUMENT naming field.
func poolNameErr(field, name string) error {
	if name == "" {
		return nil
	}
	if err := sfq.ValidatePoolName(name); err != nil {
		return fieldErr(codes.InvalidArgument, field, "%v", err)
	}
	return nil
}

// unknownPool is the refusal of a pool that does not exist.
func unknownPool(field, name string) error {
	return refusalErr(sfq.Refusef(sfq.CodeNotFound, text.ReasonPoolUnknown, field, "unknown pool %q", name))
}

// knownPool refuses, as NOT_FOUND naming field, a pool name (not empty)
// that names no live pool of sc.
func knownPool(sc *sfq.Scheduler, field, name string) error {
	if name == "" {
		return nil
	}
	if _, ok := sc.PoolID(name); !ok {
		return unknownPool(field, name)
	}
	return nil
}

// readPool returns the live pool named name in this node's state, or nil.
func (b *base) readPool(name string) *pb.Pool {
	var p sfq.Pool
	var ok bool
	b.node.FSM.Read(func(sc *sfq.Scheduler) { p, ok = sc.Pool(name) })
	if !ok {
		return nil
	}
	out := apiview.Pool(&p, b.poolWorkers(p.Name))
	out.Now = b.clockNow()
	return out
}

// readPools returns every live pool of this node's state, by name.
func (b *base) readPools() []*pb.Pool {
	var ps []sfq.Pool
	b.node.FSM.Read(func(sc *sfq.Scheduler) {
		sc.Pools(func(p sfq.Pool) bool { ps = append(ps, p); return true })
	})
	out := make([]*pb.Pool, len(ps))
	for i := range ps {
		out[i] = apiview.Pool(&ps[i], b.poolWorkers(ps[i].Name))
	}
	return out
}

// poolSetCommand builds the command of a PoolSet request (its checks
// are Apply's: fsm.CheckFields, fsm.FSM.Admit).
func poolSetCommand(req *pb.PoolSetRequest) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_PoolSet{PoolSet: &clusterpb.PoolSet{Name: req.Name, Weights: req.Weights,
		SubscriptionsRequired: req.SubscriptionsRequired}}}
}

// PoolSet creates or changes a pool.
func (s *AdminService) PoolSet(ctx context.Context, req *pb.PoolSetRequest) (*pb.Pool, error) {
	res, resp, done, err := write(ctx, &s.base, poolSetCommand(req), func(ctx context.Context, cc *grpc.ClientConn) (*pb.Pool, error) {
		return pb.NewAdminClient(cc).PoolSet(ctx, req)
	})
	if done {
		return resp, err
	}
	out := s.readPool(req.Name)
	if out == nil {
		return nil, status.Errorf(codes.Internal, "pool %q vanished after it was set", req.Name)
	}
	out.Created = res.Created
	return out, nil
}

// PoolGet returns one pool.
func (s *AdminService) PoolGet(ctx context.Context, req *pb.PoolGetRequest) (*pb.Pool, error) {
	if err := poolNameErr("name", req.Name); err != nil {
		return nil, err
	}
	fwd := &pb.PoolGetRequest{Name: req.Name}
	return read(ctx, &s.base, req.Read, func(ctx context.Context, cc *grpc.ClientConn) (*pb.Pool, error) {
		return pb.NewAdminClient(cc).PoolGet(ctx, fwd)
	}, func() (*pb.Pool, error) {
		name := req.Name
		if name == "" {
			name = sfq.DefaultPoolName
		}
		if out := s.readPool(name); out != nil {
			return out, nil
		}
		return nil, unknownPool("name", req.Name)
	})
}

// PoolList lists every pool by name.
func (s *AdminService) PoolList(ctx context.Context, req *pb.PoolListRequest) (*pb.PoolListResponse, error) {
	return read(ctx, &s.base, req.Read, func(ctx context.Context, cc *grpc.ClientConn) (*pb.PoolListResponse, error) {
		return pb.NewAdminClient(cc).PoolList(ctx, &pb.PoolListRequest{})
	}, func() (*pb.PoolListResponse, error) {
		out := &pb.PoolListResponse{Pools: s.readPools()}
		now := s.clockNow()
		for _, p := range out.Pools {
			p.Now = now
		}
		return out, nil
	})
}

// PoolDelete deletes a pool without jobs (Apply checks) and without a
// connected worker (checked here, on the leader: the state machine does
// not know the connections).
func (s *AdminService) PoolDelete(ctx context.Context, req *pb.PoolDeleteRequest) (*pb.PoolDeleteResponse, error) {
	cmd := &clusterpb.Command{Cmd: &clusterpb.Command_PoolDelete{PoolDelete: &clusterpb.PoolDelete{Name: req.Name}}}
	if err := s.edgeCheck(cmd); err != nil {
		return nil, err
	}
	if resp, handled, err := forward(ctx, &s.base, func(ctx context.Context, cc *grpc.ClientConn) (*pb.PoolDeleteResponse, error) {
		return pb.NewAdminClient(cc).PoolDelete(ctx, req)
	}); handled {
		return resp, err
	}
	// A pool is not deleted while a worker of it is connected, and none
	// connects until the delete has applied (Apply refuses the pool
	// default whatever it holds).
	if req.Name != sfq.DefaultPoolName {
		release, err := s.workers.GuardPoolDelete(ctx, req.Name)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	if _, err := s.commit(ctx, cmd); err != nil {
		return nil, err
	}
	return &pb.PoolDeleteResponse{}, nil
}

// subscriptionCommand builds the command of a SubscriptionSet request
// (burst nil: of a SubscriptionDelete). The tenant and the pool are
// Apply's to check; a pool must be named (the command's empty pool is the
// pool default, which a request means only by its name).
func subscriptionCommand(tenant, pool string, burst *uint32) (*clusterpb.Command, error) {
	if pool == "" {
		return nil, fieldErr(codes.InvalidArgument, "pool", "required")
	}
	return &clusterpb.Command{Cmd: &clusterpb.Command_SubscriptionSet{SubscriptionSet: &clusterpb.SubscriptionSet{Tenant: tenant, Pool: pool, Burst: burst}}}, nil
}

// SubscriptionSet sets a tenant's subscription in a pool. A request
// without burst is refused: leaving the only field out would otherwise
// clear it (SubscriptionDelete does).
func (s *AdminService) SubscriptionSet(ctx context.Context, req *pb.SubscriptionSetRequest) (*pb.SubscriptionSetResponse, error) {
	if req.Burst == nil {
		return nil, fieldErr(codes.InvalidArgument, "burst", "required (0 holds the tenant's jobs in the pool); to remove the subscription, DELETE it (barista subscription set --burst none)")
	}
	cmd, err := subscriptionCommand(req.Tenant, req.Pool, req.Burst)
	if err != nil {
		return nil, err
	}
	return s.subscriptionWrite(ctx, req.Tenant, req.Pool, cmd, func(ctx context.Context, cc *grpc.ClientConn) (*pb.SubscriptionSetResponse, error) {
		return pb.NewAdminClient(cc).SubscriptionSet(ctx, req)
	})
}

// SubscriptionDelete removes a tenant's subscription in a pool.
func (s *AdminService) SubscriptionDelete(ctx context.Context, req *pb.SubscriptionDeleteRequest) (*pb.SubscriptionSetResponse, error) {
	cmd, err := subscriptionCommand(req.Tenant, req.Pool, nil)
	if err != nil {
		return nil, err
	}
	return s.subscriptionWrite(ctx, req.Tenant, req.Pool, cmd, func(ctx context.Context, cc *grpc.ClientConn) (*pb.SubscriptionSetResponse, error) {
		resp, err := pb.NewAdminClient(cc).SubscriptionDelete(ctx, req)
		if status.Code(err) == codes.Unimplemented {
			// A leader of an older build removes it by a set without burst.
			return pb.NewAdminClient(cc).SubscriptionSet(ctx, &pb.SubscriptionSetRequest{Tenant: req.Tenant, Pool: req.Pool})
		}
		return resp, err
	})
}

// subscriptionWrite commits a subscription's command and answers with the
// subscription as it is then.
func (s *AdminService) subscriptionWrite(ctx context.Context, tenant, pool string, cmd *clusterpb.Command,
	call func(ctx context.Context, cc *grpc.ClientConn) (*pb.SubscriptionSetResponse, error)) (*pb.SubscriptionSetResponse, error) {
	res, resp, done, err := write(ctx, &s.base, cmd, call)
	if done {
		return resp, err
	}
	out := &pb.SubscriptionSetResponse{Changed: res.Outcome == sfq.Changed}
	s.node.FSM.Read(func(sc *sfq.Scheduler) { out.Subscription = apiview.Subscription(sc, tenant, pool) })
	return out, nil
}

// subscriptionToken encodes where the next page of SubscriptionList
// starts: after the subscription of tenant index o in pool slot p.
func subscriptionToken(o uint32, p sfq.PoolID) string {
	return "s" + strconv.FormatUint(uint64(o), 10) + "." + strconv.FormatUint(uint64(p), 10)
}

// parseSubscriptionToken reads a subscriptionToken ("": the start).
func parseSubscriptionToken(tok string) (o uint32, p sfq.PoolID, first bool, err error) {
	if tok == "" {
		return 0, 0, true, nil
	}
	a, b, ok := strings.Cut(strings.TrimPrefix(tok, "s"), ".")
	x, err1 := strconv.ParseUint(a, 10, 32)
	y, err2 := strconv.ParseUint(b, 10, 16)
	if !ok || !strings.HasPrefix(tok, "s") || err1 != nil || err2 != nil {
		return 0, 0, false, fieldErr(codes.InvalidArgument, "page_token", "%q is not a token this server issued", tok)
	}
	return uint32(x), sfq.PoolID(y), false, nil
}

// subscriptionPage reads one page of SubscriptionList: the subscriptions
// of tenant and pool (each "" for any), in (tenant, pool) creation order,
// after the token's.
func subscriptionPage(sc *sfq.Scheduler, req *pb.SubscriptionListRequest, size int) (*pb.SubscriptionListResponse, error) {
	after, afterPool, first, err := parseSubscriptionToken(req.PageToken)
	if err != nil {
		return nil, err
	}
	if req.Tenant != "" {
		if _, ok := sc.TenantIndex(req.Tenant); !ok {
			return nil, tenantNotFound(req.Tenant)
		}
	}
	if err := knownPool(sc, "pool", req.Pool); err != nil {
		return nil, err
	}
	out := &pb.SubscriptionListResponse{}
	sc.Subscriptions(func(tenant, pool string, burst uint32) bool {
		o, _ := sc.TenantIndex(tenant)
		p, _ := sc.PoolID(pool)
		if !first && (o < after || (o == after && p <= afterPool)) {
			return true
		}
		if (req.Tenant != "" && tenant != req.Tenant) || (req.Pool != "" && pool != req.Pool) {
			return true
		}
		if len(out.Subscriptions) == size {
			last := out.Subscriptions[size-1]
			lo, _ := sc.TenantIndex(last.Tenant)
			lp, _ := sc.PoolID(last.Pool)
			out.NextPageToken = subscriptionToken(lo, lp)
			return false
		}
		l, _ := sc.Lane(tenant, pool)
		out.Subscriptions = append(out.Subscriptions, &pb.Subscription{Tenant: tenant, Pool: pool, Burst: burst, Running: l.Running})
		return true
	})
	return out, nil
}

// SubscriptionList pages through the subscriptions.
func (s *AdminService) SubscriptionList(ctx context.Context, req *pb.SubscriptionListRequest) (*pb.SubscriptionListResponse, error) {
	if req.Tenant != "" {
		if err := sfq.ValidateName("tenant", req.Tenant); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
	}
	if err := poolNameErr("pool", req.Pool); err != nil {
		return nil, err
	}
	size, err := pageSize(req.PageSize)
	if err != nil {
		return nil, err
	}
	if _, _, _, err := parseSubscriptionToken(req.PageToken); err != nil {
		return nil, err
	}
	fwd := &pb.SubscriptionListRequest{Tenant: req.Tenant, Pool: req.Pool, PageSize: req.PageSize, PageToken: req.PageToken}
	return read(ctx, &s.base, req.Read, func(ctx context.Context, cc *grpc.ClientConn) (*pb.SubscriptionListResponse, error) {
		return pb.NewAdminClient(cc).SubscriptionList(ctx, fwd)
	}, func() (out *pb.SubscriptionListResponse, err error) {
		s.node.FSM.Read(func(sc *sfq.Scheduler) { out, err = subscriptionPage(sc, req, size) })
		return out, err
	})
}
