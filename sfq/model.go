package sfq

import (
	"encoding/binary"
	"strings"

	"github.com/baristahq/barista/internal/text"
)

// Caps are a tenant's hard limits. Zero means "no cap" for every field.
type Caps struct {
	// MaxRunning caps the tenant's Assigned+Running jobs across all sizes.
	MaxRunning uint32
	// MaxRunningSize caps Assigned+Running jobs per job size (counted by
	// the job's size, whatever the worker's).
	MaxRunningSize [NumSizes]uint32
	// MaxInflightCPUMs caps the sum of est_cost of Assigned+Running jobs. A
	// job is eligible when inflight + est_cost <= cap, or when nothing is in
	// flight (an oversized job still runs alone).
	MaxInflightCPUMs int64
	// MaxQueued is the quota of queued jobs. The core does not enforce it:
	// the API refuses a submit beyond it before it reaches the log.
	MaxQueued uint32
	// MaxRunningCritical and MaxRunningHigh cap the tenant's
	// Assigned+Running jobs of class critical and high (cap_critical,
	// cap_high). Normal and low have no class cap.
	MaxRunningCritical uint32
	MaxRunningHigh     uint32
	// MaxRunningDeadline caps the tenant's Assigned+Running jobs that carry
	// a deadline (deadline_cap).
	MaxRunningDeadline uint32
}

// none reports whether no cap is set (the quota aside, which the core does
// not enforce).
func (c *Caps) none() bool {
	return c.MaxRunning == 0 && c.MaxRunningSize == [NumSizes]uint32{} && c.MaxInflightCPUMs == 0 &&
		c.MaxRunningCritical == 0 && c.MaxRunningHigh == 0 && c.MaxRunningDeadline == 0
}

// classCap returns the cap of class c (0 = none).
func (c *Caps) classCap(cl Class) uint32 {
	switch cl {
	case ClassCritical:
		return c.MaxRunningCritical
	case ClassHigh:
		return c.MaxRunningHigh
	}
	return 0
}

// TenantSpec is what an operator sets on a tenant.
type TenantSpec struct {
	Name       string
	Tier       Tier
	Multiplier uint32 // >= 1; 0 is read as 1
	Caps       Caps
	// MaxClass is the highest class the tenant may submit (default
	// normal; low is always allowed).
	MaxClass Class
	// AllowDeadlines lets the tenant submit jobs with a deadline.
	AllowDeadlines bool
	// GroupCap is the cap (Assigned+Running jobs) of every named group
	// whose own cap is inherit; 0 = none. The unnamed group has no cap.
	GroupCap uint32
	// GroupOrder chooses among the eligible heads of the tenant's groups.
	GroupOrder GroupOrder
	// MaxGroups bounds the tenant's named groups with jobs or settings;
	// 0 = DefaultMaxGroups.
	MaxGroups uint32
	// Rate is the tenant's rate limit (none: the zero value). Changing it
	// keeps the tenant's GCRA state; removing it forgets it.
	Rate RateLimit
}

// GroupLimit returns the tenant's max_groups in force.
func (ts *TenantSpec) GroupLimit() uint32 {
	if ts.MaxGroups == 0 {
		return DefaultMaxGroups
	}
	return ts.MaxGroups
}

// Permit checks that the tenant may submit a job of class c, with a
// deadline or not. It is the one check of max_class and allow_deadlines,
// made at the edge and again when the submit is applied; its error wraps
// ErrPermission and names the rule.
func (ts *TenantSpec) Permit(c Class, deadline bool) error {
	if c >= NumClasses {
		return invalidf("", "class %d", c)
	}
	if c != ClassLow && c.Above(ts.MaxClass) {
		return permissionf(text.ReasonMaxClass, "", "class %s is above tenant %s's max_class %s", c, ts.Name, ts.MaxClass)
	}
	if deadline && !ts.AllowDeadlines {
		return permissionf(text.ReasonDeadlinesNotAllowed, "", "tenant %s may not submit a job with a deadline (allow_deadlines is off)", ts.Name)
	}
	return nil
}

// MaxNameLen bounds tenant names, idempotency keys and job types.
const MaxNameLen = text.MaxNameLen

// ValidateName checks a name (a tenant's, a worker's ID): 1..256 bytes
// of UTF-8 without spaces and without the characters text.Refused names.
func ValidateName(field, s string) error { return text.ValidateName(field, s) }

// ValidateJobType checks a job type (a kind): at most MaxNameLen bytes of
// printable text.
func ValidateJobType(field, s string) error {
	if len(s) > MaxNameLen {
		return invalidf(field, "%d bytes, at most %d", len(s), MaxNameLen)
	}
	return checkText(field, s, true)
}

