package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/baristahq/barista/sfq"
	"github.com/baristahq/barista/snapshot"
)

// Violation is one broken invariant. Rule is the number of the invariant
// in SPEC §8 (1 lost submits, 2 single terminal state and no concurrent
// attempts, 3 caps, 4 virtual time and counters, 5 equal hashes, 6
// fairness inside a class, 7 class and deadline order, 8 group caps,
// pauses and rate limits, 9 redrives, delays and expiry, 11 pools: no
// dispatch across pools, subscription bursts; 6 to 8 are read inside
// each pool; 12 kinds: no job to a worker that does not run it, none
// failed for want of one, no slot stranded past a reconnect; 13
// resources: no dispatch beyond a capacity or a tenant's limit, no unit
// held by a run that is not live; 14 schedules).
type Violation struct {
	Rule int
	Msg  string
}

func (v Violation) String() string { return fmt.Sprintf("invariant %d: %s", v.Rule, v.Msg) }

// Check runs every rule over a history and returns the violations, in
// rule order.
func Check(h *History) []Violation {
	var out []Violation
	for _, rule := range []func(*History) []Violation{
		checkSubmits, checkTerminal, checkAttempts, checkWatchers, checkCaps, checkVirtualTime, checkHashes, checkFairness, checkPriority,
		checkGroupCaps, checkPauses, checkRates, checkRedrive, checkDelays, checkSnoozes, checkPools, checkKinds, checkResources, checkSchedules,
	} {
		out = append(out, rule(h)...)
	}
	return out
}

// Report renders violations readably (at most 50).
func Report(vs []Violation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d invariant violation(s):\n", len(vs))
	for i, v := range vs {
		if i == 50 {
			fmt.Fprintf(&b, "  ... and %d more\n", len(vs)-50)
			break
		}
		fmt.Fprintf(&b, "  %s\n", v)
	}
	return b.String()
}

// checkSubmits (1): every acknowledged submit's job was created once
// under its key and is in the final job table, and no key made two jobs.
func checkSubmits(h *History) []Violation {
	var out []Violation
	created := map[string][]uint64{} // key -> jobs created under it
	for _, f := range h.Audit {
		if f.Kind == "submit" && f.Created && f.Key != "" {
			created[f.Key] = append(created[f.Key], f.Job)
		}
	}
	final := map[uint64]string{} // job -> key
	for _, f := range h.Audit {
		if f.Kind == "job" {
			final[f.Job] = f.Key
		}
	}
	keys := make([]string, 0, len(created))
	for k, jobs := range created {
		if len(jobs) > 1 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, Violation{1, fmt.Sprintf("key %q created %d jobs: %v", k, len(created[k]), created[k])})
	}
	for _, o := range h.Ops {
		if o.Kind != "submit" || !o.Acked() {
			continue
		}
		jobs := created[o.Key]
		switch {
		case len(jobs) == 0:
			out = append(out, Violation{1, fmt.Sprintf("acknowledged submit of job %d (key %q, acked %s) was never created in the log", o.Job, o.Key, o.Ack.Format(time.RFC3339Nano))})
		case jobs[0] != o.Job:
			out = append(out, Violation{1, fmt.Sprintf("submit with key %q was acknowledged as job %d but the log created job %d", o.Key, o.Job, jobs[0])})
		default:
			if key, ok := final[o.Job]; !ok {
				out = append(out, Violation{1, fmt.Sprintf("acknowledged job %d (key %q) is missing from the final state", o.Job, o.Key)})
			} else if key != o.Key {
				out = append(out, Violation{1, fmt.Sprintf("acknowledged job %d has key %q in the final state, not %q", o.Job, key, o.Key)})
			}
		}
	}
	return out
}

