package fsm

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/baristahq/barista/fsm/fairness"
	"github.com/baristahq/barista/sfq"
)

// Read runs fn with the scheduling core under the read lock. fn must not
// change anything nor keep the pointer, nor call the FSM (see Events).
func (f *FSM) Read(fn func(s *sfq.Scheduler)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.sched)
}

// Clock returns the FSM clock (cluster time) and the index of the last
// applied entry.
func (f *FSM) Clock() (sfq.Time, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.clock, f.lastIndex
}

// WaitApplied waits until the state has applied the entry at index (or
// a later one), or ctx ends.
func (f *FSM) WaitApplied(ctx context.Context, index uint64) error {
	for {
		f.mu.RLock()
		applied, changed := f.lastIndex, f.changed
		f.mu.RUnlock()
		if applied >= index {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// WallClock returns the leader's wall clock on the last applied entry (0
// if it carried none, or none was applied since the state was loaded)
// and the FSM clock (cluster time) after it: how far cluster time lags
// the wall clock, for display.
func (f *FSM) WallClock() (wall, cluster sfq.Time) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return sfq.Time(f.lastWall), f.clock
}

// Configured reports whether a SetConfig has been applied: a new
// cluster's first leader seeds the configuration only if not.
func (f *FSM) Configured() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.configured
}

// Config returns the configuration in force.
func (f *FSM) Config() Config {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.cfg
}

// Members returns the recorded members, sorted by ID.
func (f *FSM) Members() []Member {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return slices.Clone(f.members)
}

// Member returns one member's record.
func (f *FSM) Member(id string) (Member, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, m := range f.members {
		if m.ID == id {
			return m, true
		}
	}
	return Member{}, false
}

// Workers returns the worker records, sorted by ID.
func (f *FSM) Workers() []Worker {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.view().workers
}

// Counts returns the number of jobs and of live tenants.
func (f *FSM) Counts() (jobs, tenants int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	f.sched.Tenants(func(uint32, *sfq.Tenant) bool { tenants++; return true })
	return f.sched.JobCount(), tenants
}

// HasEligible reports whether a worker of this size would get a job now
// (the leader proposes a Dispatch only then).
func (f *FSM) HasEligible(size sfq.Size) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.sched.Eligible(size)
}

// Due calls fn for each deadline passed at now (what the leader expires).
func (f *FSM) Due(now sfq.Time, fn func(id sfq.JobID, attempt uint32, kind sfq.InputKind) bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	f.sched.Due(now, fn)
}

// Events calls fn for events with Seq >= from, in order, until fn returns
// false; ev is reused, so fn copies what it keeps. It returns the oldest
// retained seq and the next seq to be written.
// fn runs under the state's read lock, like every callback of this type:
// it must not call the FSM again (a second read lock waits behind a
// pending Apply, which waits for the first: a deadlock).
func (f *FSM) Events(from uint64, fn func(ev *Event) bool) (first, next uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.eventsLocked(from, fn)
}

// eventsLocked is Events under the read lock.
func (f *FSM) eventsLocked(from uint64, fn func(ev *Event) bool) (first, next uint64) {
	first, next = f.nextEvent-uint64(f.events.Len()), f.nextEvent
	var ev Event
	f.events.View().Each(from, func(seq uint64, r *eventRecord) bool {
		ev.Seq, ev.eventRecord = seq, *r
		f.readerView(&ev, r)
		return fn(&ev)
	})
	return first, next
}

// readerView sets what a reader sees of event r in ev: the log keeps a
// job event's lane; a reader sees its tenant and its pool.
func (f *FSM) readerView(ev *Event, r *eventRecord) {
	ev.Pool = f.sched.LanePool(r.Tenant)
	ev.PoolName = ""
	if ev.Pool != sfq.DefaultPool {
		ev.PoolName = f.sched.PoolName(ev.Pool)
	}
	ev.Tenant = f.sched.Owner(r.Tenant)
}

// PruneDue reports whether a Prune at now would remove anything (terminal
// jobs past retention, events past retention, expired idempotency keys).
func (f *FSM) PruneDue(now sfq.Time) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if uint64(f.events.Len()) > f.cfg.EventRetentionCount {
		return true
	}
	if _, ev, ok := f.events.Head(); ok && ev.At < now-sfq.Time(f.cfg.EventRetentionMs) {
		return true
	}
	if f.keptPruneDue(now) {
		return true
	}
	if k := f.keys.Get(f.nextKey - uint64(f.keys.Len())); k != nil && k.Expires <= now {
		return true
	}
	return f.jobsPruneDue(now)
}

