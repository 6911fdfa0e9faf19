package scenario

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// Machine runs scripts through the replicated state machine: each line
// becomes a command in its own envelope, stamped with the script's time,
// and goes through the same Apply as a Raft log entry.
type Machine struct {
	F      *fsm.FSM
	index  uint64
	credit uint64
	// Entries, when Record is set, collects every entry applied, in
	// order, as the log of a cluster that ran the script would hold it
	// (index i at Entries[i-1]), from a state machine at DefaultLevel.
	Record  bool
	Entries []*clusterpb.Envelope
}

// DefaultLevel is the feature level a script starts at: level 3, what
// the build before groups holds, so that a script written for it gives
// the same state and hash. "level 4" (groups) raises it.
const DefaultLevel = fsm.Level3

// NewMachine returns a Machine over a fresh state machine at DefaultLevel.
func NewMachine() *Machine { return &Machine{F: fsm.NewAtLevel(DefaultLevel)} }

// SetLevel implements Target: a SetFeatureLevel entry.
func (m *Machine) SetLevel(now sfq.Time, level uint32) error {
	_, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_SetFeatureLevel{SetFeatureLevel: &clusterpb.SetFeatureLevel{Level: level}}})
	return err
}

func (m *Machine) apply(now sfq.Time, c *clusterpb.Command) (fsm.Result, error) {
	m.index++
	env := &clusterpb.Envelope{Version: fsm.Version, StampMs: int64(now), Commands: []*clusterpb.Command{c}}
	if m.Record {
		m.Entries = append(m.Entries, env)
	}
	res, err := m.F.ApplyEnvelope(m.index, env)
	if err != nil {
		return fsm.Result{}, err
	}
	return res[0], res[0].Err()
}

// SetConfig implements Target.
func (m *Machine) SetConfig(now sfq.Time, cfg sfq.Config) error {
	full := m.F.Config()
	full.Sched = cfg
	if full.SelfKillAfterMs >= cfg.LeaseTimeoutMs {
		// Keep the runtime timeouts below a lease the script shortened.
		full.SelfKillAfterMs = cfg.LeaseTimeoutMs * 5 / 6
		full.HeartbeatIntervalMs = min(full.HeartbeatIntervalMs, full.SelfKillAfterMs/5)
	}
	_, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: fsm.ConfigToPB(full)}}})
	return err
}

// Config implements Target.
func (m *Machine) Config() sfq.Config { return m.F.Config().Sched }

// UpsertTenant implements Target.
func (m *Machine) UpsertTenant(now sfq.Time, spec sfq.TenantSpec) error {
	_, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: fsm.TenantSpecToPB(spec)}})
	return err
}

// Tenant implements Target.
func (m *Machine) Tenant(name string) (spec sfq.TenantSpec, ok bool) {
	m.F.Read(func(s *sfq.Scheduler) {
		var t sfq.Tenant
		t, ok = s.Tenant(name)
		spec = t.TenantSpec
	})
	return spec, ok
}

// TenantState implements Target.
func (m *Machine) TenantState(name string, c sfq.Class) (t sfq.Tenant, vnow sfq.VirtualTime, ok bool) {
	m.F.Read(func(s *sfq.Scheduler) {
		t, ok = s.Tenant(name)
		vnow = s.ClassVirtualNow(c)
	})
	return t, vnow, ok
}

// Explain implements Target.
func (m *Machine) Explain(id sfq.JobID) (sfq.Reason, error) {
	r, _, err := m.F.Explain(id)
	return r, err
}

// Place implements Target: the state machine's read, at its clock.
func (m *Machine) Place(_ sfq.Time, id sfq.JobID) (sfq.Place, bool, error) {
	pl, ok, err := m.F.Place(id, placeLimit)
	return pl.Place, ok, err
}

// Estimate implements Target.
func (m *Machine) Estimate(tenant, typ string) (st sfq.TypeStat, ok bool) {
	m.F.Read(func(s *sfq.Scheduler) { st, ok = s.Estimate(tenant, typ) })
	return st, ok
}

// DeleteTenant implements Target.
func (m *Machine) DeleteTenant(now sfq.Time, name string) error {
	_, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_TenantDelete{TenantDelete: &clusterpb.TenantDelete{Name: name}}})
	return err
}

// Submit implements Target.
func (m *Machine) Submit(now sfq.Time, sub sfq.Submission) (sfq.JobID, error) {
	r, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: submitJob(sub)}})
	return r.Job, err
}

