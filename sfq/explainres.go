package sfq

// Explain in a pool whose queues hold jobs that use resources: the
// candidates are those of the pick that sees resources (laneView, read
// only), not of the pool's heaps, which do not.

import "slices"

// positionPassing counts the queued jobs ahead of j in its group's queue
// that are not passed over: those of its own part, and those of the
// other parts whose head no resource blocks (or a tenant-level limit
// blocks too).
func (s *Scheduler) positionPassing(q *groupQueue, j *Job) uint64 {
	o := s.owner(j.Tenant)
	mine := q.of(s.routeOf(j), s.usesOf(j))
	var buf Tenant
	lt := s.limitsInto(j.Tenant, &buf)
	t := s.tenants.Get(uint64(j.Tenant))
	rt := &s.rt[j.Tenant]
	gate := s.tenantGate(lt) || (rt.subscribed && t.Running >= rt.burst)
	uf, ud := uniformBlock(lt, j.Class, j.Size, gate)
	room := inflightRoom(lt)
	var n uint64
	for i := range q.nparts() {
		p := q.part(i)
		if p != mine && p.uses != 0 {
			h := s.peekHead(&p.fifo)
			tb := uf
			if j.deadline() {
				h, tb = s.peekDl(p), ud
			}
			if h.ok && s.resBlocked(p.uses, o, h.id, false) && !tb && h.cost <= room {
				continue // passed over
			}
		}
		n += p.ahead(j)
	}
	return n
}

// explainGated is Explain from "held" on for queued job j of lane t in
// pool p, whose queues hold jobs that use resources.
func (s *Scheduler) explainGated(p *poolCore, j *Job, t *Tenant) (Reason, error) {
	lc, held := s.laneView(j.Tenant, j.Class, j.Size, &runsAllValue, true)
	if held {
		return Reason{Kind: ReasonHeld}, nil
	}
	cand := lc.fifo
	if j.deadline() {
		cand = lc.dl
	}
	if !cand.ok || cand.id != j.ID {
		return Reason{Kind: ReasonGroupTurn}, nil
	}
	for _, c := range classOrder {
		if c == j.Class {
			break
		}
		for sz := Size(0); sz <= j.Size; sz++ {
			for _, ti := range s.lanesIn(p, c, sz) {
				if lc, held := s.laneView(ti, c, sz, &runsAllValue, true); !held && (lc.fifo.ok || lc.dl.ok) {
					return Reason{Kind: ReasonHigherClass}, nil
				}
			}
		}
	}
	c := j.Class
	r := Reason{Kind: ReasonWaiting, Tag: t.Tag(c), VirtualNow: p.vnow[c]}
	fifoCands := func(sz Size, fn func(ti uint32, f wcand)) {
		for _, ti := range s.lanesIn(p, c, sz) {
			if lc, held := s.laneView(ti, c, sz, &runsAllValue, true); !held && lc.fifo.ok {
				fn(ti, lc.fifo)
			}
		}
	}
	for sz := j.Size + 1; sz < NumSizes; sz++ {
		s.gatedDeadlineHeads(p, c, sz, func(dlEntry) { r.Larger++ })
		fifoCands(sz, func(uint32, wcand) { r.Larger++ })
	}
	if j.deadline() {
		me := dlEntry{at: j.DeadlineAt(), id: j.ID}
		for sz := range Size(NumSizes) {
			s.gatedDeadlineHeads(p, c, sz, func(e dlEntry) {
				if dlBefore(e, me) {
					r.Ahead++
				}
			})
		}
		return r, nil
	}
	for sz := Size(0); sz <= j.Size; sz++ {
		s.gatedDeadlineHeads(p, c, sz, func(dlEntry) { r.Ahead++ })
	}
	mine := s.startKey(p, c, t, j.ID)
	fifoCands(j.Size, func(ti uint32, f wcand) {
		if ti != j.Tenant && s.startKey(p, c, s.tenants.Get(uint64(ti)), f.id).before(mine) {
			r.Ahead++
		}
	})
	return r, nil
}

// lanesIn returns the lanes of pool p with queued jobs of class c and
// size sz, of any route and uses, in order.
func (s *Scheduler) lanesIn(p *poolCore, c Class, sz Size) []uint32 {
	seen := map[uint32]bool{}
	var out []uint32
	for k, rl := range p.routes {
		if k.class != c || k.size != sz {
			continue
		}
		for _, m := range [2]map[uint32]uint32{rl.nfifo, rl.ndl} {
			for ti := range m {
				if !seen[ti] {
					seen[ti] = true
					out = append(out, ti)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// gatedDeadlineHeads calls fn for every eligible deadline head of class c
// and size sz in pool p, as the pick that sees resources has them: each
// deadline head of a lane not held, not blocked by its group, a
// resource, its tenant's deadline limits or its in-flight room.
func (s *Scheduler) gatedDeadlineHeads(p *poolCore, c Class, sz Size, fn func(dlEntry)) {
	for _, ti := range s.lanesIn(p, c, sz) {
		if _, held := s.laneView(ti, c, sz, &runsAllValue, true); held {
			continue
		}
		var buf Tenant
		lt := s.limitsInto(ti, &buf)
		t := s.tenants.Get(uint64(ti))
		rt := &s.rt[ti]
		gate := s.tenantGate(lt) || (rt.subscribed && t.Running >= rt.burst)
		if _, ud := uniformBlock(lt, c, sz, gate); ud {
			continue
		}
		room := inflightRoom(lt)
		o := s.owner(ti)
		s.eachSlotQueue(ti, c, sz, func(gs uint32, q *groupQueue) {
			if s.nodes.n[max(q.fnode, q.dnode)].gb {
				return
			}
			for i := range q.nparts() {
				part := q.part(i)
				if h := s.peekDl(part); h.ok && h.cost <= room && !(part.uses != 0 && s.resBlocked(part.uses, o, h.id, false)) {
					fn(dlEntry{at: h.at, id: h.id})
				}
			}
		})
	}
}
