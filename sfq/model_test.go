package sfq

import (
	"pgregory.net/rapid"
)

// refModel re-derives the scheduling decisions from SPEC §3 by brute
// force, independently of the heaps and queues: it keeps its own finish
// tags and virtual_now per class, its own eligibility flags and its own
// cost estimates, finds each pick by scanning every job for the heads of
// every tenant, class and size, and applies the candidate, clamp and idle
// rules literally. The property test compares it with the scheduler after
// every step.
type refModel struct {
	vnow  [NumClasses]VirtualTime
	ft    map[uint32]*[NumClasses]VirtualTime
	elig  map[uint32]*[NumClasses]bool
	types map[refTypeKey]*refType
}

type refTypeKey struct {
	tenant uint32
	typ    string
}

type refType struct {
	ema     int64
	samples uint32
	at      Time
}

func newRefModel() *refModel {
	return &refModel{ft: map[uint32]*[NumClasses]VirtualTime{}, elig: map[uint32]*[NumClasses]bool{}, types: map[refTypeKey]*refType{}}
}

func (m *refModel) tags(ti uint32) *[NumClasses]VirtualTime {
	if m.ft[ti] == nil {
		m.ft[ti] = new([NumClasses]VirtualTime)
	}
	return m.ft[ti]
}

// forget drops a deleted tenant.
func (m *refModel) forget(ti uint32) {
	delete(m.ft, ti)
	delete(m.elig, ti)
	for k := range m.types {
		if k.tenant == ti {
			delete(m.types, k)
		}
	}
}

// refPasses restates the cap rules.
func refPasses(t *Tenant, j *Job) bool {
	c := &t.Caps
	if c.MaxRunning != 0 && t.Running+1 > c.MaxRunning {
		return false
	}
	if c.MaxRunningSize[j.Size] != 0 && t.RunningBySize[j.Size]+1 > c.MaxRunningSize[j.Size] {
		return false
	}
	if c.MaxInflightCPUMs != 0 && t.InflightCPUMs != 0 && t.InflightCPUMs+j.EstCostMs > c.MaxInflightCPUMs {
		return false
	}
	if j.Class == ClassCritical && c.MaxRunningCritical != 0 && t.RunningByClass[ClassCritical]+1 > c.MaxRunningCritical {
		return false
	}
	if j.Class == ClassHigh && c.MaxRunningHigh != 0 && t.RunningByClass[ClassHigh]+1 > c.MaxRunningHigh {
		return false
	}
	if j.DeadlineAt() != 0 && c.MaxRunningDeadline != 0 && t.RunningDeadline+1 > c.MaxRunningDeadline {
		return false
	}
	return true
}

// refHeads are the heads of one tenant, class and size: the oldest queued
// job without a deadline, and the queued deadline job with the earliest
// (deadline_at, ID).
type refHeads struct{ fifo, dl *Job }

type refHeadKey struct {
	tenant uint32
	class  Class
	size   Size
}

func heads(s *Scheduler) map[refHeadKey]*refHeads {
	out := map[refHeadKey]*refHeads{}
	s.Jobs(0, func(j *Job) bool {
		if j.State != Queued {
			return true
		}
		k := refHeadKey{j.Tenant, j.Class, j.Size}
		h := out[k]
		if h == nil {
			h = &refHeads{}
			out[k] = h
		}
		cp := *j
		if j.DeadlineAt() == 0 {
			if h.fifo == nil {
				h.fifo = &cp
			}
		} else if h.dl == nil || j.DeadlineAt() < h.dl.DeadlineAt() || (j.DeadlineAt() == h.dl.DeadlineAt() && j.ID < h.dl.ID) {
			h.dl = &cp
		}
		return true
	})
	return out
}

// refCand is a job that may be dispatched: a candidate head.
type refCand struct {
	tag      VirtualTime
	tier     Tier
	size     Size
	seq      JobID
	tenant   uint32
	class    Class
	deadline bool
	at       Time
}

