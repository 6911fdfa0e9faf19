// Package scenario runs replay scripts: readable scheduling scenarios (one
// command a line) fed through the scheduler, printing one line per dispatch
// request and the final state hash. Operators use them to ask "what shares
// would my tenants get?" before changing tiers; the tests use them to pin
// the exact dispatch order. docs/replay.md documents the grammar.
package scenario

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

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
	// SetPoolSetting sets max_pools, implicit_tenants or default_tenant.
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
	// Estimate returns what was learned of a tenant's job type.
	Estimate(tenant, typ string) (sfq.TypeStat, bool)
	TenantName(index uint32) string
	Start(now sfq.Time, id sfq.JobID, attempt uint32, worker string) error
	Heartbeat(now sfq.Time, id sfq.JobID, attempt uint32, worker string, cpuMs int64) error
	Finish(now sfq.Time, id sfq.JobID, attempt uint32, worker string, outcome sfq.FinishOutcome, cpuMs int64, permanent bool) error
	Cancel(now sfq.Time, id sfq.JobID) error
	Expire(now sfq.Time, id sfq.JobID, attempt uint32, kind sfq.InputKind) error
	// Release moves a scheduled job to its queue (refused if not due).
	Release(now sfq.Time, id sfq.JobID) error
	// Redrive moves dead letters back to their queues (feature level 5).
	Redrive(now sfq.Time, ids []sfq.JobID) error
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
		fields := strings.Fields(text)
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
}

func (rn *runner) emitJSON(v any) { writeJSON(rn.out, v) }

func writeJSON(w *bufio.Writer, v any) {
	b, _ := json.Marshal(v)
	w.Write(b)
	w.WriteByte('\n')
}

func (rn *runner) emitError(line int, err error) {
	if rn.opt.JSON {
		writeJSON(rn.errOut, map[string]any{"line": line, "error": err.Error()})
		return
	}
	fmt.Fprintf(rn.errOut, "error %d: %v\n", line, err)
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
	case "start", "heartbeat", "finish", "cancel", "expire", "release":
		return withKV(args, func(pos []string, opts options) error { return rn.jobEvent(cmd, pos, opts) })
	case "redrive":
		return rn.redrive(args)
	case "show":
		return withKV(args, rn.show)
	case "explain":
		return rn.explain(args)
	}
	return fmt.Errorf("unknown command %q", cmd)
}

// redrive JOB [JOB ...]: a Redrive by IDs.
func (rn *runner) redrive(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: redrive JOB [JOB ...]")
	}
	ids := make([]sfq.JobID, len(args))
	for i, a := range args {
		id, err := jobID(a)
		if err != nil {
			return err
		}
		ids[i] = id
	}
	return rn.t.Redrive(rn.now, ids)
}

// jobID reads a job id: a whole number above zero.
func jobID(s string) (sfq.JobID, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("bad job id %q", s)
	}
	return sfq.JobID(id), nil
}

func (rn *runner) at(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: at DURATION")
	}
	d, err := time.ParseDuration(args[0])
	if err != nil {
		return fmt.Errorf("bad time %q: %v", args[0], err)
	}
	t := sfq.Time(d.Milliseconds())
	if t < rn.now {
		return fmt.Errorf("time goes backwards: %s is before %s", args[0], time.Duration(rn.now)*time.Millisecond)
	}
	rn.now = t
	return nil
}

// option is one key=value argument.
type option struct{ k, v string }

// options are key=value arguments in the order given.
type options []option

func (o options) has(k string) bool {
	for _, x := range o {
		if x.k == k {
			return true
		}
	}
	return false
}

func (o options) get(k string) (string, bool) {
	for _, x := range o {
		if x.k == k {
			return x.v, true
		}
	}
	return "", false
}

// withKV runs a command that takes key=value arguments on args split by kv.
func withKV(args []string, run func(pos []string, opts options) error) error {
	pos, opts, err := kv(args)
	if err != nil {
		return err
	}
	return run(pos, opts)
}

// kv splits "key=value" arguments; bare words go to positional.
func kv(args []string) (positional []string, opts options, err error) {
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			positional = append(positional, a)
			continue
		}
		if opts.has(k) {
			return nil, nil, fmt.Errorf("%s given twice", k)
		}
		opts = append(opts, option{k, v})
	}
	return positional, opts, nil
}

func durationMs(key, v string) (int64, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("bad %s %q: want a duration like 1s or 250ms", key, v)
	}
	return d.Milliseconds(), nil
}

