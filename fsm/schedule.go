package fsm

import (
	"encoding/binary"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/baristahq/barista/internal/pbcodec"
	"github.com/baristahq/barista/internal/text"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// Schedules (SPEC §3 "Schedules"; feature level 8): a tenant's periodic
// jobs, fired in cluster time exactly once per slot across any failover.
//
// The slots themselves are computed outside Apply: a spec's slots depend
// on the time zone rules of the build that reads them, so Apply reads
// neither the spec nor the zone beyond their form. The leader computes
// each schedule's next slot (package schedule) and proposes a Fire of it
// once cluster time reaches it, plus its jitter; Apply accepts a slot at
// most once (after the last one spent, at the schedule's version, while
// it is not paused, and not before it is due), spends it and submits the
// job in the same Apply, under the tenant's quotas like any submit.
// Slots further behind cluster time than the catch-up window are spent by
// a Miss, counted and never fired.

// Bounds and defaults of a schedule.
const (
	// MaxScheduleNameLen bounds a schedule's name (the characters of a
	// group's name: A-Z a-z 0-9 . _ : @ -).
	MaxScheduleNameLen = 128
	// MaxScheduleSpecLen and MaxScheduleZoneLen bound the spec and the
	// zone's name.
	MaxScheduleSpecLen = 128
	MaxScheduleZoneLen = 64
	// DefaultCatchupMs is the catch-up window of a schedule that sets
	// none; MinCatchupMs and MaxCatchupMs bound one it sets.
	DefaultCatchupMs = 60_000
	MinCatchupMs     = 1_000
	MaxCatchupMs     = 365 * 24 * 3600 * 1000
	// MaxJitterMs bounds a schedule's jitter.
	MaxJitterMs = 24 * 3600 * 1000
	// DefaultMaxSchedules is the setting max_schedules's default: the
	// schedules one tenant may have.
	DefaultMaxSchedules = 100
	// MaxMaxSchedules bounds the setting.
	MaxMaxSchedules = 1_000_000
	// MaxRunKeyLen bounds the key of a run-now.
	MaxRunKeyLen = 64
	// maxLiveJobs bounds the jobs a schedule keeps for its overlap policy:
	// a fire that would keep more is skipped.
	maxLiveJobs = 100
)

// ScheduleKeyPrefix begins the idempotency key of every job a schedule
// fires: schedule/NAME/SLOT for a slot, schedule/NAME/run/KEY for a
// run-now. The API refuses it in a client's own submit.
const ScheduleKeyPrefix = "schedule/"

// Overlap is what a fire does while an earlier job of its schedule has
// not ended.
type Overlap uint8

// The overlap policies.
const (
	// OverlapSkip: no fire while a job of the schedule is scheduled,
	// queued, assigned or running (the slot is counted skipped).
	OverlapSkip Overlap = iota
	// OverlapBufferOne: no fire while a job of the schedule waits to
	// start (scheduled or queued).
	OverlapBufferOne
	// OverlapAllow: every slot fires.
	OverlapAllow
	numOverlaps
)

var overlapNames = [numOverlaps]string{"skip", "buffer_one", "allow"}

func (o Overlap) String() string {
	if o < numOverlaps {
		return overlapNames[o]
	}
	return "overlap(" + strconv.Itoa(int(o)) + ")"
}

// ParseOverlap reads an overlap policy's name.
func ParseOverlap(s string) (Overlap, bool) {
	for o, n := range overlapNames {
		if n == s {
			return Overlap(o), true
		}
	}
	return 0, false
}

// OverlapFromPB converts an overlap policy (unspecified: skip).
func OverlapFromPB(o pb.Overlap) (Overlap, error) {
	switch o {
	case pb.Overlap_OVERLAP_UNSPECIFIED, pb.Overlap_OVERLAP_SKIP:
		return OverlapSkip, nil
	case pb.Overlap_OVERLAP_BUFFER_ONE:
		return OverlapBufferOne, nil
	case pb.Overlap_OVERLAP_ALLOW:
		return OverlapAllow, nil
	}
	return 0, invalidf("overlap", "%d is not skip, buffer_one or allow", int32(o))
}

// OverlapToPB converts an overlap policy.
func OverlapToPB(o Overlap) pb.Overlap {
	switch o {
	case OverlapBufferOne:
		return pb.Overlap_OVERLAP_BUFFER_ONE
	case OverlapAllow:
		return pb.Overlap_OVERLAP_ALLOW
	}
	return pb.Overlap_OVERLAP_SKIP
}

// Schedule is a tenant's schedule as the state keeps it. A record in the
// table is replaced, never written in place where a view may read it
// (Live is a new slice at every change).
type Schedule struct {
	Tenant  uint32 // the tenant's index
	Overlap Overlap
	Paused  bool
	Name    string
	Spec    string
	Zone    string // "" = UTC
	// Job is the job's template: the deterministic encoding of the
	// SubmitJob each fire submits, without tenant and key.
	Job string
	// Version moves on at every ScheduleSet of the schedule; a Fire names
	// the version whose slots it computed.
	Version   uint64
	CatchupMs int64
	JitterMs  int64
	// Since is the cluster time from which slots count (the set of this
	// version, or the resume): a slot fires only after it.
	Since sfq.Time
	// LastSlot is the newest slot spent (fired, skipped, refused or
	// missed); 0: none.
	LastSlot sfq.Time
	Created  sfq.Time
	Fired    uint64
	Skipped  uint64
	Missed   uint64
	Refused  uint64
	LastJob  sfq.JobID
	// Live are the jobs it fired that had not ended when last looked at
	// (skip and buffer_one only), oldest first.
	Live []sfq.JobID
}

// schedRef names a schedule: its tenant's index and its name.
type schedRef struct {
	tenant uint32
	name   string
}

// ValidateScheduleName checks a schedule's name: 1 to 128 bytes of A-Z
// a-z 0-9 . _ : @ - (a slash never appears in one, so that its keys read
// back).
func ValidateScheduleName(field, s string) error {
	return validKeyPart(field, "schedule name", s, MaxScheduleNameLen)
}

// validKeyPart checks a name that goes into a key: 1 to max bytes of a
// group name's characters.
func validKeyPart(field, what, s string, max int) error {
	if s == "" || len(s) > max {
		return invalidf(field, "%s %q (want 1 to %d of A-Z a-z 0-9 . _ : @ -)", what, s, max)
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '.' || b == '_' || b == ':' || b == '@' || b == '-') {
			return invalidf(field, "%s %q has %q at byte %d (allowed: A-Z a-z 0-9 . _ : @ -)", what, s, b, i)
		}
	}
	return nil
}