// submitJob is the command of a submission.
func submitJob(sub sfq.Submission) *clusterpb.SubmitJob {
	c := &clusterpb.SubmitJob{
		Tenant: sub.Tenant, IdempotencyKey: sub.Key, JobType: sub.Type, Size: fsm.SizeToPB(sub.Size),
		EstCostMs: sub.EstCostMs, Payload: []byte(sub.Payload), MaxAttempts: sub.MaxAttempts, TimeoutMs: sub.TimeoutMs,
		JobClass: fsm.ClassToPB(sub.Class), DeadlineMs: sub.DeadlineMs, Group: sub.Group,
		DelayMs: sub.DelayMs, ExpireMs: sub.ExpireMs, Pool: sub.Pool, Form: fsm.JobFormToPB(sub.Form),
		Uses: fsm.UsesToPB(sub.Uses)}
	if sub.RetryBackoffSet {
		c.RetryBackoffMs = &sub.RetryBackoffMs
	}
	return c
}

// SetGroup implements Target.
func (m *Machine) SetGroup(now sfq.Time, tenant, group string, admin sfq.GroupCap, own uint32, asTenant bool) error {
	c := &clusterpb.SetGroup{Tenant: tenant, Group: group, AsTenant: asTenant}
	if asTenant {
		c.CapKind, c.Limit = clusterpb.GroupCapKind_GROUP_CAP_NONE, 0
		if own != 0 {
			c.CapKind, c.Limit = clusterpb.GroupCapKind_GROUP_CAP_LIMIT, own
		}
	} else {
		c.CapKind, c.Limit = fsm.GroupCapToPB(admin)
	}
	_, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_SetGroup{SetGroup: c}})
	return err
}

// SetGroupRate implements Target.
func (m *Machine) SetGroupRate(now sfq.Time, tenant, group string, r sfq.RateLimit) error {
	_, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_SetGroup{SetGroup: &clusterpb.SetGroup{Tenant: tenant, Group: group, SetRate: true,
		RateN: r.N, RatePeriodMs: r.PeriodMs, RateBurst: r.Burst}}})
	return err
}

// Pause implements Target.
func (m *Machine) Pause(now sfq.Time, tenant, group string, all, resume bool) error {
	_, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_Pause{Pause: &clusterpb.Pause{Tenant: tenant, Group: group, All: all, Resume: resume}}})
	return err
}

// Group implements Target.
func (m *Machine) Group(tenant, group string) (g sfq.Group, ok bool) {
	m.F.Read(func(s *sfq.Scheduler) { g, ok = s.Group(tenant, group) })
	return g, ok
}

// Dispatch implements Target.
func (m *Machine) Dispatch(now sfq.Time, pool string, size sfq.Size, worker string) (sfq.Assignment, bool, error) {
	m.credit++
	r, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: worker, Size: fsm.SizeToPB(size), Credit: m.credit,
		Pool: pool}}})
	if err != nil || !r.Assigned {
		return sfq.Assignment{}, false, err
	}
	j, _ := m.Job(r.Job)
	return sfq.Assignment{Job: j.ID, Tenant: j.Tenant, Size: j.Size, Attempt: j.Attempt, Start: j.StartTag, Weight: j.Weight}, true, nil
}

// Job implements Target.
func (m *Machine) Job(id sfq.JobID) (j sfq.Job, ok bool) {
	m.F.Read(func(s *sfq.Scheduler) { j, ok = s.Job(id) })
	return j, ok
}

// TenantName implements Target.
func (m *Machine) TenantName(i uint32) (name string) {
	m.F.Read(func(s *sfq.Scheduler) { name = s.TenantName(i) })
	return name
}

// Start implements Target.
func (m *Machine) Start(now sfq.Time, id sfq.JobID, attempt uint32, worker string) error {
	_, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_Started{Started: &clusterpb.Started{Job: uint64(id), Attempt: attempt, WorkerId: worker}}})
	return err
}

// Heartbeat implements Target.
func (m *Machine) Heartbeat(now sfq.Time, id sfq.JobID, attempt uint32, worker string, cpuMs int64) error {
	r, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_Heartbeats{Heartbeats: &clusterpb.HeartbeatBatch{Heartbeats: []*clusterpb.Heartbeat{
		{Job: uint64(id), Attempt: attempt, WorkerId: worker, CpuMs: cpuMs}}}}})
	if err == nil && len(r.HeartbeatOutcomes) == 1 {
		if o := r.HeartbeatOutcomes[0]; o != sfq.Changed && o != sfq.Duplicate {
			return &fsm.Refusal{Code: fsm.FailedPrecondition, Msg: fmt.Sprintf("heartbeat of job %d (attempt %d, worker %q) is %s", id, attempt, worker, o)}
		}
	}
	return err
}