func count(key, v string) (uint32, error) {
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("bad %s %q: want a whole number", key, v)
	}
	return uint32(n), nil
}

// configKeys sets each key of the config command.
var configKeys = map[string]func(cfg *sfq.Config, k, v string) error{
	"policy":            func(cfg *sfq.Config, _, v string) (err error) { cfg.Policy, err = sfq.ParsePolicy(v); return },
	"decay":             func(cfg *sfq.Config, _, v string) (err error) { cfg.Decay, err = sfq.ParseDecay(v); return },
	"clamp":             func(cfg *sfq.Config, _, v string) (err error) { cfg.Clamp, err = sfq.ParseClamp(v); return },
	"ack_timeout":       func(cfg *sfq.Config, k, v string) (err error) { cfg.AckTimeoutMs, err = durationMs(k, v); return },
	"lease_timeout":     func(cfg *sfq.Config, k, v string) (err error) { cfg.LeaseTimeoutMs, err = durationMs(k, v); return },
	"max_attempts":      func(cfg *sfq.Config, k, v string) (err error) { cfg.DefaultMaxAttempts, err = count(k, v); return },
	"estimate":          func(cfg *sfq.Config, _, v string) (err error) { cfg.Estimate, err = sfq.ParseEstimateMode(v); return },
	"default_cost":      func(cfg *sfq.Config, k, v string) (err error) { cfg.DefaultCostMs, err = durationMs(k, v); return },
	"retry_backoff":     func(cfg *sfq.Config, k, v string) (err error) { cfg.RetryBackoffMs, err = durationMs(k, v); return },
	"retry_backoff_max": func(cfg *sfq.Config, k, v string) (err error) { cfg.RetryBackoffMaxMs, err = durationMs(k, v); return },
	"weights": func(cfg *sfq.Config, k, v string) (err error) {
		parts := strings.Split(v, ",")
		if len(parts) != sfq.NumTiers {
			return fmt.Errorf("weights wants %d comma-separated numbers, got %q", sfq.NumTiers, v)
		}
		for i, p := range parts {
			if cfg.TierWeights[i], err = count(k, p); err != nil {
				return err
			}
		}
		return nil
	},
}

func (rn *runner) config(pos []string, opts options) error {
	if len(pos) > 0 {
		return fmt.Errorf("config takes key=value pairs, not %q", pos[0])
	}
	cfg := rn.t.Config()
	var rest options
	for _, o := range opts {
		switch o.k {
		case "max_pools", "implicit_tenants", "default_tenant":
			// Settings of the state machine: each its own SetConfig.
			if err := rn.t.SetPoolSetting(rn.now, o.k, o.v); err != nil {
				return err
			}
		default:
			rest = append(rest, o)
		}
	}
	if len(rest) == 0 && len(opts) > 0 {
		return nil
	}
	for _, o := range rest {
		set, ok := configKeys[o.k]
		if !ok {
			return fmt.Errorf("unknown config key %q", o.k)
		}
		if err := set(&cfg, o.k, o.v); err != nil {
			return err
		}
	}
	return rn.t.SetConfig(rn.now, cfg)
}

