package apiview

import (
	"crypto/rand"
	"encoding/hex"
	"strings"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/schedule"
	"github.com/baristahq/barista/sfq"
)

// The schedules (SPEC §3 "Schedules") as the API shows them.

// MaxNextSlots bounds the next slots a read computes of one schedule.
const MaxNextSlots = 100

// Schedule converts schedule s, with its next next slots as this build
// computes them (none while it is paused, or when the spec cannot be
// read here: SpecError says why) and the answering node's clock.
func Schedule(s *fsm.ScheduleInfo, next int, now *pb.ClockNow) *pb.Schedule {
	out := &pb.Schedule{Tenant: s.TenantName, Name: s.Name, Spec: s.Spec, Zone: s.Zone, Overlap: fsm.OverlapToPB(s.Overlap),
		CatchupMs: s.CatchupMs, JitterMs: s.JitterMs, Paused: s.Paused, Version: s.Version, SinceMs: int64(s.Since), LastSlotMs: int64(s.LastSlot),
		Fired: s.Fired, Skipped: s.Skipped, Missed: s.Missed, Refused: s.Refused, LastJobId: uint64(s.LastJob), CreatedAtMs: int64(s.Created), Now: now}
	if out.Zone == "" {
		out.Zone = "UTC"
	}
	for _, id := range s.Live {
		out.LiveJobIds = append(out.LiveJobIds, uint64(id))
	}
	if job, err := s.Template(); err == nil {
		out.Job = SubmitRequest(job)
	}
	spec, err := schedule.Parse(s.Spec, s.Zone)
	if err != nil {
		out.SpecError = err.Error()
		return out
	}
	if !s.Paused && next > 0 {
		out.NextSlotsMs = spec.Slots(int64(max(s.LastSlot, s.Since)), min(next, MaxNextSlots))
		if len(out.NextSlotsMs) > 0 {
			t := out.NextSlotsMs[0]
			out.NextFireMs = t + fsm.ScheduleJitter(s.TenantName, s.Name, sfq.Time(t), s.JitterMs)
		}
	}
	return out
}

// SubmitRequest is a schedule's job as the API writes a submit (no
// tenant, no key: the schedule's).
func SubmitRequest(j *clusterpb.SubmitJob) *pb.SubmitRequest {
	return &pb.SubmitRequest{JobType: j.JobType, Size: j.Size, EstCostMs: j.EstCostMs, Payload: j.Payload, MaxAttempts: j.MaxAttempts,
		TimeoutMs: j.TimeoutMs, Class: j.JobClass, DeadlineMs: j.DeadlineMs, Group: j.Group, DelayMs: j.DelayMs, ExpireMs: j.ExpireMs,
		RetryBackoffMs: j.RetryBackoffMs, Pool: j.Pool, Form: j.Form, Uses: j.Uses}
}

// SetSubmitJob fills job from a submit request of tenant.
func SetSubmitJob(job *clusterpb.SubmitJob, tenant string, req *pb.SubmitRequest) {
	job.Tenant, job.IdempotencyKey, job.JobType, job.Size = tenant, req.GetIdempotencyKey(), req.JobType, req.Size
	job.EstCostMs, job.Payload, job.MaxAttempts, job.TimeoutMs = req.EstCostMs, req.Payload, req.MaxAttempts, req.TimeoutMs
	job.JobClass, job.DeadlineMs, job.Group = req.Class, req.DeadlineMs, req.Group
	job.DelayMs, job.ExpireMs, job.RetryBackoffMs = req.DelayMs, req.ExpireMs, req.RetryBackoffMs
	job.Pool, job.Form, job.Uses = req.Pool, req.Form, req.Uses
}

// ReservedKey refuses a client's own idempotency key in the namespace of
// the jobs schedules fire (schedule/...), so that a job with such a key
// is always one a schedule fired (explain says which). The API checks
// it; Apply does not (a submit keeps the meaning it had before
// schedules).
func ReservedKey(key string) *fsm.Refusal {
	if strings.HasPrefix(key, fsm.ScheduleKeyPrefix) {
		return sfq.Refusef(sfq.CodeInvalid, "", "idempotency_key", "%q: keys beginning %q are kept for the jobs schedules fire", key, fsm.ScheduleKeyPrefix)
	}
	return nil
}

// ScheduleSet makes the command of a SetSchedule of tenant: its spec
// and zone read (what Apply does not), what only the wire can get wrong;
// Apply's own rules check the rest.
func ScheduleSet(tenant string, req *pb.SetScheduleRequest) (*clusterpb.Command, *fsm.Refusal) {
	if _, err := schedule.Parse(req.Spec, req.Zone); err != nil {
		return nil, sfq.RefusalOf(err)
	}
	if req.CatchupMs != nil && *req.CatchupMs == 0 {
		return nil, sfq.Refusef(sfq.CodeInvalid, "", "catchup_ms", "0 (at least 1 s; leave it out for the default, 60 s)")
	}
	c := &clusterpb.ScheduleSet{Tenant: tenant, Name: req.Name, Spec: req.Spec, Zone: req.Zone, Overlap: req.Overlap,
		CatchupMs: req.GetCatchupMs(), JitterMs: req.JitterMs, Paused: req.Paused}
	if req.Job != nil {
		c.Job = &clusterpb.SubmitJob{}
		SetSubmitJob(c.Job, req.Job.Tenant, req.Job)
	}
	return &clusterpb.Command{Cmd: &clusterpb.Command_ScheduleSet{ScheduleSet: c}}, nil
}

// ScheduleOf reads tenant's schedule name from f, with its next next
// slots (default 5).
func ScheduleOf(f *fsm.FSM, tenant, name string, next uint32, now *pb.ClockNow) (*pb.Schedule, *fsm.Refusal) {
	info, ok := f.GetSchedule(tenant, name)
	if !ok {
		return nil, sfq.Refusef(sfq.CodeNotFound, "", "name", "tenant %q has no schedule %q", tenant, name)
	}
	if next == 0 {
		next = 5
	}
	return Schedule(&info, int(next), now), nil
}

// SchedulePage reads a page of tenant's schedules from f, by name: at
// most page_size (default 100, at most 1000), each with its next next
// slots (default 1).
func SchedulePage(f *fsm.FSM, tenant string, req *pb.ListSchedulesRequest, now *pb.ClockNow) (*pb.ListSchedulesResponse, *fsm.Refusal) {
	if !f.HasTenant(tenant) {
		return nil, sfq.RefusalOf(sfq.UnknownTenant(tenant))
	}
	size := int(req.PageSize)
	if size == 0 {
		size = 100
	}
	list, more := f.ListSchedules(tenant, req.PageToken, min(size, 1000))
	out := &pb.ListSchedulesResponse{}
	for i := range list {
		out.Schedules = append(out.Schedules, Schedule(&list[i], int(max(req.Next, 1)), now))
	}
	if more {
		out.NextPageToken = list[len(list)-1].Name
	}
	return out, nil
}

// RunKey is a run-now's key: the caller's, or (none given) one made
// here, at random.
func RunKey(key string) string {
	if key != "" {
		return key
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails
	return hex.EncodeToString(b[:])
}
