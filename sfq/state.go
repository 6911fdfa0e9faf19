package sfq

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
)

// stateVersion is the version of the canonical state encoding. Version 2
// added priority classes (a virtual_now per class, a finish tag per tenant
// and class, class caps and max_class), deadlines and learned cost
// estimates; version 3 the wall-clock times of a job's submit and end and
// the stdout tail of its result (an ended job also keeps its last worker,
// which needs no new field). Decode still reads versions 1 and 2: their
// jobs show their cluster times as wall times and have no stdout tail,
// and version 1's are all of class normal without a deadline.
const stateVersion = 3

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
}

// Freeze returns an immutable View of the current state in O(chunks) time.
// Writes after it copy the chunks they touch, so the View never changes.
func (s *Scheduler) Freeze() *View {
	return &View{cfg: s.cfg, vnow: s.vnow, nextJob: s.nextJob, tenants: s.tenants.Freeze(), jobs: s.jobs.Freeze(), types: s.types.Freeze()}
}

// Peek returns a View valid only until the next write, for reading while
// no write can happen (on the writer's goroutine, or under its lock).
func (s *Scheduler) Peek() *View { return s.view() }

// view returns a View valid only until the next write, for reading on the
// scheduler's own goroutine.
func (s *Scheduler) view() *View {
	return &View{cfg: s.cfg, vnow: s.vnow, nextJob: s.nextJob, tenants: s.tenants.View(), jobs: s.jobs.View(), types: s.types.View()}
}

// JobCount returns the number of jobs in the view.
func (v *View) JobCount() int { return v.jobs.Len() }

// TenantCount returns the number of tenant slots in the view.
func (v *View) TenantCount() int { return v.tenants.Len() }

// Encode writes the view's canonical encoding. Equal states encode to equal
// bytes on every machine. Per-class values are written in Class order
// (normal, high, critical, low).
func (v *View) Encode(e *Encoder) { v.EncodeVersion(e, stateVersion) }

// EncodeVersion writes the view's canonical encoding of version 1 or 2.
// Version 1 is what builds before classes wrote: a state that FitsVersion1
// reads back from it unchanged; anything else it cannot hold is left out.
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
}

