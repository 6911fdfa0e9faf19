package client

import (
	"fmt"
	"strings"

	pb "github.com/baristahq/barista/proto"
)

// The enums of the typed API: each a string type whose values are the
// API's lower-case names (a comparison with a string constant, as in
// job.State == "completed", works too). A value the cluster sends that
// this release does not name (a newer server's) comes through as it is.

// Tier is a tenant's tier: its weight in the fair share (docs/scheduling.md).
type Tier string

// The tiers, lowest weight first.
const (
	TierFree    Tier = "free"
	TierBronze  Tier = "bronze"
	TierSilver  Tier = "silver"
	TierGold    Tier = "gold"
	TierDiamond Tier = "diamond"
)

// GroupOrder chooses among the heads of a tenant's groups: GroupFIFO
// (the oldest first; the default) or GroupFair (each group its turn).
type GroupOrder string

// The group orders.
const (
	GroupFIFO GroupOrder = "fifo"
	GroupFair GroupOrder = "fair"
)

// JobState is where a job is in its life (SPEC §3 "Job lifecycle").
type JobState string

// The states: scheduled (waiting for its delay, a retry's backoff or a
// snooze), queued, assigned (given to a worker, not yet started),
// running, and the ends.
const (
	JobScheduled JobState = "scheduled"
	JobQueued    JobState = "queued"
	JobAssigned  JobState = "assigned"
	JobRunning   JobState = "running"
	JobCompleted JobState = "completed"
	JobFailed    JobState = "failed"
	JobCancelled JobState = "cancelled"
	JobTimedOut  JobState = "timed_out"
	JobExpired   JobState = "expired"
)

// Ended reports whether the state is an end: completed, failed,
// cancelled, timed out or expired (a redrive may queue a job that ended
// otherwise than completed again).
func (s JobState) Ended() bool {
	switch s {
	case JobCompleted, JobFailed, JobCancelled, JobTimedOut, JobExpired:
		return true
	}
	return false
}

// Form says which workers run a job (SPEC §3 "Kinds").
type Form string

// The forms: a function of its kind (only a worker that registered the
// kind runs it: Insert's jobs), a command line (a command worker runs
// it), or any worker (a job submitted without a form, or read from a
// cluster below feature level 8).
const (
	FormFunction Form = "function"
	FormCommand  Form = "command"
	FormAny      Form = "any"
)

// EventKind is what an event says happened to a job (or, for
// EventPaused and EventResumed, to its tenant or group).
type EventKind string

// The event kinds.
const (
	EventQueued          EventKind = "queued"
	EventAssigned        EventKind = "assigned"
	EventStarted         EventKind = "started"
	EventRequeued        EventKind = "requeued"
	EventCompleted       EventKind = "completed"
	EventFailed          EventKind = "failed"
	EventCancelRequested EventKind = "cancel_requested"
	EventCancelled       EventKind = "cancelled"
	EventTimedOut        EventKind = "timed_out"
	EventScheduled       EventKind = "scheduled"
	EventReleased        EventKind = "released"
	EventExpired         EventKind = "expired"
	EventPaused          EventKind = "paused"
	EventResumed         EventKind = "resumed"
	EventRedriven        EventKind = "redriven"
)

// Ends reports whether the event ends its job.
func (k EventKind) Ends() bool {
	switch k {
	case EventCompleted, EventFailed, EventCancelled, EventTimedOut, EventExpired:
		return true
	}
	return false
}

// EventReason says why an event happened, where the kind alone does not
// ("": no reason).
type EventReason string

// The event reasons (docs/api.md, "Events").
const (
	ReasonAckTimeout      EventReason = "ack_timeout"       // requeued: the worker never started it
	ReasonLeaseExpired    EventReason = "lease_expired"     // requeued or failed: its worker went silent
	ReasonRunFailed       EventReason = "run_failed"        // requeued, scheduled or failed: the run failed
	ReasonRequested       EventReason = "requested"         // cancel_requested, cancelled: someone cancelled it
	ReasonTimeout         EventReason = "timeout"           // cancel_requested, timed_out: its timeout
	ReasonDeadlineMissed  EventReason = "deadline_missed"   // assigned after its deadline
	ReasonUnrunnable      EventReason = "unrunnable"        // failed: the worker said no run can succeed
	ReasonOOMKilled       EventReason = "oom_killed"        // the run was killed for its memory limit
	ReasonSnoozed         EventReason = "snoozed"           // scheduled: the run snoozed
	ReasonSnoozedTooOften EventReason = "snoozed_too_often" // failed: max_snoozes snoozes in a row
	ReasonUnknownKind     EventReason = "unknown_kind"      // requeued: the worker does not run its kind
	ReasonReconnected     EventReason = "reconnected"       // requeued: its worker reconnected without it
)

// WaitReason is why a job is where it is (ExplainJob's reason: SPEC §3
// "Why a job waits"), or its state once it runs or ended.
type WaitReason string

// The reasons of an explanation.
const (
	WaitScheduled   WaitReason = "scheduled"    // its delay, backoff or snooze (DueAt)
	WaitPaused      WaitReason = "paused"       // its tenant, group, pool or all dispatch is paused (Vertex)
	WaitBehind      WaitReason = "behind"       // queued jobs of its tenant ahead of it (Position)
	WaitCap         WaitReason = "cap"          // a cap is full (Vertex, Current, Limit)
	WaitResource    WaitReason = "resource"     // a resource it uses has no room, or is reserved (Resource)
	WaitRate        WaitReason = "rate"         // a rate limit (Vertex, EligibleAt)
	WaitHeld        WaitReason = "held"         // its group's head is held
	WaitGroupTurn   WaitReason = "group_turn"   // another group of its tenant goes first (GroupOrder)
	WaitHigherClass WaitReason = "higher_class" // jobs of a higher class go first
	WaitNoWorker    WaitReason = "no_worker"    // no connected worker of its pool and size runs its kind (Kind)
	WaitWaiting     WaitReason = "waiting"      // its turn in the fair share (Ahead, FittingWorkers)
	WaitAssigned    WaitReason = "assigned"     // given to a worker (Worker)
	WaitRunning     WaitReason = "running"      // running (Worker)
)

// lower is an enum's proto name as the API writes it ("" for its zero).
func lower(name string, zero bool) string {
	if zero {
		return ""
	}
	return strings.ToLower(name)
}

func tierOf(t pb.Tier) Tier { return Tier(lower(t.String(), t == pb.Tier_TIER_UNSPECIFIED)) }

func tierToPB(t Tier) (pb.Tier, error) {
	return enumToPB[pb.Tier]("tier", string(t), pb.Tier_value, pb.Tier_TIER_UNSPECIFIED, "free, bronze, silver, gold or diamond")
}

func groupOrderOf(o pb.GroupOrder) GroupOrder {
	if o == pb.GroupOrder_GROUP_FAIR {
		return GroupFair
	}
	return GroupFIFO
}

func groupOrderToPB(o GroupOrder) (pb.GroupOrder, error) {
	switch o {
	case GroupFIFO:
		return pb.GroupOrder_GROUP_FIFO, nil
	case GroupFair:
		return pb.GroupOrder_GROUP_FAIR, nil
	}
	return 0, invalidArg(fmt.Sprintf("group_order: %q (want fifo or fair)", o))
}

func sizeOf(s pb.Size) Size {
	if s == pb.Size_SIZE_UNSPECIFIED {
		return SizeSM
	}
	return Size(strings.ToLower(s.String()))
}
