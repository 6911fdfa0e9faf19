package fsm

import (
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// Pools (SPEC §3 "Pools", feature level 6): separate worker fleets, each
// its own fair share. The core (sfq/pool.go) holds the pools, the
// subscriptions and every tenant's lane per pool; this file holds the
// commands that change them, the configuration's pool settings, and what
// the state machine keeps of a worker's pool.

// PoolSettings are the configuration's pool settings (feature level 6).
type PoolSettings struct {
	// MaxPools bounds the live pools, default included (0: the default,
	// sfq.DefaultMaxPools).
	MaxPools uint32
	// Implicit, with ImplicitTier, makes a submit for an unknown tenant
	// create it in Apply with that tier and no caps (off: NOT_FOUND).
	Implicit     bool
	ImplicitTier sfq.Tier
	// DefaultTenant is the tenant of an admin's submit that names none
	// ("": none, such a submit is refused).
	DefaultTenant string
}

// maxPools is the bound in force.
func (p PoolSettings) maxPools() int {
	if p.MaxPools == 0 {
		return sfq.DefaultMaxPools
	}
	return int(p.MaxPools)
}

// uses reports whether any setting differs from its default.
func (p PoolSettings) uses() bool { return p != PoolSettings{} }

func (p PoolSettings) validate() error {
	if p.MaxPools > sfq.MaxPoolSlots {
		return invalidf("", "max_pools is %d (want 0 for the default %d, or 1..%d)", p.MaxPools, sfq.DefaultMaxPools, sfq.MaxPoolSlots)
	}
	if p.Implicit && p.ImplicitTier >= sfq.NumTiers {
		return invalidf("", "implicit_tenants tier %d", p.ImplicitTier)
	}
	if p.DefaultTenant != "" {
		if err := sfq.ValidateName("default_tenant", p.DefaultTenant); err != nil {
			return err
		}
	}
	return nil
}

// ImplicitString renders implicit_tenants: off or the tier.
func (p PoolSettings) ImplicitString() string {
	if !p.Implicit {
		return "off"
	}
	return p.ImplicitTier.String()
}

func encodeConfigPools(e *sfq.Encoder, p *PoolSettings) {
	e.Uvarint(uint64(p.MaxPools))
	e.Bool(p.Implicit)
	e.Byte(byte(p.ImplicitTier))
	e.String(p.DefaultTenant)
}

func decodeConfigPools(d *sfq.Decoder, p *PoolSettings) {
	p.MaxPools = d.Uint32()
	p.Implicit = d.Bool()
	p.ImplicitTier = sfq.Tier(d.Enum("implicit tier", sfq.NumTiers))
	p.DefaultTenant = d.String()
}

// poolSettingsFromPB reads the pool settings of a SetConfig.
func poolSettingsFromPB(p *pb.SchedulerConfig) (PoolSettings, error) {
	out := PoolSettings{MaxPools: p.MaxPools, DefaultTenant: p.DefaultTenant}
	if p.ImplicitTenants != pb.Tier_TIER_UNSPECIFIED {
		t, err := TierFromPB(p.ImplicitTenants)
		if err != nil {
			return PoolSettings{}, invalidf("implicit_tenants", "%w", err)
		}
		out.Implicit, out.ImplicitTier = true, t
	}
	return out, out.validate()
}

func poolSettingsToPB(c PoolSettings, p *pb.SchedulerConfig) {
	p.MaxPools, p.DefaultTenant = c.MaxPools, c.DefaultTenant
	if c.Implicit {
		p.ImplicitTenants = TierToPB(c.ImplicitTier)
	}
}

// poolsConfigLevel is the level a SetConfig's pool settings need.
func poolsConfigLevel(p *pb.SchedulerConfig) (uint32, string) {
	switch {
	case p.GetMaxPools() != 0:
		return Level6, "max_pools"
	case p.GetImplicitTenants() != pb.Tier_TIER_UNSPECIFIED:
		return Level6, "implicit_tenants"
	case p.GetDefaultTenant() != "":
		return Level6, "default_tenant"
	}
	return Level1, ""
}

// poolLevel is the level a command's pool fields need: any pool but the
// default, and every pool and subscription command, need Level6.
func poolLevel(c *clusterpb.Command, r *levelNeed) {
	switch cmd := c.GetCmd().(type) {
	case *clusterpb.Command_Submit:
		r.need(cmd.Submit.Pool != "" && cmd.Submit.Pool != sfq.DefaultPoolName, Level6, "pool "+cmd.Submit.Pool)
	case *clusterpb.Command_Dispatch:
		r.need(cmd.Dispatch.Pool != "" && cmd.Dispatch.Pool != sfq.DefaultPoolName, Level6, "pool "+cmd.Dispatch.Pool)
	case *clusterpb.Command_Pause:
		r.need(cmd.Pause.Pool != "", Level6, "pause of pool "+cmd.Pause.Pool)
	case *clusterpb.Command_Redrive:
		r.need(cmd.Redrive.GetFilter().GetPool() != "", Level6, "pool filter")
	case *clusterpb.Command_CancelJobs:
		r.need(cmd.CancelJobs.GetFilter().GetPool() != "", Level6, "pool filter")
	case *clusterpb.Command_Purge:
		r.need(cmd.Purge.GetFilter().GetPool() != "", Level6, "pool filter")
	case *clusterpb.Command_PoolSet:
		r.need(true, Level6, "PoolSet")
	case *clusterpb.Command_PoolDelete:
		r.need(true, Level6, "PoolDelete")
	case *clusterpb.Command_SubscriptionSet:
		r.need(true, Level6, "SubscriptionSet")
	case *clusterpb.Command_WorkerHello:
		r.need(true, Level8, "WorkerHello")
	case *clusterpb.Command_KindPolicySet:
		r.need(true, Level8, "KindPolicySet")
	case *clusterpb.Command_ScheduleSet:
		r.need(true, Level8, "ScheduleSet")
	case *clusterpb.Command_ScheduleDelete:
		r.need(true, Level8, "ScheduleDelete")
	case *clusterpb.Command_SchedulePause:
		r.need(true, Level8, "SchedulePause")
	case *clusterpb.Command_ScheduleFire:
		r.need(true, Level8, "ScheduleFire")
	case *clusterpb.Command_ScheduleMiss:
		r.need(true, Level8, "ScheduleMiss")
	case *clusterpb.Command_ScheduleRunNow:
		r.need(true, Level8, "ScheduleRunNow")
	}
}

// applyPoolSet creates or changes a pool. Fields left out keep their
// value (a new pool: default weights, subscriptions optional).
func (f *FSM) applyPoolSet(c *clusterpb.PoolSet) Result {
	spec, r := f.checkPoolSet(c)
	if r.Refused() {
		return r
	}
	created, err := f.sched.SetPool(spec, f.cfg.Pools.maxPools())
	if err != nil {
		return refuse(err)
	}
	return Result{Outcome: sfq.Changed, Created: created}
}

// applyPoolDelete deletes a pool with no scheduled, queued or running job
// (the leader refuses first while a worker of the pool is connected).
func (f *FSM) applyPoolDelete(c *clusterpb.PoolDelete) Result {
	if r := f.checkPoolDelete(c); r.Refused() {
		return r
	}
	if err := f.sched.DeletePool(c.Name); err != nil {
		return refuse(err)
	}
	return Result{Outcome: sfq.Changed}
}

// applySubscriptionSet sets or removes a tenant's subscription in a pool.
func (f *FSM) applySubscriptionSet(c *clusterpb.SubscriptionSet) Result {
	if r := f.checkSubscription(c); r.Refused() {
		return r
	}
	changed, err := f.sched.SetSubscription(c.Tenant, c.Pool, c.Burst)
	if err != nil {
		return refuse(err)
	}
	if !changed {
		return Result{Outcome: sfq.Duplicate, Tenant: c.Tenant}
	}
	f.observeTenant(c.Tenant)
	return Result{Outcome: sfq.Changed, Tenant: c.Tenant}
}

// applyPausePool pauses or resumes dispatch in one pool (an admin's
// only): a gate, recorded as no event, as a pause of all dispatch.
func (f *FSM) applyPausePool(c *clusterpb.Pause) Result {
	if c.Tenant != "" || c.Group != "" || c.All {
		return refusef(Invalid, "", "a pause of a pool names no tenant, group or all")
	}
	if c.AsTenant {
		return refusef(PermissionDenied, "", "a pool is paused and resumed by an admin")
	}
	changed, err := f.sched.PausePool(c.Pool, !c.Resume)
	if err != nil {
		return refuse(err)
	}
	if !changed {
		return Result{Outcome: sfq.Duplicate}
	}
	return Result{Outcome: sfq.Changed}
}

// observeTenant observes every lane of the named tenant (fairness.go).
func (f *FSM) observeTenant(name string) {
	if ti, ok := f.sched.TenantIndex(name); ok {
		for _, l := range f.sched.Lanes(ti) {
			f.observe(l)
		}
	}
}

// implicitSpec is the tenant implicit_tenants would make for a submit
// naming the unknown tenant name: the configured tier, no caps, and the
// rest of a tenant's defaults. nil when none would be made (the setting
// is off); a refusal when the name is not a valid tenant name.
func (f *FSM) implicitSpec(name string) (*sfq.TenantSpec, Result) {
	p := f.cfg.Pools
	if !p.Implicit {
		return nil, Result{}
	}
	if err := sfq.ValidateName("tenant", name); err != nil {
		return nil, refuse(err)
	}
	return &sfq.TenantSpec{Name: name, Tier: p.ImplicitTier, MaxClass: sfq.ClassNormal}, Result{}
}

// implicitTenant creates, under implicit_tenants, the unknown tenant a
// submit names (implicitSpec). It reports whether it did.
func (f *FSM) implicitTenant(name string) (bool, Result) {
	spec, r := f.implicitSpec(name)
	if spec == nil {
		return false, r
	}
	if _, err := f.sched.UpsertTenant(*spec); err != nil {
		return false, refuse(err)
	}
	return true, Result{}
}

// PoolSettings returns the configuration's pool settings.
func (f *FSM) PoolSettings() PoolSettings {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.cfg.Pools
}

// HasEligibleIn reports whether a worker of pool pool and this size would
// get a job now (the leader proposes a Dispatch only then).
func (f *FSM) HasEligibleIn(pool string, size sfq.Size) bool {
	defer f.lockForPick(pool)()
	id, ok := f.sched.PoolID(pool)
	return ok && !f.sched.PoolPaused(id) && f.sched.PoolEligible(id, size)
}

// usesPools reports whether the state holds anything of pools the
// encoding of state version 8 cannot carry: a pool, a subscription or a
// pool setting of the core, a pool setting of the configuration, a
// worker of a pool.
func (v *View) usesPools() bool {
	if v.level < Level6 {
		return false
	}
	if v.sched.UsesPools() || v.cfg.Pools.uses() {
		return true
	}
	for i := range v.workers {
		if v.workers[i].Pool != "" {
			return true
		}
	}
	return false
}