// ScheduleTextForm checks what Apply checks of a spec and a zone: their
// length and characters (printable ASCII; a zone's name without spaces).
// Whether they mean anything is for the edge and the leader to say
// (package schedule), which read them with the time zone rules of their
// build.
func ScheduleTextForm(spec, zone string) error {
	if spec == "" || len(spec) > MaxScheduleSpecLen {
		return invalidf("spec", "%d bytes (want 1 to %d)", len(spec), MaxScheduleSpecLen)
	}
	for i := 0; i < len(spec); i++ {
		if spec[i] < 0x20 || spec[i] > 0x7e {
			return invalidf("spec", "%q has byte %#x at %d (want printable ASCII)", spec, spec[i], i)
		}
	}
	if len(zone) > MaxScheduleZoneLen {
		return invalidf("zone", "%d bytes (at most %d)", len(zone), MaxScheduleZoneLen)
	}
	for i := 0; i < len(zone); i++ {
		b := zone[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '/' || b == '_' || b == '+' || b == '-') {
			return invalidf("zone", "%q has %q at byte %d (an IANA name: A-Z a-z 0-9 / _ + -)", zone, b, i)
		}
	}
	return nil
}

// ScheduleSlotKey is the idempotency key of the job a schedule fires at
// slot.
func ScheduleSlotKey(name string, slot sfq.Time) string {
	return ScheduleKeyPrefix + name + "/" + strconv.FormatInt(int64(slot), 10)
}