// DispatchBudget is DispatchBudgetIn for workers of the pool default.
func (f *FSM) DispatchBudget(size sfq.Size, now sfq.Time) int {
	n, _ := f.DispatchBudgetIn("", size, now)
	return n
}

// DispatchBudgetIn bounds the dispatches to workers of this pool ("" or
// "default": the pool default) and size worth proposing now: 0 when no
// queue of the pool a worker of this size may take from is eligible (a
// dispatch would find nothing), else the number of queued jobs of every
// pool (a bound read in O(1): with one pool it is exact). An eligible
// queue guarantees the next pick succeeds, so proposals beyond the jobs
// really available waste at most one entry per change.
//
// now is the cluster time the proposals would carry: a head held by a
// rate limit that allows it by then counts as eligible (the Dispatch
// re-evaluates at its own time). While all dispatch or the pool is
// paused the budget is 0. known is false for a pool the state does not
// hold (never created, or deleted): its budget is 0.
func (f *FSM) DispatchBudgetIn(pool string, size sfq.Size, now sfq.Time) (budget int, known bool) {
	defer f.lockForPick(pool)()
	id, ok := f.sched.PoolID(pool)
	if !ok {
		return 0, false
	}
	if f.sched.DispatchPaused() || f.sched.PoolPaused(id) {
		return 0, true
	}
	if !f.sched.PoolEligible(id, size) {
		if at, ok := f.sched.NextRateEligible(); !ok || at > now {
			return 0, true
		}
	}
	return int(f.sched.QueuedTotal()), true
}

// lockForPick locks f for a read of pool's eligibility and returns the
// unlock: the write lock while a resource may hold back one of the pool's
// queued jobs (its eligibility is then a pick's, which writes the pick's
// marks and the queues' caches: sfq.EligibleWrites), else the read lock.
func (f *FSM) lockForPick(pool string) func() {
	f.mu.RLock()
	if id, ok := f.sched.PoolID(pool); !ok || !f.sched.EligibleWrites(id) {
		return f.mu.RUnlock
	}
	f.mu.RUnlock()
	f.mu.Lock()
	return f.mu.Unlock
}

// RunsSome reports whether worker's record says it runs only some jobs
// (SPEC §3 "Kinds") and, if so, names what it runs: workers of the same
// name, pool and size get the same answer from HasJobFor.
func (f *FSM) RunsSome(worker string) (some bool, name string) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	w := f.workers[worker]
	if w == nil || w.Runs.All() {
		return false, ""
	}
	var b strings.Builder
	b.WriteString(w.Pool)
	fmt.Fprintf(&b, "\x00%d\x00%t\x00%t", w.Size, w.Runs.Commands, w.Runs.AllKinds)
	for _, k := range w.Runs.Kinds {
		b.WriteByte(0)
		b.WriteString(k)
	}
	return true, b.String()
}

// HasJobFor reports whether a Dispatch for worker of size in pool (""
// for the pool default) would give it a job now, by what its record says
// it runs (every job: true whenever the pool has an eligible job of its
// size). It takes the write lock: the pick warms the queues' caches.
func (f *FSM) HasJobFor(worker, pool string, size sfq.Size) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.sched.PoolID(pool)
	if !ok {
		return false
	}
	var runs *sfq.Runs
	if w := f.workers[worker]; w != nil {
		runs = w.Runs
	}
	return f.sched.HasJobFor(id, size, runs)
}

// NextRateEligible returns the earliest cluster time at which a rate limit
// that holds a tenant or a group stops holding it, if one does: when the
// leader's dispatcher should look again.
func (f *FSM) NextRateEligible() (sfq.Time, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.sched.NextRateEligible()
}

// Job returns a copy of a job and its tenant's name.
func (f *FSM) Job(id sfq.JobID) (sfq.Job, string, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	j, ok := f.sched.Job(id)
	if !ok {
		return j, "", false
	}
	return j, f.sched.TenantName(j.Tenant), true
}

