package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"iter"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/baristahq/barista/proto"
)

// ScheduleList (SPEC §3 "Schedules", feature level 8; docs/schedules.md):
// a tenant's periodic jobs, fired by the cluster's leader in cluster time,
// exactly once per slot across any failover.

// The calls of the wire (Client.Raw), as the CLI makes them.

// ScheduleSet creates or replaces a schedule; typed: ScheduleSet.
func (r Raw) SetSchedule(ctx context.Context, req *pb.SetScheduleRequest) (*pb.Schedule, error) {
	return unary(ctx, r.c, req, pb.ClientClient.SetSchedule)
}

// ScheduleGet reads one schedule with its next slots; typed: ScheduleGet.
func (r Raw) GetSchedule(ctx context.Context, req *pb.GetScheduleRequest) (*pb.Schedule, error) {
	return unary(ctx, r.c, req, pb.ClientClient.GetSchedule)
}

// ScheduleList pages through a tenant's schedules by name (ListSchedules):
// every page, as one sequence; typed: ScheduleList.
func (r Raw) Schedules(ctx context.Context, req *pb.ListSchedulesRequest) iter.Seq2[*pb.Schedule, error] {
	return func(yield func(*pb.Schedule, error) bool) {
		page := proto.Clone(req).(*pb.ListSchedulesRequest)
		for {
			resp, err := unary(ctx, r.c, page, pb.ClientClient.ListSchedules)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, s := range resp.Schedules {
				if !yield(s, nil) {
					return
				}
			}
			if resp.NextPageToken == "" {
				return
			}
			page.PageToken = resp.NextPageToken
		}
	}
}

// SchedulePause pauses (with Resume, resumes) a schedule; typed:
// SchedulePause and ScheduleResume.
func (r Raw) PauseSchedule(ctx context.Context, req *pb.PauseScheduleRequest) (*pb.Schedule, error) {
	return unary(ctx, r.c, req, pb.ClientClient.PauseSchedule)
}

// ScheduleRunNow fires a schedule once, now. With a key it may be
// retried: the same key fires once. Typed: ScheduleRunNow.
func (r Raw) RunScheduleNow(ctx context.Context, req *pb.RunScheduleNowRequest) (*pb.RunScheduleNowResponse, error) {
	return unary(ctx, r.c, req, pb.ClientClient.RunScheduleNow)
}

// ScheduleDelete deletes a schedule (its jobs stay); typed: ScheduleDelete.
func (r Raw) DeleteSchedule(ctx context.Context, req *pb.DeleteScheduleRequest) (*pb.DeleteScheduleResponse, error) {
	return unary(ctx, r.c, req, pb.ClientClient.DeleteSchedule)
}

// Overlap says what a fire does while the schedule's previous job has not
// ended; "" is OverlapSkip.
type Overlap string

// The overlap policies.
const (
	// OverlapSkip: no fire while a job of the schedule is waiting or
	// running (the slot is counted skipped).
	OverlapSkip Overlap = "skip"
	// OverlapBufferOne: no fire while a job of the schedule waits to
	// start; one may wait while another runs.
	OverlapBufferOne Overlap = "buffer_one"
	// OverlapAllow: every slot fires.
	OverlapAllow Overlap = "allow"
)

// ScheduleOpts are the options of a schedule. The zero value is a
// schedule in UTC that skips a slot while its previous job lives, fires
// a slot up to 60 s late after a time without a leader, with no jitter,
// and submits the job with InsertOpts' defaults.
type ScheduleOpts struct {
	// Tenant is the schedule's tenant: empty for a client token's own.
	Tenant string
	// Zone is the IANA time zone of a cron spec's fields ("": UTC).
	Zone string
	// Overlap is the overlap policy ("": OverlapSkip).
	Overlap Overlap
	// CatchUp is how far behind cluster time a slot still fires after no
	// leader could fire it (0: 60 s); older slots are counted missed.
	CatchUp time.Duration
	// Jitter spreads the fires: slot T fires at T plus a fixed share of
	// Jitter, the same for that slot on every node.
	Jitter time.Duration
	// Paused makes (or keeps) the schedule paused.
	Paused bool
	// Job are the options of each job it submits (its Tenant and Key are
	// the schedule's; its Deadline is not taken: DeadlineAfter is).
	Job InsertOpts
	// DeadlineAfter gives each job a deadline that long after its fire
	// (0: none).
	DeadlineAfter time.Duration
}