func (rn *runner) tenant(pos []string, opts options) error {
	if len(pos) != 1 {
		return fmt.Errorf("usage: tenant NAME tier=T [multiplier=N cap=N cap_sm=N cap_md=N cap_lg=N inflight_cpu=DUR max_queued=N " +
			"max_class=C cap_critical=N cap_high=N deadlines=on|off deadline_cap=N group_cap=N|none group_order=fifo|fair max_groups=N " +
			"rate=N/DUR|none burst=N]")
	}
	spec, exists := rn.t.Tenant(pos[0])
	spec.Name = pos[0]
	if !opts.has("tier") && !exists {
		return fmt.Errorf("new tenant %q needs tier=", pos[0])
	}
	var err error
	for _, o := range opts {
		k, v := o.k, o.v
		switch k {
		case "tier":
			if spec.Tier, err = sfq.ParseTier(v); err != nil {
				return err
			}
		case "multiplier":
			spec.Multiplier, err = count(k, v)
		case "cap":
			spec.Caps.MaxRunning, err = count(k, v)
		case "cap_sm":
			spec.Caps.MaxRunningSize[sfq.SM], err = count(k, v)
		case "cap_md":
			spec.Caps.MaxRunningSize[sfq.MD], err = count(k, v)
		case "cap_lg":
			spec.Caps.MaxRunningSize[sfq.LG], err = count(k, v)
		case "inflight_cpu":
			spec.Caps.MaxInflightCPUMs, err = durationMs(k, v)
		case "max_queued":
			spec.Caps.MaxQueued, err = count(k, v)
		case "max_class":
			spec.MaxClass, err = sfq.ParseClass(v)
		case "cap_critical":
			spec.Caps.MaxRunningCritical, err = count(k, v)
		case "cap_high":
			spec.Caps.MaxRunningHigh, err = count(k, v)
		case "deadline_cap":
			spec.Caps.MaxRunningDeadline, err = count(k, v)
		case "deadlines":
			switch v {
			case "on":
				spec.AllowDeadlines = true
			case "off":
				spec.AllowDeadlines = false
			default:
				err = fmt.Errorf("bad deadlines %q: want on or off", v)
			}
		case "group_cap":
			if v == "none" {
				spec.GroupCap = 0
			} else if spec.GroupCap, err = count(k, v); err == nil && spec.GroupCap == 0 {
				err = fmt.Errorf("bad group_cap %q: want none or 1..%d", v, sfq.MaxGroupCap)
			}
		case "group_order":
			spec.GroupOrder, err = sfq.ParseGroupOrder(v)
		case "max_groups":
			if spec.MaxGroups, err = count(k, v); err == nil && spec.MaxGroups == 0 {
				err = fmt.Errorf("bad max_groups %q: want 1..%d", v, sfq.MaxMaxGroups)
			}
		case "rate", "burst":
			// read below, together
		default:
			return fmt.Errorf("unknown tenant key %q", k)
		}
		if err != nil {
			return err
		}
	}
	if spec.Rate, err = rateOpts(opts, spec.Rate); err != nil {
		return err
	}
	return rn.t.UpsertTenant(rn.now, spec)
}

// rateOpts reads rate=N/DUR|none and burst=N over the limit old: rate=
// replaces it (with burst= or the default burst), burst= alone changes
// the burst of the limit in force.
func rateOpts(opts options, old sfq.RateLimit) (sfq.RateLimit, error) {
	var burst uint32
	bv, hasBurst := opts.get("burst")
	if hasBurst {
		n, err := count("burst", bv)
		if err != nil || n == 0 {
			return old, fmt.Errorf("bad burst %q: want 1..%d", bv, sfq.MaxRateBurst)
		}
		burst = n
	}
	if rv, ok := opts.get("rate"); ok {
		return sfq.ParseRate(rv, burst)
	}
	if hasBurst {
		if old.None() {
			return old, fmt.Errorf("burst=%s without a rate: give rate=N/DUR", bv)
		}
		old.Burst = burst
		return old, old.Validate("rate")
	}
	return old, nil
}

// pause reads "pause TENANT [group=G]", "pause all" and the same for
// resume.
func (rn *runner) pause(cmd string, pos []string, opts options) error {
	if len(pos) == 2 && pos[0] == "pool" && len(opts) == 0 {
		return rn.t.PausePool(rn.now, pos[1], cmd == "resume")
	}
	group, hasGroup := opts.get("group")
	if len(pos) != 1 || len(opts) > 1 || (len(opts) == 1 && !hasGroup) || (pos[0] == "all" && hasGroup) {
		return fmt.Errorf("usage: %s TENANT [group=G] | %s all | %s pool NAME", cmd, cmd, cmd)
	}
	all := pos[0] == "all"
	tenant := pos[0]
	if all {
		tenant = ""
	}
	return rn.t.Pause(rn.now, tenant, group, all, cmd == "resume")
}

// times reads an optional "xN" repeat count.
func times(pos []string) (int, []string, error) {
	for i, p := range pos {
		if len(p) > 1 && p[0] == 'x' {
			n, err := strconv.Atoi(p[1:])
			if err != nil || n < 1 || n > 10_000_000 {
				return 0, nil, fmt.Errorf("bad repeat %q: want x1 .. x10000000", p)
			}
			return n, append(append([]string{}, pos[:i]...), pos[i+1:]...), nil
		}
	}
	return 1, pos, nil
}

