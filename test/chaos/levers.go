package chaos

import (
	"context"
	"math/rand/v2"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/test/cluster"
)

// levers pauses and resumes mix-bronze, mix-gold's group g1 and (briefly)
// all dispatch or the pool gpu alone, and changes the rate limits of mix-bronze and of
// mix-gold's group g2, every 1.5 to 3.5 s. The fairness tenants are left
// alone. Each call is an op of the history (kind "lever").
func (r *Run) levers(ctx context.Context, rng *rand.Rand) {
	var bronze *pb.UpsertTenantRequest
	for _, s := range tenantSpecs {
		if s.Name == "mix-bronze" {
			bronze = proto.Clone(s).(*pb.UpsertTenantRequest)
		}
	}
	rates := []struct {
		rate  string
		burst uint32
	}{{"1/1s", 1}, {"2/1s", 3}, {"5/2s", 2}, {"", 0}}
	for n := 0; ctx.Err() == nil; n++ {
		sleepCtx(ctx, time.Duration(1500+rng.IntN(2000))*time.Millisecond)
		var call func(ctx context.Context, nd *cluster.Node) error
		tenant := "mix-bronze"
		switch n % 8 {
		case 0, 2:
			req := &pb.PauseRequest{Tenant: tenant, Resume: n%8 == 2}
			call = func(ctx context.Context, nd *cluster.Node) error {
				_, err := pb.NewClientClient(nd.Conn()).Pause(ctx, req)
				return err
			}
		case 3, 5:
			tenant = "mix-gold"
			req := &pb.PauseRequest{Tenant: tenant, Group: "g1", Resume: n%8 == 5}
			call = func(ctx context.Context, nd *cluster.Node) error {
				_, err := pb.NewClientClient(nd.Conn()).Pause(ctx, req)
				return err
			}
		case 1, 6:
			rt := rates[rng.IntN(len(rates))]
			req := proto.Clone(bronze).(*pb.UpsertTenantRequest)
			req.Rate, req.RateBurst = &rt.rate, &rt.burst
			call = func(ctx context.Context, nd *cluster.Node) error {
				_, err := pb.NewAdminClient(nd.Conn()).UpsertTenant(ctx, req)
				return err
			}
		case 4:
			tenant = "mix-gold"
			rt := rates[rng.IntN(len(rates))]
			req := &pb.SetGroupRequest{Tenant: tenant, Group: "g2", Rate: rt.rate, Burst: rt.burst}
			if req.Rate == "" {
				req.Rate = "none"
			}
			call = func(ctx context.Context, nd *cluster.Node) error {
				_, err := pb.NewClientClient(nd.Conn()).SetGroup(ctx, req)
				return err
			}
		case 7:
			tenant = ""
			if r.cfg.GPU > 0 && (n/8)%2 == 1 {
				// The pool gpu alone, for a moment, every other time.
				call = func(ctx context.Context, nd *cluster.Node) error {
					if err := pausePool(ctx, nd, gpuPool, false); err != nil {
						return err
					}
					sleepCtx(ctx, 300*time.Millisecond)
					return pausePool(ctx, nd, gpuPool, true)
				}
				break
			}
			// All dispatch, for a moment.
			call = func(ctx context.Context, nd *cluster.Node) error {
				a := pb.NewAdminClient(nd.Conn())
				if _, err := a.PauseDispatch(ctx, &pb.PauseDispatchRequest{}); err != nil {
					return err
				}
				sleepCtx(ctx, 300*time.Millisecond)
				_, err := a.PauseDispatch(ctx, &pb.PauseDispatchRequest{Resume: true})
				return err
			}
		}
		r.recordCall(ctx, n, Op{Kind: "lever", Client: 300, Tenant: tenant, Invoke: time.Now()}, false, call)
	}
	// Nothing stays paused: the last stretch runs every tenant.
	cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r.retry(cctx, 0, func(ctx context.Context, nd *cluster.Node) error {
		_, err := pb.NewAdminClient(nd.Conn()).PauseDispatch(ctx, &pb.PauseDispatchRequest{Resume: true})
		return err
	})
	if r.cfg.GPU > 0 {
		r.retry(cctx, 0, func(ctx context.Context, nd *cluster.Node) error { return pausePool(ctx, nd, gpuPool, true) })
	}
}

// pausePool pauses (or resumes) dispatch in one pool, as the admin's Pause
// command.
func pausePool(ctx context.Context, nd *cluster.Node, pool string, resume bool) error {
	_, err := nd.Client().Apply(ctx, &clusterpb.ApplyRequest{Commands: []*clusterpb.Command{{Cmd: &clusterpb.Command_Pause{Pause: &clusterpb.Pause{Pool: pool, Resume: resume}}}}})
	return err
}