// checkText refuses text that is not UTF-8, or holds a refused character,
// or (unless spaces) a space (text.Check).
func checkText(field, s string, spaces bool) error { return text.Check(field, s, spaces) }

// Validate checks a spec and names the offending field.
func (ts TenantSpec) Validate() error {
	if err := ValidateName("tenant name", ts.Name); err != nil {
		return err
	}
	if ts.Tier >= NumTiers {
		return invalidf("tier", "%d is not free, bronze, silver, gold or diamond", ts.Tier)
	}
	if ts.Multiplier > MaxMultiplier {
		return invalidf("multiplier", "%d, at most %d", ts.Multiplier, MaxMultiplier)
	}
	if ts.Caps.MaxInflightCPUMs < 0 || ts.Caps.MaxInflightCPUMs > MaxEstCostMs*1000 {
		return invalidf("caps.max_inflight_cpu_ms", "%d is out of range (0 = none, at most %d)", ts.Caps.MaxInflightCPUMs, int64(MaxEstCostMs*1000))
	}
	if ts.MaxClass >= NumClasses {
		return invalidf("max_class", "%d is not critical, high, normal or low", ts.MaxClass)
	}
	if ts.GroupCap > MaxGroupCap {
		return invalidf("group_cap", "%d, at most %d (0 = none)", ts.GroupCap, MaxGroupCap)
	}
	if ts.GroupOrder > GroupFair {
		return invalidf("group_order", "%d is not fifo or fair", ts.GroupOrder)
	}
	if ts.MaxGroups > MaxMaxGroups {
		return invalidf("max_groups", "%d, at most %d (0 = the default %d)", ts.MaxGroups, MaxMaxGroups, DefaultMaxGroups)
	}
	return ts.Rate.Validate("rate")
}

// Billing holds a tenant's cumulative counters. They are not derivable from
// the job table (terminal jobs are pruned) and only ever grow.
type Billing struct {
	CPUMs       int64  // CPU of accepted Finished reports and zombies
	ZombieCPUMs int64  // the part of CPUMs from stale attempts
	Submitted   uint64 // jobs submitted
	Dispatches  uint64 // dispatches (attempts)
	// DispatchedCostMs is the est_cost of every dispatch: the service the
	// scheduler handed out, which its fair shares are about.
	DispatchedCostMs int64
	Completed        uint64
	Failed           uint64 // jobs that ended failed
	Cancelled        uint64
	TimedOut         uint64
	Failures         uint64 // failed runs and lost leases
	Requeues         uint64 // requeues for any reason
}

// Tenant is a tenant's record: configuration, scheduling state, counters.
type Tenant struct {
	TenantSpec
	// Deleted marks a tombstone: it keeps its name for the terminal jobs
	// that still refer to it. Upserting the name creates a new tenant at a
	// new index; several tombstones may share a name, the newest index
	// holding it is the one the name resolves to.
	Deleted bool
	// FinishTag is the tenant's next start tag (before clamping) in class
	// normal. Tag reads the tag of any class.
	FinishTag VirtualTime
	// classTags holds the finish tags of the other classes: high,
	// critical and low at Class-1.
	classTags [NumClasses - 1]VirtualTime
	// Usage is decayed CPU usage in ms as of UsageAt (decay only).
	Usage   int64
	UsageAt Time
	// Running, RunningBySize, RunningByClass, RunningDeadline,
	// InflightCPUMs and Queued are derived from the job table and checked
	// by Verify. Queued counts every class, with a deadline or not.
	Running         uint32
	RunningBySize   [NumSizes]uint32
	RunningByClass  [NumClasses]uint32
	RunningDeadline uint32 // Assigned+Running jobs with a deadline
	InflightCPUMs   int64
	Queued          [NumSizes]uint32
	// Groups counts the tenant's named groups (derived, checked by
	// Verify).
	Groups uint32
	// Scheduled counts the tenant's scheduled jobs, and ScheduledAgain
	// those of them that ran before (a failed run backing off, a snooze,
	// a redrive with a delay): work the tenant still has, for a watch
	// until it is idle (derived from the job table on restore, checked by
	// Verify; not encoded).
	Scheduled      uint32
	ScheduledAgain uint32
	Billing        Billing
	// groupNow holds group_now per class (group_order=fair).
	groupNow [NumClasses]VirtualTime
	// paused: the tenant is paused; rateTAT: its rate limit's theoretical
	// arrival time, µs of cluster time (pause.go).
	paused  PausedBy
	rateTAT int64
	// pool and owner: a lane of pool pool (not DefaultPool) of the tenant
	// whose own record is at index owner (pool.go). A tenant's own record
	// is its lane of the pool default.
	pool  PoolID
	owner uint32
}

