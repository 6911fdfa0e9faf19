package sfq

// Reads for the evidence of fairness (SPEC §3 "Evidence of fairness"): the
// candidates a tenant's lane had when a dispatch picked, and a hook that
// lets a replay see the state at the pick. Nothing here changes the state.

// Candidate is one of a lane's candidates as the pick compares them: its
// job, class and size, whether it has a deadline (and when), the start tag
// it would be charged at (its tenant's tag in the class, max with the
// class's virtual_now under the dispatch clamp or for a deadline job) and
// its tenant's tier. Among candidates without a deadline the key is
// (Start, higher Tier, larger Size, lower Job); among deadline candidates
// (DeadlineAt, Job).
type Candidate struct {
	Job        JobID
	Class      Class
	Size       Size
	Deadline   bool
	DeadlineAt Time
	Start      VirtualTime
	Tier       Tier
}

// SetPickObserver sets fn to be called by every Dispatch that reaches its
// pick — after the dispatch gate and the re-evaluation at the command's
// time, as the pick starts — with the worker's pool and size, and what it
// runs (nil: every job; SPEC §3 "Kinds") (fn nil: none). fn may only
// read the scheduler (LaneCandidatesFor, TenantAt, ...). A replay that
// issues a certificate of fairness uses it; a live state machine sets
// none.
func (s *Scheduler) SetPickObserver(fn func(pool PoolID, ws Size, w *Runs)) { s.pickObserver = fn }

// observePick calls the pick observer with pool p's ID.
func (s *Scheduler) observePick(p *poolCore, ws Size, w *Runs) {
	for i, q := range s.pools {
		if q == p {
			s.pickObserver(PoolID(i), ws, w)
			return
		}
	}
}

// LaneCandidatesFor is LaneCandidates for a worker that runs w: for a
// worker that runs only some kinds, the lane's candidates among the jobs
// it runs, as its pick compares them (the candidate rule over the heads
// it sees: laneFor). It calls fn in the same order, and needs the state
// to itself (the FSM's write lock, as in Apply).
func (s *Scheduler) LaneCandidatesFor(ti uint32, w *Runs, fn func(Candidate)) int {
	if w.All() {
		return s.LaneCandidates(ti, fn)
	}
	if int(ti) >= len(s.rt) {
		return 0
	}
	t := s.tenants.Get(uint64(ti))
	if t == nil || t.Deleted {
		return 0
	}
	p := s.pools[s.rt[ti].pool]
	n := 0
	for _, c := range classOrder {
		for sz := range Size(NumSizes) {
			cands, held := s.laneFor(ti, c, sz, w)
			if held {
				continue
			}
			if f := cands.fifo; f.ok {
				fn(Candidate{Job: f.id, Class: c, Size: sz, Start: s.startKey(p, c, t, f.id).tag, Tier: t.Tier})
				n++
			}
			if d := cands.dl; d.ok {
				fn(Candidate{Job: d.id, Class: c, Size: sz, Deadline: true, DeadlineAt: d.at, Start: max(t.Tag(c), p.vnow[c]), Tier: t.Tier})
				n++
			}
		}
	}
	return n
}

// LaneCandidates calls fn with every candidate lane ti has in its pool —
// for each class in service order and each size, its eligible head without
// a deadline and its eligible deadline head, as the candidate rule chose
// them at its last placement — and reports how many there were. These
// are exactly the lane's entries in the pool's heaps: what a dispatch in
// the pool can pick of it.
func (s *Scheduler) LaneCandidates(ti uint32, fn func(Candidate)) int {
	if int(ti) >= len(s.rt) {
		return 0
	}
	rt := &s.rt[ti]
	t := s.tenants.Get(uint64(ti))
	if t == nil || t.Deleted {
		return 0
	}
	p := s.pools[rt.pool]
	n := 0
	for _, c := range classOrder {
		sls := rt.slots(c)
		if sls == nil {
			continue
		}
		for sz := range Size(NumSizes) {
			sl := &sls[sz]
			if id := sl.fifoPlaced; id != 0 {
				fn(Candidate{Job: id, Class: c, Size: sz, Start: s.startKey(p, c, t, id).tag, Tier: t.Tier})
				n++
			}
			if id := sl.dlPlaced; id != 0 {
				j := s.jobs.Get(uint64(id))
				fn(Candidate{Job: id, Class: c, Size: sz, Deadline: true, DeadlineAt: j.DeadlineAt(), Start: max(t.Tag(c), p.vnow[c]), Tier: t.Tier})
				n++
			}
		}
	}
	return n
}

// worstFair is the pick a build with the unfairpick tag makes instead of
// pickFair's (unfair.go): the last of class c's eligible candidates of
// exactly size ws in the fair order, so that a test can make a dispatch
// break the order and check that the evidence shows it. Other builds never
// call it.
func (s *Scheduler) worstFair(p *poolCore, c Class, ws Size) candidate {
	var worst candidate
	for _, h := range []*tenantHeap{&p.heapA[c][ws], &p.heapB[c][ws]} {
		for i := range h.items {
			e := &h.items[i]
			lane := p.lane(e.tenant)
			t := s.tenants.Get(uint64(lane))
			k := s.startKey(p, c, t, e.seq)
			cand := candidate{tag: k.tag, seq: e.seq, tenant: lane, tier: t.Tier, size: ws, class: c, ok: true}
			if !worst.ok || before(&worst, &cand) {
				worst = cand
			}
		}
	}
	return worst
}
