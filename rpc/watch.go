package rpc

import (
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/connlimit"
	"github.com/baristahq/barista/internal/watchlimit"
	"github.com/baristahq/barista/internal/wire"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
)

// The client service's watch of a tenant's events.

// EventToPB converts an event of tenant.
func EventToPB(ev *fsm.Event, tenant string) *pb.Event {
	out := &pb.Event{Seq: ev.Seq, JobId: uint64(ev.Job), Tenant: tenant, Attempt: ev.Attempt, Kind: ev.Kind.String(),
		AtMs: int64(ev.At), WallMs: int64(ev.Wall()), WorkerId: ev.Worker, CpuMs: ev.CPUMs, ExitCode: int32(ev.ExitCode)}
	switch {
	case ev.Kind.TenantLevel():
		out.WorkerId, out.Group = "", eventGroup(ev)
	case ev.Kind.ScheduleEvent():
		out.WorkerId, out.CpuMs, out.Attempt = "", 0, 0
		out.Schedule, out.SlotMs, out.Slots = ev.Worker, ev.CPUMs, uint64(ev.Attempt)
	default:
		out.Pool = ev.PoolLabel()
	}
	if ev.Reason != fsm.ReasonNone {
		out.Reason = ev.Reason.String()
	}
	return out
}

// WatchEvents streams the tenant's events from this node's state, in
// order, waiting for new ones; the stream ends only with the caller.
func (s *ClientService) WatchEvents(req *pb.WatchEventsRequest, stream grpc.ServerStreamingServer[pb.Event]) error {
	ctx := stream.Context()
	tenant, err := scopeTenant(ctx, req.Tenant, false)
	if err != nil {
		return err
	}
	release, err := s.watches.Acquire(IdentityFrom(ctx))
	if err != nil {
		return err
	}
	var stuck connlimit.Conn // set when the watch falls behind
	defer func() { release(stuck) }()
	// The job or tenant may be a write the caller just made through
	// another node: this node reads its own state once it has applied it.
	if err := s.catchUp(ctx, true); err != nil {
		return err
	}
	f := s.node.FSM
	var ti uint32
	var ok bool
	if tenant != "" {
		f.Read(func(sc *sfq.Scheduler) { ti, ok = sc.TenantIndex(tenant) })
		if !ok {
			return tenantNotFound(tenant)
		}
	}
	if req.JobId != 0 {
		f.Read(func(sc *sfq.Scheduler) { _, ok = sc.TenantJob(tenant, sfq.JobID(req.JobId)) })
		if !ok {
			return status.Errorf(codes.NotFound, "job %d not found", req.JobId)
		}
	}
	// A tenant's watch reads its kept events too (those the cluster's
	// count pruned from the log: fsm.TenantEvents); an admin's watch of
	// every tenant, the log.
	read := f.Events
	if tenant != "" {
		read = func(from uint64, fn func(*fsm.Event) bool) (uint64, uint64) { return f.TenantEvents(ti, from, fn) }
	}
	cursor := req.FromSeq
	first, next := read(^uint64(0), func(*fsm.Event) bool { return false })
	switch {
	case req.FromOldest:
		cursor = first
	case cursor == 0:
		cursor = next
	case cursor < first:
		return fieldErr(codes.OutOfRange, "from_seq", "%d is older than the oldest retained event (%d)", cursor, first)
	}
	// The watch is accepted: headers now, not with the first event (the
	// HTTP/JSON stream answers 200 as soon as they arrive). They say where
	// the stream starts, so that a client whose stream breaks before an
	// event resumes there, not at a later "next new event".
	if err := stream.SendHeader(metadata.Pairs(wire.HeaderWatchCursor, strconv.FormatUint(cursor, 10),
		wire.HeaderWatchNext, strconv.FormatUint(next, 10))); err != nil {
		return err
	}
	out := watchlimit.StartSender(stream, cursor)
	defer func() {
		out.Abandon()
		if out.Behind() {
			stuck = s.watches.StuckConn(ctx)
		}
	}()
	for {
		changed := f.Changed()
		var events []fsm.Event
		last := cursor
		ending := false // the batch ends with a terminal event of the watched job
		// The callback runs under the state's read lock: it may not call
		// the FSM again (tenant names are looked up after).
		first, _ := read(cursor, func(ev *fsm.Event) bool {
			last = ev.Seq + 1
			if (tenant == "" || ev.Tenant == ti) && (req.JobId == 0 || uint64(ev.Job) == req.JobId) {
				events = append(events, *ev)
				ending = req.JobId != 0 && ev.Kind.Terminal()
			}
			return len(events) < watchBatch && !ending
		})
		if first > cursor {
			return fieldErr(codes.OutOfRange, "from_seq", "events from %d on were pruned before this watch read them (oldest retained: %d)", cursor, first)
		}
		ended := false
		batch := make([]*pb.Event, len(events))
		f.Read(func(sc *sfq.Scheduler) {
			if ending {
				// The watch ends at the job's current ending, not at an
				// earlier one it has left (a redrive).
				ended = finalEnd(sc, tenant, &events[len(events)-1])
			}
			for i := range events {
				name := tenant
				if name == "" {
					name = sc.TenantName(events[i].Tenant)
				}
				batch[i] = EventToPB(&events[i], name)
			}
		})
		if len(batch) > 0 {
			if err := s.watches.Send(ctx, out, batch); err != nil {
				return err
			}
		}
		if ended {
			return s.watches.Finish(ctx, out)
		}
		if last > cursor {
			cursor = last
			continue
		}
		// Caught up.
		if req.JobId != 0 || req.UntilIdle {
			done := false
			f.Read(func(sc *sfq.Scheduler) {
				if req.JobId != 0 {
					// Its terminal event was pruned before it was read.
					j, ok := sc.TenantJob(tenant, sfq.JobID(req.JobId))
					done = !ok || j.State.Terminal()
				} else {
					done = idle(sc, tenant)
				}
			})
			if done {
				return s.watches.Finish(ctx, out)
			}
		}
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-s.stopping:
			return status.Errorf(codes.Unavailable, "this node is shutting down; resume the watch on another node from seq %d", out.Next())
		case <-out.Done():
			return out.Err()
		case <-changed:
		}
	}
}

// finalEnd reports whether terminal event ev is its job's current ending:
// the job has ended (or is gone) in that state at that time. An ending
// the job left by a redrive is not.
func finalEnd(sc *sfq.Scheduler, tenant string, ev *fsm.Event) bool {
	j, ok := sc.TenantJob(tenant, ev.Job)
	return !ok || (j.State.Terminal() && j.State.String() == ev.Kind.String() && j.EndedAt == ev.At)
}

// watchBatch bounds the events a watch reads at once: with the batch
// its sender holds, what a watch whose client reads nothing keeps beside
// gRPC's own buffer.
const watchBatch = 128

// idle reports whether a tenant (every tenant, if none is named) has no
// queued or running job, nor one scheduled to run again (a failed run
// backing off before its retry, a snooze): what a person means by idle.
// A job that has never run and waits out the delay it was submitted with
// does not keep it busy.
func idle(sc *sfq.Scheduler, tenant string) bool {
	busy := false
	sc.Tenants(func(_ uint32, t *sfq.Tenant) bool {
		if (tenant == "" || t.Name == tenant) && !t.Deleted && (t.QueuedTotal() > 0 || t.Running > 0 || t.ScheduledAgain > 0) {
			busy = true
		}
		return !busy
	})
	return !busy
}