// FitsVersion1 reports, as an error naming the first one, anything the
// version 1 encoding cannot hold: a class other than normal, a deadline, a
// learned estimate or an estimate not submitted, a tenant's max_class,
// allow_deadlines, class or deadline caps, a tag or virtual_now of another
// class, or the estimate settings. O(tenants + jobs).
func (v *View) FitsVersion1() error {
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
	key, typ, payload := j.textParts()
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
		j.Result = &Result{ExitCode: int32(d.Varint()), StderrTail: d.String()}
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
	j.setText(deadlineAt, key, typ, payload)
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
	s.vnow, s.nextJob = vnow, nextJob
	nt := d.Uvarint()
	for i := uint64(0); i < nt && d.Err() == nil; i++ {
		t := decodeTenant(d, version)
		if d.Err() != nil {
			break
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
	if err := d.Err(); err != nil {
		return nil, err
	}
	if err := s.rebuildEstimates(); err != nil {
		return nil, err
	}
	s.rebuild()
	if err := s.Verify(); err != nil {
		return nil, err
	}
	return s, nil
}

// rebuild derives the queues, heaps, deadlines and ended list from the
// tables.
func (s *Scheduler) rebuild() {
	s.queued = 0
	s.queuedFair = [NumClasses]uint64{}
	s.reap = deadlineHeap{}
	s.ended = endedQueue{}
	s.jobs.View().Each(func(_ uint64, j *Job) bool {
		switch {
		case j.State == Queued:
			cr := s.rt[j.Tenant].class(j.Class)
			if j.deadline {
				cr.deadlines(j.Size).push(dlEntry{at: j.DeadlineAt(), id: j.ID})
			} else {
				cr.fifo[j.Size].pushBack(j.ID)
				s.queuedFair[j.Class]++
			}
			s.queued++
		case j.State == Assigned:
			s.reap.push(deadline{at: j.AckDeadline, job: j.ID, attempt: j.Attempt, kind: EvExpireAck})
		case j.State == Running:
			s.reap.push(deadline{at: j.LeaseExpires, job: j.ID, attempt: j.Attempt, kind: EvExpireLease})
			if j.TimeoutAt != 0 {
				s.reap.push(deadline{at: j.TimeoutAt, job: j.ID, attempt: j.Attempt, kind: EvExpireTimeout})
			}
		case j.State.Terminal():
			s.ended.push(j.EndedAt, j.ID)
		}
		return true
	})
	s.rebuildOrder()
}

// ErrVerify marks a state whose derived counters or indexes disagree with
// its job table.
var ErrVerify = errors.New("state verification failed")

// Verify recomputes every counter from the job table and checks it, and
// checks that every tenant sits in exactly the heaps its queues, caps and
// the candidate rule call for, and that the estimate index matches its
// table. It returns an error listing each difference (at most 20).
func (s *Scheduler) Verify() error {
	var problems []string
	report := func(format string, args ...any) {
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	type counts struct {
		running  uint32
		bySize   [NumSizes]uint32
		byClass  [NumClasses]uint32
		deadline uint32
		inflight int64
		queued   [NumSizes]uint32
		fifo, dl [NumSizes][NumClasses]headInfo // oldest queued job, earliest deadline job
	}
	nt := s.tenants.Len()
	derived := make([]counts, nt)
	names := 0 // tenants the name index resolves to
	var queued uint64
	var queuedFair [NumClasses]uint64
	s.jobs.View().Each(func(_ uint64, j *Job) bool {
		if int(j.Tenant) >= nt {
			report("job %d refers to tenant %d of %d", j.ID, j.Tenant, nt)
			return true
		}
		c := &derived[j.Tenant]
		switch {
		case j.State == Queued:
			c.queued[j.Size]++
			queued++
			h := headInfo{id: j.ID, cost: j.EstCostMs, at: j.DeadlineAt(), ok: true}
			if !j.deadline {
				queuedFair[j.Class]++
				if !c.fifo[j.Size][j.Class].ok {
					c.fifo[j.Size][j.Class] = h
				}
			} else if old := &c.dl[j.Size][j.Class]; !old.ok || dlBefore(dlEntry{h.at, h.id}, dlEntry{old.at, old.id}) {
				*old = h
			}
		case j.State.Live():
			c.running++
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
	if queued != s.queued {
		report("queued total is %d, job table says %d", s.queued, queued)
	}
	if queuedFair != s.queuedFair {
		report("queued without a deadline per class is %v, job table says %v", s.queuedFair, queuedFair)
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
		if t.Deleted && (c.running > 0 || c.queued != [NumSizes]uint32{}) {
			report("deleted tenant %q has live jobs", t.Name)
		}
		switch got, ok := s.byName[t.Name]; {
		case ok && got == ti:
			names++
		case !ok || got < ti || !t.Deleted:
			// Only a tombstone of an earlier incarnation may be
			// shadowed, by a later index of the same name.
			report("tenant %q is not indexed by name", t.Name)
		}
		rt := &s.rt[i]
		for sz := range NumSizes {
			var h sizeHeads
			for cl := range Class(NumClasses) {
				h.fifo[cl], h.dl[cl] = c.fifo[sz][cl], c.dl[sz][cl]
				if t.Deleted {
					h.fifo[cl], h.dl[cl] = headInfo{}, headInfo{}
				}
				if h.fifo[cl].ok || h.dl[cl].ok {
					cr := rt.queues(cl)
					if cr == nil {
						report("tenant %q class %s has queued jobs and no queues", t.Name, cl)
						continue
					}
					if id, _ := cr.fifo[sz].front(); h.fifo[cl].ok && id != h.fifo[cl].id {
						report("tenant %q %s %s queue head is %d, oldest queued job is %d", t.Name, cl, Size(sz), id, h.fifo[cl].id)
					}
					if h.dl[cl].ok {
						if dq := cr.dlq(Size(sz)); dq == nil {
							report("tenant %q %s %s has deadline jobs and no deadline queue", t.Name, cl, Size(sz))
						} else if e, _ := dq.front(); e.id != h.dl[cl].id {
							report("tenant %q %s %s deadline queue head is %d, earliest is %d", t.Name, cl, Size(sz), e.id, h.dl[cl].id)
						}
					}
				}
			}
			dec := decide(t, Size(sz), &h)
			for cl := range Class(NumClasses) {
				if b := bit(cl, sz); (rt.fairBits&b != 0) != dec.fair[cl] || (rt.dlBits&b != 0) != dec.dl[cl] {
					report("tenant %q %s %s: candidate bits %v/%v, the candidate rule says %v/%v", t.Name, cl, Size(sz),
						rt.fairBits&b != 0, rt.dlBits&b != 0, dec.fair[cl], dec.dl[cl])
				}
				inA, inB := s.heapA[cl][sz].has(ti), s.heapB[cl][sz].has(ti)
				if want := dec.fair[cl]; (inA || inB) != want || (inA && inB) {
					report("tenant %q %s %s: in order heaps %v/%v, candidate %v", t.Name, cl, Size(sz), inA, inB, want)
				}
				// A stored key may lag behind a tag increase, never ahead.
				real := hentry{tag: t.Tag(cl), seq: h.fifo[cl].id, tenant: ti, tier: t.Tier}
				for _, e := range []*hentry{s.heapA[cl][sz].get(ti), s.heapB[cl][sz].get(ti)} {
					if e != nil && !lagging(e, &real) {
						report("tenant %q %s %s: heap key %+v is ahead of the real key %+v", t.Name, cl, Size(sz), *e, real)
					}
				}
				// What each queue remembers having placed is what its heaps hold.
				if cr := rt.queues(cl); cr != nil {
					var placed JobID
					for _, e := range []*hentry{s.heapA[cl][sz].get(ti), s.heapB[cl][sz].get(ti)} {
						if e != nil {
							placed = e.seq
						}
					}
					if cr.fifo[sz].placed != placed {
						report("tenant %q %s %s: queue placed %d, heaps hold %d", t.Name, cl, Size(sz), cr.fifo[sz].placed, placed)
					}
					placed = 0
					if e := s.dheap[cl][sz].get(ti); e != nil {
						placed = e.seq
					}
					if dq := cr.dlq(Size(sz)); (dq == nil && placed != 0) || (dq != nil && dq.placed != placed) {
						report("tenant %q %s %s: deadline queue placed differs from its heap's %d", t.Name, cl, Size(sz), placed)
					}
				}
				e := s.dheap[cl][sz].get(ti)
				if (e != nil) != dec.dl[cl] {
					report("tenant %q %s %s: in the deadline heap %v, deadline candidate %v", t.Name, cl, Size(sz), e != nil, dec.dl[cl])
				} else if e != nil && (e.seq != h.dl[cl].id || e.tag != VirtualTime(h.dl[cl].at)) {
					report("tenant %q %s %s: deadline heap key %+v, head is job %d at %d", t.Name, cl, Size(sz), *e, h.dl[cl].id, h.dl[cl].at)
				}
			}
		}
		for cl := range Class(NumClasses) {
			e := s.maxTag[cl].get(ti)
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
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrVerify, strings.Join(problems, "; "))
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
