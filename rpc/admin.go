package rpc

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/fsm/fairness"
	"github.com/baristahq/barista/internal/apiview"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// AdminService implements pb.AdminServer.
type AdminService struct {
	pb.UnimplementedAdminServer
	base
	// workers holds the leader's worker sessions (a pool is not deleted
	// while a worker of it is connected: GuardPoolDelete).
	workers *WorkerService
}

// upsertCommand is the command of a tenant upsert: the fields the
// request gives, the others kept (fsm's TenantUpsert.keep). What only
// the request's wire form can get wrong, its rate's text, is read here.
func upsertCommand(req *pb.UpsertTenantRequest) (*clusterpb.Command, error) {
	u := &clusterpb.TenantUpsert{Name: req.Name, Caps: &pb.Caps{}}
	var keep []string
	field := func(name string, given bool, set func()) {
		if given {
			set()
		} else {
			keep = append(keep, name)
		}
	}
	field("tier", req.Tier != nil, func() { u.Tier = req.GetTier() })
	field("multiplier", req.Multiplier != nil, func() { u.Multiplier = req.GetMultiplier() })
	c, cu := u.Caps, req.GetCaps()
	if cu == nil {
		cu = &pb.CapsUpdate{}
	}
	field("caps.max_running", cu.MaxRunning != nil, func() { c.MaxRunning = cu.GetMaxRunning() })
	field("caps.max_running_sm", cu.MaxRunningSm != nil, func() { c.MaxRunningSm = cu.GetMaxRunningSm() })
	field("caps.max_running_md", cu.MaxRunningMd != nil, func() { c.MaxRunningMd = cu.GetMaxRunningMd() })
	field("caps.max_running_lg", cu.MaxRunningLg != nil, func() { c.MaxRunningLg = cu.GetMaxRunningLg() })
	field("caps.max_inflight_cpu_ms", cu.MaxInflightCpuMs != nil, func() { c.MaxInflightCpuMs = cu.GetMaxInflightCpuMs() })
	field("caps.max_queued", cu.MaxQueued != nil, func() { c.MaxQueued = cu.GetMaxQueued() })
	field("caps.max_running_critical", cu.MaxRunningCritical != nil, func() { c.MaxRunningCritical = cu.GetMaxRunningCritical() })
	field("caps.max_running_high", cu.MaxRunningHigh != nil, func() { c.MaxRunningHigh = cu.GetMaxRunningHigh() })
	field("caps.max_running_deadline", cu.MaxRunningDeadline != nil, func() { c.MaxRunningDeadline = cu.GetMaxRunningDeadline() })
	field("export_metrics", req.ExportMetrics != nil, func() { u.ExportMetrics = req.GetExportMetrics() })
	field("max_class", req.MaxClass != nil, func() { u.MaxClass = req.GetMaxClass() })
	field("allow_deadlines", req.AllowDeadlines != nil, func() { u.AllowDeadlines = req.GetAllowDeadlines() })
	field("group_cap", req.GroupCap != nil, func() { u.GroupCap = req.GetGroupCap() })
	field("group_order", req.GroupOrder != nil, func() { u.GroupOrder = req.GetGroupOrder() })
	field("max_groups", req.MaxGroups != nil, func() { u.MaxGroups = req.GetMaxGroups() })
	var rateErr error
	field("rate", req.Rate != nil, func() {
		var r sfq.RateLimit
		if r, rateErr = parseRate("rate", req.GetRate(), 0); rateErr == nil {
			u.RateN, u.RatePeriodMs = r.N, r.PeriodMs
		}
	})
	if rateErr != nil {
		return nil, rateErr
	}
	field("rate_burst", req.RateBurst != nil, func() { u.RateBurst = req.GetRateBurst() })
	u.Keep = keep
	return &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: u}}, nil
}

// UpsertTenant creates or updates a tenant: the fields the request
// leaves out keep their value (an update keeps its tags, usage and
// counters too).
func (s *AdminService) UpsertTenant(ctx context.Context, req *pb.UpsertTenantRequest) (*pb.Tenant, error) {
	cmd, err := upsertCommand(req)
	if err != nil {
		return nil, err
	}
	res, resp, done, err := write(ctx, &s.base, cmd, func(ctx context.Context, cc *grpc.ClientConn) (*pb.Tenant, error) {
		return pb.NewAdminClient(cc).UpsertTenant(ctx, req)
	})
	if done {
		return resp, err
	}
	out := apiview.ReadTenant(s.node.FSM, req.Name)
	if out == nil {
		return nil, status.Errorf(codes.Internal, "tenant %q vanished after its upsert", req.Name)
	}
	out.Created = res.Created
	out.Now = s.clockNow()
	return out, nil
}

