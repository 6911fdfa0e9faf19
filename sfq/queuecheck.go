package sfq

import (
	"cmp"
	"slices"
)

// verifyQueues checks every group's queues against the job table: each
// queued job that has not lapsed is in the queue of its group, class and
// size exactly once, a job without a deadline in the fifo at its ID's
// place, one with a deadline in the deadline heap under its current
// (deadline_at, ID); no other job is; each list keeps its order and
// neither front is a dead entry. A state restored from a snapshot (which
// holds no dead entry) and one that lived through every command thus hold
// the same jobs in the same order.
func (s *Scheduler) verifyQueues(report func(string, ...any)) {
	// Every queue entry, sorted by job ID below and walked beside the job
	// table (in ID order): a map of a million entries made this check
	// most of a restore's time.
	type place struct {
		id    JobID
		gs    uint32
		q     *groupQueue
		route Route
		dl    bool // in the deadline heap
	}
	where := make([]place, 0, min(s.queued, uint64(s.jobs.View().Len()))) // s.queued is checked against the table below
	note := func(gs uint32, q *groupQueue, r Route, id JobID, dl bool) {
		where = append(where, place{id: id, gs: gs, q: q, route: r, dl: dl})
	}
	for gs := range s.grt {
		g := &s.grt[gs]
		for i := range g.nq {
			q := g.at(i)
			for pi := range q.nparts() {
				s.verifyPart(report, uint32(gs), q, q.part(pi), note)
			}
		}
	}
	slices.SortFunc(where, func(a, b place) int { return cmp.Compare(a.id, b.id) })
	k := 0
	var orphan JobID // the first queued ID the job table does not hold
	s.jobs.View().Each(func(_ uint64, j *Job) bool {
		for ; k < len(where) && where[k].id < j.ID; k++ {
			if orphan == 0 {
				orphan = where[k].id
			}
		}
		var p *place
		seen := 0
		for ; k < len(where) && where[k].id == j.ID; k++ {
			if seen == 0 {
				p = &where[k]
			}
			seen++
		}
		in := j.State == Queued && !j.Lapsed
		switch {
		case !in && p != nil:
			report("job %d (%s, lapsed %v) is in a queue", j.ID, j.State, j.Lapsed)
		case in && p == nil:
			report("queued job %d is in no queue", j.ID)
		case in && seen != 1:
			report("queued job %d is in its queue %d times", j.ID, seen)
		case in:
			gs, ok := s.groupSlot(j.Tenant, j.Group())
			if !ok || gs != p.gs || p.q.class != j.Class || p.q.size != j.Size || p.dl != j.deadline() || p.route != s.routeOf(j) {
				report("queued job %d (group %q, %s %s, route %d, deadline %v) is in the queue of group slot %d %s %s (route %d, deadline heap %v)", j.ID, j.Group(), j.Class, j.Size,
					s.routeOf(j), j.deadline(), p.gs, p.q.class, p.q.size, p.route, p.dl)
			}
		}
		return true
	})
	if orphan == 0 && k < len(where) {
		orphan = where[k].id
	}
	if orphan != 0 {
		report("a queue holds job %d, which the job table does not", orphan)
	}
}

// verifyPart checks one part p of group gs's queue q (verifyQueues),
// noting each of its live entries.
func (s *Scheduler) verifyPart(report func(string, ...any), gs uint32, q *groupQueue, p *routeQueue, note func(gs uint32, q *groupQueue, r Route, id JobID, dl bool)) {
	f := &p.fifo
	if f.n > 0 && f.ring[f.head]&deadEntry != 0 {
		report("group slot %d %s %s: the fifo ring's front is dead (job %d)", gs, q.class, q.size, f.ring[f.head]&^deadEntry)
	}
	if k := len(f.requeued); k > 0 && f.requeued[k-1]&deadEntry != 0 {
		report("group slot %d %s %s: the fifo side list's front is dead (job %d)", gs, q.class, q.size, f.requeued[k-1]&^deadEntry)
	}
	for k := 1; k < int(f.n); k++ {
		if f.ringAt(k-1)&^deadEntry >= f.ringAt(k)&^deadEntry {
			report("group slot %d %s %s: fifo ring out of order at %d", gs, q.class, q.size, k)
		}
	}
	for k := 1; k < len(f.requeued); k++ {
		if f.requeued[k-1]&^deadEntry <= f.requeued[k]&^deadEntry {
			report("group slot %d %s %s: fifo side list out of order at %d", gs, q.class, q.size, k)
		}
	}
	f.each(func(id JobID) { note(gs, q, p.route, id, false) })
	if f.cachedHead != 0 {
		if id, ok := f.front(); !ok || id != f.cachedHead {
			report("group slot %d %s %s: cached fifo head %d is not the front", gs, q.class, q.size, f.cachedHead)
		}
	}
	d := p.dls
	if d == nil {
		return
	}
	for k := 1; k < len(d.items); k++ {
		if dlBefore(d.items[k], d.items[(k-1)/2]) {
			report("group slot %d %s %s: deadline heap out of order at %d", gs, q.class, q.size, k)
		}
	}
	if len(d.items) > 0 && !d.live(d.items[0]) {
		report("group slot %d %s %s: the deadline heap's top is dead (job %d)", gs, q.class, q.size, d.items[0].id)
	}
	dead := 0
	for _, e := range d.items {
		if !d.live(e) {
			dead++
			continue
		}
		note(gs, q, p.route, e.id, true)
		if j := s.jobs.Get(uint64(e.id)); j != nil && j.deadline() && j.DeadlineAt() != e.at {
			report("group slot %d %s %s: job %d is in its deadline heap at %d, its deadline is %d", gs, q.class, q.size, e.id, e.at, j.DeadlineAt())
		}
	}
	if dead != len(d.dead) {
		report("group slot %d %s %s: %d dead deadline entries listed, %d in the heap", gs, q.class, q.size, len(d.dead), dead)
	}
	if d.cachedHead != 0 && (len(d.items) == 0 || d.items[0].id != d.cachedHead) {
		report("group slot %d %s %s: cached deadline head %d is not the top", gs, q.class, q.size, d.cachedHead)
	}
}
