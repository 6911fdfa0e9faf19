package sfq

// Tenant changes: upsert, update, group relinking and delete.

import (
	"fmt"
	"slices"
)

// UpsertTenant creates a tenant or updates one. An update keeps the
// tenant's tags, usage and counters; a cap change takes effect at the next
// dispatch and preempts nothing. Upserting a deleted tenant's name creates
// a new tenant at a new index (indexes are never reused): the tombstone
// keeps the old incarnation's jobs, and everything keyed by the index
// (idempotency keys, events) stays with it, out of the new tenant's sight.
func (s *Scheduler) UpsertTenant(spec TenantSpec) (created bool, err error) {
	if err := spec.Validate(); err != nil {
		return false, err
	}
	if spec.Multiplier == 0 {
		spec.Multiplier = 1
	}
	s.advance(s.clock)
	if i, ok := s.TenantIndex(spec.Name); ok {
		s.eachLane(i, func(l uint32) { s.updateTenant(l, spec) }) // its own record first: the lanes' limits read it
		return false, nil
	}
	i := uint32(s.tenants.Len())
	s.tenants.Put(uint64(i), Tenant{TenantSpec: spec})
	s.byName[spec.Name] = i
	s.rt = append(s.rt, tenantRT{})
	s.linkLane(i)
	s.rateT.reserve(i)
	s.place(i, &placeOpts{clamp: true}, allSlots)
	return true, nil
}

// updateTenant replaces an existing tenant's settings. A change of
// group_cap or group_order re-links its groups' heads; under
// group_order=fair the groups it makes eligible are clamped (switching to
// fair starts every group at group_now). Cost: O(G log G) in the tenant's
// groups when a group setting changes, O(G) under group_order=fair.
func (s *Scheduler) updateTenant(ti uint32, spec TenantSpec) {
	old := *s.tenants.Get(uint64(ti))
	rt := &s.rt[ti]
	keepFair := old.GroupOrder == GroupFair && spec.GroupOrder == GroupFair
	var before [][NumClasses]bool
	if keepFair {
		before = make([][NumClasses]bool, len(rt.groups))
		for k, gs := range rt.groups {
			before[k] = s.groupEligibility(ti, gs)
		}
	}
	s.tenants.Mut(uint64(ti)).TenantSpec = spec
	s.setTenantRate(ti, old.Rate)
	if old.GroupOrder != spec.GroupOrder || old.GroupCap != spec.GroupCap {
		s.relinkGroups(ti, old.GroupOrder != GroupFair && spec.GroupOrder == GroupFair)
	}
	o := placeOpts{clamp: true, noScan: true}
	s.place(ti, &o, allSlots)
	if !keepFair {
		return
	}
	var mask uint16
	for k, gs := range rt.groups {
		for c := range Class(NumClasses) {
			if !before[k][c] && s.groupEligible(gs, c, rt.openBits, rt.room) {
				mask |= s.clampGroup(ti, gs, c)
			}
		}
	}
	if mask != 0 {
		s.place(ti, &o, mask)
	}
}

// relinkGroups re-links every head of tenant ti's groups after its
// group_cap or group_order changed. toFair starts every group at the
// tenant's group_now (no group carries credit from before).
func (s *Scheduler) relinkGroups(ti uint32, toFair bool) {
	t := s.tenants.Get(uint64(ti))
	rt := &s.rt[ti]
	fair := t.GroupOrder == GroupFair
	if rt.gmax != nil {
		rt.flushTags()
	}
	if !fair {
		rt.gmax = nil
	} else if toFair || rt.gmax == nil {
		rt.gmax = new([NumClasses]tagMax)
		for _, gs := range rt.groups {
			gm := s.groups.Mut(uint64(gs))
			for c := range Class(NumClasses) {
				if toFair {
					gm.tags[c] = t.groupNow[c]
				}
				rt.gmax[c].set(int(s.grt[gs].pos), gm.tags[c])
			}
		}
	}
	for _, gs := range rt.groups {
		g := s.groups.Get(uint64(gs))
		blocked := s.groupBlocked(t, g)
		grt := &s.grt[gs]
		for i := range grt.nq {
			q := grt.at(i)
			for _, x := range [2]int32{q.fnode, q.dnode} {
				if x == 0 {
					continue
				}
				sl := rt.slot(q.class, q.size)
				s.unlink(sl, x)
				n := &s.nodes.n[x]
				n.gb = blocked
				if !n.dl {
					n.key = g.tags[q.class]
				}
				s.link(sl, x, fair)
			}
		}
	}
}

// CheckDeleteTenant is DeleteTenant's verdict without the change: the
// tenant exists and has no scheduled, queued or running job.
func (s *Scheduler) CheckDeleteTenant(name string) error {
	i, ok := s.TenantIndex(name)
	if !ok {
		return UnknownTenant(name)
	}
	tot := s.totals(i) // in every pool
	t := &tot
	if t.Running > 0 || t.QueuedTotal() > 0 {
		return fmt.Errorf("%w: %q has %d queued and %d running", ErrTenantBusy, name, t.QueuedTotal(), t.Running)
	}
	if t.Scheduled > 0 {
		return fmt.Errorf("%w: %q has %d scheduled", ErrTenantBusy, name, t.Scheduled)
	}
	return nil
}

// DeleteTenant deletes a tenant without queued or running jobs. Its record
// stays as a tombstone so that its terminal jobs keep their tenant name;
// the name is free for a new tenant (see UpsertTenant). Its cost estimates
// and its groups (with their settings) are forgotten.
func (s *Scheduler) DeleteTenant(name string) error {
	if err := s.CheckDeleteTenant(name); err != nil {
		return err
	}
	i, _ := s.TenantIndex(name)
	s.advance(s.clock)
	s.forgetEstimates(i)
	s.dropResourceLimits(i)
	// Its lanes first, its own record last: forgetting a group counts
	// the names its other lanes still hold.
	lanes := append(slices.Clone(s.rt[i].lanes), i)
	for _, l := range lanes {
		tm := s.tenants.Mut(uint64(l))
		tm.Deleted = true
		tm.Rate, tm.rateTAT, tm.paused = RateLimit{}, 0, NotPaused // a tombstone holds no pause or limit
		s.rateT.remove(l)
		s.unplace(l)
		for len(s.rt[l].groups) > 0 {
			gs := s.rt[l].groups[len(s.rt[l].groups)-1]
			s.rateG.remove(gs)
			s.forgetGroup(gs)
		}
		rt := &s.rt[l]
		// Its place in the pools stays, for its jobs, and so do its
		// subscriptions (kept in the state; a restore reads each lane's
		// burst back from them).
		*rt = tenantRT{pool: rt.pool, local: rt.local, lanes: rt.lanes, burst: rt.burst, subscribed: rt.subscribed}
	}
	return nil
}
