package sfq

import "math"

// A slot is what one tenant has in one class and size: the heads of its
// groups' queues there, in three trees (tree.go), and the tenant's
// candidates as of its last placement. The candidate rule (SPEC §3
// "Groups") reads the trees:
//
//   - a head blocked only by a group-level limit (its group's cap) is
//     passed over: a blocked group never blocks another group;
//   - of the remaining heads (not blocked by their group, or blocked by a
//     tenant-level limit too), if the oldest is blocked by a tenant-level
//     limit, the tenant has no candidate of that size in that class nor in
//     any lower class: the slot is held;
//   - otherwise the candidate without a deadline is the eligible fifo head
//     with the lowest job ID (group_order=fifo) or whose group has the
//     lowest group tag (group_order=fair), and the deadline candidate the
//     eligible deadline head with the earliest (deadline_at, ID).
type slotRT struct {
	byID, fair, dl, cost int32 // tree roots
	// fifo and dlc are the tenant's candidates (id 0: none).
	fifo, dlc candRef
	// fifoPlaced and dlPlaced are the heads the tenant has in its class
	// and size's fair and deadline heaps (0 = none), so that re-placing a
	// tenant touches only the heaps whose entry changes.
	fifoPlaced, dlPlaced JobID
}

// candRef is a candidate head: its job, group and (deadline heads)
// deadline.
type candRef struct {
	id    JobID
	group uint32
	at    Time
}

// slots returns the tenant's slots of class c, or nil if it never queued a
// job of the class.
func (rt *tenantRT) slots(c Class) *[NumSizes]slotRT {
	if c == ClassNormal {
		return &rt.normal
	}
	return rt.other[c-1]
}

// slot returns the tenant's slot of class c and size sz, or nil if it never
// queued a job of the class.
func (rt *tenantRT) slot(c Class, sz Size) *slotRT {
	if c == ClassNormal {
		return &rt.normal[sz]
	}
	if rt.other[c-1] == nil {
		return nil
	}
	return &rt.other[c-1][sz]
}

// slotMut returns the tenant's slot of class c and size sz, creating the
// class's slots.
func (rt *tenantRT) slotMut(c Class, sz Size) *slotRT {
	if c == ClassNormal {
		return &rt.normal[sz]
	}
	if rt.other[c-1] == nil {
		rt.other[c-1] = new([NumSizes]slotRT)
	}
	return &rt.other[c-1][sz]
}

func bit(c Class, sz int) uint16 { return 1 << (uint(c)*NumSizes + uint(sz)) }

// classBits is the mask of every size of class c.
func classBits(c Class) uint16 { return (1<<NumSizes - 1) << (uint(c) * NumSizes) }

// sizeBits is the mask of every class of size sz.
func sizeBits(sz int) uint16 {
	var m uint16
	for c := range Class(NumClasses) {
		m |= bit(c, sz)
	}
	return m
}

// allSlots is the mask of every class and size.
const allSlots = 1<<(NumClasses*NumSizes) - 1

// uniformBlock reports the tenant-level limits that block every fifo head
// (uf) and every deadline head (ud) of class c and size sz alike: its
// max_running, max_running of the size, class cap and (deadline heads)
// deadline_cap, and (gate) its pause or rate limit.
func uniformBlock(t *Tenant, c Class, sz Size, gate bool) (uf, ud bool) {
	cp := &t.Caps
	uf = gate || (cp.MaxRunning > 0 && t.Running >= cp.MaxRunning) ||
		(cp.MaxRunningSize[sz] > 0 && t.RunningBySize[sz] >= cp.MaxRunningSize[sz])
	if m := cp.classCap(c); m > 0 && t.RunningByClass[c] >= m {
		uf = true
	}
	ud = uf || (cp.MaxRunningDeadline > 0 && t.RunningDeadline >= cp.MaxRunningDeadline)
	return uf, ud
}

// inflightRoom is the largest cost a head may have to pass the tenant's
// in-flight cap: unbounded without the cap or with nothing in flight
// (an oversized job runs alone).
func inflightRoom(t *Tenant) int64 {
	if t.Caps.MaxInflightCPUMs == 0 || t.InflightCPUMs == 0 {
		return unlimitedRoom
	}
	return t.Caps.MaxInflightCPUMs - t.InflightCPUMs
}

