package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"strings"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// keyEntry remembers an idempotency key for the dedupe window, even after
// its job is pruned. Entries are numbered in insertion order.
type keyEntry struct {
	Seq     uint64
	Tenant  uint32
	Key     string
	Job     sfq.JobID
	Expires sfq.Time
	Digest  [16]byte
}

type keyRef struct {
	tenant uint32
	key    string
}

// submitDigest hashes the deterministic encoding of every submitted field:
// a repeated submit with the same key is the same job only if it is equal.
func submitDigest(c *clusterpb.SubmitJob) [16]byte {
	var buf [256]byte // most submits fit: no allocation
	b := buf[:0]
	for _, s := range []string{c.Tenant, c.IdempotencyKey, c.JobType} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(c.Size))
	b = binary.AppendVarint(b, c.EstCostMs)
	b = binary.AppendUvarint(b, uint64(len(c.Payload)))
	b = append(b, c.Payload...)
	b = binary.AppendUvarint(b, uint64(c.MaxAttempts))
	b = binary.AppendVarint(b, c.TimeoutMs)
	// Fields added later are appended only when set, so that a submit
	// without them keeps the digest it had before they existed.
	if class, _ := ClassFromPB(c.JobClass); class != sfq.ClassNormal || c.DeadlineMs != 0 {
		b = append(b, 'v', '2', byte(class))
		b = binary.AppendVarint(b, c.DeadlineMs)
	}
	if c.Group != "" {
		b = append(b, 'g')
		b = binary.AppendUvarint(b, uint64(len(c.Group)))
		b = append(b, c.Group...)
	}
	b = appendDelayDigest(b, c)
	if c.Pool != "" && c.Pool != sfq.DefaultPoolName {
		b = append(b, 'p')
		b = binary.AppendUvarint(b, uint64(len(c.Pool)))
		b = append(b, c.Pool...)
	}
	if c.Form != pb.JobForm_JOB_FORM_UNSPECIFIED { // below level 8, normalize cleared it
		b = append(b, 'f', byte(c.Form))
	}
	b = appendUsesDigest(b, c.Uses)
	sum := sha256.Sum256(b)
	var d [16]byte
	copy(d[:], sum[:])
	return d
}

// applySubmit applies a submit: its check (checkSubmit, the leader's
// check too), then its effect. A refused submit changes nothing.
func (f *FSM) applySubmit(c *clusterpb.SubmitJob) Result {
	v, r := f.checkSubmit(c, nil)
	if r.Refused() {
		return r
	}
	if v.dup {
		return r
	}
	return f.submitAdmitted(c, v, true)
}

// submitAdmitted is the effect of a submit checkSubmit admitted (v, not a
// keyed resend): the implicit tenant if one is to be made, the job, its
// key (with record, for the dedupe window) and its event.
func (f *FSM) submitAdmitted(c *clusterpb.SubmitJob, v submitVerdict, record bool) Result {
	var id sfq.JobID
	var err error
	if v.implicit {
		if _, r := f.implicitTenant(c.Tenant); r.Refused() {
			return r
		}
		v.ti, _ = f.sched.TenantIndex(c.Tenant)
		f.observe(v.ti)
		id, err = f.sched.Submit(f.clock, v.sub) // the tenant made, its plan is made again
	} else {
		id, err = f.sched.SubmitAdmitted(f.clock, v.sub, v.plan)
	}
	if err != nil {
		return refuse(err)
	}
	if record && c.IdempotencyKey != "" && f.cfg.DedupeWindowMs > 0 {
		if v.implicit {
			v.digest = submitDigest(c)
		}
		seq := f.nextKey
		f.nextKey++
		ref := keyRef{v.ti, c.IdempotencyKey}
		f.keys.Put(seq, keyEntry{Seq: seq, Tenant: v.ti, Key: c.IdempotencyKey, Job: id, Expires: f.clock + sfq.Time(f.cfg.DedupeWindowMs), Digest: v.digest})
		f.keyIndex.put(&f.keys, ref, seq)
	}
	j, _ := f.sched.Job(id)
	if j.State == sfq.Scheduled {
		f.emit(EvScheduled, &j, ReasonNone)
	} else {
		f.emit(EvQueued, &j, ReasonNone)
	}
	f.observe(j.Tenant)
	return Result{Job: id, Created: true, Tenant: c.Tenant}
}

