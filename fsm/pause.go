package fsm

import (
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// applyPause pauses or resumes a tenant, one of its named groups, or all
// dispatch. A change of a tenant or a group is recorded as a tenant-level
// event (paused or resumed) in the tenant's stream: job 0, with the
// group's name where a job event has its worker's (empty: the whole
// tenant). Pausing all dispatch records no event. A pause or resume that
// changes nothing (the tenant is already paused) is a duplicate. With
// as_tenant the tenant's own client token acts: it may pause and resume
// its own tenant and groups, but not lift an admin's pause.
func (f *FSM) applyPause(c *clusterpb.Pause) Result {
	if r := f.checkPause(c); r.Refused() || r.Outcome == sfq.Duplicate {
		return r
	}
	kind := EvPaused
	if c.Resume {
		kind = EvResumed
	}
	if c.Pool != "" {
		return f.applyPausePool(c)
	}
	if c.All {
		if !f.sched.PauseDispatch(!c.Resume) {
			return Result{Outcome: sfq.Duplicate}
		}
		return Result{Outcome: sfq.Changed}
	}
	ti, _ := f.sched.TenantIndex(c.Tenant) // checkPause found it
	var changed bool
	var err error
	if c.Group == "" {
		changed, err = f.sched.PauseTenant(c.Tenant, !c.Resume, !c.AsTenant)
	} else {
		changed, err = f.sched.PauseGroup(c.Tenant, c.Group, !c.Resume, !c.AsTenant)
	}
	if err != nil {
		return refuse(err)
	}
	if !changed {
		return Result{Outcome: sfq.Duplicate, Tenant: c.Tenant}
	}
	f.emitTenant(kind, ti, c.Group)
	f.observe(ti)
	return Result{Outcome: sfq.Changed, Tenant: c.Tenant}
}

// emitTenant appends a tenant-level event: job 0, the subject (a group's
// name, or empty) in the worker's place.
func (f *FSM) emitTenant(kind EventKind, ti uint32, subject string) {
	ev := eventRecord{At: f.clock, Tenant: ti, Kind: kind, Worker: subject}
	ev.wall = sfq.MakeWallDelta(sfq.Time(f.lastWall), f.clock)
	f.events.Append(f.nextEvent, &ev)
	f.nextEvent++
}

// TenantLevel reports whether the event is a tenant-level one (paused,
// resumed), of no job: its Worker field holds the group it names.
func (k EventKind) TenantLevel() bool { return k == EvPaused || k == EvResumed }