// ScheduleRunKey is the idempotency key of a run-now's job.
func ScheduleRunKey(name, key string) string {
	return ScheduleKeyPrefix + name + "/run/" + key
}

// ParseScheduleKey reads a key a schedule's fire gave its job: the
// schedule's name and the slot it fired, or the run-now's key.
func ParseScheduleKey(key string) (name string, slot sfq.Time, run string, ok bool) {
	rest, ok := strings.CutPrefix(key, ScheduleKeyPrefix)
	if !ok {
		return "", 0, "", false
	}
	name, rest, ok = strings.Cut(rest, "/")
	if !ok || ValidateScheduleName("", name) != nil {
		return "", 0, "", false
	}
	if run, ok := strings.CutPrefix(rest, "run/"); ok {
		return name, 0, run, validKeyPart("", "key", run, MaxRunKeyLen) == nil
	}
	t, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || t <= 0 || strconv.FormatInt(t, 10) != rest {
		return "", 0, "", false
	}
	return name, sfq.Time(t), "", true
}

// ScheduleJitter is when, after slot, a schedule with jitter jitterMs
// fires it: hash(tenant, name, slot) mod jitter, the same on every node
// and build (64-bit FNV-1a of the tenant's and the schedule's names, each
// followed by a zero byte, and the slot's 8 bytes, big-endian).
func ScheduleJitter(tenant, name string, slot sfq.Time, jitterMs int64) int64 {
	if jitterMs <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(tenant))
	h.Write([]byte{0})
	h.Write([]byte(name))
	h.Write([]byte{0})
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(slot))
	h.Write(b[:])
	return int64(h.Sum64() % uint64(jitterMs))
}

// scheduleSet is what checkScheduleSet found of a ScheduleSet.
type scheduleSet struct {
	ti     uint32
	serial uint64 // of the schedule it replaces
	exists bool
	rec    Schedule // the definition (counts and slots are the state's)
}

// checkScheduleSet is the check of a ScheduleSet: the tenant, the name,
// the form of the spec and zone, the policy and windows, the job (every
// rule of a submit that reads no state: SubmitFields), and the bound on a
// tenant's schedules. A set to what the schedule is changes nothing.
func (f *FSM) checkScheduleSet(c *clusterpb.ScheduleSet) (scheduleSet, Result) {
	var v scheduleSet
	ti, ok := f.sched.TenantIndex(c.Tenant)
	if !ok {
		return v, refuseWhy(NotFound, text.ReasonTenantUnknown, "tenant", "unknown tenant %q", c.Tenant)
	}
	rec, r := scheduleRecord(c, f.cfg, f.level)
	if r.Refused() {
		return v, r
	}
	rec.Tenant = ti
	v.ti, v.rec = ti, rec
	v.serial, v.exists = f.schedIndex[schedRef{ti, c.Name}]
	if v.exists {
		old := f.schedules.Get(v.serial)
		if old.Spec == rec.Spec && old.Zone == rec.Zone && old.Overlap == rec.Overlap && old.CatchupMs == rec.CatchupMs &&
			old.JitterMs == rec.JitterMs && old.Paused == rec.Paused && old.Job == rec.Job {
			return v, duplicate(c.Tenant)
		}
		return v, Result{Tenant: c.Tenant}
	}
	if n, max := f.schedCount[ti], f.cfg.MaxSchedules; n >= max {
		return v, refuseWhy(ResourceExhausted, text.ReasonQuotaExceeded, "name",
			"tenant %q has %d schedules, its max_schedules", c.Tenant, n)
	}
	return v, Result{Tenant: c.Tenant}
}

