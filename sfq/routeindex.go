package sfq

// The route index: which lanes of a pool hold queued jobs of each route,
// per class and size, so that the dispatch of a worker that runs some
// routes only (kinds.go) looks at the lanes that may have a job for it,
// in the order their tags rank them, and stops at the first that wins.

// routeKey names one class, size, route and set of uses (resources.go;
// 0: none).
type routeKey struct {
	class Class
	size  Size
	route Route
	uses  UsesID
}

// routeRef is one of a lane's entries in its pool's route heaps: the key
// and its route lanes (which live while the lane has an entry there).
type routeRef struct {
	key routeKey
	rl  *routeLanes
}

// routeLanes are the lanes of a pool that hold queued jobs of one class,
// size and route: those without a deadline in a heap by their tag in the
// class (a stored tag may lag a rise of the real one, never a fall: it is
// a lower bound, as in the fair heaps), with the count of such jobs each,
// and those with a deadline with their count.
type routeLanes struct {
	key   routeKey
	fifo  tenantHeap        // by the lane's local number
	nfifo map[uint32]uint32 // lane (tenant index) -> queued jobs without a deadline
	ndl   map[uint32]uint32 // lane (tenant index) -> queued jobs with a deadline
}

// countRoute adds d to the queued jobs of lane ti of class c, size sz,
// route r and uses u (deadline jobs apart), keeping the lane's entry in
// the route heap while it holds any.
func (s *Scheduler) countRoute(ti uint32, c Class, sz Size, r Route, u UsesID, deadline bool, d int) {
	rt := &s.rt[ti]
	p := s.pools[rt.pool]
	k := routeKey{c, sz, r, u}
	if p.routes == nil {
		p.routes = make(map[routeKey]*routeLanes)
	}
	rl := p.routes[k]
	if rl == nil {
		rl = &routeLanes{key: k, fifo: tenantHeap{order: byTag}, nfifo: map[uint32]uint32{}, ndl: map[uint32]uint32{}}
		p.routes[k] = rl
		if u != 0 {
			base := routeKey{c, sz, r, 0}
			if p.alts == nil {
				p.alts = make(map[routeKey][]UsesID)
			}
			p.alts[base] = append(p.alts[base], u)
		}
	}
	s.countQueuedUses(rt.pool, u, int64(d))
	counts := rl.nfifo
	if deadline {
		counts = rl.ndl
	}
	was := counts[ti]
	n := int(was) + d
	if n > 0 {
		counts[ti] = uint32(n)
	} else {
		delete(counts, ti)
	}
	if !deadline {
		switch {
		case was == 0 && n > 0:
			// Its key until the lane is placed (syncRouteTags): its tag
			// and tier, and no job ID, the lowest there is.
			t := s.tenants.Get(uint64(ti))
			rl.fifo.set(hentry{tag: t.Tag(c), tier: t.Tier, tenant: rt.local})
			rt.routeKeys = append(rt.routeKeys, routeRef{k, rl})
		case was > 0 && n <= 0:
			rl.fifo.remove(rt.local)
			for i, x := range rt.routeKeys {
				if x.key == k {
					rt.routeKeys = append(rt.routeKeys[:i], rt.routeKeys[i+1:]...)
					break
				}
			}
		}
	}
	if len(rl.nfifo) == 0 && len(rl.ndl) == 0 {
		delete(p.routes, k)
		if u != 0 {
			base := routeKey{c, sz, r, 0}
			alts := p.alts[base]
			for i, x := range alts {
				if x == u {
					alts = append(alts[:i], alts[i+1:]...)
					break
				}
			}
			if len(alts) == 0 {
				delete(p.alts, base)
			} else {
				p.alts[base] = alts
			}
		}
	}
}

// syncRouteTags keeps the route heap entries of lane ti in class c at or
// below the lane's key there (routeEntryKey): an entry above it is set
// to it at once (a cost correction lowered the tag, an older head came
// back); one below it (a dispatch charged the tag, a head left) too
// while the pool's picks scan the heaps, else it is left for a scan to
// raise (the plain pick reads none of them). Each entry is so a lower bound of the key of
// any candidate the lane has there for a worker (its start, max(tag,
// virtual_now) under the clamp; its tier; its job ID), and a scan in the
// order of the entries' keys stops at the first above the best candidate
// found; a scan that meets an entry below its key looks at the lane by
// its key, and raises the entry when it ends (fairFor), so a low entry
// is looked at once, not by every scan. place calls it on every change
// of the lane's queues.
func (s *Scheduler) syncRouteTags(ti uint32, c Class) {
	rt := &s.rt[ti]
	if len(rt.routeKeys) == 0 {
		return
	}
	eager := !s.pools[rt.pool].plain
	for _, r := range rt.routeKeys {
		if r.key.class != c {
			continue
		}
		e := r.rl.fifo.get(rt.local)
		if e == nil {
			continue
		}
		if want := s.routeEntryKey(ti, r.key); want != *e && (eager || entryBefore(&want, e)) {
			r.rl.fifo.set(want)
		}
	}
}

