package fsm

import (
	"math"

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

// startFairness starts new ledgers at the FSM clock from the state as it
// is (a loaded snapshot): every live lane's eligibility now. Each pool has
// a ledger of its own (its shares are its own); rows are keyed by lane.
func (f *FSM) startFairness() {
	f.fairs, f.fairSince = nil, f.clock
	f.observeAll()
}

// ledger returns pool p's ledger, starting it if it has none.
func (f *FSM) ledger(p sfq.PoolID) *fairness.Ledger {
	for int(p) >= len(f.fairs) {
		f.fairs = append(f.fairs, nil)
	}
	if f.fairs[p] == nil {
		f.fairs[p] = fairness.New(f.fairSince)
	}
	return f.fairs[p]
}

// observe records the eligible classes and weight of every lane of lane
// ti's tenant after a command (a tenant-level limit counts every pool).
func (f *FSM) observe(ti uint32) {
	o := f.sched.Owner(ti)
	f.observeLane(o)
	for _, l := range f.sched.OtherLanes(o) {
		f.observeLane(l)
	}
}

func (f *FSM) observeLane(ti uint32) {
	mask := f.sched.EligibleClasses(ti)
	var w sfq.Weight
	if mask != 0 {
		w = f.sched.TenantWeight(ti, f.clock)
	}
	f.ledger(f.sched.LanePool(ti)).Observe(f.clock, ti, mask, w)
}

// observeAll observes every lane (a configuration change may change
// every weight).
func (f *FSM) observeAll() {
	for i := range uint32(f.sched.TenantCount()) {
		f.observeLane(i)
	}
}

// charge charges lane ti's ledger.
func (f *FSM) charge(j *sfq.Job, ms int64) {
	f.ledger(f.sched.LanePool(j.Tenant)).Charge(f.clock, j.Class, j.Tenant, ms)
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
	f.ledger(f.sched.LanePool(j.Tenant)).Bill(f.clock, j.Class, j.Tenant, cpuMs)
	if ch.Outcome == sfq.Changed {
		f.charge(&j, cpuMs-j.EstCostMs)
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
// deleted tenants included (replay --report). Rows come pool by pool (in
// slot order), in class service order, then by lane index.
func (f *FSM) Fairness(whole bool) FairnessReport {
	f.mu.RLock()
	defer f.mu.RUnlock()
	rep := FairnessReport{Now: f.clock, Since: f.fairSince}
	for _, l := range f.fairs {
		if l == nil {
			continue
		}
		l.Rows(f.clock, func(r *fairness.Row) bool {
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
			rep.Rows = append(rep.Rows, f.fairRow(r))
			return true
		})
	}
	return rep
}

// tenantRows calls fn for the rows of every lane of the tenant whose own
// index is o, pool by pool.
func (f *FSM) tenantRows(o uint32, fn func(r *fairness.Row)) {
	row := func(l uint32) {
		if p := f.sched.LanePool(l); int(p) < len(f.fairs) && f.fairs[p] != nil {
			f.fairs[p].TenantRows(f.clock, l, fn)
		}
	}
	row(o)
	for _, l := range f.sched.OtherLanes(o) {
		row(l)
	}
}

// fairRow decorates a ledger row of a lane; callers hold the read lock.
func (f *FSM) fairRow(r *fairness.Row) fairness.Line {
	t, _ := f.sched.TenantAt(r.Tenant)
	pool := f.sched.LanePool(r.Tenant)
	row := fairness.Line{Row: *r, Name: t.Name, Tier: t.Tier, Deleted: t.Deleted}
	if pool != sfq.DefaultPool {
		row.Pool = f.sched.PoolName(pool)
	}
	if !t.Deleted {
		row.LagCPUMs = fairness.Lag(f.sched.PoolVirtualNow(pool, r.Class), t.Tag(r.Class), f.sched.Weight(&t, f.clock))
	}
	return row
}

// PoolFairness is a pool's live fairness error (SPEC §3 "Evidence of
// fairness"): over the report's window Window, the largest difference
// between a tenant's share of its class's charged CPU and its entitled
// share, among the tenants that had eligible work in the window; the
// tenant, class and figures of the row it is in. OK is false while no
// tenant had both.
type PoolFairness struct {
	Pool   string // "default" for the pool default
	Window string
	fairness.Error
	TenantName string
}

// DefaultErrorWindow is the window of the live fairness error: 10
// minutes (an index of fairness.Windows).
const DefaultErrorWindow = 1

// FairnessErrors returns each live pool's fairness error over window g
// (an index of fairness.Windows) at the FSM clock, pools in slot order.
func (f *FSM) FairnessErrors(g int) []PoolFairness {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if g < 0 || g >= fairness.NumWindows {
		g = DefaultErrorWindow
	}
	var out []PoolFairness
	f.sched.Pools(func(p sfq.Pool) bool {
		pid, ok := f.sched.PoolID(poolKey(p.Name))
		if !ok {
			return true
		}
		pf := PoolFairness{Pool: p.Name, Window: fairness.Windows[g].Name}
		if int(pid) < len(f.fairs) && f.fairs[pid] != nil {
			pf.Error = f.fairs[pid].Error(f.clock, g)
			if pf.OK {
				pf.TenantName = f.sched.TenantName(pf.Tenant)
			}
		}
		out = append(out, pf)
		return true
	})
	return out
}

// poolKey is the name the core looks a pool up by: "" for the pool
// default.
func poolKey(name string) string {
	if name == sfq.DefaultPoolName {
		return ""
	}
	return name
}

// Place is a queued job's place in line (sfq.Place) and an estimate of
// when it starts. The estimate, in cluster time, is now plus the longer
// of two waits, each work over the rate it is done at over the last 10
// minutes (fairness.RateWindow): the estimated CPU of the jobs ahead of
// it at the pool's rate of CPU charged; and, for a job without a
// deadline, the service its class hands out before its start tag while
// the tenants with eligible work there stay so — (start − virtual_now) ×
// their weights, its tenant's entitled share of it being its own jobs
// ahead — at the class's rate. It is a guess: Estimated is false when
// nothing was charged in that time. RatePerMinute is the pool's
// dispatches of the job's size or smaller a minute, Share the tenant's
// entitled share of its class (its weight over the eligible weights; 0
// when it has no eligible work there).
type Place struct {
	sfq.Place
	EstimatedStart       sfq.Time
	Estimated            bool
	RatePerMinute, Share float64
}

// PlaceLimit bounds the jobs a place in line counts: past it the count
// is a lower bound (Complete false).
const PlaceLimit = 10_000

// Place returns queued job id's place in line, counting at most limit
// jobs, and the estimate of its start; ok is false when it has none
// (sfq.Scheduler.Place).
func (f *FSM) Place(id sfq.JobID, limit uint64) (Place, bool, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	pl, ok, err := f.sched.Place(id, f.clock, limit)
	if !ok || err != nil {
		return Place{}, ok, err
	}
	out := Place{Place: pl}
	j, _ := f.sched.Job(id)
	pid := f.sched.LanePool(j.Tenant)
	if int(pid) >= len(f.fairs) || f.fairs[pid] == nil {
		return out, true, nil
	}
	l := f.fairs[pid]
	if n, span := l.Dispatches(f.clock, j.Size); span > 0 {
		out.RatePerMinute = float64(n) * 60_000 / float64(span)
	}
	w, sum := l.Entitlement(j.Class, j.Tenant)
	if w > 0 && sum > 0 {
		out.Share = float64(w) / float64(sum)
	}
	class, all, span := l.Charged(f.clock, j.Class)
	if all <= 0 || span <= 0 {
		return out, true, nil
	}
	wait := float64(pl.AheadCostMs) * float64(span) / float64(all)
	if !j.HasDeadline() && class > 0 && sum > 0 && pl.Start > pl.VirtualNow {
		// Virtual µs at weight 1 are CPU µs: × the eligible weights (Q16).
		work := float64(pl.Start-pl.VirtualNow) / 1000 * float64(sum) / float64(sfq.WeightOne)
		wait = max(wait, work*float64(span)/float64(class))
	}
	out.EstimatedStart = f.clock + sfq.Time(math.Ceil(wait))
	out.Estimated = true
	return out, true, nil
}