// DeleteTenant deletes a tenant without queued or running jobs.
func (s *AdminService) DeleteTenant(ctx context.Context, req *pb.DeleteTenantRequest) (*pb.DeleteTenantResponse, error) {
	if req.Name == "" {
		return nil, fieldErr(codes.InvalidArgument, "name", "required")
	}
	cmd := &clusterpb.Command{Cmd: &clusterpb.Command_TenantDelete{TenantDelete: &clusterpb.TenantDelete{Name: req.Name}}}
	if _, resp, done, err := write(ctx, &s.base, cmd, func(ctx context.Context, cc *grpc.ClientConn) (*pb.DeleteTenantResponse, error) {
		return pb.NewAdminClient(cc).DeleteTenant(ctx, req)
	}); done {
		return resp, err
	}
	return &pb.DeleteTenantResponse{}, nil
}

// GetTenant returns one tenant's configuration.
func (s *AdminService) GetTenant(ctx context.Context, req *pb.GetTenantRequest) (*pb.Tenant, error) {
	fwd := &pb.GetTenantRequest{Name: req.Name}
	return read(ctx, &s.base, req.Read, func(ctx context.Context, cc *grpc.ClientConn) (*pb.Tenant, error) {
		return pb.NewAdminClient(cc).GetTenant(ctx, fwd)
	}, func() (*pb.Tenant, error) {
		out := apiview.ReadTenant(s.node.FSM, req.Name)
		if out == nil {
			return nil, tenantNotFound(req.Name)
		}
		out.Now = s.clockNow()
		return out, nil
	})
}

// ListTenants lists every tenant in creation order.
func (s *AdminService) ListTenants(ctx context.Context, req *pb.ListTenantsRequest) (*pb.ListTenantsResponse, error) {
	return read(ctx, &s.base, req.Read, func(ctx context.Context, cc *grpc.ClientConn) (*pb.ListTenantsResponse, error) {
		return pb.NewAdminClient(cc).ListTenants(ctx, &pb.ListTenantsRequest{})
	}, func() (*pb.ListTenantsResponse, error) {
		out := &pb.ListTenantsResponse{}
		s.node.FSM.ReadTenants(func(sc *sfq.Scheduler, flags fsm.TenantFlags) {
			sc.Tenants(func(i uint32, t *sfq.Tenant) bool {
				out.Tenants = append(out.Tenants, apiview.Tenant(i, t, flags))
				return true
			})
		})
		now := s.clockNow()
		for _, t := range out.Tenants {
			t.Now = now
		}
		return out, nil
	})
}

// GetConfig returns the replicated scheduler configuration.
func (s *AdminService) GetConfig(ctx context.Context, req *pb.GetConfigRequest) (*pb.SchedulerConfig, error) {
	return read(ctx, &s.base, req.Read, func(ctx context.Context, cc *grpc.ClientConn) (*pb.SchedulerConfig, error) {
		return pb.NewAdminClient(cc).GetConfig(ctx, &pb.GetConfigRequest{})
	}, func() (*pb.SchedulerConfig, error) {
		return apiview.Config(s.node.FSM), nil
	})
}

// SetConfig replaces the replicated scheduler configuration.
func (s *AdminService) SetConfig(ctx context.Context, req *pb.SetConfigRequest) (*pb.SchedulerConfig, error) {
	if _, err := fsm.ConfigFromPB(req.Config); err != nil {
		return nil, status.Error(codes.InvalidArgument, fmt.Sprintf("config: %v", err))
	}
	cmd := &clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: req.Config}}}
	if _, resp, done, err := write(ctx, &s.base, cmd, func(ctx context.Context, cc *grpc.ClientConn) (*pb.SchedulerConfig, error) {
		return pb.NewAdminClient(cc).SetConfig(ctx, req)
	}); done {
		return resp, err
	}
	return apiview.Config(s.node.FSM), nil
}