// Pool returns the pool of the lane the record is.
func (t *Tenant) Pool() PoolID { return t.pool }

// GroupNow returns the tenant's group_now in class c.
func (t *Tenant) GroupNow(c Class) VirtualTime { return t.groupNow[c] }

// QueuedTotal is the tenant's queued jobs over all sizes.
func (t *Tenant) QueuedTotal() uint32 { return t.Queued[SM] + t.Queued[MD] + t.Queued[LG] }

// Tag returns the tenant's finish tag in class c.
func (t *Tenant) Tag(c Class) VirtualTime {
	if c == ClassNormal {
		return t.FinishTag
	}
	return t.classTags[c-1]
}

// tagPtr returns where the finish tag of class c is stored.
func (t *Tenant) tagPtr(c Class) *VirtualTime {
	if c == ClassNormal {
		return &t.FinishTag
	}
	return &t.classTags[c-1]
}

// RunResult is what a finished run reported: its exit code and the ends of
// its stderr and stdout (OutputTail; the whole output stays on the
// worker's disk).
type RunResult struct {
	ExitCode   int32
	StderrTail string
	StdoutTail string
	// Permanent, in a report of a failed run, says that no run of the job
	// can succeed (the worker cannot run its payload): the job ends failed
	// instead of being retried. It is not kept on the job.
	Permanent bool
	// CPUSource says how the worker measured the run's CPU, Failure why a
	// failed run failed (runresult.go); both are kept on the job.
	CPUSource CPUSource
	Failure   RunFailure
	// Snoozes counts the job's runs snoozed in a row up to this one (0:
	// this run was not snoozed), and SnoozeMs is this run's snooze; both
	// are kept on the job (feature level 7). While the job waits and runs
	// again after a snooze, its Result is the count alone (SnoozeMs 0;
	// see Pending): max_snoozes bounds snoozes in a row.
	Snoozes  uint16
	SnoozeMs int64
}

// Job is a job's record. ID doubles as enqueue_seq.
type Job struct {
	ID     JobID
	Tenant uint32 // tenant index
	Size   Size
	Class  Class
	// EstSource says where EstCostMs came from.
	EstSource EstSource
	// bits holds flags of the job: jobDeadline marks a job with a
	// deadline (DeadlineAt reads it from text), and its route class
	// (kinds.go: which workers run it) is in the bits of jobRouteMask.
	bits uint8
	Life
	EstCostMs   int64
	TimeoutMs   int64 // job timeout measured from Started; 0 = none
	StartTag    VirtualTime
	Weight      Weight // weight at dispatch, the divisor of the cost correction
	CPUMs       int64  // last heartbeat's CPU, then the final CPU
	SubmittedAt Time
	EndedAt     Time
	// submitWall and endWall are the leader's wall clock on the entries
	// that submitted and ended the job, for display only (see WallDelta):
	// SubmittedWall and EndedWall read them.
	submitWall, endWall WallDelta
	// text holds the group ("" = the unnamed group), the idempotency key
	// ("" = none), the job type and the payload in one string:
	// uvarint(len(group)) group uvarint(len(key)) key uvarint(len(type))
	// type payload, after uvarint(deadline_at) for a job with a deadline,
	// and before that the delay fields of a timed job (delay.go).
	// One string header instead of four keeps a million queued jobs 48 MB
	// smaller, and a Job of 152 bytes fits 256 of them in five 8 KiB pages;
	// Group, Key, Type, Payload and DeadlineAt read it.
	text   string
	Result *RunResult // set by the accepted Finished; immutable once set
}

// HeldBy reports whether worker holds the job's attempt: the job is live
// (assigned or running), on that worker, in that attempt. Every "does
// this worker still run this job" question asks it.
func (j *Job) HeldBy(worker string, attempt uint32) bool {
	return j.State.Live() && j.Worker == worker && j.Attempt == attempt
}

// SubmittedWall is the wall-clock time of the job's submit (display
// only; SubmittedAt is the cluster time every rule uses).
func (j *Job) SubmittedWall() Time { return j.submitWall.Wall(j.SubmittedAt) }

// EndedWall is the wall-clock time the job ended (0 while it has not).
func (j *Job) EndedWall() Time { return j.endWall.Wall(j.EndedAt) }

// noText is the text of a job without group, key, type or payload.
const noText = "\x00\x00\x00"

// SetText stores the job's idempotency key, type and payload (keeping its
// deadline and group).
func (j *Job) SetText(key, typ, payload string) {
	j.setText(j.DeadlineAt(), j.Group(), key, typ, payload)
}