func (rn *runner) submit(pos []string, opts options) error {
	n, pos, err := times(pos)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("usage: submit TENANT [xN] size=S cost=DUR|auto [class=C deadline=DUR group=G key=K type=T max_attempts=N timeout=DUR delay=DUR expire=DUR retry_backoff=DUR pool=P]")
	}
	sub := sfq.Submission{Tenant: pos[0]}
	for _, req := range []string{"size", "cost"} {
		if !opts.has(req) {
			return fmt.Errorf("submit needs %s=", req)
		}
	}
	for _, o := range opts {
		k, v := o.k, o.v
		switch k {
		case "size":
			sub.Size, err = sfq.ParseSize(v)
		case "cost":
			if v != "auto" { // auto: no stated cost (estimate=auto)
				sub.EstCostMs, err = durationMs(k, v)
			}
		case "class":
			sub.Class, err = sfq.ParseClass(v)
		case "deadline":
			sub.DeadlineMs, err = durationMs(k, v)
		case "key":
			sub.Key = v
		case "type":
			sub.Type = v
		case "max_attempts":
			sub.MaxAttempts, err = count(k, v)
		case "timeout":
			sub.TimeoutMs, err = durationMs(k, v)
		case "group":
			sub.Group = v
		case "delay":
			sub.DelayMs, err = durationMs(k, v)
		case "expire":
			sub.ExpireMs, err = durationMs(k, v)
		case "retry_backoff":
			sub.RetryBackoffMs, err = durationMs(k, v)
			sub.RetryBackoffSet = true
		case "pool":
			sub.Pool = v
		default:
			return fmt.Errorf("unknown submit key %q", k)
		}
		if err != nil {
			return err
		}
	}
	if n > 1 && sub.Key != "" {
		return fmt.Errorf("key= cannot be combined with a repeat count")
	}
	for range n {
		if _, err := rn.t.Submit(rn.now, sub); err != nil {
			return err
		}
	}
	return nil
}

// group sets a group's cap: "group TENANT GROUP cap=N|none|inherit" sets
// the admin's, "group TENANT GROUP tenant_cap=N|none" the tenant's own.
func (rn *runner) group(pos []string, opts options) error {
	usage := fmt.Errorf("usage: group TENANT GROUP cap=N|none|inherit | tenant_cap=N|none [rate=N/DUR|none] [burst=N]")
	if len(pos) != 2 || len(opts) == 0 {
		return usage
	}
	if opts.has("rate") || opts.has("burst") {
		old, _ := rn.t.Group(pos[0], pos[1])
		r, err := rateOpts(opts, old.Rate)
		if err != nil {
			return err
		}
		if err := rn.t.SetGroupRate(rn.now, pos[0], pos[1], r); err != nil {
			return err
		}
		var rest options
		for _, o := range opts {
			if o.k != "rate" && o.k != "burst" {
				rest = append(rest, o)
			}
		}
		opts = rest
		if len(opts) == 0 {
			return nil
		}
	}
	if len(opts) != 1 {
		return usage
	}
	o := opts[0]
	switch o.k {
	case "cap":
		cp, err := sfq.ParseGroupCap(o.v)
		if err != nil {
			return err
		}
		return rn.t.SetGroup(rn.now, pos[0], pos[1], cp, 0, false)
	case "tenant_cap":
		var n uint32
		if o.v != "none" {
			var err error
			if n, err = count(o.k, o.v); err != nil || n == 0 {
				return fmt.Errorf("bad tenant_cap %q: want none or 1..%d", o.v, sfq.MaxGroupCap)
			}
		}
		return rn.t.SetGroup(rn.now, pos[0], pos[1], 0, n, true)
	}
	return fmt.Errorf("unknown group key %q (want cap or tenant_cap)", o.k)
}

func (rn *runner) dispatch(pos []string, opts options) error {
	n, pos, err := times(pos)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("usage: dispatch SIZE [xN] [worker=NAME] [pool=P]")
	}
	size, err := sfq.ParseSize(pos[0])
	if err != nil {
		return err
	}
	worker, named := opts.get("worker")
	pool, _ := opts.get("pool")
	for _, o := range opts {
		if o.k != "worker" && o.k != "pool" {
			return fmt.Errorf("unknown dispatch key %q", o.k)
		}
	}
	for range n {
		rn.res.Dispatches++
		w := worker
		if !named {
			w = fmt.Sprintf("%s-%d", size, rn.res.Dispatches)
		}
		a, ok, err := rn.t.Dispatch(rn.now, pool, size, w)
		if err != nil {
			return err
		}
		rn.emitDispatch(a, ok, pool)
	}
	return nil
}

