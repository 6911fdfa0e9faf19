package sfq

import (
	"fmt"
	"strconv"
	"strings"
)

// ReasonKind is why a job is where it is: the first of SPEC §3 "Why a job
// waits" that applies, or its live or terminal state.
type ReasonKind uint8

// The reasons, in the order they are checked. ReasonScheduled,
// ReasonPaused and ReasonRate belong to delays, pauses and rate limits;
// ReasonNoWorker is decided by the leader, which
// knows the connected workers (see Explain).
const (
	ReasonNone ReasonKind = iota
	// ReasonScheduled: delayed or backing off until Due.
	ReasonScheduled
	// ReasonPaused: dispatch, its tenant or its group is paused (Vertex).
	ReasonPaused
	// ReasonBehind: older jobs of its queue are ahead (Position of them).
	ReasonBehind
	// ReasonCap: it is its queue's head and a cap blocks it (Cap, Current,
	// Limit).
	ReasonCap
	// ReasonResource: it is its queue's head, no cap blocks it, and a
	// resource it uses has no room for it, or is reserved for another
	// job (Resource).
	ReasonResource
	// ReasonRate: a rate limit holds it until EligibleAt.
	ReasonRate
	// ReasonHeld: an older job of its tenant and size, blocked by a
	// tenant-level limit, holds it back (or one of a higher class is).
	ReasonHeld
	// ReasonGroupTurn: another group of its tenant goes first.
	ReasonGroupTurn
	// ReasonHigherClass: a higher class has an eligible job of size <= its
	// size, which any worker that fits it would take first.
	ReasonHigherClass
	// ReasonNoWorker: no connected, undrained worker fits it.
	ReasonNoWorker
	// ReasonWaiting: eligible; Ahead candidates go before it; Tag and
	// VirtualNow are its tenant's finish tag and its class's virtual_now.
	ReasonWaiting
	// ReasonAssigned and ReasonRunning: live on Worker.
	ReasonAssigned
	ReasonRunning
	// ReasonTerminal: ended in State.
	ReasonTerminal
	numReasonKinds
)

var reasonKindNames = [numReasonKinds]string{"", "scheduled", "paused", "behind", "cap", "resource", "rate", "held", "group_turn",
	"higher_class", "no_worker", "waiting", "assigned", "running", ""}

func (k ReasonKind) String() string {
	if k < numReasonKinds && reasonKindNames[k] != "" {
		return reasonKindNames[k]
	}
	return fmt.Sprintf("reason(%d)", uint8(k))
}

// Reason is why a job is where it is, with the fields of its kind.
type Reason struct {
	Kind ReasonKind
	// Position (behind): how many queued jobs of its queue are ahead.
	Position uint64
	// Cap, Current and Limit (cap): the first failing cap, its count (CPU
	// ms for tenant_inflight) and its limit.
	Cap            CapVertex
	Current, Limit int64
	// Ahead, Tag and VirtualNow (waiting): see ReasonWaiting.
	Ahead      uint64
	Tag        VirtualTime
	VirtualNow VirtualTime
	// Larger (waiting): the eligible candidates of its class of a larger
	// size than the job's, which a worker of their size takes before any
	// smaller job (prefer-fit), however their tags compare: a job with
	// none Ahead is next for the workers of its own size only. Not in
	// Format (the replay's line).
	Larger uint64
	// Resource (resource): the first resource, by name, that holds it.
	Resource ResourceBlock
	// Worker (assigned, running).
	Worker string
	// NoWorkerKind (no_worker): workers of the job's pool and size are
	// there, but none runs its kind ("command" for a command job). Set by
	// the leader.
	NoWorkerKind string
	// State (terminal).
	State State
	// Due (scheduled) and EligibleAt (rate), in cluster time; Vertex
	// (paused, rate): "all", "pool", "tenant" or "group".
	Due, EligibleAt Time
	Vertex          string
}

// Name is the reason's name: the kind, or the terminal state.
func (r Reason) Name() string {
	if r.Kind == ReasonTerminal {
		return r.State.String()
	}
	return r.Kind.String()
}

