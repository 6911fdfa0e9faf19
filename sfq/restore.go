package sfq

// Decode: a state read back from its encoding, with every derived
// structure rebuilt.

import "fmt"

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
	s.details = version >= 7
	if version >= 8 {
		s.details = d.Bool()
	}
	if version >= 9 {
		if err := s.decodeResources(d); err != nil {
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
			s.payloadAll += uint64(len(j.Payload()))
		}
		var u UsesID
		if key := j.usesPrefix(); key != "" && !j.State.Terminal() {
			// An unfinished job's resources are declared.
			if u, err = s.internUses(key); err != nil {
				err = fmt.Errorf("%w: job %d (%s): %w", ErrCorrupt, j.ID, j.State, err)
				return false
			}
			if j.State.Live() {
				s.deriveHeld(s.owner(j.Tenant), u)
			}
		}
		switch {
		case j.State == Queued:
			gs, _ := s.groupSlot(j.Tenant, j.Group())
			q := s.queueMut(gs, j.Class, j.Size)
			r := s.routeOf(j)
			if !j.Lapsed {
				s.countRoute(j.Tenant, j.Class, j.Size, r, u, j.deadline(), 1)
			}
			if j.deadline() {
				if !j.Lapsed {
					q.ofMut(r, u).deadlines().push(dlEntry{at: j.DeadlineAt(), id: j.ID})
				}
			} else {
				if !j.Lapsed {
					q.ofMut(r, u).fifo.pushBack(j.ID)
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