func (rn *runner) emitDispatch(a sfq.Assignment, ok bool, pool string) {
	if pool == sfq.DefaultPoolName {
		pool = ""
	}
	n := rn.res.Dispatches
	if !ok {
		if rn.opt.JSON {
			rn.emitJSON(dispatchLine{N: n, None: true})
		} else {
			fmt.Fprintf(rn.out, "dispatch %d none\n", n)
		}
		return
	}
	tenant := rn.t.TenantName(a.Tenant)
	start := sfq.FormatMillis(int64(a.Start))
	var group string
	if j, ok := rn.t.Job(a.Job); ok {
		group = j.Group()
	}
	if rn.opt.JSON {
		rn.emitJSON(dispatchLine{N: n, Tenant: tenant, Job: uint64(a.Job), Size: a.Size.String(), Group: group, Pool: pool, StartMs: json.RawMessage(start)})
		return
	}
	// Only jobs of a named group, and dispatches in a pool other than
	// default, say so: every other line keeps its form.
	var extra string
	if group != "" {
		extra += " group=" + group
	}
	if pool != "" {
		extra += " pool=" + pool
	}
	fmt.Fprintf(rn.out, "dispatch %d tenant=%s job=%d size=%s start=%s%s\n", n, tenant, a.Job, a.Size, start, extra)
}

func (rn *runner) jobEvent(cmd string, pos []string, opts options) error {
	if len(pos) < 1 {
		return fmt.Errorf("usage: %s JOB [key=value ...]", cmd)
	}
	id, err := jobID(pos[0])
	if err != nil {
		return err
	}
	job, ok := rn.t.Job(id)
	if !ok {
		return fmt.Errorf("%w: %d", sfq.ErrUnknownJob, id)
	}
	// By default a report names the current attempt and, while the job is
	// live, its worker (an ended job keeps the worker it ran on, which a
	// report of it does not name unless told).
	attempt, worker := job.Attempt, ""
	if job.State.Live() {
		worker = job.Worker
	}
	var cpu int64
	outcome := sfq.OutcomeOK
	permanent := false
	for _, o := range opts {
		k, v := o.k, o.v
		switch k {
		case "attempt":
			attempt, err = count(k, v)
		case "worker":
			worker = v
		case "cpu":
			if cmd != "heartbeat" && cmd != "finish" {
				return fmt.Errorf("%s takes no cpu=", cmd)
			}
			cpu, err = durationMs(k, v)
		case "outcome":
			if cmd != "finish" {
				return fmt.Errorf("%s takes no outcome=", cmd)
			}
			outcome, err = sfq.ParseOutcome(v)
		case "permanent":
			if cmd != "finish" {
				return fmt.Errorf("%s takes no permanent=", cmd)
			}
			permanent, err = strconv.ParseBool(v)
		default:
			return fmt.Errorf("unknown %s key %q", cmd, k)
		}
		if err != nil {
			return err
		}
	}
	switch cmd {
	case "start":
		return rn.t.Start(rn.now, id, attempt, worker)
	case "heartbeat":
		return rn.t.Heartbeat(rn.now, id, attempt, worker, cpu)
	case "finish":
		if !opts.has("cpu") {
			return fmt.Errorf("finish needs cpu=")
		}
		if permanent && outcome != sfq.OutcomeFailed {
			return fmt.Errorf("finish permanent=true needs outcome=failed")
		}
		return rn.t.Finish(rn.now, id, attempt, worker, outcome, cpu, permanent)
	case "cancel":
		return rn.t.Cancel(rn.now, id)
	case "release":
		if len(pos) != 1 || len(opts) > 0 {
			return fmt.Errorf("usage: release JOB")
		}
		return rn.t.Release(rn.now, id)
	case "expire":
		if len(pos) != 2 {
			return fmt.Errorf("usage: expire JOB ack|lease|timeout|ttl")
		}
		kinds := map[string]sfq.InputKind{"ack": sfq.InExpireAck, "lease": sfq.InExpireLease, "timeout": sfq.InExpireTimeout, "ttl": sfq.InExpireTTL}
		kind, ok := kinds[pos[1]]
		if !ok {
			return fmt.Errorf("bad expiry %q: want ack, lease, timeout or ttl", pos[1])
		}
		return rn.t.Expire(rn.now, id, attempt, kind)
	}
	return nil
}