// Format prints the reason as the replay tool does: "reason=NAME" and the
// fields of its kind, times and virtual times in milliseconds.
func (r Reason) Format() string {
	var b strings.Builder
	b.WriteString("reason=")
	b.WriteString(r.Name())
	field := func(k, v string) { b.WriteString(" " + k + "=" + v) }
	ms := func(t Time) string { return strconv.FormatInt(int64(t), 10) }
	switch r.Kind {
	case ReasonScheduled:
		field("due", ms(r.Due))
	case ReasonPaused:
		field("vertex", r.Vertex)
	case ReasonBehind:
		field("position", strconv.FormatUint(r.Position, 10))
	case ReasonCap:
		field("vertex", r.Cap.String())
		field("current", strconv.FormatInt(r.Current, 10))
		field("limit", strconv.FormatInt(r.Limit, 10))
	case ReasonResource:
		rb := &r.Resource
		field("name", rb.Resource)
		if rb.Tenant {
			field("tenant_held", strconv.FormatUint(rb.TenantHeld, 10))
			field("tenant_max", strconv.FormatUint(rb.TenantMax, 10))
		} else {
			field("held", strconv.FormatUint(rb.Held, 10))
			field("capacity", strconv.FormatUint(rb.Capacity, 10))
		}
		if rb.Reserved != 0 {
			field("reserved", strconv.FormatUint(uint64(rb.Reserved), 10))
		}
	case ReasonRate:
		field("vertex", r.Vertex)
		field("eligible_at", ms(r.EligibleAt))
	case ReasonWaiting:
		field("ahead", strconv.FormatUint(r.Ahead, 10))
		field("tag", r.Tag.String())
		field("vnow", r.VirtualNow.String())
	case ReasonAssigned, ReasonRunning:
		field("worker", r.Worker)
	}
	return b.String()
}

// capDetail returns the count and limit of cap vertex v for tenant t and a
// job of class c and size sz.
func capDetail(t *Tenant, v CapVertex, c Class, sz Size) (current, limit int64) {
	switch v {
	case CapTenantRunning:
		return int64(t.Running), int64(t.Caps.MaxRunning)
	case CapTenantSize:
		return int64(t.RunningBySize[sz]), int64(t.Caps.MaxRunningSize[sz])
	case CapTenantInflight:
		return t.InflightCPUMs, t.Caps.MaxInflightCPUMs
	case CapClass:
		return int64(t.RunningByClass[c]), int64(t.Caps.classCap(c))
	case CapDeadline:
		return int64(t.RunningDeadline), int64(t.Caps.MaxRunningDeadline)
	}
	return 0, 0
}