// tenantBlocks reports whether a tenant-level limit blocks node n, given
// the slot's uniform blocks and the in-flight room.
func tenantBlocks(n *hnode, uf, ud bool, room int64) bool {
	if n.dl {
		return ud || n.cost > room
	}
	return uf || n.cost > room
}

// link puts node x into slot sl's trees: treeID always; treeOrder and
// treeCost as its kind, group block and the tenant's group order call for.
func (s *Scheduler) link(sl *slotRT, x int32, fair bool) {
	p := &s.nodes
	n := &p.n[x]
	n.inOrd, n.inCst = false, false
	sl.byID = p.insert(treeID, sl.byID, x)
	if p.n[x].gb {
		return
	}
	if p.n[x].dl {
		p.n[x].inOrd = true
		sl.dl = p.insert(treeOrder, sl.dl, x)
		return
	}
	if fair {
		p.n[x].inOrd, p.n[x].inCst = true, true
		sl.fair = p.insert(treeOrder, sl.fair, x)
		sl.cost = p.insert(treeCost, sl.cost, x)
	}
}

// unlink takes node x out of every tree of slot sl.
func (s *Scheduler) unlink(sl *slotRT, x int32) {
	p := &s.nodes
	sl.byID = p.remove(treeID, sl.byID, x)
	n := &p.n[x]
	if n.inOrd {
		if n.dl {
			sl.dl = p.remove(treeOrder, sl.dl, x)
		} else {
			sl.fair = p.remove(treeOrder, sl.fair, x)
		}
	}
	if p.n[x].inCst {
		sl.cost = p.remove(treeCost, sl.cost, x)
	}
	p.n[x].inOrd, p.n[x].inCst = false, false
}

// refresh makes the nodes of group gs's queue q those of its current
// heads, dropping cancelled or pruned jobs from the queue's front. It
// returns whether a node changed.
func (s *Scheduler) refresh(ti, gs uint32, q *groupQueue) bool {
	changed := s.setHead(ti, gs, q, &q.fnode, s.fifoHead(q), false)
	if s.setHead(ti, gs, q, &q.dnode, s.deadlineHead(q), true) {
		changed = true
	}
	return changed
}

func (s *Scheduler) setHead(ti, gs uint32, q *groupQueue, at *int32, h headInfo, dl bool) bool {
	x := *at
	rt := &s.rt[ti]
	if !h.ok {
		if x == 0 {
			return false
		}
		s.unlink(rt.slot(q.class, q.size), x)
		s.nodes.release(x)
		*at = 0
		return true
	}
	if x != 0 && s.nodes.n[x].id == h.id {
		return false
	}
	sl := rt.slotMut(q.class, q.size)
	if x != 0 {
		s.unlink(sl, x)
	} else {
		x = s.nodes.alloc()
		*at = x
	}
	t := s.tenants.Get(uint64(ti))
	g := s.groups.Get(uint64(gs))
	n := &s.nodes.n[x]
	n.id, n.cost, n.group, n.dl, n.gb = h.id, h.cost, gs, dl, s.groupBlocked(t, g)
	n.key = g.tags[q.class]
	if dl {
		n.key = VirtualTime(h.at)
	}
	s.link(sl, x, t.GroupOrder == GroupFair)
	return true
}

// setBlocked re-links every head node of group gs after its group-level
// block changed, and returns the mask of the slots it touched.
func (s *Scheduler) setBlocked(ti, gs uint32, blocked bool) uint16 {
	var mask uint16
	fair := s.tenants.Get(uint64(ti)).GroupOrder == GroupFair
	grt := &s.grt[gs]
	for i := range grt.nq {
		q := grt.at(i)
		for _, x := range [2]int32{q.fnode, q.dnode} {
			if x == 0 || s.nodes.n[x].gb == blocked {
				continue
			}
			sl := s.rt[ti].slot(q.class, q.size)
			s.unlink(sl, x)
			s.nodes.n[x].gb = blocked
			s.link(sl, x, fair)
			mask |= bit(q.class, int(q.size))
		}
	}
	return mask
}

// setGroupTag stores group gs's tag in class c and re-keys what is keyed
// by it (group_order=fair), returning the mask of the slots touched.
func (s *Scheduler) setGroupTag(ti, gs uint32, c Class, tag VirtualTime) uint16 {
	s.storeGroupTag(ti, gs, c, tag)
	return s.rekeyGroup(ti, gs, c)
}

