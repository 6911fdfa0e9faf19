package fsm

import (
	"time"
	"unsafe"

	"github.com/baristahq/barista/internal/text"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// Admission: the rules that decide whether a command is admitted are
// written once, here (and in sfq where the rule is the core's), as the
// read-only first half of the command's Apply. Apply calls the check and
// then changes the state; the leader calls the same check on its state
// before it proposes (Admit, AdmitSubmits), so that a command Apply
// would refuse costs no log entry and a verdict never depends on the
// path a command took. Only a change of the state between the leader's
// check and the entry's Apply (another command in between) can make the
// two differ, and then Apply's verdict is the answer.

// SubmitFields checks what of a submit needs no state: its enums, its
// payload's size against the configuration's limit, every field's range
// (sfq.Submission.Validate). It returns the core's submission, whose
// payload shares c's bytes. Every node checks it before it forwards a
// submit; it is the first step of the leader's check and of Apply.
func SubmitFields(c *clusterpb.SubmitJob, cfg Config, level uint32) (sfq.Submission, *Refusal) {
	size, err := SizeFromPB(c.Size)
	if err != nil {
		return sfq.Submission{}, sfq.RefusalOf(err)
	}
	class, err := ClassFromPB(c.JobClass)
	if err != nil {
		return sfq.Submission{}, sfq.RefusalOf(err)
	}
	form := sfq.FormAny
	if formsRead(level) {
		if form, err = JobFormFromPB(c.Form); err != nil {
			return sfq.Submission{}, sfq.RefusalOf(err)
		}
	}
	uses, err := UsesFromPB(c.Uses) // below level 8 CheckLevel refuses any
	if err != nil {
		return sfq.Submission{}, sfq.RefusalOf(err)
	}
	limit := payloadLimitAt(cfg, level)
	if uint64(len(c.Payload)) > uint64(limit) {
		return sfq.Submission{}, payloadTooLarge(len(c.Payload), limit)
	}
	sub := sfq.Submission{
		Tenant: c.Tenant, Key: c.IdempotencyKey, Type: c.JobType, Size: size, EstCostMs: c.EstCostMs,
		// The decoded command's own bytes, never written again: Submit
		// copies them into the job and keeps nothing else of the string.
		Payload: unsafe.String(unsafe.SliceData(c.Payload), len(c.Payload)), MaxAttempts: c.MaxAttempts, TimeoutMs: c.TimeoutMs,
		Class: class, DeadlineMs: c.DeadlineMs, Group: c.Group, Pool: c.Pool, Form: form,
		Uses: uses,
	}
	submitDelays(c, &sub)
	if err := sub.Validate(); err != nil {
		return sub, sfq.RefusalOf(err)
	}
	return sub, nil
}

// payloadTooLarge is the refusal of a payload over the limit: permanent
// (no retry makes it fit), so INVALID_ARGUMENT with the reason TOO_LARGE.
func payloadTooLarge(n int, limit uint32) *Refusal {
	return sfq.Refusef(Invalid, text.ReasonTooLarge, "payload", "%d bytes, over the cluster's limit of %d (max_payload_bytes)", n, limit)
}

// submitVerdict is what checkSubmit found of a submit it admits.
type submitVerdict struct {
	sub      sfq.Submission
	ti       uint32 // the tenant's index, unless implicit
	implicit bool   // the tenant does not exist: Apply makes it (implicit_tenants)
	dup      bool   // the key names a live job: the answer is job
	job      sfq.JobID
	digest   [16]byte // of a keyed submit
	plan     sfq.SubmitPlan
}

// held is what the submits of a batch admitted before this one would
// hold of their tenant, for the leader's check of a batch: they count
// toward the tenant's quotas as if applied.
type held struct {
	jobs  uint32
	bytes uint64
	// all is what the batch's submits admitted before this one hold, of
	// every tenant.
	all *uint64
}

// checkSubmit is the check of a submit: every rule Apply holds it to, in
// Apply's order — its fields, the default tenant, the idempotency key,
// the pool, the tenant (real, or made under implicit_tenants), its
// class and deadline permits and max_groups (sfq.AdmitSubmit), then its
// quotas — over the state as it stands. It changes nothing (c.Tenant
// aside: a submit naming no tenant takes the cluster's default_tenant).
// before counts what earlier submits of a batch hold (nil: nothing).
func (f *FSM) checkSubmit(c *clusterpb.SubmitJob, before *held) (v submitVerdict, r Result) {
	sub, ref := SubmitFields(c, f.cfg, f.level)
	if ref != nil {
		return v, refused(ref)
	}
	if c.Tenant == "" && f.cfg.Pools.DefaultTenant != "" {
		// An admin's submit that names no tenant: the cluster's
		// default_tenant (a client token's submit always names its own).
		c.Tenant = f.cfg.Pools.DefaultTenant
		sub.Tenant = c.Tenant
	}
	v.sub = sub
	ti, known := f.sched.TenantIndex(c.Tenant)
	f.withPolicies(&v.sub, ti, known) // the retry policy of its kind
	if known && c.IdempotencyKey != "" {
		v.digest = submitDigest(c)
		if job, r, ok := f.keyed(ti, c, v.digest); ok {
			if r.Refused() {
				return v, r
			}
			v.dup, v.job = true, job
			return v, Result{Job: job, Tenant: c.Tenant}
		}
	}
	var spec *sfq.TenantSpec
	if !known {
		if c.Pool != "" {
			p, ok := f.sched.Pool(c.Pool)
			if !ok {
				return v, refuse(sfq.UnknownPool(c.Pool))
			}
			if p.Required && f.cfg.Pools.Implicit {
				// A tenant made now would have no subscription: the pool
				// refuses it, and nothing is made.
				return v, refuseWhy(FailedPrecondition, text.ReasonSubscriptionRequired, "", "tenant %s has no subscription in pool %s, which requires one", c.Tenant, c.Pool)
			}
		}
		s, r := f.implicitSpec(c.Tenant)
		if r.Refused() {
			return v, r
		}
		if s == nil {
			return v, refuseWhy(NotFound, text.ReasonTenantUnknown, "", "unknown tenant %q", c.Tenant)
		}
		spec, v.implicit = s, true
	}
	plan, err := f.sched.AdmitSubmit(f.clock, &v.sub, spec)
	if err != nil {
		return v, refuse(err)
	}
	v.plan, v.ti = plan, ti
	var t sfq.Tenant
	var heldBytes uint64
	if known {
		t, _ = f.sched.TenantTotals(ti) // what it holds in every pool
		heldBytes = f.sched.UnfinishedPayload(ti)
	} else {
		t.TenantSpec = *spec
	}
	if before != nil {
		heldBytes += before.bytes
	}
	var extra uint32
	allBytes := f.sched.UnfinishedPayloadAll()
	if before != nil {
		extra = before.jobs
		allBytes += *before.all
	}
	if ref := f.quotas().room(&t, extra, heldBytes, allBytes, len(c.Payload)); ref != nil {
		return v, refused(ref)
	}
	return v, Result{}
}

// keyed looks up a keyed submit's key (tenant ti, digest of c): ok when
// the key is taken within its dedupe window, with its job, or the
// refusal of a key used for other content or for a job that no longer
// exists.
func (f *FSM) keyed(ti uint32, c *clusterpb.SubmitJob, digest [16]byte) (sfq.JobID, Result, bool) {
	seq, ok := f.keyIndex.get(&f.keys, keyRef{ti, c.IdempotencyKey})
	if !ok {
		return 0, Result{}, false
	}
	e := f.keys.Get(seq)
	if e == nil || e.Expires <= f.clock {
		return 0, Result{}, false
	}
	if e.Digest != digest {
		return 0, refuseWhy(AlreadyExists, text.ReasonKeyConflict, "", "idempotency key %q of tenant %q was used for job %d with different content",
			c.IdempotencyKey, c.Tenant, e.Job), true
	}
	if _, ok := f.sched.Job(e.Job); !ok {
		// Never a job that no longer exists: the key still stands for it
		// (a retry must not run it twice), and the answer says what
		// became of it.
		return 0, refuseWhy(NotFound, text.ReasonKeyJobGone, "", "idempotency key %q of tenant %q was used for job %d, which no longer exists (purged, or pruned after it ended); the key is taken for %s more, its dedupe window",
			c.IdempotencyKey, c.Tenant, e.Job, time.Duration(e.Expires-f.clock)*time.Millisecond), true
	}
	return e.Job, Result{}, true
}

// AdmitSubmits gives each submit of cmds the verdict Apply would give it
// on the state as it stands (checkSubmit), as if the submits before it
// that it admits were applied first: they count toward their tenant's
// quotas. out[i] already refused skips cmds[i]; a verdict is written
// there. A verdict of OK with a Job is a keyed resend of that job: the
// answer needs no entry. It returns the index of the last applied entry,
// the state the verdicts read. It holds the read lock.
func (f *FSM) AdmitSubmits(cmds []*clusterpb.SubmitJob, out []Result) uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var batch map[string]*held
	var all uint64
	// The level check of Apply, first (one wrapper for the batch).
	one := &clusterpb.Command_Submit{}
	wrapped := &clusterpb.Command{Cmd: one}
	for i, c := range cmds {
		if out[i].Refused() {
			continue
		}
		one.Submit = c
		if err := CheckLevel(wrapped, f.level); err != nil {
			out[i] = refused(err.(*Refusal))
			continue
		}
		var before *held
		if len(cmds) > 1 {
			if batch == nil {
				batch = map[string]*held{}
			}
			name := c.Tenant
			if name == "" {
				name = f.cfg.Pools.DefaultTenant
			}
			if before = batch[name]; before == nil {
				before = &held{all: &all}
				batch[name] = before
			}
		}
		sc := c // as its level reads it (a form below Level8 is not)
		if n := normalize(wrapped, f.level); n != wrapped {
			sc = n.GetSubmit()
		}
		tenant := sc.Tenant
		v, r := f.checkSubmit(sc, before)
		sc.Tenant = tenant // the check's default tenant is Apply's to set
		out[i] = r
		if !r.Refused() && !v.dup && before != nil {
			before.jobs++
			before.bytes += uint64(len(c.Payload))
			all += uint64(len(c.Payload))
		}
	}
	return f.lastIndex
}