// checkTerminal (2): a job enters a terminal state at most once in each
// of its lives (a redrive starts a new one), and each of its attempts has
// at most one accepted Finished, of an attempt that was dispatched (a
// failed run that requeues its job is accepted too, so a job may have one
// per attempt).
func checkTerminal(h *History) []Violation {
	var out []Violation
	type fact struct {
		index   uint64
		kind    string
		attempt uint32
		what    string
	}
	facts := map[uint64][]fact{}
	var order []uint64
	seen := map[uint64]bool{}
	for _, f := range h.Audit {
		switch f.Kind {
		case "terminal", "finish", "redrive", "dispatch":
			if !seen[f.Job] && (f.Kind == "terminal" || f.Kind == "finish") {
				seen[f.Job] = true
				order = append(order, f.Job)
			}
			facts[f.Job] = append(facts[f.Job], fact{f.Index, f.Kind, f.Attempt, fmt.Sprintf("%s at index %d", f.State, f.Index)})
		}
	}
	for _, job := range order {
		fs := facts[job]
		sort.SliceStable(fs, func(i, j int) bool { return fs[i].index < fs[j].index })
		var terminal []string
		flush := func() {
			if len(terminal) > 1 {
				out = append(out, Violation{2, fmt.Sprintf("job %d reached a terminal state %d times: %s", job, len(terminal), strings.Join(terminal, ", "))})
			}
			terminal = nil
		}
		dispatched := map[uint32]bool{}
		finished := map[uint32][]uint64{}
		var attempts []uint32
		for _, f := range fs {
			switch f.kind {
			case "terminal":
				terminal = append(terminal, f.what)
			case "dispatch":
				dispatched[f.attempt] = true
			case "finish":
				if len(finished[f.attempt]) == 0 {
					attempts = append(attempts, f.attempt)
				}
				finished[f.attempt] = append(finished[f.attempt], f.index)
				if !dispatched[f.attempt] {
					out = append(out, Violation{2, fmt.Sprintf("job %d had an accepted Finished of attempt %d at index %d, an attempt never dispatched", job, f.attempt, f.index)})
				}
			case "redrive":
				flush()
			}
		}
		flush()
		for _, a := range attempts {
			if f := finished[a]; len(f) > 1 {
				out = append(out, Violation{2, fmt.Sprintf("job %d had %d accepted Finished reports of attempt %d, at indexes %v", job, len(f), a, f)})
			}
		}
	}
	return out
}

// checkRedrive (9): a job is redriven only once it ended (never while it
// is live, so it is never live twice), and every dispatch after a
// redrive runs it on a higher attempt than any before.
func checkRedrive(h *History) []Violation {
	var out []Violation
	redriven := map[uint64]bool{}
	for _, f := range h.Audit {
		if f.Kind == "redrive" {
			redriven[f.Job] = true
		}
	}
	if len(redriven) == 0 {
		return nil
	}
	byJob := map[uint64][]snapshot.AuditFact{}
	var jobs []uint64
	for _, f := range h.Audit {
		if !redriven[f.Job] || (f.Kind != "dispatch" && f.Kind != "terminal" && f.Kind != "redrive") {
			continue
		}
		if len(byJob[f.Job]) == 0 {
			jobs = append(jobs, f.Job)
		}
		byJob[f.Job] = append(byJob[f.Job], f)
	}
	for _, job := range jobs {
		fs := byJob[job]
		sort.SliceStable(fs, func(i, j int) bool { return fs[i].Index < fs[j].Index })
		ended := false
		var top uint32          // the highest attempt dispatched so far
		var lastRedrive uint64  // index of the last redrive (0: none)
		var dispatchedAt uint64 // index of the last dispatch
		for _, f := range fs {
			switch f.Kind {
			case "dispatch":
				if lastRedrive != 0 && f.Attempt <= top {
					out = append(out, Violation{9, fmt.Sprintf("index %d: job %d dispatched as attempt %d after its redrive at index %d, not above attempt %d it had run", f.Index, job, f.Attempt, lastRedrive, top)})
				}
				top = max(top, f.Attempt)
				ended, dispatchedAt = false, f.Index
			case "terminal":
				ended = true
			case "redrive":
				if !ended {
					if dispatchedAt != 0 {
						out = append(out, Violation{9, fmt.Sprintf("index %d: job %d redriven while live (dispatched as attempt %d at index %d, not ended since)", f.Index, job, top, dispatchedAt)})
					} else {
						out = append(out, Violation{9, fmt.Sprintf("index %d: job %d redriven before it ended", f.Index, job)})
					}
				}
				ended, lastRedrive = false, f.Index
			}
		}
	}
	return out
}