// setText stores the job's deadline (0 = none), group, idempotency key,
// type and payload.
func (j *Job) setText(deadlineAt Time, group, key, typ, payload string) {
	j.bits &^= jobDeadline
	if deadlineAt != 0 {
		j.bits |= jobDeadline
	}
	pre := j.usesPrefix() + j.timesPrefix()
	if !j.deadline() && pre == "" && group == "" && key == "" && typ == "" && payload == "" {
		j.text = noText
		return
	}
	// One allocation: the builder's bytes become the string.
	var t strings.Builder
	var n [binary.MaxVarintLen64]byte
	uvarint := func(v uint64) { t.Write(binary.AppendUvarint(n[:0], v)) }
	t.Grow(len(pre) + 4*binary.MaxVarintLen64 + len(group) + len(key) + len(typ) + len(payload))
	t.WriteString(pre)
	if j.deadline() {
		uvarint(uint64(deadlineAt))
	}
	uvarint(uint64(len(group)))
	t.WriteString(group)
	uvarint(uint64(len(key)))
	t.WriteString(key)
	uvarint(uint64(len(typ)))
	t.WriteString(typ)
	t.WriteString(payload)
	j.text = t.String()
}

// HasDeadline reports whether the job has a deadline.
func (j *Job) HasDeadline() bool { return j.deadline() }

// DeadlineAt is the cluster time of the job's deadline; 0 = none (a
// deadline is at least 1 s after a submit at time >= 0).
func (j *Job) DeadlineAt() Time {
	if !j.deadline() {
		return 0
	}
	n, _ := uvarintPrefix(j.body())
	return Time(n)
}

// cutString reads a uvarint length and that many bytes from the start of
// t, returning them and the rest.
func cutString(t string) (string, string, bool) {
	n, w := uvarintPrefix(t)
	if w <= 0 || uint64(len(t)-w) < n {
		return "", "", false
	}
	return t[w : w+int(n)], t[w+int(n):], true
}

// textParts splits text into group, key, type and payload.
func (j *Job) textParts() (group, key, typ, payload string) {
	t := j.body()
	if j.deadline() {
		_, w := uvarintPrefix(t)
		t = t[w:]
	}
	var ok bool
	if group, t, ok = cutString(t); !ok {
		return "", "", "", ""
	}
	if key, t, ok = cutString(t); !ok {
		return group, "", "", ""
	}
	if typ, t, ok = cutString(t); !ok {
		return group, key, "", ""
	}
	return group, key, typ, t
}

// uvarintPrefix reads the uvarint at the start of s and its width (0 if
// there is none).
func uvarintPrefix(s string) (uint64, int) {
	var x uint64
	for i := 0; i < len(s) && i < binary.MaxVarintLen64; i++ {
		b := s[i]
		if b < 0x80 {
			return x | uint64(b)<<(7*i), i + 1
		}
		x |= uint64(b&0x7f) << (7 * i)
	}
	return 0, 0
}

// Group is the job's group ("" = its tenant's unnamed group).
func (j *Job) Group() string {
	t := j.body()
	if j.deadline() {
		_, w := uvarintPrefix(t)
		t = t[w:]
	}
	g, _, _ := cutString(t)
	return g
}

// Key is the job's idempotency key ("" = none).
func (j *Job) Key() string { _, k, _, _ := j.textParts(); return k }

// Type is the job's type.
func (j *Job) Type() string { _, _, t, _ := j.textParts(); return t }

// Payload is the job's payload.
func (j *Job) Payload() string { _, _, _, p := j.textParts(); return p }

// MaxOutputTail bounds each of the stderr and stdout tails kept on a job.
const MaxOutputTail = text.MaxOutputTail

// OutputTail returns the end of a run's stderr or stdout as a job keeps
// it: valid UTF-8 (each invalid sequence becomes U+FFFD), at most
// MaxOutputTail bytes, cut at a character boundary. Workers report it so,
// and the leader cuts every report so before proposing it.
func OutputTail(s string) string { return text.OutputTail(s) }

