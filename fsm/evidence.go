package fsm

import (
	"github.com/baristahq/barista/fsm/fairness"
	"github.com/baristahq/barista/sfq"
)

// What a replay that issues the evidence of fairness (a usage statement,
// a certificate; package snapshot) needs of a state machine it owns.
// None of it is used by a live node.

// RestartFairness starts the fairness report's ledgers anew at cluster
// time since (at or after the FSM clock: the state holds from the clock
// until the next entry): a window's statement covers nothing before it.
func (f *FSM) RestartFairness(since sfq.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fairs, f.fairSince = nil, max(since, f.clock)
	f.observeAll()
}

// TenantShares calls fn with the fairness report's rows of the tenant
// named name — every lane and incarnation of that name, pool by pool, in
// class service order — over everything the ledgers saw, read at cluster
// time at (no earlier than the FSM clock).
func (f *FSM) TenantShares(name string, at sfq.Time, fn func(l *fairness.Line)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	at = max(at, f.clock)
	for _, l := range f.fairs {
		if l == nil {
			continue
		}
		l.Rows(at, func(r *fairness.Row) bool {
			if t, ok := f.sched.TenantAt(r.Tenant); ok && t.Name == name {
				line := f.fairRow(r)
				fn(&line)
			}
			return true
		})
	}
}

// SetPickObserver has fn called at every Dispatch's pick, with the core
// as it stands then (sfq.Scheduler.SetPickObserver); nil removes it. fn
// runs inside Apply: it may only read s.
func (f *FSM) SetPickObserver(fn func(s *sfq.Scheduler, pool sfq.PoolID, ws sfq.Size, w *sfq.Runs)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fn == nil {
		f.sched.SetPickObserver(nil)
		return
	}
	s := f.sched
	s.SetPickObserver(func(pool sfq.PoolID, ws sfq.Size, w *sfq.Runs) { fn(s, pool, ws, w) })
}