// Finish implements Target.
func (m *Machine) Finish(now sfq.Time, id sfq.JobID, attempt uint32, worker string, outcome sfq.FinishOutcome, cpuMs int64, permanent bool, snoozeMs int64) error {
	if permanent && m.F.Level() < fsm.Level6 {
		// As the leader would: the mark means nothing below level 6.
		return &fsm.Refusal{Code: fsm.FailedPrecondition, Msg: fsm.LevelMessage("permanent", fsm.Level6, m.F.Level())}
	}
	_, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{
		Job: uint64(id), Attempt: attempt, WorkerId: worker, Outcome: fsm.OutcomeToPB(outcome), CpuMs: cpuMs, Permanent: permanent, SnoozeMs: snoozeMs}}})
	return err
}

// Cancel implements Target.
func (m *Machine) Cancel(now sfq.Time, id sfq.JobID) error {
	_, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Job: uint64(id)}}})
	return err
}

// Expire implements Target.
func (m *Machine) Expire(now sfq.Time, id sfq.JobID, attempt uint32, kind sfq.InputKind) error {
	k := map[sfq.InputKind]clusterpb.ExpireKind{sfq.InExpireAck: clusterpb.ExpireKind_ACK, sfq.InExpireLease: clusterpb.ExpireKind_LEASE, sfq.InExpireTimeout: clusterpb.ExpireKind_TIMEOUT,
		sfq.InExpireTTL: clusterpb.ExpireKind_TTL}[kind]
	_, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_Expire{Expire: &clusterpb.Expire{Job: uint64(id), Attempt: attempt, Kind: k}}})
	return err
}

// Release implements Target: a Release of one job.
func (m *Machine) Release(now sfq.Time, id sfq.JobID) error {
	_, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_Release{Release: &clusterpb.Release{Jobs: []uint64{uint64(id)}}}})
	return err
}

// Redrive implements Target: one Redrive entry per run of jobs of one
// tenant; a skipped job is an error naming it and the reason.
func (m *Machine) Redrive(now sfq.Time, ids []sfq.JobID) error {
	var errs []error
	for len(ids) > 0 {
		var tenant string
		m.F.Read(func(s *sfq.Scheduler) {
			if j, ok := s.Job(ids[0]); ok {
				tenant = s.TenantName(j.Tenant)
			}
		})
		if tenant == "" {
			errs = append(errs, fmt.Errorf("job %d: not found", ids[0]))
			ids = ids[1:]
			continue
		}
		c := &clusterpb.BulkJobs{Tenant: tenant}
		for len(ids) > 0 {
			var same bool
			m.F.Read(func(s *sfq.Scheduler) { _, same = s.TenantJob(tenant, ids[0]) })
			if !same {
				break
			}
			c.Jobs = append(c.Jobs, uint64(ids[0]))
			ids = ids[1:]
		}
		res, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_Redrive{Redrive: c}})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, it := range res.Bulk.Items {
			if !it.Done {
				errs = append(errs, fmt.Errorf("job %d: %s", it.Job, it.Reason))
			}
		}
	}
	return errors.Join(errs...)
}

// Check implements Target.
func (m *Machine) Check() error { return m.F.Verify() }

// Hash implements Target.
func (m *Machine) Hash() []byte {
	h, _ := m.F.Hash()
	return h[:]
}

// SetPool implements Target.
func (m *Machine) SetPool(now sfq.Time, name string, weights *string, required *bool) error {
	_, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_PoolSet{PoolSet: &clusterpb.PoolSet{Name: name, Weights: weights, SubscriptionsRequired: required}}})
	return err
}

// DeletePool implements Target.
func (m *Machine) DeletePool(now sfq.Time, name string) error {
	_, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_PoolDelete{PoolDelete: &clusterpb.PoolDelete{Name: name}}})
	return err
}

// SetSubscription implements Target.
func (m *Machine) SetSubscription(now sfq.Time, tenant, pool string, burst *uint32) error {
	_, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_SubscriptionSet{SubscriptionSet: &clusterpb.SubscriptionSet{Tenant: tenant, Pool: pool, Burst: burst}}})
	return err
}

// PausePool implements Target.
func (m *Machine) PausePool(now sfq.Time, pool string, resume bool) error {
	_, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_Pause{Pause: &clusterpb.Pause{Pool: pool, Resume: resume}}})
	return err
}

