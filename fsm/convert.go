package fsm

import (
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// SizeFromPB converts a proto size; SIZE_UNSPECIFIED is an error. The
// proto numbers the sizes from 1 in the core's order (TestEnumsMatch).
func SizeFromPB(s pb.Size) (sfq.Size, error) {
	if s < pb.Size_SM || s > pb.Size_LG {
		return 0, invalidf("size", "%v is not sm, md or lg", s)
	}
	return sfq.Size(s - 1), nil
}

// SizeToPB converts a size.
func SizeToPB(s sfq.Size) pb.Size { return pb.Size(s + 1) }

// TierFromPB converts a proto tier; TIER_UNSPECIFIED is an error.
func TierFromPB(t pb.Tier) (sfq.Tier, error) {
	if t < pb.Tier_FREE || t > pb.Tier_DIAMOND {
		return 0, invalidf("tier", "%v is not free, bronze, silver, gold or diamond", t)
	}
	return sfq.Tier(t - 1), nil
}

// TierToPB converts a tier.
func TierToPB(t sfq.Tier) pb.Tier { return pb.Tier(t + 1) }

// ClassFromPB converts a proto class; CLASS_UNSPECIFIED is normal.
func ClassFromPB(c pb.Class) (sfq.Class, error) { return classFromPB("class", c) }

// classFromPB is ClassFromPB of the class in field.
func classFromPB(field string, c pb.Class) (sfq.Class, error) {
	switch c {
	case pb.Class_CLASS_UNSPECIFIED, pb.Class_NORMAL:
		return sfq.ClassNormal, nil
	case pb.Class_CRITICAL:
		return sfq.ClassCritical, nil
	case pb.Class_HIGH:
		return sfq.ClassHigh, nil
	case pb.Class_LOW:
		return sfq.ClassLow, nil
	}
	return 0, invalidf(field, "%v is not critical, high, normal or low", c)
}

// ClassToPB converts a class.
func ClassToPB(c sfq.Class) pb.Class {
	switch c {
	case sfq.ClassCritical:
		return pb.Class_CRITICAL
	case sfq.ClassHigh:
		return pb.Class_HIGH
	case sfq.ClassLow:
		return pb.Class_LOW
	}
	return pb.Class_NORMAL
}

// OutcomeFromPB converts a proto outcome (the same numbers as the core's,
// TestEnumsMatch).
func OutcomeFromPB(o pb.Outcome) (sfq.FinishOutcome, error) {
	if o < pb.Outcome_OK || o > pb.Outcome_UNKNOWN_KIND {
		return 0, invalidf("outcome", "%v is not ok, failed, cancelled, snoozed or unknown_kind", o)
	}
	return sfq.FinishOutcome(o), nil
}

// OutcomeToPB converts an outcome.
func OutcomeToPB(o sfq.FinishOutcome) pb.Outcome { return pb.Outcome(o) }

// RunDetailsFromPB converts a Finished's CPU source and failure (the
// edge and Apply both check them with it).
func RunDetailsFromPB(src pb.CpuSource, f pb.RunFailure) (sfq.CPUSource, sfq.RunFailure, error) {
	var cs sfq.CPUSource
	switch src {
	case pb.CpuSource_CPU_SOURCE_UNSPECIFIED:
	case pb.CpuSource_CPU_SOURCE_PROC:
		cs = sfq.CPUFromProc
	case pb.CpuSource_CPU_SOURCE_CGROUP:
		cs = sfq.CPUFromCgroup
	default:
		return 0, 0, invalidf("cpu_source", "%v is not proc or cgroup", src)
	}
	switch f {
	case pb.RunFailure_RUN_FAILURE_UNSPECIFIED:
		return cs, sfq.FailureNone, nil
	case pb.RunFailure_OOM_KILLED:
		return cs, sfq.FailureOOMKilled, nil
	}
	return 0, 0, invalidf("failure", "%v is not oom_killed", f)
}

// RunDetailsToPB converts a result's CPU source and failure.
func RunDetailsToPB(r *sfq.RunResult) (pb.CpuSource, pb.RunFailure) {
	var cs pb.CpuSource
	switch r.CPUSource {
	case sfq.CPUFromProc:
		cs = pb.CpuSource_CPU_SOURCE_PROC
	case sfq.CPUFromCgroup:
		cs = pb.CpuSource_CPU_SOURCE_CGROUP
	}
	if r.Failure == sfq.FailureOOMKilled {
		return cs, pb.RunFailure_OOM_KILLED
	}
	return cs, pb.RunFailure_RUN_FAILURE_UNSPECIFIED
}

// CapsFromPB converts proto caps.
func CapsFromPB(c *pb.Caps) sfq.Caps {
	return sfq.Caps{
		MaxRunning:         c.GetMaxRunning(),
		MaxRunningSize:     [sfq.NumSizes]uint32{c.GetMaxRunningSm(), c.GetMaxRunningMd(), c.GetMaxRunningLg()},
		MaxInflightCPUMs:   c.GetMaxInflightCpuMs(),
		MaxQueued:          c.GetMaxQueued(),
		MaxRunningCritical: c.GetMaxRunningCritical(),
		MaxRunningHigh:     c.GetMaxRunningHigh(),
		MaxRunningDeadline: c.GetMaxRunningDeadline(),
	}
}

// CapsToPB converts caps.
func CapsToPB(c sfq.Caps) *pb.Caps {
	return &pb.Caps{
		MaxRunning:         c.MaxRunning,
		MaxRunningSm:       c.MaxRunningSize[sfq.SM],
		MaxRunningMd:       c.MaxRunningSize[sfq.MD],
		MaxRunningLg:       c.MaxRunningSize[sfq.LG],
		MaxInflightCpuMs:   c.MaxInflightCPUMs,
		MaxQueued:          c.MaxQueued,
		MaxRunningCritical: c.MaxRunningCritical,
		MaxRunningHigh:     c.MaxRunningHigh,
		MaxRunningDeadline: c.MaxRunningDeadline,
	}
}

// TenantSpecFromPB converts a tenant upsert into the core's spec.
func TenantSpecFromPB(c *clusterpb.TenantUpsert) (sfq.TenantSpec, error) {
	tier, err := TierFromPB(c.GetTier())
	if err != nil {
		return sfq.TenantSpec{}, err
	}
	class, err := classFromPB("max_class", c.GetMaxClass())
	if err != nil {
		return sfq.TenantSpec{}, err
	}
	order, err := GroupOrderFromPB(c.GetGroupOrder())
	if err != nil {
		return sfq.TenantSpec{}, err
	}
	return sfq.TenantSpec{Name: c.GetName(), Tier: tier, Multiplier: c.GetMultiplier(), Caps: CapsFromPB(c.GetCaps()),
		MaxClass: class, AllowDeadlines: c.GetAllowDeadlines(), GroupCap: c.GetGroupCap(), GroupOrder: order, MaxGroups: c.GetMaxGroups(),
		Rate: sfq.RateLimit{N: c.GetRateN(), PeriodMs: c.GetRatePeriodMs(), Burst: c.GetRateBurst()}}, nil
}

// TenantSpecToPB converts a tenant spec into an upsert.
func TenantSpecToPB(s sfq.TenantSpec) *clusterpb.TenantUpsert {
	return &clusterpb.TenantUpsert{Name: s.Name, Tier: TierToPB(s.Tier), Multiplier: s.Multiplier, Caps: CapsToPB(s.Caps),
		MaxClass: ClassToPB(s.MaxClass), AllowDeadlines: s.AllowDeadlines, GroupCap: s.GroupCap, GroupOrder: GroupOrderToPB(s.GroupOrder),
		MaxGroups: s.MaxGroups, RateN: s.Rate.N, RatePeriodMs: s.Rate.PeriodMs, RateBurst: s.Rate.Burst}
}

// GroupOrderFromPB converts a proto group order; unspecified is fifo.
func GroupOrderFromPB(o pb.GroupOrder) (sfq.GroupOrder, error) {
	switch o {
	case pb.GroupOrder_GROUP_ORDER_UNSPECIFIED, pb.GroupOrder_GROUP_FIFO:
		return sfq.GroupFIFO, nil
	case pb.GroupOrder_GROUP_FAIR:
		return sfq.GroupFair, nil
	}
	return 0, invalidf("group_order", "%v is not fifo or fair", o)
}

// GroupOrderToPB converts a group order.
func GroupOrderToPB(o sfq.GroupOrder) pb.GroupOrder {
	if o == sfq.GroupFair {
		return pb.GroupOrder_GROUP_FAIR
	}
	return pb.GroupOrder_GROUP_FIFO
}

// GroupCapFromPB converts a proto group cap (kind and limit) into the
// admin's cap setting.
func GroupCapFromPB(kind clusterpb.GroupCapKind, limit uint32) (sfq.GroupCap, error) {
	switch kind {
	case clusterpb.GroupCapKind_GROUP_CAP_INHERIT:
		return sfq.GroupCapInherit, nil
	case clusterpb.GroupCapKind_GROUP_CAP_NONE:
		return sfq.GroupCapNone, nil
	case clusterpb.GroupCapKind_GROUP_CAP_LIMIT:
		if limit < 1 || limit > sfq.MaxGroupCap {
			return 0, invalidf("", "group cap %d (want 1..%d)", limit, sfq.MaxGroupCap)
		}
		return sfq.GroupCap(limit), nil
	}
	return 0, invalidf("", "group cap kind %v (want inherit, none or a limit)", kind)
}

// GroupCapToPB converts an admin's group cap setting.
func GroupCapToPB(c sfq.GroupCap) (clusterpb.GroupCapKind, uint32) {
	switch c {
	case sfq.GroupCapInherit:
		return clusterpb.GroupCapKind_GROUP_CAP_INHERIT, 0
	case sfq.GroupCapNone:
		return clusterpb.GroupCapKind_GROUP_CAP_NONE, 0
	}
	return clusterpb.GroupCapKind_GROUP_CAP_LIMIT, uint32(c)
}

// ConfigFromPB converts a proto configuration and validates it.
func ConfigFromPB(p *pb.SchedulerConfig) (Config, error) {
	c, err := configFromPB(p)
	if err != nil {
		return c, err
	}
	return c, c.Validate()
}

// StoredConfigFromPB converts a configuration a cluster holds (as GetConfig
// returns it) and validates it as a snapshot's: it accepts the values
// older builds stored, so that a client can read it and change it.
func StoredConfigFromPB(p *pb.SchedulerConfig) (Config, error) {
	c, err := configFromPB(p)
	if err != nil {
		return c, err
	}
	return c, c.validateStored()
}

func configFromPB(p *pb.SchedulerConfig) (Config, error) {
	var c Config
	if p == nil {
		return c, invalidf("", "config is missing")
	}
	if len(p.TierWeights) != sfq.NumTiers {
		return c, invalidf("", "tier_weights has %d values (want %d)", len(p.TierWeights), sfq.NumTiers)
	}
	copy(c.Sched.TierWeights[:], p.TierWeights)
	switch p.Policy {
	case pb.Policy_PREFER_FIT:
		c.Sched.Policy = sfq.PreferFit{}
	case pb.Policy_RESERVE:
		c.Sched.Policy = sfq.Reserve{Margin: sfq.VirtualTime(p.ReserveMarginUs)}
	default:
		return c, invalidf("", "policy %v", p.Policy)
	}
	switch p.Clamp {
	case pb.Clamp_ACTIVATION:
		c.Sched.Clamp = sfq.ClampActivation
	case pb.Clamp_DISPATCH:
		c.Sched.Clamp = sfq.ClampDispatch
	default:
		return c, invalidf("", "clamp %v", p.Clamp)
	}
	if p.Decay {
		c.Sched.Decay = &sfq.Decay{HalfLifeMs: p.DecayHalfLifeMs, NormMs: p.DecayNormMs}
	}
	switch p.Estimate {
	case pb.Estimate_ESTIMATE_UNSPECIFIED, pb.Estimate_SUBMITTED:
		c.Sched.Estimate = sfq.EstimateSubmitted
	case pb.Estimate_AUTO:
		c.Sched.Estimate = sfq.EstimateAuto
	default:
		return c, invalidf("", "estimate %v", p.Estimate)
	}
	c.Sched.DefaultCostMs = p.DefaultCostMs
	if c.Sched.DefaultCostMs == 0 {
		// An entry from before default_cost existed.
		c.Sched.DefaultCostMs = sfq.DefaultCostMs
	}
	c.Sched.AckTimeoutMs = p.AckTimeoutMs
	c.Sched.LeaseTimeoutMs = p.LeaseTimeoutMs
	c.Sched.DefaultMaxAttempts = p.DefaultMaxAttempts
	c.HeartbeatIntervalMs = p.HeartbeatIntervalMs
	c.SelfKillAfterMs = p.SelfKillAfterMs
	c.CancelGraceMs = p.CancelGraceMs
	c.JobRetentionMs = p.JobRetentionMs
	c.EventRetentionCount = p.EventRetentionCount
	c.EventRetentionMs = p.EventRetentionMs
	c.DedupeWindowMs = p.DedupeWindowMs
	c.MaxPayloadBytes = p.MaxPayloadBytes
	c.Sched.RetryBackoffMs, c.Sched.RetryBackoffMaxMs = p.RetryBackoffMs, p.RetryBackoffMaxMs
	c.Sched.MaxSnoozes = sfq.DefaultMaxSnoozes
	if p.MaxSnoozes != 0 {
		if p.MaxSnoozes > sfq.MaxMaxSnoozes {
			return c, invalidf("max_snoozes", "%d (want 1..%d, or 0 for the default %d)", p.MaxSnoozes, sfq.MaxMaxSnoozes, sfq.DefaultMaxSnoozes)
		}
		c.Sched.MaxSnoozes = uint16(p.MaxSnoozes)
	}
	configLeversFromPB(p, &c)
	c.DefaultMaxQueued, c.MaxQueuedBytes, c.MaxTotalQueuedBytes = p.DefaultMaxQueued, p.MaxQueuedBytes, p.MaxTotalQueuedBytes
	pools, err := poolSettingsFromPB(p)
	if err != nil {
		return Config{}, err
	}
	c.Pools = pools
	c.ClockTickMs = clockTickFromPB(p)
	c.EventRetentionPerTenant, c.MaxWorkerRecords = p.EventRetentionPerTenant, p.MaxWorkerRecords
	c.MaxSchedules = DefaultMaxSchedules
	if p.MaxSchedules != 0 {
		c.MaxSchedules = p.MaxSchedules
	}
	resourceSettingsFromPB(p, &c)
	return c, nil
}

// ConfigToPB converts a configuration.
func ConfigToPB(c Config) *pb.SchedulerConfig {
	p := &pb.SchedulerConfig{
		TierWeights:         append([]uint32(nil), c.Sched.TierWeights[:]...),
		Policy:              pb.Policy_PREFER_FIT,
		Clamp:               pb.Clamp_ACTIVATION,
		AckTimeoutMs:        c.Sched.AckTimeoutMs,
		LeaseTimeoutMs:      c.Sched.LeaseTimeoutMs,
		DefaultMaxAttempts:  c.Sched.DefaultMaxAttempts,
		HeartbeatIntervalMs: c.HeartbeatIntervalMs,
		SelfKillAfterMs:     c.SelfKillAfterMs,
		CancelGraceMs:       c.CancelGraceMs,
		JobRetentionMs:      c.JobRetentionMs,
		EventRetentionCount: c.EventRetentionCount,
		EventRetentionMs:    c.EventRetentionMs,
		DedupeWindowMs:      c.DedupeWindowMs,
		MaxPayloadBytes:     c.MaxPayloadBytes,
		Estimate:            pb.Estimate_SUBMITTED,
		DefaultCostMs:       c.Sched.DefaultCostMs,
		RetryBackoffMs:      c.Sched.RetryBackoffMs,
		RetryBackoffMaxMs:   c.Sched.RetryBackoffMaxMs,
		MaxSnoozes:          uint32(c.Sched.MaxSnoozes),
	}
	if c.Sched.Estimate == sfq.EstimateAuto {
		p.Estimate = pb.Estimate_AUTO
	}
	if r, ok := c.Sched.Policy.(sfq.Reserve); ok {
		p.Policy = pb.Policy_RESERVE
		p.ReserveMarginUs = int64(r.Margin)
	}
	if c.Sched.Clamp == sfq.ClampDispatch {
		p.Clamp = pb.Clamp_DISPATCH
	}
	if d := c.Sched.Decay; d != nil {
		p.Decay = true
		p.DecayHalfLifeMs = d.HalfLifeMs
		p.DecayNormMs = d.NormMs
	}
	configLeversToPB(c, p)
	p.DefaultMaxQueued, p.MaxQueuedBytes, p.MaxTotalQueuedBytes = c.DefaultMaxQueued, c.MaxQueuedBytes, c.MaxTotalQueuedBytes
	poolSettingsToPB(c.Pools, p)
	p.ClockTickMs = c.ClockTickMs
	p.EventRetentionPerTenant, p.MaxWorkerRecords = c.EventRetentionPerTenant, c.MaxWorkerRecords
	p.MaxSchedules = c.MaxSchedules
	resourceSettingsToPB(c, p)
	return p
}

// ResultToPB converts a result.
func ResultToPB(r Result) *clusterpb.CommandResult {
	out := &clusterpb.CommandResult{
		Code:     clusterpb.Code(r.Code),
		Message:  r.Msg,
		Job:      uint64(r.Job),
		Created:  r.Created,
		Attempt:  r.Attempt,
		Assigned: r.Assigned,
		Count:    r.Count,
		Tenant:   r.Tenant,

		DeadlineMissed: r.DeadlineMissed,
	}
	if r.Assigned {
		out.Size = SizeToPB(r.Size)
	}
	if r.Outcome != 0 {
		out.Outcome = r.Outcome.String()
	}
	for _, o := range r.HeartbeatOutcomes {
		out.HeartbeatOutcomes = append(out.HeartbeatOutcomes, o.String())
	}
	if b := r.Bulk; b != nil {
		out.Items, out.Next, out.Duplicate, out.Stopped = BulkItemsToPB(b.Items), uint64(b.Next), b.Duplicate, b.Stopped
	}
	return out
}
