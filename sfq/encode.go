package sfq

// The canonical state encoding: a View's Encode and the versions it fits,
// Hash, and the encodings of the configuration, tenants and jobs.

import (
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
)

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
	case v.usesResources():
		version = stateVersion
	case v.usesForms():
		version = stateVersionForms
	case v.details:
		version = stateVersionDetails
	case v.usesPools():
		version = stateVersionPools
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
	if version < 8 {
		return
	}
	// Version 8: whether a run's CPU source or failure was ever kept (a
	// state of version 7 has; version 8 is written for the forms of its
	// jobs, and says it).
	e.Bool(v.details)
	if version < 9 {
		return
	}
	// Version 9: the resources.
	v.encodeResources(e)
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
		if j.Class != ClassNormal || j.deadline() || j.EstSource != EstFromSubmit {
			err = fmt.Errorf("job %d has class %s, a deadline %t, estimate from %s", j.ID, j.Class, j.deadline(), j.EstSource)
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
	if version < 7 {
		return
	}
	e.Uvarint(uint64(c.MaxSnoozes))
	if version < 9 {
		return
	}
	e.Varint(c.ResourceReserveAfterMs)
	e.Uvarint(uint64(c.MaxResources))
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
	c.MaxSnoozes = DefaultMaxSnoozes
	if version >= 7 {
		c.MaxSnoozes = d.Uint16()
	}
	c.ResourceReserveAfterMs = DefaultResourceReserveAfterMs
	if version >= 9 {
		c.ResourceReserveAfterMs = d.Varint()
		c.MaxResources = d.Uint32()
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
	if version >= 7 && j.Result != nil {
		e.Byte(j.Result.detailsByte())
		e.Uvarint(uint64(j.Result.Snoozes))
		e.Varint(j.Result.SnoozeMs)
	}
	if version >= 8 {
		e.Byte(byte(j.Form()))
	}
	if version >= 9 {
		encodeUses(e, j.Uses())
	}
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
	if version >= 7 && j.Result != nil {
		if !j.Result.setDetails(d.Byte()) {
			d.Fail("job %d has a result with unknown details", j.ID)
		}
		j.Result.Snoozes, j.Result.SnoozeMs = d.Uint16(), d.Varint()
		if err := j.Result.checkSnoozes(); err != nil {
			d.Fail("job %d: %v", j.ID, err)
		}
	}
	if version >= 8 {
		j.setRouteClass(uint8(d.Enum("form", byte(FormFunction)+1)))
		if j.Form() == FormFunction && typ == "" {
			d.Fail("job %d is a function job with no kind", j.ID)
		}
	}
	if version >= 9 {
		if us := decodeUses(d, j.ID); len(us) > 0 {
			j.setUses(usesKey(us))
		}
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
