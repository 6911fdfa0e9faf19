package sfq

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
)

// stateVersion is the version of the canonical state encoding.
const stateVersion = 1

// View is an immutable picture of the scheduler's persistent state: its
// configuration, scalars, and tenant and job tables. A View returned by
// Freeze may be read from any goroutine while the scheduler goes on.
type View struct {
	cfg     Config
	vnow    VirtualTime
	nextJob JobID
	tenants VectorView[Tenant]
	jobs    VectorView[Job]
}

// Freeze returns an immutable View of the current state in O(chunks) time.
// Writes after it copy the chunks they touch, so the View never changes.
func (s *Scheduler) Freeze() *View {
	return &View{cfg: s.cfg, vnow: s.vnow, nextJob: s.nextJob, tenants: s.tenants.Freeze(), jobs: s.jobs.Freeze()}
}

// Peek returns a View valid only until the next write, for reading while
// no write can happen (on the writer's goroutine, or under its lock).
func (s *Scheduler) Peek() *View { return s.view() }

// view returns a View valid only until the next write, for reading on the
// scheduler's own goroutine.
func (s *Scheduler) view() *View {
	return &View{cfg: s.cfg, vnow: s.vnow, nextJob: s.nextJob, tenants: s.tenants.View(), jobs: s.jobs.View()}
}

// JobCount returns the number of jobs in the view.
func (v *View) JobCount() int { return v.jobs.Len() }

// TenantCount returns the number of tenant slots in the view.
func (v *View) TenantCount() int { return v.tenants.Len() }