// scheduleRecord checks what of a ScheduleSet reads no state but the
// configuration and returns its definition (its tenant's index unset).
func scheduleRecord(c *clusterpb.ScheduleSet, cfg Config, level uint32) (Schedule, Result) {
	rec := Schedule{Name: c.Name, Spec: c.Spec, Zone: c.Zone, CatchupMs: c.CatchupMs, JitterMs: c.JitterMs, Paused: c.Paused}
	if err := ValidateScheduleName("name", c.Name); err != nil {
		return rec, refuse(err)
	}
	if err := ScheduleTextForm(c.Spec, c.Zone); err != nil {
		return rec, refuse(err)
	}
	o, err := OverlapFromPB(c.Overlap)
	if err != nil {
		return rec, refuse(err)
	}
	rec.Overlap = o
	if rec.CatchupMs == 0 {
		rec.CatchupMs = DefaultCatchupMs
	}
	switch {
	case rec.CatchupMs < MinCatchupMs || rec.CatchupMs > MaxCatchupMs:
		return rec, refusef(Invalid, "catchup_ms", "%s is out of range (%s .. %s)", msText(rec.CatchupMs), msText(MinCatchupMs), msText(MaxCatchupMs))
	case rec.JitterMs < 0 || rec.JitterMs > MaxJitterMs:
		return rec, refusef(Invalid, "jitter_ms", "%s is out of range (0 .. %s)", msText(rec.JitterMs), msText(MaxJitterMs))
	}
	job := c.GetJob()
	switch {
	case job == nil:
		return rec, refusef(Invalid, "job", "a schedule names the job it submits")
	case job.Tenant != "" && job.Tenant != c.Tenant:
		return rec, refusef(Invalid, "job.tenant", "the job is the schedule's tenant's (%q, not %q)", c.Tenant, job.Tenant)
	case job.IdempotencyKey != "":
		return rec, refusef(Invalid, "job.idempotency_key", "a schedule's jobs take its own keys (schedule/NAME/SLOT)")
	}
	tmpl := proto.Clone(job).(*clusterpb.SubmitJob)
	tmpl.Tenant = ""
	if _, ref := SubmitFields(tmpl, cfg, level); ref != nil {
		ref.Field = "job." + ref.Field
		return rec, refused(ref)
	}
	b, err := pbcodec.Marshal(tmpl)
	if err != nil {
		return rec, refusef(Invalid, "job", "%v", err)
	}
	rec.Job = string(b)
	return rec, Result{}
}

// msText is a duration in ms as a person reads it.
func msText(ms int64) string { return (time.Duration(ms) * time.Millisecond).String() }

// applyScheduleSet creates or replaces a schedule. A replaced schedule
// keeps its last slot, counts and jobs; its version moves on and its
// slots count from now.
func (f *FSM) applyScheduleSet(c *clusterpb.ScheduleSet) Result {
	v, r := f.checkScheduleSet(c)
	if r.Refused() || r.Outcome == sfq.Duplicate {
		return r
	}
	rec := v.rec
	rec.Since = f.clock
	if v.exists {
		old := f.schedules.Get(v.serial)
		rec.Version = old.Version + 1
		rec.LastSlot, rec.Created = old.LastSlot, old.Created
		rec.Fired, rec.Skipped, rec.Missed, rec.Refused = old.Fired, old.Skipped, old.Missed, old.Refused
		rec.LastJob, rec.Live = old.LastJob, old.Live
		f.schedules.Put(v.serial, rec)
		f.schedChanged(v.serial)
		return Result{Outcome: sfq.Changed, Tenant: c.Tenant}
	}
	rec.Version, rec.Created = 1, f.clock
	serial := f.schedSerial
	f.schedSerial++
	f.schedules.Put(serial, rec)
	f.schedIndex[schedRef{v.ti, rec.Name}] = serial
	f.schedCount[v.ti]++
	f.schedChanged(serial)
	return Result{Outcome: sfq.Changed, Created: true, Tenant: c.Tenant}
}