// SetPoolSetting implements Target: a SetConfig with the setting changed.
func (m *Machine) SetPoolSetting(now sfq.Time, key, value string) error {
	p := fsm.ConfigToPB(m.F.Config())
	switch key {
	case "max_pools":
		n, err := strconv.ParseUint(value, 10, 32)
		if err != nil {
			return fmt.Errorf("bad max_pools %q: want a whole number (0: the default)", value)
		}
		p.MaxPools = uint32(n)
	case "implicit_tenants":
		p.ImplicitTenants = pb.Tier_TIER_UNSPECIFIED
		if value != "off" {
			t, err := sfq.ParseTier(value)
			if err != nil {
				return fmt.Errorf("bad implicit_tenants %q: want off or a tier", value)
			}
			p.ImplicitTenants = fsm.TierToPB(t)
		}
	case "default_tenant":
		if value == "none" {
			value = ""
		}
		p.DefaultTenant = value
	case "clock_tick":
		ms, err := durationMs(key, value)
		if err != nil {
			return err
		}
		p.ClockTickMs = ms
	case "event_retention_per_tenant", "max_worker_records":
		n, err := strconv.ParseUint(value, 10, 64)
		if err != nil {
			return fmt.Errorf("bad %s %q: want a whole number (0: none)", key, value)
		}
		if key == "max_worker_records" {
			p.MaxWorkerRecords = n
		} else {
			p.EventRetentionPerTenant = n
		}
	default:
		return fmt.Errorf("unknown pool setting %q", key)
	}
	_, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: p}}})
	return err
}

// Pool implements Target.
func (m *Machine) Pool(name string) (p sfq.Pool, ok bool) {
	m.F.Read(func(s *sfq.Scheduler) { p, ok = s.Pool(name) })
	return p, ok
}

// LaneState implements Target.
func (m *Machine) LaneState(tenant, pool string, c sfq.Class) (t sfq.Tenant, vnow sfq.VirtualTime, burst uint32, subscribed, ok bool) {
	m.F.Read(func(s *sfq.Scheduler) { t, vnow, burst, subscribed, ok = laneState(s, tenant, pool, c) })
	return t, vnow, burst, subscribed, ok
}

// Connect implements Target: a WorkerHello.
func (m *Machine) Connect(now sfq.Time, h Hello) error {
	c := &clusterpb.WorkerHello{WorkerId: h.Worker, Size: fsm.SizeToPB(h.Size), Pool: h.Pool, Says: h.Says, Commands: h.Commands, Kinds: h.Kinds}
	for _, x := range h.Holds {
		c.Holds = append(c.Holds, &clusterpb.HeldJob{Job: uint64(x.Job), Attempt: x.Attempt})
	}
	_, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_WorkerHello{WorkerHello: c}})
	return err
}

// WorkerState implements Target: the worker's record, and the run it
// holds while that run is live on it.
func (m *Machine) WorkerState(id string) (WorkerState, bool) {
	w, ok := m.F.Worker(id)
	if !ok {
		return WorkerState{}, false
	}
	st := WorkerState{Size: w.Size, Pool: w.Pool, Runs: w.Runs}
	m.F.Read(func(s *sfq.Scheduler) {
		if j, ok := s.Job(w.Job); ok && w.Job != 0 && j.HeldBy(w.ID, w.Attempt) {
			st.Job, st.Attempt = w.Job, w.Attempt
		}
	})
	return st, true
}

// SetKindPolicy implements Target: a KindPolicySet.
func (m *Machine) SetKindPolicy(now sfq.Time, tenant string, p fsm.KindPolicy, remove bool) error {
	c := &clusterpb.KindPolicySet{Tenant: tenant, Kind: p.Kind, Remove: remove, MaxAttempts: p.MaxAttempts, RetryBackoffMaxMs: p.RetryBackoffMaxMs, TimeoutMs: p.TimeoutMs}
	if p.RetryBackoffMs >= 0 {
		c.RetryBackoffMs = &p.RetryBackoffMs
	}
	_, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_KindPolicySet{KindPolicySet: c}})
	return err
}

// KindPolicy implements Target.
func (m *Machine) KindPolicy(tenant, kind string) (fsm.KindPolicy, bool) {
	for _, p := range m.F.KindPolicies(tenant, false) {
		if p.Kind == kind {
			return p.KindPolicy, true
		}
	}
	return fsm.KindPolicy{}, false
}