// Encode writes the view's canonical encoding. Equal states encode to equal
// bytes on every machine.
func (v *View) Encode(e *Encoder) {
	e.Uvarint(stateVersion)
	encodeConfig(e, &v.cfg)
	e.Varint(int64(v.vnow))
	e.Uvarint(uint64(v.nextJob))
	e.Uvarint(uint64(v.tenants.Len()))
	v.tenants.Each(func(_ uint64, t *Tenant) bool {
		encodeTenant(e, t)
		return true
	})
	e.Uvarint(uint64(v.jobs.Len()))
	v.jobs.Each(func(_ uint64, j *Job) bool {
		encodeJob(e, j)
		return true
	})
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
func EncodeConfig(e *Encoder, c *Config) { encodeConfig(e, c) }

// DecodeConfig reads what EncodeConfig wrote.
func DecodeConfig(d *Decoder) Config { return decodeConfig(d) }

func encodeConfig(e *Encoder, c *Config) {
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
}

func decodeConfig(d *Decoder) Config {
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
	return c
}

func encodeTenant(e *Encoder, t *Tenant) {
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
}

func decodeTenant(d *Decoder) Tenant {
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
	return t
}

func encodeJob(e *Encoder, j *Job) {
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
}

func decodeJob(d *Decoder) Job {
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
	j.SetText(key, typ, payload)
	if d.Bool() {
		j.Result = &Result{ExitCode: int32(d.Varint()), StderrTail: d.String()}
	}
	return j
}

// Decode reads a state written by View.Encode, rebuilds every derived
// structure, and runs Verify: a state whose counters do not match its job
// table is refused.
func Decode(d *Decoder) (*Scheduler, error) {
	if v := d.Uvarint(); d.Err() == nil && v != stateVersion {
		return nil, fmt.Errorf("%w: state encoding version %d (this build reads %d)", ErrCorrupt, v, stateVersion)
	}
	cfg := decodeConfig(d)
	vnow := VirtualTime(d.Varint())
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
		t := decodeTenant(d)
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
		j := decodeJob(d)
		if d.Err() != nil {
			break
		}
		if j.ID <= last || j.ID >= nextJob || uint64(j.Tenant) >= nt || j.State == StateNone {
			return nil, fmt.Errorf("%w: job record %d (id %d, tenant %d, state %s) is out of order or range", ErrCorrupt, i, j.ID, j.Tenant, j.State)
		}
		last = j.ID
		s.jobs.Put(uint64(j.ID), j)
	}
	if err := d.Err(); err != nil {
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
	s.reap = deadlineHeap{}
	s.ended = endedQueue{}
	s.jobs.View().Each(func(_ uint64, j *Job) bool {
		switch {
		case j.State == Queued:
			s.rt[j.Tenant].queues[j.Size].pushBack(j.ID)
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
// checks that every tenant sits in exactly the heaps its queues and caps
// call for. It returns an error listing each difference (at most 20).
func (s *Scheduler) Verify() error {
	var problems []string
	report := func(format string, args ...any) {
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	type counts struct {
		running   uint32
		bySize    [NumSizes]uint32
		inflight  int64
		queued    [NumSizes]uint32
		oldest    [NumSizes]JobID
		hasOldest [NumSizes]bool
	}
	nt := s.tenants.Len()
	derived := make([]counts, nt)
	names := 0 // tenants the name index resolves to
	var queued uint64
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
			if !c.hasOldest[j.Size] {
				c.oldest[j.Size], c.hasOldest[j.Size] = j.ID, true
			}
		case j.State.Live():
			c.running++
			c.bySize[j.Size]++
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
		return true
	})
	if queued != s.queued {
		report("queued total is %d, job table says %d", s.queued, queued)
	}
	for i := range nt {
		t := s.tenants.Get(uint64(i))
		if t == nil {
			report("tenant slot %d is empty", i)
			continue
		}
		c := &derived[i]
		if t.Running != c.running || t.RunningBySize != c.bySize || t.InflightCPUMs != c.inflight || t.Queued != c.queued {
			report("tenant %q counters running=%d by_size=%v inflight=%d queued=%v, job table says running=%d by_size=%v inflight=%d queued=%v",
				t.Name, t.Running, t.RunningBySize, t.InflightCPUMs, t.Queued, c.running, c.bySize, c.inflight, c.queued)
		}
		if t.Deleted && (c.running > 0 || c.queued != [NumSizes]uint32{}) {
			report("deleted tenant %q has live jobs", t.Name)
		}
		switch got, ok := s.byName[t.Name]; {
		case ok && got == uint32(i):
			names++
		case !ok || got < uint32(i) || !t.Deleted:
			// Only a tombstone of an earlier incarnation may be
			// shadowed, by a later index of the same name.
			report("tenant %q is not indexed by name", t.Name)
		}
		for sz := range NumSizes {
			inA, inB := s.heapA[sz].has(uint32(i)), s.heapB[sz].has(uint32(i))
			want := false
			if c.hasOldest[sz] && !t.Deleted {
				head, ok := s.rt[i].queues[sz].front()
				if !ok || head != c.oldest[sz] {
					report("tenant %q size %s queue head is %d, oldest queued job is %d", t.Name, Size(sz), head, c.oldest[sz])
				}
				oj := s.jobs.Get(uint64(c.oldest[sz]))
				want = passes(t, oj.Size, oj.EstCostMs)
			}
			if (inA || inB) != want || (inA && inB) {
				report("tenant %q size %s: in order heaps %v/%v, eligible %v", t.Name, Size(sz), inA, inB, want)
			}
			// A stored key may lag behind a tag increase, never ahead.
			for _, e := range []*hentry{s.heapA[sz].get(uint32(i)), s.heapB[sz].get(uint32(i))} {
				real := hentry{tag: t.FinishTag, seq: c.oldest[sz], tenant: uint32(i), tier: t.Tier}
				if e != nil && !lagging(e, &real) {
					report("tenant %q size %s: heap key %+v is ahead of the real key %+v", t.Name, Size(sz), *e, real)
				}
			}
		}
	}
	if len(s.byName) != names {
		report("name index has %d entries for %d names", len(s.byName), names)
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrVerify, strings.Join(problems, "; "))
}