// findSchedule returns the serial of tenant's schedule name, with the
// tenant's index, or the refusal of a tenant or schedule that does not
// exist.
func (f *FSM) findSchedule(tenant, name string) (uint32, uint64, Result) {
	ti, ok := f.sched.TenantIndex(tenant)
	if !ok {
		return 0, 0, refuseWhy(NotFound, text.ReasonTenantUnknown, "tenant", "unknown tenant %q", tenant)
	}
	serial, ok := f.schedIndex[schedRef{ti, name}]
	if !ok {
		return 0, 0, refusef(NotFound, "name", "tenant %q has no schedule %q", tenant, name)
	}
	return ti, serial, Result{Tenant: tenant}
}

// checkScheduleDelete is the check of a ScheduleDelete: the schedule
// exists.
func (f *FSM) checkScheduleDelete(c *clusterpb.ScheduleDelete) (uint64, Result) {
	_, serial, r := f.findSchedule(c.Tenant, c.Name)
	return serial, r
}

func (f *FSM) applyScheduleDelete(c *clusterpb.ScheduleDelete) Result {
	serial, r := f.checkScheduleDelete(c)
	if r.Refused() {
		return r
	}
	f.dropSchedule(serial)
	return Result{Outcome: sfq.Changed, Tenant: c.Tenant}
}

// dropSchedule forgets schedule serial.
func (f *FSM) dropSchedule(serial uint64) {
	s := f.schedules.Get(serial)
	delete(f.schedIndex, schedRef{s.Tenant, s.Name})
	if f.schedCount[s.Tenant]--; f.schedCount[s.Tenant] == 0 {
		delete(f.schedCount, s.Tenant)
	}
	f.schedules.Del(serial)
	f.schedChanged(serial)
}

// dropSchedules forgets the schedules of tenant index ti (a deleted
// tenant): their jobs go with the tenant, and a tenant made again later
// starts with none.
func (f *FSM) dropSchedules(ti uint32) {
	if f.schedCount[ti] == 0 {
		return
	}
	var serials []uint64
	f.schedules.View().Each(func(i uint64, s *Schedule) bool {
		if s.Tenant == ti {
			serials = append(serials, i)
		}
		return true
	})
	for _, i := range serials {
		f.dropSchedule(i)
	}
}

// checkSchedulePause is the check of a SchedulePause: the schedule
// exists; a pause of a paused schedule (a resume of a running one)
// changes nothing.
func (f *FSM) checkSchedulePause(c *clusterpb.SchedulePause) (uint64, Result) {
	_, serial, r := f.findSchedule(c.Tenant, c.Name)
	if r.Refused() {
		return 0, r
	}
	if f.schedules.Get(serial).Paused != c.Resume {
		return serial, duplicate(c.Tenant)
	}
	return serial, r
}

func (f *FSM) applySchedulePause(c *clusterpb.SchedulePause) Result {
	serial, r := f.checkSchedulePause(c)
	if r.Refused() || r.Outcome == sfq.Duplicate {
		return r
	}
	rec := *f.schedules.Get(serial)
	rec.Paused = !c.Resume
	if c.Resume {
		rec.Since = f.clock // the slots it slept through are neither fired nor missed
	}
	f.schedules.Put(serial, rec)
	f.schedChanged(serial)
	return Result{Outcome: sfq.Changed, Tenant: c.Tenant}
}

// checkSlot is what a Fire and a Miss share: the schedule exists at
// version and is not paused, and slot comes after the last one spent
// (else the command changes nothing: the slot was spent, by this leader
// or an earlier one) and after the version's start.
func (f *FSM) checkSlot(tenant, name string, version uint64, slot sfq.Time) (uint64, Result) {
	_, serial, r := f.findSchedule(tenant, name)
	if r.Refused() {
		return 0, r
	}
	s := f.schedules.Get(serial)
	switch {
	case s.Version != version:
		return 0, refusef(FailedPrecondition, "version", "schedule %q of tenant %q is at version %d, not %d", name, tenant, s.Version, version)
	case s.Paused:
		return 0, refusef(FailedPrecondition, "", "schedule %q of tenant %q is paused", name, tenant)
	case slot <= s.LastSlot:
		return serial, duplicate(tenant)
	case slot <= s.Since:
		return 0, refusef(Invalid, "slot_ms", "slot %d is not after %d, when the schedule's version began (or it was resumed)", slot, s.Since)
	}
	return serial, r
}

