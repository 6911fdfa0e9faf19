package webhook

import (
	"encoding/json"

	"github.com/baristahq/barista/fsm"
)

// Event is one event as a request's body carries it.
type Event struct {
	Seq    uint64 `json:"seq"`
	JobID  uint64 `json:"job_id"`
	Tenant string `json:"tenant"`
	// Pool is a job's event's pool, always named ("default" for the pool
	// default); none on a tenant-level event or a gap.
	Pool    string `json:"pool,omitempty"`
	Kind    string `json:"kind"`
	Attempt uint32 `json:"attempt"`
	AtMs    int64  `json:"at_ms"` // cluster time
	// WallMs is the leader's wall clock when the event happened (ms
	// since the Unix epoch), for display; none on a gap event.
	WallMs   int64  `json:"wall_ms,omitempty"`
	WorkerID string `json:"worker_id,omitempty"`
	CPUMs    int64  `json:"cpu_ms,omitempty"`
	ExitCode int32  `json:"exit_code,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Group is, for the tenant-level events paused and resumed (job_id
	// 0), the group paused or resumed; none: the whole tenant.
	Group string `json:"group,omitempty"`
	// Schedule, SlotMs and Slots are, for the schedule events
	// (schedule_fired, schedule_refused, schedule_missed), the schedule,
	// its slot (none for a run-now; the newest for a miss) and the slots
	// a miss counts.
	Schedule string `json:"schedule,omitempty"`
	SlotMs   int64  `json:"slot_ms,omitempty"`
	Slots    uint64 `json:"slots,omitempty"`
	// FromSeq and ToSeq name the range a gap event covers: the tenant's
	// events in it were pruned before they could be delivered. A gap's Seq
	// is ToSeq, its place in the order.
	FromSeq uint64 `json:"from_seq,omitempty"`
	ToSeq   uint64 `json:"to_seq,omitempty"`
}

// KindGap is the kind of a gap event.
const KindGap = "gap"

// Payload is a request's body: one or more events of one tenant, in
// order.
type Payload struct {
	Events []Event `json:"events"`
}

// eventOf renders a log event.
func eventOf(ev *fsm.Event, tenant string) Event {
	out := Event{Seq: ev.Seq, JobID: uint64(ev.Job), Tenant: tenant, Kind: ev.Kind.String(), Attempt: ev.Attempt, AtMs: int64(ev.At),
		WallMs: int64(ev.Wall()), WorkerID: ev.Worker, CPUMs: ev.CPUMs, ExitCode: int32(ev.ExitCode)}
	switch {
	case ev.Kind.TenantLevel():
		// paused, resumed: job 0; the group (empty: the whole tenant).
		out.WorkerID, out.Group = "", ev.Worker
	case ev.Kind.ScheduleEvent():
		// The schedule, its slot and a miss's count of slots.
		out.WorkerID, out.CPUMs, out.Attempt = "", 0, 0
		out.Schedule, out.SlotMs, out.Slots = ev.Worker, ev.CPUMs, uint64(ev.Attempt)
	default:
		out.Pool = ev.PoolLabel()
	}
	if ev.Reason != fsm.ReasonNone {
		out.Reason = ev.Reason.String()
	}
	return out
}

// Marshal encodes a payload.
func (p *Payload) Marshal() ([]byte, error) { return json.Marshal(p) }
