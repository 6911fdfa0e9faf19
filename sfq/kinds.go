package sfq

import (
	"fmt"
	"slices"
)

// Routes: which workers run a job (SPEC §3 "Kinds"). A job's route is
// RouteAny (every worker runs it: a job of a build before kinds),
// RouteCommand (a command job: any worker that runs commands), or a
// function job's kind, interned (routeOfKind). A group's queue keeps its
// jobs of each route apart (groupQueue's parts), so that a worker's
// dispatch can see, of each queue, the sub-sequence of the jobs it runs.

// Route names which workers run a job.
type Route uint32

// The routes that are not kinds.
const (
	RouteAny     Route = 0
	RouteCommand Route = 1
)

// fifoHead is the oldest queued job without a deadline of group queue q,
// of every route: the group's head for a worker that runs every route.
func (s *Scheduler) fifoHead(q *groupQueue) headInfo {
	h := s.head(&q.first.fifo)
	for i := range q.rest {
		if o := s.head(&q.rest[i].fifo); o.ok && (!h.ok || o.id < h.id) {
			h = o
		}
	}
	return h
}

// deadlineHead is the deadline job of q with the earliest (deadline_at,
// ID), of every route.
func (s *Scheduler) deadlineHead(q *groupQueue) headInfo {
	var h headInfo
	for i := range q.nparts() {
		p := q.part(i)
		if p.dls == nil {
			continue
		}
		if o := s.dlHead(p.dls); o.ok && (!h.ok || dlBefore(dlEntry{o.at, o.id}, dlEntry{h.at, h.id})) {
			h = o
		}
	}
	return h
}

// The bits of a job's flags.
const (
	jobDeadline   uint8 = 1 << 0
	jobRouteShift       = 1
	jobRouteMask  uint8 = 3 << jobRouteShift
	// jobBackoffMax: the job's delay fields end with its own retry
	// backoff max (delay.go).
	jobBackoffMax uint8 = 1 << 3
	// jobUses: the job's text starts with the resources it uses
	// (resources.go).
	jobUses uint8 = 1 << 4
)

// deadline reports whether the job has a deadline.
func (j *Job) deadline() bool { return j.bits&jobDeadline != 0 }

// JobForm says which workers run a job (SPEC §3 "Kinds").
type JobForm uint8

// The forms of a job.
const (
	// FormAny: every worker (a job of a build before kinds).
	FormAny JobForm = iota
	// FormCommand: a command job, submitted as a command line: every
	// worker that runs commands, whatever its type.
	FormCommand
	// FormFunction: a function job of its kind (its type): the workers
	// that registered that kind.
	FormFunction
)

var formNames = [...]string{"any", "command", "function"}

func (f JobForm) String() string {
	if int(f) < len(formNames) {
		return formNames[f]
	}
	return fmt.Sprintf("form(%d)", uint8(f))
}

// Form says which workers run the job.
func (j *Job) Form() JobForm { return JobForm(j.routeClass()) }

// The route classes a job's flags hold (JobForm's values).
const (
	routeClassAny      = uint8(FormAny)
	routeClassCommand  = uint8(FormCommand)
	routeClassFunction = uint8(FormFunction)
)

// routeClass is the job's route class.
func (j *Job) routeClass() uint8 { return (j.bits & jobRouteMask) >> jobRouteShift }

// setRouteClass sets the job's route class.
func (j *Job) setRouteClass(c uint8) {
	j.bits = j.bits&^jobRouteMask | c<<jobRouteShift&jobRouteMask
}

// routeOf is the route of job j: RouteAny, RouteCommand, or its kind's.
func (s *Scheduler) routeOf(j *Job) Route {
	switch j.routeClass() {
	case routeClassCommand:
		return RouteCommand
	case routeClassFunction:
		return s.kindRoute(j.Type())
	}
	return RouteAny
}