// Submission is a new job as the core takes it.
type Submission struct {
	Tenant string
	Key    string
	Type   string
	Size   Size
	// EstCostMs is the stated cost; 0 = not stated, allowed only under
	// estimate=auto.
	EstCostMs   int64
	Payload     string
	MaxAttempts uint32 // 0 = the configured default
	TimeoutMs   int64  // 0 = none
	Class       Class  // zero value: normal
	// DeadlineMs is the deadline as a duration from the submit; 0 = none.
	DeadlineMs int64
	// Group is the job's group in its tenant; "" = the unnamed group.
	Group string
	// Pool is the job's pool; "" = the pool default (feature level 6).
	Pool string
	// DelayMs keeps the job scheduled (in no queue) that long after the
	// submit; ExpireMs drops it, if never dispatched, that long after the
	// submit; 0 = none (feature level 5).
	DelayMs  int64
	ExpireMs int64
	// RetryBackoffMs, when RetryBackoffSet, replaces the configuration's
	// retry_backoff for this job (0: requeue at once).
	RetryBackoffMs  int64
	RetryBackoffSet bool
	// RetryBackoffMaxMs, when not 0, replaces the configuration's
	// retry_backoff_max for this job (a kind's retry policy).
	RetryBackoffMaxMs int64
	// Form says which workers run the job (SPEC §3 "Kinds"): a command
	// job, a function job of its kind (Type), or (FormAny, the zero
	// value) any worker, as a job of a build before kinds.
	Form JobForm
	// Uses are the resources the job uses and how many units of each
	// (SPEC §3 "Resources"; feature level 8): held from its dispatch
	// until its run ends.
	Uses []Use
}

// Limits on a deadline: at least a second, at most a year.
const (
	MinDeadlineMs = 1000
	MaxDeadlineMs = 365 * 24 * 3600 * 1000
)

// Validate checks a submission's own fields (not whether the tenant
// exists) and names the offending field. Its messages are the ones a
// client sees: the API's edge check calls it too.
func (s *Submission) Validate() error {
	if s.Form > FormFunction {
		return invalidf("form", "%d is not command or function", s.Form)
	}
	if s.Form == FormFunction && s.Type == "" {
		return invalidf("job_type", "required for a function job: the kind a worker registers")
	}
	if len(s.Key) > MaxNameLen {
		return invalidf("idempotency_key", "%d bytes, at most %d", len(s.Key), MaxNameLen)
	}
	if err := ValidateJobType("job_type", s.Type); err != nil {
		return err
	}
	if s.Size >= NumSizes {
		return invalidf("size", "%d is not sm, md or lg", s.Size)
	}
	if s.EstCostMs < 0 {
		return invalidf("est_cost_ms", "must be positive (got %d)", s.EstCostMs)
	}
	if s.EstCostMs > MaxEstCostMs {
		return invalidf("est_cost_ms", "%d is more than a CPU-year", s.EstCostMs)
	}
	if s.Class >= NumClasses {
		return invalidf("class", "%d is not critical, high, normal or low", s.Class)
	}
	if s.DeadlineMs != 0 && (s.DeadlineMs < MinDeadlineMs || s.DeadlineMs > MaxDeadlineMs) {
		return invalidf("deadline_ms", "%d is out of range (0 = none, else 1 s .. 1 year after the submit)", s.DeadlineMs)
	}
	if s.MaxAttempts > MaxMaxAttempts {
		return invalidf("max_attempts", "%d, at most %d", s.MaxAttempts, MaxMaxAttempts)
	}
	if s.TimeoutMs < 0 || s.TimeoutMs > MaxTimeoutMs {
		return invalidf("timeout_ms", "%d is out of range (0 = none, at most a year)", s.TimeoutMs)
	}
	if err := s.validateDelays(); err != nil {
		return err
	}
	if err := ValidateUses(s.Uses); err != nil {
		return err
	}
	if s.Group != "" {
		if err := ValidateGroupName(s.Group); err != nil {
			return invalidf("group", "%s", err)
		}
	}
	if s.Pool != "" {
		if err := ValidatePoolName(s.Pool); err != nil {
			return invalidf("pool", "%s", err)
		}
	}
	return nil
}

// Assignment is the result of a successful dispatch.
type Assignment struct {
	Job     JobID
	Tenant  uint32
	Size    Size
	Class   Class
	Attempt uint32
	// Start is the start tag the job was charged at (for a deadline job,
	// max(finish tag, virtual_now) of its class).
	Start  VirtualTime
	Weight Weight
	// Deadline reports a job with a deadline; DeadlineMissed that it was
	// dispatched after it.
	Deadline       bool
	DeadlineMissed bool
	// GroupStart is the group tag the job was charged at under
	// group_order=fair (0 otherwise).
	GroupStart VirtualTime
}

// Change reports what an event did to one job.
type Change struct {
	Job     JobID
	Tenant  uint32
	Attempt uint32
	Outcome Outcome
	From    State
	To      State
	// CancelSet is true when the event set a pending cancel (its reason is
	// in Cancel).
	CancelSet bool
	Cancel    CancelReason
}