// candidates applies the candidate rule: per tenant and size, from the
// highest class down, the heads that pass their caps are candidates,
// unless the lowest-ID head of their class is blocked, or that of a higher
// class was.
func candidates(s *Scheduler) []refCand {
	hs := heads(s)
	var out []refCand
	s.Tenants(func(ti uint32, t *Tenant) bool {
		for sz := range Size(NumSizes) {
			blocked := false
			for _, c := range Classes() {
				h := hs[refHeadKey{ti, c, sz}]
				if h == nil || blocked {
					continue
				}
				oldest := h.fifo
				if oldest == nil || (h.dl != nil && h.dl.ID < oldest.ID) {
					oldest = h.dl
				}
				if !refPasses(t, oldest) {
					blocked = true
					continue
				}
				for _, j := range []*Job{h.fifo, h.dl} {
					if j != nil && refPasses(t, j) {
						out = append(out, refCand{tier: t.Tier, size: sz, seq: j.ID, tenant: ti, class: c, deadline: j.DeadlineAt() != 0, at: j.DeadlineAt()})
					}
				}
			}
		}
		return true
	})
	return out
}

// refBetter: lowest start tag, then higher tier, then larger size, then
// lower enqueue_seq.
func refBetter(a, b refCand) bool {
	switch {
	case a.tag < b.tag:
		return true
	case a.tag > b.tag:
		return false
	case a.tier > b.tier:
		return true
	case a.tier < b.tier:
		return false
	case a.size > b.size:
		return true
	case a.size < b.size:
		return false
	}
	return a.seq < b.seq
}

// pick finds what a worker of size ws should get.
func (m *refModel) pick(s *Scheduler, ws Size) (refCand, bool) {
	cands := candidates(s)
	for _, c := range Classes() {
		var dl refCand
		hasDL := false
		for _, x := range cands {
			if x.class == c && x.deadline && x.size <= ws && (!hasDL || x.at < dl.at || (x.at == dl.at && x.seq < dl.seq)) {
				dl, hasDL = x, true
			}
		}
		if hasDL {
			dl.tag = max(m.tags(dl.tenant)[c], m.vnow[c])
			return dl, true
		}
		var same, steal refCand
		hasSame, hasSteal := false, false
		for _, x := range cands {
			if x.class != c || x.deadline || x.size > ws {
				continue
			}
			x.tag = m.tags(x.tenant)[c]
			if s.cfg.Clamp == ClampDispatch && x.tag < m.vnow[c] {
				x.tag = m.vnow[c]
			}
			if x.size == ws {
				if !hasSame || refBetter(x, same) {
					same, hasSame = x, true
				}
			} else if !hasSteal || refBetter(x, steal) {
				steal, hasSteal = x, true
			}
		}
		if !hasSame && hasSteal {
			return steal, true
		}
		if hasSame {
			if hasSteal {
				if r, ok := s.cfg.Policy.(Reserve); ok && same.tag-steal.tag > r.Margin {
					return steal, true
				}
			}
			return same, true
		}
	}
	return refCand{}, false
}

// idle reports whether the idle rule applies to a submit of class c
// without a deadline: nothing without a deadline is queued in the class.
func (m *refModel) idle(s *Scheduler, c Class) bool {
	idle := true
	s.Jobs(0, func(j *Job) bool {
		if j.State == Queued && j.Class == c && j.DeadlineAt() == 0 {
			idle = false
		}
		return idle
	})
	return idle
}

// submitted applies the idle rule of an accepted submit that found the
// class idle.
func (m *refModel) submitted(s *Scheduler, c Class) {
	s.Tenants(func(ti uint32, _ *Tenant) bool {
		m.vnow[c] = max(m.vnow[c], m.tags(ti)[c])
		return true
	})
}

// estimate restates the cost estimate rule.
func (m *refModel) estimate(s *Scheduler, ti uint32, sub Submission) (int64, EstSource, bool) {
	if s.cfg.Estimate == EstimateAuto {
		if r := m.types[refTypeKey{ti, sub.Type}]; sub.Type != "" && r != nil && r.samples >= 3 {
			return max(1, r.ema), EstFromEMA, true
		}
		if sub.EstCostMs > 0 {
			return sub.EstCostMs, EstFromSubmit, true
		}
		return s.cfg.DefaultCostMs, EstFromDefault, true
	}
	return sub.EstCostMs, EstFromSubmit, sub.EstCostMs > 0
}

