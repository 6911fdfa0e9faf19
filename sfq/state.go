package sfq

import (
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// stateVersion is the version of the canonical state encoding. Version 2
// added priority classes (a virtual_now per class, a finish tag per tenant
// and class, class caps and max_class), deadlines and learned cost
// estimates; version 3 the wall-clock times of a job's submit and end and
// the stdout tail of its result (an ended job also keeps its last worker,
// which needs no new field); version 4 groups (a job's group, the tenants'
// group settings and group_now, and the group table); version 5 what
// feature level 5 adds (levers.go: delays, expiry, retry backoff, pauses
// and rate limits). Decode still reads versions 1 to 4; those of 1 to 3: their jobs are all in their tenants' unnamed groups;
// those of versions 1 and 2 show their cluster times as wall times and
// have no stdout tail, and version 1's are all of class normal without a
// deadline.
//
// A state that uses nothing of groups (no job of a named group, no group
// setting, no group tag or group_now) is written as version 3, byte for
// byte as before groups existed: its hash does not change, and a build
// before groups can still load it during a rolling upgrade. Likewise a
// state that uses nothing of version 5 is written as version 4 (or 3).
const stateVersion = 6

// stateVersionLevers is the version a state with nothing of pools is
// written as (version 6 adds pools: pool.go), byte for byte as the build
// before pools wrote it.
const stateVersionLevers = 5

// stateVersionNoGroups is the version a state without groups is written
// as.
const stateVersionNoGroups = 3

// stateVersionGroups is the version a state with groups but nothing of
// feature level 5 (delays, expiry, backoff, pauses, rate limits) is
// written as, byte for byte as the build before them wrote it.
const stateVersionGroups = 4

// View is an immutable picture of the scheduler's persistent state: its
// configuration, scalars, and tenant and job tables. A View returned by
// Freeze may be read from any goroutine while the scheduler goes on.
type View struct {
	cfg     Config
	vnow    [NumClasses]VirtualTime
	nextJob JobID
	tenants VectorView[Tenant]
	jobs    VectorView[Job]
	types   VectorView[TypeStat]
	groups  VectorView[Group]
	grouped uint64 // jobs of a named group in the job table
	timed   uint64 // jobs with delay fields (delay.go)
	// pausedAll and evalUs: the pause of all dispatch, and the time
	// (µs) eligibility was last evaluated at (pause.go).
	pausedAll bool
	evalUs    int64
	// pools and subs: every pool slot's settings, pause and
	// virtual_now, and the subscriptions (pool.go).
	pools []poolPic
	subs  []subscription
}

// Freeze returns an immutable View of the current state in O(chunks) time.
// Writes after it copy the chunks they touch, so the View never changes.
func (s *Scheduler) Freeze() *View {
	s.subsShared = true
	return &View{cfg: s.cfg, vnow: s.pools[DefaultPool].vnow, nextJob: s.nextJob, tenants: s.tenants.Freeze(), jobs: s.jobs.Freeze(), types: s.types.Freeze(),
		groups: s.groups.Freeze(), grouped: s.grouped, timed: s.dl.timed, pausedAll: s.pausedAll, evalUs: s.evalUs, pools: s.poolPics(), subs: s.subs}
}

// Peek returns a View valid only until the next write, for reading while
// no write can happen (on the writer's goroutine, or under its lock).
func (s *Scheduler) Peek() *View { return s.view() }

// view returns a View valid only until the next write, for reading on the
// scheduler's own goroutine.
func (s *Scheduler) view() *View {
	return &View{cfg: s.cfg, vnow: s.pools[DefaultPool].vnow, nextJob: s.nextJob, tenants: s.tenants.View(), jobs: s.jobs.View(), types: s.types.View(),
		groups: s.groups.View(), grouped: s.grouped, timed: s.dl.timed, pausedAll: s.pausedAll, evalUs: s.evalUs, pools: s.poolPics(), subs: s.subs}
}

// JobCount returns the number of jobs in the view.
func (v *View) JobCount() int { return v.jobs.Len() }

// TenantCount returns the number of tenant slots in the view.
func (v *View) TenantCount() int { return v.tenants.Len() }

// usesGroups reports whether the state holds anything of groups that the
// encoding of version 3 cannot carry.
func (v *View) usesGroups() bool {
	if v.grouped > 0 {
		return true
	}
	uses := false
	v.tenants.Each(func(_ uint64, t *Tenant) bool {
		uses = t.GroupCap != 0 || t.GroupOrder != GroupFIFO || t.MaxGroups != 0 || t.Groups != 0 || t.groupNow != [NumClasses]VirtualTime{}
		return !uses
	})
	v.groups.Each(func(_ uint64, g *Group) bool {
		uses = uses || g.Name != "" || !g.Empty() || g.tags != [NumClasses]VirtualTime{}
		return !uses
	})
	return uses
}

// Encode writes the view's canonical encoding. Equal states encode to equal
// bytes on every machine. Per-class values are written in Class order
// (normal, high, critical, low).
func (v *View) Encode(e *Encoder) {
	version := stateVersionNoGroups
	switch {
	case v.usesPools():
		version = stateVersion
	case v.usesLevers():
		version = stateVersionLevers
	case v.usesGroups():
		version = stateVersionGroups
	}
	v.EncodeVersion(e, version)
}

// EncodeVersion writes the view's canonical encoding of version 1 to 5.
// Version 1 is what builds before classes wrote: a state that FitsVersion1
// reads back from it unchanged; versions below 4 leave groups out (a state
// that FitsVersion3 reads back unchanged), versions below 5 everything of
// feature level 5 (a state that FitsVersion4 reads back unchanged).
// Anything else a version cannot hold is left out.
func (v *View) EncodeVersion(e *Encoder, version int) {
	e.Uvarint(uint64(version))
	encodeConfig(e, &v.cfg, version)
	if version < 2 {
		e.Varint(int64(v.vnow[ClassNormal]))
	} else {
		for _, vn := range v.vnow {
			e.Varint(int64(vn))
		}
	}
	e.Uvarint(uint64(v.nextJob))
	e.Uvarint(uint64(v.tenants.Len()))
	v.tenants.Each(func(_ uint64, t *Tenant) bool {
		encodeTenant(e, t, version)
		return true
	})
	e.Uvarint(uint64(v.jobs.Len()))
	v.jobs.Each(func(_ uint64, j *Job) bool {
		encodeJob(e, j, version)
		return true
	})
	if version < 2 {
		return
	}
	e.Uvarint(uint64(v.types.Len()))
	v.types.Each(func(slot uint64, st *TypeStat) bool {
		e.Uvarint(slot)
		e.Uvarint(uint64(st.Tenant))
		e.String(st.Type)
		e.Varint(st.EMAMs)
		e.Uvarint(uint64(st.Samples))
		e.Varint(int64(st.UpdatedAt))
		return true
	})
	if version < 4 {
		return
	}
	// Version 4: the groups, by (tenant, name). Their slots are not part
	// of the state: nothing the scheduler decides depends on them.
	groups := make([]*Group, 0, v.groups.Len())
	v.groups.Each(func(_ uint64, g *Group) bool {
		groups = append(groups, g)
		return true
	})
	slices.SortFunc(groups, func(a, b *Group) int {
		if a.Tenant != b.Tenant {
			return cmp.Compare(a.Tenant, b.Tenant)
		}
		return strings.Compare(a.Name, b.Name)
	})
	e.Uvarint(uint64(len(groups)))
	for _, g := range groups {
		e.Uvarint(uint64(g.Tenant))
		e.String(g.Name)
		e.Uvarint(uint64(g.Cap))
		e.Uvarint(uint64(g.TenantCap))
		e.Uvarint(uint64(g.Running))
		e.Uvarint(uint64(g.Queued))
		for _, tag := range g.tags {
			e.Varint(int64(tag))
		}
		if version >= 5 {
			encodeGroupLevers(e, g)
		}
	}
	if version < 5 {
		return
	}
	// Version 5: the scheduler-wide state of feature level 5.
	v.encodeLevers(e)
	if version < 6 {
		return
	}
	// Version 6: pools and subscriptions.
	v.encodePools(e)
}

// FitsVersion1 reports, as an error naming the first one, anything the
// version 1 encoding cannot hold: groups (FitsVersion3), a class other than normal, a deadline, a
// learned estimate or an estimate not submitted, a tenant's max_class,
// allow_deadlines, class or deadline caps, a tag or virtual_now of another
// class, or the estimate settings. O(tenants + jobs).
func (v *View) FitsVersion1() error {
	if err := v.FitsVersion3(); err != nil {
		return err
	}
	if v.cfg.Estimate != EstimateSubmitted || v.cfg.DefaultCostMs != DefaultCostMs {
		return fmt.Errorf("estimate=%s default_cost=%d ms", v.cfg.Estimate, v.cfg.DefaultCostMs)
	}
	for c, vn := range v.vnow {
		if Class(c) != ClassNormal && vn != 0 {
			return fmt.Errorf("virtual_now of class %s is %s", Class(c), vn)
		}
	}
	if n := v.types.Len(); n > 0 {
		return fmt.Errorf("%d learned cost estimates", n)
	}
	var err error
	v.tenants.Each(func(_ uint64, t *Tenant) bool {
		switch {
		case t.MaxClass != ClassNormal || t.AllowDeadlines:
			err = fmt.Errorf("tenant %s has max_class %s, allow_deadlines %t", t.Name, t.MaxClass, t.AllowDeadlines)
		case t.Caps.MaxRunningCritical != 0 || t.Caps.MaxRunningHigh != 0 || t.Caps.MaxRunningDeadline != 0:
			err = fmt.Errorf("tenant %s has a class or deadline cap", t.Name)
		case t.classTags != [NumClasses - 1]VirtualTime{}:
			err = fmt.Errorf("tenant %s has a tag in a class other than normal", t.Name)
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	v.jobs.Each(func(_ uint64, j *Job) bool {
		if j.Class != ClassNormal || j.deadline || j.EstSource != EstFromSubmit {
			err = fmt.Errorf("job %d has class %s, a deadline %t, estimate from %s", j.ID, j.Class, j.deadline, j.EstSource)
		}
		return err == nil
	})
	return err
}

// FitsVersion4 reports, as an error, anything of feature level 5 the
// encodings before version 5 cannot hold (see usesLevers).
func (v *View) FitsVersion4() error {
	if v.usesLevers() {
		return errors.New("delays, expiry, retry backoff, pauses or rate limits (a scheduled or expired job, a pause, a rate limit or a retry_backoff setting)")
	}
	return nil
}

// FitsVersion3 reports, as an error, anything of groups the encodings
// before version 4 cannot hold: a job of a named group, a group setting, a
// group tag or group_now, a tenant's group settings (see usesGroups).
func (v *View) FitsVersion3() error {
	if err := v.FitsVersion4(); err != nil {
		return err
	}
	if v.usesGroups() {
		return errors.New("groups (a job of a named group, a group setting, a group tag, or a tenant's group_cap, group_order or max_groups)")
	}
	return nil
}

// Hash returns the SHA-256 of the canonical encoding of the state.
func (s *Scheduler) Hash() [32]byte {
	h := sha256.New()
	e := NewEncoder(h)
	s.view().Encode(e)
	_ = e.Flush() // a hash never fails to write
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// EncodeConfig writes a configuration's canonical encoding.
func EncodeConfig(e *Encoder, c *Config) { encodeConfig(e, c, stateVersion) }

// EncodeConfigVersion writes a configuration's encoding of state version v
// (1 or 2); version 1 has no estimate settings.
func EncodeConfigVersion(e *Encoder, c *Config, v int) { encodeConfig(e, c, v) }

// DecodeConfig reads what EncodeConfig wrote.
func DecodeConfig(d *Decoder) Config { return decodeConfig(d, stateVersion) }

// DecodeConfigVersion reads a configuration written by the EncodeConfig of
// state encoding version v (1 to 3; 3 writes it as 2 did); fields a
// version lacks get their defaults.
func DecodeConfigVersion(d *Decoder, v int) Config { return decodeConfig(d, v) }

func encodeConfig(e *Encoder, c *Config, version int) {
	for _, w := range c.TierWeights {
		e.Uvarint(uint64(w))
	}
	switch p := c.Policy.(type) {
	case Reserve:
		e.Byte(1)
		e.Varint(int64(p.Margin))
	default:
		e.Byte(0)
	}
	e.Byte(byte(c.Clamp))
	if c.Decay != nil {
		e.Byte(1)
		e.Varint(c.Decay.HalfLifeMs)
		e.Varint(c.Decay.NormMs)
	} else {
		e.Byte(0)
	}
	e.Varint(c.AckTimeoutMs)
	e.Varint(c.LeaseTimeoutMs)
	e.Uvarint(uint64(c.DefaultMaxAttempts))
	if version < 2 {
		return
	}
	e.Byte(byte(c.Estimate))
	e.Varint(c.DefaultCostMs)
	if version < 5 {
		return
	}
	encodeConfigLevers(e, c)
}

func decodeConfig(d *Decoder, version int) Config {
	var c Config
	for i := range c.TierWeights {
		c.TierWeights[i] = d.Uint32()
	}
	switch d.Enum("policy", 2) {
	case 0:
		c.Policy = PreferFit{}
	case 1:
		c.Policy = Reserve{Margin: VirtualTime(d.Varint())}
	}
	c.Clamp = ClampMode(d.Enum("clamp", 2))
	if d.Bool() {
		c.Decay = &Decay{HalfLifeMs: d.Varint(), NormMs: d.Varint()}
	}
	c.AckTimeoutMs = d.Varint()
	c.LeaseTimeoutMs = d.Varint()
	c.DefaultMaxAttempts = d.Uint32()
	c.Estimate, c.DefaultCostMs = EstimateSubmitted, DefaultCostMs
	if version >= 2 {
		c.Estimate = EstimateMode(d.Enum("estimate mode", 2))
		c.DefaultCostMs = d.Varint()
	}
	if version >= 5 {
		decodeConfigLevers(d, &c)
	}
	return c
}

func encodeTenant(e *Encoder, t *Tenant, version int) {
	e.String(t.Name)
	e.Byte(byte(t.Tier))
	e.Uvarint(uint64(t.Multiplier))
	e.Uvarint(uint64(t.Caps.MaxRunning))
	for _, m := range t.Caps.MaxRunningSize {
		e.Uvarint(uint64(m))
	}
	e.Varint(t.Caps.MaxInflightCPUMs)
	e.Uvarint(uint64(t.Caps.MaxQueued))
	e.Bool(t.Deleted)
	e.Varint(int64(t.FinishTag))
	e.Varint(t.Usage)
	e.Varint(int64(t.UsageAt))
	e.Uvarint(uint64(t.Running))
	for _, r := range t.RunningBySize {
		e.Uvarint(uint64(r))
	}
	e.Varint(t.InflightCPUMs)
	for _, q := range t.Queued {
		e.Uvarint(uint64(q))
	}
	b := &t.Billing
	e.Varint(b.CPUMs)
	e.Varint(b.ZombieCPUMs)
	e.Varint(b.DispatchedCostMs)
	for _, x := range [...]uint64{b.Submitted, b.Dispatches, b.Completed, b.Failed, b.Cancelled, b.TimedOut, b.Failures, b.Requeues} {
		e.Uvarint(x)
	}
	if version < 2 {
		return
	}
	// Version 2: classes and deadlines.
	e.Byte(byte(t.MaxClass))
	e.Bool(t.AllowDeadlines)
	e.Uvarint(uint64(t.Caps.MaxRunningCritical))
	e.Uvarint(uint64(t.Caps.MaxRunningHigh))
	e.Uvarint(uint64(t.Caps.MaxRunningDeadline))
	for _, tag := range t.classTags {
		e.Varint(int64(tag))
	}
	for _, r := range t.RunningByClass {
		e.Uvarint(uint64(r))
	}
	e.Uvarint(uint64(t.RunningDeadline))
	if version < 4 {
		return
	}
	// Version 4: groups.
	e.Uvarint(uint64(t.GroupCap))
	e.Byte(byte(t.GroupOrder))
	e.Uvarint(uint64(t.MaxGroups))
	e.Uvarint(uint64(t.Groups))
	for _, gn := range t.groupNow {
		e.Varint(int64(gn))
	}
	if version < 5 {
		return
	}
	// Version 5: delays, pauses and rate limits.
	encodeTenantLevers(e, t)
	if version < 6 {
		return
	}
	// Version 6: pools. A lane names its pool and its tenant.
	e.Uvarint(uint64(t.pool))
	if t.pool != DefaultPool {
		e.Uvarint(uint64(t.owner))
	}
}

func decodeTenant(d *Decoder, version int) Tenant {
	var t Tenant
	t.Name = d.String()
	t.Tier = Tier(d.Enum("tier", NumTiers))
	t.Multiplier = d.Uint32()
	t.Caps.MaxRunning = d.Uint32()
	for i := range t.Caps.MaxRunningSize {
		t.Caps.MaxRunningSize[i] = d.Uint32()
	}
	t.Caps.MaxInflightCPUMs = d.Varint()
	t.Caps.MaxQueued = d.Uint32()
	t.Deleted = d.Bool()
	t.FinishTag = VirtualTime(d.Varint())
	t.Usage = d.Varint()
	t.UsageAt = Time(d.Varint())
	t.Running = d.Uint32()
	for i := range t.RunningBySize {
		t.RunningBySize[i] = d.Uint32()
	}
	t.InflightCPUMs = d.Varint()
	for i := range t.Queued {
		t.Queued[i] = d.Uint32()
	}
	b := &t.Billing
	b.CPUMs = d.Varint()
	b.ZombieCPUMs = d.Varint()
	b.DispatchedCostMs = d.Varint()
	for _, p := range [...]*uint64{&b.Submitted, &b.Dispatches, &b.Completed, &b.Failed, &b.Cancelled, &b.TimedOut, &b.Failures, &b.Requeues} {
		*p = d.Uvarint()
	}
	if version < 2 {
		// Every job of a version 1 state is of class normal.
		t.RunningByClass[ClassNormal] = t.Running
		return t
	}
	t.MaxClass = Class(d.Enum("max class", NumClasses))
	t.AllowDeadlines = d.Bool()
	t.Caps.MaxRunningCritical = d.Uint32()
	t.Caps.MaxRunningHigh = d.Uint32()
	t.Caps.MaxRunningDeadline = d.Uint32()
	for i := range t.classTags {
		t.classTags[i] = VirtualTime(d.Varint())
	}
	for i := range t.RunningByClass {
		t.RunningByClass[i] = d.Uint32()
	}
	t.RunningDeadline = d.Uint32()
	if version < 4 {
		return t
	}
	t.GroupCap = d.Uint32()
	t.GroupOrder = GroupOrder(d.Enum("group order", 2))
	t.MaxGroups = d.Uint32()
	t.Groups = d.Uint32()
	for i := range t.groupNow {
		t.groupNow[i] = VirtualTime(d.Varint())
	}
	if version >= 5 {
		decodeTenantLevers(d, &t)
	}
	if version >= 6 {
		t.pool = PoolID(min(d.Uint32(), MaxPoolSlots))
		if t.pool != DefaultPool {
			t.owner = d.Uint32()
		}
	}
	return t
}

func encodeJob(e *Encoder, j *Job, version int) {
	e.Uvarint(uint64(j.ID))
	e.Uvarint(uint64(j.Tenant))
	e.Byte(byte(j.Size))
	e.Byte(byte(j.State))
	e.Byte(byte(j.Cancel))
	e.Uvarint(uint64(j.Attempt))
	e.Uvarint(uint64(j.Failures))
	e.Uvarint(uint64(j.MaxAttempts))
	e.Uvarint(uint64(j.Settled))
	e.String(j.Worker)
	e.Varint(int64(j.AckDeadline))
	e.Varint(int64(j.LeaseExpires))
	e.Varint(int64(j.TimeoutAt))
	e.Varint(j.EstCostMs)
	e.Varint(j.TimeoutMs)
	e.Varint(int64(j.StartTag))
	e.Varint(int64(j.Weight))
	e.Varint(j.CPUMs)
	e.Varint(int64(j.SubmittedAt))
	e.Varint(int64(j.EndedAt))
	group, key, typ, payload := j.textParts()
	e.String(key)
	e.String(typ)
	e.String(payload)
	if j.Result != nil {
		e.Byte(1)
		e.Varint(int64(j.Result.ExitCode))
		e.String(j.Result.StderrTail)
	} else {
		e.Byte(0)
	}
	if version < 2 {
		return
	}
	// Version 2.
	e.Byte(byte(j.Class))
	e.Byte(byte(j.EstSource))
	e.Varint(int64(j.DeadlineAt()))
	if version < 3 {
		return
	}
	// Version 3.
	e.Varint(int64(j.submitWall))
	e.Varint(int64(j.endWall))
	if j.Result != nil {
		e.String(j.Result.StdoutTail)
	}
	if version < 4 {
		return
	}
	// Version 4.
	e.String(group)
	if version < 5 {
		return
	}
	// Version 5.
	encodeJobLevers(e, j)
}

func decodeJob(d *Decoder, version int) Job {
	var j Job
	j.ID = JobID(d.Uvarint())
	j.Tenant = d.Uint32()
	j.Size = Size(d.Enum("size", NumSizes))
	j.State = State(d.Enum("state", byte(numStates)))
	j.Cancel = CancelReason(d.Enum("cancel reason", 3))
	j.Attempt = d.Uint32()
	j.Failures = d.Uint16()
	j.MaxAttempts = d.Uint16()
	j.Settled = d.Uint32()
	j.Worker = d.String()
	j.AckDeadline = Time(d.Varint())
	j.LeaseExpires = Time(d.Varint())
	j.TimeoutAt = Time(d.Varint())
	j.EstCostMs = d.Varint()
	j.TimeoutMs = d.Varint()
	j.StartTag = VirtualTime(d.Varint())
	j.Weight = Weight(d.Varint())
	j.CPUMs = d.Varint()
	j.SubmittedAt = Time(d.Varint())
	j.EndedAt = Time(d.Varint())
	key, typ, payload := d.String(), d.String(), d.String()
	if d.Bool() {
		j.Result = &RunResult{ExitCode: int32(d.Varint()), StderrTail: d.String()}
	}
	var deadlineAt Time
	if version >= 2 {
		j.Class = Class(d.Enum("class", NumClasses))
		j.EstSource = EstSource(d.Enum("estimate source", byte(numEstSources)))
		deadlineAt = Time(d.Varint())
		if deadlineAt < 0 {
			d.Fail("job %d has a negative deadline", j.ID)
		}
	}
	if version >= 3 {
		j.submitWall = decodeWallDelta(d)
		j.endWall = decodeWallDelta(d)
		if j.Result != nil {
			j.Result.StdoutTail = d.String()
		}
	}
	var group string
	if version >= 4 {
		group = d.String()
		if group != "" && ValidateGroupName(group) != nil {
			d.Fail("job %d has an invalid group name %q", j.ID, group)
		}
	}
	j.setText(deadlineAt, group, key, typ, payload)
	if version >= 5 {
		decodeJobLevers(d, &j)
	}
	return j
}

// decodeWallDelta reads a WallDelta, which must fit in 32 bits.
func decodeWallDelta(d *Decoder) WallDelta {
	x := d.Varint()
	if x < -1<<31 || x > 1<<31-1 {
		d.Fail("wall-clock delta %d exceeds 32 bits", x)
		return 0
	}
	return WallDelta(x)
}

// Decode reads a state written by View.Encode, rebuilds every derived
// structure, and runs Verify: a state whose counters do not match its job
// table is refused.
func Decode(d *Decoder) (*Scheduler, error) {
	version := int(d.Uvarint())
	if d.Err() == nil && (version < 1 || version > stateVersion) {
		return nil, fmt.Errorf("%w: state encoding version %d (this build reads 1 to %d)", ErrCorrupt, version, stateVersion)
	}
	cfg := decodeConfig(d, version)
	var vnow [NumClasses]VirtualTime
	if version < 2 {
		vnow[ClassNormal] = VirtualTime(d.Varint())
	} else {
		for i := range vnow {
			vnow[i] = VirtualTime(d.Varint())
		}
	}
	nextJob := JobID(d.Uvarint())
	if err := d.Err(); err != nil {
		return nil, err
	}
	if nextJob > MaxID {
		return nil, fmt.Errorf("%w: next job ID %d is past %d", ErrCorrupt, nextJob, uint64(MaxID))
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	s, _ := New(cfg)
	s.pools[DefaultPool].vnow, s.nextJob = vnow, nextJob
	nt := d.Uvarint()
	for i := uint64(0); i < nt && d.Err() == nil; i++ {
		t := decodeTenant(d, version)
		if d.Err() != nil {
			break
		}
		if t.pool != DefaultPool {
			// A lane: its tenant's record comes before it, with its name.
			if o := s.tenants.Get(uint64(t.owner)); uint64(t.owner) >= i || o == nil || o.pool != DefaultPool || o.Name != t.Name || o.Deleted != t.Deleted {
				return nil, fmt.Errorf("%w: tenant %d is a lane of pool %d of tenant %d, which is not its tenant", ErrCorrupt, i, t.pool, t.owner)
			}
			s.tenants.Put(i, t)
			s.rt = append(s.rt, tenantRT{})
			continue
		}
		// A name may repeat only after tombstones: a tenant deleted and
		// created again gets a new index, and the name resolves to it.
		if prev, dup := s.byName[t.Name]; (dup && !s.tenants.Get(uint64(prev)).Deleted) || t.Name == "" {
			return nil, fmt.Errorf("%w: tenant %d has a duplicate or empty name %q", ErrCorrupt, i, t.Name)
		}
		s.tenants.Put(i, t)
		s.byName[t.Name] = uint32(i)
		s.rt = append(s.rt, tenantRT{})
	}
	nj := d.Uvarint()
	var last JobID
	for i := uint64(0); i < nj && d.Err() == nil; i++ {
		j := decodeJob(d, version)
		if d.Err() != nil {
			break
		}
		if j.ID <= last || j.ID >= nextJob || uint64(j.Tenant) >= nt || j.State == StateNone {
			return nil, fmt.Errorf("%w: job record %d (id %d, tenant %d, state %s) is out of order or range", ErrCorrupt, i, j.ID, j.Tenant, j.State)
		}
		last = j.ID
		s.jobs.Put(uint64(j.ID), j)
	}
	if version >= 2 {
		n := d.Uvarint()
		var prev uint64
		for i := uint64(0); i < n && d.Err() == nil; i++ {
			slot := d.Uvarint()
			st := TypeStat{Tenant: d.Uint32(), Type: d.String(), EMAMs: d.Varint(), Samples: d.Uint32(), UpdatedAt: Time(d.Varint())}
			if d.Err() != nil {
				break
			}
			if (i > 0 && slot <= prev) || slot >= 1<<40 {
				return nil, fmt.Errorf("%w: estimate record %d (slot %d) is out of order", ErrCorrupt, i, slot)
			}
			prev = slot
			s.types.Put(slot, st)
		}
	}
	if version >= 4 {
		if err := s.decodeGroups(d, version); err != nil {
			return nil, err
		}
	} else {
		s.unnamedGroups()
	}
	if version >= 5 {
		s.decodeLevers(d)
	}
	if version >= 6 {
		if err := s.decodePools(d); err != nil {
			return nil, err
		}
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	if err := s.rebuildEstimates(); err != nil {
		return nil, err
	}
	if err := s.rebuild(); err != nil {
		return nil, err
	}

	if err := s.Verify(); err != nil {
		return nil, err
	}
	return s, nil
}

// decodeGroups reads the group table of a version 4 state.
func (s *Scheduler) decodeGroups(d *Decoder, version int) error {
	n := d.Uvarint()
	var prev groupKey
	for i := uint64(0); i < n && d.Err() == nil; i++ {
		g := Group{Tenant: d.Uint32(), Name: d.String()}
		g.Cap = GroupCap(d.Uint32())
		g.TenantCap = d.Uint32()
		g.Running = d.Uint32()
		g.Queued = d.Uint32()
		for c := range g.tags {
			g.tags[c] = VirtualTime(d.Varint())
		}
		if version >= 5 {
			decodeGroupLevers(d, &g)
		}
		if d.Err() != nil {
			break
		}
		t := s.tenants.Get(uint64(g.Tenant))
		k := groupKey{g.Tenant, g.Name}
		switch {
		case t == nil || t.Deleted:
			return fmt.Errorf("%w: group %d (%q) names a missing or deleted tenant %d", ErrCorrupt, i, g.Name, g.Tenant)
		case i > 0 && (k.tenant < prev.tenant || (k.tenant == prev.tenant && k.name <= prev.name)):
			return fmt.Errorf("%w: group %d (tenant %d, %q) is out of order", ErrCorrupt, i, g.Tenant, g.Name)
		case g.Name != "" && ValidateGroupName(g.Name) != nil, g.Name == "" && !g.Empty(), g.GroupSettings.Validate() != nil:
			return fmt.Errorf("%w: group %d (tenant %d, %q) has a bad name or settings", ErrCorrupt, i, g.Tenant, g.Name)
		}
		prev = k
		s.groups.Put(i, g)
		s.linkGroup(g.Tenant, uint32(i), g.Name)
	}
	s.gnext = n
	return d.Err()
}

// unnamedGroups creates, for a state of version 3 or older, the unnamed
// group of every tenant with a queued or live job (their counters are
// checked by Verify).
func (s *Scheduler) unnamedGroups() {
	s.jobs.View().Each(func(_ uint64, j *Job) bool {
		if j.State != Queued && !j.State.Live() {
			return true
		}
		gs, ok := s.groupSlot(j.Tenant, "")
		if !ok {
			gs = s.newGroup(j.Tenant, "", GroupSettings{})
		}
		g := s.groups.Mut(uint64(gs))
		if j.State == Queued {
			g.Queued++
		} else {
			g.Running++
		}
		return true
	})
}

// rebuild derives the queues, trees, heaps, deadlines and ended list from
// the tables.
func (s *Scheduler) rebuild() error {
	s.queued = 0
	for _, p := range s.pools {
		p.queuedFair = [NumClasses]uint64{}
		if p.members != nil {
			p.members = p.members[:0]
		}
		p.initHeaps()
	}
	for ti := range s.rt {
		s.rt[ti].lanes = nil
	}
	for ti := range s.rt {
		if p := s.tenants.Get(uint64(ti)).pool; int(p) >= len(s.pools) {
			return fmt.Errorf("%w: tenant %d is a lane of pool %d, which the state does not hold", ErrCorrupt, ti, p)
		}
		s.linkLane(uint32(ti))
	}
	s.deadlines = deadlineHeap{}
	s.ended = endedQueue{}
	s.deadAll = endedQueue{}
	s.dead = nil
	s.grouped = 0
	var err error
	s.jobs.View().Each(func(_ uint64, j *Job) bool {
		if j.Group() != "" {
			s.grouped++
		}
		if j.State == Queued || j.State.Live() || j.State == Scheduled {
			if _, ok := s.groupSlot(j.Tenant, j.Group()); !ok {
				err = fmt.Errorf("%w: job %d (%s) is in group %q, which the state does not hold", ErrCorrupt, j.ID, j.State, j.Group())
				return false
			}
		}
		if !j.State.Terminal() {
			s.rt[j.Tenant].payload += uint64(len(j.Payload()))
		}
		switch {
		case j.State == Queued:
			gs, _ := s.groupSlot(j.Tenant, j.Group())
			q := s.queueMut(gs, j.Class, j.Size)
			if j.deadline {
				if !j.Lapsed {
					q.deadlines().push(dlEntry{at: j.DeadlineAt(), id: j.ID})
				}
			} else {
				if !j.Lapsed {
					q.fifo.pushBack(j.ID)
				}
				s.pool(j.Tenant).queuedFair[j.Class]++
				s.rt[j.Tenant].queuedFair[j.Class]++
			}
			s.queued++
		case j.State == Assigned:
			s.deadlines.push(deadline{at: j.AckDeadline, job: j.ID, attempt: j.Attempt, kind: InExpireAck})
		case j.State == Running:
			s.deadlines.push(deadline{at: j.LeaseExpires, job: j.ID, attempt: j.Attempt, kind: InExpireLease})
			if j.TimeoutAt != 0 {
				s.deadlines.push(deadline{at: j.TimeoutAt, job: j.ID, attempt: j.Attempt, kind: InExpireTimeout})
			}
		case j.State.Terminal():
			s.noteEnded(j)
		}
		return true
	})
	if err != nil {
		return err
	}
	s.rebuildDelays()
	s.rebuildRates()
	for ti := range s.rt {
		t := s.tenants.Get(uint64(ti))
		rt := &s.rt[ti]
		if t.Deleted {
			continue
		}
		if t.GroupOrder == GroupFair {
			rt.gmax = new([NumClasses]tagMax)
		}
		for _, gs := range rt.groups {
			s.joinHeaps(uint32(ti), gs)
			for i := range s.grt[gs].nq {
				q := s.grt[gs].at(i)
				rt.slotMut(q.class, q.size)
				s.refresh(uint32(ti), gs, q)
			}
		}
	}
	s.rebuildOrder()
	return nil
}

// ErrVerify marks a state whose derived counters or indexes disagree with
// its job table.
var ErrVerify = errors.New("state verification failed")

// Verify recomputes every counter from the job table and checks it, checks
// every group (its counters, its queues' heads and their nodes, that it
// would not have been forgotten), every tree of every slot (order,
// balance, aggregates, membership), the candidate rule's decision in every
// slot against a brute-force one, that every tenant sits in exactly the
// heaps that decision calls for, and that the estimate index matches its
// table. It returns an error listing each difference (at most 20).
func (s *Scheduler) Verify() error {
	var problems []string
	report := func(format string, args ...any) {
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	type counts struct {
		running    uint32
		bySize     [NumSizes]uint32
		byClass    [NumClasses]uint32
		deadline   uint32
		inflight   int64
		queued     [NumSizes]uint32
		queuedFair [NumClasses]uint32
		payload    uint64
	}
	// Per group and (class, size): the oldest queued job without a
	// deadline and the most urgent deadline job.
	type gheads struct{ fifo, dl headInfo }
	type gcounts struct {
		running, queued uint32
		scheduled       uint32
		heads           map[[2]uint8]*gheads
	}
	nt := s.tenants.Len()
	derived := make([]counts, nt)
	gderived := map[groupKey]*gcounts{}
	ungrouped := make([]*gcounts, nt) // the tenants' jobs outside a named group
	names := 0                        // tenants the name index resolves to
	var queued, grouped uint64
	queuedFair := make([][NumClasses]uint64, len(s.pools))
	s.jobs.View().Each(func(_ uint64, j *Job) bool {
		if j.Group() != "" {
			grouped++
		}
		if int(j.Tenant) >= nt {
			report("job %d refers to tenant %d of %d", j.ID, j.Tenant, nt)
			return true
		}
		c := &derived[j.Tenant]
		if !j.State.Terminal() {
			c.payload += uint64(len(j.Payload()))
		}
		var gc *gcounts
		if j.State == Queued || j.State.Live() || j.State == Scheduled {
			if j.Group() == "" { // most jobs: no map lookup
				if gc = ungrouped[j.Tenant]; gc == nil {
					gc = &gcounts{heads: map[[2]uint8]*gheads{}}
					ungrouped[j.Tenant] = gc
				}
			} else {
				k := groupKey{j.Tenant, j.Group()}
				if gc = gderived[k]; gc == nil {
					gc = &gcounts{heads: map[[2]uint8]*gheads{}}
					gderived[k] = gc
				}
			}
		}
		switch {
		case j.State == Queued:
			c.queued[j.Size]++
			gc.queued++
			queued++
			hk := [2]uint8{uint8(j.Class), uint8(j.Size)}
			h := gc.heads[hk]
			if h == nil {
				h = &gheads{}
				gc.heads[hk] = h
			}
			x := headInfo{id: j.ID, cost: j.EstCostMs, at: j.DeadlineAt(), ok: true}
			// A lapsed job counts as queued but is out of its queue.
			if !j.deadline {
				queuedFair[s.rt[j.Tenant].pool][j.Class]++
				c.queuedFair[j.Class]++
				if !h.fifo.ok && !j.Lapsed {
					h.fifo = x
				}
			} else if !j.Lapsed && (!h.dl.ok || dlBefore(dlEntry{x.at, x.id}, dlEntry{h.dl.at, h.dl.id})) {
				h.dl = x
			}
		case j.State == Scheduled:
			gc.scheduled++
		case j.State.Live():
			c.running++
			gc.running++
			c.bySize[j.Size]++
			c.byClass[j.Class]++
			if j.deadline {
				c.deadline++
			}
			c.inflight += j.EstCostMs
			if j.Worker == "" {
				report("job %d is %s without a worker", j.ID, j.State)
			}
		}
		if j.ID >= s.nextJob {
			report("job %d is at or above next id %d", j.ID, s.nextJob)
		}
		if j.Failures > j.MaxAttempts {
			report("job %d has %d failures over max_attempts %d", j.ID, j.Failures, j.MaxAttempts)
		}
		if j.Class >= NumClasses || j.DeadlineAt() < 0 || j.deadline != (j.DeadlineAt() != 0) {
			report("job %d has class %d and deadline %v at %d", j.ID, j.Class, j.deadline, j.DeadlineAt())
		}
		return true
	})
	for t, gc := range ungrouped {
		if gc != nil {
			gderived[groupKey{uint32(t), ""}] = gc
		}
	}
	if queued != s.queued {
		report("queued total is %d, job table says %d", s.queued, queued)
	}
	if grouped != s.grouped {
		report("jobs of a named group: %d, job table says %d", s.grouped, grouped)
	}
	for i, p := range s.pools {
		if queuedFair[i] != p.queuedFair {
			report("pool %s: queued without a deadline per class is %v, job table says %v", p.Name, p.queuedFair, queuedFair[i])
		}
	}

	// The groups. Each tenant's tagMax is checked as it reads, with its
	// pending tags written (to copies).
	tagMaxes := make([]*[NumClasses]tagMax, len(s.rt))
	for i := range s.rt {
		rt := &s.rt[i]
		if rt.gmax == nil {
			if rt.npend != 0 {
				report("tenant %d has %d pending group tags and no tagMax", i, rt.npend)
			}
			continue
		}
		cp := new([NumClasses]tagMax)
		for c := range cp {
			cp[c].v = slices.Clone(rt.gmax[c].v)
		}
		for _, p := range rt.pend[:rt.npend] {
			cp[p.class].set(int(p.pos), p.tag)
		}
		tagMaxes[i] = cp
	}
	named := make([]uint32, nt)
	seen := map[groupKey]bool{}
	ownNames := map[groupKey]bool{}
	s.groups.View().Each(func(slot uint64, g *Group) bool {
		gs := uint32(slot)
		k := groupKey{g.Tenant, g.Name}
		t := s.tenants.Get(uint64(g.Tenant))
		if t == nil || t.Deleted || int(g.Tenant) >= len(s.rt) {
			report("group %q (slot %d) belongs to a missing or deleted tenant %d", g.Name, gs, g.Tenant)
			return true
		}
		if seen[k] {
			report("tenant %q has two groups %q", t.Name, g.Name)
		}
		seen[k] = true
		// max_groups counts names: a group of one name in several pools
		// counts once, on its tenant's own record.
		if ok := (groupKey{s.owner(g.Tenant), g.Name}); g.Name != "" && !ownNames[ok] {
			ownNames[ok] = true
			named[ok.tenant]++
		}
		if got, ok := s.groupSlot(g.Tenant, g.Name); !ok || got != gs {
			report("tenant %q group %q (slot %d) is not indexed", t.Name, g.Name, gs)
		}
		if int(gs) >= len(s.grt) || s.grt[gs].pos < 0 || int(s.grt[gs].pos) >= len(s.rt[g.Tenant].groups) || s.rt[g.Tenant].groups[s.grt[gs].pos] != gs {
			report("tenant %q group %q (slot %d) is not in its tenant's list", t.Name, g.Name, gs)
			return true
		}
		gc := gderived[k]
		if gc == nil {
			gc = &gcounts{}
		}
		if g.Running != gc.running || g.Queued != gc.queued {
			report("tenant %q group %q counters running=%d queued=%d, job table says running=%d queued=%d", t.Name, g.Name, g.Running, g.Queued, gc.running, gc.queued)
		}
		if gc.running == 0 && gc.queued == 0 && gc.scheduled == 0 && !g.kept() {
			report("tenant %q group %q has no job and no setting and was not forgotten", t.Name, g.Name)
		}
		if (g.Name == "" && !g.Empty()) || (g.Name != "" && ValidateGroupName(g.Name) != nil) || g.GroupSettings.Validate() != nil {
			report("tenant %q group %q has a bad name or settings %+v", t.Name, g.Name, g.GroupSettings)
		}
		blocked := s.groupBlocked(t, g)
		fair := t.GroupOrder == GroupFair
		nq := 0
		for i := range s.grt[gs].nq {
			q := s.grt[gs].at(i)
			var h gheads
			if x := gc.heads[[2]uint8{uint8(q.class), uint8(q.size)}]; x != nil {
				h = *x
				nq++
			}
			for _, side := range []struct {
				node int32
				want headInfo
				dl   bool
			}{{q.fnode, h.fifo, false}, {q.dnode, h.dl, true}} {
				if !side.want.ok {
					if side.node != 0 {
						report("tenant %q group %q %s %s has a head node %d and no queued job", t.Name, g.Name, q.class, q.size, side.node)
					}
					continue
				}
				if side.node <= 0 || int(side.node) >= len(s.nodes.n) {
					report("tenant %q group %q %s %s: head job %d has no node", t.Name, g.Name, q.class, q.size, side.want.id)
					continue
				}
				n := &s.nodes.n[side.node]
				key := g.tags[q.class]
				if side.dl {
					key = VirtualTime(side.want.at)
				}
				if n.id != side.want.id || n.cost != side.want.cost || n.group != gs || n.dl != side.dl || n.gb != blocked || n.key != key {
					report("tenant %q group %q %s %s: node %+v, head job %d cost %d key %d blocked %v", t.Name, g.Name, q.class, q.size,
						*n, side.want.id, side.want.cost, key, blocked)
				}
				if wantOrd, wantCst := !blocked && (side.dl || fair), !blocked && !side.dl && fair; n.inOrd != wantOrd || n.inCst != wantCst {
					report("tenant %q group %q %s %s: node of job %d in order/cost trees %v/%v, want %v/%v", t.Name, g.Name, q.class, q.size, n.id,
						n.inOrd, n.inCst, wantOrd, wantCst)
				}
			}
		}
		if nq != len(gc.heads) {
			report("tenant %q group %q has queued jobs in %d queues and %d of them are known", t.Name, g.Name, len(gc.heads), nq)
		}
		if hp := tagMaxes[g.Tenant]; hp != nil {
			for c := range Class(NumClasses) {
				if i := len(hp[c].v)/2 + int(s.grt[gs].pos); i >= len(hp[c].v) || hp[c].v[i] != g.tags[c] {
					report("tenant %q group %q: its %s tag %s is not in the tenant's tagMax", t.Name, g.Name, c, g.tags[c])
				}
			}
		}
		return true
	})
	for k := range gderived {
		if !seen[k] {
			report("tenant %d has queued or live jobs in group %q, which does not exist", k.tenant, k.name)
		}
	}
	if len(s.gindex)+countUnnamed(s.rt) != s.groups.Len() {
		report("group index has %d entries for %d groups", len(s.gindex)+countUnnamed(s.rt), s.groups.Len())
	}

	for i := range nt {
		ti := uint32(i)
		t := s.tenants.Get(uint64(i))
		if t == nil {
			report("tenant slot %d is empty", i)
			continue
		}
		c := &derived[i]
		if t.Running != c.running || t.RunningBySize != c.bySize || t.RunningByClass != c.byClass || t.RunningDeadline != c.deadline ||
			t.InflightCPUMs != c.inflight || t.Queued != c.queued {
			report("tenant %q counters running=%d by_size=%v by_class=%v deadline=%d inflight=%d queued=%v, job table says running=%d by_size=%v by_class=%v deadline=%d inflight=%d queued=%v",
				t.Name, t.Running, t.RunningBySize, t.RunningByClass, t.RunningDeadline, t.InflightCPUMs, t.Queued,
				c.running, c.bySize, c.byClass, c.deadline, c.inflight, c.queued)
		}
		if t.Groups != named[i] {
			report("tenant %q counts %d named groups, the group table holds %d", t.Name, t.Groups, named[i])
		}
		if t.Deleted && (c.running > 0 || c.queued != [NumSizes]uint32{}) {
			report("deleted tenant %q has live jobs", t.Name)
		}
		rt := &s.rt[i]
		if t.pool != DefaultPool {
			s.verifyLane(ti, t, report)
		} else {
			switch got, ok := s.byName[t.Name]; {
			case ok && got == ti:
				names++
			case !ok || got < ti || !t.Deleted:
				// Only a tombstone of an earlier incarnation may be
				// shadowed, by a later index of the same name.
				report("tenant %q is not indexed by name", t.Name)
			}
		}
		if rt.payload != c.payload {
			report("tenant %q holds %d payload bytes in unfinished jobs, job table says %d", t.Name, rt.payload, c.payload)
		}
		if rt.queuedFair != c.queuedFair {
			report("tenant %q queued without a deadline per class %v, job table says %v", t.Name, rt.queuedFair, c.queuedFair)
		}
		if (rt.gmax != nil) != (t.GroupOrder == GroupFair && !t.Deleted) {
			report("tenant %q (group_order %s) has tagMax trees: %v", t.Name, t.GroupOrder, rt.gmax != nil)
		}
		if rt.gmax != nil {
			for cl := range Class(NumClasses) {
				v := tagMaxes[ti][cl].v
				n := len(v) / 2
				if n < len(rt.groups) {
					report("tenant %q %s tagMax has %d leaves for %d groups", t.Name, cl, n, len(rt.groups))
					continue
				}
				for k := len(rt.groups); k < n; k++ {
					if v[n+k] != noTag {
						report("tenant %q %s tagMax leaf %d is unused and holds %s", t.Name, cl, k, v[n+k])
					}
				}
				for k := 1; k < n; k++ {
					if v[k] != max(v[2*k], v[2*k+1]) {
						report("tenant %q %s tagMax node %d is not the higher of its children", t.Name, cl, k)
					}
				}
			}
		}
		s.verifySlots(ti, t, report)
		for cl := range Class(NumClasses) {
			e := s.pool(ti).maxTag[cl].get(rt.local)
			if t.Deleted {
				if e != nil {
					report("deleted tenant %q is in the %s idle-rule heap", t.Name, cl)
				}
				continue
			}
			if (e == nil && t.Tag(cl) != 0) || (e != nil && e.tag != t.Tag(cl)) {
				report("tenant %q %s tag %s: idle-rule heap entry %v", t.Name, cl, t.Tag(cl), e)
			}
		}
	}
	if len(s.byName) != names {
		report("name index has %d entries for %d names", len(s.byName), names)
	}
	s.verifyEstimates(report)
	s.verifyDelays(report)
	s.verifyQueues(report)
	s.verifyRates(report)
	s.verifyDeadLetters(report)
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrVerify, strings.Join(problems, "; "))
}

func countUnnamed(rts []tenantRT) int {
	n := 0
	for i := range rts {
		if rts[i].unnamed != 0 {
			n++
		}
	}
	return n
}

// verifySlots checks every slot of tenant ti: its trees, the candidate
// rule's decision (recomputed by brute force over the group heads), and
// the tenant's entries in the heaps.
func (s *Scheduler) verifySlots(ti uint32, t *Tenant, report func(string, ...any)) {
	rt := &s.rt[ti]
	p := &s.nodes
	fair := t.GroupOrder == GroupFair
	var buf Tenant
	lt := s.limitsInto(ti, &buf)
	room := inflightRoom(lt)
	pl, x := s.pools[rt.pool], rt.local
	if t.Deleted {
		for c := range Class(NumClasses) {
			for sz := range NumSizes {
				if pl.heapA[c][sz].has(x) || pl.heapB[c][sz].has(x) || pl.dheap[c][sz].has(x) {
					report("deleted tenant %q is in a %s %s heap", t.Name, c, Size(sz))
				}
			}
		}
		if len(rt.groups) != 0 || rt.other != [NumClasses - 1]*[NumSizes]slotRT{} || rt.normal != [NumSizes]slotRT{} {
			report("deleted tenant %q keeps groups or slots", t.Name)
		}
		return
	}
	if rt.room != room {
		report("tenant %q in-flight room %d, its counters say %d", t.Name, rt.room, room)
	}
	for sz := range NumSizes {
		held := false
		for _, cl := range classOrder {
			b := bit(cl, sz)
			sl := rt.slot(cl, Size(sz))
			var heads []int32 // every head node of the slot, from the groups
			if sl != nil {
				for _, gs := range rt.groups {
					if q := s.queue(gs, cl, Size(sz)); q != nil {
						for _, x := range [2]int32{q.fnode, q.dnode} {
							if x > 0 && int(x) < len(p.n) {
								heads = append(heads, x)
							}
						}
					}
				}
				s.verifyTrees(t, cl, Size(sz), sl, heads, fair, report)
			}
			// The candidate rule by brute force.
			uf, ud := uniformBlock(lt, cl, Size(sz), s.tenantGate(lt) || (rt.subscribed && t.Running >= rt.burst))
			var oldest, fifo, dl *hnode
			for _, x := range heads {
				n := &p.n[x]
				tb := tenantBlocks(n, uf, ud, room)
				if n.gb && !tb {
					continue // passed over
				}
				if oldest == nil || n.id < oldest.id {
					oldest = n
				}
				if tb || n.gb {
					continue
				}
				switch {
				case n.dl:
					if dl == nil || dlBefore(dlEntry{Time(n.key), n.id}, dlEntry{Time(dl.key), dl.id}) {
						dl = n
					}
				case fair:
					if fifo == nil || n.key < fifo.key || (n.key == fifo.key && n.id < fifo.id) {
						fifo = n
					}
				default:
					if fifo == nil || n.id < fifo.id {
						fifo = n
					}
				}
			}
			if oldest != nil && tenantBlocks(oldest, uf, ud, room) {
				held = true
			}
			if held {
				fifo, dl = nil, nil
			}
			if got := rt.heldBits&b != 0; got != held {
				report("tenant %q %s %s held %v, the candidate rule says %v", t.Name, cl, Size(sz), got, held)
			}
			if got, want := rt.openBits&b != 0, !held && !uf; got != want {
				report("tenant %q %s %s open %v, want %v", t.Name, cl, Size(sz), got, want)
			}
			var wantF, wantD candRef
			if fifo != nil {
				wantF = candRef{id: fifo.id, group: fifo.group}
			}
			if dl != nil {
				wantD = candRef{id: dl.id, group: dl.group, at: Time(dl.key)}
			}
			if (rt.fairBits&b != 0) != (fifo != nil) || (rt.dlBits&b != 0) != (dl != nil) {
				report("tenant %q %s %s: candidate bits %v/%v, the candidate rule says %v/%v", t.Name, cl, Size(sz),
					rt.fairBits&b != 0, rt.dlBits&b != 0, fifo != nil, dl != nil)
			}
			if sl != nil && (sl.fifo != wantF || sl.dlc != wantD) {
				report("tenant %q %s %s: candidates %+v/%+v, the candidate rule says %+v/%+v", t.Name, cl, Size(sz), sl.fifo, sl.dlc, wantF, wantD)
			}
			inA, inB := pl.heapA[cl][sz].has(x), pl.heapB[cl][sz].has(x)
			if (inA || inB) != (fifo != nil) || (inA && inB) {
				report("tenant %q %s %s: in order heaps %v/%v, candidate %v", t.Name, cl, Size(sz), inA, inB, fifo != nil)
			}
			// A stored key may lag behind a tag increase, never ahead.
			real := hentry{tag: t.Tag(cl), seq: wantF.id, tenant: x, tier: t.Tier}
			var placed JobID
			for _, e := range []*hentry{pl.heapA[cl][sz].get(x), pl.heapB[cl][sz].get(x)} {
				if e != nil {
					placed = e.seq
					if !lagging(e, &real) {
						report("tenant %q %s %s: heap key %+v is ahead of the real key %+v", t.Name, cl, Size(sz), *e, real)
					}
				}
			}
			if sl != nil && sl.fifoPlaced != placed {
				report("tenant %q %s %s: slot placed %d, heaps hold %d", t.Name, cl, Size(sz), sl.fifoPlaced, placed)
			}
			e := pl.dheap[cl][sz].get(x)
			if (e != nil) != (dl != nil) {
				report("tenant %q %s %s: in the deadline heap %v, deadline candidate %v", t.Name, cl, Size(sz), e != nil, dl != nil)
			} else if e != nil && (e.seq != wantD.id || e.tag != VirtualTime(wantD.at)) {
				report("tenant %q %s %s: deadline heap key %+v, candidate is job %d at %d", t.Name, cl, Size(sz), *e, wantD.id, wantD.at)
			}
			if sl != nil && ((e == nil && sl.dlPlaced != 0) || (e != nil && sl.dlPlaced != e.seq)) {
				report("tenant %q %s %s: deadline slot placed %d differs from its heap's", t.Name, cl, Size(sz), sl.dlPlaced)
			}
		}
	}
}

// verifyTrees checks the trees of one slot: each holds exactly the heads
// it should, in order, balanced, with exact aggregates.
func (s *Scheduler) verifyTrees(t *Tenant, c Class, sz Size, sl *slotRT, heads []int32, fair bool, report func(string, ...any)) {
	p := &s.nodes
	want := [4]map[int32]bool{{}, {}, {}, {}} // byID, fair, dl, cost
	for _, x := range heads {
		n := &p.n[x]
		want[0][x] = true
		if !n.gb {
			switch {
			case n.dl:
				want[2][x] = true
			case fair:
				want[1][x] = true
				want[3][x] = true
			}
		}
	}
	for k, tr := range []struct {
		root int32
		t    int
	}{{sl.byID, treeID}, {sl.fair, treeOrder}, {sl.dl, treeOrder}, {sl.cost, treeCost}} {
		got := map[int32]bool{}
		var prev int32
		var check func(x int32) (h int8, ok bool)
		check = func(x int32) (int8, bool) {
			if x == 0 {
				return 0, true
			}
			if x < 0 || int(x) >= len(p.n) || got[x] {
				report("tenant %q %s %s tree %d: bad or repeated node %d", t.Name, c, sz, k, x)
				return 0, false
			}
			n := &p.n[x]
			hl, ok1 := check(n.l[tr.t])
			if prev != 0 && !p.less(tr.t, prev, x) {
				report("tenant %q %s %s tree %d: node %d out of order", t.Name, c, sz, k, x)
			}
			prev = x
			got[x] = true
			hr, ok2 := check(n.r[tr.t])
			if !ok1 || !ok2 {
				return 0, false
			}
			if cp := *n; true {
				p.recompute(tr.t, &cp)
				if cp != *n {
					report("tenant %q %s %s tree %d: node %d height or aggregates %+v, recomputed %+v", t.Name, c, sz, k, x, *n, cp)
				}
			}
			if d := hl - hr; d > 1 || d < -1 {
				report("tenant %q %s %s tree %d: node %d out of balance", t.Name, c, sz, k, x)
			}
			return n.ht[tr.t], true
		}
		check(tr.root)
		if len(got) != len(want[k]) {
			report("tenant %q %s %s tree %d holds %d nodes, want %d", t.Name, c, sz, k, len(got), len(want[k]))
			continue
		}
		for x := range got {
			if !want[k][x] {
				report("tenant %q %s %s tree %d holds node %d, which it should not", t.Name, c, sz, k, x)
			}
		}
	}
}

// verifyEstimates checks the estimate table against its index.
func (s *Scheduler) verifyEstimates(report func(string, ...any)) {
	if len(s.est.slots) != s.types.Len() {
		report("estimate index has %d entries for %d records", len(s.est.slots), s.types.Len())
	}
	perTenant := make(map[uint32]int)
	s.types.View().Each(func(slot uint64, st *TypeStat) bool {
		if got, ok := s.est.slots[typeKey{st.Tenant, st.Type}]; !ok || got != slot {
			report("estimate of tenant %d type %q (slot %d) is not indexed", st.Tenant, st.Type, slot)
		}
		t := s.tenants.Get(uint64(st.Tenant))
		if t == nil || t.Deleted {
			report("estimate of type %q refers to a missing or deleted tenant %d", st.Type, st.Tenant)
		}
		if st.Type == "" || len(st.Type) > MaxNameLen || st.Samples == 0 {
			report("estimate of tenant %d type %q has %d samples", st.Tenant, st.Type, st.Samples)
		}
		perTenant[st.Tenant]++
		return true
	})
	for i := range s.rt {
		if n := len(s.rt[i].types); n != perTenant[uint32(i)] || n > MaxJobTypes {
			report("tenant %d lists %d job types, the table holds %d (max %d)", i, n, perTenant[uint32(i)], MaxJobTypes)
		}
	}
}
