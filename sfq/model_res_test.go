package sfq

import (
	"slices"

	"pgregory.net/rapid"
)

// refRes is the reference model's own record of resources (SPEC §3
// "Resources"), kept by brute force: each resource's free units as of
// the last command, since when each count of units has found no room,
// and its reservation.
type refRes struct {
	free     map[string]int64
	lack     map[string]map[uint32]Time
	base     map[string]Time
	reserved map[string]refHold
	// after is resource_reserve_after.
	after Time
}

type refHold struct {
	job  JobID
	rank Time
}

func newRefRes() *refRes {
	return &refRes{free: map[string]int64{}, lack: map[string]map[uint32]Time{}, base: map[string]Time{}, reserved: map[string]refHold{}}
}

// refPart names the part of its queue a job is in: its route (who runs
// it) and the resources it uses.
func refPart(j *Job) string {
	r := "any"
	switch j.Form() {
	case FormCommand:
		r = "command"
	case FormFunction:
		r = "kind:" + j.Type()
	}
	return r + "/" + FormatUses(j.Uses())
}

// refHeldAll counts the units live jobs hold, per resource and per
// (tenant, resource).
func refHeldAll(s *Scheduler) (map[string]uint64, map[groupKey]uint64) {
	all, per := map[string]uint64{}, map[groupKey]uint64{}
	s.Jobs(0, func(j *Job) bool {
		if j.State.Live() {
			for _, u := range j.Uses() {
				all[u.Resource] += uint64(u.Units)
				per[groupKey{s.Owner(j.Tenant), u.Resource}] += uint64(u.Units)
			}
		}
		return true
	})
	return all, per
}

// refTenantMax is tenant ti's limit on a resource: its own, else the
// resource's tenant_max.
func refTenantMax(s *Scheduler, info ResourceInfo, ti uint32) uint32 {
	name := s.TenantName(s.Owner(ti))
	for _, l := range info.Limits {
		if l.Tenant == name {
			return l.Max
		}
	}
	return info.TenantMax
}

// refRoom reports whether tenant ti has room under its limit for the
// units of each resource j uses.
func (m *refModel) refRoom(s *Scheduler, j *Job, per map[groupKey]uint64) bool {
	for _, u := range j.Uses() {
		info, _ := s.Resource(u.Resource)
		if mx := refTenantMax(s, info, j.Tenant); mx != NoTenantMax && per[groupKey{s.Owner(j.Tenant), u.Resource}]+uint64(u.Units) > uint64(mx) {
			return false
		}
	}
	return true
}

// refResBlocked: a resource j uses has no room for it (cluster-wide or
// under its tenant's limit), or a reservation of it stands for another
// job that j's own does not outrank.
func (m *refModel) refResBlocked(s *Scheduler, j *Job) bool {
	all, per := refHeldAll(s)
	for _, u := range j.Uses() {
		info, _ := s.Resource(u.Resource)
		if all[u.Resource]+uint64(u.Units) > uint64(info.Capacity) {
			return true
		}
		if mx := refTenantMax(s, info, j.Tenant); mx != NoTenantMax && per[groupKey{s.Owner(j.Tenant), u.Resource}]+uint64(u.Units) > uint64(mx) {
			return true
		}
		if h := m.res.reserved[u.Resource]; h.job != 0 && h.job != j.ID && m.standing(s, u.Resource) && !m.outranks(s, j.ID, u.Resource) {
			return true
		}
	}
	return false
}

// outranks: job id holds a standing reservation of another resource,
// ranked before name's (blocked longer, then a lower ID).
func (m *refModel) outranks(s *Scheduler, id JobID, name string) bool {
	mine := m.res.reserved[name]
	for other, h := range m.res.reserved {
		if other != name && h.job == id && m.standing(s, other) && (h.rank < mine.rank || (h.rank == mine.rank && id < mine.job)) {
			return true
		}
	}
	return false
}

// partHead reports whether queued job j is the head of its part: the
// oldest job without a deadline of its (tenant, class, size, group,
// route, uses), or the deadline job with the earliest (deadline_at, ID).
func partHead(s *Scheduler, j *Job) bool {
	head := true
	s.Jobs(0, func(o *Job) bool {
		if o.ID == j.ID || o.State != Queued || o.Lapsed || o.Tenant != j.Tenant || o.Class != j.Class || o.Size != j.Size ||
			o.Group() != j.Group() || refPart(o) != refPart(j) || (o.DeadlineAt() != 0) != (j.DeadlineAt() != 0) {
			return true
		}
		if j.DeadlineAt() == 0 {
			head = head && o.ID > j.ID
		} else {
			head = head && !dlBefore(dlEntry{o.DeadlineAt(), o.ID}, dlEntry{j.DeadlineAt(), j.ID})
		}
		return head
	})
	return head
}

// onlyRes: queued job j passes its tenant's caps and its group's cap,
// and its tenant has room under each of its limits.
func (m *refModel) onlyRes(s *Scheduler, j *Job) bool {
	t, _ := s.TenantAt(j.Tenant)
	if !refPasses(&t, j) {
		return false
	}
	if cp := refGroupCap(s, &t, j.Group()); cp > 0 && refGroupRunning(s)[groupKey{j.Tenant, j.Group()}] >= cp {
		return false
	}
	_, per := refHeldAll(s)
	return m.refRoom(s, j, per)
}

// standing: name's reservation is held by a queued job that uses it,
// heads its part and is blocked by nothing but resources.
func (m *refModel) standing(s *Scheduler, name string) bool {
	h := m.res.reserved[name]
	j, ok := s.Job(h.job)
	if h.job == 0 || !ok || j.State != Queued || j.Lapsed {
		return false
	}
	if !slices.ContainsFunc(j.Uses(), func(u Use) bool { return u.Resource == name }) {
		return false
	}
	return partHead(s, &j) && m.onlyRes(s, &j)
}