// Schedule is a schedule as the cluster holds it, in Go types: times are
// wall times, by the answer's clock.
type Schedule struct {
	Tenant, Name, Spec, Zone string
	Overlap                  Overlap
	CatchUp, Jitter          time.Duration
	Paused                   bool
	// Kind and Payload are the job's (the JSON of its arguments for a
	// schedule of JobArgs: UnmarshalArgs reads them).
	Kind    string
	Payload []byte
	Version uint64
	// LastSlot is the newest slot spent (zero: none yet); NextSlots the
	// next slots, NextFire when the first is fired (with its jitter).
	LastSlot  time.Time
	NextSlots []time.Time
	NextFire  time.Time
	// Fired, Skipped, Missed and Refused count its slots: fired (a job
	// submitted; run-nows too), skipped by the overlap policy, missed
	// (further behind than CatchUp), and refused (the submit was, e.g. by
	// the tenant's quota).
	Fired, Skipped, Missed, Refused uint64
	LastJob                         uint64
	LiveJobs                        []uint64
	// SpecError says why the node that answered cannot compute its slots
	// ("": it can).
	SpecError string
	Proto     *pb.Schedule // as the cluster sent it
}

// UnmarshalArgs decodes the schedule's job arguments into args.
func (s *Schedule) UnmarshalArgs(args JobArgs) error {
	return (&Job{Payload: s.Payload}).UnmarshalArgs(args)
}

// ScheduleFromProto converts a schedule as the cluster sends it.
func ScheduleFromProto(s *pb.Schedule) *Schedule {
	wall := func(ms int64) time.Time {
		if ms == 0 {
			return time.Time{}
		}
		t, _ := WallAt(s.GetNow(), ms)
		return t
	}
	out := &Schedule{Tenant: s.Tenant, Name: s.Name, Spec: s.Spec, Zone: s.Zone, Overlap: overlapOf(s.Overlap),
		CatchUp: time.Duration(s.CatchupMs) * time.Millisecond, Jitter: time.Duration(s.JitterMs) * time.Millisecond, Paused: s.Paused,
		Kind: s.GetJob().GetJobType(), Payload: s.GetJob().GetPayload(), Version: s.Version, LastSlot: wall(s.LastSlotMs), NextFire: wall(s.NextFireMs),
		Fired: s.Fired, Skipped: s.Skipped, Missed: s.Missed, Refused: s.Refused, LastJob: s.LastJobId, LiveJobs: s.LiveJobIds,
		SpecError: s.SpecError, Proto: s}
	for _, t := range s.NextSlotsMs {
		out.NextSlots = append(out.NextSlots, wall(t))
	}
	return out
}

func overlapOf(o pb.Overlap) Overlap {
	switch o {
	case pb.Overlap_OVERLAP_BUFFER_ONE:
		return OverlapBufferOne
	case pb.Overlap_OVERLAP_ALLOW:
		return OverlapAllow
	}
	return OverlapSkip
}

func overlapToPB(o Overlap) (pb.Overlap, error) {
	switch o {
	case "", OverlapSkip:
		return pb.Overlap_OVERLAP_SKIP, nil
	case OverlapBufferOne:
		return pb.Overlap_OVERLAP_BUFFER_ONE, nil
	case OverlapAllow:
		return pb.Overlap_OVERLAP_ALLOW, nil
	}
	return 0, invalidArg(fmt.Sprintf("overlap: %q (want skip, buffer_one or allow)", o))
}

