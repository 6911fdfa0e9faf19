package fsm

import (
	"slices"

	"barista/sfq"
)

// Read runs fn with the scheduling core under the read lock. fn must not
// change anything nor keep the pointer.
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

// Due calls fn for each deadline passed at now (the reaper's work).
func (f *FSM) Due(now sfq.Time, fn func(id sfq.JobID, attempt uint32, kind sfq.EventKind) bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	f.sched.Due(now, fn)
}

// Events calls fn for events with Seq >= from, in order, until fn returns
// false. It returns the oldest retained seq and the next seq to be written.
func (f *FSM) Events(from uint64, fn func(ev *Event) bool) (first, next uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	first, next = f.nextEvent-uint64(f.events.Len()), f.nextEvent
	for seq := max(from, first); seq < next; seq++ {
		if ev := f.events.Get(seq); ev != nil && !fn(ev) {
			break
		}
	}
	return first, next
}

// PruneDue reports whether a Prune at now would remove anything (terminal
// jobs past retention, events past retention, expired idempotency keys).
func (f *FSM) PruneDue(now sfq.Time) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if uint64(f.events.Len()) > f.cfg.EventRetentionCount {
		return true
	}
	if ev := f.events.Get(f.nextEvent - uint64(f.events.Len())); ev != nil && ev.At < now-sfq.Time(f.cfg.EventRetentionMs) {
		return true
	}
	if k := f.keys.Get(f.nextKey - uint64(f.keys.Len())); k != nil && k.Expires <= now {
		return true
	}
	at, ok := f.sched.OldestEnded()
	return ok && at < now-sfq.Time(f.cfg.JobRetentionMs)
}

// DispatchBudget bounds the dispatches to workers of this size worth
// proposing now: 0 when no queue a worker of this size may take from is
// eligible (a dispatch would find nothing), else the number of queued
// jobs. An eligible queue guarantees the next pick succeeds, so proposals
// beyond the jobs really available waste at most one entry per change.
func (f *FSM) DispatchBudget(size sfq.Size) int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.sched.EligibleCount(size) == 0 {
		return 0
	}
	return int(f.sched.QueuedTotal())
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
