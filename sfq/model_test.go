package sfq

import (
	"slices"

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
	// Groups (group_order=fair): each group's tag and eligibility per
	// class, each tenant's group_now per class.
	gtags map[groupKey]*[NumClasses]VirtualTime
	gelig map[groupKey][NumClasses]bool
	gnow  map[uint32]*[NumClasses]VirtualTime
	// res is the model of resources; now the time of the command being
	// applied.
	res *refRes
	now Time
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
	return &refModel{ft: map[uint32]*[NumClasses]VirtualTime{}, elig: map[uint32]*[NumClasses]bool{}, types: map[refTypeKey]*refType{},
		gtags: map[groupKey]*[NumClasses]VirtualTime{}, gelig: map[groupKey][NumClasses]bool{}, gnow: map[uint32]*[NumClasses]VirtualTime{}, res: newRefRes()}
}

func (m *refModel) groupNow(ti uint32) *[NumClasses]VirtualTime {
	if m.gnow[ti] == nil {
		m.gnow[ti] = new([NumClasses]VirtualTime)
	}
	return m.gnow[ti]
}

func (m *refModel) groupTags(k groupKey) *[NumClasses]VirtualTime {
	if m.gtags[k] == nil {
		m.gtags[k] = new([NumClasses]VirtualTime)
	}
	return m.gtags[k]
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
	delete(m.gnow, ti)
	for k := range m.gtags {
		if k.tenant == ti {
			delete(m.gtags, k)
			delete(m.gelig, k)
		}
	}
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

// refHeads are the heads of one group, class and size: the oldest queued
// job without a deadline, and the queued deadline job with the earliest
// (deadline_at, ID).
type refHeads struct{ fifo, dl *Job }

type refHeadKey struct {
	tenant uint32
	class  Class
	size   Size
	group  string
	// part names, when the heads are those of the parts of a queue
	// (resources), the jobs' route and uses (refPart).
	part string
}

// headsOf returns the heads of every group, class and size, and of each
// part of a queue (the jobs of one route and one set of uses) when parts.
func headsOf(s *Scheduler, runs *Runs, parts bool) map[refHeadKey]*refHeads {
	out := map[refHeadKey]*refHeads{}
	s.Jobs(0, func(j *Job) bool {
		if j.State != Queued || j.Lapsed || !refRuns(runs, j) {
			return true
		}
		k := refHeadKey{j.Tenant, j.Class, j.Size, j.Group(), ""}
		if parts {
			k.part = refPart(j)
		}
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

// refGroupRunning counts the Assigned+Running jobs of every group.
func refGroupRunning(s *Scheduler) map[groupKey]uint32 {
	out := map[groupKey]uint32{}
	s.Jobs(0, func(j *Job) bool {
		if j.State.Live() {
			out[groupKey{j.Tenant, j.Group()}]++
		}
		return true
	})
	return out
}

// refGroupCap restates a group's cap in force: the admin's (the tenant's
// group_cap for inherit; none for the unnamed group) and the tenant's
// own, the lower.
func refGroupCap(s *Scheduler, t *Tenant, name string) uint32 {
	if name == "" {
		return 0
	}
	g, _ := s.Group(t.Name, name)
	var c uint32
	switch {
	case g.Cap == GroupCapInherit:
		c = t.GroupCap
	case g.Cap != GroupCapNone:
		c = uint32(g.Cap)
	}
	if g.TenantCap != 0 && (c == 0 || g.TenantCap < c) {
		c = g.TenantCap
	}
	return c
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
	group    string
}

// refDecision is what the candidate rule makes of the tenants' heads: the
// candidates, the held slots, and the groups eligible per class (they
// have a fifo head passing every limit in a slot not held).
type refDecision struct {
	cands []refCand
	held  map[refHeadKey]bool // group ""
	elig  map[groupKey][NumClasses]bool
	// dlHeads are the eligible deadline heads: every deadline head, of
	// any group, that passes every limit in a slot not held.
	dlHeads []refCand
}

// decideAll applies the candidate rule literally: per tenant and size, from
// the highest class down, heads blocked only by their group are passed
// over; if the oldest remaining head is blocked by the tenant, that class
// and every lower one hold; otherwise the eligible fifo head with the
// lowest ID (fifo) or group tag (fair, the model's tags) and the eligible
// deadline head with the earliest deadline are the candidates.
func (m *refModel) decideAll(s *Scheduler, runs *Runs) refDecision { return m.decide(s, runs, false) }

// decide is decideAll, with resources when res: the heads are those of
// the parts of each queue, and a head a resource blocks is passed over as
// one its group blocks is (refResBlocked).
func (m *refModel) decide(s *Scheduler, runs *Runs, res bool) refDecision {
	hs := headsOf(s, runs, res)
	running := refGroupRunning(s)
	d := refDecision{held: map[refHeadKey]bool{}, elig: map[groupKey][NumClasses]bool{}}
	byTenant := map[refHeadKey][]*Job{} // group "": every head of a tenant, class and size
	for k, h := range hs {
		sk := refHeadKey{k.tenant, k.class, k.size, "", ""}
		for _, j := range []*Job{h.fifo, h.dl} {
			if j != nil {
				byTenant[sk] = append(byTenant[sk], j)
			}
		}
	}
	s.Tenants(func(ti uint32, t *Tenant) bool {
		for sz := range Size(NumSizes) {
			held := false
			for _, c := range Classes() {
				sk := refHeadKey{ti, c, sz, "", ""}
				if held {
					d.held[sk] = true
					continue
				}
				var oldest, fifo, dl *Job
				var dls []*Job
				for _, j := range byTenant[sk] {
					cp := refGroupCap(s, t, j.Group())
					gb := cp > 0 && running[groupKey{ti, j.Group()}] >= cp
					tb := !refPasses(t, j)
					rb := res && m.refResBlocked(s, j)
					if (gb || rb) && !tb {
						continue
					}
					if oldest == nil || j.ID < oldest.ID {
						oldest = j
					}
					if gb || tb || rb {
						continue
					}
					if j.DeadlineAt() != 0 {
						dls = append(dls, j)
						if dl == nil || j.DeadlineAt() < dl.DeadlineAt() || (j.DeadlineAt() == dl.DeadlineAt() && j.ID < dl.ID) {
							dl = j
						}
						continue
					}
					gk := groupKey{ti, j.Group()}
					if fifo == nil {
						fifo = j
					} else if t.GroupOrder == GroupFair {
						a, b := m.groupTags(gk)[c], m.groupTags(groupKey{ti, fifo.Group()})[c]
						if a < b || (a == b && j.ID < fifo.ID) {
							fifo = j
						}
					} else if j.ID < fifo.ID {
						fifo = j
					}
				}
				if oldest != nil && !refPasses(t, oldest) {
					held = true
					d.held[sk] = true
					continue
				}
				cand := func(j *Job) refCand {
					return refCand{tier: t.Tier, size: sz, seq: j.ID, tenant: ti, class: c, deadline: j.DeadlineAt() != 0, at: j.DeadlineAt(), group: j.Group()}
				}
				for _, j := range []*Job{fifo, dl} {
					if j != nil {
						d.cands = append(d.cands, cand(j))
					}
				}
				for _, j := range dls {
					d.dlHeads = append(d.dlHeads, cand(j))
				}
			}
		}
		return true
	})
	// A group is eligible in a class if any of its fifo heads there
	// passes every limit in a slot not held.
	for k, h := range hs {
		if h.fifo == nil || d.held[refHeadKey{k.tenant, k.class, k.size, "", ""}] {
			continue
		}
		t, _ := s.TenantAt(k.tenant)
		cp := refGroupCap(s, &t, k.group)
		if (cp > 0 && running[groupKey{k.tenant, k.group}] >= cp) || !refPasses(&t, h.fifo) {
			continue
		}
		gk := groupKey{k.tenant, k.group}
		e := d.elig[gk]
		e[k.class] = true
		d.elig[gk] = e
	}
	return d
}

// candidates returns the candidates of the candidate rule.
func (m *refModel) candidates(s *Scheduler) []refCand { return m.decideAll(s, nil).cands }

// refRuns restates which jobs a worker runs (SPEC §3 "Kinds"): every job
// for a worker of a build before kinds (nil, or All); else a job of a
// build before kinds, a command job if it runs commands, a function job
// if it registered the job's type.
func refRuns(w *Runs, j *Job) bool {
	if w == nil {
		return true
	}
	switch j.Form() {
	case FormCommand:
		return w.Commands
	case FormFunction:
		return slices.Contains(w.Kinds, j.Type()) != w.AllKinds
	}
	return true
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
func (m *refModel) pick(s *Scheduler, ws Size, runs *Runs) (refCand, bool) {
	cands := m.decide(s, runs, true).cands
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
// from max(tag, virtual_now) and leaves virtual_now alone; under
// group_order=fair its group pays alike at weight 1 (1 ms = 1000).
func (m *refModel) dispatched(s *Scheduler, c refCand, est int64, w Weight) {
	st, _ := tagStep(est, w)
	m.tags(c.tenant)[c.class] = c.tag + st
	if !c.deadline {
		m.vnow[c.class] = max(m.vnow[c.class], c.tag)
	}
	if t, _ := s.TenantAt(c.tenant); t.GroupOrder == GroupFair {
		gt := m.groupTags(groupKey{c.tenant, c.group})
		gn := m.groupNow(c.tenant)
		start := gt[c.class]
		if c.deadline {
			start = max(start, gn[c.class])
		} else {
			gn[c.class] = max(gn[c.class], start)
		}
		gt[c.class] = start + VirtualTime(est*1000)
	}
}

// groupIdle reports whether a job entering tenant ti's class c finds
// nothing of the tenant queued there (without a deadline).
func (m *refModel) groupIdle(s *Scheduler, ti uint32, c Class) bool {
	idle := true
	s.Jobs(0, func(j *Job) bool {
		if j.State == Queued && j.Tenant == ti && j.Class == c && j.DeadlineAt() == 0 {
			idle = false
		}
		return idle
	})
	return idle
}

// groupRise is the idle rule of group_order=fair: group_now rises to the
// tenant's highest group tag in the class.
func (m *refModel) groupRise(ti uint32, c Class) {
	gn := m.groupNow(ti)
	for k, tags := range m.gtags {
		if k.tenant == ti {
			gn[c] = max(gn[c], tags[c])
		}
	}
}

// toFair starts every group of a tenant switched to group_order=fair at
// group_now.
func (m *refModel) toFair(ti uint32) {
	gn := m.groupNow(ti)
	for k, tags := range m.gtags {
		if k.tenant == ti {
			*tags = *gn
		}
	}
}

// finished applies an accepted Finished: the cost correction, and for a
// completed run the type's average (floor division by 8 toward -inf,
// written without a shift), with at most MaxJobTypes types per tenant.
func (m *refModel) finished(s *Scheduler, j Job, cpu int64, completed bool, now Time) {
	a, _ := tagStep(cpu, j.Weight)
	b, _ := tagStep(j.EstCostMs, j.Weight)
	m.tags(j.Tenant)[j.Class] += a - b
	if t, _ := s.TenantAt(j.Tenant); t.GroupOrder == GroupFair {
		m.groupTags(groupKey{j.Tenant, j.Group()})[j.Class] += VirtualTime((cpu - j.EstCostMs) * 1000)
	}
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
// went from ineligible to eligible; it forgets the groups left with no job
// and no setting, and clamps the groups of group_order=fair tenants that
// went from ineligible to eligible (before the candidates are chosen).
func (m *refModel) settle(s *Scheduler) {
	m.resSettle(s, m.now)
	exists := map[groupKey]bool{}
	s.Jobs(0, func(j *Job) bool {
		if j.State == Queued || j.State.Live() {
			exists[groupKey{j.Tenant, j.Group()}] = true
		}
		return true
	})
	s.Tenants(func(ti uint32, t *Tenant) bool {
		s.Groups(t.Name, func(g *Group) bool {
			if !g.Empty() {
				exists[groupKey{ti, g.Name}] = true
			}
			return true
		})
		return true
	})
	for k := range m.gtags {
		if !exists[k] {
			delete(m.gtags, k)
		}
	}
	for k := range exists {
		m.groupTags(k)
	}
	d := m.decideAll(s, nil)
	for k := range exists {
		t, _ := s.TenantAt(k.tenant)
		if t.GroupOrder != GroupFair {
			continue
		}
		was, is := m.gelig[k], d.elig[k]
		for c := range Class(NumClasses) {
			if is[c] && !was[c] {
				gt := m.groupTags(k)
				gt[c] = max(gt[c], m.groupNow(k.tenant)[c])
			}
		}
	}
	m.gelig = d.elig
	now := map[uint32]*[NumClasses]bool{}
	for _, c := range m.candidates(s) {
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
	m.resCheck(t, s, what)
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
	ng := 0
	s.Tenants(func(ti uint32, tn *Tenant) bool {
		for c := range Class(NumClasses) {
			if tn.GroupNow(c) != m.groupNow(ti)[c] {
				t.Fatalf("after %s: %s %s group_now %s, model %s", what, tn.Name, c, tn.GroupNow(c), m.groupNow(ti)[c])
			}
		}
		s.Groups(tn.Name, func(g *Group) bool {
			ng++
			tags := m.gtags[groupKey{ti, g.Name}]
			if tags == nil {
				t.Fatalf("after %s: %s group %q exists, the model has forgotten it", what, tn.Name, g.Name)
			}
			for c := range Class(NumClasses) {
				if g.Tag(c) != tags[c] {
					t.Fatalf("after %s: %s group %q %s tag %s, model %s", what, tn.Name, g.Name, c, g.Tag(c), tags[c])
				}
			}
			return true
		})
		return true
	})
	if ng != len(m.gtags) {
		t.Fatalf("after %s: %d groups, the model has %d", what, ng, len(m.gtags))
	}
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
