package rpc

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/internal/apiview"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// Resources at the edge (SPEC §3 "Resources", feature level 8): the admin
// calls on resources. Their checks are Apply's (fsm.CheckFields,
// fsm.FSM.Admit), with the field named.

// readResource returns the resource named name in this node's state, or
// nil.
func (b *base) readResource(name string) *pb.Resource {
	var out *pb.Resource
	b.node.FSM.Read(func(sc *sfq.Scheduler) { out = resourceOf(sc, name) })
	if out != nil {
		out.Now = b.clockNow()
	}
	return out
}

// resourceOf is the resource named name of sc as the API shows it (nil:
// none).
func resourceOf(sc *sfq.Scheduler, name string) *pb.Resource {
	info, ok := sc.Resource(name)
	if !ok {
		return nil
	}
	return apiview.Resource(&info, func(tenant string) uint32 {
		o, ok := sc.TenantIndex(tenant)
		if !ok {
			return 0
		}
		held, _, _ := sc.TenantHeld(o, name)
		return held
	})
}

// ResourceSet declares or changes a resource, or a tenant's own limit on
// one.
func (s *AdminService) ResourceSet(ctx context.Context, req *pb.ResourceSetRequest) (*pb.Resource, error) {
	cmd := &clusterpb.Command{Cmd: &clusterpb.Command_ResourceSet{ResourceSet: &clusterpb.ResourceSet{Name: req.Name, Capacity: req.Capacity,
		TenantMax: req.TenantMax, Tenant: req.Tenant, Max: req.Max}}}
	res, resp, done, err := write(ctx, &s.base, cmd, func(ctx context.Context, cc *grpc.ClientConn) (*pb.Resource, error) {
		return pb.NewAdminClient(cc).ResourceSet(ctx, req)
	})
	if done {
		return resp, err
	}
	out := s.readResource(req.Name)
	if out == nil {
		return nil, status.Errorf(codes.Internal, "resource %q vanished after it was set", req.Name)
	}
	out.Created = res.Created
	return out, nil
}

// ResourceGet returns one resource.
func (s *AdminService) ResourceGet(ctx context.Context, req *pb.ResourceGetRequest) (*pb.Resource, error) {
	if err := sfq.ValidateResourceName(req.Name); err != nil {
		return nil, fieldErr(codes.InvalidArgument, "name", "%v", err)
	}
	fwd := &pb.ResourceGetRequest{Name: req.Name}
	return read(ctx, &s.base, req.Read, func(ctx context.Context, cc *grpc.ClientConn) (*pb.Resource, error) {
		return pb.NewAdminClient(cc).ResourceGet(ctx, fwd)
	}, func() (*pb.Resource, error) {
		if out := s.readResource(req.Name); out != nil {
			return out, nil
		}
		return nil, refusalErr(sfq.RefusalOf(sfq.UnknownResource(req.Name)))
	})
}

// ResourceList lists every resource by name.
func (s *AdminService) ResourceList(ctx context.Context, req *pb.ResourceListRequest) (*pb.ResourceListResponse, error) {
	return read(ctx, &s.base, req.Read, func(ctx context.Context, cc *grpc.ClientConn) (*pb.ResourceListResponse, error) {
		return pb.NewAdminClient(cc).ResourceList(ctx, &pb.ResourceListRequest{})
	}, func() (*pb.ResourceListResponse, error) {
		out := &pb.ResourceListResponse{}
		s.node.FSM.Read(func(sc *sfq.Scheduler) {
			for _, name := range sc.ResourceNames() {
				out.Resources = append(out.Resources, resourceOf(sc, name))
			}
		})
		now := s.clockNow()
		for _, r := range out.Resources {
			r.Now = now
		}
		return out, nil
	})
}

// ResourceDelete deletes a resource no unfinished job uses.
func (s *AdminService) ResourceDelete(ctx context.Context, req *pb.ResourceDeleteRequest) (*pb.ResourceDeleteResponse, error) {
	cmd := &clusterpb.Command{Cmd: &clusterpb.Command_ResourceDelete{ResourceDelete: &clusterpb.ResourceDelete{Name: req.Name}}}
	_, resp, done, err := write(ctx, &s.base, cmd, func(ctx context.Context, cc *grpc.ClientConn) (*pb.ResourceDeleteResponse, error) {
		return pb.NewAdminClient(cc).ResourceDelete(ctx, req)
	})
	if done {
		return resp, err
	}
	return &pb.ResourceDeleteResponse{}, nil
}
