package scenario

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/sfq"
)

// Core runs scripts directly against the scheduling core.
type Core struct {
	S        *sfq.Scheduler
	maxPools int // 0: the core's default (no bound)
	// level is the script's feature level: the core has none of its own,
	// and refuses what pools bring below level 6 as the state machine
	// does, so that both make the same decisions. implicit is the tier of
	// implicit_tenants (nil: off).
	level    uint32
	implicit *sfq.Tier
	// The state machine's tables of kinds (corekinds.go): worker records
	// and the retry policies of kinds, read by key only.
	workers  map[string]*coreWorker
	policies map[policyKey]fsm.KindPolicy
}

// poolLevel is the level pools need.
const poolLevel = 6

func (c *Core) needPools(what string) error {
	if c.level < poolLevel {
		return fmt.Errorf("%s needs feature level %d", what, poolLevel)
	}
	return nil
}

// NewCore returns a Core over a fresh scheduler with the default config.
func NewCore() *Core {
	s, _ := sfq.New(sfq.DefaultConfig())
	return &Core{S: s, level: uint32(DefaultLevel)}
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
	if err := c.S.DeleteTenant(name); err != nil {
		return err
	}
	c.dropPolicies(name)
	return nil
}

// SetLevel implements Target: the core has no feature levels.
func (c *Core) SetLevel(_ sfq.Time, level uint32) error {
	c.level = max(c.level, level)
	return nil
}

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
	if sub.Pool != "" && sub.Pool != sfq.DefaultPoolName {
		if err := c.needPools("pool"); err != nil {
			return 0, err
		}
	}
	if len(sub.Uses) > 0 {
		if err := c.needResources("uses"); err != nil {
			return 0, err
		}
	}
	if c.level < kindsLevel {
		// Below level 8 a job has no form: every worker runs it (the
		// state machine clears it, as for a client of a later build).
		sub.Form = sfq.FormAny
	}
	_, known := c.S.TenantIndex(sub.Tenant)
	c.withPolicies(&sub, known)
	if !known && c.implicit != nil {
		if _, ok := c.S.PoolID(sub.Pool); ok {
			c.S.SetClock(now)
			if _, err := c.S.UpsertTenant(sfq.TenantSpec{Name: sub.Tenant, Tier: *c.implicit}); err != nil {
				return 0, err
			}
		}
	}
	return c.S.Submit(now, sub)
}

// Dispatch implements Target.
func (c *Core) Dispatch(now sfq.Time, pool string, size sfq.Size, worker string) (sfq.Assignment, bool, error) {
	if pool != "" && pool != sfq.DefaultPoolName {
		if err := c.needPools("pool"); err != nil {
			return sfq.Assignment{}, false, err
		}
	}
	id, ok := c.S.PoolID(pool)
	if !ok {
		return sfq.Assignment{}, false, fmt.Errorf("%w: %q", sfq.ErrUnknownPool, pool)
	}
	return c.dispatchFor(now, id, pool, size, worker)
}

// SetPool implements Target.
func (c *Core) SetPool(now sfq.Time, name string, weights *string, required *bool) error {
	if err := c.needPools("pool"); err != nil {
		return err
	}
	c.S.SetClock(now)
	spec := sfq.PoolSpec{Name: name}
	if p, ok := c.S.Pool(name); ok {
		spec = p.PoolSpec
	}
	if weights != nil {
		w, err := sfq.ParsePoolWeights(*weights)
		if err != nil {
			return err
		}
		spec.Weights = w
	}
	if required != nil {
		spec.Required = *required
	}
	_, err := c.S.SetPool(spec, c.maxPools)
	return err
}

// DeletePool implements Target.
func (c *Core) DeletePool(now sfq.Time, name string) error {
	if err := c.needPools("pool delete"); err != nil {
		return err
	}
	c.S.SetClock(now)
	return c.S.DeletePool(name)
}

// SetSubscription implements Target.
func (c *Core) SetSubscription(now sfq.Time, tenant, pool string, burst *uint32) error {
	if err := c.needPools("subscription"); err != nil {
		return err
	}
	c.S.SetClock(now)
	_, err := c.S.SetSubscription(tenant, pool, burst)
	return err
}

// PausePool implements Target.
func (c *Core) PausePool(now sfq.Time, pool string, resume bool) error {
	if err := c.needPools("pause pool"); err != nil {
		return err
	}
	c.S.SetClock(now)
	_, err := c.S.PausePool(pool, !resume)
	return err
}

// SetPoolSetting implements Target: max_pools and implicit_tenants (the
// core has no admin's submit to give a default_tenant). clock_tick is
// the leader's, and event_retention_per_tenant and max_worker_records
// the state machine's, which the core has none of: they change nothing.
func (c *Core) SetPoolSetting(_ sfq.Time, key, value string) error {
	switch key {
	case "clock_tick", "event_retention_per_tenant", "max_worker_records":
		return nil
	}
	if err := c.needPools(key); err != nil {
		return err
	}
	switch key {
	case "implicit_tenants":
		c.implicit = nil
		if value != "off" {
			t, err := sfq.ParseTier(value)
			if err != nil {
				return err
			}
			c.implicit = &t
		}
		return nil
	case "max_pools":
	default:
		return fmt.Errorf("%s is a setting of the state machine, not of the core", key)
	}
	n, err := strconv.ParseUint(value, 10, 32)
	if err != nil {
		return fmt.Errorf("bad max_pools %q", value)
	}
	c.maxPools = int(n)
	return nil
}

// Pool implements Target.
func (c *Core) Pool(name string) (sfq.Pool, bool) { return c.S.Pool(name) }

// LaneState implements Target.
func (c *Core) LaneState(tenant, pool string, class sfq.Class) (t sfq.Tenant, vnow sfq.VirtualTime, burst uint32, subscribed, ok bool) {
	return laneState(c.S, tenant, pool, class)
}

// laneState reads a tenant's lane in a pool.
func laneState(s *sfq.Scheduler, tenant, pool string, class sfq.Class) (t sfq.Tenant, vnow sfq.VirtualTime, burst uint32, subscribed, ok bool) {
	id, known := s.PoolID(pool)
	if !known {
		return t, 0, 0, false, false
	}
	t, ok = s.Lane(tenant, pool)
	burst, subscribed = s.Subscription(tenant, pool)
	return t, s.PoolVirtualNow(id, class), burst, subscribed, ok
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

// Place implements Target.
func (c *Core) Place(now sfq.Time, id sfq.JobID) (sfq.Place, bool, error) {
	return c.S.Place(id, now, placeLimit)
}

// placeLimit bounds a script's place in line (a script's queues are short).
const placeLimit = 1_000_000

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
func (c *Core) Finish(now sfq.Time, id sfq.JobID, attempt uint32, worker string, outcome sfq.FinishOutcome, cpuMs int64, permanent bool, snoozeMs int64) error {
	if outcome == sfq.OutcomeUnknownKind {
		if err := c.needKinds("outcome unknown_kind"); err != nil {
			return err
		}
	}
	ch, err := c.S.Finish(now, id, attempt, worker, outcome, cpuMs, sfq.RunResult{Permanent: permanent, SnoozeMs: snoozeMs})
	if err == nil && outcome == sfq.OutcomeUnknownKind && ch.Outcome == sfq.Changed {
		c.unknownKind(worker, id)
	}
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
