package scenario

// Kinds (SPEC §3 "Kinds", §5 "Worker protocol"; feature level 8): the
// commands that connect a worker (what it runs, the runs its Hello
// lists), set the retry policy of a kind, and show both.

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/sfq"
)

// Hello is a worker's connection: its size and pool, what it says it runs
// (Says false: it says nothing, and runs every job, as a worker of a build
// before kinds), and the runs its Hello lists (a reconnect's verdict on
// the job the state says it holds).
type Hello struct {
	Worker   string
	Size     sfq.Size
	Pool     string // "" = default
	Says     bool
	Commands bool
	Kinds    []string
	Holds    []Held
}

// Held is a run a Hello lists: a job and its attempt.
type Held struct {
	Job     sfq.JobID
	Attempt uint32
}

// WorkerState is a worker's record: its size and pool, what it runs (nil:
// every job) and the run it holds (Job 0: none live).
type WorkerState struct {
	Size    sfq.Size
	Pool    string
	Runs    *sfq.Runs
	Job     sfq.JobID
	Attempt uint32
}

// connected is what the script said of a worker it connected: the size
// and pool its dispatches are of.
type connected struct {
	size sfq.Size
	pool string
}

// worker reads "worker ID size=S [pool=P] [commands] [kinds=a,b]
// [holds=JOB/ATTEMPT,...]": a worker opens a session (a WorkerHello).
func (rn *runner) worker(pos []string, opts options) error {
	usage := fmt.Errorf("usage: worker ID size=S [pool=P] [commands] [kinds=a,b,...] [holds=JOB/ATTEMPT,...]")
	if len(pos) < 1 || len(pos) > 2 || (len(pos) == 2 && pos[1] != "commands") {
		return usage
	}
	h := Hello{Worker: pos[0], Commands: len(pos) == 2}
	if !opts.has("size") {
		return fmt.Errorf("worker needs size=")
	}
	var err error
	for _, o := range opts {
		switch o.k {
		case "size":
			h.Size, err = sfq.ParseSize(o.v)
		case "pool":
			h.Pool = o.v
		case "kinds":
			if o.v == "" {
				return fmt.Errorf("bad kinds %q: want a,b,... (a worker that runs no function job gives no kinds=)", o.v)
			}
			h.Kinds = strings.Split(o.v, ",")
		case "holds":
			h.Holds, err = holds(o.v)
		default:
			return fmt.Errorf("unknown worker key %q", o.k)
		}
		if err != nil {
			return err
		}
	}
	h.Says = h.Commands || len(h.Kinds) > 0
	if err := rn.t.Connect(rn.now, h); err != nil {
		return err
	}
	if rn.workers == nil {
		rn.workers = map[string]connected{}
	}
	pool := h.Pool
	if pool == sfq.DefaultPoolName {
		pool = ""
	}
	rn.workers[h.Worker] = connected{size: h.Size, pool: pool}
	return nil
}

// holds reads "JOB/ATTEMPT,...".
func holds(v string) ([]Held, error) {
	var out []Held
	for _, p := range strings.Split(v, ",") {
		j, a, ok := strings.Cut(p, "/")
		id, err := jobID(j)
		if !ok || err != nil {
			return nil, fmt.Errorf("bad holds %q: want JOB/ATTEMPT[,JOB/ATTEMPT]", v)
		}
		n, err := strconv.ParseUint(a, 10, 32)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("bad holds %q: want JOB/ATTEMPT,... (attempts count from 1)", v)
		}
		out = append(out, Held{Job: id, Attempt: uint32(n)})
	}
	return out, nil
}

// kind reads "kind TENANT|* KIND [max_attempts=N] [backoff=D]
// [backoff_max=D] [timeout=D]" (set the retry policy of a kind, for one
// tenant or with * for every tenant) and "kind TENANT|* KIND remove".
func (rn *runner) kind(pos []string, opts options) error {
	usage := fmt.Errorf("usage: kind TENANT|* KIND [max_attempts=N] [backoff=DUR] [backoff_max=DUR] [timeout=DUR] | kind TENANT|* KIND remove")
	if len(pos) < 2 || len(pos) > 3 || (len(pos) == 3 && (pos[2] != "remove" || len(opts) > 0)) {
		return usage
	}
	tenant := pos[0]
	if tenant == "*" {
		tenant = ""
	}
	p := fsm.KindPolicy{Kind: pos[1], RetryBackoffMs: -1}
	if len(pos) == 3 {
		return rn.t.SetKindPolicy(rn.now, tenant, p, true)
	}
	var err error
	for _, o := range opts {
		switch o.k {
		case "max_attempts":
			p.MaxAttempts, err = count(o.k, o.v)
		case "backoff":
			p.RetryBackoffMs, err = durationMs(o.k, o.v)
		case "backoff_max":
			p.RetryBackoffMaxMs, err = durationMs(o.k, o.v)
		case "timeout":
			p.TimeoutMs, err = durationMs(o.k, o.v)
		default:
			return fmt.Errorf("unknown kind key %q (want max_attempts, backoff, backoff_max or timeout)", o.k)
		}
		if err != nil {
			return err
		}
	}
	return rn.t.SetKindPolicy(rn.now, tenant, p, false)
}

