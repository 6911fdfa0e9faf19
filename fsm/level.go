package fsm

import (
	"fmt"

	"github.com/baristahq/barista/internal/text"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// The cluster's feature level (SPEC §4 "Feature level"; docs/operations.md
// "Upgrades"). A level names what the commands and the state may hold. It
// is replicated: the leader raises it with SetFeatureLevel once every voter
// reports that its build understands the new level, it never goes down,
// and a command that needs a higher level is refused at the edge and again
// in Apply. So a cluster of mixed builds only ever commits what all of
// them apply alike.
const (
	// Level1 is what builds before feature levels hold and write:
	// snapshot format 1. A state that never saw SetFeatureLevel is at
	// Level1.
	Level1 uint32 = 1
	// Level2 adds priority classes, deadlines, learned cost estimates
	// (estimate=auto and the moving averages, which are learned from this
	// level on), tenants' export_metrics marks and per-tier carries; its
	// state is written as snapshot format 2.
	Level2 uint32 = 2
	// Level3 adds webhooks: the commands that set, delete, acknowledge
	// and replay a tenant's endpoint, and the webhook section of the
	// state (state version 5, snapshot format 4). A build of level 2
	// knows none of them: it would refuse each as unknown and could not
	// read the state.
	Level3 uint32 = 3
	// Level4 adds groups: a submit's group, a tenant's group_cap,
	// group_order=fair and max_groups, and SetGroup; its state is written
	// as snapshot format 5 (FSM state version 6, the core's version 4).
	// Below it no command can put anything of groups into the state, so a
	// cluster at level 3 holds and writes exactly what the build before
	// groups does.
	Level4 uint32 = 4
	// Level5 adds the job lifecycle levers: delayed and expiring jobs,
	// retry backoff, pauses, rate limits, dead letters with redrive, bulk
	// cancel and purge; its state is written as snapshot format 6 (FSM
	// state version 7, the core's version 5). Below it no command can put
	// any of them into the state, so a cluster at level 4 holds and writes
	// exactly what the build before them does.
	Level5 uint32 = 5
	// Level6 adds the tenant quotas by default (the settings
	// default_max_queued and max_queued_bytes, counted in Apply) and a
	// worker's report that a run can never succeed (a failed Finished
	// marked permanent ends the job failed, with no retry); its state is
	// written as snapshot format 7 (FSM state version 8). Below it no
	// command can put either into the state, and Apply reads neither.
	Level6 uint32 = 6
	// Level6 also adds pools (SPEC §3 "Pools"): a job's and a worker's
	// pool, PoolSet, PoolDelete, SubscriptionSet, a pool's pause, the pool
	// filter of the bulk commands, and the settings max_pools,
	// implicit_tenants and default_tenant. A state that uses them is
	// written as FSM state version 9 (the core's version 6); one that
	// does not stays version 8, byte for byte.

	// Level7 makes Apply check each command first with the check the
	// leader makes before it proposes (fsm/admit.go), so that a refused
	// command changes nothing: a submit it refuses makes no implicit
	// tenant (below Level7 one refused after its tenant was made kept
	// it), a refused worker report does not mark its worker seen, a
	// submit's payload is held to the limit the edge applies
	// (PayloadLimit) and a Finished's exit code to -1..255. A drained
	// worker's record is pruned like any other once it has not been seen
	// within the job retention. None of this changes the state's
	// encoding.
	//
	// Level7 also adds a worker's word on a run: how it measured the CPU
	// (cpu_source: cgroup or proc) and why a failed run failed (failure:
	// oom_killed, the event reason of that run), kept on the job with its
	// result; a run's outcome snoozed and the setting max_snoozes; and
	// the setting clock_tick (clocktick.go; the ticks themselves,
	// envelopes without a command, need no level). A state at Level7 is
	// written as FSM state version 10, which says the level to a node that
	// restores it (versions 8 and 9 read back as Level6); below Level7 the
	// encoding is as before.
	Level7 uint32 = 7

	// Level8 adds the settings event_retention_per_tenant (each tenant's
	// recent events kept whatever the others' volume: eventkeep.go) and
	// max_worker_records (the worker records drains may make:
	// level8.go). Each changes what Apply does only while it is set,
	// which only a cluster at Level8 may do; below it the state holds
	// neither, nor any kept event. A state at Level8 is written as FSM
	// state version 11, which says the level.
	Level8 uint32 = 8

	// MaxFeatureLevel is the highest level this build understands.
	MaxFeatureLevel = Level8
)

// ErrFeatureLevel marks a SetFeatureLevel above what this build
// understands: the node stops rather than apply it.
var ErrFeatureLevel = fmt.Errorf("unknown feature level")

// RequiredLevel returns the feature level a command needs and, when that
// is above Level1, what needs it (a field and its value). It is the one
// check of the edge and of Apply.
func RequiredLevel(c *clusterpb.Command) (uint32, string) {
	r := levelNeed{level: Level1}
	what := delayLevel(c)
	r.need(what != "", Level5, what)
	poolLevel(c, &r)
	resourceLevel(c, &r)
	switch cmd := c.GetCmd().(type) {
	case *clusterpb.Command_Submit:
		s := cmd.Submit
		if s.JobClass != pb.Class_CLASS_UNSPECIFIED && s.JobClass != pb.Class_NORMAL {
			// Only then is the name built: every submit passes here.
			r.need(true, Level2, "class "+className(s.JobClass))
		}
		r.need(s.DeadlineMs != 0, Level2, "deadline")
		r.need(s.Group != "", Level4, "group")
	case *clusterpb.Command_TenantUpsert:
		u := cmd.TenantUpsert
		c := u.GetCaps()
		r.need(u.RateN != 0 || u.RatePeriodMs != 0 || u.RateBurst != 0, Level5, "rate")
		r.need(u.MaxClass != pb.Class_CLASS_UNSPECIFIED && u.MaxClass != pb.Class_NORMAL, Level2, "max_class "+className(u.MaxClass))
		r.need(u.AllowDeadlines, Level2, "allow_deadlines")
		r.need(c.GetMaxRunningCritical() != 0, Level2, "cap_critical")
		r.need(c.GetMaxRunningHigh() != 0, Level2, "cap_high")
		r.need(c.GetMaxRunningDeadline() != 0, Level2, "deadline_cap")
		r.need(u.ExportMetrics, Level2, "export_metrics")
		r.need(u.GroupCap != 0, Level4, "group_cap")
		r.need(u.GroupOrder == pb.GroupOrder_GROUP_FAIR, Level4, "group_order fair")
		r.need(u.MaxGroups != 0, Level4, "max_groups")
	case *clusterpb.Command_Finished:
		r.need(cmd.Finished.Outcome == pb.Outcome_SNOOZED, Level7, "outcome snoozed")
		r.need(cmd.Finished.Outcome == pb.Outcome_UNKNOWN_KIND, Level8, "outcome unknown_kind")
	case *clusterpb.Command_WebhookSet:
		r.need(true, Level3, "webhook set")
		for _, n := range cmd.WebhookSet.Kinds {
			k, ok := ParseEventKind(n)
			r.need(ok && k > EvTimedOut, Level5, "webhook kind "+n)
			r.need(n == WebhookAllKinds, Level7, "webhook kinds "+n)
			r.need(ok && k.ScheduleEvent(), Level8, "webhook kind "+n)
		}
	case *clusterpb.Command_WebhookDelete:
		r.need(true, Level3, "webhook delete")
	case *clusterpb.Command_WebhookAck:
		r.need(true, Level3, "webhook ack")
	case *clusterpb.Command_WebhookReplay:
		r.need(true, Level3, "webhook replay")
	case *clusterpb.Command_SetGroup:
		g := cmd.SetGroup
		r.need(true, Level4, "SetGroup")
		r.need(g.SetRate || g.RateN != 0 || g.RatePeriodMs != 0 || g.RateBurst != 0, Level5, "group rate")
	case *clusterpb.Command_Pause:
		if cmd.Pause.Resume {
			r.need(true, Level5, "resume")
		} else {
			r.need(true, Level5, "pause")
		}
	case *clusterpb.Command_SetConfig:
		p := cmd.SetConfig.GetConfig()
		e := p.GetEstimate()
		r.need(e != pb.Estimate_ESTIMATE_UNSPECIFIED && e != pb.Estimate_SUBMITTED, Level2, "estimate=auto")
		d := p.GetDefaultCostMs()
		r.need(d != 0 && d != sfq.DefaultCostMs, Level2, "default_cost")
		r.need(p.GetSubmitRateN() != 0, Level5, "submit_rate")
		l, what := deadLetterLevel(p)
		r.need(l > Level1, l, what)
		l, what = quotasLevel(p)
		r.need(l > Level1, l, what)
		l, what = poolsConfigLevel(p)
		r.need(l > Level1, l, what)
		r.need(p.GetMaxSnoozes() != 0 && p.GetMaxSnoozes() != sfq.DefaultMaxSnoozes, Level7, "max_snoozes")
		l, what = clockTickLevel(p)
		r.need(l > Level1, l, what)
		l, what = level8ConfigLevel(p)
		r.need(l > Level1, l, what)
		m := p.GetMaxSchedules()
		r.need(m != 0 && m != DefaultMaxSchedules, Level8, "max_schedules")
		l, what = resourceConfigLevel(p)
		r.need(l > Level1, l, what)
	case *clusterpb.Command_Redrive:
		r.need(true, Level5, "Redrive")
	case *clusterpb.Command_CancelJobs:
		r.need(true, Level5, "CancelJobs")
	case *clusterpb.Command_Purge:
		r.need(true, Level5, "Purge")
	}
	return r.level, r.what
}

// levelNeed gathers what a command needs: the highest level of its
// fields, and the first field named at that level.
type levelNeed struct {
	level uint32
	what  string
}

// need records that the command needs level for what, when it holds.
func (r *levelNeed) need(holds bool, level uint32, what string) {
	if holds && level > r.level {
		r.level, r.what = level, what
	}
}

// ConfigAtLevel resets, in p, the settings a cluster at feature level
// level does not allow to their defaults at that level (below level 2 the
// estimate settings, below level 5 the submit rate, below level 6 the
// quotas by default).
func ConfigAtLevel(p *pb.SchedulerConfig, level uint32) {
	if level < Level8 {
		p.EventRetentionPerTenant, p.MaxWorkerRecords, p.MaxSchedules = 0, 0, DefaultMaxSchedules
		p.ResourceReserveAfterMs, p.MaxResources = nil, 0
	}
	if level < Level7 {
		p.ClockTickMs, p.MaxSnoozes, p.MaxTotalQueuedBytes = 0, 0, 0
	}
	if level < Level6 {
		p.DefaultMaxQueued, p.MaxQueuedBytes = 0, 0
		p.MaxPools, p.ImplicitTenants, p.DefaultTenant = 0, pb.Tier_TIER_UNSPECIFIED, ""
	}
	if level < Level5 {
		p.SubmitRateN, p.SubmitRatePeriodMs, p.SubmitBurst = 0, 0, 0
	}
	if level < Level2 {
		def := ConfigToPB(DefaultConfig())
		p.Estimate, p.DefaultCostMs = def.Estimate, def.DefaultCostMs
	}
}

func className(c pb.Class) string {
	if k, err := ClassFromPB(c); err == nil {
		return k.String()
	}
	return c.String()
}

// LevelMessage is the refusal of what, which needs level need, in a
// cluster at level have.
func LevelMessage(what string, need, have uint32) string {
	return fmt.Sprintf("%s needs cluster feature level %d; the cluster is at level %d until every voter runs a build that understands level %d (docs/operations.md, \"Upgrades\")",
		what, need, have, need)
}

// CheckLevel refuses a command that needs a feature level above have, with
// the message of LevelMessage. At MaxFeatureLevel nothing of this build
// needs more: it returns at once, without naming what a command needs (a
// name may cost an allocation, as "pool gpu" of every dispatch in a pool
// other than default does).
func CheckLevel(c *clusterpb.Command, have uint32) error {
	if have >= MaxFeatureLevel {
		return nil
	}
	if need, what := RequiredLevel(c); need > have {
		return &Refusal{Code: FailedPrecondition, Reason: text.ReasonFeatureLevel, Msg: LevelMessage(what, need, have)}
	}
	return nil
}

// Level returns the cluster's feature level as of the last applied entry.
func (f *FSM) Level() uint32 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.level
}