func validWorkerID(id string) Result {
	if err := sfq.ValidateName("worker_id", id); err != nil {
		return refuse(err)
	}
	return Result{}
}

func (f *FSM) applyDispatch(c *clusterpb.Dispatch) Result {
	if r := validWorkerID(c.WorkerId); r.Code != OK {
		return r
	}
	size, err := SizeFromPB(c.Size)
	if err != nil {
		return refuse(err)
	}
	pool := c.Pool
	if pool == sfq.DefaultPoolName {
		pool = ""
	}
	pid, known := f.sched.PoolID(pool)
	if !known {
		return refusef(NotFound, "", "unknown pool %q", pool)
	}
	w := f.workers[c.WorkerId]
	if w != nil && c.Credit != 0 && w.Credit == c.Credit {
		// A retry of a dispatch already applied (e.g. after a lost
		// leadership): return the same assignment if it still holds.
		if j, ok := f.workerJob(w); ok {
			return Result{Assigned: true, Job: j.ID, Attempt: j.Attempt, Size: j.Size, Tenant: f.sched.TenantName(j.Tenant), Outcome: sfq.Duplicate,
				Assign: assignmentOf(&j)}
		}
		return Result{Outcome: sfq.Duplicate}
	}
	if w == nil {
		w = &Worker{ID: c.WorkerId}
		f.workers[w.ID] = w
	}
	w.Size, w.Pool, w.LastSeen = size, pool, f.clock
	if r := f.checkDispatchTo(w); r.Refused() {
		return r
	}
	a, ok, err := f.sched.DispatchFor(f.clock, pid, size, w.ID, w.Runs)
	if err != nil {
		return refuse(err)
	}
	if !ok {
		// A Dispatch that gives nothing leaves the credit unspent, so
		// that the worker's next one, with the same credit, may give it
		// a job (eligibility changes with time alone, and the leader
		// asks again when a rate limit allows).
		w.Job, w.Attempt = 0, 0
		return Result{}
	}
	w.Credit = c.Credit
	w.Job, w.Attempt = a.Job, a.Attempt
	j, _ := f.sched.Job(a.Job)
	reason := ReasonNone
	if a.DeadlineMissed {
		reason = ReasonDeadlineMissed
	}
	f.emit(EvAssigned, &j, reason)
	f.charge(&j, j.EstCostMs)
	f.ledger(pid).Dispatched(f.clock, j.Size)
	f.observe(j.Tenant)
	return Result{Assigned: true, Job: a.Job, Attempt: a.Attempt, Size: a.Size, Tenant: f.sched.TenantName(a.Tenant), Outcome: sfq.Changed,
		DeadlineMissed: a.DeadlineMissed, Assign: assignmentOf(&j)}
}

// Assignment is what a worker is told of the job a Dispatch gave it, from
// the state the Dispatch applied to: the leader's Assign needs nothing
// else, so it never reads the state again.
type Assignment struct {
	Payload   string // the job's own bytes, never written again
	Type      string
	TimeoutMs int64
	EstCostMs int64
	Form      sfq.JobForm
}

// assignmentOf is the Assignment of job j.
func assignmentOf(j *sfq.Job) Assignment {
	return Assignment{Payload: j.Payload(), Type: j.Type(), TimeoutMs: j.TimeoutMs, EstCostMs: j.EstCostMs, Form: j.Form()}
}

// checkDispatchTo is the check of a Dispatch for worker w, once its record
// says what it is: a drained worker gets no job, nor one that still holds
// a live job (its Finished not in yet). The leader makes the same check
// before it proposes one (CheckDispatch).
func (f *FSM) checkDispatchTo(w *Worker) Result {
	if w.Drained {
		return refusef(FailedPrecondition, "", "worker %q is drained", w.ID)
	}
	if j, ok := f.workerJob(w); ok {
		return refusef(FailedPrecondition, "", "worker %q still holds job %d (attempt %d)", w.ID, j.ID, j.Attempt)
	}
	return Result{}
}

// CheckDispatch is the leader's check of a Dispatch for a worker before it
// proposes one (checkDispatchTo on the state as it stands; a worker the
// state has no record of yet may be given a job). It holds the read lock.
func (f *FSM) CheckDispatch(worker string) Result {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if w := f.workers[worker]; w != nil {
		return f.checkDispatchTo(w)
	}
	return Result{}
}