// kindRoute returns the route of kind name, interning it. A route's number
// is this node's alone (a restored node numbers kinds in the order it
// meets them): no decision, encoding or hash reads it.
func (s *Scheduler) kindRoute(name string) Route {
	if r, ok := s.kinds[name]; ok {
		return r
	}
	if s.kinds == nil {
		s.kinds = make(map[string]Route)
	}
	r := Route(2 + len(s.kindNames))
	s.kinds[name] = r
	s.kindNames = append(s.kindNames, name)
	return r
}

// Runs says which jobs a worker runs (SPEC §3 "Kinds"): command jobs if
// Commands; the function jobs of the kinds in Kinds (sorted, each once),
// or with AllKinds of every kind but those in Kinds. A worker of a build
// before kinds runs every job: RunsAll (nil means the same). Every worker
// runs a job of a build before kinds (RouteAny).
type Runs struct {
	Commands bool
	AllKinds bool
	Kinds    []string
}

// RunsAll is what a worker that says nothing of what it runs runs: every
// job.
func RunsAll() Runs { return Runs{Commands: true, AllKinds: true} }

// All reports whether w runs every job.
func (w *Runs) All() bool { return w == nil || (w.Commands && w.AllKinds && len(w.Kinds) == 0) }

// RunsKind reports whether w runs the function jobs of kind.
func (w *Runs) RunsKind(kind string) bool {
	if w == nil {
		return true
	}
	_, listed := slices.BinarySearch(w.Kinds, kind)
	return listed != w.AllKinds
}

// Without returns w without the jobs of the form and kind of a job it
// said it does not run (a command job: commands; a function job: its
// kind), as a new Runs (w is not changed).
func (w *Runs) Without(form JobForm, kind string) Runs {
	out := RunsAll()
	if w != nil {
		out = Runs{Commands: w.Commands, AllKinds: w.AllKinds, Kinds: slices.Clone(w.Kinds)}
	}
	switch form {
	case FormCommand:
		out.Commands = false
	case FormFunction:
		i, listed := slices.BinarySearch(out.Kinds, kind)
		switch {
		case out.AllKinds && !listed:
			out.Kinds = slices.Insert(out.Kinds, i, kind)
		case !out.AllKinds && listed:
			out.Kinds = slices.Delete(out.Kinds, i, i+1)
		}
	}
	return out
}

// RunsForm reports whether w runs a job of form and kind.
func (w *Runs) RunsForm(form JobForm, kind string) bool {
	switch {
	case w.All() || form == FormAny:
		return true
	case form == FormCommand:
		return w.Commands
	}
	return w.RunsKind(kind)
}

// KindName names the kind of job j as explain says it: "command" for a
// command job, else its type.
func (j *Job) KindName() string {
	if j.Form() == FormCommand {
		return "command"
	}
	return j.Type()
}

// runs reports whether a worker of w runs the jobs of route r.
func (w *Runs) runs(s *Scheduler, r Route) bool {
	switch {
	case w.All() || r == RouteAny:
		return true
	case r == RouteCommand:
		return w.Commands
	}
	return w.RunsKind(s.kindNames[r-2])
}

// RunsJob reports whether a worker of w runs job j.
func (s *Scheduler) RunsJob(w *Runs, j *Job) bool { return w.runs(s, s.routeOf(j)) }

// wcand is a lane's candidate for a worker: its head job and group, and
// (a deadline head) its deadline.
type wcand struct {
	id    JobID
	group uint32
	at    Time
	key   VirtualTime // group_order=fair: the group's tag
	cost  int64
	ok    bool
}

// laneFor returns lane ti's candidates of class c and size sz for worker
// w, or held when the candidate rule holds that size for w in class c or
// in a higher class (a hold goes down the classes).
func (s *Scheduler) laneFor(ti uint32, c Class, sz Size, w *Runs) (laneCands, bool) {
	return s.laneView(ti, c, sz, w, false)
}

// laneView is laneFor, as a read when ro (it then caches nothing, and
// may run beside other reads).
func (s *Scheduler) laneView(ti uint32, c Class, sz Size, w *Runs, ro bool) (laneCands, bool) {
	for _, hc := range classOrder {
		if hc == c {
			break
		}
		if _, _, held := s.laneClass(ti, hc, sz, w, ro); held {
			return laneCands{}, true
		}
	}
	f, d, held := s.laneClass(ti, c, sz, w, ro)
	return laneCands{fifo: f, dl: d}, held
}