// show prints a job's, a tenant's or a job type's state:
//
//	job ID tenant=T state=S attempt=N failures=N cancel=R cpu=MS class=C est=MS est_source=S
//	tenant NAME tier=T tag=MS vnow=MS running=N queued=SM/MD/LG billed_cpu=MS zombie_cpu=MS failures=N
//	type TENANT TYPE ema=MS samples=N
func (rn *runner) show(pos []string, opts options) error {
	usage := fmt.Errorf("usage: show job ID | show tenant NAME [class=C] [pool=P] | show group TENANT GROUP [class=C] | show type TENANT TYPE | show pool NAME [class=C]")
	if len(pos) < 1 {
		return usage
	}
	switch pos[0] {
	case "job":
		if len(pos) != 2 || len(opts) > 0 {
			return usage
		}
		id, err := strconv.ParseUint(pos[1], 10, 64)
		if err != nil {
			return fmt.Errorf("bad job id %q", pos[1])
		}
		j, ok := rn.t.Job(sfq.JobID(id))
		if !ok {
			return fmt.Errorf("%w: %d", sfq.ErrUnknownJob, id)
		}
		line := map[string]any{"job": j.ID, "tenant": rn.t.TenantName(j.Tenant), "state": j.State.String(),
			"attempt": j.Attempt, "failures": j.Failures, "cancel": j.Cancel.String(), "cpu_ms": j.CPUMs,
			"class": j.Class.String(), "est_ms": j.EstCostMs, "est_source": j.EstSource.String()}
		// A scheduled job shows its due time, a job with an expiry its
		// expire_at; other lines keep their form.
		var extra string
		if due := j.DueAt(); due != 0 {
			line["due_ms"] = due
			extra += fmt.Sprintf(" due=%d", due)
		}
		if x := j.ExpireAt(); x != 0 {
			line["expire_at_ms"] = x
			extra += fmt.Sprintf(" expire_at=%d", x)
		}
		if rn.opt.JSON {
			rn.emitJSON(line)
			return nil
		}
		fmt.Fprintf(rn.out, "job %d tenant=%s state=%s attempt=%d failures=%d cancel=%s cpu=%dms class=%s est=%dms est_source=%s%s\n",
			j.ID, line["tenant"], j.State, j.Attempt, j.Failures, j.Cancel, j.CPUMs, j.Class, j.EstCostMs, j.EstSource, extra)
		return nil
	case "type":
		if len(pos) != 3 || len(opts) > 0 {
			return usage
		}
		st, ok := rn.t.Estimate(pos[1], pos[2])
		if !ok {
			return fmt.Errorf("no estimate for tenant %q job type %q", pos[1], pos[2])
		}
		if rn.opt.JSON {
			rn.emitJSON(map[string]any{"tenant": pos[1], "type": st.Type, "ema_ms": st.EMAMs, "samples": st.Samples})
			return nil
		}
		fmt.Fprintf(rn.out, "type %s %s ema=%dms samples=%d\n", pos[1], st.Type, st.EMAMs, st.Samples)
		return nil
	case "group":
		if len(pos) != 3 {
			return usage
		}
		return rn.showGroup(pos[1], pos[2], opts)
	case "pool":
		if len(pos) != 2 {
			return usage
		}
		return rn.showPool(pos[1], opts)
	case "tenant":
	default:
		return usage
	}
	if len(pos) != 2 {
		return usage
	}
	class := sfq.ClassNormal
	pool, inPool := "", false
	for _, o := range opts {
		switch o.k {
		case "class":
			var err error
			if class, err = sfq.ParseClass(o.v); err != nil {
				return err
			}
		case "pool":
			pool, inPool = o.v, true
		default:
			return fmt.Errorf("unknown show tenant key %q", o.k)
		}
	}
	if inPool {
		return rn.showLane(pos[1], pool, class)
	}
	t, vnow, ok := rn.t.TenantState(pos[1], class)
	if !ok {
		return fmt.Errorf("%w: %q", sfq.ErrUnknownTenant, pos[1])
	}
	tag := t.Tag(class)
	if rn.opt.JSON {
		rn.emitJSON(map[string]any{"tenant": t.Name, "tier": t.Tier.String(), "class": class.String(), "tag_ms": json.RawMessage(tag.String()),
			"vnow_ms": json.RawMessage(vnow.String()), "running": t.Running, "queued": t.Queued,
			"billed_cpu_ms": t.Billing.CPUMs, "zombie_cpu_ms": t.Billing.ZombieCPUMs, "failures": t.Billing.Failures})
		return nil
	}
	fmt.Fprintf(rn.out, "tenant %s tier=%s tag=%s vnow=%s running=%d queued=%d/%d/%d billed_cpu=%dms zombie_cpu=%dms failures=%d\n",
		t.Name, t.Tier, tag, vnow, t.Running, t.Queued[sfq.SM], t.Queued[sfq.MD], t.Queued[sfq.LG],
		t.Billing.CPUMs, t.Billing.ZombieCPUMs, t.Billing.Failures)
	return nil
}

