package sfq

// Verify: the checks of a state's counters and derived structures
// against its tables.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrVerify marks a state whose derived counters or indexes disagree with
// its job table.
var ErrVerify = errors.New("state verification failed")

// Verify recomputes every counter from the job table and checks it, checks
// every group (its counters, its queues' heads and their nodes, that it
// would not have been forgotten), every tree of every slot (order,
// balance, aggregates, membership), the candidate rule's decision in every
// slot against a brute-force one, that every tenant sits in exactly the
// heaps that decision calls for, and that the estimate index matches its
// table. It returns an error listing each difference (at most 20).
func (s *Scheduler) Verify() error {
	var problems []string
	report := func(format string, args ...any) {
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	type counts struct {
		running    uint32
		bySize     [NumSizes]uint32
		byClass    [NumClasses]uint32
		deadline   uint32
		inflight   int64
		queued     [NumSizes]uint32
		queuedFair [NumClasses]uint32
		payload    uint64
	}
	// Per group and (class, size): the oldest queued job without a
	// deadline and the most urgent deadline job.
	type gheads struct{ fifo, dl headInfo }
	type gcounts struct {
		running, queued uint32
		scheduled       uint32
		heads           map[[2]uint8]*gheads
	}
	nt := s.tenants.Len()
	derived := make([]counts, nt)
	gderived := map[groupKey]*gcounts{}
	ungrouped := make([]*gcounts, nt) // the tenants' jobs outside a named group
	names := 0                        // tenants the name index resolves to
	var queued, grouped uint64
	queuedFair := make([][NumClasses]uint64, len(s.pools))
	s.jobs.View().Each(func(_ uint64, j *Job) bool {
		if j.Group() != "" {
			grouped++
		}
		if int(j.Tenant) >= nt {
			report("job %d refers to tenant %d of %d", j.ID, j.Tenant, nt)
			return true
		}
		c := &derived[j.Tenant]
		if !j.State.Terminal() {
			c.payload += uint64(len(j.Payload()))
		}
		var gc *gcounts
		if j.State == Queued || j.State.Live() || j.State == Scheduled {
			if j.Group() == "" { // most jobs: no map lookup
				if gc = ungrouped[j.Tenant]; gc == nil {
					gc = &gcounts{heads: map[[2]uint8]*gheads{}}
					ungrouped[j.Tenant] = gc
				}
			} else {
				k := groupKey{j.Tenant, j.Group()}
				if gc = gderived[k]; gc == nil {
					gc = &gcounts{heads: map[[2]uint8]*gheads{}}
					gderived[k] = gc
				}
			}
		}
		switch {
		case j.State == Queued:
			c.queued[j.Size]++
			gc.queued++
			queued++
			hk := [2]uint8{uint8(j.Class), uint8(j.Size)}
			h := gc.heads[hk]
			if h == nil {
				h = &gheads{}
				gc.heads[hk] = h
			}
			x := headInfo{id: j.ID, cost: j.EstCostMs, at: j.DeadlineAt(), ok: true}
			// A lapsed job counts as queued but is out of its queue.
			if !j.deadline() {
				queuedFair[s.rt[j.Tenant].pool][j.Class]++
				c.queuedFair[j.Class]++
				if !h.fifo.ok && !j.Lapsed {
					h.fifo = x
				}
			} else if !j.Lapsed && (!h.dl.ok || dlBefore(dlEntry{x.at, x.id}, dlEntry{h.dl.at, h.dl.id})) {
				h.dl = x
			}
		case j.State == Scheduled:
			gc.scheduled++
		case j.State.Live():
			c.running++
			gc.running++
			c.bySize[j.Size]++
			c.byClass[j.Class]++
			if j.deadline() {
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
		if j.Class >= NumClasses || j.DeadlineAt() < 0 || j.deadline() != (j.DeadlineAt() != 0) {
			report("job %d has class %d and deadline %v at %d", j.ID, j.Class, j.deadline(), j.DeadlineAt())
		}
		return true
	})
	for t, gc := range ungrouped {
		if gc != nil {
			gderived[groupKey{uint32(t), ""}] = gc
		}
	}
	if queued != s.queued {
		report("queued total is %d, job table says %d", s.queued, queued)
	}
	if grouped != s.grouped {
		report("jobs of a named group: %d, job table says %d", s.grouped, grouped)
	}
	for i, p := range s.pools {
		if queuedFair[i] != p.queuedFair {
			report("pool %s: queued without a deadline per class is %v, job table says %v", p.Name, p.queuedFair, queuedFair[i])
		}
	}

	// The groups. Each tenant's tagMax is checked as it reads, with its
	// pending tags written (to copies).
	tagMaxes := make([]*[NumClasses]tagMax, len(s.rt))
	for i := range s.rt {
		rt := &s.rt[i]
		if rt.gmax == nil {
			if rt.npend != 0 {
				report("tenant %d has %d pending group tags and no tagMax", i, rt.npend)
			}
			continue
		}
		cp := new([NumClasses]tagMax)
		for c := range cp {
			cp[c].v = slices.Clone(rt.gmax[c].v)
		}
		for _, p := range rt.pend[:rt.npend] {
			cp[p.class].set(int(p.pos), p.tag)
		}
		tagMaxes[i] = cp
	}
	named := make([]uint32, nt)
	seen := map[groupKey]bool{}
	ownNames := map[groupKey]bool{}
	s.groups.View().Each(func(slot uint64, g *Group) bool {
		gs := uint32(slot)
		k := groupKey{g.Tenant, g.Name}
		t := s.tenants.Get(uint64(g.Tenant))
		if t == nil || t.Deleted || int(g.Tenant) >= len(s.rt) {
			report("group %q (slot %d) belongs to a missing or deleted tenant %d", g.Name, gs, g.Tenant)
			return true
		}
		if seen[k] {
			report("tenant %q has two groups %q", t.Name, g.Name)
		}
		seen[k] = true
		// max_groups counts names: a group of one name in several pools
		// counts once, on its tenant's own record.
		if ok := (groupKey{s.owner(g.Tenant), g.Name}); g.Name != "" && !ownNames[ok] {
			ownNames[ok] = true
			named[ok.tenant]++
		}
		if got, ok := s.groupSlot(g.Tenant, g.Name); !ok || got != gs {
			report("tenant %q group %q (slot %d) is not indexed", t.Name, g.Name, gs)
		}
		if int(gs) >= len(s.grt) || s.grt[gs].pos < 0 || int(s.grt[gs].pos) >= len(s.rt[g.Tenant].groups) || s.rt[g.Tenant].groups[s.grt[gs].pos] != gs {
			report("tenant %q group %q (slot %d) is not in its tenant's list", t.Name, g.Name, gs)
			return true
		}
		gc := gderived[k]
		if gc == nil {
			gc = &gcounts{}
		}
		if g.Running != gc.running || g.Queued != gc.queued {
			report("tenant %q group %q counters running=%d queued=%d, job table says running=%d queued=%d", t.Name, g.Name, g.Running, g.Queued, gc.running, gc.queued)
		}
		if gc.running == 0 && gc.queued == 0 && gc.scheduled == 0 && !g.kept() {
			report("tenant %q group %q has no job and no setting and was not forgotten", t.Name, g.Name)
		}
		if (g.Name == "" && !g.Empty()) || (g.Name != "" && ValidateGroupName(g.Name) != nil) || g.GroupSettings.Validate() != nil {
			report("tenant %q group %q has a bad name or settings %+v", t.Name, g.Name, g.GroupSettings)
		}
		blocked := s.groupBlocked(t, g)
		fair := t.GroupOrder == GroupFair
		nq := 0
		for i := range s.grt[gs].nq {
			q := s.grt[gs].at(i)
			var h gheads
			if x := gc.heads[[2]uint8{uint8(q.class), uint8(q.size)}]; x != nil {
				h = *x
				nq++
			}
			for _, side := range []struct {
				node int32
				want headInfo
				dl   bool
			}{{q.fnode, h.fifo, false}, {q.dnode, h.dl, true}} {
				if !side.want.ok {
					if side.node != 0 {
						report("tenant %q group %q %s %s has a head node %d and no queued job", t.Name, g.Name, q.class, q.size, side.node)
					}
					continue
				}
				if side.node <= 0 || int(side.node) >= len(s.nodes.n) {
					report("tenant %q group %q %s %s: head job %d has no node", t.Name, g.Name, q.class, q.size, side.want.id)
					continue
				}
				n := &s.nodes.n[side.node]
				key := g.tags[q.class]
				if side.dl {
					key = VirtualTime(side.want.at)
				}
				if n.id != side.want.id || n.cost != side.want.cost || n.group != gs || n.dl != side.dl || n.gb != blocked || n.key != key {
					report("tenant %q group %q %s %s: node %+v, head job %d cost %d key %d blocked %v", t.Name, g.Name, q.class, q.size,
						*n, side.want.id, side.want.cost, key, blocked)
				}
				if wantOrd, wantCst := !blocked && (side.dl || fair), !blocked && !side.dl && fair; n.inOrd != wantOrd || n.inCst != wantCst {
					report("tenant %q group %q %s %s: node of job %d in order/cost trees %v/%v, want %v/%v", t.Name, g.Name, q.class, q.size, n.id,
						n.inOrd, n.inCst, wantOrd, wantCst)
				}
			}
		}
		if nq != len(gc.heads) {
			report("tenant %q group %q has queued jobs in %d queues and %d of them are known", t.Name, g.Name, len(gc.heads), nq)
		}
		if hp := tagMaxes[g.Tenant]; hp != nil {
			for c := range Class(NumClasses) {
				if i := len(hp[c].v)/2 + int(s.grt[gs].pos); i >= len(hp[c].v) || hp[c].v[i] != g.tags[c] {
					report("tenant %q group %q: its %s tag %s is not in the tenant's tagMax", t.Name, g.Name, c, g.tags[c])
				}
			}
		}
		return true
	})
	for k := range gderived {
		if !seen[k] {
			report("tenant %d has queued or live jobs in group %q, which does not exist", k.tenant, k.name)
		}
	}
	if len(s.gindex)+countUnnamed(s.rt) != s.groups.Len() {
		report("group index has %d entries for %d groups", len(s.gindex)+countUnnamed(s.rt), s.groups.Len())
	}

	var payloadAll uint64
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
		if t.Groups != named[i] {
			report("tenant %q counts %d named groups, the group table holds %d", t.Name, t.Groups, named[i])
		}
		if t.Deleted && (c.running > 0 || c.queued != [NumSizes]uint32{}) {
			report("deleted tenant %q has live jobs", t.Name)
		}
		rt := &s.rt[i]
		if t.pool != DefaultPool {
			s.verifyLane(ti, t, report)
		} else {
			switch got, ok := s.byName[t.Name]; {
			case ok && got == ti:
				names++
			case !ok || got < ti || !t.Deleted:
				// Only a tombstone of an earlier incarnation may be
				// shadowed, by a later index of the same name.
				report("tenant %q is not indexed by name", t.Name)
			}
		}
		if rt.payload != c.payload {
			report("tenant %q holds %d payload bytes in unfinished jobs, job table says %d", t.Name, rt.payload, c.payload)
		}
		payloadAll += c.payload
		if rt.queuedFair != c.queuedFair {
			report("tenant %q queued without a deadline per class %v, job table says %v", t.Name, rt.queuedFair, c.queuedFair)
		}
		if (rt.gmax != nil) != (t.GroupOrder == GroupFair && !t.Deleted) {
			report("tenant %q (group_order %s) has tagMax trees: %v", t.Name, t.GroupOrder, rt.gmax != nil)
		}
		if rt.gmax != nil {
			for cl := range Class(NumClasses) {
				v := tagMaxes[ti][cl].v
				n := len(v) / 2
				if n < len(rt.groups) {
					report("tenant %q %s tagMax has %d leaves for %d groups", t.Name, cl, n, len(rt.groups))
					continue
				}
				for k := len(rt.groups); k < n; k++ {
					if v[n+k] != noTag {
						report("tenant %q %s tagMax leaf %d is unused and holds %s", t.Name, cl, k, v[n+k])
					}
				}
				for k := 1; k < n; k++ {
					if v[k] != max(v[2*k], v[2*k+1]) {
						report("tenant %q %s tagMax node %d is not the higher of its children", t.Name, cl, k)
					}
				}
			}
		}
		s.verifySlots(ti, t, report)
		for cl := range Class(NumClasses) {
			e := s.pool(ti).maxTag[cl].get(rt.local)
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
	if payloadAll != s.payloadAll {
		report("the tenants hold %d payload bytes in unfinished jobs, the total says %d", payloadAll, s.payloadAll)
	}
	s.verifyEstimates(report)
	s.verifyDelays(report)
	s.verifyQueues(report)
	s.verifyRoutes(report)
	s.verifyResources(report)
	s.verifyRates(report)
	s.verifyDeadLetters(report)
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrVerify, strings.Join(problems, "; "))
}

func countUnnamed(rts []tenantRT) int {
	n := 0
	for i := range rts {
		if rts[i].unnamed != 0 {
			n++
		}
	}
	return n
}

// verifySlots checks every slot of tenant ti: its trees, the candidate
// rule's decision (recomputed by brute force over the group heads), and
// the tenant's entries in the heaps.
func (s *Scheduler) verifySlots(ti uint32, t *Tenant, report func(string, ...any)) {
	rt := &s.rt[ti]
	p := &s.nodes
	fair := t.GroupOrder == GroupFair
	var buf Tenant
	lt := s.limitsInto(ti, &buf)
	room := inflightRoom(lt)
	pl, x := s.pools[rt.pool], rt.local
	if t.Deleted {
		for c := range Class(NumClasses) {
			for sz := range NumSizes {
				if pl.heapA[c][sz].has(x) || pl.heapB[c][sz].has(x) || pl.dheap[c][sz].has(x) {
					report("deleted tenant %q is in a %s %s heap", t.Name, c, Size(sz))
				}
			}
		}
		if len(rt.groups) != 0 || rt.other != [NumClasses - 1]*[NumSizes]slotRT{} || rt.normal != [NumSizes]slotRT{} {
			report("deleted tenant %q keeps groups or slots", t.Name)
		}
		return
	}
	if rt.room != room {
		report("tenant %q in-flight room %d, its counters say %d", t.Name, rt.room, room)
	}
	for sz := range NumSizes {
		held := false
		for _, cl := range classOrder {
			b := bit(cl, sz)
			sl := rt.slot(cl, Size(sz))
			var heads []int32 // every head node of the slot, from the groups
			if sl != nil {
				for _, gs := range rt.groups {
					if q := s.queue(gs, cl, Size(sz)); q != nil {
						for _, x := range [2]int32{q.fnode, q.dnode} {
							if x > 0 && int(x) < len(p.n) {
								heads = append(heads, x)
							}
						}
					}
				}
				s.verifyTrees(t, cl, Size(sz), sl, heads, fair, report)
			}
			// The candidate rule by brute force.
			uf, ud := uniformBlock(lt, cl, Size(sz), s.tenantGate(lt) || (rt.subscribed && t.Running >= rt.burst))
			var oldest, fifo, dl *hnode
			for _, x := range heads {
				n := &p.n[x]
				tb := tenantBlocks(n, uf, ud, room)
				if n.gb && !tb {
					continue // passed over
				}
				if oldest == nil || n.id < oldest.id {
					oldest = n
				}
				if tb || n.gb {
					continue
				}
				switch {
				case n.dl:
					if dl == nil || dlBefore(dlEntry{Time(n.key), n.id}, dlEntry{Time(dl.key), dl.id}) {
						dl = n
					}
				case fair:
					if fifo == nil || n.key < fifo.key || (n.key == fifo.key && n.id < fifo.id) {
						fifo = n
					}
				default:
					if fifo == nil || n.id < fifo.id {
						fifo = n
					}
				}
			}
			if oldest != nil && tenantBlocks(oldest, uf, ud, room) {
				held = true
			}
			if held {
				fifo, dl = nil, nil
			}
			if got := rt.heldBits&b != 0; got != held {
				report("tenant %q %s %s held %v, the candidate rule says %v", t.Name, cl, Size(sz), got, held)
			}
			if got, want := rt.openBits&b != 0, !held && !uf; got != want {
				report("tenant %q %s %s open %v, want %v", t.Name, cl, Size(sz), got, want)
			}
			var wantF, wantD candRef
			if fifo != nil {
				wantF = candRef{id: fifo.id, group: fifo.group}
			}
			if dl != nil {
				wantD = candRef{id: dl.id, group: dl.group, at: Time(dl.key)}
			}
			if (rt.fairBits&b != 0) != (fifo != nil) || (rt.dlBits&b != 0) != (dl != nil) {
				report("tenant %q %s %s: candidate bits %v/%v, the candidate rule says %v/%v", t.Name, cl, Size(sz),
					rt.fairBits&b != 0, rt.dlBits&b != 0, fifo != nil, dl != nil)
			}
			if sl != nil && (sl.fifo != wantF || sl.dlc != wantD) {
				report("tenant %q %s %s: candidates %+v/%+v, the candidate rule says %+v/%+v", t.Name, cl, Size(sz), sl.fifo, sl.dlc, wantF, wantD)
			}
			inA, inB := pl.heapA[cl][sz].has(x), pl.heapB[cl][sz].has(x)
			if (inA || inB) != (fifo != nil) || (inA && inB) {
				report("tenant %q %s %s: in order heaps %v/%v, candidate %v", t.Name, cl, Size(sz), inA, inB, fifo != nil)
			}
			// A stored key may lag behind a tag increase, never ahead.
			real := hentry{tag: t.Tag(cl), seq: wantF.id, tenant: x, tier: t.Tier}
			var placed JobID
			for _, e := range []*hentry{pl.heapA[cl][sz].get(x), pl.heapB[cl][sz].get(x)} {
				if e != nil {
					placed = e.seq
					if !lagging(e, &real) {
						report("tenant %q %s %s: heap key %+v is ahead of the real key %+v", t.Name, cl, Size(sz), *e, real)
					}
				}
			}
			if sl != nil && sl.fifoPlaced != placed {
				report("tenant %q %s %s: slot placed %d, heaps hold %d", t.Name, cl, Size(sz), sl.fifoPlaced, placed)
			}
			e := pl.dheap[cl][sz].get(x)
			if (e != nil) != (dl != nil) {
				report("tenant %q %s %s: in the deadline heap %v, deadline candidate %v", t.Name, cl, Size(sz), e != nil, dl != nil)
			} else if e != nil && (e.seq != wantD.id || e.tag != VirtualTime(wantD.at)) {
				report("tenant %q %s %s: deadline heap key %+v, candidate is job %d at %d", t.Name, cl, Size(sz), *e, wantD.id, wantD.at)
			}
			if sl != nil && ((e == nil && sl.dlPlaced != 0) || (e != nil && sl.dlPlaced != e.seq)) {
				report("tenant %q %s %s: deadline slot placed %d differs from its heap's", t.Name, cl, Size(sz), sl.dlPlaced)
			}
		}
	}
}

// verifyTrees checks the trees of one slot: each holds exactly the heads
// it should, in order, balanced, with exact aggregates.
func (s *Scheduler) verifyTrees(t *Tenant, c Class, sz Size, sl *slotRT, heads []int32, fair bool, report func(string, ...any)) {
	p := &s.nodes
	want := [4]map[int32]bool{{}, {}, {}, {}} // byID, fair, dl, cost
	for _, x := range heads {
		n := &p.n[x]
		want[0][x] = true
		if !n.gb {
			switch {
			case n.dl:
				want[2][x] = true
			case fair:
				want[1][x] = true
				want[3][x] = true
			}
		}
	}
	for k, tr := range []struct {
		root int32
		t    int
	}{{sl.byID, treeID}, {sl.fair, treeOrder}, {sl.dl, treeOrder}, {sl.cost, treeCost}} {
		got := map[int32]bool{}
		var prev int32
		var check func(x int32) (h int8, ok bool)
		check = func(x int32) (int8, bool) {
			if x == 0 {
				return 0, true
			}
			if x < 0 || int(x) >= len(p.n) || got[x] {
				report("tenant %q %s %s tree %d: bad or repeated node %d", t.Name, c, sz, k, x)
				return 0, false
			}
			n := &p.n[x]
			hl, ok1 := check(n.l[tr.t])
			if prev != 0 && !p.less(tr.t, prev, x) {
				report("tenant %q %s %s tree %d: node %d out of order", t.Name, c, sz, k, x)
			}
			prev = x
			got[x] = true
			hr, ok2 := check(n.r[tr.t])
			if !ok1 || !ok2 {
				return 0, false
			}
			if cp := *n; true {
				p.recompute(tr.t, &cp)
				if cp != *n {
					report("tenant %q %s %s tree %d: node %d height or aggregates %+v, recomputed %+v", t.Name, c, sz, k, x, *n, cp)
				}
			}
			if d := hl - hr; d > 1 || d < -1 {
				report("tenant %q %s %s tree %d: node %d out of balance", t.Name, c, sz, k, x)
			}
			return n.ht[tr.t], true
		}
		check(tr.root)
		if len(got) != len(want[k]) {
			report("tenant %q %s %s tree %d holds %d nodes, want %d", t.Name, c, sz, k, len(got), len(want[k]))
			continue
		}
		for x := range got {
			if !want[k][x] {
				report("tenant %q %s %s tree %d holds node %d, which it should not", t.Name, c, sz, k, x)
			}
		}
	}
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