// setLevel sets the level and what follows from it in the core.
func (f *FSM) setLevel(l uint32) {
	f.level = l
	f.sched.SetVersion1(l < Level2)
}

// NewLatest returns an empty state machine at MaxFeatureLevel, as a new
// cluster's first leader makes it: for tools and tests that start from
// nothing (scenarios, benchmarks). A node, and the replay of a data
// directory, start from New: a log that never raised the level is at
// Level1.
func NewLatest() *FSM { return NewAtLevel(MaxFeatureLevel) }

// NewAtLevel returns an empty state machine at feature level l (at most
// MaxFeatureLevel), as a new cluster's first leader makes it while some
// voter understands no higher level.
func NewAtLevel(l uint32) *FSM {
	f := New()
	f.setLevel(min(max(l, Level1), MaxFeatureLevel))
	if f.level >= Level6 {
		// A new cluster at this level starts with the quotas by default.
		f.cfg.DefaultMaxQueued, f.cfg.MaxQueuedBytes = DefaultMaxQueued, DefaultMaxQueuedBytes
	}
	if f.level >= Level7 {
		f.cfg.MaxTotalQueuedBytes = DefaultMaxTotalQueuedBytes // and the cluster's bound
	}
	if f.level >= Level8 {
		f.cfg.EventRetentionPerTenant, f.cfg.MaxWorkerRecords = DefaultEventRetentionPerTenant, DefaultMaxWorkerRecords
	}
	return f
}

