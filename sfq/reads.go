package sfq

// Read-only methods of the Scheduler: virtual times, counters, tenants,
// jobs and weights.

// VirtualNow returns virtual_now of class normal.
func (s *Scheduler) VirtualNow() VirtualTime { return s.pools[DefaultPool].vnow[ClassNormal] }

// ClassVirtualNow returns virtual_now of class c in the pool default.
func (s *Scheduler) ClassVirtualNow(c Class) VirtualTime {
	return s.PoolVirtualNow(DefaultPool, c)
}

// PoolVirtualNow returns virtual_now of class c in pool p.
func (s *Scheduler) PoolVirtualNow(p PoolID, c Class) VirtualTime {
	if c >= NumClasses || int(p) >= len(s.pools) {
		return 0
	}
	return s.pools[p].vnow[c]
}

// NextJobID returns the ID the next submit will get.
func (s *Scheduler) NextJobID() JobID { return s.nextJob }

// QueuedTotal returns the number of queued jobs of all tenants.
func (s *Scheduler) QueuedTotal() uint64 { return s.queued }

// TenantIndex returns the index of a live tenant.
func (s *Scheduler) TenantIndex(name string) (uint32, bool) {
	i, ok := s.byName[name]
	if !ok {
		return 0, false
	}
	if t := s.tenants.Get(uint64(i)); t == nil || t.Deleted {
		return 0, false
	}
	return i, true
}

// Tenant returns a copy of a live tenant's record, its counters and
// billing summed over every pool (its tags and usage are those of the
// pool default: Lane reads another pool's).
func (s *Scheduler) Tenant(name string) (Tenant, bool) {
	i, ok := s.TenantIndex(name)
	if !ok {
		return Tenant{}, false
	}
	return s.totals(i), true
}

// TenantTotals returns the record of the tenant whose lane index i is,
// with its counters and billing summed over every pool (tombstones
// included).
func (s *Scheduler) TenantTotals(i uint32) (Tenant, bool) {
	if s.tenants.Get(uint64(i)) == nil {
		return Tenant{}, false
	}
	return s.totals(s.owner(i)), true
}

// TenantAt returns a copy of the record at index i (tombstones included):
// a tenant's own record, or one of its lanes, with that lane's counters.
func (s *Scheduler) TenantAt(i uint32) (Tenant, bool) {
	t := s.tenants.Get(uint64(i))
	if t == nil {
		return Tenant{}, false
	}
	return *t, true
}

// TenantName returns the name of the tenant at index i.
func (s *Scheduler) TenantName(i uint32) string {
	if t := s.tenants.Get(uint64(i)); t != nil {
		return t.Name
	}
	return ""
}

// TenantCount returns the number of tenant slots, tombstones and lanes
// included.
func (s *Scheduler) TenantCount() int { return s.tenants.Len() }

// Tenants calls fn for every live tenant in index order (not its lanes),
// with its counters and billing summed over every pool.
func (s *Scheduler) Tenants(fn func(i uint32, t *Tenant) bool) {
	var sum Tenant
	s.tenants.View().Each(func(i uint64, t *Tenant) bool {
		if t.Deleted || t.pool != DefaultPool {
			return true
		}
		if len(s.rt[i].lanes) != 0 {
			sum = s.totals(uint32(i))
			t = &sum
		}
		return fn(uint32(i), t)
	})
}

// Job returns a copy of a job's record.
func (s *Scheduler) Job(id JobID) (Job, bool) {
	j := s.jobs.Get(uint64(id))
	if j == nil {
		return Job{}, false
	}
	return *j, true
}

// TenantJob returns a copy of a job as seen through a tenant's scope: the
// job only if it belongs to the live tenant named tenant (any job when
// tenant is empty, the admin's scope). Another tenant's job, a job of a
// deleted tenant of the same name, and a missing one look the same, so IDs
// cannot be probed.
func (s *Scheduler) TenantJob(tenant string, id JobID) (Job, bool) {
	j := s.jobs.Get(uint64(id))
	if j == nil {
		return Job{}, false
	}
	if tenant != "" {
		if ti, ok := s.TenantIndex(tenant); !ok || s.owner(j.Tenant) != ti {
			return Job{}, false
		}
	}
	return *j, true
}

// TenantJobs calls fn for the jobs of the live tenant named tenant (every
// job when tenant is empty) with ID >= from, in ID order, until fn returns
// false. It reports false, calling nothing, when no live tenant has that
// name. The pointer must not be retained or written.
func (s *Scheduler) TenantJobs(tenant string, from JobID, fn func(j *Job) bool) bool {
	if tenant == "" {
		s.Jobs(from, fn)
		return true
	}
	ti, ok := s.TenantIndex(tenant)
	if !ok {
		return false
	}
	s.Jobs(from, func(j *Job) bool { return s.owner(j.Tenant) != ti || fn(j) })
	return true
}