// checkAttempts (2): no attempt number of a job ran twice, and no two
// attempts of a job ran at the same time (beyond the journal's tick).
func checkAttempts(h *History) []Violation {
	var out []Violation
	byJob := map[uint64][]Attempt{}
	var jobs []uint64
	for _, a := range h.Attempts {
		if len(byJob[a.Job]) == 0 {
			jobs = append(jobs, a.Job)
		}
		byJob[a.Job] = append(byJob[a.Job], a)
	}
	for _, job := range jobs {
		runs := byJob[job]
		seen := map[uint32]string{}
		for _, a := range runs {
			if w, dup := seen[a.Attempt]; dup {
				out = append(out, Violation{2, fmt.Sprintf("job %d attempt %d ran twice (workers %s and %s)", job, a.Attempt, w, a.Worker)})
			}
			seen[a.Attempt] = a.Worker
		}
		for i := range runs {
			for j := i + 1; j < len(runs); j++ {
				a, b := runs[i], runs[j]
				if over := a.End.Sub(b.Start); b.Start.Before(a.End) && over > h.Overlap {
					out = append(out, Violation{2, fmt.Sprintf("job %d: attempt %d (worker %s) still ran %s after attempt %d (worker %s) started",
						job, a.Attempt, a.Worker, over.Round(time.Millisecond), b.Attempt, b.Worker)})
				}
			}
		}
	}
	return out
}

var terminalKinds = map[string]bool{"completed": true, "failed": true, "cancelled": true, "timed_out": true, "expired": true}