// showGroup prints "group TENANT GROUP cap=C tenant_cap=N|none limit=N|none
// running=N queued=N tag=MS gnow=MS": the admin's cap, the tenant's own,
// the cap in force, and (class=C, default normal) the group's tag and its
// tenant's group_now.
func (rn *runner) showGroup(tenant, group string, opts options) error {
	class := sfq.ClassNormal
	for _, o := range opts {
		if o.k != "class" {
			return fmt.Errorf("unknown show group key %q", o.k)
		}
		var err error
		if class, err = sfq.ParseClass(o.v); err != nil {
			return err
		}
	}
	t, _, ok := rn.t.TenantState(tenant, class)
	if !ok {
		return fmt.Errorf("%w: %q", sfq.ErrUnknownTenant, tenant)
	}
	g, ok := rn.t.Group(tenant, group)
	if !ok {
		return fmt.Errorf("tenant %q has no group %q (a group without jobs or settings is forgotten)", tenant, group)
	}
	own, limit := "none", "none"
	if g.TenantCap != 0 {
		own = strconv.FormatUint(uint64(g.TenantCap), 10)
	}
	if n := sfq.CapOf(&t, &g); n != 0 {
		limit = strconv.FormatUint(uint64(n), 10)
	}
	if rn.opt.JSON {
		rn.emitJSON(map[string]any{"tenant": tenant, "group": group, "class": class.String(), "cap": g.Cap.String(), "tenant_cap": own,
			"limit": limit, "running": g.Running, "queued": g.Queued, "tag_ms": json.RawMessage(g.Tag(class).String()),
			"gnow_ms": json.RawMessage(t.GroupNow(class).String())})
		return nil
	}
	fmt.Fprintf(rn.out, "group %s %s cap=%s tenant_cap=%s limit=%s running=%d queued=%d tag=%s gnow=%s\n",
		tenant, group, g.Cap, own, limit, g.Running, g.Queued, g.Tag(class), t.GroupNow(class))
	return nil
}

// explain prints why a job is where it is: "explain JOB reason=R" and the
// fields of that reason (sfq.Reason.Format).
func (rn *runner) explain(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: explain JOB")
	}
	id, err := jobID(args[0])
	if err != nil {
		return err
	}
	r, err := rn.t.Explain(id)
	if err != nil {
		return err
	}
	if rn.opt.JSON {
		line := map[string]any{"explain": uint64(id), "reason": r.Name()}
		switch r.Kind {
		case sfq.ReasonBehind:
			line["position"] = r.Position
		case sfq.ReasonCap:
			line["vertex"], line["current"], line["limit"] = r.Cap.String(), r.Current, r.Limit
		case sfq.ReasonWaiting:
			line["ahead"], line["tag_ms"], line["vnow_ms"] = r.Ahead, json.RawMessage(r.Tag.String()), json.RawMessage(r.VirtualNow.String())
		case sfq.ReasonAssigned, sfq.ReasonRunning:
			line["worker"] = r.Worker
		}
		rn.emitJSON(line)
		return nil
	}
	fmt.Fprintf(rn.out, "explain %d %s\n", id, r.Format())
	return nil
}

// pool reads "pool NAME [weights=default|equal|T:W,...]
// [subscriptions=optional|required]" and "pool delete NAME".
func (rn *runner) pool(pos []string, opts options) error {
	usage := fmt.Errorf("usage: pool NAME [weights=default|equal|TENANT:W,...] [subscriptions=optional|required] | pool delete NAME")
	if len(pos) == 2 && pos[0] == "delete" && len(opts) == 0 {
		return rn.t.DeletePool(rn.now, pos[1])
	}
	if len(pos) != 1 {
		return usage
	}
	var weights *string
	var required *bool
	for _, o := range opts {
		switch o.k {
		case "weights":
			w := o.v
			weights = &w
		case "subscriptions":
			var r bool
			switch o.v {
			case "required":
				r = true
			case "optional":
			default:
				return fmt.Errorf("bad subscriptions %q: want optional or required", o.v)
			}
			required = &r
		default:
			return fmt.Errorf("unknown pool key %q", o.k)
		}
	}
	return rn.t.SetPool(rn.now, pos[0], weights, required)
}