// Explain returns why a job is where it is (SPEC §3 "Why a job waits") and
// its tenant's name, computed from the state under the read lock. The
// caller scopes it to a tenant and, knowing the connected workers, may
// turn sfq.ReasonWaiting into sfq.ReasonNoWorker.
func (f *FSM) Explain(id sfq.JobID) (sfq.Reason, string, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r, err := f.sched.Explain(id)
	if err != nil {
		return r, "", err
	}
	j, _ := f.sched.Job(id)
	return r, f.sched.TenantName(j.Tenant), nil
}

// Worker returns the state machine's record of a worker.
func (f *FSM) Worker(id string) (Worker, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	w, ok := f.workers[id]
	if !ok {
		return Worker{}, false
	}
	return *w, true
}

// TopRow is one line of the live view (barista top, the web page): a
// tenant, and its fairness report in one class. A tenant has a row for
// each class it is active in (the fairness report's live rows), or one
// row of class normal without figures if it is active in none.
type TopRow struct {
	// Pool is the row's pool ("" for the pool default).
	Pool    string
	Name    string
	Tier    sfq.Tier
	Class   sfq.Class
	Weight  sfq.Weight // current weight (tier x multiplier x decay)
	Queued  uint32     // the tenant's in the row's pool, every class
	Running uint32     // the tenant's in the row's pool, every class
	// Dispatches and DispatchedCostMs count the dispatches of the class
	// in the window asked for (from the event log).
	Dispatches       uint64
	DispatchedCostMs int64
	// Fair is the line of the fairness report (zero, Name empty, without
	// activity).
	Fair fairness.Line
}

// Top computes the live view: every live tenant in index order with its
// fairness rows, and its dispatches of the last window of cluster time.
// Presentation only: nothing here reaches Apply.
func (f *FSM) Top(window sfq.Time) (rows []TopRow, now, since sfq.Time) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	type key struct {
		tenant uint32
		class  sfq.Class
	}
	index := map[key]int{}
	f.sched.Tenants(func(i uint32, t *sfq.Tenant) bool {
		base := TopRow{Name: t.Name, Tier: t.Tier, Weight: f.sched.Weight(t, f.clock)}
		// A row's queued and running jobs are its pool's: each pool is a
		// lane of the tenant with counters of its own (i is the lane of
		// the pool default).
		inLane := func(l uint32) TopRow {
			row := base
			if lt, ok := f.sched.TenantAt(l); ok {
				row.Queued, row.Running = lt.QueuedTotal(), lt.Running
			}
			if p := f.sched.LanePool(l); p != sfq.DefaultPool {
				row.Pool = f.sched.PoolName(p)
			}
			return row
		}
		n := len(rows)
		f.tenantRows(i, func(r *fairness.Row) {
			if r.Active() {
				row := inLane(r.Tenant)
				row.Class, row.Fair = r.Class, f.fairRow(r)
				index[key{r.Tenant, r.Class}] = len(rows)
				rows = append(rows, row)
			}
		})
		if len(rows) == n {
			// Active in no class: a row without figures in each pool it
			// has jobs in (a paused tenant's), or one of the pool default.
			var others []TopRow
			for _, l := range f.sched.OtherLanes(i) {
				if row := inLane(l); row.Queued+row.Running > 0 {
					others = append(others, row)
				}
			}
			if row := inLane(i); row.Queued+row.Running > 0 || len(others) == 0 {
				index[key{i, sfq.ClassNormal}] = len(rows)
				rows = append(rows, row)
			}
			rows = append(rows, others...)
		}
		return true
	})
	f.events.View().EachBack(func(_ uint64, ev *eventRecord) bool {
		if ev.At < f.clock-window {
			return false
		}
		if ev.Kind != EvAssigned {
			return true
		}
		j, ok := f.sched.Job(ev.Job)
		if !ok {
			return true
		}
		if i, ok := index[key{ev.Tenant, j.Class}]; ok {
			rows[i].Dispatches++
			rows[i].DispatchedCostMs += j.EstCostMs
		}
		return true
	})
	return rows, f.clock, f.fairSince
}

// SetIndex sets the index the state is taken to be at (after a restore
// from a snapshot whose Raft index differs from its own).
func (f *FSM) SetIndex(index uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastIndex = index
	f.hashValid = false
}

// HasTenant reports whether the tenant exists.
func (f *FSM) HasTenant(name string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, ok := f.sched.TenantIndex(name)
	return ok
}