// checkScheduleFire is the check of a ScheduleFire: checkSlot, and the
// slot is due: it and its jitter are not after the entry's cluster time.
func (f *FSM) checkScheduleFire(c *clusterpb.ScheduleFire) (uint64, Result) {
	slot := sfq.Time(c.SlotMs)
	serial, r := f.checkSlot(c.Tenant, c.Name, c.Version, slot)
	if r.Refused() || r.Outcome == sfq.Duplicate {
		return serial, r
	}
	if at := slot + sfq.Time(ScheduleJitter(c.Tenant, c.Name, slot, f.schedules.Get(serial).JitterMs)); at > f.clock {
		return 0, refusef(FailedPrecondition, "slot_ms", "slot %d is due at %d (with its jitter), after cluster time %d", slot, at, f.clock)
	}
	return serial, r
}

// checkScheduleMiss is the check of a ScheduleMiss: checkSlot, at least
// one slot, and the newest slot (with its jitter) is further behind the
// entry's cluster time than the catch-up window: a slot within it is
// never counted missed.
func (f *FSM) checkScheduleMiss(c *clusterpb.ScheduleMiss) (uint64, Result) {
	slot := sfq.Time(c.ThroughMs)
	serial, r := f.checkSlot(c.Tenant, c.Name, c.Version, slot)
	if r.Refused() || r.Outcome == sfq.Duplicate {
		return serial, r
	}
	s := f.schedules.Get(serial)
	if c.Count == 0 {
		return 0, refusef(Invalid, "count", "a miss counts at least one slot")
	}
	if at := slot + sfq.Time(ScheduleJitter(c.Tenant, c.Name, slot, s.JitterMs)); at+sfq.Time(s.CatchupMs) >= f.clock {
		return 0, refusef(FailedPrecondition, "through_ms", "slot %d (due at %d) is within the catch-up window of %s at cluster time %d", slot, at, msText(s.CatchupMs), f.clock)
	}
	return serial, r
}

// FireOutcome says what Apply did with a schedule's slot.
type FireOutcome uint8

// The fire outcomes.
const (
	FireNone    FireOutcome = iota
	FireFired               // the job was submitted
	FireSkipped             // the overlap policy skipped it
	FireRefused             // the submit was refused (event schedule_refused)
	FireMissed              // a Miss spent it
)

// String names the outcome as events, metrics and replay do ("" for
// FireNone).
func (o FireOutcome) String() string {
	switch o {
	case FireFired:
		return "fired"
	case FireSkipped:
		return "skipped"
	case FireRefused:
		return "refused"
	case FireMissed:
		return "missed"
	}
	return ""
}

// applyScheduleFire spends a slot: it is skipped if the overlap policy
// says so, else the job is submitted (key schedule/NAME/SLOT), or its
// refusal counted. Whatever became of the job, the slot is spent.
func (f *FSM) applyScheduleFire(c *clusterpb.ScheduleFire) Result {
	serial, r := f.checkScheduleFire(c)
	if r.Refused() || r.Outcome == sfq.Duplicate {
		return r
	}
	rec := *f.schedules.Get(serial)
	slot := sfq.Time(c.SlotMs)
	rec.LastSlot = slot
	out := Result{Outcome: sfq.Changed, Tenant: c.Tenant}
	live, waiting := f.liveJobs(&rec)
	switch {
	case rec.Overlap == OverlapSkip && len(live) > 0, rec.Overlap == OverlapBufferOne && (waiting || len(live) >= maxLiveJobs):
		rec.Live = live
		rec.Skipped++
		out.Fire = FireSkipped
	default:
		job, res := f.fireJob(&rec, ScheduleSlotKey(rec.Name, slot))
		if res.Refused() {
			rec.Live = live
			rec.Refused++
			f.emitSchedule(EvScheduleRefused, &rec, 0, slot, 0, refusalReason(res.Reason))
			out.Fire = FireRefused
			break
		}
		if rec.Overlap != OverlapAllow {
			live = append(live, job)
		}
		rec.Live, rec.LastJob = live, job
		rec.Fired++
		f.emitSchedule(EvScheduleFired, &rec, job, slot, 0, ReasonNone)
		out.Fire, out.Job, out.Created = FireFired, job, res.Created
	}
	f.schedules.Put(serial, rec)
	f.schedChanged(serial)
	return out
}