// storeGroupTag stores group gs's tag in class c, in its record and (as
// pending) for its tenant's tagMax.
func (s *Scheduler) storeGroupTag(ti, gs uint32, c Class, tag VirtualTime) {
	s.groups.Mut(uint64(gs)).tags[c] = tag
	if rt := &s.rt[ti]; rt.gmax != nil {
		if int(rt.npend) == len(rt.pend) {
			rt.flushTags()
		}
		rt.pend[rt.npend] = tagPend{pos: s.grt[gs].pos, class: c, tag: tag}
		rt.npend++
	}
}

// tagPend is a group tag not yet written to its tenant's tagMax.
type tagPend struct {
	pos   int32
	class Class
	tag   VirtualTime
}

// flushTags writes the pending group tags to the tenant's tagMax, in the
// order they were noted.
func (rt *tenantRT) flushTags() {
	for _, p := range rt.pend[:rt.npend] {
		rt.gmax[p.class].set(int(p.pos), p.tag)
	}
	rt.npend = 0
}

// rekeyGroup re-keys group gs's fifo head nodes of class c whose key is
// not its tag, returning the mask of the slots whose fair tree changed.
func (s *Scheduler) rekeyGroup(ti, gs uint32, c Class) uint16 {
	tag := s.groups.Get(uint64(gs)).tags[c]
	rt := &s.rt[ti]
	var mask uint16
	grt := &s.grt[gs]
	for i := range grt.nq {
		q := grt.at(i)
		if q.class != c || q.fnode == 0 {
			continue
		}
		x := q.fnode
		n := &s.nodes.n[x]
		if n.key == tag {
			continue
		}
		if !n.inOrd {
			n.key = tag
			continue
		}
		sl := rt.slot(c, q.size)
		sl.fair = s.nodes.remove(treeOrder, sl.fair, x)
		s.nodes.n[x].key = tag
		sl.fair = s.nodes.insert(treeOrder, sl.fair, x)
		mask |= bit(c, int(q.size))
	}
	return mask
}

// groupEligible reports whether group gs is eligible in class c as of the
// given open slots and in-flight room: one of its fifo heads there is not
// blocked by its group, sits in an open slot and fits the room.
func (s *Scheduler) groupEligible(gs uint32, c Class, open uint16, room int64) bool {
	grt := &s.grt[gs]
	for i := range grt.nq {
		q := grt.at(i)
		if q.class != c || q.fnode == 0 || open&bit(c, int(q.size)) == 0 {
			continue
		}
		if n := &s.nodes.n[q.fnode]; !n.gb && n.cost <= room {
			return true
		}
	}
	return false
}

// clampGroup applies the activation clamp to group gs in class c: its tag
// rises to the tenant's group_now. It returns the slots it touched.
func (s *Scheduler) clampGroup(ti, gs uint32, c Class) uint16 {
	gn := s.tenants.Get(uint64(ti)).groupNow[c]
	if s.groups.Get(uint64(gs)).tags[c] >= gn {
		return 0
	}
	return s.setGroupTag(ti, gs, c, gn)
}

// activate clamps the groups of a group_order=fair tenant that a change of
// its tenant-level state made eligible: fifo heads in slots that opened,
// or whose cost the in-flight room now fits and did not before, of groups
// that were not eligible through another head. The touched group is left
// to its caller. Cost: O(k log G) for the k heads that became eligible.
func (s *Scheduler) activate(ti uint32, mask, oldOpen, newOpen uint16, oldRoom, room int64, touched uint32) {
	rt := &s.rt[ti]
	for c := range Class(NumClasses) {
		for sz := range NumSizes {
			b := bit(c, sz)
			if mask&b == 0 || newOpen&b == 0 {
				continue
			}
			sl := rt.slot(c, Size(sz))
			if sl == nil || sl.cost == 0 {
				continue
			}
			lo := int64(math.MinInt64)
			if oldOpen&b != 0 {
				lo = oldRoom
			}
			if room <= lo {
				continue
			}
			s.nodes.costRange(sl.cost, lo, room, func(x int32) {
				gs := s.nodes.n[x].group
				if gs+1 != touched && !s.groupEligible(gs, c, oldOpen, oldRoom) {
					s.clampGroup(ti, gs, c)
				}
			})
		}
	}
}

