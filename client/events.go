package client

import (
	"context"
	"errors"
	"iter"
	"time"

	pb "github.com/baristahq/barista/proto"
)

// Event is one change of a job (or, for EventPaused and EventResumed
// with JobID 0, of a tenant or group), in Go types.
type Event struct {
	Seq     uint64 // its place in the tenant's events, rising
	JobID   uint64 // 0 for a tenant-level event (paused, resumed)
	Tenant  string
	Attempt int // the job's dispatches when it happened
	Kind    EventKind
	Reason  EventReason // "": none
	// At is when it happened, by the leader's wall clock.
	At       time.Time
	Worker   string        // assigned, started and the ends of a run
	CPU      time.Duration // the run's CPU, on its end
	ExitCode int           // the run's exit code, on its end
	Group    string        // paused, resumed: the group ("": the whole tenant)
	Pool     string        // the job's pool ("" on tenant-level events)
}

// EventFromProto converts an event as the cluster sends it.
func EventFromProto(ev *pb.Event) *Event {
	out := &Event{Seq: ev.Seq, JobID: ev.JobId, Tenant: ev.Tenant, Attempt: int(ev.Attempt), Kind: EventKind(ev.Kind),
		Reason: EventReason(ev.Reason), Worker: ev.WorkerId, CPU: time.Duration(ev.CpuMs) * time.Millisecond,
		ExitCode: int(ev.ExitCode), Group: ev.Group, Pool: ev.Pool}
	if ev.WallMs != 0 {
		out.At = time.UnixMilli(ev.WallMs)
	}
	return out
}

// WatchOpts choose the events EventWatch yields. The zero value follows
// the caller's tenant from its next new event on, for as long as the
// loop runs.
type WatchOpts struct {
	// Tenant whose events to follow ("": a client token's own; an admin
	// token names one, or "" for every tenant's).
	Tenant string
	// JobID, if not 0, yields only that job's events, and ends after its
	// last (the job ended).
	JobID uint64
	// From is the Seq of the first event to yield (0: the next new
	// event); FromOldest starts at the oldest event the cluster still
	// keeps instead. A From older than that fails (ErrOutOfRange).
	From       uint64
	FromOldest bool
	// UntilIdle ends the watch once every event so far is yielded and the
	// tenant has nothing queued or running, nor a job scheduled to run
	// again.
	UntilIdle bool
}

// errStopWatch ends a watch whose loop stopped.
var errStopWatch = errors.New("the loop stopped")

// EventWatch yields the events opts choose, in order, following them
// across failures as Raw().Watch does: when a stream breaks it resumes
// after the last event yielded, on another node if need be, so that the
// loop sees every event once, with no gap. It ends when the loop stops;
// when the events end by themselves (opts.JobID's job ended, or the
// tenant is idle with opts.UntilIdle); or with a failure, yielded once
// with a nil event: the context's error when ctx ends, or an *Error the
// cluster answered that no retry clears (ErrPermissionDenied,
// ErrNotFound, ErrOutOfRange ...).
//
//	for ev, err := range c.EventWatch(ctx, client.WatchOpts{JobID: id, FromOldest: true}) {
//		if err != nil {
//			return err
//		}
//		log.Printf("job %d: %s %s", ev.JobID, ev.Kind, ev.Reason)
//	}
func (c *Client) EventWatch(ctx context.Context, opts WatchOpts) iter.Seq2[*Event, error] {
	return func(yield func(*Event, error) bool) {
		req := &pb.WatchEventsRequest{Tenant: opts.Tenant, FromSeq: opts.From, FromOldest: opts.FromOldest, JobId: opts.JobID, UntilIdle: opts.UntilIdle}
		err := c.Watch(ctx, req, func(ev *pb.Event) error {
			if !yield(EventFromProto(ev), nil) {
				return errStopWatch
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStopWatch) {
			yield(nil, err)
		}
	}
}
