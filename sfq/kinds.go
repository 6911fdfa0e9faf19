package sfq

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
)

// deadline reports whether the job has a deadline.
func (j *Job) deadline() bool { return j.bits&jobDeadline != 0 }

// The route classes a job's flags hold: which workers run it.
const (
	routeClassAny      uint8 = 0 // every worker (a job of a build before kinds)
	routeClassCommand  uint8 = 1 // a command job: every worker that runs commands
	routeClassFunction uint8 = 2 // a function job: the workers that registered its kind (its type)
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
	r := Route(2 + len(s.kinds))
	s.kinds[name] = r
	return r
}
