package fsm

import (
	"cmp"
	"slices"
	"strings"

	"github.com/baristahq/barista/internal/text"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// Kinds (SPEC §3 "Kinds", §5 "Worker protocol"; feature level 8): what a
// worker runs is part of its record (WorkerHello), every Dispatch gives
// it only a job it runs, a run it does not run ends unknown_kind, and a
// new session is the verdict on the job its Hello did not list. The
// retry policies of kinds are fixed on a job at its submit.

// MaxWorkerKinds bounds the kinds one worker says it runs.
const MaxWorkerKinds = 1000

// maxRunsKinds bounds the kinds a worker record lists when read back: the
// kinds it registered, or those it said it does not run in a session.
const maxRunsKinds = 1 << 20

// MaxHeldJobs bounds the runs a Hello lists.
const MaxHeldJobs = 8

// MaxKindPolicies bounds the retry policies of kinds of one tenant, and
// those of every tenant.
const MaxKindPolicies = 1000

// workerHello is what checkWorkerHello found of a WorkerHello.
type workerHello struct {
	size sfq.Size
	pool string
	runs *sfq.Runs // nil: every job
}

// checkWorkerHello is the check of a WorkerHello: its worker, size, pool
// and what it says it runs.
func (f *FSM) checkWorkerHello(c *clusterpb.WorkerHello) (workerHello, Result) {
	var v workerHello
	if r := validWorkerID(c.WorkerId); r.Code != OK {
		return v, r
	}
	size, err := SizeFromPB(c.Size)
	if err != nil {
		return v, refuse(err)
	}
	pool := c.Pool
	if pool == sfq.DefaultPoolName {
		pool = ""
	}
	if _, known := f.sched.PoolID(pool); !known {
		return v, refuseWhy(NotFound, text.ReasonPoolUnknown, "pool", "unknown pool %q", pool)
	}
	if len(c.Holds) > MaxHeldJobs {
		return v, refusef(Invalid, "holds", "%d runs, at most %d", len(c.Holds), MaxHeldJobs)
	}
	v.size, v.pool = size, pool
	if !c.Says {
		if c.Commands || len(c.Kinds) > 0 {
			return v, refusef(Invalid, "says", "a worker that names what it runs says so")
		}
		return v, Result{}
	}
	runs, r := runsOf(c.Commands, c.Kinds)
	if r.Refused() {
		return v, r
	}
	v.runs = &runs
	return v, Result{}
}

// runsOf is what a worker that runs commands (or not) and kinds runs:
// the kinds sorted, each once, each a valid job type.
func runsOf(commands bool, kinds []string) (sfq.Runs, Result) {
	if len(kinds) > MaxWorkerKinds {
		return sfq.Runs{}, refusef(Invalid, "kinds", "%d kinds, at most %d", len(kinds), MaxWorkerKinds)
	}
	for _, k := range kinds {
		if err := validKind("kinds", k); err != nil {
			return sfq.Runs{}, refuse(err)
		}
	}
	sorted := slices.Clone(kinds)
	slices.Sort(sorted)
	return sfq.Runs{Commands: commands, Kinds: slices.Compact(sorted)}, Result{}
}

// WorkerRuns is what a worker that says it runs commands (or not) and
// kinds runs, as a WorkerHello records it: the kinds sorted, each once.
// A kind that is not a job type, or too many, is refused. The replay's
// core records its workers with it.
func WorkerRuns(commands bool, kinds []string) (sfq.Runs, error) {
	runs, r := runsOf(commands, kinds)
	return runs, r.Err()
}

// validKind checks a kind's name: a job type, not empty.
func validKind(field, k string) error {
	if k == "" {
		return invalidf(field, "a kind is a job type, not empty")
	}
	return sfq.ValidateJobType(field, k)
}

// applyWorkerHello records what a worker runs, opening its session: its
// size and pool, what it runs (what it said it does not run in its last
// session forgotten), and a new session's credits. The job the state says
// it holds, if its Hello does not list that attempt, is lost at once
// (sfq.Lose): one never started goes back to queued with no failure, a
// started one as at its lease's end.
func (f *FSM) applyWorkerHello(c *clusterpb.WorkerHello) Result {
	v, r := f.checkWorkerHello(c)
	if r.Refused() {
		return r
	}
	w := f.workers[c.WorkerId]
	if w == nil {
		w = &Worker{ID: c.WorkerId}
		f.workers[w.ID] = w
	}
	w.Size, w.Pool, w.LastSeen, w.Runs = v.size, v.pool, f.clock, v.runs
	w.Credit = 0 // a new session counts its credits from the start
	out := Result{}
	if j, live := f.workerJob(w); live {
		listed := slices.ContainsFunc(c.Holds, func(h *clusterpb.HeldJob) bool {
			return sfq.JobID(h.Job) == j.ID && h.Attempt == j.Attempt
		})
		if !listed {
			ch, err := f.sched.Lose(f.clock, j.ID, j.Attempt, w.ID)
			if err != nil {
				return refuse(err)
			}
			f.emitChange(ch, ReasonReconnected)
			f.observe(ch.Tenant)
			out = Result{Job: ch.Job, Attempt: ch.Attempt, Tenant: f.sched.TenantName(ch.Tenant), Outcome: ch.Outcome}
			w.Job, w.Attempt = 0, 0
		}
	}
	return out
}

// unknownKind keeps, in the record of the worker that ended job j's run
// unknown_kind, that it does not run j's kind for the rest of its
// session.
func (f *FSM) unknownKind(worker string, j *sfq.Job) {
	if w := f.workers[worker]; w != nil {
		runs := w.Runs.Without(j.Form(), j.Type())
		w.Runs = &runs
	}
}

// KindPolicy is the retry policy of a kind (SPEC §3 "Kinds"): for one
// tenant, or every tenant. A value left 0 (RetryBackoffMs -1) is not set
// by the policy.
type KindPolicy struct {
	// Tenant is the tenant's index + 1; 0: every tenant.
	Tenant            uint32
	Kind              string
	MaxAttempts       uint32
	RetryBackoffMs    int64 // -1: not set
	RetryBackoffMaxMs int64
	TimeoutMs         int64
}

// comparePolicies orders policies by tenant, then kind.
func comparePolicies(a, b KindPolicy) int {
	if c := cmp.Compare(a.Tenant, b.Tenant); c != 0 {
		return c
	}
	return strings.Compare(a.Kind, b.Kind)
}

// findPolicy returns the index of (tenant, kind)'s policy in f's sorted
// policies, and whether there is one.
func (f *FSM) findPolicy(tenant uint32, kind string) (int, bool) {
	return slices.BinarySearchFunc(f.policies, KindPolicy{Tenant: tenant, Kind: kind}, comparePolicies)
}

// checkKindPolicySet is the check of a KindPolicySet: the tenant (""
// for every tenant), the kind, the values, and the bound on policies.
func (f *FSM) checkKindPolicySet(c *clusterpb.KindPolicySet) (KindPolicy, Result) {
	p := KindPolicy{Kind: c.Kind, MaxAttempts: c.MaxAttempts, RetryBackoffMs: -1, RetryBackoffMaxMs: c.RetryBackoffMaxMs, TimeoutMs: c.TimeoutMs}
	if c.Tenant != "" {
		ti, ok := f.sched.TenantIndex(c.Tenant)
		if !ok {
			return p, refuseWhy(NotFound, text.ReasonTenantUnknown, "tenant", "unknown tenant %q", c.Tenant)
		}
		p.Tenant = ti + 1
	}
	if err := validKind("kind", c.Kind); err != nil {
		return p, refuse(err)
	}
	i, found := f.findPolicy(p.Tenant, p.Kind)
	if c.Remove {
		if !found {
			return p, Result{Outcome: sfq.Duplicate}
		}
		return p, Result{}
	}
	if c.RetryBackoffMs != nil {
		p.RetryBackoffMs = *c.RetryBackoffMs
	}
	if r := p.checkValues(); r.Refused() {
		return p, r
	}
	if found {
		if f.policies[i] == p {
			return p, Result{Outcome: sfq.Duplicate}
		}
		return p, Result{}
	}
	n := 0
	for _, q := range f.policies {
		if q.Tenant == p.Tenant {
			n++
		}
	}
	if n >= MaxKindPolicies {
		return p, refuseWhy(ResourceExhausted, text.ReasonQuotaExceeded, "kind", "%d retry policies of kinds, at most %d", n, MaxKindPolicies)
	}
	return p, Result{}
}

// checkValues checks the values a policy sets: each in its range, and
// at least one set.
func (p KindPolicy) checkValues() Result {
	switch {
	case p.MaxAttempts > sfq.MaxMaxAttempts:
		return refusef(Invalid, "max_attempts", "%d, at most %d", p.MaxAttempts, sfq.MaxMaxAttempts)
	case p.RetryBackoffMs < -1 || p.RetryBackoffMs > sfq.MaxRetryBackoffMs:
		return refusef(Invalid, "retry_backoff_ms", "%d is out of range (0 .. 24 h)", p.RetryBackoffMs)
	case p.RetryBackoffMaxMs < 0 || p.RetryBackoffMaxMs > sfq.MaxRetryBackoffMs:
		return refusef(Invalid, "retry_backoff_max_ms", "%d is out of range (0 .. 24 h)", p.RetryBackoffMaxMs)
	case p.TimeoutMs < 0 || p.TimeoutMs > sfq.MaxTimeoutMs:
		return refusef(Invalid, "timeout_ms", "%d is out of range (0 .. %d)", p.TimeoutMs, int64(sfq.MaxTimeoutMs))
	case p.MaxAttempts == 0 && p.RetryBackoffMs < 0 && p.RetryBackoffMaxMs == 0 && p.TimeoutMs == 0:
		return refusef(Invalid, "", "a retry policy sets max_attempts, retry_backoff, retry_backoff_max or timeout (remove deletes one)")
	}
	return Result{}
}

// Validate checks a policy as KindPolicySet does, its tenant aside: its
// kind and its values. The replay's core keeps policies with it.
func (p KindPolicy) Validate() error {
	if err := validKind("kind", p.Kind); err != nil {
		return refuse(err).Err()
	}
	return p.checkValues().Err()
}

func (f *FSM) applyKindPolicySet(c *clusterpb.KindPolicySet) Result {
	p, r := f.checkKindPolicySet(c)
	if r.Refused() || r.Outcome == sfq.Duplicate {
		return r
	}
	// The slice is never written in place (a view may hold it).
	i, found := f.findPolicy(p.Tenant, p.Kind)
	switch {
	case c.Remove:
		f.policies = slices.Delete(slices.Clone(f.policies), i, i+1)
	case found:
		f.policies = slices.Clone(f.policies)
		f.policies[i] = p
	default:
		f.policies = slices.Insert(slices.Clone(f.policies), i, p)
	}
	return Result{}
}

// dropPolicies forgets the retry policies of tenant index ti (a deleted
// tenant).
func (f *FSM) dropPolicies(ti uint32) {
	if slices.ContainsFunc(f.policies, func(p KindPolicy) bool { return p.Tenant == ti+1 }) {
		f.policies = slices.DeleteFunc(slices.Clone(f.policies), func(p KindPolicy) bool { return p.Tenant == ti+1 })
	}
}

// withPolicies fixes on submission sub the retry policy of its kind: what
// the submit does not set, its tenant's policy (known: the tenant exists,
// index ti) sets, else the policy of every tenant, else the cluster's.
func (f *FSM) withPolicies(sub *sfq.Submission, ti uint32, known bool) {
	if len(f.policies) == 0 || sub.Type == "" {
		return
	}
	var mine, every *KindPolicy
	if known {
		if i, ok := f.findPolicy(ti+1, sub.Type); ok {
			mine = &f.policies[i]
		}
	}
	if i, ok := f.findPolicy(0, sub.Type); ok {
		every = &f.policies[i]
	}
	FillFromPolicies(sub, mine, every)
}

// FillFromPolicies fixes on submission sub the retry policies of its
// kind, in order (its tenant's, then every tenant's; nil: none): each
// value the submit, or an earlier policy, does not set is the first
// policy's that sets it. What is left unset is the cluster's. Apply
// calls it at a submit, and the replay's core alike.
func FillFromPolicies(sub *sfq.Submission, ps ...*KindPolicy) {
	for _, p := range ps {
		if p == nil {
			continue
		}
		if sub.MaxAttempts == 0 && p.MaxAttempts != 0 {
			sub.MaxAttempts = p.MaxAttempts
		}
		if sub.TimeoutMs == 0 && p.TimeoutMs != 0 {
			sub.TimeoutMs = p.TimeoutMs
		}
		if !sub.RetryBackoffSet && p.RetryBackoffMs >= 0 {
			sub.RetryBackoffMs, sub.RetryBackoffSet = p.RetryBackoffMs, true
		}
		if sub.RetryBackoffMaxMs == 0 && p.RetryBackoffMaxMs != 0 {
			sub.RetryBackoffMaxMs = p.RetryBackoffMaxMs
		}
	}
}

// KindPolicies returns the retry policies of kinds of tenant (every
// tenant's policies when tenant is ""), sorted by kind, with the name of
// each one's tenant ("" for every tenant). With all, both.
func (f *FSM) KindPolicies(tenant string, all bool) []NamedKindPolicy {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var want uint32
	if tenant != "" {
		ti, ok := f.sched.TenantIndex(tenant)
		if !ok {
			return nil
		}
		want = ti + 1
	}
	var out []NamedKindPolicy
	for _, p := range f.policies {
		if p.Tenant == want || (all && p.Tenant == 0) {
			n := NamedKindPolicy{KindPolicy: p}
			if p.Tenant != 0 {
				n.TenantName = f.sched.TenantName(p.Tenant - 1)
			}
			out = append(out, n)
		}
	}
	return out
}

// NamedKindPolicy is a policy with its tenant's name ("" for every
// tenant).
type NamedKindPolicy struct {
	KindPolicy
	TenantName string
}

// encodePolicies writes the retry policies of kinds (state version 11).
func encodePolicies(e *sfq.Encoder, ps []KindPolicy) {
	e.Uvarint(uint64(len(ps)))
	for _, p := range ps {
		e.Uvarint(uint64(p.Tenant))
		e.String(p.Kind)
		e.Uvarint(uint64(p.MaxAttempts))
		e.Varint(p.RetryBackoffMs)
		e.Varint(p.RetryBackoffMaxMs)
		e.Varint(p.TimeoutMs)
	}
}

// decodePolicies reads what encodePolicies wrote.
func (f *FSM) decodePolicies(d *sfq.Decoder) {
	n := d.Uvarint()
	for i := uint64(0); i < n && d.Err() == nil; i++ {
		p := KindPolicy{Tenant: uint32(d.Uvarint()), Kind: d.String(), MaxAttempts: d.Uint32(), RetryBackoffMs: d.Varint(), RetryBackoffMaxMs: d.Varint(), TimeoutMs: d.Varint()}
		if len(f.policies) > 0 && comparePolicies(f.policies[len(f.policies)-1], p) >= 0 {
			d.Fail("retry policy %d (%q) is out of order", i, p.Kind)
			return
		}
		if p.Kind == "" || p.MaxAttempts > sfq.MaxMaxAttempts || p.RetryBackoffMs < -1 || p.RetryBackoffMs > sfq.MaxRetryBackoffMs ||
			p.RetryBackoffMaxMs < 0 || p.RetryBackoffMaxMs > sfq.MaxRetryBackoffMs || p.TimeoutMs < 0 || p.TimeoutMs > sfq.MaxTimeoutMs {
			d.Fail("retry policy %d (%q) is out of range", i, p.Kind)
			return
		}
		f.policies = append(f.policies, p)
	}
}

// encodeRuns writes what a worker record says it runs (state version 11):
// 0 for every job, else 1 + commands + 2×all_kinds, then its kinds.
func encodeRuns(e *sfq.Encoder, r *sfq.Runs) {
	if r == nil {
		e.Byte(0)
		return
	}
	b := byte(1)
	if r.Commands {
		b |= 2
	}
	if r.AllKinds {
		b |= 4
	}
	e.Byte(b)
	e.Uvarint(uint64(len(r.Kinds)))
	for _, k := range r.Kinds {
		e.String(k)
	}
}

// decodeRuns reads what encodeRuns wrote.
func decodeRuns(d *sfq.Decoder) *sfq.Runs {
	b := d.Byte()
	if b == 0 {
		return nil
	}
	if b > 7 || b&1 == 0 {
		d.Fail("a worker's runs flags %#x", b)
		return nil
	}
	r := &sfq.Runs{Commands: b&2 != 0, AllKinds: b&4 != 0}
	n := d.Uvarint()
	if n > maxRunsKinds {
		d.Fail("a worker runs %d kinds", n)
		return nil
	}
	for i := uint64(0); i < n && d.Err() == nil; i++ {
		k := d.String()
		if k == "" || (len(r.Kinds) > 0 && r.Kinds[len(r.Kinds)-1] >= k) {
			d.Fail("a worker's kinds are out of order")
			return nil
		}
		r.Kinds = append(r.Kinds, k)
	}
	return r
}

// WorkerRunsToPB sets what a worker runs on its listing.
func WorkerRunsToPB(r *sfq.Runs, out *pb.WorkerInfo) {
	if r == nil {
		out.Commands, out.AllKinds = true, true
		return
	}
	out.Commands, out.AllKinds = r.Commands, r.AllKinds
	if r.AllKinds {
		out.NotKinds = r.Kinds
	} else {
		out.Kinds = r.Kinds
	}
}

// JobFormFromPB converts a job's form.
func JobFormFromPB(f pb.JobForm) (sfq.JobForm, error) {
	switch f {
	case pb.JobForm_JOB_FORM_UNSPECIFIED:
		return sfq.FormAny, nil
	case pb.JobForm_COMMAND:
		return sfq.FormCommand, nil
	case pb.JobForm_FUNCTION:
		return sfq.FormFunction, nil
	}
	return 0, invalidf("form", "%d is not command or function", int32(f))
}

// JobFormToPB converts a job's form.
func JobFormToPB(f sfq.JobForm) pb.JobForm {
	switch f {
	case sfq.FormCommand:
		return pb.JobForm_COMMAND
	case sfq.FormFunction:
		return pb.JobForm_FUNCTION
	}
	return pb.JobForm_JOB_FORM_UNSPECIFIED
}
