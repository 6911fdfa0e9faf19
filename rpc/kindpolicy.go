package rpc

import (
	"context"

	"google.golang.org/grpc/codes"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/auth"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// everyTenant names, in the API, the retry policies of kinds of every
// tenant.
const everyTenant = "*"

// scopePolicyTenant is the tenant a call about retry policies of kinds
// names: "*" (every tenant, an admin token only) as "", with every, or a
// tenant (scopeTenant).
func scopePolicyTenant(ctx context.Context, named string) (tenant string, every bool, err error) {
	if named == everyTenant {
		if IdentityFrom(ctx).Role != auth.RoleAdmin {
			return "", false, fieldErr(codes.PermissionDenied, "tenant", "the retry policies of every tenant (\"*\") need an admin token")
		}
		return "", true, nil
	}
	tenant, err = scopeTenant(ctx, named, true)
	return tenant, false, err
}

// SetKindPolicy sets or removes the retry policy of a kind (fsm/kinds.go).
func (s *ClientService) SetKindPolicy(ctx context.Context, req *pb.SetKindPolicyRequest) (*pb.KindPolicy, error) {
	tenant, every, err := scopePolicyTenant(ctx, req.Tenant)
	if err != nil {
		return nil, err
	}
	cmd := &clusterpb.Command{Cmd: &clusterpb.Command_KindPolicySet{KindPolicySet: &clusterpb.KindPolicySet{Tenant: tenant, Kind: req.Kind, Remove: req.Remove,
		MaxAttempts: req.MaxAttempts, RetryBackoffMs: req.RetryBackoffMs, RetryBackoffMaxMs: req.RetryBackoffMaxMs, TimeoutMs: req.TimeoutMs}}}
	fwd := &pb.SetKindPolicyRequest{Tenant: req.Tenant, Kind: req.Kind, Remove: req.Remove, MaxAttempts: req.MaxAttempts,
		RetryBackoffMs: req.RetryBackoffMs, RetryBackoffMaxMs: req.RetryBackoffMaxMs, TimeoutMs: req.TimeoutMs}
	if !every {
		fwd.Tenant = tenant
	}
	if _, resp, done, err := write(ctx, &s.base, cmd, remote(pb.ClientClient.SetKindPolicy, fwd)); done {
		return resp, err
	}
	for _, p := range s.node.FSM.KindPolicies(tenant, false) {
		if p.Kind == req.Kind {
			return kindPolicyToPB(&p), nil
		}
	}
	return &pb.KindPolicy{Tenant: fwd.Tenant, Kind: req.Kind}, nil // removed
}

// ListKindPolicies lists a tenant's retry policies of kinds and every
// tenant's.
func (s *ClientService) ListKindPolicies(ctx context.Context, req *pb.ListKindPoliciesRequest) (*pb.ListKindPoliciesResponse, error) {
	tenant, every, err := scopePolicyTenant(ctx, req.Tenant)
	if err != nil {
		return nil, err
	}
	fwd := &pb.ListKindPoliciesRequest{Tenant: req.Tenant}
	if !every {
		fwd.Tenant = tenant
	}
	return read(ctx, &s.base, nil, remote(pb.ClientClient.ListKindPolicies, fwd), func() (*pb.ListKindPoliciesResponse, error) {
		known := every
		s.node.FSM.Read(func(sc *sfq.Scheduler) { _, known = sc.TenantIndex(tenant) })
		if !every && !known {
			return nil, tenantNotFound(tenant)
		}
		out := &pb.ListKindPoliciesResponse{}
		for _, p := range s.node.FSM.KindPolicies(tenant, !every) {
			out.Policies = append(out.Policies, kindPolicyToPB(&p))
		}
		return out, nil
	})
}

func kindPolicyToPB(p *fsm.NamedKindPolicy) *pb.KindPolicy {
	out := &pb.KindPolicy{Tenant: p.TenantName, Kind: p.Kind, MaxAttempts: p.MaxAttempts, RetryBackoffMaxMs: p.RetryBackoffMaxMs, TimeoutMs: p.TimeoutMs}
	if out.Tenant == "" {
		out.Tenant = everyTenant
	}
	if p.RetryBackoffMs >= 0 {
		out.RetryBackoffMs = &p.RetryBackoffMs
	}
	return out
}