// ScheduleSet creates or replaces the schedule name: at each slot of spec
// (five cron fields, minute hour day-of-month month day-of-week, in
// opts.Zone; a macro such as "@daily"; or "@every D", at the multiples of
// D since the Unix epoch) it submits a function job of kind args.Kind()
// with args as its JSON payload, as Insert would, under the tenant's
// quotas and fair share, with the key schedule/NAME/SLOT. A change takes
// effect for the slots after it.
func (c *Client) ScheduleSet(ctx context.Context, name, spec string, args JobArgs, opts *ScheduleOpts) (*Schedule, error) {
	if opts == nil {
		opts = &ScheduleOpts{}
	}
	if opts.Job.Key != "" || !opts.Job.Deadline.IsZero() {
		return nil, invalidArg("job: a schedule's job takes its key from the schedule, and a deadline as DeadlineAfter")
	}
	job, err := submitRequest(args, &opts.Job, time.Now())
	if err != nil {
		return nil, err
	}
	job.Tenant, job.DeadlineMs = "", opts.DeadlineAfter.Milliseconds()
	overlap, err := overlapToPB(opts.Overlap)
	if err != nil {
		return nil, err
	}
	req := &pb.SetScheduleRequest{Tenant: opts.Tenant, Name: name, Spec: spec, Zone: opts.Zone, Overlap: overlap,
		JitterMs: opts.Jitter.Milliseconds(), Paused: opts.Paused, Job: job}
	if opts.CatchUp != 0 {
		req.CatchupMs = proto.Int64(opts.CatchUp.Milliseconds())
	}
	s, err := c.Raw().SetSchedule(ctx, req)
	if err != nil {
		return nil, err
	}
	return ScheduleFromProto(s), nil
}

// ScheduleGet reads tenant's schedule name ("" tenant: a client token's
// own) with its next five slots.
func (c *Client) ScheduleGet(ctx context.Context, tenant, name string) (*Schedule, error) {
	s, err := c.Raw().GetSchedule(ctx, &pb.GetScheduleRequest{Tenant: tenant, Name: name})
	if err != nil {
		return nil, err
	}
	return ScheduleFromProto(s), nil
}

// ScheduleList lists tenant's schedules by name, each with its next slot.
func (c *Client) ScheduleList(ctx context.Context, tenant string) ([]*Schedule, error) {
	var out []*Schedule
	for s, err := range c.Raw().Schedules(ctx, &pb.ListSchedulesRequest{Tenant: tenant}) {
		if err != nil {
			return nil, err
		}
		out = append(out, ScheduleFromProto(s))
	}
	return out, nil
}

// SchedulePause pauses a schedule: no slot fires, and none is counted
// missed, until ScheduleResume, after which the slots after the resume
// fire.
func (c *Client) SchedulePause(ctx context.Context, tenant, name string) (*Schedule, error) {
	return c.schedulePause(ctx, tenant, name, false)
}

// ScheduleResume resumes a paused schedule.
func (c *Client) ScheduleResume(ctx context.Context, tenant, name string) (*Schedule, error) {
	return c.schedulePause(ctx, tenant, name, true)
}

func (c *Client) schedulePause(ctx context.Context, tenant, name string, resume bool) (*Schedule, error) {
	s, err := c.Raw().PauseSchedule(ctx, &pb.PauseScheduleRequest{Tenant: tenant, Name: name, Resume: resume})
	if err != nil {
		return nil, err
	}
	return ScheduleFromProto(s), nil
}

// ScheduleRunNow fires a schedule once, now, whatever its spec, pause and
// overlap policy, and returns the job it submitted. key ("": one made
// here) makes the call safe to retry: the same key fires once, and a
// second call with it returns the same job with Duplicate set.
func (c *Client) ScheduleRunNow(ctx context.Context, tenant, name, key string) (*InsertResult, error) {
	if key == "" {
		var b [8]byte
		_, _ = rand.Read(b[:]) // crypto/rand never fails
		key = hex.EncodeToString(b[:])
	}
	resp, err := c.Raw().RunScheduleNow(ctx, &pb.RunScheduleNowRequest{Tenant: tenant, Name: name, Key: key})
	if err != nil {
		return nil, err
	}
	job, err := c.JobGet(ctx, tenant, resp.JobId)
	if err != nil {
		return nil, fmt.Errorf("schedule %s fired job %d, but reading it back failed: %w", name, resp.JobId, err)
	}
	return &InsertResult{Job: job, Duplicate: !resp.Created}, nil
}

// ScheduleDelete deletes a schedule; the jobs it fired stay.
func (c *Client) ScheduleDelete(ctx context.Context, tenant, name string) error {
	_, err := c.Raw().DeleteSchedule(ctx, &pb.DeleteScheduleRequest{Tenant: tenant, Name: name})
	return err
}