func (f *FSM) applySetFeatureLevel(c *clusterpb.SetFeatureLevel) Result {
	switch {
	case c.Level > MaxFeatureLevel:
		// Every voter said it understands the level; this node does not
		// (it runs an older build than it reported, or is no voter). It
		// must not go on without it.
		f.latch(fmt.Errorf("%w %d (this build understands up to %d): upgrade this node", ErrFeatureLevel, c.Level, MaxFeatureLevel))
		return refusef(FailedPrecondition, "", "feature level %d is unknown to this build", c.Level)
	case c.Level <= f.level:
		return Result{Outcome: sfq.Duplicate}
	}
	f.setLevel(c.Level)
	return Result{Outcome: sfq.Changed, Count: uint64(c.Level)}
}

// fitsLevel checks that the state holds nothing its level cannot (below
// Level5 nothing of its levers; below Level4 nothing of groups; below Level3 no webhooks; at Level1 nothing
// the version 1 encoding would leave out).
func (f *FSM) fitsLevel() error {
	if f.level < Level7 && f.cfg.ClockTickMs != DefaultClockTickMs {
		return fmt.Errorf("%w: at feature level %d the configuration holds a clock_tick of %d ms", sfq.ErrVerify, f.level, f.cfg.ClockTickMs)
	}
	if f.level < Level6 && (f.sched.Peek().UsesPools() || f.cfg.Pools.uses()) {
		return fmt.Errorf("%w: at feature level %d the state holds pools or pool settings", sfq.ErrVerify, f.level)
	}
	if f.level < Level7 && f.sched.Peek().UsesRunDetails() {
		return fmt.Errorf("%w: at feature level %d the state holds a run's CPU source or failure", sfq.ErrVerify, f.level)
	}
	if f.level < Level5 {
		if err := f.sched.Peek().FitsVersion4(); err != nil {
			return fmt.Errorf("%w: at feature level %d the state holds %v", sfq.ErrVerify, f.level, err)
		}
		if f.cfg.usesLevers() {
			return fmt.Errorf("%w: at feature level %d the configuration holds settings of level 5", sfq.ErrVerify, f.level)
		}
	}
	if f.level < Level4 {
		if err := f.sched.Peek().FitsVersion3(); err != nil {
			return fmt.Errorf("%w: at feature level %d the state holds %v", sfq.ErrVerify, f.level, err)
		}
	}
	if f.level < Level3 && (f.whSerial != 0 || len(f.webhooks) > 0) {
		return fmt.Errorf("%w: at feature level %d the state holds webhooks", sfq.ErrVerify, f.level)
	}
	if f.level < Level8 && (f.cfg.EventRetentionPerTenant != 0 || f.cfg.MaxWorkerRecords != 0 || len(f.kept) > 0) {
		return fmt.Errorf("%w: at feature level %d the state holds settings or kept events of level 8", sfq.ErrVerify, f.level)
	}
	runs := false
	for _, w := range f.workers {
		runs = runs || w.Runs != nil
	}
	if f.level < Level8 && (f.schedSerial > 0 || f.cfg.MaxSchedules != DefaultMaxSchedules) {
		return fmt.Errorf("%w: at feature level %d the state holds schedules or max_schedules", sfq.ErrVerify, f.level)
	}
	if f.level < Level8 && f.sched.Peek().UsesResources() {
		return fmt.Errorf("%w: at feature level %d the state holds resources (declared, used by a job, or their settings)", sfq.ErrVerify, f.level)
	}
	if f.level < Level8 && (len(f.policies) > 0 || runs || f.sched.Peek().UsesForms()) {
		return fmt.Errorf("%w: at feature level %d the state holds kinds (the forms of jobs, what workers run, or retry policies)", sfq.ErrVerify, f.level)
	}
	if f.level >= Level2 {
		return nil
	}
	if err := f.sched.Peek().FitsVersion1(); err != nil {
		return fmt.Errorf("%w: at feature level %d the state holds %v", sfq.ErrVerify, f.level, err)
	}
	if len(f.exported) > 0 || f.tierCarry != [sfq.NumTiers]Counters{} {
		return fmt.Errorf("%w: at feature level %d the state holds export_metrics marks or tier carries", sfq.ErrVerify, f.level)
	}
	return nil
}
