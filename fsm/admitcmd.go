package fsm

import (
	"fmt"

	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// The checks of the commands the edge pre-checks, besides submits
// (admit.go): each is the read-only first half of its applyX, which
// calls it first. CheckFields is what of them needs no state (every node
// makes it before it forwards a command); Admit is the whole check, on
// the state as it stands (the leader makes it before it proposes).

// CheckFields refuses what of a command no state can make right: the
// rules of its Apply that read only the command (names, enums, ranges)
// and the configuration (a submit's payload limit), with Apply's
// messages. nil when it passes, or when the command has no such rule.
// It checks a command as the leader gets it: a tenant upsert that keeps
// settings and a webhook set without a URL as sent, which below Level7
// the leader resolves on its state (Resolve) before Admit and Apply read
// them in their level's meaning.
func CheckFields(c *clusterpb.Command, cfg Config, level uint32) *Refusal {
	if c.GetWebhookSet() == nil && c.GetTenantUpsert() == nil {
		c = normalize(c, level)
		if r := frozenRefusal(c, level); r != nil {
			return r
		}
	}
	var err error
	switch cmd := c.GetCmd().(type) {
	case *clusterpb.Command_Submit:
		_, r := SubmitFields(cmd.Submit, cfg, level)
		return r
	case *clusterpb.Command_TenantUpsert:
		err = tenantFieldsOnly(cmd.TenantUpsert)
	case *clusterpb.Command_SetGroup:
		_, r := groupSettings(cmd.SetGroup, sfq.GroupSettings{})
		if r.Refused() {
			return r.Refusal()
		}
	case *clusterpb.Command_WebhookSet:
		_, r := webhookFields(cmd.WebhookSet)
		if r.Refused() {
			return r.Refusal()
		}
	case *clusterpb.Command_PoolSet:
		_, err = poolSpec(cmd.PoolSet, sfq.PoolSpec{Name: cmd.PoolSet.Name})
	case *clusterpb.Command_Finished:
		err = finishedFields(cmd.Finished, level)
	case *clusterpb.Command_ScheduleSet:
		if _, r := scheduleRecord(cmd.ScheduleSet, cfg, level); r.Refused() {
			return r.Refusal()
		}
	case *clusterpb.Command_ResourceSet:
		if _, r := resourceFields(cmd.ResourceSet); r.Refused() {
			return r.Refusal()
		}
	case *clusterpb.Command_ScheduleRunNow:
		err = validKeyPart("key", "key", cmd.ScheduleRunNow.Key, MaxRunKeyLen)
	}
	if op, args, ok := BulkOf(c); ok {
		err = ValidateBulk(op, args)
	}
	if err != nil {
		return sfq.RefusalOf(err)
	}
	return nil
}

// Admit gives a command the verdict its Apply would give it on the state
// as it stands, changing nothing: its refusal, or OK — with Outcome
// sfq.Duplicate when Apply would change nothing (a pause of a paused
// tenant, a group set to what it is, a cancel already requested), so
// that the leader answers it without an entry. A command without a check
// of its own is OK. For a submit it is AdmitSubmits of one. It holds the
// read lock.
func (f *FSM) Admit(c *clusterpb.Command) Result {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if err := CheckLevel(c, f.level); err != nil {
		return refused(err.(*Refusal))
	}
	c = normalize(c, f.level)
	if r := frozenRefusal(c, f.level); r != nil {
		return refused(r)
	}
	if op, args, ok := BulkOf(c); ok {
		return f.checkBulk(op, args)
	}
	switch cmd := c.GetCmd().(type) {
	case *clusterpb.Command_Submit:
		tenant := cmd.Submit.Tenant
		_, r := f.checkSubmit(cmd.Submit, nil)
		cmd.Submit.Tenant = tenant // the check's default tenant is Apply's to set
		return r
	case *clusterpb.Command_TenantUpsert:
		return verdict(f.checkTenantUpsert(cmd.TenantUpsert))
	case *clusterpb.Command_TenantDelete:
		return f.checkTenantDelete(cmd.TenantDelete)
	case *clusterpb.Command_SetGroup:
		return verdict(f.checkSetGroup(cmd.SetGroup))
	case *clusterpb.Command_Pause:
		return f.checkPause(cmd.Pause)
	case *clusterpb.Command_Cancel:
		return f.checkCancel(cmd.Cancel)
	case *clusterpb.Command_WebhookSet:
		return verdict(f.checkWebhookSet(cmd.WebhookSet))
	case *clusterpb.Command_WebhookDelete:
		return verdict(f.tenantWebhook(cmd.WebhookDelete.Tenant))
	case *clusterpb.Command_PoolSet:
		return verdict(f.checkPoolSet(cmd.PoolSet))
	case *clusterpb.Command_PoolDelete:
		return f.checkPoolDelete(cmd.PoolDelete)
	case *clusterpb.Command_SubscriptionSet:
		return f.checkSubscription(cmd.SubscriptionSet)
	case *clusterpb.Command_WorkerDrain:
		return f.checkWorkerDrain(cmd.WorkerDrain)
	case *clusterpb.Command_WorkerHello:
		return verdict(f.checkWorkerHello(cmd.WorkerHello))
	case *clusterpb.Command_KindPolicySet:
		return verdict(f.checkKindPolicySet(cmd.KindPolicySet))
	case *clusterpb.Command_ScheduleSet:
		return verdict(f.checkScheduleSet(cmd.ScheduleSet))
	case *clusterpb.Command_ScheduleDelete:
		return verdict(f.checkScheduleDelete(cmd.ScheduleDelete))
	case *clusterpb.Command_SchedulePause:
		return verdict(f.checkSchedulePause(cmd.SchedulePause))
	case *clusterpb.Command_ScheduleFire:
		return verdict(f.checkScheduleFire(cmd.ScheduleFire))
	case *clusterpb.Command_ScheduleMiss:
		return verdict(f.checkScheduleMiss(cmd.ScheduleMiss))
	case *clusterpb.Command_ScheduleRunNow:
		return verdict(f.checkScheduleRunNow(cmd.ScheduleRunNow))
	case *clusterpb.Command_ResourceSet:
		return verdict(f.checkResourceSet(cmd.ResourceSet))
	case *clusterpb.Command_ResourceDelete:
		return f.checkResourceDelete(cmd.ResourceDelete)
	case *clusterpb.Command_Started:
		c := cmd.Started
		if _, err := f.sched.CheckEvent(f.clock, sfq.JobID(c.Job), sfq.Input{Kind: sfq.InStart, Attempt: c.Attempt, Worker: c.WorkerId}); err != nil {
			return refuse(err)
		}
	case *clusterpb.Command_Finished:
		return f.checkFinished(cmd.Finished)
	}
	return Result{}
}

// verdict is the result of a check that also returns what its Apply
// takes from it.
func verdict[T any](_ T, r Result) Result { return r }

// duplicate is the verdict of a command that would change nothing.
func duplicate(tenant string) Result { return Result{Outcome: sfq.Duplicate, Tenant: tenant} }

// tenantSpec converts an upsert and checks it (sfq.TenantSpec.Validate).
func tenantSpec(c *clusterpb.TenantUpsert) (sfq.TenantSpec, error) {
	spec, err := TenantSpecFromPB(c)
	if err != nil {
		return spec, err
	}
	return spec, spec.Validate()
}

// checkTenantDelete is the check of a tenant delete: the tenant exists
// and holds no scheduled, queued or running job.
func (f *FSM) checkTenantDelete(c *clusterpb.TenantDelete) Result {
	if err := f.sched.CheckDeleteTenant(c.Name); err != nil {
		return refuse(err)
	}
	return Result{}
}

// groupSettings applies a SetGroup to a group's settings set: the
// admin's cap or rate, or (as_tenant) the tenant's own cap. It checks
// what needs no state.
func groupSettings(c *clusterpb.SetGroup, set sfq.GroupSettings) (sfq.GroupSettings, Result) {
	if err := sfq.ValidateGroupName(c.Group); err != nil {
		return set, refuse(err)
	}
	if c.SetRate {
		if c.AsTenant {
			return set, refusef(PermissionDenied, "rate", "a group's rate limit is set by an admin")
		}
		set.Rate = sfq.RateLimit{N: c.RateN, PeriodMs: c.RatePeriodMs, Burst: c.RateBurst}
		if err := set.Rate.Validate("rate"); err != nil {
			return set, refuse(err)
		}
	}
	if !c.SetRate || c.CapKind != clusterpb.GroupCapKind_GROUP_CAP_UNSPECIFIED {
		if r := setGroupCap(&set, c); r.Refused() {
			return set, r
		}
	}
	if err := set.Validate(); err != nil {
		return set, refuse(err)
	}
	return set, Result{}
}

// checkSetGroup is the check of a SetGroup: the tenant, the name, the
// value and max_groups (sfq.CheckSetGroup). A SetGroup that would leave
// the group as it is is a duplicate.
func (f *FSM) checkSetGroup(c *clusterpb.SetGroup) (sfq.GroupSettings, Result) {
	set := sfq.GroupSettings{}
	if g, ok := f.sched.Group(c.Tenant, c.Group); ok {
		set = g.GroupSettings
	} else if _, ok := f.sched.TenantIndex(c.Tenant); !ok {
		if err := sfq.ValidateGroupName(c.Group); err != nil {
			return set, refuse(err)
		}
		return set, refuse(sfq.UnknownTenant(c.Tenant))
	}
	set, r := groupSettings(c, set)
	if r.Refused() {
		return set, r
	}
	changed, err := f.sched.CheckSetGroup(c.Tenant, c.Group, set)
	if err != nil {
		return set, refuse(err)
	}
	if !changed {
		return set, duplicate(c.Tenant)
	}
	return set, Result{Tenant: c.Tenant}
}

// checkPause is the check of a pause or resume: of all dispatch, a pool,
// a tenant or one of its groups. One that would change nothing is a
// duplicate.
func (f *FSM) checkPause(c *clusterpb.Pause) Result {
	var changed bool
	var err error
	switch {
	case c.Pool != "":
		if c.Tenant != "" || c.Group != "" || c.All {
			return refusef(Invalid, "", "a pause of a pool names no tenant, group or all")
		}
		if c.AsTenant {
			return refusef(PermissionDenied, "", "a pool is paused and resumed by an admin")
		}
		changed, err = f.sched.CheckPausePool(c.Pool, !c.Resume)
	case c.All:
		if c.Tenant != "" || c.Group != "" {
			return refusef(Invalid, "", "a pause of all dispatch names no tenant or group")
		}
		if c.AsTenant {
			return refusef(PermissionDenied, "", "all dispatch is paused and resumed by an admin")
		}
		changed = f.sched.DispatchPaused() == c.Resume
	default:
		if _, ok := f.sched.TenantIndex(c.Tenant); !ok {
			return refuse(sfq.UnknownTenant(c.Tenant))
		}
		if c.Group == "" {
			changed, err = f.sched.CheckPauseTenant(c.Tenant, !c.Resume, !c.AsTenant)
		} else {
			changed, err = f.sched.CheckPauseGroup(c.Tenant, c.Group, !c.Resume, !c.AsTenant)
		}
	}
	switch {
	case err != nil:
		return refuse(err)
	case !changed:
		return duplicate(c.Tenant)
	}
	return Result{Tenant: c.Tenant}
}

// checkCancel is the check of a cancel: the job is the tenant's and not
// ended. A cancel already requested (or already done) is a duplicate.
func (f *FSM) checkCancel(c *clusterpb.CancelJob) Result {
	j, ok := f.sched.TenantJob(c.Tenant, sfq.JobID(c.Job))
	if !ok {
		// The same answer for another tenant's job: ids cannot be probed.
		return refusef(NotFound, "", "job %d not found", c.Job)
	}
	switch out, err := f.sched.CheckEvent(f.clock, j.ID, sfq.Input{Kind: sfq.InCancel}); {
	case out == sfq.Invalid:
		r := refusef(FailedPrecondition, "", "job %d is already %s", c.Job, j.State)
		r.Job, r.Outcome, r.Tenant = j.ID, out, c.Tenant
		return r
	case err != nil:
		return refuse(err)
	case out == sfq.Duplicate:
		r := duplicate(c.Tenant)
		r.Job = j.ID
		return r
	}
	return Result{Job: j.ID, Tenant: c.Tenant}
}

// webhookFields checks what of a webhook set needs no state and comes
// from its caller (the leader adds the key's ID). A set that leaves the
// URL out keeps the endpoint's (checkWebhookSet: there must be one).
func webhookFields(c *clusterpb.WebhookSet) (uint32, Result) {
	if c.Url == "" {
		// Kept (checkWebhookSet).
	} else if err := ValidateWebhookURL(c.Url); err != nil {
		return 0, refusef(Invalid, "", "%v", err)
	}
	kinds, err := ParseWebhookKinds(c.Kinds)
	if err != nil {
		return 0, refusef(Invalid, "", "%v", err)
	}
	if c.GraceMs < 0 || c.GraceMs > MaxWebhookGraceMs {
		return 0, refusef(Invalid, "grace_ms", "%d, want 0..%d (30 days)", c.GraceMs, int64(MaxWebhookGraceMs))
	}
	return kinds, Result{}
}

// checkWebhookSet is the check of a webhook set: the tenant, the fields,
// and (without rotate) that its secret comes from the leader's key.
func (f *FSM) checkWebhookSet(c *clusterpb.WebhookSet) (uint32, Result) {
	ti, ok := f.sched.TenantIndex(c.Tenant)
	if !ok {
		return 0, refuse(sfq.UnknownTenant(c.Tenant))
	}
	kinds, r := webhookFields(c)
	if r.Refused() {
		return 0, r
	}
	if c.KeyId == 0 {
		return 0, refusef(Invalid, "key_id", "required (the leader sets it)")
	}
	i, found := f.webhookAt(ti)
	// What the set leaves out keeps its value (upsert.go).
	switch {
	case c.Url == "" && !found:
		return 0, refusef(Invalid, "url", "required to create the webhook of tenant %q", c.Tenant)
	case len(c.Kinds) == 0 && found && webhookKindsKept(f.level):
		kinds = f.webhooks[i].Kinds
	}
	if found && !c.Rotate && f.webhooks[i].KeyID != c.KeyId {
		return 0, refusef(FailedPrecondition, "", "the webhook secret of tenant %q was derived from another webhook key than the leader's: rotate it to issue one from this key", c.Tenant)
	}
	return kinds, Result{}
}

// poolSpec applies a PoolSet to a pool's spec (fields left out keep their
// value) and checks it.
func poolSpec(c *clusterpb.PoolSet, spec sfq.PoolSpec) (sfq.PoolSpec, error) {
	if err := sfq.ValidatePoolName(c.Name); err != nil {
		return spec, err
	}
	if c.Weights != nil {
		w, err := sfq.ParsePoolWeights(*c.Weights)
		if err != nil {
			return spec, fmt.Errorf("weights: %w", err)
		}
		spec.Weights = w
	}
	if c.SubscriptionsRequired != nil {
		spec.Required = *c.SubscriptionsRequired
	}
	return spec, spec.Validate()
}

// checkPoolSet is the check of a PoolSet: the name, the weights, and
// max_pools for a new pool.
func (f *FSM) checkPoolSet(c *clusterpb.PoolSet) (sfq.PoolSpec, Result) {
	spec := sfq.PoolSpec{Name: c.Name}
	if p, ok := f.sched.Pool(c.Name); ok {
		spec = p.PoolSpec
	}
	spec, err := poolSpec(c, spec)
	if err != nil {
		return spec, refuse(err)
	}
	if err := f.sched.CheckSetPool(spec, f.cfg.Pools.maxPools()); err != nil {
		return spec, refuse(err)
	}
	return spec, Result{}
}

// checkPoolDelete is the check of a PoolDelete (sfq.CheckDeletePool).
func (f *FSM) checkPoolDelete(c *clusterpb.PoolDelete) Result {
	if err := f.sched.CheckDeletePool(c.Name); err != nil {
		return refuse(err)
	}
	return Result{}
}

// checkSubscription is the check of a SubscriptionSet: the tenant and
// the pool exist; one that changes nothing is a duplicate.
func (f *FSM) checkSubscription(c *clusterpb.SubscriptionSet) Result {
	changed, err := f.sched.CheckSubscription(c.Tenant, c.Pool, c.Burst)
	switch {
	case err != nil:
		return refuse(err)
	case !changed:
		return duplicate(c.Tenant)
	}
	return Result{Tenant: c.Tenant}
}

// checkBulk is the check of a Redrive, CancelJobs or Purge before its
// filter is evaluated: its fields, the tenant, the filter's pool and its
// request key (a repeat of a request is answered as the first was, with
// Bulk set; the key used for another request is refused).
func (f *FSM) checkBulk(op BulkOp, c *clusterpb.BulkJobs) Result {
	if err := ValidateBulk(op, c); err != nil {
		return refuse(err)
	}
	ti, ok := f.sched.TenantIndex(c.Tenant)
	if !ok {
		return refuse(sfq.UnknownTenant(c.Tenant))
	}
	if p := c.GetFilter().GetPool(); p != "" {
		if _, ok := f.sched.PoolID(p); !ok {
			return refuse(sfq.UnknownPool(p))
		}
	}
	if c.RequestKey == "" {
		return Result{}
	}
	if seq, ok := f.keyIndex.get(&f.keys, keyRef{ti | bulkKeyBit, c.RequestKey}); ok {
		if e := f.keys.Get(seq); e != nil && e.Expires > f.clock {
			if e.Digest != bulkDigest(op, c) {
				return refusef(AlreadyExists, "", "request key %q of tenant %q was used for another request", c.RequestKey, c.Tenant)
			}
			// A repeat: answered with the first one's continuation.
			return Result{Tenant: c.Tenant, Outcome: sfq.Duplicate, Bulk: &BulkResult{Duplicate: true, Next: e.Job}}
		}
	}
	return Result{}
}

// The bounds of a worker's report of a run's end: a POSIX exit status,
// or -1 for a run ended by a signal.
const (
	MinExitCode, MaxExitCode = -1, 255
)

// checkFinished is the check of a worker's report that a run ended: its
// fields, and the job's lifecycle (a stale report is refused; a zombie's
// is billed; a repeat is a duplicate).
func (f *FSM) checkFinished(c *clusterpb.Finished) Result {
	if err := finishedFields(c, f.level); err != nil {
		return refuse(err)
	}
	outcome, _ := OutcomeFromPB(c.Outcome)
	permanent := c.Permanent && outcome == sfq.OutcomeFailed
	out, err := f.sched.CheckFinish(f.clock, sfq.JobID(c.Job), c.Attempt, c.WorkerId, outcome, c.CpuMs, permanent, c.SnoozeMs)
	switch {
	case err != nil:
		return refuse(err)
	case out == sfq.Duplicate:
		return Result{Outcome: out, Job: sfq.JobID(c.Job)}
	}
	return Result{}
}

// finishedFields checks what of a Finished needs no state: its outcome,
// its exit code (exitCodesBounded), CPU source and failure.
func finishedFields(c *clusterpb.Finished, level uint32) error {
	if _, err := OutcomeFromPB(c.Outcome); err != nil {
		return err
	}
	if exitCodesBounded(level) && (c.ExitCode < MinExitCode || c.ExitCode > MaxExitCode) {
		return invalidf("exit_code", "%d is out of range %d..%d", c.ExitCode, MinExitCode, MaxExitCode)
	}
	_, _, err := RunDetailsFromPB(c.CpuSource, c.Failure)
	return err
}

// CommandName is a command's kind as the log's oneof names it
// ("tenant_upsert", "set_group"), for metrics and logs.
func CommandName(c *clusterpb.Command) string {
	if c == nil || c.Cmd == nil {
		return "none"
	}
	fd := c.ProtoReflect().WhichOneof(c.ProtoReflect().Descriptor().Oneofs().ByName("cmd"))
	if fd == nil {
		return "none"
	}
	return string(fd.Name())
}