// Explain returns why job id is where it is, computed from the state; it
// changes nothing and may run concurrently with other reads.
//
// Cost: the "behind" position counts the queued jobs ahead in the job's
// queue (O(position) lookups), and the "waiting" count of candidates
// ahead walks the heaps of the job's class and size (O(T) in the tenants
// with eligible work); everything else is O(1). It is never on the
// dispatch path.
//
// A caller that knows the connected workers (the leader) turns
// ReasonWaiting into ReasonNoWorker when no connected, undrained worker
// fits the job: the core has no workers.
func (s *Scheduler) Explain(id JobID) (Reason, error) {
	j := s.jobs.Get(uint64(id))
	if j == nil {
		return Reason{}, fmt.Errorf("%w: %d", ErrUnknownJob, id)
	}
	switch {
	case j.State == Assigned:
		return Reason{Kind: ReasonAssigned, Worker: j.Worker}, nil
	case j.State == Running:
		return Reason{Kind: ReasonRunning, Worker: j.Worker}, nil
	case j.State.Terminal():
		return Reason{Kind: ReasonTerminal, State: j.State}, nil
	case j.State == Scheduled && !j.Lapsed:
		return Reason{Kind: ReasonScheduled, Due: j.DueAt()}, nil
	case j.Lapsed:
		// Its expire_at has passed: it is never dispatched, and ends
		// expired at the reaper's Expire.
		return Reason{Kind: ReasonTerminal, State: Expired}, nil
	case j.State != Queued:
		return Reason{}, invalidf("", "job %d is %s", id, j.State)
	}
	t := s.tenants.Get(uint64(j.Tenant))
	var buf Tenant
	lt := s.limitsInto(j.Tenant, &buf) // the tenant's whole footprint
	rt := &s.rt[j.Tenant]
	p := s.pools[rt.pool]
	gs, ok := s.groupSlot(j.Tenant, j.Group())
	q := s.queue(gs, j.Class, j.Size)
	if !ok || q == nil {
		return Reason{}, fmt.Errorf("%w: queued job %d has no queue in group %q", ErrVerify, id, j.Group())
	}
	deadline := j.deadline()
	g := s.groups.Get(uint64(gs))
	// 2. paused: all dispatch, its pool, its tenant, its group.
	switch {
	case s.pausedAll:
		return Reason{Kind: ReasonPaused, Vertex: "all"}, nil
	case p.paused:
		return Reason{Kind: ReasonPaused, Vertex: "pool"}, nil
	case lt.paused != NotPaused:
		return Reason{Kind: ReasonPaused, Vertex: "tenant"}, nil
	case g.paused != NotPaused:
		return Reason{Kind: ReasonPaused, Vertex: "group"}, nil
	}
	// 3. behind: its own queue's older (or more urgent) jobs.
	gated := s.resourceGated(rt.pool)
	if gated {
		// Jobs ahead that a resource blocks are passed over.
		if n := s.positionPassing(q, j); n > 0 {
			return Reason{Kind: ReasonBehind, Position: n}, nil
		}
	} else {
		head := q.fnode
		if deadline {
			head = q.dnode
		}
		if head == 0 || s.nodes.n[head].id != id {
			return Reason{Kind: ReasonBehind, Position: s.position(q, j)}, nil
		}
	}
	// 4. cap: the tenant's first, then its group's, then its
	// subscription in the pool.
	if v := capBlock(lt, j.Class, deadline, j.Size, j.EstCostMs); v != CapNone {
		cur, lim := capDetail(lt, v, j.Class, j.Size)
		return Reason{Kind: ReasonCap, Cap: v, Current: cur, Limit: lim}, nil
	}
	if run := s.groupRunning(gs); capOf(t, g) > 0 && run >= capOf(t, g) {
		return Reason{Kind: ReasonCap, Cap: CapGroupRunning, Current: int64(run), Limit: int64(capOf(t, g))}, nil
	}
	if rt.subscribed && t.Running >= rt.burst {
		return Reason{Kind: ReasonCap, Cap: CapSubscription, Current: int64(t.Running), Limit: int64(rt.burst)}, nil
	}
	// Then a resource it uses.
	if rb, ok := s.resourceBlock(j); ok {
		return Reason{Kind: ReasonResource, Resource: rb}, nil
	}
	// 5. rate: its tenant's limit, then its group's.
	if rateBlocks(lt.Rate, lt.rateTAT, s.evalUs) {
		return Reason{Kind: ReasonRate, Vertex: "tenant", EligibleAt: usToMs(eligibleAtUs(lt.Rate, lt.rateTAT))}, nil
	}
	if rateBlocks(g.Rate, g.rateTAT, s.evalUs) {
		return Reason{Kind: ReasonRate, Vertex: "group", EligibleAt: usToMs(eligibleAtUs(g.Rate, g.rateTAT))}, nil
	}
	if gated {
		return s.explainGated(p, j, t)
	}
	// 6. held: the candidate rule holds it behind an older blocked job.
	if rt.heldBits&bit(j.Class, int(j.Size)) != 0 {
		return Reason{Kind: ReasonHeld}, nil
	}
	// 7. group_turn: it is eligible, and another group's head is its
	// tenant's candidate.
	sl := rt.slot(j.Class, j.Size)
	cand := sl.fifo
	if deadline {
		cand = sl.dlc
	}
	if cand.id != id {
		return Reason{Kind: ReasonGroupTurn}, nil
	}
	// 8. higher_class.
	for _, c := range classOrder {
		if c == j.Class {
			break
		}
		if p.eligibleIn(c, j.Size) {
			return Reason{Kind: ReasonHigherClass}, nil
		}
	}
	// 10. waiting.
	r := Reason{Kind: ReasonWaiting, Tag: t.Tag(j.Class), VirtualNow: p.vnow[j.Class]}
	for sz := j.Size + 1; sz < NumSizes; sz++ {
		s.eligibleDeadlineHeads(p, j.Class, sz, func(dlEntry) { r.Larger++ })
		r.Larger += uint64(len(p.heapA[j.Class][sz].items) + len(p.heapB[j.Class][sz].items))
	}
	if deadline {
		me := dlEntry{at: j.DeadlineAt(), id: id}
		for sz := range NumSizes {
			s.eligibleDeadlineHeads(p, j.Class, Size(sz), func(e dlEntry) {
				if dlBefore(e, me) {
					r.Ahead++
				}
			})
		}
		return r, nil
	}
	for sz := Size(0); sz <= j.Size; sz++ {
		s.eligibleDeadlineHeads(p, j.Class, sz, func(dlEntry) { r.Ahead++ })
	}
	mine := s.startKey(p, j.Class, t, id)
	for _, h := range []*tenantHeap{&p.heapA[j.Class][j.Size], &p.heapB[j.Class][j.Size]} {
		for i := range h.items {
			e := &h.items[i]
			if e.tenant == rt.local {
				continue
			}
			if other := s.startKey(p, j.Class, s.tenants.Get(uint64(p.lane(e.tenant))), e.seq); other.before(mine) {
				r.Ahead++
			}
		}
	}
	return r, nil
}