// workerJob returns the job w holds, if it is still live on w.
func (f *FSM) workerJob(w *Worker) (sfq.Job, bool) {
	if w.Job == 0 {
		return sfq.Job{}, false
	}
	j, ok := f.sched.Job(w.Job)
	if !ok || !j.HeldBy(w.ID, w.Attempt) {
		return sfq.Job{}, false
	}
	return j, true
}

// internWorker returns the worker table's copy of id (so that jobs share
// one string per worker), or id itself.
func (f *FSM) internWorker(id string) string {
	if w := f.workers[id]; w != nil {
		return w.ID
	}
	return id
}

// workerSeen marks the worker of a report seen once the report is
// accepted (a refused report does not).
func (f *FSM) workerSeen(id string, err error) {
	if w := f.workers[id]; w != nil && err == nil {
		w.LastSeen = f.clock
	}
}

// workerResult is the result of a lifecycle event's change (or refusal).
func (f *FSM) workerResult(ch sfq.Change, err error) Result {
	r := Result{Outcome: ch.Outcome, Job: ch.Job, Attempt: ch.Attempt}
	if ch.Job != 0 {
		r.Tenant = f.sched.TenantName(ch.Tenant)
	}
	if err != nil {
		ref := refuse(err)
		r.Code, r.Field, r.Reason, r.Msg = ref.Code, ref.Field, ref.Reason, ref.Msg
	}
	return r
}

func (f *FSM) applyStarted(c *clusterpb.Started) Result {
	ch, err := f.sched.Start(f.clock, sfq.JobID(c.Job), c.Attempt, f.internWorker(c.WorkerId))
	f.workerSeen(c.WorkerId, err)
	f.emitChange(ch, ReasonNone)
	return f.workerResult(ch, err)
}

func (f *FSM) applyHeartbeats(c *clusterpb.HeartbeatBatch) Result {
	r := Result{HeartbeatOutcomes: make([]sfq.Outcome, len(c.Heartbeats))}
	for i, hb := range c.Heartbeats {
		ch, err := f.sched.Heartbeat(f.clock, sfq.JobID(hb.Job), hb.Attempt, f.internWorker(hb.WorkerId), hb.CpuMs)
		f.workerSeen(hb.WorkerId, err)
		out := ch.Outcome
		if err != nil && out == 0 {
			out = sfq.Stale // unknown or pruned job: the worker must drop it
		}
		r.HeartbeatOutcomes[i] = out
		if out == sfq.Changed || out == sfq.Duplicate {
			r.Count++
		}
		f.emitChange(ch, ReasonNone)
	}
	return r
}

func (f *FSM) applyFinished(c *clusterpb.Finished) Result {
	if err := finishedFields(c, f.level); err != nil {
		return refuse(err)
	}
	outcome, _ := OutcomeFromPB(c.Outcome)
	id := sfq.JobID(c.Job)
	// A run that can never succeed, how the CPU was measured and why the
	// run failed (finishedFields checked them).
	permanent := c.Permanent && outcome == sfq.OutcomeFailed
	res := sfq.RunResult{ExitCode: c.ExitCode, StderrTail: c.StderrTail, StdoutTail: c.StdoutTail, Permanent: permanent, SnoozeMs: c.SnoozeMs}
	res.CPUSource, res.Failure, _ = RunDetailsFromPB(c.CpuSource, c.Failure)
	ch, err := f.sched.Finish(f.clock, id, c.Attempt, f.internWorker(c.WorkerId), outcome, c.CpuMs, res)
	reason := ReasonRunFailed
	switch {
	case outcome == sfq.OutcomeCancelled:
		reason = ReasonRequested
	case permanent:
		reason = ReasonUnrunnable
	case outcome == sfq.OutcomeFailed && res.Failure == sfq.FailureOOMKilled:
		reason = ReasonOOMKilled
	case outcome == sfq.OutcomeSnoozed && ch.To == sfq.Failed:
		reason = ReasonSnoozedTooOften
	case outcome == sfq.OutcomeSnoozed:
		reason = ReasonSnoozed
	case outcome == sfq.OutcomeUnknownKind:
		reason = ReasonUnknownKind
	}
	f.workerSeen(c.WorkerId, err)
	f.emitChange(ch, reason)
	if w := f.workers[c.WorkerId]; w != nil && w.Job == id && w.Attempt == c.Attempt && ch.Outcome == sfq.Changed {
		w.Job, w.Attempt = 0, 0
	}
	if outcome == sfq.OutcomeUnknownKind && ch.Outcome == sfq.Changed {
		j, _ := f.sched.Job(id)
		f.unknownKind(c.WorkerId, &j)
	}
	f.fairFinished(ch, c.CpuMs)
	return f.workerResult(ch, err)
}