// checkWatchers (2, 5): every watcher saw the same event at a sequence
// number, and a job's stream has at most one terminal event between two
// redriven events.
func checkWatchers(h *History) []Violation {
	var out []Violation
	bySeq := map[uint64]WatchEvent{}
	for _, e := range h.Events {
		if prev, ok := bySeq[e.Seq]; ok {
			if prev.Job != e.Job || prev.Kind != e.Kind || prev.Attempt != e.Attempt {
				out = append(out, Violation{5, fmt.Sprintf("event %d: watcher %d saw job %d %s (attempt %d), watcher %d saw job %d %s (attempt %d)",
					e.Seq, prev.Watcher, prev.Job, prev.Kind, prev.Attempt, e.Watcher, e.Job, e.Kind, e.Attempt)})
			}
			continue
		}
		bySeq[e.Seq] = e
	}
	seqs := make([]uint64, 0, len(bySeq))
	for seq := range bySeq {
		seqs = append(seqs, seq)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	term := map[uint64]uint64{} // job -> seq of its terminal event since its last redrive
	for _, seq := range seqs {
		e := bySeq[seq]
		switch {
		case e.Kind == "redriven":
			delete(term, e.Job)
		case terminalKinds[e.Kind]:
			if s, ok := term[e.Job]; ok {
				out = append(out, Violation{2, fmt.Sprintf("job %d has two terminal events: %d and %d (%s)", e.Job, s, e.Seq, e.Kind)})
			}
			term[e.Job] = e.Seq
		}
	}
	return out
}

// checkCaps (3): after every assigning Dispatch, the tenant's counts are
// within the caps in force; the in-flight CPU cap admits one oversized
// job alone.
func checkCaps(h *History) []Violation {
	var out []Violation
	for _, f := range h.Audit {
		if f.Kind != "dispatch" {
			continue
		}
		if f.MaxRunning > 0 && f.Running > f.MaxRunning {
			out = append(out, Violation{3, fmt.Sprintf("index %d: dispatching job %d raised tenant %s to %d running, cap %d", f.Index, f.Job, f.Tenant, f.Running, f.MaxRunning)})
		}
		if f.MaxRunningSize > 0 && f.RunningSize > f.MaxRunningSize {
			out = append(out, Violation{3, fmt.Sprintf("index %d: dispatching job %d raised tenant %s to %d running %s jobs, cap %d", f.Index, f.Job, f.Tenant, f.RunningSize, f.Size, f.MaxRunningSize)})
		}
		if f.MaxInflightCPUMs > 0 && f.InflightCPUMs > f.MaxInflightCPUMs && f.InflightCPUMs != f.EstCostMs {
			out = append(out, Violation{3, fmt.Sprintf("index %d: dispatching job %d raised tenant %s to %d ms in flight, cap %d", f.Index, f.Job, f.Tenant, f.InflightCPUMs, f.MaxInflightCPUMs)})
		}
	}
	return out
}

// checkVirtualTime (4): virtual_now never decreases, and after every entry
// the counters equal what the job table derives.
func checkVirtualTime(h *History) []Violation {
	var out []Violation
	var last int64
	var lastIndex uint64
	for _, f := range h.Audit {
		if f.Kind != "entry" {
			continue
		}
		if f.VirtualNow < last {
			out = append(out, Violation{4, fmt.Sprintf("index %d: virtual_now went back from %d (index %d) to %d", f.Index, last, lastIndex, f.VirtualNow)})
		}
		last, lastIndex = f.VirtualNow, f.Index
		if f.Verify != "" {
			out = append(out, Violation{4, fmt.Sprintf("index %d: %s", f.Index, f.Verify)})
		}
	}
	return out
}

// checkHashes (5): every node ends at one index with one hash, which the
// audited replay of the leader's log reproduces.
func checkHashes(h *History) []Violation {
	var out []Violation
	if len(h.Nodes) == 0 {
		return []Violation{{5, "no node reported its final state"}}
	}
	ref := h.Nodes[0]
	for _, n := range h.Nodes[1:] {
		if n.Index != ref.Index || n.Hash != ref.Hash {
			out = append(out, Violation{5, fmt.Sprintf("node %s ends at index %d hash %.12s, node %s at index %d hash %.12s", n.ID, n.Index, n.Hash, ref.ID, ref.Index, ref.Hash)})
		}
	}
	if h.AuditIndex != ref.Index || h.AuditHash != ref.Hash {
		out = append(out, Violation{5, fmt.Sprintf("the audited replay ends at index %d hash %.12s, the nodes at index %d hash %.12s", h.AuditIndex, h.AuditHash, ref.Index, ref.Hash)})
	}
	return out
}

// checkPools (11): no dispatch gives a worker of one pool a job of
// another, and a tenant's subscription in a pool holds like a cap: after
// every dispatch in the pool its assigned and running jobs there are at
// most the burst in force.
func checkPools(h *History) []Violation {
	var out []Violation
	for _, f := range h.Audit {
		if f.Kind != "dispatch" {
			continue
		}
		if f.Pool != f.WorkerPool {
			out = append(out, Violation{11, fmt.Sprintf("index %d: job %d of pool %s (tenant %s) dispatched to a worker of pool %s", f.Index, f.Job, poolName(f.Pool), f.Tenant, poolName(f.WorkerPool))})
		}
		if f.Subscribed && f.PoolRunning > f.Burst {
			out = append(out, Violation{11, fmt.Sprintf("index %d: dispatching job %d raised tenant %s to %d running in pool %s, its subscription's burst %d", f.Index, f.Job, f.Tenant, f.PoolRunning, poolName(f.Pool), f.Burst)})
		}
	}
	return out
}

// poolName names a pool of an audit fact ("": the pool default).
func poolName(p string) string {
	if p == "" || p == sfq.DefaultPoolName {
		return sfq.DefaultPoolName
	}
	return p
}

// checkFairness (6): inside each pool and class, among jobs without a
// deadline:
// for each pair of fairness tenants, over every window of dispatches
// during which both stayed backlogged, the difference of their normalised
// charged service stays within the SFQ bound widened for the cost
// corrections of jobs in flight. A tenant is backlogged in a class while
// it has queued jobs without a deadline there (the audit's BackloggedIn;
// histories from before classes have only Backlogged, over all).
//
// A tenant is charged step(est_cost, w) at dispatch and corrected by
// step(cpu, w) - step(est_cost, w) when a run's Finished is accepted
// (SPEC §4: shares are in CPU cost). Between two dispatches the tags of
// backlogged tenants differ by at most one step each (the SFQ bound); an
// accepted correction moves a tag by at most one step of its job, so with
// at most k jobs of a tenant in flight its tag can drift k further steps
// from the bound before dispatch order pulls it back. The service
// difference over a window is the change of the tag difference, so it
// stays within twice (1+k_i)·step_i + (1+k_j)·step_j. A starved tenant
// breaks it: the others' service grows while its own does not.
func checkFairness(h *History) []Violation {
	var out []Violation
	// The pools checked, the pool default first, each with its fairness
	// tenants.
	pools := []string{""}
	tenants := map[string][]string{"": h.Fair}
	for p, ts := range h.PoolFair {
		if p != "" {
			pools = append(pools, p)
			tenants[p] = ts
		}
	}
	slices.Sort(pools[1:])
	fair := map[string]bool{}
	for _, ts := range tenants {
		for _, t := range ts {
			fair[t] = true
		}
	}
	type tstate struct {
		maxStep  int64 // largest step of one of its jobs
		inflight uint32
	}
	st := map[string]*tstate{}
	for t := range fair {
		st[t] = &tstate{}
	}
	step := func(c, w int64) int64 {
		v, err := sfq.TagStep(c, sfq.Weight(w))
		if err != nil {
			return 0
		}
		return int64(v)
	}
	for _, f := range h.Audit {
		if f.Kind == "dispatch" && fair[f.Tenant] {
			s := st[f.Tenant]
			s.maxStep = max(s.maxStep, step(f.EstCostMs, f.Weight))
			s.inflight = max(s.inflight, f.Running)
		}
		if f.Kind == "finish" && fair[f.Tenant] {
			s := st[f.Tenant]
			s.maxStep = max(s.maxStep, step(f.CPUMs, f.Weight))
		}
	}
	// Each job's pool and class, and whether it has a deadline, from its
	// dispatch.
	type jobKind struct {
		pool     string
		class    string
		deadline bool
	}
	kinds := map[uint64]jobKind{}
	used := map[[2]string]bool{}
	for _, f := range h.Audit {
		if f.Kind == "dispatch" {
			kinds[f.Job] = jobKind{f.Pool, classOf(f), f.Deadline}
			used[[2]string{f.Pool, classOf(f)}] = true
		}
	}
	for _, pool := range pools {
		fairIn := tenants[pool]
		for _, c := range sfq.Classes() {
			class := c.String()
			if !used[[2]string{pool, class}] {
				continue
			}
			var facts []snapshot.AuditFact
			for _, f := range h.Audit {
				if (f.Kind == "dispatch" || f.Kind == "finish") && kinds[f.Job] == (jobKind{pool, class, false}) {
					facts = append(facts, f)
				}
			}
			where := "class " + class
			if pool != "" {
				where = "pool " + pool + ", " + where
			}
			for x := 0; x < len(fairIn); x++ {
				for y := x + 1; y < len(fairIn); y++ {
					a, b := fairIn[x], fairIn[y]
					bound := 2 * (int64(1+st[a].inflight)*st[a].maxStep + int64(1+st[b].inflight)*st[b].maxStep)
					out = append(out, fairPair(facts, where, class, a, b, bound, step)...)
				}
			}
		}
	}
	return out
}

// classOf is a dispatched job's class (histories from before classes say
// none: normal).
func classOf(f snapshot.AuditFact) string {
	if f.Class == "" {
		return sfq.ClassNormal.String()
	}
	return f.Class
}

// checkPriority (7): at every assigning Dispatch, no class above the
// job's had an eligible job the worker fits, and, for a job without a
// deadline, no job with a deadline of its own class was eligible (the
// audit lists, just before each dispatch, the classes with an eligible
// job the worker fits: "high", and "high:deadline" for a deadline job).
func checkPriority(h *History) []Violation {
	var out []Violation
	for _, f := range h.Audit {
		if f.Kind != "dispatch" {
			continue
		}
		class, err := sfq.ParseClass(classOf(f))
		if err != nil {
			out = append(out, Violation{7, fmt.Sprintf("index %d: job %d has an unknown class %q", f.Index, f.Job, f.Class)})
			continue
		}
		for _, e := range f.Eligible {
			name, dl := strings.CutSuffix(e, ":deadline")
			other, err := sfq.ParseClass(name)
			switch {
			case err != nil:
				out = append(out, Violation{7, fmt.Sprintf("index %d: an unknown eligible class %q", f.Index, e)})
			case other.Above(class):
				out = append(out, Violation{7, fmt.Sprintf("index %d: dispatching job %d of class %s (tenant %s, size %s) while class %s had an eligible job the worker fits",
					f.Index, f.Job, class, f.Tenant, f.Size, other)})
			case other == class && dl && !f.Deadline:
				out = append(out, Violation{7, fmt.Sprintf("index %d: dispatching job %d of class %s without a deadline (tenant %s) while a job of its class with a deadline was eligible",
					f.Index, f.Job, class, f.Tenant)})
			}
		}
	}
	return out
}

// fairPair checks rule 6 for tenants a and b over facts (of one pool and
// class, named by where in a violation).
func fairPair(facts []snapshot.AuditFact, where, class, a, b string, bound int64, step func(c, w int64) int64) []Violation {
	in := func(list []string, t string) bool {
		for _, x := range list {
			if x == t {
				return true
			}
		}
		return false
	}
	open := false
	var d, lo, hi int64
	var start uint64
	var out []Violation
	closeWindow := func(end uint64) {
		if open && hi-lo > bound {
			out = append(out, Violation{6, fmt.Sprintf("%s: tenants %s and %s, both backlogged from index %d to %d: normalised service difference moved by %d virtual ms, bound %d",
				where, a, b, start, end, hi-lo, bound)})
		}
		open = false
	}
	for _, f := range facts {
		switch f.Kind {
		case "dispatch":
			both := in(f.Backlogged, a) && in(f.Backlogged, b)
			if f.BackloggedIn != nil {
				both = in(f.BackloggedIn, a+":"+class) && in(f.BackloggedIn, b+":"+class)
			}
			if !both {
				closeWindow(f.Index)
				continue
			}
			if !open {
				open, d, lo, hi, start = true, 0, 0, 0, f.Index
			}
			if f.Tenant == a {
				d += step(f.EstCostMs, f.Weight)
			} else if f.Tenant == b {
				d -= step(f.EstCostMs, f.Weight)
			}
		case "finish":
			if !open {
				continue
			}
			corr := step(f.CPUMs, f.Weight) - step(f.EstCostMs, f.Weight)
			if f.Tenant == a {
				d += corr
			} else if f.Tenant == b {
				d -= corr
			}
		default:
			continue
		}
		lo, hi = min(lo, d), max(hi, d)
	}
	if open {
		closeWindow(facts[len(facts)-1].Index)
	}
	return out
}

// checkGroupCaps (8): after every assigning Dispatch, the job's group runs
// no more jobs than the group's cap in force at that index (the admin's
// cap or the tenant's group_cap, and the tenant's own, whichever is
// lower; the unnamed group has none).
func checkGroupCaps(h *History) []Violation {
	var out []Violation
	for _, f := range h.Audit {
		if f.Kind == "dispatch" && f.GroupCap > 0 && f.GroupRunning > f.GroupCap {
			out = append(out, Violation{8, fmt.Sprintf("index %d: dispatching job %d raised group %q of tenant %s to %d running, its cap %d",
				f.Index, f.Job, f.Group, f.Tenant, f.GroupRunning, f.GroupCap)})
		}
	}
	return out
}

// checkSnoozes (9): a snoozed run is not a failure: the job's failures
// do not change; it is scheduled, due exactly its snooze after the run's
// end, unless its snoozes in a row reached max_snoozes (then failed) or a
// cancel was pending (then cancelled).
func checkSnoozes(h *History) []Violation {
	var out []Violation
	for _, f := range h.Audit {
		z := f.Snooze
		if f.Kind != "finish" || z == nil {
			continue
		}
		bad := func(format string, args ...any) {
			out = append(out, Violation{9, fmt.Sprintf("index %d: job %d snoozed %d ms: ", f.Index, f.Job, z.SnoozeMs) + fmt.Sprintf(format, args...)})
		}
		if z.Failures != z.FailuresBefore {
			bad("failures went from %d to %d", z.FailuresBefore, z.Failures)
		}
		switch {
		case z.Cancel != sfq.CancelNone.String():
			if z.State != sfq.Cancelled.String() && z.State != sfq.TimedOut.String() {
				bad("with a pending cancel (%s) it is %s", z.Cancel, z.State)
			}
		case z.Snoozes >= z.MaxSnoozes:
			if z.State != sfq.Failed.String() {
				bad("its snooze %d in a row (max_snoozes %d) left it %s, not failed", z.Snoozes, z.MaxSnoozes, z.State)
			}
		case z.State != sfq.Scheduled.String() || z.DueAt != z.At+z.SnoozeMs:
			bad("it is %s due at %d ms, want scheduled due at %d ms", z.State, z.DueAt, z.At+z.SnoozeMs)
		}
	}
	return out
}

// checkDelays (9): time rules in cluster time. A job scheduled (delayed,
// or backing off after a failed run) is not dispatched until a release,
// and no release comes before its due time unless it is a run-now; a
// job's first dispatch comes before its expire_at (a job dispatched once
// never expires).
func checkDelays(h *History) []Violation {
	var out []Violation
	due := map[uint64]int64{} // scheduled jobs not released yet, by due time
	for _, f := range h.Audit {
		switch f.Kind {
		case "scheduled":
			due[f.Job] = f.DueAt
		case "release":
			if !f.Forced && f.At < f.DueAt {
				out = append(out, Violation{9, fmt.Sprintf("index %d: job %d released at %d ms, before its due time %d ms", f.Index, f.Job, f.At, f.DueAt)})
			}
			delete(due, f.Job)
		case "dispatch":
			if d, ok := due[f.Job]; ok {
				out = append(out, Violation{9, fmt.Sprintf("index %d: job %d dispatched at %d ms while scheduled (due %d ms), never released", f.Index, f.Job, f.At, d)})
			}
			if f.Attempt == 1 && f.ExpireAt != 0 && f.At >= f.ExpireAt {
				out = append(out, Violation{9, fmt.Sprintf("index %d: job %d first dispatched at %d ms, at or after its expire_at %d ms", f.Index, f.Job, f.At, f.ExpireAt)})
			}
		}
	}
	return out
}