// lackOf is since when a job needing k units of name has found no room.
func (m *refModel) lackOf(name string, k uint32) Time {
	if t, ok := m.res.lack[name][k]; ok {
		return t
	}
	return m.res.base[name]
}

// reserve is the start of a Dispatch at now: a reservation that no
// longer stands is given up, and each resource without one goes to the
// job blocked only by resources, with that resource short of room for
// it (and its units at most the capacity), for longer than
// resource_reserve_after: the one blocked the longest, then the lowest
// ID. Blocked since: the later of its entering its queue and the
// resource last having room for its units.
func (m *refModel) reserve(s *Scheduler, now Time) {
	all, _ := refHeldAll(s)
	for _, name := range s.ResourceNames() {
		if h := m.res.reserved[name]; h.job != 0 && !m.standing(s, name) {
			delete(m.res.reserved, name)
		}
		if m.res.reserved[name].job != 0 {
			continue
		}
		info, _ := s.Resource(name)
		free := int64(info.Capacity) - int64(all[name])
		var best refHold
		s.Jobs(0, func(j *Job) bool {
			if j.State != Queued || j.Lapsed {
				return true
			}
			var units uint32
			for _, u := range j.Uses() {
				if u.Resource == name {
					units = u.Units
				}
			}
			if units == 0 || units > info.Capacity || int64(units) <= free || !partHead(s, j) || !m.onlyRes(s, j) {
				return true
			}
			since := max(queuedSince(j), m.lackOf(name, units))
			if now-since <= m.res.after {
				return true
			}
			if best.job == 0 || since < best.rank || (since == best.rank && j.ID < best.job) {
				best = refHold{job: j.ID, rank: since}
			}
			return true
		})
		if best.job != 0 {
			m.res.reserved[name] = best
		}
	}
}

// resSettle notes, at the end of a command at now, each resource's free
// units (the counts of units that lost room lack it since now) and drops
// the reservation of a job that left its queue.
func (m *refModel) resSettle(s *Scheduler, now Time) {
	all, _ := refHeldAll(s)
	names := s.ResourceNames()
	for name := range m.res.free {
		if !slices.Contains(names, name) {
			delete(m.res.free, name)
			delete(m.res.lack, name)
			delete(m.res.base, name)
			delete(m.res.reserved, name)
		}
	}
	for _, name := range names {
		info, _ := s.Resource(name)
		f := int64(info.Capacity) - int64(all[name])
		old, known := m.res.free[name]
		m.res.free[name] = f
		if !known {
			m.res.base[name] = now
			m.res.lack[name] = map[uint32]Time{}
			continue
		}
		lack := m.res.lack[name]
		for k := max(f, 0) + 1; k <= max(old, 0); k++ {
			lack[uint32(k)] = now
		}
		for k := range lack {
			if int64(k) <= f {
				delete(lack, k)
			}
		}
		if h := m.res.reserved[name]; h.job != 0 {
			if j, ok := s.Job(h.job); !ok || j.State != Queued || j.Lapsed {
				delete(m.res.reserved, name)
			}
		}
	}
}

// resDispatched drops the reservations of a dispatched job.
func (m *refModel) resDispatched(id JobID) {
	for name, h := range m.res.reserved {
		if h.job == id {
			delete(m.res.reserved, name)
		}
	}
}

// resCheck compares the model's resources with the scheduler's.
func (m *refModel) resCheck(t *rapid.T, s *Scheduler, what string) {
	for _, name := range s.ResourceNames() {
		r, _, _ := s.resourceOf(name)
		if h := m.res.reserved[name]; r.reserved != h.job || (h.job != 0 && r.rank != h.rank) {
			t.Fatalf("after %s: resource %s reserved by %d (blocked since %d), the model says %d (%d)", what, name, r.reserved, r.rank, h.job, h.rank)
		}
		for k := level(r.free()) + 1; k <= r.Capacity+2; k++ {
			if got, want := r.lacked(k), m.lackOf(name, k); got != want {
				t.Fatalf("after %s: resource %s: %d units have found no room since %d, the model says %d (stairs %v)", what, name, k, got, want, r.stairs)
			}
		}
	}
}

// drawUses draws the resources a submit uses, of r1 and r2.
func drawUses(t *rapid.T) []Use {
	var us []Use
	for _, name := range []string{"r1", "r2"} {
		if rapid.IntRange(0, 2).Draw(t, "uses_"+name) == 0 {
			us = append(us, Use{Resource: name, Units: uint32(rapid.IntRange(1, 3).Draw(t, "units_"+name))})
		}
	}
	return us
}

// usesAllowed reports whether a submit's uses name declared resources,
// each with at most its capacity.
func usesAllowed(s *Scheduler, us []Use) bool {
	for _, u := range us {
		info, ok := s.Resource(u.Resource)
		if !ok || u.Units > info.Capacity {
			return false
		}
	}
	return true
}

// drawResourceSpec draws a resource's spec.
func drawResourceSpec(t *rapid.T, name string) ResourceSpec {
	tm := uint32(NoTenantMax)
	if rapid.Bool().Draw(t, "has_tenant_max") {
		tm = uint32(rapid.IntRange(0, 3).Draw(t, "tenant_max"))
	}
	return ResourceSpec{Name: name, Capacity: uint32(rapid.IntRange(0, 4).Draw(t, "capacity")), TenantMax: tm}
}