func (f *FSM) applyCancel(c *clusterpb.CancelJob) Result {
	if r := f.checkCancel(c); r.Refused() {
		return r
	}
	ch, err := f.sched.Cancel(f.clock, sfq.JobID(c.Job))
	if err != nil {
		return f.workerResult(ch, err)
	}
	f.emitChange(ch, ReasonRequested)
	if ch.Outcome == sfq.Changed {
		f.observe(ch.Tenant)
	}
	return f.workerResult(ch, nil)
}

func (f *FSM) applyExpire(c *clusterpb.Expire) Result {
	var kind sfq.InputKind
	var reason Reason
	switch c.Kind {
	case clusterpb.ExpireKind_ACK:
		kind, reason = sfq.InExpireAck, ReasonAckTimeout
	case clusterpb.ExpireKind_LEASE:
		kind, reason = sfq.InExpireLease, ReasonLeaseExpired
	case clusterpb.ExpireKind_TIMEOUT:
		kind, reason = sfq.InExpireTimeout, ReasonTimeout
	case clusterpb.ExpireKind_TTL:
		kind = sfq.InExpireTTL
	default:
		return refusef(Invalid, "", "expire kind %v", c.Kind)
	}
	ch, err := f.sched.Expire(f.clock, sfq.JobID(c.Job), c.Attempt, kind)
	f.emitChange(ch, reason)
	if ch.Outcome == sfq.Changed {
		f.observe(ch.Tenant)
	}
	return f.workerResult(ch, err)
}

func (f *FSM) applyTenantUpsert(c *clusterpb.TenantUpsert) Result {
	u, r := f.checkTenantUpsert(c)
	if r.Refused() {
		return r
	}
	spec := u.spec
	old, existed := f.sched.Tenant(c.Name)
	created, err := f.sched.UpsertTenant(spec)
	if err != nil {
		return refuse(err)
	}
	if existed {
		f.moveTier(old.Tier, spec.Tier, &old.Billing)
	}
	i, _ := f.sched.TenantIndex(c.Name)
	f.setExported(i, u.full.ExportMetrics)
	f.observe(i)
	return Result{Created: created, Tenant: c.Name}
}

// applySetGroup sets the admin's cap or rate of a group, or (as_tenant)
// the tenant's own cap, keeping the others: its check (checkSetGroup:
// the tenant, the name, the value and max_groups), then its effect.
func (f *FSM) applySetGroup(c *clusterpb.SetGroup) Result {
	set, r := f.checkSetGroup(c)
	if r.Refused() {
		return r
	}
	if err := f.sched.SetGroup(c.Tenant, c.Group, set); err != nil {
		return refuse(err)
	}
	return Result{Tenant: c.Tenant}
}

// setGroupCap applies a SetGroup's cap: the admin's, or (as_tenant) the
// tenant's own.
func setGroupCap(set *sfq.GroupSettings, c *clusterpb.SetGroup) Result {
	if c.AsTenant {
		switch c.CapKind {
		case clusterpb.GroupCapKind_GROUP_CAP_INHERIT, clusterpb.GroupCapKind_GROUP_CAP_NONE:
			set.TenantCap = 0
		case clusterpb.GroupCapKind_GROUP_CAP_LIMIT:
			if c.Limit < 1 || c.Limit > sfq.MaxGroupCap {
				return refusef(Invalid, "", "group cap %d (want 1..%d)", c.Limit, sfq.MaxGroupCap)
			}
			set.TenantCap = c.Limit
		default:
			return refusef(Invalid, "", "group cap kind %v (want inherit, none or a limit)", c.CapKind)
		}
	} else {
		cp, err := GroupCapFromPB(c.CapKind, c.Limit)
		if err != nil {
			return refuse(err)
		}
		set.Cap = cp
	}
	return Result{}
}

func (f *FSM) applyTenantDelete(c *clusterpb.TenantDelete) Result {
	if r := f.checkTenantDelete(c); r.Refused() {
		return r
	}
	i, ok := f.sched.TenantIndex(c.Name)
	if err := f.sched.DeleteTenant(c.Name); err != nil {
		return refuse(err)
	}
	if ok {
		f.setExported(i, false)
		f.dropTenantWebhook(i)
		f.dropKept(i)
		f.dropPolicies(i)
		f.dropSchedules(i)
		f.observe(i)
	}
	return Result{}
}