// DefaultTopWindow is the window of the live view.
const DefaultTopWindow = 60 * time.Second

// Top returns the live view of fair shares.
func (s *AdminService) Top(ctx context.Context, req *pb.TopRequest) (*pb.TopResponse, error) {
	window := time.Duration(req.WindowMs) * time.Millisecond
	if window == 0 {
		window = DefaultTopWindow
	}
	if window < 0 || window > 24*time.Hour {
		return nil, fieldErr(codes.InvalidArgument, "window_ms", "%d, want 1 ms .. 24 h", req.WindowMs)
	}
	fwd := &pb.TopRequest{WindowMs: req.WindowMs}
	return read(ctx, &s.base, req.Read, func(ctx context.Context, cc *grpc.ClientConn) (*pb.TopResponse, error) {
		return pb.NewAdminClient(cc).Top(ctx, fwd)
	}, func() (*pb.TopResponse, error) { return topView(&s.base, window), nil })
}

// topView computes the live view from this node's state.
func topView(b *base, window time.Duration) *pb.TopResponse {
	rows, clock, since := b.node.FSM.Top(sfq.Time(window.Milliseconds()))
	leader, _ := b.node.Leader()
	out := &pb.TopResponse{LeaderId: leader, AppliedIndex: b.node.Raft().AppliedIndex(), ClusterTimeMs: int64(clock), WindowMs: window.Milliseconds(),
		FairnessSinceMs: int64(since)}
	for i := range rows {
		r := &rows[i]
		ts := &pb.TenantShare{Name: r.Name, Tier: fsm.TierToPB(r.Tier), Weight: float64(r.Weight) / float64(sfq.WeightOne), Queued: r.Queued,
			Running: r.Running, Dispatches: r.Dispatches, DispatchedCostMs: r.DispatchedCostMs, JobClass: fsm.ClassToPB(r.Class),
			Eligible: r.Fair.Eligible, LagCpuMs: r.Fair.LagCPUMs, Pool: r.Pool}
		if ts.Pool == "" {
			ts.Pool = sfq.DefaultPoolName
		}
		if r.Fair.Name != "" { // the tenant is active in the class
			for g, w := range fairness.Windows {
				ts.Windows = append(ts.Windows, apiview.FairWindow(w.Name, r.Fair.Windows[g]))
			}
			ts.Share, ts.EntitledShare = ts.Windows[0].GetShare(), ts.Windows[0].GetEntitled()
		}
		out.Tenants = append(out.Tenants, ts)
	}
	// The groups of each tenant that has named ones, those with the most
	// queued jobs first, and what it holds of each resource, on the
	// tenant's first line; and every resource.
	b.node.FSM.Read(func(sc *sfq.Scheduler) {
		for i, row := range out.Tenants {
			if t, ok := sc.Tenant(row.Name); ok {
				row.Paused = apiview.Paused(t.PausedBy())
				if !t.Rate.None() {
					row.Rate = fmt.Sprintf("%s burst %d", apiview.Rate(t.Rate), t.Rate.BurstOf())
				}
			}
			if row.Pool != sfq.DefaultPoolName {
				// The tenant's weight in that pool (its weights and its
				// usage there).
				if l, ok := sc.Lane(row.Name, row.Pool); ok {
					row.Weight = float64(sc.Weight(&l, clock)) / float64(sfq.WeightOne)
				}
			}
			if i > 0 && out.Tenants[i-1].Name == row.Name {
				continue
			}
			if t, ok := sc.Tenant(row.Name); ok && t.Groups > 0 {
				gs, _ := sc.TopGroups(row.Name, topGroupsPerTenant)
				row.Groups = apiview.GroupUsage(&t, gs)
			}
			if o, ok := sc.TenantIndex(row.Name); ok && sc.ResourceCount() > 0 {
				row.Resources = apiview.TenantResources(sc.TenantResources(o))
			}
		}
		for _, name := range sc.ResourceNames() {
			out.Resources = append(out.Resources, resourceOf(sc, name))
		}
	})
	out.Pools = b.readPools()
	out.FairnessErrors = apiview.FairnessErrors(b.node.FSM.FairnessErrors(fsm.DefaultErrorWindow))
	return out
}

// topGroupsPerTenant is how many groups of a tenant the live view lists.
const topGroupsPerTenant = 5
