package fsm

import (
	"github.com/baristahq/barista/fsm/fairness"
	"github.com/baristahq/barista/sfq"
)

// The fairness report (SPEC §7, package fairness) is fed here while
// entries are applied: the CPU a dispatch charges (its estimate) and a
// finished run corrects (actual − estimate) and bills, and the eligible
// classes and weight of each tenant a command touched. Eligibility
// changes only when a command touches the tenant (its own submits,
// dispatches, finishes, cancels, expiries and settings), and weights only
// then or with the configuration, so the ledger follows the core exactly
// without scanning it. It is derived state: not encoded, not hashed.

// startFairness starts a new ledger at the FSM clock from the state as it
// is (a loaded snapshot): every live tenant's eligibility now.
func (f *FSM) startFairness() {
	f.fair = fairness.New(f.clock)
	f.observeAll()
}

// observe records tenant ti's eligible classes and weight after a command.
func (f *FSM) observe(ti uint32) {
	mask := f.sched.EligibleClasses(ti)
	var w sfq.Weight
	if mask != 0 {
		w = f.sched.TenantWeight(ti, f.clock)
	}
	f.fair.Observe(f.clock, ti, mask, w)
}

// observeAll observes every tenant (a configuration change may change
// every weight).
func (f *FSM) observeAll() {
	for i := range uint32(f.sched.TenantCount()) {
		f.observe(i)
	}
}

// fairFinished records what an accepted Finished (ch Changed) or a
// zombie's report did: the correction charged to the tag (actual −
// estimate, as the core applies it) and the CPU billed.
func (f *FSM) fairFinished(ch sfq.Change, cpuMs int64) {
	if ch.Outcome != sfq.Changed && ch.Outcome != sfq.Zombie {
		return
	}
	j, ok := f.sched.Job(ch.Job)
	if !ok {
		return
	}
	f.fair.Bill(f.clock, j.Class, j.Tenant, cpuMs)
	if ch.Outcome == sfq.Changed {
		f.fair.Charge(f.clock, j.Class, j.Tenant, cpuMs-j.EstCostMs)
		f.observe(j.Tenant)
	}
}

// FairnessReport is the fairness report at one applied index.
type FairnessReport struct {
	// Now is the FSM clock; Since when the ledger started (this node's
	// start or its last snapshot load: nothing before is covered).
	Now, Since sfq.Time
	Rows       []fairness.Line
}

// Fairness computes the fairness report at the FSM clock, under the read
// lock. The live report (whole false) has the rows of live tenants with
// eligible work now or anything charged or entitled in the longest
// window; whole keeps every row with anything since the ledger started,
// deleted tenants included (replay --report). Rows come in class service
// order, then by tenant index.
func (f *FSM) Fairness(whole bool) FairnessReport {
	f.mu.RLock()
	defer f.mu.RUnlock()
	rep := FairnessReport{Now: f.clock, Since: f.fair.Since()}
	f.fair.Rows(f.clock, func(r *fairness.Row) bool {
		t, ok := f.sched.TenantAt(r.Tenant)
		if !ok {
			return true
		}
		if whole {
			if r.Whole.ChargedMs == 0 && r.Whole.BilledMs == 0 && r.Whole.EntitledQ24 == 0 {
				return true
			}
		} else if t.Deleted || !r.Active() {
			return true
		}
		rep.Rows = append(rep.Rows, f.fairRow(r, &t))
		return true
	})
	return rep
}

// fairRow decorates a ledger row; callers hold the read lock.
func (f *FSM) fairRow(r *fairness.Row, t *sfq.Tenant) fairness.Line {
	row := fairness.Line{Row: *r, Name: t.Name, Tier: t.Tier, Deleted: t.Deleted}
	if !t.Deleted {
		row.LagCPUMs = fairness.Lag(f.sched.ClassVirtualNow(r.Class), t.Tag(r.Class), f.sched.Weight(t, f.clock))
	}
	return row
}