// eligibleDeadlineHeads calls fn for every eligible deadline head of
// class c and size sz, of every tenant: each head of a deadline queue
// that no cap, rate or pause holds and the candidate rule does not hold
// back. A tenant has such heads only if it has a deadline candidate there
// (it is in the deadline heap); of its heads not blocked by their group,
// those whose cost fits its in-flight room are eligible. All of them go
// before any job of the class without a deadline that they fit.
func (s *Scheduler) eligibleDeadlineHeads(pl *poolCore, c Class, sz Size, fn func(dlEntry)) {
	p := &s.nodes
	var walk func(x int32, room int64)
	walk = func(x int32, room int64) {
		if x == 0 {
			return
		}
		n := &p.n[x]
		walk(n.l[treeOrder], room)
		if n.cost <= room {
			fn(dlEntry{at: Time(n.key), id: n.id})
		}
		walk(n.r[treeOrder], room)
	}
	var buf Tenant
	for _, e := range pl.dheap[c][sz].items {
		ti := pl.lane(e.tenant)
		if sl := s.rt[ti].slot(c, sz); sl != nil {
			walk(sl.dl, inflightRoom(s.limitsInto(ti, &buf)))
		}
	}
}

// startKey is a candidate's key among the candidates of one size: start
// tag (max with virtual_now under the dispatch clamp), higher tier, job ID.
type startKey struct {
	tag  VirtualTime
	tier Tier
	id   JobID
}

func (a startKey) before(b startKey) bool {
	if a.tag != b.tag {
		return a.tag < b.tag
	}
	if a.tier != b.tier {
		return a.tier > b.tier
	}
	return a.id < b.id
}

func (s *Scheduler) startKey(p *poolCore, c Class, t *Tenant, id JobID) startKey {
	tag := t.Tag(c)
	if s.cfg.Clamp == ClampDispatch {
		tag = max(tag, p.vnow[c])
	}
	return startKey{tag: tag, tier: t.Tier, id: id}
}

// QueuedIn reports which classes tenant ti has queued jobs without a
// deadline in (bit c set for class c). Read-only, O(groups × queues) of
// the tenant; for audits (SPEC §8 rule 6 holds inside each class).
func (s *Scheduler) QueuedIn(ti uint32) (classes uint8) {
	if int(ti) >= len(s.rt) {
		return 0
	}
	for _, gs := range s.rt[ti].groups {
		g := &s.grt[gs]
		for i := range g.nq {
			if q := g.at(i); q.fnode != 0 {
				classes |= 1 << q.class
			}
		}
	}
	return classes
}

// position counts the queued jobs ahead of j in its group's queue: the
// queue holds every queued job exactly once, and no lapsed one.
func (s *Scheduler) position(gq *groupQueue, j *Job) uint64 {
	var n uint64
	for i := range gq.nparts() {
		n += gq.part(i).ahead(j)
	}
	return n
}

// ahead counts the queued jobs of part q ahead of job j (of its group's
// queue).
func (q *routeQueue) ahead(j *Job) uint64 {
	var n uint64
	if j.deadline() {
		me := dlEntry{at: j.DeadlineAt(), id: j.ID}
		if dq := q.dls; dq != nil {
			for _, e := range dq.items {
				if dlBefore(e, me) && dq.live(e) {
					n++
				}
			}
		}
		return n
	}
	f := &q.fifo
	for _, id := range f.requeued {
		if id&deadEntry == 0 && id < j.ID {
			n++
		}
	}
	// The ring is in ID order.
	for i := range int(f.n) {
		id := f.ringAt(i)
		if id&^deadEntry >= j.ID {
			break
		}
		if id&deadEntry == 0 {
			n++
		}
	}
	return n
}
