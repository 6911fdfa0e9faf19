package sfq

// The Scheduler type and its construction: New, the wall time and version
// switches, and configuration changes.

// Scheduler is the scheduling core. It is not safe for concurrent use,
// except that a View returned by Freeze may be read by other goroutines
// while the Scheduler keeps changing, and that the read-only methods
// (Explain, Job, Tenant, ...) may run concurrently with each other.
type Scheduler struct {
	cfg     Config
	nextJob JobID
	jobs    Vector[Job]
	tenants Vector[Tenant]
	types   Vector[TypeStat] // cost estimates per (tenant, job type)
	groups  Vector[Group]    // by slot: the lowest free slot is taken
	grouped uint64           // jobs of a named group in the job table (derived)
	// details: a run's CPU source or failure has been kept on a job
	// (runresult.go). Once set it stays, and the state is written as
	// version 7 from then on; a state read from version 7 has it.
	details bool

	// Everything below is derived from the tables and rebuilt on restore.
	byName map[string]uint32
	// kinds numbers the kinds of function jobs met (kindRoute), and
	// kindNames names them by route (route 2 first).
	kinds     map[string]Route
	kindNames []string
	// visitGen and frontier serve pickFor: a lane is looked at once a
	// scan (tenantRT.visit), and the scan's frontier is kept between
	// picks so that a pick allocates nothing.
	visitGen uint32
	frontier []frontierEntry
	// routeFixes are the route heap entries a scan found below their
	// lane's key, raised when it ends (fairFor).
	routeFixes []routeFix
	rt         []tenantRT
	// payloadAll is the payload bytes of every unfinished job: the sum
	// of the lanes' payload.
	payloadAll uint64
	gindex     map[groupKey]uint32 // named groups by (tenant, name)
	grt        []groupRT           // by group slot
	gfree      slotHeap            // group slots below gnext not in use
	gnext      uint64
	nodes      nodePool // group heads (slot.go, tree.go)
	// pools holds each pool's scheduling state (pool.go), by PoolID:
	// pools[0] is the pool default. poolIdx finds a pool by name; subs
	// holds the subscriptions, by (tenant, pool).
	pools   []*poolCore
	poolIdx map[string]PoolID
	subs    []subscription
	// subsShared: a frozen View holds subs, so the next change copies it
	// first; otherwise changes are made in place.
	subsShared bool
	queued     uint64 // queued jobs of all tenants
	deadlines  deadlineHeap
	ended      endedQueue // completed jobs, by (ended_at, id)
	deadAll    endedQueue // dead letters, by (ended_at, id) (redrive.go)
	dead       []deadLetters
	est        estimateIndex
	dl         delayState // delays and expiries (delay.go)
	// rateT and rateG hold the tenants and groups (by slot) whose rate
	// limit blocks them at evalUs, by the time it stops (µs); evalUs is
	// the cluster time (µs) eligibility was last evaluated at, clock the
	// time of the input being applied (pause.go). pausedAll gates
	// Dispatch (maintenance).
	rateT, rateG tenantHeap
	evalUs       int64
	clock        Time
	pausedAll    bool
	// pickObserver, when set, sees the state at each Dispatch's pick
	// (SetPickObserver; evidence.go). It is not state.
	pickObserver func(pool PoolID, ws Size, w *Runs)
	// scratch holds the summed limits of a tenant with lanes while the
	// writer places one (limitsInto).
	scratch Tenant

	// rs holds the resources and the interned uses of jobs
	// (resources.go).
	rs resourceTable

	// wall is the wall clock of the input being applied (SetWall): kept
	// on the jobs it submits and ends, for display, and read by no rule.
	wall Time
	// v1 makes the scheduler behave as the builds before feature level 2
	// (SetVersion1): it learns no cost estimates, records no wall times,
	// keeps no stdout tail and forgets an ended job's worker, so that its
	// state is what those builds hold. It is not encoded: the state machine
	// above sets it from its replicated feature level.
	v1 bool
}