// dispatched applies a dispatch the model predicted: a deadline job pays
// from max(tag, virtual_now) and leaves virtual_now alone.
func (m *refModel) dispatched(c refCand, est int64, w Weight) {
	st, _ := tagStep(est, w)
	m.tags(c.tenant)[c.class] = c.tag + st
	if !c.deadline {
		m.vnow[c.class] = max(m.vnow[c.class], c.tag)
	}
}

// finished applies an accepted Finished: the cost correction, and for a
// completed run the type's average (floor division by 8 toward -inf,
// written without a shift), with at most MaxJobTypes types per tenant.
func (m *refModel) finished(j Job, cpu int64, completed bool, now Time) {
	a, _ := tagStep(cpu, j.Weight)
	b, _ := tagStep(j.EstCostMs, j.Weight)
	m.tags(j.Tenant)[j.Class] += a - b
	if !completed || j.Type() == "" {
		return
	}
	k := refTypeKey{j.Tenant, j.Type()}
	if r := m.types[k]; r != nil {
		d := cpu - r.ema
		q := d / 8
		if d%8 != 0 && d < 0 {
			q--
		}
		r.ema += q
		r.samples++
		r.at = now
		return
	}
	n := 0
	var oldest refTypeKey
	for k2, r := range m.types {
		if k2.tenant != j.Tenant {
			continue
		}
		n++
		if o := m.types[oldest]; oldest.typ == "" || r.at < o.at || (r.at == o.at && k2.typ < oldest.typ) {
			oldest = k2
		}
	}
	if n >= MaxJobTypes {
		delete(m.types, oldest)
	}
	m.types[k] = &refType{ema: cpu, samples: 1, at: now}
}

// settle re-evaluates every tenant's eligibility per class (candidates
// without a deadline only) at the end of a command and clamps those that
// went from ineligible to eligible.
func (m *refModel) settle(s *Scheduler) {
	now := map[uint32]*[NumClasses]bool{}
	for _, c := range candidates(s) {
		if !c.deadline {
			if now[c.tenant] == nil {
				now[c.tenant] = new([NumClasses]bool)
			}
			now[c.tenant][c.class] = true
		}
	}
	s.Tenants(func(ti uint32, t *Tenant) bool {
		was := m.elig[ti]
		if was == nil {
			was = new([NumClasses]bool)
		}
		is := now[ti]
		if is == nil {
			is = new([NumClasses]bool)
		}
		for c := range Class(NumClasses) {
			if is[c] && !was[c] && s.cfg.Clamp == ClampActivation && m.tags(ti)[c] < m.vnow[c] {
				m.tags(ti)[c] = m.vnow[c]
			}
		}
		m.elig[ti] = is
		return true
	})
}

// check compares the model with the scheduler.
func (m *refModel) check(t *rapid.T, s *Scheduler, what string) {
	for c := range Class(NumClasses) {
		if s.ClassVirtualNow(c) != m.vnow[c] {
			t.Fatalf("after %s: %s virtual_now %s, model %s", what, c, s.ClassVirtualNow(c), m.vnow[c])
		}
	}
	s.Tenants(func(ti uint32, tn *Tenant) bool {
		for c := range Class(NumClasses) {
			if tn.Tag(c) != m.tags(ti)[c] {
				t.Fatalf("after %s: %s %s finish tag %s, model %s", what, tn.Name, c, tn.Tag(c), m.tags(ti)[c])
			}
		}
		return true
	})
	n := 0
	s.types.View().Each(func(_ uint64, st *TypeStat) bool {
		n++
		r := m.types[refTypeKey{st.Tenant, st.Type}]
		if r == nil || r.ema != st.EMAMs || r.samples != st.Samples || r.at != st.UpdatedAt {
			t.Fatalf("after %s: estimate of tenant %d type %q is %+v, model %+v", what, st.Tenant, st.Type, *st, r)
		}
		return true
	})
	if n != len(m.types) {
		t.Fatalf("after %s: %d estimates, model %d", what, n, len(m.types))
	}
}
