package fsm

import (
	"fmt"
	"slices"

	"github.com/baristahq/barista/fsm/fairness"
	"github.com/baristahq/barista/sfq"
)

// The replicated state behind the metrics exposition (docs/operations.md,
// "Metrics"). Two things the core does not keep live beside it:
//
//   - exported: the live tenants an admin marked export_metrics. A node
//     reports a tenant's own series while there are at most its
//     metrics.max_tenants live tenants, and beyond that only for these.
//   - tierCarry: per tier, what tenants that moved to another tier had
//     accrued in it, minus what tenants that moved in had accrued
//     elsewhere. A tier's counters are the sum over the records of its
//     tenants (deleted ones included: their records stay as tombstones)
//     plus its carry, so that an admin moving a tenant changes neither
//     tier's counters at that moment and each later increment counts in
//     the new tier. No tier counter ever decreases.
//
// Both are in the state encoding since version 3 (see stateVersion).

// Counters are the monotonic counters reported for a tenant or a tier.
// CPU and cost are in milliseconds.
type Counters struct {
	Dispatches       int64
	DispatchedCostMs int64
	CPUMs            int64 // billed, zombies included
	Completed        int64
	Failed           int64
	Cancelled        int64
	TimedOut         int64
	Failures         int64 // failed runs and lost leases
}

func countersOf(b *sfq.Billing) Counters {
	return Counters{Dispatches: int64(b.Dispatches), DispatchedCostMs: b.DispatchedCostMs, CPUMs: b.CPUMs,
		Completed: int64(b.Completed), Failed: int64(b.Failed), Cancelled: int64(b.Cancelled), TimedOut: int64(b.TimedOut),
		Failures: int64(b.Failures)}
}

// fields lists the counters in their encoding order.
func (c *Counters) fields() [8]*int64 {
	return [8]*int64{&c.Dispatches, &c.DispatchedCostMs, &c.CPUMs, &c.Completed, &c.Failed, &c.Cancelled, &c.TimedOut, &c.Failures}
}

// add adds sign × o to c.
func (c *Counters) add(o Counters, sign int64) {
	dst, src := c.fields(), o.fields()
	for i := range dst {
		*dst[i] += sign * *src[i]
	}
}

// TenantFlags is the per-tenant state the FSM keeps beside the core. It is
// immutable: a change replaces it.
type TenantFlags struct{ exported []uint32 }

// ExportMetrics reports whether an admin marked the tenant at index i
// export_metrics.
func (x TenantFlags) ExportMetrics(i uint32) bool {
	_, ok := slices.BinarySearch(x.exported, i)
	return ok
}

// ReadTenants runs fn like Read, with the per-tenant flags kept beside the
// core.
func (f *FSM) ReadTenants(fn func(s *sfq.Scheduler, flags TenantFlags)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.sched, TenantFlags{f.exported})
}

// setExported marks or unmarks the tenant at index i, replacing the slice
// (views and readers may hold the old one).
func (f *FSM) setExported(i uint32, on bool) {
	at, found := slices.BinarySearch(f.exported, i)
	switch {
	case on && !found:
		f.exported = slices.Insert(slices.Clip(f.exported), at, i)
	case !on && found:
		f.exported = slices.Delete(slices.Clone(f.exported), at, at+1)
	}
}

// moveTier keeps both tiers' counters unchanged when a tenant with
// billing b moves from one to the other. Below Level2 it keeps nothing, as
// builds before the carries did: the tenant's counters move with it.
func (f *FSM) moveTier(from, to sfq.Tier, b *sfq.Billing) {
	if from == to || !tiersCarry(f.level) {
		return
	}
	c := countersOf(b)
	f.tierCarry[from].add(c, 1)
	f.tierCarry[to].add(c, -1)
}

func (v *View) encodeMetrics(e *sfq.Encoder) {
	e.Uvarint(uint64(len(v.exported)))
	for _, i := range v.exported {
		e.Uvarint(uint64(i))
	}
	for t := range v.tierCarry {
		for _, p := range v.tierCarry[t].fields() {
			e.Varint(*p)
		}
	}
}

