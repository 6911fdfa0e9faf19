// Package scenario runs replay scripts: readable scheduling scenarios (one
// command a line) fed through the scheduler, printing one line per dispatch
// request and the final state hash. Operators use them to ask "what shares
// would my tenants get?" before changing tiers; the tests use them to pin
// the exact dispatch order. docs/replay.md documents the grammar.
package scenario

// Run and the runner: a script read line by line, its output, and each
// command sent to its handler.

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/sfq"
)

// Target is what a script drives: the scheduling core directly, or the
// replicated state machine.
type Target interface {
	SetConfig(now sfq.Time, cfg sfq.Config) error
	Config() sfq.Config
	UpsertTenant(now sfq.Time, spec sfq.TenantSpec) error
	Tenant(name string) (sfq.TenantSpec, bool)
	DeleteTenant(now sfq.Time, name string) error
	// SetLevel raises the cluster's feature level, as a leader does once
	// every voter understands it (the core alone has no levels).
	SetLevel(now sfq.Time, level uint32) error
	// SetGroup sets a group's cap: the admin's (inherit, none or N), or
	// with asTenant the tenant's own (0 = none).
	SetGroup(now sfq.Time, tenant, group string, admin sfq.GroupCap, own uint32, asTenant bool) error
	// SetGroupRate sets a group's rate limit (an admin's; none removes
	// it), keeping its caps.
	SetGroupRate(now sfq.Time, tenant, group string, r sfq.RateLimit) error
	// Pause pauses or (resume) resumes a tenant, one of its groups, or
	// (all) all dispatch.
	Pause(now sfq.Time, tenant, group string, all, resume bool) error
	// Group returns a group's record.
	Group(tenant, group string) (sfq.Group, bool)
	Submit(now sfq.Time, sub sfq.Submission) (sfq.JobID, error)
	// Dispatch gives a worker of size and pool ("" = default) a job.
	Dispatch(now sfq.Time, pool string, size sfq.Size, worker string) (sfq.Assignment, bool, error)
	// SetPool creates or changes a pool (nil: keep); DeletePool deletes
	// one; SetSubscription sets a tenant's burst in a pool (nil: none);
	// PausePool pauses or resumes a pool (feature level 6).
	SetPool(now sfq.Time, name string, weights *string, required *bool) error
	DeletePool(now sfq.Time, name string) error
	SetSubscription(now sfq.Time, tenant, pool string, burst *uint32) error
	PausePool(now sfq.Time, pool string, resume bool) error
	// SetPoolSetting sets max_pools, implicit_tenants, default_tenant,
	// clock_tick, event_retention_per_tenant or max_worker_records (the
	// settings of the state machine beside the core's).
	SetPoolSetting(now sfq.Time, key, value string) error
	// Pool returns a pool's picture; LaneState a tenant's record in a
	// pool, that pool's virtual_now of class c, and its subscription.
	Pool(name string) (sfq.Pool, bool)
	LaneState(tenant, pool string, c sfq.Class) (t sfq.Tenant, vnow sfq.VirtualTime, burst uint32, subscribed, ok bool)
	// Job returns a copy of the job's record.
	Job(id sfq.JobID) (sfq.Job, bool)
	// TenantState returns a tenant's record and virtual_now of class c.
	TenantState(name string, c sfq.Class) (sfq.Tenant, sfq.VirtualTime, bool)
	// Explain returns why a job is where it is.
	Explain(id sfq.JobID) (sfq.Reason, error)
	// Place returns a queued job's place in line (sfq.Scheduler.Place).
	Place(now sfq.Time, id sfq.JobID) (sfq.Place, bool, error)
	// Estimate returns what was learned of a tenant's job type.
	Estimate(tenant, typ string) (sfq.TypeStat, bool)
	TenantName(index uint32) string
	Start(now sfq.Time, id sfq.JobID, attempt uint32, worker string) error
	Heartbeat(now sfq.Time, id sfq.JobID, attempt uint32, worker string, cpuMs int64) error
	Finish(now sfq.Time, id sfq.JobID, attempt uint32, worker string, outcome sfq.FinishOutcome, cpuMs int64, permanent bool, snoozeMs int64) error
	Cancel(now sfq.Time, id sfq.JobID) error
	Expire(now sfq.Time, id sfq.JobID, attempt uint32, kind sfq.InputKind) error
	// Release moves a scheduled job to its queue (refused if not due).
	Release(now sfq.Time, id sfq.JobID) error
	// Redrive moves dead letters back to their queues (feature level 5).
	Redrive(now sfq.Time, ids []sfq.JobID) error
	// Connect opens a worker's session (a WorkerHello, feature level 8):
	// what it runs, and the verdict on the job it holds that its Hello
	// does not list. WorkerState returns a worker's record.
	Connect(now sfq.Time, h Hello) error
	WorkerState(id string) (WorkerState, bool)
	// SetKindPolicy sets (remove: removes) the retry policy of a kind for
	// a tenant ("": every tenant), feature level 8; KindPolicy returns
	// one.
	SetKindPolicy(now sfq.Time, tenant string, p fsm.KindPolicy, remove bool) error
	KindPolicy(tenant, kind string) (fsm.KindPolicy, bool)
	// SetSchedule sets a schedule; ScheduleOp pauses, resumes, deletes or
	// runs one now; Fire and Miss are the leader's (feature level 8,
	// schedules.go: the state machine's alone). Schedule returns one.
	SetSchedule(now sfq.Time, def ScheduleDef) error
	ScheduleOp(now sfq.Time, tenant, name, op, key string) (FireResult, error)
	Fire(now sfq.Time, tenant, name string, slot sfq.Time, version uint64) (FireResult, error)
	Miss(now sfq.Time, tenant, name string, through sfq.Time, count, version uint64) (FireResult, error)
	Schedule(tenant, name string) (fsm.ScheduleInfo, bool)
	// SetResource declares or changes a resource, SetResourceLimit sets
	// a tenant's own limit on one (sfq.NoTenantMax: none), DeleteResource
	// deletes one (feature level 8); Resource returns one, ResourceHeld
	// the units a tenant holds of it.
	SetResource(now sfq.Time, spec sfq.ResourceSpec) error
	SetResourceLimit(now sfq.Time, name, tenant string, max uint32) error
	DeleteResource(now sfq.Time, name string) error
	Resource(name string) (sfq.ResourceInfo, bool)
	ResourceHeld(name, tenant string) uint32
	// Check verifies the target's invariants (run after every line).
	Check() error
	Hash() []byte
}