type tenantRT struct {
	// visit is the scan that last looked at the lane (pickFor), and
	// routeKeys the (class, size, route) of which it holds queued jobs
	// without a deadline, with their route lanes (its entries in its
	// pool's route heaps).
	visit     uint32
	routeKeys []routeRef
	// normal holds the tenant's slots of class normal (slot.go), where most
	// work is; other those of high, critical and low (at Class-1), nil
	// until it first queues a job of the class.
	normal [NumSizes]slotRT
	other  [NumClasses - 1]*[NumSizes]slotRT
	// fairBits and dlBits have bit c*NumSizes+s set when the tenant has a
	// candidate without a deadline, or a deadline candidate, of class c
	// and size s (as of its last placement); heldBits when the candidate
	// rule holds that slot; openBits when its fifo heads pass every
	// tenant-level limit but the in-flight cap, whose room (the largest
	// cost that fits) is in room.
	fairBits, dlBits   uint16
	heldBits, openBits uint16
	room               int64
	// eligible[c]: the tenant had a candidate without a deadline in class
	// c at its last placement (the activation clamp watches it change).
	eligible [NumClasses]bool
	// inMaxTag[c] and maxTagged[c]: the tenant is in maxTag[c] with that
	// tag.
	inMaxTag  [NumClasses]bool
	maxTagged [NumClasses]VirtualTime
	// queuedFair counts the tenant's queued jobs without a deadline per
	// class (the idle rule of group_order=fair).
	queuedFair [NumClasses]uint32
	// payload counts the payload bytes of the tenant's unfinished jobs
	// (scheduled, queued, assigned, running): what its quota of payload
	// bytes (the state machine's max_queued_bytes) bounds.
	payload uint64
	types   []uint64 // slots of the tenant's job-type estimates
	groups  []uint32 // slots of the tenant's groups, in no order
	unnamed uint32   // slot+1 of its unnamed group; 0: none
	// pend holds, under group_order=fair, the latest group tags not yet
	// written to gmax (a dispatch only notes its group's new tag here, in
	// the tenant's own record; gmax is brought up to date when it is full
	// or read).
	pend  [4]tagPend
	npend uint8
	// gmax holds, under group_order=fair, the tags of the tenant's groups
	// per class (the idle rule reads the highest).
	gmax *[NumClasses]tagMax
	// pool is the lane's pool and local its number in the pool's heaps
	// (pool.go); lanes, on a tenant's own record, its lanes of the other
	// pools, in the order they were created.
	pool  PoolID
	local uint32
	lanes []uint32
	// burst is the lane's subscription burst, if subscribed.
	burst      uint32
	subscribed bool
	// resHeld, on a tenant's own record, is the units of each resource
	// its live jobs hold (in every pool).
	resHeld []resHeld
}

// New returns an empty scheduler.
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Scheduler{cfg: cfg, nextJob: 1, byName: make(map[string]uint32), gindex: make(map[groupKey]uint32)}
	s.pools = []*poolCore{newPoolCore(PoolSpec{Name: DefaultPoolName}, true)}
	s.poolIdx = map[string]PoolID{DefaultPoolName: DefaultPool}
	s.rateT = tenantHeap{order: byDeadline}
	s.rateG = tenantHeap{order: byDeadline}
	s.est.init()
	s.nodes.init()
	return s, nil
}

func (s *Scheduler) initHeaps() {
	for _, p := range s.pools {
		p.initHeaps()
	}
}

// SetWall gives the wall-clock time (ms since the Unix epoch; 0 =
// unknown) of the inputs that follow, until the next SetWall: the state
// machine sets that of each log entry before applying it. Jobs keep it
// beside the cluster time of their submit and of their end (SubmittedWall,
// EndedWall), for display only: no deadline or rule reads it, and it is
// not state of its own (the next input sets it again).
func (s *Scheduler) SetWall(wall Time) {
	if s.v1 {
		wall = 0 // unknown: as before wall times
	}
	s.wall = wall
}

// SetVersion1 makes the scheduler hold exactly what the builds before
// feature level 2 hold (on), or all it knows (off, the default): while
// some voter may run such a build, the cluster keeps no cost estimates, no
// wall times, no stdout tails and no worker of an ended job, so that every
// node holds (and hashes) the same state; the state machine turns it off
// with the feature level that brought them.
func (s *Scheduler) SetVersion1(on bool) { s.v1 = on }

// version1Life forgets an ended job's worker under SetVersion1, as the
// builds before feature level 2 did.
func (s *Scheduler) version1Life(l Life) Life {
	if s.v1 && l.State.Terminal() {
		l.Worker = ""
	}
	return l
}

// Config returns the configuration in force.
func (s *Scheduler) Config() Config { return s.cfg }

// SetConfig replaces the configuration. Changing the clamp mode raises
// every finish tag to at least its class's virtual_now and rebuilds the
// order.
func (s *Scheduler) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	s.advance(s.clock)
	old := s.cfg
	s.cfg = cfg
	if old.Clamp != cfg.Clamp {
		for i := range s.rt {
			ti := uint32(i)
			t := s.tenants.Get(uint64(ti))
			if t == nil {
				continue
			}
			vnow := &s.pool(ti).vnow
			for c := range Class(NumClasses) {
				if t.Tag(c) < vnow[c] {
					*s.tenants.Mut(uint64(ti)).tagPtr(c) = vnow[c]
					t = s.tenants.Get(uint64(ti))
				}
			}
		}
		s.rebuildOrder()
	}
	return nil
}

// rebuildOrder recomputes every heap from the tenants and their queues.
func (s *Scheduler) rebuildOrder() {
	s.initHeaps()
	for i := range s.rt {
		ti := uint32(i)
		t := s.tenants.Get(uint64(ti))
		if t == nil || t.Deleted {
			continue
		}
		s.rt[ti].eligible = [NumClasses]bool{}
		for c := range Class(NumClasses) {
			if sl := s.rt[ti].slots(c); sl != nil {
				for sz := range sl {
					sl[sz].fifoPlaced, sl[sz].dlPlaced = 0, 0
				}
			}
		}
		s.place(ti, &placeOpts{}, allSlots)
	}
}