// placeOpts says what place may assume and do.
type placeOpts struct {
	// clamp applies the activation clamps (of the tenant and its groups).
	clamp bool
	// fast is for Submit and Dispatch, which can only raise the tenant's
	// tags and keep its tier: a candidate still placed is left alone.
	fast bool
	// noScan skips looking for the groups a change of the tenant's
	// tenant-level state (its limits, the holds of the candidate rule)
	// made eligible: Dispatch never makes any, a Submit without a deadline
	// neither, and updateTenant compares every group before and after.
	noScan bool
	// touched is slot+1 of the group the command touched (0: none), and
	// was its eligibility per class before the command (group_order=fair).
	touched uint32
	was     [NumClasses]bool
}

// place re-evaluates tenant ti after a command touched it: the candidate
// rule in every slot of mask (every class of a size with any slot in mask
// when the tenant has caps, since a hold goes down the classes), the
// activation clamps of its groups (group_order=fair) and of the tenant in
// each class where it went from no candidate without a deadline to one,
// and its entries in the heaps.
//
// Keys in the fair heaps may lag behind a tag increase: a stored key lower
// than the real one makes the entry surface early, where best() checks
// and re-sifts it, and the top of a min-heap whose keys are all <= their
// real values is still the true minimum. Every other key change (a lower
// tag, another head job, another tier) is applied at once. Deadline heap
// keys are (deadline_at, ID) of the head and are always exact.
func (s *Scheduler) place(ti uint32, o *placeOpts, mask uint16) {
	t := s.tenants.Get(uint64(ti))
	rt := &s.rt[ti]
	lt := s.limitsInto(ti, &s.scratch) // the tenant's whole footprint
	// The lane's subscription burst is a tenant-level limit of its own
	// that blocks every head alike, as a pause does.
	gate := s.tenantGate(lt) || (rt.subscribed && t.Running >= rt.burst)
	if !lt.Caps.none() || gate {
		for sz := range NumSizes {
			if mask&sizeBits(sz) != 0 {
				mask |= sizeBits(sz)
			}
		}
	}
	fair := t.GroupOrder == GroupFair
	room := inflightRoom(lt)
	oldOpen, oldRoom := rt.openBits, rt.room
	p := &s.nodes
	pl := s.pools[rt.pool]

	// The candidate rule, first part: which slots are held.
	for sz := range NumSizes {
		if mask&sizeBits(sz) == 0 {
			continue
		}
		held := false
		for _, c := range classOrder {
			b := bit(c, sz)
			if mask&b == 0 {
				continue
			}
			uf, ud := uniformBlock(lt, c, Size(sz), gate)
			if sl := rt.slot(c, Size(sz)); !held && sl != nil && sl.byID != 0 {
				if x := p.oldest(sl.byID, uf, ud, room); x != 0 && tenantBlocks(&p.n[x], uf, ud, room) {
					held = true
				}
			}
			rt.heldBits &^= b
			rt.openBits &^= b
			if held {
				rt.heldBits |= b
			} else if !uf {
				rt.openBits |= b
			}
		}
	}
	rt.room = room

	// The groups that became eligible are clamped before their tags
	// choose the candidates.
	if fair && o.clamp {
		if !o.noScan {
			s.activate(ti, mask, oldOpen, rt.openBits, oldRoom, room, o.touched)
		}
		if gs := o.touched; gs != 0 && s.groups.Get(uint64(gs-1)) != nil {
			for c := range Class(NumClasses) {
				if !o.was[c] && s.groupEligible(gs-1, c, rt.openBits, room) {
					s.clampGroup(ti, gs-1, c)
				}
			}
		}
	}

	// The candidate rule, second part: the candidates of the open slots.
	for c := range Class(NumClasses) {
		for sz := range NumSizes {
			b := bit(c, sz)
			if mask&b == 0 {
				continue
			}
			rt.fairBits &^= b
			rt.dlBits &^= b
			sl := rt.slot(c, Size(sz))
			if sl == nil {
				continue
			}
			sl.fifo, sl.dlc = candRef{}, candRef{}
			if rt.heldBits&b != 0 {
				continue
			}
			uf, ud := uniformBlock(lt, c, Size(sz), gate)
			if !uf {
				var x int32
				if fair {
					x = p.fitOrder(sl.fair, room)
				} else {
					x = p.fitFIFO(sl.byID, room)
				}
				if x != 0 {
					rt.fairBits |= b
					sl.fifo = candRef{id: p.n[x].id, group: p.n[x].group}
				}
			}
			if !ud {
				if x := p.fitOrder(sl.dl, room); x != 0 {
					rt.dlBits |= b
					sl.dlc = candRef{id: p.n[x].id, group: p.n[x].group, at: Time(p.n[x].key)}
				}
			}
		}
	}

	// The tenant's activation clamp, in the classes re-evaluated.
	var classes [NumClasses]bool
	for c := range Class(NumClasses) {
		classes[c] = mask&classBits(c) != 0
	}
	for c := range Class(NumClasses) {
		if !classes[c] {
			continue
		}
		elig := rt.fairBits&classBits(c) != 0
		if elig && !rt.eligible[c] && o.clamp && s.cfg.Clamp == ClampActivation && t.Tag(c) < pl.vnow[c] {
			*s.tenants.Mut(uint64(ti)).tagPtr(c) = pl.vnow[c]
			t = s.tenants.Get(uint64(ti))
		}
		rt.eligible[c] = elig
	}
	for c := range Class(NumClasses) {
		sls := rt.slots(c)
		if sls == nil {
			continue
		}
		for sz := range NumSizes {
			b := bit(c, sz)
			if mask&b == 0 {
				continue
			}
			sl := &sls[sz]
			s.placeFair(pl, rt.local, t, c, sz, sl, rt.fairBits&b != 0, o.fast)
			want := JobID(0)
			if rt.dlBits&b != 0 {
				want = sl.dlc.id
			}
			if o.fast && sl.dlPlaced == want {
				continue
			}
			if d := &pl.dheap[c][sz]; want != 0 {
				d.set(hentry{tag: VirtualTime(sl.dlc.at), seq: want, tenant: rt.local})
			} else {
				d.remove(rt.local)
			}
			sl.dlPlaced = want
		}
	}
	// The route heaps hold the lane at its own tag (a cost correction may
	// have lowered it, a dispatch raised it), or below it: a Submit or a
	// Dispatch (fast) only raises its keys, which a pool that takes the
	// plain pick leaves to its scans (syncRouteTags).
	if !o.fast || !s.pools[rt.pool].plain {
		for c := range Class(NumClasses) {
			if classes[c] {
				s.syncRouteTags(ti, c)
			}
		}
	}
	// The idle rule's heaps: every tenant whose tag in the class is not 0
	// (a tag of 0 never raises virtual_now). Outside the classes
	// re-evaluated, a tag changes only on a full placement.
	for c := range Class(NumClasses) {
		if !classes[c] {
			continue
		}
		tag := t.Tag(c)
		if (tag != 0 || rt.inMaxTag[c]) && (!o.fast || !rt.inMaxTag[c] || rt.maxTagged[c] != tag) {
			pl.maxTag[c].set(hentry{tag: tag, tenant: rt.local})
			rt.inMaxTag[c], rt.maxTagged[c] = true, tag
		}
	}
}