// laneClass applies the candidate rule to lane ti's heads of class c and
// size sz as worker w sees them: of each group's queue, the sub-sequence
// of the jobs w runs (SPEC §3 "Kinds"), less the parts a resource blocks
// (SPEC §3 "Resources": passed over unless a tenant-level limit blocks
// them too). It returns the lane's candidate without a deadline and its
// deadline candidate, or held when the oldest head left is blocked by a
// tenant-level limit. It reads the state only (ro: without warming the
// queues' caches), and allocates nothing.
func (s *Scheduler) laneClass(ti uint32, c Class, sz Size, w *Runs, ro bool) (fifo, dl wcand, held bool) {
	rt := &s.rt[ti]
	sl := rt.slot(c, sz)
	if sl == nil || sl.byID == 0 {
		return
	}
	t := s.tenants.Get(uint64(ti))
	var buf Tenant
	lb := &s.scratch
	if ro {
		lb = &buf
	}
	lt := s.limitsInto(ti, lb)
	gate := s.tenantGate(lt) || (rt.subscribed && t.Running >= rt.burst)
	uf, ud := uniformBlock(lt, c, sz, gate)
	room := inflightRoom(lt)
	fair := t.GroupOrder == GroupFair
	o := s.owner(ti)
	var oldest wcand
	oldestBlocked := false
	consider := func(h headInfo, gs uint32, dlHead, gb, rb bool) {
		blocked := h.cost > room || (dlHead && ud) || (!dlHead && uf)
		if (!(gb || rb) || blocked) && (!oldest.ok || h.id < oldest.id) {
			oldest, oldestBlocked = wcand{id: h.id, ok: true}, blocked
		}
		if gb || rb || h.cost > room {
			return
		}
		if dlHead {
			if !ud && (!dl.ok || dlBefore(dlEntry{h.at, h.id}, dlEntry{dl.at, dl.id})) {
				dl = wcand{id: h.id, group: gs, at: h.at, cost: h.cost, ok: true}
			}
			return
		}
		if uf {
			return
		}
		key := VirtualTime(0)
		if fair {
			key = s.groups.Get(uint64(gs)).tags[c]
		}
		if !fifo.ok || (fair && key < fifo.key) || ((!fair || key == fifo.key) && h.id < fifo.id) {
			fifo = wcand{id: h.id, group: gs, key: key, cost: h.cost, ok: true}
		}
	}
	s.eachSlotQueue(ti, c, sz, func(gs uint32, q *groupQueue) {
		gb := s.nodes.n[max(q.fnode, q.dnode)].gb
		for i := range q.nparts() {
			p := q.part(i)
			if !w.runs(s, p.route) {
				continue
			}
			var fh, dh headInfo
			if ro {
				fh, dh = s.peekHead(&p.fifo), s.peekDl(p)
			} else {
				fh = s.head(&p.fifo)
				if p.dls != nil {
					dh = s.dlHead(p.dls)
				}
			}
			if fh.ok {
				consider(fh, gs, false, gb, p.uses != 0 && s.resBlocked(p.uses, o, fh.id, !ro))
			}
			if dh.ok {
				consider(dh, gs, true, gb, p.uses != 0 && s.resBlocked(p.uses, o, dh.id, !ro))
			}
		}
	})
	if oldest.ok && oldestBlocked {
		return wcand{}, wcand{}, true
	}
	return fifo, dl, false
}

// UsesForms reports whether a job of the view has a form other than
// FormAny (a state of feature level 8).
func (v *View) UsesForms() bool { return v.usesForms() }

// usesForms reports whether a job of the view has a form other than
// FormAny: the state is then written as version 8.
func (v *View) usesForms() bool {
	uses := false
	v.jobs.Each(func(_ uint64, j *Job) bool {
		uses = j.Form() != FormAny
		return !uses
	})
	return uses
}