func (f *FSM) applySetConfig(c *clusterpb.SetConfig) Result {
	cfg, err := ConfigFromPB(c.Config)
	if err != nil {
		return refuse(err)
	}
	if err := f.sched.SetConfig(cfg.Sched); err != nil {
		return refuse(err)
	}
	f.cfg = cfg
	f.configured = true
	f.observeAll() // tier weights or decay may have changed
	return Result{}
}

// DefaultPruneLimit bounds the items of each kind one Prune removes when
// the command does not say, so that one entry never pauses Apply long.
const DefaultPruneLimit = 10_000

func (f *FSM) applyPrune(c *clusterpb.Prune) Result { return f.prune(c, pruneRules{}) }

// pruneRules are what a prune's older meanings did otherwise
// (applyFrozen).
type pruneRules struct {
	everyEndedByJobRetention bool // every ended job by the job retention (no dead-letter rules)
	keepDrained              bool // a drained worker's record is never pruned
}

func (f *FSM) prune(c *clusterpb.Prune, rules pruneRules) Result {
	limit := int(c.Limit)
	if limit <= 0 || limit > 1_000_000 {
		limit = DefaultPruneLimit
	}
	n := f.pruneJobs(limit, rules.everyEndedByJobRetention)
	// Events: beyond the count, or older than the age (with
	// event_retention_per_tenant set, each tenant keeps its recent ones:
	// eventkeep.go).
	lost := f.webhookPruner()
	if f.cfg.EventRetentionPerTenant > 0 {
		n += f.pruneEventsKeeping(limit, lost)
	} else {
		for i := 0; i < limit; i++ {
			first, ev, ok := f.events.Head()
			if !ok || (uint64(f.events.Len()) <= f.cfg.EventRetentionCount && ev.At >= f.clock-sfq.Time(f.cfg.EventRetentionMs)) {
				break
			}
			lost(first, &ev)
			f.events.PopHead()
			n++
		}
	}
	// Idempotency keys past their window, oldest first.
	for i := 0; i < limit; i++ {
		first := f.nextKey - uint64(f.keys.Len())
		e := f.keys.Get(first)
		if e == nil || e.Expires > f.clock {
			break
		}
		f.keyIndex.drop(keyRef{e.Tenant, e.Key}, first)
		f.keys.Del(first)
		n++
	}
	// Workers that hold nothing and were not seen within the job
	// retention (drained ones too).
	ids := make([]string, 0, len(f.workers))
	for id := range f.workers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		w := f.workers[id]
		if _, live := f.workerJob(w); !live && (!w.Drained || !rules.keepDrained) && w.LastSeen < f.clock-sfq.Time(f.cfg.JobRetentionMs) {
			delete(f.workers, id)
			n++
		}
	}
	return Result{Count: uint64(n)}
}

func (f *FSM) applyMemberUpsert(c *clusterpb.MemberUpsert) Result {
	if c.Id == "" || c.RaftAddr == "" {
		return refusef(Invalid, "", "member needs an id and a raft address")
	}
	m := Member{ID: c.Id, RaftAddr: c.RaftAddr, GRPCAddr: c.GrpcAddr, HTTPAddr: c.HttpAddr}
	i, found := slices.BinarySearchFunc(f.members, c.Id, func(m Member, id string) int { return strings.Compare(m.ID, id) })
	if found {
		f.members[i] = m
	} else {
		f.members = slices.Insert(f.members, i, m)
	}
	return Result{}
}

func (f *FSM) applyMemberRemove(c *clusterpb.MemberRemove) Result {
	i, found := slices.BinarySearchFunc(f.members, c.Id, func(m Member, id string) int { return strings.Compare(m.ID, id) })
	if found {
		f.members = slices.Delete(f.members, i, i+1)
	}
	return Result{}
}

func (f *FSM) applyWorkerDrain(c *clusterpb.WorkerDrain) Result {
	if r := f.checkWorkerDrain(c); r.Code != OK || r.Outcome == sfq.Duplicate {
		return r
	}
	w := f.workers[c.WorkerId]
	if w == nil {
		w = &Worker{ID: c.WorkerId, LastSeen: f.clock}
		f.workers[w.ID] = w
	}
	w.Drained = c.Drain
	return Result{}
}