// Options control a run.
type Options struct {
	// JSON prints JSON lines instead of text.
	JSON bool
	// Quiet prints the error lines only (replay --report prints the
	// fairness report instead of the dispatches).
	Quiet bool
}

// Result summarises a run.
type Result struct {
	Dispatches int // dispatch requests, those that found nothing included
	Errors     int // lines refused or not understood
}

// ErrScript is returned by Run when any line was refused.
var ErrScript = errors.New("script had errors")

// Run executes the script read from r against t, writing the output to w.
// A refused or malformed line prints "error LINE: reason" and the run goes
// on; Run then returns ErrScript. A failed invariant check stops the run.
func Run(r io.Reader, t Target, w io.Writer, opt Options) (Result, error) {
	rn := &runner{t: t, out: bufio.NewWriter(w), opt: opt}
	rn.errOut = rn.out
	if opt.Quiet {
		rn.out = bufio.NewWriter(io.Discard)
	}
	defer rn.errOut.Flush()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		fields := splitFields(text)
		if len(fields) == 0 {
			continue
		}
		if err := rn.exec(fields); err != nil {
			rn.res.Errors++
			rn.emitError(line, err)
		}
		if err := t.Check(); err != nil {
			rn.emitError(line, err)
			return rn.res, fmt.Errorf("line %d: invariant check failed: %w", line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return rn.res, err
	}
	rn.emitHash(t.Hash())
	if rn.res.Errors > 0 {
		return rn.res, ErrScript
	}
	return rn.res, nil
}

type runner struct {
	t   Target
	out *bufio.Writer
	// errOut takes the error lines: out, or w under Quiet (when out
	// discards the rest).
	errOut *bufio.Writer
	opt    Options
	now    sfq.Time
	res    Result
	// workers are the workers the script connected (worker lines), by
	// ID: their dispatches are of their size and pool.
	workers map[string]connected
}

func (rn *runner) emitJSON(v any) { writeJSON(rn.out, v) }

func writeJSON(w *bufio.Writer, v any) {
	b, _ := json.Marshal(v)
	w.Write(b)
	w.WriteByte('\n')
}

// emitError reports a line's error: a refused command as its code and
// message (Refusal.Line), any other error as it is.
func (rn *runner) emitError(line int, err error) {
	text := err.Error()
	var r *fsm.Refusal
	if errors.As(err, &r) {
		text = r.Line()
	}
	if rn.opt.JSON {
		writeJSON(rn.errOut, map[string]any{"line": line, "error": text})
		return
	}
	fmt.Fprintf(rn.errOut, "error %d: %s\n", line, text)
}

func (rn *runner) emitHash(h []byte) {
	if rn.opt.JSON {
		rn.emitJSON(map[string]string{"hash": hex.EncodeToString(h)})
		return
	}
	fmt.Fprintf(rn.out, "hash=%x\n", h)
}

// dispatchLine is the JSON form of a dispatch result.
type dispatchLine struct {
	N       int             `json:"n"`
	Tenant  string          `json:"tenant,omitempty"`
	Job     uint64          `json:"job,omitempty"`
	Size    string          `json:"size,omitempty"`
	Group   string          `json:"group,omitempty"`
	Pool    string          `json:"pool,omitempty"`
	Worker  string          `json:"worker,omitempty"`
	StartMs json.RawMessage `json:"start_ms,omitempty"`
	None    bool            `json:"none,omitempty"`
}

func (rn *runner) exec(f []string) error {
	cmd, args := f[0], f[1:]
	switch cmd {
	case "at":
		return rn.at(args)
	case "config":
		return withKV(args, rn.config)
	case "tenant":
		return withKV(args, rn.tenant)
	case "delete":
		if len(args) != 1 {
			return fmt.Errorf("usage: delete TENANT")
		}
		return rn.t.DeleteTenant(rn.now, args[0])
	case "submit":
		return withKV(args, rn.submit)
	case "group":
		return withKV(args, rn.group)
	case "pool":
		return withKV(args, rn.pool)
	case "subscription":
		return withKV(args, rn.subscription)
	case "pause", "resume":
		return withKV(args, func(pos []string, opts options) error { return rn.pause(cmd, pos, opts) })
	case "level":
		if len(args) != 1 {
			return fmt.Errorf("usage: level N")
		}
		n, err := strconv.ParseUint(args[0], 10, 32)
		if err != nil {
			return fmt.Errorf("bad level %q", args[0])
		}
		return rn.t.SetLevel(rn.now, uint32(n))
	case "dispatch":
		return withKV(args, rn.dispatch)
	case "worker":
		return withKV(args, rn.worker)
	case "kind":
		return withKV(args, rn.kind)
	case "schedule":
		return withKV(args, rn.schedule)
	case "resource":
		return withKV(args, rn.resource)
	case "fire", "miss":
		return withKV(args, func(pos []string, opts options) error { return rn.fire(cmd, pos, opts) })
	case "start", "heartbeat", "finish", "cancel", "expire", "release":
		return withKV(args, func(pos []string, opts options) error { return rn.jobEvent(cmd, pos, opts) })
	case "redrive":
		return rn.redrive(args)
	case "show":
		return withKV(args, rn.show)
	case "explain":
		return rn.explain(args)
	case "place":
		return rn.place(args)
	}
	return fmt.Errorf("unknown command %q", cmd)
}

// splitFields splits a line at spaces, but not within double quotes
// (which it drops): spec="30 2 * * *" is one field.
func splitFields(text string) []string {
	var out []string
	var b strings.Builder
	quoted, any := false, false
	for _, r := range text {
		switch {
		case r == '"':
			quoted, any = !quoted, true
		case !quoted && (r == ' ' || r == '\t'):
			if any {
				out = append(out, b.String())
				b.Reset()
				any = false
			}
		default:
			b.WriteRune(r)
			any = true
		}
	}
	if any {
		out = append(out, b.String())
	}
	return out
}