// liveJobs returns, of schedule s's jobs, those that have not ended (a
// new slice), and whether one of them waits to start.
func (f *FSM) liveJobs(s *Schedule) (live []sfq.JobID, waiting bool) {
	for _, id := range s.Live {
		j, ok := f.sched.Job(id)
		if !ok || j.State.Terminal() {
			continue
		}
		live = append(live, id)
		waiting = waiting || j.State == sfq.Queued || j.State == sfq.Scheduled
	}
	return live, waiting
}

// fireJob submits schedule s's job with key: the checks and effect of a
// submit (checkSubmit, submitAdmitted). A slot's key is not kept for the
// dedupe window: its slot is spent, and never fires again. It returns
// the job, or the refusal of the submit.
func (f *FSM) fireJob(s *Schedule, key string) (sfq.JobID, Result) {
	job, v, r := f.checkFireJob(s, key)
	if r.Refused() {
		return 0, r
	}
	if v.dup {
		return v.job, r
	}
	res := f.submitAdmitted(job, v, false)
	return res.Job, res
}

// checkFireJob is the check of the submit of schedule s's job with key:
// the job as it would be submitted and checkSubmit's verdict.
func (f *FSM) checkFireJob(s *Schedule, key string) (*clusterpb.SubmitJob, submitVerdict, Result) {
	job := &clusterpb.SubmitJob{}
	if err := pbcodec.Unmarshal([]byte(s.Job), job); err != nil {
		return nil, submitVerdict{}, refusef(Internal, "job", "the schedule's job cannot be read: %v", err)
	}
	job.Tenant, job.IdempotencyKey = f.sched.TenantName(s.Tenant), key
	v, r := f.checkSubmit(job, nil)
	return job, v, r
}

// runNow is what checkScheduleRunNow found of a ScheduleRunNow.
type runNow struct {
	serial uint64
	job    *clusterpb.SubmitJob
	v      submitVerdict
}

// checkScheduleRunNow is the check of a ScheduleRunNow: the key, the
// schedule, and its job's submit (checkSubmit). A resend whose key fired
// a job already changes nothing: the answer is that job.
func (f *FSM) checkScheduleRunNow(c *clusterpb.ScheduleRunNow) (runNow, Result) {
	var rn runNow
	if err := validKeyPart("key", "key", c.Key, MaxRunKeyLen); err != nil {
		return rn, refuse(err)
	}
	_, serial, r := f.findSchedule(c.Tenant, c.Name)
	if r.Refused() {
		return rn, r
	}
	rn.serial = serial
	rn.job, rn.v, r = f.checkFireJob(f.schedules.Get(serial), ScheduleRunKey(c.Name, c.Key))
	if r.Refused() {
		return rn, r
	}
	if rn.v.dup {
		return rn, Result{Outcome: sfq.Duplicate, Job: rn.v.job, Tenant: c.Tenant}
	}
	return rn, Result{Tenant: c.Tenant}
}