// routeEntryKey is lane ti's key in the route heap of k: its tag in the
// class, its tier, and the ID of the oldest head without a deadline of
// the parts of k's route and uses in its slot of k's size (no candidate
// of the lane there is older; the heads of other routes and uses, a head
// a resource blocks among them, do not lower it).
func (s *Scheduler) routeEntryKey(ti uint32, k routeKey) hentry {
	t := s.tenants.Get(uint64(ti))
	return hentry{tag: t.Tag(k.class), tier: t.Tier, seq: s.partOldest(ti, k), tenant: s.rt[ti].local}
}

// partOldest is the ID of the oldest head without a deadline of the
// parts of route k.route and uses k.uses in lane ti's slot of class
// k.class and size k.size (0: none).
func (s *Scheduler) partOldest(ti uint32, k routeKey) JobID {
	var oldest JobID
	s.eachSlotQueue(ti, k.class, k.size, func(_ uint32, q *groupQueue) {
		if p := q.of(k.route, k.uses); p != nil {
			if h := s.peekHead(&p.fifo); h.ok && (oldest == 0 || h.id < oldest) {
				oldest = h.id
			}
		}
	})
	return oldest
}

// keyAbove reports whether route heap entry e's key is above candidate
// b's (both of one class and size): no candidate of e's lane can come
// before b.
func keyAbove(e *hentry, b *candidate) bool {
	switch {
	case e.tag != b.tag:
		return e.tag > b.tag
	case e.tier != b.tier:
		return e.tier < b.tier
	}
	return e.seq > b.seq
}

// frontierEntry is a node of one route heap not yet looked at in a scan
// (the heap's items below it are keyed no lower), with its key; or, when
// exact, a lane of that heap at its key (routeEntryKey).
type frontierEntry struct {
	rl    *routeLanes
	at    int32
	exact bool
	key   hentry
}

// routeFix is a route heap entry a scan found below its lane's key: old,
// to be raised to key.
type routeFix struct {
	rl       *routeLanes
	old, key hentry
}

// laneCands are the candidates of one lane for a worker (laneFor).
type laneCands struct {
	fifo, dl wcand
}

// pickFor chooses the job a worker of size ws that runs w gets in pool p
// (pick, for the jobs w runs): from the highest class with a candidate
// for w, its most urgent deadline head, else its fair-share choice between
// sizes. A lane's candidates for w follow the candidate rule over the
// heads w sees (laneFor). It looks at the lanes that hold jobs of the
// routes w runs: for the deadline heads every such lane with one, for
// each size the lanes in the order of their tags, until no lane left can
// rank before the best found.
func (s *Scheduler) pickFor(p *poolCore, ws Size, w *Runs) candidate {
	s.newPick()
	p.plain = false
	for _, c := range classOrder {
		if dl := s.deadlineFor(p, c, ws, w); dl.ok {
			return dl
		}
		var best [NumSizes]candidate
		for sz := Size(0); sz <= ws; sz++ {
			best[sz] = s.fairFor(p, c, sz, w)
		}
		if f := s.stealFrom(best[:ws+1], ws); f.ok {
			return f
		}
	}
	return candidate{}
}

// routeList calls fn for each route w runs that p holds queued jobs of in
// class c and size sz: its jobs that use no resource, and those of each
// set of uses whose resources have room for them (resources.go).
func (s *Scheduler) routeList(p *poolCore, c Class, sz Size, w *Runs, fn func(*routeLanes)) {
	s.routeUses(p, c, sz, RouteAny, fn)
	if w.Commands {
		s.routeUses(p, c, sz, RouteCommand, fn)
	}
	if w.AllKinds {
		// Every kind but a few (those the worker said it does not run).
		for i, name := range s.kindNames {
			if w.RunsKind(name) {
				s.routeUses(p, c, sz, Route(2+i), fn)
			}
		}
		return
	}
	for _, name := range w.Kinds {
		if r, ok := s.kinds[name]; ok {
			s.routeUses(p, c, sz, r, fn)
		}
	}
}

// routeUses calls fn with the route lanes of class c, size sz and route r
// in pool p: those without resources, then those of each set of uses
// that some tenant could be dispatched a job of (a resource without room
// for its units blocks them all).
func (s *Scheduler) routeUses(p *poolCore, c Class, sz Size, r Route, fn func(*routeLanes)) {
	k := routeKey{c, sz, r, 0}
	if rl := p.routes[k]; rl != nil {
		fn(rl)
	}
	for _, u := range p.alts[k] {
		if !s.capBlocked(u) {
			if rl := p.routes[routeKey{c, sz, r, u}]; rl != nil {
				fn(rl)
			}
		}
	}
}