func (f *FSM) decodeMetrics(d *sfq.Decoder) {
	n := d.Uvarint()
	for k := uint64(0); k < n && d.Err() == nil; k++ {
		i := d.Uint32()
		if len(f.exported) > 0 && i <= f.exported[len(f.exported)-1] {
			d.Fail("export_metrics tenant %d is out of order", i)
			return
		}
		f.exported = append(f.exported, i)
	}
	for t := range f.tierCarry {
		for _, p := range f.tierCarry[t].fields() {
			*p = d.Varint()
		}
	}
}

// verifyMetrics checks that every marked tenant is live.
func (f *FSM) verifyMetrics() error {
	for _, i := range f.exported {
		if t, ok := f.sched.TenantAt(i); !ok || t.Deleted {
			return fmt.Errorf("%w: tenant %d is marked export_metrics but is not a live tenant", sfq.ErrVerify, i)
		}
	}
	return nil
}

// TenantMetrics is a tenant's own series.
type TenantMetrics struct {
	Name    string
	Tier    sfq.Tier
	Queued  [sfq.NumSizes]uint32
	Running uint32
	Weight  sfq.Weight // at the FSM clock
	// Counters are summed over every tenant that held the name (deleted
	// ones are kept as tombstones), so that deleting a tenant and creating
	// one of the same name continues its series instead of resetting it.
	Counters Counters
	// Fair are the tenant's live lines of the fairness report (with its
	// lag), one per class it is active in, in class service order.
	Fair []fairness.Line
}

// TierMetrics is a tier's aggregate over its tenants.
type TierMetrics struct {
	Tenants  int // live tenants
	Queued   [sfq.NumSizes]uint64
	Running  uint64
	Counters Counters // deleted tenants and tenants that moved away included
}

// MetricsView is what a node reports of the replicated state on /metrics.
type MetricsView struct {
	VirtualNow sfq.VirtualTime
	Tiers      [sfq.NumTiers]TierMetrics
	// Tenants are the tenants with their own series, in index order: every
	// live tenant while there are at most maxTenants, otherwise those
	// marked export_metrics.
	Tenants []TenantMetrics
}

// Metrics computes the metrics view under one read lock. Which tenants
// have their own series depends on the live tenants and their marks only,
// so only an admin's upsert or delete changes it.
func (f *FSM) Metrics(maxTenants int) MetricsView {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := f.sched
	v := MetricsView{VirtualNow: s.VirtualNow()}
	for t := range v.Tiers {
		v.Tiers[t].Counters = f.tierCarry[t]
	}
	live := 0
	var past map[string]Counters // tombstones' counters by name
	for i := range uint32(s.TenantCount()) {
		t, _ := s.TenantAt(i)
		c := countersOf(&t.Billing)
		tm := &v.Tiers[t.Tier]
		tm.Counters.add(c, 1)
		if t.Deleted {
			if past == nil {
				past = map[string]Counters{}
			}
			p := past[t.Name]
			p.add(c, 1)
			past[t.Name] = p
			continue
		}
		if s.LanePool(i) == sfq.DefaultPool {
			live++ // a tenant's own record (its other pools' lanes count in it)
			tm.Tenants++
		}
		tm.Running += uint64(t.Running)
		for sz, q := range t.Queued {
			tm.Queued[sz] += uint64(q)
		}
	}
	own := func(i uint32, t *sfq.Tenant) {
		c := countersOf(&t.Billing)
		c.add(past[t.Name], 1)
		m := TenantMetrics{Name: t.Name, Tier: t.Tier, Queued: t.Queued, Running: t.Running,
			Weight: s.Weight(t, f.clock), Counters: c}
		f.tenantRows(i, func(r *fairness.Row) {
			if r.Active() {
				m.Fair = append(m.Fair, f.fairRow(r))
			}
		})
		v.Tenants = append(v.Tenants, m)
	}
	if live <= maxTenants {
		v.Tenants = make([]TenantMetrics, 0, live)
		s.Tenants(func(i uint32, t *sfq.Tenant) bool { own(i, t); return true })
		return v
	}
	v.Tenants = make([]TenantMetrics, 0, len(f.exported))
	for _, i := range f.exported {
		t, _ := s.TenantTotals(i)
		own(i, &t)
	}
	return v
}