// applyScheduleRunNow fires a schedule once, now, with its own key,
// whatever its spec, pause and overlap. A refused submit refuses the
// command (nothing is counted); a resend with the same key returns the
// job it fired, within the dedupe window.
func (f *FSM) applyScheduleRunNow(c *clusterpb.ScheduleRunNow) Result {
	rn, r := f.checkScheduleRunNow(c)
	if r.Refused() || r.Outcome == sfq.Duplicate {
		return r
	}
	res := f.submitAdmitted(rn.job, rn.v, true)
	if res.Refused() {
		return res
	}
	rec := *f.schedules.Get(rn.serial)
	live, _ := f.liveJobs(&rec)
	if rec.Overlap != OverlapAllow && len(live) < maxLiveJobs {
		live = append(live, res.Job)
	}
	rec.Live, rec.LastJob = live, res.Job
	rec.Fired++
	f.emitSchedule(EvScheduleFired, &rec, res.Job, 0, 0, ReasonRunNow)
	f.schedules.Put(rn.serial, rec)
	f.schedChanged(rn.serial)
	return Result{Outcome: sfq.Changed, Job: res.Job, Created: true, Tenant: c.Tenant, Fire: FireFired}
}

// applyScheduleMiss spends the slots through the Miss's, counted missed.
func (f *FSM) applyScheduleMiss(c *clusterpb.ScheduleMiss) Result {
	serial, r := f.checkScheduleMiss(c)
	if r.Refused() || r.Outcome == sfq.Duplicate {
		return r
	}
	rec := *f.schedules.Get(serial)
	slot := sfq.Time(c.ThroughMs)
	rec.LastSlot = slot
	rec.Missed += c.Count
	f.emitSchedule(EvScheduleMissed, &rec, 0, slot, c.Count, ReasonNone)
	f.schedules.Put(serial, rec)
	f.schedChanged(serial)
	return Result{Outcome: sfq.Changed, Tenant: c.Tenant, Fire: FireMissed, Count: c.Count}
}

// emitSchedule appends a schedule event: the tenant's, the schedule's
// name where a job event has its worker's, the slot where a run has its
// CPU, and a miss's count of slots where a job has its attempt.
func (f *FSM) emitSchedule(kind EventKind, s *Schedule, job sfq.JobID, slot sfq.Time, count uint64, reason Reason) {
	ev := eventRecord{Job: job, At: f.clock, Tenant: s.Tenant, Kind: kind, Worker: s.Name, CPUMs: int64(slot), Attempt: uint32(min(count, 1<<32-1)), Reason: reason}
	ev.wall = sfq.MakeWallDelta(sfq.Time(f.lastWall), f.clock)
	f.events.Append(f.nextEvent, &ev)
	f.nextEvent++
}

// refusalReason is the reason of a schedule_refused event for a submit
// refused with reason (a text.Reason name).
func refusalReason(reason string) Reason {
	switch reason {
	case text.ReasonQuotaExceeded:
		return ReasonQuotaExceeded
	case text.ReasonKeyConflict:
		return ReasonKeyConflict
	case text.ReasonKeyJobGone:
		return ReasonKeyJobGone
	case text.ReasonPoolUnknown:
		return ReasonPoolUnknown
	case text.ReasonTooLarge:
		return ReasonTooLarge
	case text.ReasonMaxClass:
		return ReasonMaxClass
	case text.ReasonDeadlinesNotAllowed:
		return ReasonDeadlinesNotAllowed
	case text.ReasonMaxGroups:
		return ReasonMaxGroups
	case text.ReasonSubscriptionRequired:
		return ReasonSubscriptionRequired
	}
	return ReasonRefused
}

// schedChanged records that schedule serial changed, for the leader's
// loop (ScheduleChanges); callers hold the write lock.
func (f *FSM) schedChanged(serial uint64) {
	if len(f.schedLog) >= maxSchedLog {
		// The reader behind the dropped half scans every schedule again.
		half := len(f.schedLog) / 2
		f.schedLog = append(f.schedLog[:0:0], f.schedLog[half:]...)
		f.schedLogBase += uint64(half)
	}
	f.schedLog = append(f.schedLog, serial)
}

// maxSchedLog bounds the changes of schedules a node remembers for its
// leader's loop.
const maxSchedLog = 1 << 17