// deadlineFor is the eligible deadline head of class c, of a size <= ws,
// that a worker running w gets first: the earliest (deadline_at, ID) of
// the lanes' deadline candidates for w. It looks at every lane that holds
// a deadline job of a route w runs (deadline jobs are the few).
func (s *Scheduler) deadlineFor(p *poolCore, c Class, ws Size, w *Runs) candidate {
	var best candidate
	for sz := Size(0); sz <= ws; sz++ {
		s.nextVisit()
		s.routeList(p, c, sz, w, func(rl *routeLanes) {
			for ti := range rl.ndl {
				if s.rt[ti].visit == s.visitGen {
					continue
				}
				s.rt[ti].visit = s.visitGen
				cands, held := s.laneFor(ti, c, sz, w)
				d := cands.dl
				if held || !d.ok || (best.ok && !dlBefore(dlEntry{d.at, d.id}, dlEntry{best.dlAt, best.seq})) {
					continue
				}
				t := s.tenants.Get(uint64(ti))
				best = candidate{tag: max(t.Tag(c), p.vnow[c]), seq: d.id, tenant: ti, tier: t.Tier, size: sz, class: c, deadline: true, ok: true,
					set: true, group: d.group, dlAt: d.at}
			}
		})
	}
	return best
}

// fairFor is the best candidate without a deadline of class c and size
// sz for a worker running w: the lanes of the routes w runs are looked at
// in the order of their (stored) tags, which are lower bounds of their
// start tags, until the next one is above the best start found.
func (s *Scheduler) fairFor(p *poolCore, c Class, sz Size, w *Runs) candidate {
	front := s.frontier[:0]
	s.routeList(p, c, sz, w, func(rl *routeLanes) {
		if rl.fifo.Len() > 0 {
			front = frontierPush(front, frontierEntry{rl: rl, at: 0, key: rl.fifo.items[0]})
		}
	})
	s.nextVisit()
	fixes := s.routeFixes[:0]
	var best candidate
	for len(front) > 0 {
		var e frontierEntry
		front, e = frontierPop(front)
		if best.ok && keyAbove(&e.key, &best) {
			break
		}
		ti := p.lane(e.key.tenant)
		if !e.exact {
			h := &e.rl.fifo
			for child := 4*e.at + 1; child <= 4*e.at+4 && int(child) < len(h.items); child++ { // a 4-ary heap (heap.go)
				front = frontierPush(front, frontierEntry{rl: e.rl, at: child, key: h.items[child]})
			}
			if want := s.routeEntryKey(ti, e.rl.key); want != e.key {
				// Below the lane's key (syncRouteTags): raised once the
				// scan ends, and looked at now by its key.
				fixes = append(fixes, routeFix{rl: e.rl, old: e.key, key: want})
				if s.rt[ti].visit != s.visitGen {
					front = frontierPush(front, frontierEntry{rl: e.rl, exact: true, key: want})
				}
				continue
			}
		}
		if s.rt[ti].visit == s.visitGen {
			continue
		}
		s.rt[ti].visit = s.visitGen
		cands, held := s.laneFor(ti, c, sz, w)
		if held || !cands.fifo.ok {
			continue
		}
		t := s.tenants.Get(uint64(ti))
		tag := t.Tag(c)
		if s.cfg.Clamp == ClampDispatch && tag <= p.vnow[c] {
			tag = p.vnow[c]
		}
		cand := candidate{tag: tag, seq: cands.fifo.id, tenant: ti, tier: t.Tier, size: sz, class: c, ok: true, set: true, group: cands.fifo.group}
		if !best.ok || before(&cand, &best) {
			best = cand
		}
	}
	s.frontier = front[:0]
	for _, f := range fixes {
		if e := f.rl.fifo.get(f.old.tenant); e != nil && *e == f.old {
			f.rl.fifo.set(f.key)
		}
	}
	s.routeFixes = fixes[:0]
	return best
}

// entryBefore orders route heap entries by key: tag, then higher tier,
// then lower job ID (the heaps' own order, byTag).
func entryBefore(a, b *hentry) bool {
	switch {
	case a.tag != b.tag:
		return a.tag < b.tag
	case a.tier != b.tier:
		return a.tier > b.tier
	}
	return a.seq < b.seq
}

// frontierPush adds e to the min-heap f (by key).
func frontierPush(f []frontierEntry, e frontierEntry) []frontierEntry {
	f = append(f, e)
	for i := len(f) - 1; i > 0; {
		up := (i - 1) / 2
		if !entryBefore(&f[i].key, &f[up].key) {
			break
		}
		f[up], f[i] = f[i], f[up]
		i = up
	}
	return f
}