// TenantJobsDown is TenantJobs from the newest job down: every job of
// tenant (every tenant's if empty) with ID <= from (from 0: the newest),
// in descending ID order.
func (s *Scheduler) TenantJobsDown(tenant string, from JobID, fn func(j *Job) bool) bool {
	if tenant == "" {
		s.JobsDown(from, fn)
		return true
	}
	ti, ok := s.TenantIndex(tenant)
	if !ok {
		return false
	}
	s.JobsDown(from, func(j *Job) bool { return s.owner(j.Tenant) != ti || fn(j) })
	return true
}

// JobsDown calls fn for every job with ID <= from (from 0: every job) in
// descending ID order until fn returns false. The pointer must not be
// retained or written.
func (s *Scheduler) JobsDown(from JobID, fn func(j *Job) bool) {
	v := s.jobs.View()
	if len(v.dir) == 0 {
		return
	}
	top := uint64(len(v.dir))<<chunkBits - 1
	if from != 0 && uint64(from) < top {
		top = uint64(from)
	}
	for c := int64(top >> chunkBits); c >= 0; c-- {
		ch := v.dir[c]
		if ch == nil {
			continue
		}
		for o := chunkSize - 1; o >= 0; o-- {
			id := uint64(c)<<chunkBits | uint64(o)
			if id > top || ch.present[o/64]&(1<<(o%64)) == 0 {
				continue
			}
			if !fn(&ch.items[o]) {
				return
			}
		}
	}
}

// UnfinishedPayload returns the payload bytes of tenant ti's unfinished
// jobs (scheduled, queued, assigned, running).
func (s *Scheduler) UnfinishedPayload(ti uint32) uint64 {
	return s.unfinishedPayload(ti)
}

// UnfinishedPayloadAll is the payload bytes of every tenant's unfinished
// jobs (scheduled, queued, assigned, running) together.
func (s *Scheduler) UnfinishedPayloadAll() uint64 { return s.payloadAll }

func (s *Scheduler) unfinishedPayload(ti uint32) uint64 {
	if int(ti) >= len(s.rt) {
		return 0
	}
	var n uint64
	s.eachLane(s.owner(ti), func(l uint32) { n += s.rt[l].payload }) // in every pool
	return n
}

// JobCount returns the number of jobs in the table.
func (s *Scheduler) JobCount() int { return s.jobs.Len() }

// Jobs calls fn for every job with ID >= from in ID order until fn returns
// false. The pointer must not be retained or written.
func (s *Scheduler) Jobs(from JobID, fn func(j *Job) bool) {
	v := s.jobs.View()
	for c := uint64(from) >> chunkBits; c < uint64(len(v.dir)); c++ {
		ch := v.dir[c]
		if ch == nil {
			continue
		}
		for o := 0; o < chunkSize; o++ {
			id := c<<chunkBits | uint64(o)
			if id < uint64(from) || ch.present[o/64]&(1<<(o%64)) == 0 {
				continue
			}
			if !fn(&ch.items[o]) {
				return
			}
		}
	}
}

// Weight returns the weight tenant t would be dispatched with at now,
// without storing the decayed usage.
func (s *Scheduler) Weight(t *Tenant, now Time) Weight {
	return s.weight(t, s.decayedUsage(t, now))
}

// DecayedUsage returns the tenant's usage decayed to now, without storing
// it.
func (s *Scheduler) DecayedUsage(t *Tenant, now Time) int64 { return s.decayedUsage(t, now) }

func (s *Scheduler) decayedUsage(t *Tenant, now Time) int64 {
	if s.cfg.Decay == nil {
		return t.Usage
	}
	return decayUsage(t.Usage, int64(now-t.UsageAt), s.cfg.Decay.HalfLifeMs)
}

func (s *Scheduler) weight(t *Tenant, usage int64) Weight {
	factor := WeightOne
	if s.cfg.Decay != nil {
		factor = decayFactor(usage, s.cfg.Decay.NormMs)
	}
	if base := s.pools[t.pool].Weights.Of(t.Name); base != 0 {
		return Weight(base * int64(factor)) // the pool's weights replace tier and multiplier
	}
	mult := max(t.Multiplier, 1)
	return Weight(int64(s.cfg.TierWeights[t.Tier]) * int64(mult) * int64(factor))
}

// RaiseNextJob makes the next job's ID at least id (a restore of an
// older state: IDs never go back, so no job gets an ID the cluster
// handed out before). It never lowers it.
func (s *Scheduler) RaiseNextJob(id JobID) error {
	if id > MaxID {
		return invalidf("", "next job ID %d is past %d", id, uint64(MaxID))
	}
	s.nextJob = max(s.nextJob, id)
	return nil
}
