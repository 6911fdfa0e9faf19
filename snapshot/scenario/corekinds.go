package scenario

// The core's side of kinds: the state machine keeps worker records and
// the retry policies of kinds beside the scheduling core, so the Core
// keeps them as the state machine does (fsm/kinds.go), with the state
// machine's own rules (fsm.WorkerRuns, fsm.FillFromPolicies,
// KindPolicy.Validate), so that both targets decide alike.

import (
	"fmt"
	"slices"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/sfq"
)

// kindsLevel is the level kinds need.
const kindsLevel = uint32(fsm.Level8)

func (c *Core) needKinds(what string) error {
	if c.level < kindsLevel {
		return fmt.Errorf("%s needs feature level %d", what, kindsLevel)
	}
	return nil
}

// coreWorker is a worker's record: what its last Hello said, less what it
// said it does not run since, and the run its last dispatch gave it.
type coreWorker struct {
	size    sfq.Size
	pool    string
	runs    *sfq.Runs // nil: every job
	job     sfq.JobID
	attempt uint32
}

// policyKey names a retry policy: a tenant ("": every tenant) and a kind.
type policyKey struct{ tenant, kind string }

// record returns worker id's record, made when it has none.
func (c *Core) record(id string) *coreWorker {
	w := c.workers[id]
	if w == nil {
		if c.workers == nil {
			c.workers = map[string]*coreWorker{}
		}
		w = &coreWorker{}
		c.workers[id] = w
	}
	return w
}

// held returns the run worker id holds, while it is live on it.
func (c *Core) held(id string, w *coreWorker) (sfq.JobID, uint32, bool) {
	if w == nil || w.job == 0 {
		return 0, 0, false
	}
	j, ok := c.S.Job(w.job)
	if !ok || !j.HeldBy(id, w.attempt) {
		return 0, 0, false
	}
	return w.job, w.attempt, true
}

// dispatchFor gives worker id of size and pool pid a job it runs, as the
// state machine's Dispatch does: never to a worker that holds a live run.
func (c *Core) dispatchFor(now sfq.Time, pid sfq.PoolID, pool string, size sfq.Size, id string) (sfq.Assignment, bool, error) {
	if err := sfq.ValidateName("worker_id", id); err != nil {
		return sfq.Assignment{}, false, err
	}
	w := c.record(id)
	w.size, w.pool = size, poolOf(pool)
	if job, attempt, live := c.held(id, w); live {
		return sfq.Assignment{}, false, fmt.Errorf("worker %q still holds job %d (attempt %d)", id, job, attempt)
	}
	a, ok, err := c.S.DispatchFor(now, pid, size, id, w.runs)
	if err == nil && ok {
		w.job, w.attempt = a.Job, a.Attempt
	}
	return a, ok, err
}

// Connect implements Target: the record takes what the Hello says, and
// the run it holds that the Hello does not list is lost at once.
func (c *Core) Connect(now sfq.Time, h Hello) error {
	if err := c.needKinds("worker"); err != nil {
		return err
	}
	if err := sfq.ValidateName("worker_id", h.Worker); err != nil {
		return err
	}
	if _, ok := c.S.PoolID(poolOf(h.Pool)); !ok {
		return fmt.Errorf("%w: %q", sfq.ErrUnknownPool, h.Pool)
	}
	if len(h.Holds) > fsm.MaxHeldJobs {
		return fmt.Errorf("holds: %d runs, at most %d", len(h.Holds), fsm.MaxHeldJobs)
	}
	var runs *sfq.Runs
	if h.Says {
		r, err := fsm.WorkerRuns(h.Commands, h.Kinds)
		if err != nil {
			return err
		}
		runs = &r
	}
	w := c.record(h.Worker)
	w.size, w.pool, w.runs = h.Size, poolOf(h.Pool), runs
	job, attempt, live := c.held(h.Worker, w)
	if !live || slices.Contains(h.Holds, Held{Job: job, Attempt: attempt}) {
		return nil
	}
	w.job, w.attempt = 0, 0
	_, err := c.S.Lose(now, job, attempt, h.Worker)
	return err
}

// WorkerState implements Target.
func (c *Core) WorkerState(id string) (WorkerState, bool) {
	w := c.workers[id]
	if w == nil {
		return WorkerState{}, false
	}
	st := WorkerState{Size: w.size, Pool: w.pool, Runs: w.runs}
	if job, attempt, live := c.held(id, w); live {
		st.Job, st.Attempt = job, attempt
	}
	return st, true
}

// unknownKind keeps, in the record of the worker that ended job id's run
// unknown_kind, that it does not run the job's kind this session.
func (c *Core) unknownKind(worker string, id sfq.JobID) {
	w := c.workers[worker]
	j, ok := c.S.Job(id)
	if w == nil || !ok {
		return
	}
	runs := w.runs.Without(j.Form(), j.Type())
	w.runs = &runs
}

// SetKindPolicy implements Target.
func (c *Core) SetKindPolicy(_ sfq.Time, tenant string, p fsm.KindPolicy, remove bool) error {
	if err := c.needKinds("kind"); err != nil {
		return err
	}
	if tenant != "" {
		if _, ok := c.S.TenantIndex(tenant); !ok {
			return fmt.Errorf("%w: %q", sfq.ErrUnknownTenant, tenant)
		}
	}
	key := policyKey{tenant, p.Kind}
	if remove {
		delete(c.policies, key)
		return nil
	}
	if err := p.Validate(); err != nil {
		return err
	}
	if c.policies == nil {
		c.policies = map[policyKey]fsm.KindPolicy{}
	}
	c.policies[key] = p
	return nil
}

// KindPolicy implements Target.
func (c *Core) KindPolicy(tenant, kind string) (fsm.KindPolicy, bool) {
	p, ok := c.policies[policyKey{tenant, kind}]
	return p, ok
}

// withPolicies fixes on sub the retry policies of its kind: its
// tenant's (when the tenant exists), then every tenant's.
func (c *Core) withPolicies(sub *sfq.Submission, known bool) {
	if len(c.policies) == 0 || sub.Type == "" {
		return
	}
	var mine, every *fsm.KindPolicy
	if p, ok := c.policies[policyKey{sub.Tenant, sub.Type}]; ok && known {
		mine = &p
	}
	if p, ok := c.policies[policyKey{"", sub.Type}]; ok {
		every = &p
	}
	fsm.FillFromPolicies(sub, mine, every)
}

// dropPolicies forgets a deleted tenant's policies.
func (c *Core) dropPolicies(tenant string) {
	for k := range c.policies {
		if k.tenant == tenant && tenant != "" {
			delete(c.policies, k)
		}
	}
}