// subscription reads "subscription TENANT POOL burst=N|none".
func (rn *runner) subscription(pos []string, opts options) error {
	b, ok := opts.get("burst")
	if len(pos) != 2 || len(opts) != 1 || !ok {
		return fmt.Errorf("usage: subscription TENANT POOL burst=N|none")
	}
	var burst *uint32
	if b != "none" {
		n, err := count("burst", b)
		if err != nil {
			return err
		}
		burst = &n
	}
	return rn.t.SetSubscription(rn.now, pos[0], pos[1], burst)
}

// showPool prints "pool NAME weights=W subscriptions=optional|required
// paused=yes|no vnow=MS scheduled=N queued=N running=N tenants=N": its
// settings, its pause, its virtual_now of class=C (default normal), its
// jobs, and the tenants that have used it.
func (rn *runner) showPool(name string, opts options) error {
	class := sfq.ClassNormal
	for _, o := range opts {
		if o.k != "class" {
			return fmt.Errorf("unknown show pool key %q", o.k)
		}
		var err error
		if class, err = sfq.ParseClass(o.v); err != nil {
			return err
		}
	}
	p, ok := rn.t.Pool(name)
	if !ok {
		return fmt.Errorf("%w: %q", sfq.ErrUnknownPool, name)
	}
	subs, paused := "optional", "no"
	if p.Required {
		subs = "required"
	}
	if p.Paused {
		paused = "yes"
	}
	vnow := p.VirtualNow[class]
	if rn.opt.JSON {
		rn.emitJSON(map[string]any{"pool": p.Name, "weights": p.Weights.String(), "subscriptions": subs, "paused": p.Paused, "class": class.String(),
			"vnow_ms": json.RawMessage(vnow.String()), "scheduled": p.Scheduled, "queued": p.Queued, "running": p.Running, "tenants": p.Lanes})
		return nil
	}
	fmt.Fprintf(rn.out, "pool %s weights=%s subscriptions=%s paused=%s vnow=%s scheduled=%d queued=%d running=%d tenants=%d\n",
		p.Name, p.Weights, subs, paused, vnow, p.Scheduled, p.Queued, p.Running, p.Lanes)
	return nil
}

// showLane prints a tenant's line for one pool: the tenant line's fields
// as that pool holds them (its tag and usage there, that pool's
// virtual_now, its jobs and billing there), then "pool=P burst=N|none".
func (rn *runner) showLane(tenant, pool string, class sfq.Class) error {
	t, vnow, burst, subscribed, ok := rn.t.LaneState(tenant, pool, class)
	if !ok {
		if _, known := rn.t.Pool(pool); !known {
			return fmt.Errorf("%w: %q", sfq.ErrUnknownPool, pool)
		}
		return fmt.Errorf("%w: %q", sfq.ErrUnknownTenant, tenant)
	}
	b := "none"
	if subscribed {
		b = strconv.FormatUint(uint64(burst), 10)
	}
	tag := t.Tag(class)
	if rn.opt.JSON {
		rn.emitJSON(map[string]any{"tenant": t.Name, "pool": pool, "tier": t.Tier.String(), "class": class.String(), "tag_ms": json.RawMessage(tag.String()),
			"vnow_ms": json.RawMessage(vnow.String()), "running": t.Running, "queued": t.Queued,
			"billed_cpu_ms": t.Billing.CPUMs, "zombie_cpu_ms": t.Billing.ZombieCPUMs, "failures": t.Billing.Failures, "burst": b})
		return nil
	}
	fmt.Fprintf(rn.out, "tenant %s tier=%s tag=%s vnow=%s running=%d queued=%d/%d/%d billed_cpu=%dms zombie_cpu=%dms failures=%d pool=%s burst=%s\n",
		t.Name, t.Tier, tag, vnow, t.Running, t.Queued[sfq.SM], t.Queued[sfq.MD], t.Queued[sfq.LG],
		t.Billing.CPUMs, t.Billing.ZombieCPUMs, t.Billing.Failures, pool, b)
	return nil
}
