package scenario

import (
	"errors"

	"github.com/baristahq/barista/sfq"
)

// Core runs scripts directly against the scheduling core.
type Core struct{ S *sfq.Scheduler }

// NewCore returns a Core over a fresh scheduler with the default config.
func NewCore() *Core {
	s, _ := sfq.New(sfq.DefaultConfig())
	return &Core{S: s}
}

// SetConfig implements Target.
func (c *Core) SetConfig(now sfq.Time, cfg sfq.Config) error {
	c.S.SetClock(now)
	return c.S.SetConfig(cfg)
}

// Config implements Target.
func (c *Core) Config() sfq.Config { return c.S.Config() }

// UpsertTenant implements Target.
func (c *Core) UpsertTenant(now sfq.Time, spec sfq.TenantSpec) error {
	c.S.SetClock(now)
	_, err := c.S.UpsertTenant(spec)
	return err
}

// Tenant implements Target.
func (c *Core) Tenant(name string) (sfq.TenantSpec, bool) {
	t, ok := c.S.Tenant(name)
	return t.TenantSpec, ok
}

// DeleteTenant implements Target.
func (c *Core) DeleteTenant(now sfq.Time, name string) error {
	c.S.SetClock(now)
	return c.S.DeleteTenant(name)
}

// SetLevel implements Target: the core has no feature levels.
func (c *Core) SetLevel(sfq.Time, uint32) error { return nil }

// SetGroup implements Target.
func (c *Core) SetGroup(now sfq.Time, tenant, group string, admin sfq.GroupCap, own uint32, asTenant bool) error {
	c.S.SetClock(now)
	set := sfq.GroupSettings{}
	if g, ok := c.S.Group(tenant, group); ok {
		set = g.GroupSettings
	}
	if asTenant {
		set.TenantCap = own
	} else {
		set.Cap = admin
	}
	return c.S.SetGroup(tenant, group, set)
}

// SetGroupRate implements Target.
func (c *Core) SetGroupRate(now sfq.Time, tenant, group string, r sfq.RateLimit) error {
	c.S.SetClock(now)
	set := sfq.GroupSettings{}
	if g, ok := c.S.Group(tenant, group); ok {
		set = g.GroupSettings
	}
	set.Rate = r
	return c.S.SetGroup(tenant, group, set)
}

// Pause implements Target.
func (c *Core) Pause(now sfq.Time, tenant, group string, all, resume bool) error {
	c.S.SetClock(now)
	var err error
	switch {
	case all:
		c.S.PauseDispatch(!resume)
	case group != "":
		_, err = c.S.PauseGroup(tenant, group, !resume, true)
	default:
		_, err = c.S.PauseTenant(tenant, !resume, true)
	}
	return err
}

// Group implements Target.
func (c *Core) Group(tenant, group string) (sfq.Group, bool) { return c.S.Group(tenant, group) }

// Submit implements Target.
func (c *Core) Submit(now sfq.Time, sub sfq.Submission) (sfq.JobID, error) {
	return c.S.Submit(now, sub)
}

// Dispatch implements Target.
func (c *Core) Dispatch(now sfq.Time, size sfq.Size, worker string) (sfq.Assignment, bool, error) {
	return c.S.Dispatch(now, size, worker)
}

// Job implements Target.
func (c *Core) Job(id sfq.JobID) (sfq.Job, bool) { return c.S.Job(id) }

// TenantState implements Target.
func (c *Core) TenantState(name string, class sfq.Class) (sfq.Tenant, sfq.VirtualTime, bool) {
	t, ok := c.S.Tenant(name)
	return t, c.S.ClassVirtualNow(class), ok
}

// Explain implements Target.
func (c *Core) Explain(id sfq.JobID) (sfq.Reason, error) { return c.S.Explain(id) }

// Estimate implements Target.
func (c *Core) Estimate(tenant, typ string) (sfq.TypeStat, bool) { return c.S.Estimate(tenant, typ) }

// TenantName implements Target.
func (c *Core) TenantName(i uint32) string { return c.S.TenantName(i) }

// Start implements Target.
func (c *Core) Start(now sfq.Time, id sfq.JobID, attempt uint32, worker string) error {
	_, err := c.S.Start(now, id, attempt, worker)
	return err
}

// Heartbeat implements Target.
func (c *Core) Heartbeat(now sfq.Time, id sfq.JobID, attempt uint32, worker string, cpuMs int64) error {
	_, err := c.S.Heartbeat(now, id, attempt, worker, cpuMs)
	return err
}

// Finish implements Target.
func (c *Core) Finish(now sfq.Time, id sfq.JobID, attempt uint32, worker string, outcome sfq.FinishOutcome, cpuMs int64, permanent bool) error {
	_, err := c.S.Finish(now, id, attempt, worker, outcome, cpuMs, sfq.RunResult{Permanent: permanent})
	return err
}

// Cancel implements Target.
func (c *Core) Cancel(now sfq.Time, id sfq.JobID) error {
	_, err := c.S.Cancel(now, id)
	return err
}

// Expire implements Target.
func (c *Core) Expire(now sfq.Time, id sfq.JobID, attempt uint32, kind sfq.InputKind) error {
	_, err := c.S.Expire(now, id, attempt, kind)
	return err
}

// Release implements Target.
func (c *Core) Release(now sfq.Time, id sfq.JobID) error {
	_, err := c.S.Release(now, id, false)
	return err
}

// Redrive implements Target: each job in turn; the refusals are joined.
func (c *Core) Redrive(now sfq.Time, ids []sfq.JobID) error {
	var errs []error
	for _, id := range ids {
		if _, err := c.S.Redrive(now, id, 0); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Check implements Target.
func (c *Core) Check() error { return c.S.Verify() }

// Hash implements Target.
func (c *Core) Hash() []byte {
	h := c.S.Hash()
	return h[:]
}
