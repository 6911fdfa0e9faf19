package sfq

import (
	"pgregory.net/rapid"
)

// refModel re-derives the scheduling decisions from SPEC §3 by brute
// force, independently of the heaps and queues: it keeps its own finish
// tags, virtual_now and eligibility flags, finds each pick by scanning
// every tenant's oldest queued job of every size, and applies the clamp
// and idle rules literally. The property test compares it with the
// scheduler after every step.
type refModel struct {
	vnow VirtualTime
	ft   map[uint32]VirtualTime
	elig map[uint32]bool
}

func newRefModel() *refModel {
	return &refModel{ft: map[uint32]VirtualTime{}, elig: map[uint32]bool{}}
}

// refPasses restates the cap rules.
func refPasses(t *Tenant, j *Job) bool {
	if t.Caps.MaxRunning != 0 && t.Running+1 > t.Caps.MaxRunning {
		return false
	}
	if t.Caps.MaxRunningSize[j.Size] != 0 && t.RunningBySize[j.Size]+1 > t.Caps.MaxRunningSize[j.Size] {
		return false
	}
	if t.Caps.MaxInflightCPUMs != 0 && t.InflightCPUMs != 0 && t.InflightCPUMs+j.EstCostMs > t.Caps.MaxInflightCPUMs {
		return false
	}
	return true
}

// oldest returns the oldest queued job of each tenant and size.
func oldest(s *Scheduler) map[[2]uint32]*Job {
	heads := map[[2]uint32]*Job{}
	s.Jobs(0, func(j *Job) bool {
		k := [2]uint32{j.Tenant, uint32(j.Size)}
		if _, seen := heads[k]; !seen && j.State == Queued {
			cp := *j
			heads[k] = &cp
		}
		return true
	})
	return heads
}

type refCand struct {
	tag    VirtualTime
	tier   Tier
	size   Size
	seq    JobID
	tenant uint32
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
	var same, steal refCand
	hasSame, hasSteal := false, false
	heads := oldest(s)
	s.Tenants(func(ti uint32, t *Tenant) bool {
		for sz := Size(0); sz <= ws; sz++ {
			j := heads[[2]uint32{ti, uint32(sz)}]
			if j == nil || !refPasses(t, j) {
				continue
			}
			tag := m.ft[ti]
			if s.cfg.Clamp == ClampDispatch && tag < m.vnow {
				tag = m.vnow
			}
			c := refCand{tag: tag, tier: t.Tier, size: sz, seq: j.ID, tenant: ti}
			if sz == ws {
				if !hasSame || refBetter(c, same) {
					same, hasSame = c, true
				}
			} else if !hasSteal || refBetter(c, steal) {
				steal, hasSteal = c, true
			}
		}
		return true
	})
	if !hasSame {
		return steal, hasSteal
	}
	if hasSteal {
		if r, ok := s.cfg.Policy.(Reserve); ok && same.tag-steal.tag > r.Margin {
			return steal, true
		}
	}
	return same, true
}

// beforeSubmit applies the idle rule.
func (m *refModel) beforeSubmit(s *Scheduler) {
	if s.QueuedTotal() != 0 {
		return
	}
	s.Tenants(func(ti uint32, _ *Tenant) bool {
		m.vnow = max(m.vnow, m.ft[ti])
		return true
	})
}

// dispatched applies a dispatch the model predicted.
func (m *refModel) dispatched(c refCand, est int64, w Weight) {
	st, _ := tagStep(est, w)
	m.ft[c.tenant] = c.tag + st
	m.vnow = max(m.vnow, c.tag)
}

// finished applies an accepted Finished's cost correction.
func (m *refModel) finished(j Job, cpu int64) {
	a, _ := tagStep(cpu, j.Weight)
	b, _ := tagStep(j.EstCostMs, j.Weight)
	m.ft[j.Tenant] += a - b
}

// settle re-evaluates every tenant's eligibility at the end of a command
// and clamps those that went from ineligible to eligible.
func (m *refModel) settle(s *Scheduler) {
	heads := oldest(s)
	s.Tenants(func(ti uint32, t *Tenant) bool {
		now := false
		for sz := range NumSizes {
			if j := heads[[2]uint32{ti, uint32(sz)}]; j != nil && refPasses(t, j) {
				now = true
			}
		}
		if now && !m.elig[ti] && s.cfg.Clamp == ClampActivation && m.ft[ti] < m.vnow {
			m.ft[ti] = m.vnow
		}
		m.elig[ti] = now
		return true
	})
}

// check compares the model with the scheduler.
func (m *refModel) check(t *rapid.T, s *Scheduler, what string) {
	if s.VirtualNow() != m.vnow {
		t.Fatalf("after %s: virtual_now %s, model %s", what, s.VirtualNow(), m.vnow)
	}
	s.Tenants(func(ti uint32, tn *Tenant) bool {
		if tn.FinishTag != m.ft[ti] {
			t.Fatalf("after %s: %s finish tag %s, model %s", what, tn.Name, tn.FinishTag, m.ft[ti])
		}
		return true
	})
}