// frontierPop takes the entry of the lowest key from f.
func frontierPop(f []frontierEntry) ([]frontierEntry, frontierEntry) {
	top := f[0]
	last := len(f) - 1
	f[0] = f[last]
	f = f[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(f) && entryBefore(&f[l].key, &f[m].key) {
			m = l
		}
		if r < len(f) && entryBefore(&f[r].key, &f[m].key) {
			m = r
		}
		if m == i {
			break
		}
		f[i], f[m] = f[m], f[i]
		i = m
	}
	return f, top
}

// stealFrom is pickFair's choice between a worker of size ws's best
// same-size candidate and the best of the smaller sizes, from the best
// candidate of each size (best[sz]).
func (s *Scheduler) stealFrom(best []candidate, ws Size) candidate {
	same := best[ws]
	if _, preferFit := s.cfg.Policy.(PreferFit); preferFit && same.ok {
		return same
	}
	var steal candidate
	for sz := ws; sz > 0; {
		sz--
		if cand := best[sz]; cand.ok && (!steal.ok || before(&cand, &steal)) {
			steal = cand
		}
	}
	if !same.ok || (steal.ok && s.cfg.Policy.Steal(same.tag, steal.tag)) {
		return steal
	}
	return same
}

// verifyRoutes checks each pool's route index against the job table: the
// lanes with queued jobs of each class, size and route, their counts, and
// that no heap entry's tag is above its lane's.
func (s *Scheduler) verifyRoutes(report func(string, ...any)) {
	type key struct {
		pool uint32
		k    routeKey
		lane uint32
		dl   bool
	}
	want := map[key]uint32{}
	s.jobs.View().Each(func(_ uint64, j *Job) bool {
		if j.State == Queued && !j.Lapsed && int(j.Tenant) < len(s.rt) {
			want[key{uint32(s.rt[j.Tenant].pool), routeKey{j.Class, j.Size, s.routeOf(j), s.usesOf(j)}, j.Tenant, j.deadline()}]++
		}
		return true
	})
	n := 0
	for _, p := range s.pools {
		alts := 0
		for base, us := range p.alts {
			alts += len(us)
			for _, u := range us {
				if u == 0 || p.routes[routeKey{base.class, base.size, base.route, u}] == nil {
					report("pool %s: uses %d of %v are listed with no lanes", p.Name, u, base)
				}
			}
		}
		withUses := 0
		for k := range p.routes {
			if k.uses != 0 {
				withUses++
			}
		}
		if alts != withUses {
			report("pool %s lists %d sets of uses, its route index holds %d", p.Name, alts, withUses)
		}
	}
	for pid, p := range s.pools {
		for k, rl := range p.routes {
			if len(rl.nfifo) == 0 && len(rl.ndl) == 0 {
				report("pool %s: route %v is listed with no lane", p.Name, k)
			}
			if rl.fifo.Len() != len(rl.nfifo) {
				report("pool %s: route %v: %d lanes in its heap, %d counted", p.Name, k, rl.fifo.Len(), len(rl.nfifo))
			}
			for i := 1; i < len(rl.fifo.items); i++ {
				if rl.fifo.less(&rl.fifo.items[i], &rl.fifo.items[(i-1)/4]) { // 4-ary (heap.go)
					report("pool %s: route %v: its heap is out of order at %d", p.Name, k, i)
				}
			}
			for dl, counts := range map[bool]map[uint32]uint32{false: rl.nfifo, true: rl.ndl} {
				for ti, c := range counts {
					n++
					if w := want[key{uint32(pid), k, ti, dl}]; w != c {
						report("pool %s: lane %d holds %d queued jobs of %v (deadline %v), the job table says %d", p.Name, ti, c, k, dl, w)
					}
					if dl {
						continue
					}
					e := rl.fifo.get(s.rt[ti].local)
					if e == nil {
						report("pool %s: lane %d of %v is not in its heap", p.Name, ti, k)
					} else if want := s.routeEntryKey(ti, k); e.tenant != want.tenant || entryBefore(&want, e) {
						report("pool %s: lane %d of %v is in its heap at %+v, above its key %+v", p.Name, ti, k, *e, want)
					}
				}
			}
		}
	}
	if n != len(want) {
		report("the pools' route index counts %d lanes, the job table %d", n, len(want))
	}
}

// nextVisit starts a scan's marks of the lanes it looked at. Marks of an
// earlier scan never count: when the generation wraps, every mark is
// cleared. (No decision reads a generation's value, only whether a lane
// was marked in this scan: a leader's look-ahead, HasJobFor, may have
// counted more scans than a follower.)
func (s *Scheduler) nextVisit() {
	s.visitGen++
	if s.visitGen == 0 {
		for i := range s.rt {
			s.rt[i].visit = 0
		}
		s.visitGen = 1
	}
}