// dispatchWorker resolves the pool of a dispatch to worker w: a worker
// the script connected asks for jobs of its own size and pool.
func (rn *runner) dispatchWorker(w string, named bool, size sfq.Size, pool string, poolGiven bool) (string, bool, error) {
	c, ok := rn.workers[w]
	if !named || !ok {
		return pool, false, nil
	}
	if size != c.size {
		return "", false, fmt.Errorf("worker %s connected with size=%s: it asks for %s jobs (connect it again to change its size)", w, c.size, c.size)
	}
	if p := poolOf(pool); poolGiven && p != c.pool {
		return "", false, fmt.Errorf("worker %s connected in pool %s: it asks for jobs of that pool (connect it again to change its pool)", w, poolName(c.pool))
	}
	return c.pool, true, nil
}

// poolOf is a pool's name in a record: "" for the pool default.
func poolOf(p string) string {
	if p == sfq.DefaultPoolName {
		return ""
	}
	return p
}

// poolName is a pool's name as shown: default for "".
func poolName(p string) string {
	if p == "" {
		return sfq.DefaultPoolName
	}
	return p
}

// runsText says what a worker runs: "commands=yes|no kinds=K" where K is
// the kinds it registered (a,b; none), all, or all_but:a,b (every kind
// but those it said it does not run).
func runsText(r *sfq.Runs) (commands, kinds string) {
	if r == nil {
		return "yes", "all"
	}
	commands = "no"
	if r.Commands {
		commands = "yes"
	}
	list := strings.Join(r.Kinds, ",")
	switch {
	case r.AllKinds && len(r.Kinds) == 0:
		kinds = "all"
	case r.AllKinds:
		kinds = "all_but:" + list
	case len(r.Kinds) == 0:
		kinds = "none"
	default:
		kinds = list
	}
	return commands, kinds
}

// showWorker prints "worker ID size=S pool=P commands=yes|no kinds=K
// job=JOB/ATTEMPT|none": its record, what it runs, and the run it holds.
func (rn *runner) showWorker(id string) error {
	w, ok := rn.t.WorkerState(id)
	if !ok {
		return fmt.Errorf("no worker %q (a worker has a record once it connected or was given a dispatch)", id)
	}
	commands, kinds := runsText(w.Runs)
	job := "none"
	if w.Job != 0 {
		job = fmt.Sprintf("%d/%d", w.Job, w.Attempt)
	}
	if rn.opt.JSON {
		rn.emitJSON(map[string]any{"worker": id, "size": w.Size.String(), "pool": poolName(w.Pool), "commands": commands == "yes", "kinds": kinds, "job": job})
		return nil
	}
	fmt.Fprintf(rn.out, "worker %s size=%s pool=%s commands=%s kinds=%s job=%s\n", id, w.Size, poolName(w.Pool), commands, kinds, job)
	return nil
}

// showKind prints "kind TENANT|* KIND max_attempts=N backoff=DUR
// backoff_max=DUR timeout=DUR", each value "unset" where the policy sets
// none.
func (rn *runner) showKind(tenant, kind string) error {
	name := tenant
	if tenant == "*" {
		tenant = ""
	}
	p, ok := rn.t.KindPolicy(tenant, kind)
	if !ok {
		return fmt.Errorf("no retry policy of kind %q for %s", kind, name)
	}
	ms := func(v int64, unset bool) string {
		if unset {
			return "unset"
		}
		return strconv.FormatInt(v, 10) + "ms"
	}
	attempts := "unset"
	if p.MaxAttempts != 0 {
		attempts = strconv.FormatUint(uint64(p.MaxAttempts), 10)
	}
	backoff, backoffMax, timeout := ms(p.RetryBackoffMs, p.RetryBackoffMs < 0), ms(p.RetryBackoffMaxMs, p.RetryBackoffMaxMs == 0), ms(p.TimeoutMs, p.TimeoutMs == 0)
	if rn.opt.JSON {
		rn.emitJSON(map[string]any{"kind": kind, "tenant": name, "max_attempts": attempts, "backoff": backoff, "backoff_max": backoffMax, "timeout": timeout})
		return nil
	}
	fmt.Fprintf(rn.out, "kind %s %s max_attempts=%s backoff=%s backoff_max=%s timeout=%s\n", name, kind, attempts, backoff, backoffMax, timeout)
	return nil
}

// jobForm is what a job's show line adds for a job with a form (feature
// level 8): its form, a function job's kind, and the retry policy fixed
// on it at submit ("config": the cluster's, read when it is used).
func jobForm(j *sfq.Job, line map[string]any) string {
	if j.Form() == sfq.FormAny {
		return ""
	}
	out := " form=" + j.Form().String()
	line["form"] = j.Form().String()
	if j.Form() == sfq.FormFunction {
		out += " kind=" + j.Type()
		line["kind"] = j.Type()
	}
	backoff, backoffMax, timeout := "config", "config", "none"
	if ms, set := j.RetryBackoff(); set {
		backoff = strconv.FormatInt(ms, 10) + "ms"
	}
	if ms := j.RetryBackoffMax(); ms != 0 {
		backoffMax = strconv.FormatInt(ms, 10) + "ms"
	}
	if j.TimeoutMs != 0 {
		timeout = strconv.FormatInt(j.TimeoutMs, 10) + "ms"
	}
	line["max_attempts"], line["backoff"], line["backoff_max"], line["timeout"] = j.MaxAttempts, backoff, backoffMax, timeout
	return out + fmt.Sprintf(" max_attempts=%d backoff=%s backoff_max=%s timeout=%s", j.MaxAttempts, backoff, backoffMax, timeout)
}
