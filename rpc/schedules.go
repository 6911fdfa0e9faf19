package rpc

import (
	"context"

	"google.golang.org/grpc"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/apiview"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// The schedules of a tenant (fsm/schedule.go; commands and views:
// internal/apiview; the leader's fires: package schedule). Each call's
// request names the tenant it acts on (scopeTenant) before it is
// forwarded.

// SetSchedule creates or replaces a schedule.
func (s *ClientService) SetSchedule(ctx context.Context, req *pb.SetScheduleRequest) (*pb.Schedule, error) {
	if err := scope(ctx, &req.Tenant); err != nil {
		return nil, err
	}
	cmd, r := apiview.ScheduleSet(req.Tenant, req)
	if r != nil {
		return nil, refusalErr(r)
	}
	return scheduleWrite(ctx, s, cmd, pb.ClientClient.SetSchedule, req, s.viewAfter(req.Tenant, req.Name))
}

// PauseSchedule pauses or resumes a schedule.
func (s *ClientService) PauseSchedule(ctx context.Context, req *pb.PauseScheduleRequest) (*pb.Schedule, error) {
	if err := scope(ctx, &req.Tenant); err != nil {
		return nil, err
	}
	c := &clusterpb.SchedulePause{Tenant: req.Tenant, Name: req.Name, Resume: req.Resume}
	return scheduleWrite(ctx, s, &clusterpb.Command{Cmd: &clusterpb.Command_SchedulePause{SchedulePause: c}}, pb.ClientClient.PauseSchedule, req,
		s.viewAfter(req.Tenant, req.Name))
}

// RunScheduleNow fires a schedule once, now (without a key, one made
// here: a resend of the call fires again).
func (s *ClientService) RunScheduleNow(ctx context.Context, req *pb.RunScheduleNowRequest) (*pb.RunScheduleNowResponse, error) {
	if err := scope(ctx, &req.Tenant); err != nil {
		return nil, err
	}
	req.Key = apiview.RunKey(req.Key)
	c := &clusterpb.ScheduleRunNow{Tenant: req.Tenant, Name: req.Name, Key: req.Key}
	return scheduleWrite(ctx, s, &clusterpb.Command{Cmd: &clusterpb.Command_ScheduleRunNow{ScheduleRunNow: c}}, pb.ClientClient.RunScheduleNow, req,
		func(r fsm.Result) (*pb.RunScheduleNowResponse, error) {
			return &pb.RunScheduleNowResponse{JobId: uint64(r.Job), Created: r.Outcome != sfq.Duplicate, Key: req.Key}, nil
		})
}

// DeleteSchedule deletes a schedule.
func (s *ClientService) DeleteSchedule(ctx context.Context, req *pb.DeleteScheduleRequest) (*pb.DeleteScheduleResponse, error) {
	if err := scope(ctx, &req.Tenant); err != nil {
		return nil, err
	}
	c := &clusterpb.ScheduleDelete{Tenant: req.Tenant, Name: req.Name}
	return scheduleWrite(ctx, s, &clusterpb.Command{Cmd: &clusterpb.Command_ScheduleDelete{ScheduleDelete: c}}, pb.ClientClient.DeleteSchedule, req,
		func(fsm.Result) (*pb.DeleteScheduleResponse, error) {
			return &pb.DeleteScheduleResponse{Deleted: true}, nil
		})
}

// GetSchedule returns one schedule with its next slots.
func (s *ClientService) GetSchedule(ctx context.Context, req *pb.GetScheduleRequest) (*pb.Schedule, error) {
	if err := scope(ctx, &req.Tenant); err != nil {
		return nil, err
	}
	return read(ctx, &s.base, req.Read, remote(pb.ClientClient.GetSchedule, req), func() (*pb.Schedule, error) {
		return refused(apiview.ScheduleOf(s.node.FSM, req.Tenant, req.Name, req.Next, s.clockNow()))
	})
}

// ListSchedules pages through a tenant's schedules by name.
func (s *ClientService) ListSchedules(ctx context.Context, req *pb.ListSchedulesRequest) (*pb.ListSchedulesResponse, error) {
	if err := scope(ctx, &req.Tenant); err != nil {
		return nil, err
	}
	return read(ctx, &s.base, req.Read, remote(pb.ClientClient.ListSchedules, req), func() (*pb.ListSchedulesResponse, error) {
		return refused(apiview.SchedulePage(s.node.FSM, req.Tenant, req, s.clockNow()))
	})
}

// scope names in *tenant the tenant the call acts on (scopeTenant).
func scope(ctx context.Context, tenant *string) (err error) {
	*tenant, err = scopeTenant(ctx, *tenant, true)
	return err
}

// remote is the forward of a call of the client service with req.
func remote[Q, T any](method func(pb.ClientClient, context.Context, Q, ...grpc.CallOption) (T, error), req Q) func(context.Context, *grpc.ClientConn) (T, error) {
	return func(ctx context.Context, cc *grpc.ClientConn) (T, error) {
		return method(pb.NewClientClient(cc), ctx, req)
	}
}

// scheduleWrite proposes cmd (a follower forwards the call) and answers
// from its result.
func scheduleWrite[Q, T any](ctx context.Context, s *ClientService, cmd *clusterpb.Command, method func(pb.ClientClient, context.Context, Q, ...grpc.CallOption) (T, error),
	req Q, answer func(fsm.Result) (T, error)) (T, error) {
	res, resp, done, err := write(ctx, &s.base, cmd, remote(method, req))
	if done {
		return resp, err
	}
	return answer(res)
}

// viewAfter answers a write with tenant's schedule name as it then stands.
func (s *ClientService) viewAfter(tenant, name string) func(fsm.Result) (*pb.Schedule, error) {
	return func(fsm.Result) (*pb.Schedule, error) {
		return refused(apiview.ScheduleOf(s.node.FSM, tenant, name, 0, s.clockNow()))
	}
}

// refused answers a view, or its refusal as a status.
func refused[T any](v T, r *sfq.Refusal) (T, error) {
	if r != nil {
		return v, refusalErr(r)
	}
	return v, nil
}