// placeFair puts the lane of local number x in or out of pool pl's fair
// heaps of class c and size sz, for slot sl whose candidate is sl.fifo.
func (s *Scheduler) placeFair(pl *poolCore, x uint32, t *Tenant, c Class, sz int, sl *slotRT, elig bool, fast bool) {
	head := sl.fifo.id
	if !elig {
		head = 0
	}
	if fast && sl.fifoPlaced == head {
		return
	}
	sl.fifoPlaced = head
	a, b := &pl.heapA[c][sz], &pl.heapB[c][sz]
	if !elig {
		a.remove(x)
		b.remove(x)
		return
	}
	e := hentry{tag: t.Tag(c), seq: head, tenant: x, tier: t.Tier}
	if old := a.get(x); old != nil && lagging(old, &e) {
		return
	}
	if old := b.get(x); old != nil && lagging(old, &e) {
		return
	}
	if s.cfg.Clamp == ClampDispatch && e.tag <= pl.vnow[c] {
		a.remove(x)
		b.set(e)
	} else {
		b.remove(x)
		a.set(e)
	}
}

// lagging reports whether a stored entry differs from the real one only by
// a lower tag, which best() may fix lazily.
func lagging(stored, real *hentry) bool {
	return stored.seq == real.seq && stored.tier == real.tier && stored.tag <= real.tag
}

// groupEligibility returns group gs's eligibility in every class as of the
// tenant's last placement (for the activation clamp of group_order=fair).
func (s *Scheduler) groupEligibility(ti, gs uint32) [NumClasses]bool {
	var e [NumClasses]bool
	rt := &s.rt[ti]
	for c := range Class(NumClasses) {
		e[c] = s.groupEligible(gs, c, rt.openBits, rt.room)
	}
	return e
}
