package sfq

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// world drives a scheduler and a twin with the same random calls. The twin
// is periodically replaced by a copy decoded from the main scheduler's
// encoding, so that a restored scheduler must keep behaving identically.
type world struct {
	s, twin *Scheduler
	now     Time
	tenants []string
	vnow    VirtualTime
	frozen  []frozenCheck
	model   *refModel
	groups  []string // the group names submits draw from ("" is the unnamed group)
}

type frozenCheck struct {
	v     *View
	bytes []byte
}

func encodeView(v *View) []byte {
	var buf bytes.Buffer
	e := NewEncoder(&buf)
	v.Encode(e)
	if err := e.Flush(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

func decodeBytes(b []byte) (*Scheduler, error) {
	return Decode(NewDecoder(bufio.NewReader(bytes.NewReader(b))))
}

// fataler is what reloaded needs of a *testing.T or a *rapid.T.
type fataler interface {
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// reloaded decodes the encoding of s's state and checks that it hashes as
// s does.
func reloaded(t fataler, s *Scheduler) *Scheduler {
	d, err := decodeBytes(encodeView(s.Freeze()))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if d.Hash() != s.Hash() {
		t.Fatal("decoded state hashes differently")
	}
	return d
}

// both calls f on the scheduler and its twin and requires the same result.
func both[R comparable](t *rapid.T, w *world, what string, f func(s *Scheduler) (R, error)) (R, error) {
	r1, err1 := f(w.s)
	r2, err2 := f(w.twin)
	if r1 != r2 || (err1 == nil) != (err2 == nil) {
		t.Fatalf("%s diverged: %v/%v vs %v/%v", what, r1, err1, r2, err2)
	}
	return r1, err1
}

func drawCaps(t *rapid.T) Caps {
	var c Caps
	if rapid.Bool().Draw(t, "has_cap") {
		c.MaxRunning = uint32(rapid.IntRange(1, 4).Draw(t, "cap"))
	}
	for sz := range NumSizes {
		if rapid.IntRange(0, 3).Draw(t, "has_size_cap") == 0 {
			c.MaxRunningSize[sz] = uint32(rapid.IntRange(1, 3).Draw(t, "size_cap"))
		}
	}
	if rapid.IntRange(0, 3).Draw(t, "has_inflight") == 0 {
		c.MaxInflightCPUMs = rapid.Int64Range(500, 8000).Draw(t, "inflight")
	}
	if rapid.IntRange(0, 2).Draw(t, "has_class_caps") == 0 {
		c.MaxRunningCritical = uint32(rapid.IntRange(0, 2).Draw(t, "cap_critical"))
		c.MaxRunningHigh = uint32(rapid.IntRange(0, 2).Draw(t, "cap_high"))
	}
	if rapid.IntRange(0, 2).Draw(t, "has_deadline_cap") == 0 {
		c.MaxRunningDeadline = uint32(rapid.IntRange(1, 2).Draw(t, "deadline_cap"))
	}
	return c
}

// drawSpec draws a tenant's settings.
func drawSpec(t *rapid.T, name string) TenantSpec {
	return TenantSpec{Name: name, Tier: Tier(rapid.IntRange(0, 4).Draw(t, "tier")), Multiplier: uint32(rapid.IntRange(1, 3).Draw(t, "mult")),
		Caps: drawCaps(t), MaxClass: Class(rapid.IntRange(0, NumClasses-1).Draw(t, "max_class")), AllowDeadlines: rapid.IntRange(0, 3).Draw(t, "deadlines") > 0,
		GroupCap: uint32(rapid.SampledFrom([]int{0, 0, 1, 2}).Draw(t, "group_cap")), GroupOrder: GroupOrder(rapid.IntRange(0, 1).Draw(t, "group_order")),
		MaxGroups: uint32(rapid.SampledFrom([]int{0, 0, 1, 2}).Draw(t, "max_groups"))}
}

// groupNames are the groups the property tests use ("" is the unnamed one).
var groupNames = []string{"", "", "g1", "g2", "g3"}

// TestSchedulerProperties drives a scheduler, its twin and the reference
// model with random commands (tenants with every kind of cap, classes,
// deadlines, groups with caps and both group orders) and checks after every
// step: Verify, every pick against the model's, every cap (group caps
// included) at every dispatch, tags and virtual times against the model,
// the reason of any job, twin determinism and restore-and-continue.
func TestSchedulerProperties(t *testing.T) {
	defer withFreshDeadlines(freshDeadlines)
	rapid.Check(t, func(t *rapid.T) {
		freshDeadlines = rapid.SampledFrom([]int{1, 3, 2048}).Draw(t, "fresh_deadlines")
		schedulerProperties(t, groupNames, 6, 300)
	})
}

// TestManyGroupsProperties is TestSchedulerProperties with few tenants
// and up to 24 groups each, so that the trees of a slot grow deep.
func TestManyGroupsProperties(t *testing.T) {
	many := []string{"", ""}
	for i := range 24 {
		many = append(many, fmt.Sprintf("g%d", i))
	}
	rapid.Check(t, func(t *rapid.T) { schedulerProperties(t, many, 2, 250) })
}

func schedulerProperties(t *rapid.T, groups []string, maxTenants, maxSteps int) {
	{
		cfg := DefaultConfig()
		cfg.Clamp = ClampMode(rapid.IntRange(0, 1).Draw(t, "clamp"))
		if rapid.Bool().Draw(t, "reserve") {
			cfg.Policy = Reserve{Margin: VirtualTime(rapid.Int64Range(0, 2_000_000).Draw(t, "margin"))}
		}
		if rapid.Bool().Draw(t, "decay") {
			cfg.Decay = &Decay{HalfLifeMs: rapid.Int64Range(1000, 100_000).Draw(t, "half_life"), NormMs: rapid.Int64Range(1000, 50_000).Draw(t, "norm")}
		}
		cfg.Estimate = EstimateMode(rapid.IntRange(0, 1).Draw(t, "estimate"))
		cfg.DefaultCostMs = rapid.Int64Range(1, 5000).Draw(t, "default_cost")
		cfg.AckTimeoutMs, cfg.LeaseTimeoutMs = 5_000, 10_000
		cfg.ResourceReserveAfterMs = rapid.Int64Range(0, 30_000).Draw(t, "reserve_after")
		s1, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		s2, _ := New(cfg)
		w := &world{s: s1, twin: s2, model: newRefModel(), groups: groups}
		w.model.res.after = Time(cfg.ResourceReserveAfterMs)
		for _, name := range []string{"r1", "r2"} {
			if rapid.Bool().Draw(t, "declare_"+name) {
				spec := drawResourceSpec(t, name)
				both(t, w, "declare", func(s *Scheduler) (bool, error) { return s.SetResource(w.now, spec) })
			}
		}
		w.model.settle(w.s)
		nt := rapid.IntRange(1, maxTenants).Draw(t, "tenants")
		for i := range nt {
			name := fmt.Sprintf("t%d", i)
			w.tenants = append(w.tenants, name)
			spec := drawSpec(t, name)
			both(t, w, "upsert", func(s *Scheduler) (bool, error) { return s.UpsertTenant(spec) })
		}
		steps := rapid.IntRange(1, maxSteps).Draw(t, "steps")
		for step := range steps {
			w.step(t, step)
		}
		if h1, h2 := w.s.Hash(), w.twin.Hash(); h1 != h2 {
			t.Fatalf("final hashes differ: %x vs %x", h1, h2)
		}
		for _, f := range w.frozen {
			if got := encodeView(f.v); !bytes.Equal(got, f.bytes) {
				t.Fatalf("a frozen view changed after later writes")
			}
		}
	}
}

// requeueIdle reports whether a requeue of live job j would find nothing
// of its tenant queued in its class under group_order=fair (the group idle
// rule then applies).
func (w *world) requeueIdle(j Job) bool {
	tn, _ := w.s.TenantAt(j.Tenant)
	return j.State.Live() && j.DeadlineAt() == 0 && tn.GroupOrder == GroupFair && w.model.groupIdle(w.s, j.Tenant, j.Class)
}

// liveJob picks a job that is assigned or running, if any.
func (w *world) liveJob(t *rapid.T) (Job, bool) {
	var live []JobID
	w.s.Jobs(0, func(j *Job) bool {
		if j.State.Live() {
			live = append(live, j.ID)
		}
		return true
	})
	if len(live) == 0 {
		return Job{}, false
	}
	j, _ := w.s.Job(rapid.SampledFrom(live).Draw(t, "live_job"))
	return j, true
}

func (w *world) anyJob(t *rapid.T) JobID {
	if w.s.NextJobID() == 1 {
		return 1
	}
	return JobID(rapid.Uint64Range(1, uint64(w.s.NextJobID())).Draw(t, "job"))
}

func (w *world) step(t *rapid.T, step int) {
	s := w.s
	m := w.model
	m.now = w.now
	action := rapid.IntRange(0, 19).Draw(t, "action")
	switch action {
	case 0, 1, 2: // submit, of any class, with or without a deadline
		sub := Submission{
			Tenant:    rapid.SampledFrom(w.tenants).Draw(t, "tenant"),
			Size:      Size(rapid.IntRange(0, 2).Draw(t, "size")),
			EstCostMs: rapid.Int64Range(0, 10_000).Draw(t, "cost"),
			TimeoutMs: rapid.SampledFrom([]int64{0, 0, 20_000}).Draw(t, "timeout"),
			Class:     Class(rapid.IntRange(0, NumClasses-1).Draw(t, "class")),
			Type:      rapid.SampledFrom([]string{"", "a", "b"}).Draw(t, "type"),
			Group:     rapid.SampledFrom(w.groups).Draw(t, "group"),
			Form:      JobForm(rapid.IntRange(0, 2).Draw(t, "form")),
			// A kind's retry policy may give the job its own backoff max.
			RetryBackoffMaxMs: rapid.SampledFrom([]int64{0, 0, 0, 7_000}).Draw(t, "backoff_max"),
			Uses:              drawUses(t),
		}
		if sub.Form == FormFunction && sub.Type == "" {
			sub.Type = "a" // a function job names its kind
		}
		if rapid.IntRange(0, 3).Draw(t, "has_deadline") == 0 {
			sub.DeadlineMs = rapid.Int64Range(1000, 30_000).Draw(t, "deadline")
		}
		ti, _ := s.TenantIndex(sub.Tenant)
		tn, _ := s.TenantAt(ti)
		est, src, estOK := m.estimate(s, ti, sub)
		_, groupExists := s.Group(sub.Tenant, sub.Group)
		overGroups := !groupExists && sub.Group != "" && tn.Groups >= tn.GroupLimit()
		allowed := tn.Permit(sub.Class, sub.DeadlineMs != 0) == nil && estOK && !overGroups && usesAllowed(s, sub.Uses)
		idle := sub.DeadlineMs == 0 && m.idle(s, sub.Class)
		gidle := sub.DeadlineMs == 0 && tn.GroupOrder == GroupFair && m.groupIdle(s, ti, sub.Class)
		id, err := both(t, w, "submit", func(s *Scheduler) (JobID, error) { return s.Submit(w.now, sub) })
		if (err == nil) != allowed {
			t.Fatalf("submit %+v to %+v: %v, want allowed=%v", sub, tn.TenantSpec, err, allowed)
		}
		if err == nil {
			if idle {
				m.submitted(s, sub.Class)
			}
			if gidle {
				m.groupRise(ti, sub.Class)
			}
			j, _ := s.Job(id)
			if j.EstCostMs != est || j.EstSource != src || j.Class != sub.Class || (j.DeadlineAt() != 0) != (sub.DeadlineMs != 0) {
				t.Fatalf("submitted %+v, the model estimates %d from %s", j, est, src)
			}
		} else if sub.DeadlineMs != 0 && !tn.AllowDeadlines && !errors.Is(err, ErrPermission) {
			t.Fatalf("a deadline without allow_deadlines: %v", err)
		} else if overGroups && tn.Permit(sub.Class, sub.DeadlineMs != 0) == nil && !errors.Is(err, ErrExhausted) {
			t.Fatalf("a group over max_groups: %v", err)
		}
	case 3, 4, 5: // dispatch, checking every cap of the tenant it picked
		size := Size(rapid.IntRange(0, 2).Draw(t, "worker_size"))
		worker := fmt.Sprintf("w%d", step)
		// Which jobs the worker runs (SPEC §3 "Kinds"): every one, or
		// commands and some kinds.
		var runs *Runs
		if rapid.IntRange(0, 2).Draw(t, "restricted") > 0 {
			runs = &Runs{Commands: rapid.Bool().Draw(t, "runs_commands"), AllKinds: rapid.Bool().Draw(t, "runs_all_kinds")}
			for _, k := range []string{"a", "b"} {
				if rapid.Bool().Draw(t, "runs_"+k) {
					runs.Kinds = append(runs.Kinds, k)
				}
			}
		}
		m.reserve(s, w.now) // a Dispatch first gives out the reservations due
		pred, predOK := m.pick(s, size, runs)
		cands := m.decide(s, runs, true).cands // the candidates the worker sees
		var predWeight Weight
		if predOK {
			tn, _ := s.TenantAt(pred.tenant)
			predWeight = s.Weight(&tn, w.now)
		}
		a, err := both(t, w, "dispatch", func(s *Scheduler) (Assignment, error) {
			a, _, err := s.DispatchFor(w.now, DefaultPool, size, worker, runs)
			return a, err
		})
		if err != nil {
			t.Fatalf("dispatch: %v", err)
		}
		if (a.Job != 0) != predOK || (predOK && (a.Job != pred.seq || a.Start != pred.tag)) {
			t.Fatalf("%s worker got job %d at %s; the model picks job %d at %s (ok=%v)", size, a.Job, a.Start, pred.seq, pred.tag, predOK)
		}
		if a.Job != 0 {
			j, _ := s.Job(a.Job)
			// SPEC §8 rule 7: no job of a lower class while an eligible
			// job of a higher class fits; no job without a deadline while
			// an eligible deadline job of its class fits.
			for _, c := range cands {
				if c.size <= size && c.class.Above(j.Class) {
					t.Fatalf("dispatched job %d of class %s while job %d of class %s fits", j.ID, j.Class, c.seq, c.class)
				}
				if c.size <= size && c.class == j.Class && c.deadline && j.DeadlineAt() == 0 {
					t.Fatalf("dispatched job %d without a deadline while deadline job %d of its class fits", j.ID, c.seq)
				}
			}
			if a.Class != j.Class || a.Deadline != (j.DeadlineAt() != 0) || a.DeadlineMissed != (j.DeadlineAt() != 0 && w.now > j.DeadlineAt()) {
				t.Fatalf("assignment %+v of job %+v", a, j)
			}
			m.dispatched(s, pred, j.EstCostMs, predWeight)
			m.resDispatched(a.Job)
			// SPEC §8 rule 13: held <= capacity, and per tenant <=
			// its limit, of each resource the job uses.
			all, per := refHeldAll(s)
			for _, u := range j.Uses() {
				info, _ := s.Resource(u.Resource)
				if all[u.Resource] > uint64(info.Capacity) {
					t.Fatalf("dispatch of job %d raised %s held to %d over capacity %d", j.ID, u.Resource, all[u.Resource], info.Capacity)
				}
				if mx := refTenantMax(s, info, j.Tenant); mx != NoTenantMax && per[groupKey{s.Owner(j.Tenant), u.Resource}] > uint64(mx) {
					t.Fatalf("dispatch of job %d raised its tenant's %s held over %d", j.ID, u.Resource, mx)
				}
			}
			tn, _ := s.TenantAt(a.Tenant)
			c := tn.Caps
			// SPEC §8 rule 8: a group never exceeds its cap.
			if gc := refGroupCap(s, &tn, j.Group()); gc > 0 && refGroupRunning(s)[groupKey{a.Tenant, j.Group()}] > gc {
				t.Fatalf("dispatch raised %s group %q running to %d over cap %d", tn.Name, j.Group(), refGroupRunning(s)[groupKey{a.Tenant, j.Group()}], gc)
			}
			if c.MaxRunning > 0 && tn.Running > c.MaxRunning {
				t.Fatalf("dispatch raised %s running to %d over cap %d", tn.Name, tn.Running, c.MaxRunning)
			}
			if m := c.MaxRunningSize[j.Size]; m > 0 && tn.RunningBySize[j.Size] > m {
				t.Fatalf("dispatch raised %s %s running to %d over cap %d", tn.Name, j.Size, tn.RunningBySize[j.Size], m)
			}
			if c.MaxInflightCPUMs > 0 && tn.InflightCPUMs > c.MaxInflightCPUMs && tn.InflightCPUMs != j.EstCostMs {
				t.Fatalf("dispatch raised %s inflight to %d over cap %d", tn.Name, tn.InflightCPUMs, c.MaxInflightCPUMs)
			}
			if m := c.classCap(j.Class); m > 0 && tn.RunningByClass[j.Class] > m {
				t.Fatalf("dispatch raised %s %s running to %d over cap %d", tn.Name, j.Class, tn.RunningByClass[j.Class], m)
			}
			if m := c.MaxRunningDeadline; m > 0 && j.DeadlineAt() != 0 && tn.RunningDeadline > m {
				t.Fatalf("dispatch raised %s deadline running to %d over cap %d", tn.Name, tn.RunningDeadline, m)
			}
			if j.Size > size || j.State != Assigned || j.Worker != worker {
				t.Fatalf("bad assignment %+v to %s worker", j, size)
			}
		} else if runs == nil && s.Eligible(size) {
			t.Fatalf("no dispatch although Eligible(%s)", size)
		}
		if a.Job != 0 {
			if j, _ := s.Job(a.Job); !s.RunsJob(runs, &j) {
				t.Fatalf("job %d (%s %q) went to a worker that does not run it (%+v)", a.Job, j.Form(), j.Type(), runs)
			}
		}
	case 6: // start or heartbeat
		if j, ok := w.liveJob(t); ok {
			cpu := rapid.Int64Range(0, 20_000).Draw(t, "hb_cpu")
			both(t, w, "heartbeat", func(s *Scheduler) (Outcome, error) {
				ch, err := s.Heartbeat(w.now, j.ID, j.Attempt, j.Worker, cpu)
				return ch.Outcome, err
			})
		}
	case 7, 8: // finish (sometimes from a stale attempt)
		if j, ok := w.liveJob(t); ok {
			attempt := j.Attempt
			if rapid.IntRange(0, 5).Draw(t, "stale") == 0 {
				attempt--
			}
			outcome := FinishOutcome(rapid.IntRange(1, 3).Draw(t, "outcome"))
			cpu := rapid.Int64Range(0, 20_000).Draw(t, "cpu")
			gidle := w.requeueIdle(j)
			out, _ := both(t, w, "finish", func(s *Scheduler) (Outcome, error) {
				ch, err := s.Finish(w.now, j.ID, attempt, j.Worker, outcome, cpu, RunResult{})
				return ch.Outcome, err
			})
			if out == Changed {
				after, _ := s.Job(j.ID)
				m.finished(s, j, cpu, after.State == Completed, w.now)
				if gidle && after.State == Queued {
					m.groupRise(j.Tenant, j.Class)
				}
			}
		}
	case 9: // cancel any job
		id := w.anyJob(t)
		both(t, w, "cancel", func(s *Scheduler) (Outcome, error) {
			ch, err := s.Cancel(w.now, id)
			return ch.Outcome, err
		})
	case 10: // time passes; the leader expires what is due
		w.now += Time(rapid.Int64Range(0, 15_000).Draw(t, "dt"))
		m.now = w.now
		type due struct {
			id      JobID
			attempt uint32
			kind    InputKind
		}
		var list []due
		s.Due(w.now, func(id JobID, attempt uint32, kind InputKind) bool {
			list = append(list, due{id, attempt, kind})
			return true
		})
		for _, d := range list {
			j, _ := s.Job(d.id)
			gidle := w.requeueIdle(j)
			_, err := both(t, w, "expire", func(s *Scheduler) (Outcome, error) {
				ch, err := s.Expire(w.now, d.id, d.attempt, d.kind)
				return ch.Outcome, err
			})
			if after, _ := s.Job(d.id); gidle && err == nil && after.State == Queued {
				m.groupRise(j.Tenant, j.Class)
			}
			m.settle(s) // each expiry is a command of its own
			if err != nil && d.kind != InExpireTimeout {
				t.Fatalf("Due reported %+v but Expire refused: %v", d, err)
			}
		}
	case 11: // tenant update: tier, caps, classes, deadlines, groups (cap decreases preempt nothing)
		spec := drawSpec(t, rapid.SampledFrom(w.tenants).Draw(t, "tenant"))
		old, _ := s.Tenant(spec.Name)
		both(t, w, "update", func(s *Scheduler) (bool, error) { return s.UpsertTenant(spec) })
		if old.GroupOrder != GroupFair && spec.GroupOrder == GroupFair {
			ti, _ := s.TenantIndex(spec.Name)
			m.toFair(ti)
		}
	case 12: // leader change, or pruning
		if rapid.Bool().Draw(t, "grant") {
			both(t, w, "grant", func(s *Scheduler) (int, error) { return s.GrantLeases(w.now), nil })
		} else {
			both(t, w, "prune", func(s *Scheduler) (int, error) { return s.Prune(w.now-5_000, 10), nil })
		}
	case 13: // restore the twin from the main scheduler's encoding
		w.twin = reloaded(t, s)
	case 15: // flip the clamp mode (every tag rises to at least its class's virtual_now), or the estimate mode
		cfg := s.Config()
		if rapid.Bool().Draw(t, "flip_estimate") {
			cfg.Estimate = 1 - cfg.Estimate
			both(t, w, "set config", func(s *Scheduler) (bool, error) { return true, s.SetConfig(cfg) })
			break
		}
		cfg.Clamp = 1 - cfg.Clamp
		both(t, w, "set config", func(s *Scheduler) (bool, error) { return true, s.SetConfig(cfg) })
		s.Tenants(func(ti uint32, _ *Tenant) bool {
			for c := range NumClasses {
				m.tags(ti)[c] = max(m.tags(ti)[c], m.vnow[c])
			}
			return true
		})
	case 16: // delete an idle tenant (refused while it has jobs); upserting the name creates a new one
		name := rapid.SampledFrom(w.tenants).Draw(t, "tenant")
		ti, _ := s.TenantIndex(name)
		if _, err := both(t, w, "delete", func(s *Scheduler) (bool, error) { return true, s.DeleteTenant(name) }); err == nil {
			m.forget(ti)
			spec := drawSpec(t, name)
			both(t, w, "re-create", func(s *Scheduler) (bool, error) { return s.UpsertTenant(spec) })
			nti, _ := s.TenantIndex(name)
			tn, _ := s.Tenant(name)
			old := 0
			s.TenantJobs(name, 0, func(*Job) bool { old++; return true })
			if nti <= ti || tn.Billing != (Billing{}) || old != 0 {
				t.Fatalf("re-created %s: index %d after %d, billing %+v, %d jobs of the old one visible", name, nti, ti, tn.Billing, old)
			}
		}
	case 17: // explain any job: it changes nothing, and a queued job's reason agrees with the model
		id := w.anyJob(t)
		before := s.Hash()
		r, err := s.Explain(id)
		if s.Hash() != before {
			t.Fatal("explain changed the state")
		}
		if err == nil {
			w.checkReason(t, id, r)
		}
	case 18: // a group's settings: the admin's cap and the tenant's own
		name := rapid.SampledFrom(w.tenants).Draw(t, "tenant")
		group := rapid.SampledFrom(w.groups[2:]).Draw(t, "set_group")
		set := GroupSettings{Cap: rapid.SampledFrom([]GroupCap{GroupCapInherit, GroupCapInherit, GroupCapNone, 1, 2}).Draw(t, "group_cap_set"),
			TenantCap: uint32(rapid.SampledFrom([]int{0, 0, 1, 2}).Draw(t, "tenant_group_cap"))}
		tn, _ := s.Tenant(name)
		_, exists := s.Group(name, group)
		_, err := both(t, w, "set group", func(s *Scheduler) (bool, error) { return true, s.SetGroup(name, group, set) })
		if over := !exists && !set.Empty() && tn.Groups >= tn.GroupLimit(); over != (err != nil) || (over && !errors.Is(err, ErrExhausted)) {
			t.Fatalf("set group %q of %s (%d groups, max %d): %v", group, name, tn.Groups, tn.GroupLimit(), err)
		}
		if g, ok := s.Group(name, group); err == nil && ok && g.GroupSettings != set {
			t.Fatalf("set group %q: %+v, want %+v", group, g.GroupSettings, set)
		}
	case 19: // a resource: declared or changed (a decrease preempts nothing), a tenant's own limit, or deleted
		name := rapid.SampledFrom([]string{"r1", "r2"}).Draw(t, "resource")
		switch rapid.IntRange(0, 3).Draw(t, "resource_op") {
		case 0, 1:
			spec := drawResourceSpec(t, name)
			both(t, w, "set resource", func(s *Scheduler) (bool, error) { return s.SetResource(w.now, spec) })
		case 2:
			tenant := rapid.SampledFrom(w.tenants).Draw(t, "tenant")
			mx := uint32(NoTenantMax)
			if rapid.Bool().Draw(t, "own_max") {
				mx = uint32(rapid.IntRange(0, 3).Draw(t, "own_max_n"))
			}
			both(t, w, "set limit", func(s *Scheduler) (bool, error) { return s.SetResourceLimit(w.now, name, tenant, mx) })
		case 3:
			info, ok := s.Resource(name)
			_, err := both(t, w, "delete resource", func(s *Scheduler) (bool, error) { return true, s.DeleteResource(name) })
			if ok && (err == nil) != (info.Users == 0) {
				t.Fatalf("delete of resource %s used by %d jobs: %v", name, info.Users, err)
			}
		}
	case 14: // freeze and remember the bytes; later writes must not change them
		if len(w.frozen) < 3 {
			v := s.Freeze()
			w.frozen = append(w.frozen, frozenCheck{v, encodeView(v)})
		}
	}
	if err := s.Verify(); err != nil {
		t.Fatalf("step %d: %v", step, err)
	}
	m.settle(s)
	m.check(t, s, fmt.Sprintf("step %d (action %d)", step, action))
	if err := w.twin.Verify(); err != nil {
		t.Fatalf("step %d twin: %v", step, err)
	}
	if v := s.VirtualNow(); v < w.vnow {
		t.Fatalf("virtual_now went back from %d to %d", w.vnow, v)
	} else {
		w.vnow = v
	}
}

// checkReason compares a job's reason with what the model derives: a
// queued job is a candidate (waiting, higher_class) or it is not (behind,
// cap, held); waiting means no higher class has a candidate that fits it.
func (w *world) checkReason(t *rapid.T, id JobID, r Reason) {
	j, _ := w.s.Job(id)
	switch {
	case j.State == Assigned:
		if r.Kind != ReasonAssigned || r.Worker != j.Worker {
			t.Fatalf("job %d is assigned to %s, reason %s", id, j.Worker, r.Format())
		}
		return
	case j.State == Running:
		if r.Kind != ReasonRunning || r.Worker != j.Worker {
			t.Fatalf("job %d is running on %s, reason %s", id, j.Worker, r.Format())
		}
		return
	case j.State.Terminal():
		if r.Kind != ReasonTerminal || r.State != j.State || r.Name() != j.State.String() {
			t.Fatalf("job %d is %s, reason %s", id, j.State, r.Format())
		}
		return
	}
	dec := w.model.decide(w.s, nil, true)
	cands := dec.cands
	isCand, higher := false, false
	for _, c := range cands {
		if c.seq == id {
			isCand = true
		}
		if c.size <= j.Size && c.class.Above(j.Class) {
			higher = true
		}
	}
	switch r.Kind {
	case ReasonWaiting:
		if !isCand || higher {
			t.Fatalf("job %d waits (%s), but candidate=%v higher=%v", id, r.Format(), isCand, higher)
		}
		tn, _ := w.s.TenantAt(j.Tenant)
		if r.Tag != tn.Tag(j.Class) || r.VirtualNow != w.s.ClassVirtualNow(j.Class) {
			t.Fatalf("job %d: %s, tag %s vnow %s", id, r.Format(), tn.Tag(j.Class), w.s.ClassVirtualNow(j.Class))
		}
		// ahead, by brute force: every eligible deadline head (of any
		// group) that goes first, and the other tenants' candidates
		// without a deadline of its size with a lower key
		var ahead uint64
		for _, c := range dec.dlHeads {
			if c.class != j.Class || c.seq == id {
				continue
			}
			switch {
			case j.DeadlineAt() != 0:
				if c.at < j.DeadlineAt() || (c.at == j.DeadlineAt() && c.seq < id) {
					ahead++
				}
			case c.size <= j.Size:
				ahead++
			}
		}
		for _, c := range cands {
			if c.class != j.Class || c.seq == id || c.deadline || j.DeadlineAt() != 0 {
				continue
			}
			switch {
			case c.size == j.Size && c.tenant != j.Tenant:
				other, _ := w.s.TenantAt(c.tenant)
				a, b := other.Tag(j.Class), tn.Tag(j.Class)
				if w.s.cfg.Clamp == ClampDispatch {
					a, b = max(a, w.s.ClassVirtualNow(j.Class)), max(b, w.s.ClassVirtualNow(j.Class))
				}
				if a < b || (a == b && (other.Tier > tn.Tier || (other.Tier == tn.Tier && c.seq < id))) {
					ahead++
				}
			}
		}
		if ahead != r.Ahead {
			t.Fatalf("job %d: %s, the model counts %d ahead", id, r.Format(), ahead)
		}
	case ReasonHigherClass:
		if !isCand || !higher {
			t.Fatalf("job %d: %s, but candidate=%v higher=%v", id, r.Format(), isCand, higher)
		}
	case ReasonBehind, ReasonCap, ReasonResource, ReasonHeld, ReasonGroupTurn:
		if isCand {
			t.Fatalf("job %d is a candidate, reason %s", id, r.Format())
		}
		tn, _ := w.s.TenantAt(j.Tenant)
		gc := refGroupCap(w.s, &tn, j.Group())
		groupBlocked := gc > 0 && refGroupRunning(w.s)[groupKey{j.Tenant, j.Group()}] >= gc
		held := dec.held[refHeadKey{j.Tenant, j.Class, j.Size, "", ""}]
		switch {
		case r.Kind == ReasonCap && r.Cap == CapGroupRunning:
			if !refPasses(&tn, &j) || !groupBlocked || r.Limit != int64(gc) {
				t.Fatalf("job %d: %s, but passes tenant caps=%v group blocked=%v cap %d", id, r.Format(), refPasses(&tn, &j), groupBlocked, gc)
			}
		case r.Kind == ReasonCap:
			if refPasses(&tn, &j) {
				t.Fatalf("job %d passes its caps, reason %s", id, r.Format())
			}
		case r.Kind == ReasonResource:
			if !refPasses(&tn, &j) || groupBlocked || !w.model.refResBlocked(w.s, &j) {
				t.Fatalf("job %d: %s, but passes=%v group blocked=%v resource blocked=%v", id, r.Format(), refPasses(&tn, &j), groupBlocked, w.model.refResBlocked(w.s, &j))
			}
		case r.Kind == ReasonHeld:
			if !held || !refPasses(&tn, &j) || groupBlocked {
				t.Fatalf("job %d: %s, but held=%v passes=%v group blocked=%v", id, r.Format(), held, refPasses(&tn, &j), groupBlocked)
			}
		case r.Kind == ReasonGroupTurn:
			if held || !refPasses(&tn, &j) || groupBlocked {
				t.Fatalf("job %d: %s, but held=%v passes=%v group blocked=%v", id, r.Format(), held, refPasses(&tn, &j), groupBlocked)
			}
		}
	default:
		t.Fatalf("job %d: unexpected reason %s", id, r.Format())
	}
}

// TestFairnessBound: continuously backlogged tenants, one worker size, no
// binding cap, decay off. After every dispatch, the normalised service
// Σ est_cost/weight of any two tenants differs by at most
// max_cost_i/w_i + max_cost_j/w_j (SPEC §8.6), and no tenant waits longer
// than that bound allows between two of its dispatches.
func TestFairnessBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := DefaultConfig()
		cfg.Clamp = ClampMode(rapid.IntRange(0, 1).Draw(t, "clamp"))
		s, _ := New(cfg)
		nt := rapid.IntRange(2, 8).Draw(t, "tenants")
		type tstate struct {
			name       string
			w          Weight
			minC, maxC int64
			service    VirtualTime // Σ step(est_cost) dispatched
			lastAt     int         // dispatch number of its last dispatch
		}
		ts := make([]*tstate, nt)
		for i := range ts {
			tier := Tier(rapid.IntRange(0, 4).Draw(t, "tier"))
			mult := uint32(rapid.IntRange(1, 3).Draw(t, "mult"))
			lo := rapid.Int64Range(1, 5000).Draw(t, "min_cost")
			hi := rapid.Int64Range(lo, 3*lo+100).Draw(t, "max_cost")
			ts[i] = &tstate{name: fmt.Sprintf("t%d", i), minC: lo, maxC: hi}
			if _, err := s.UpsertTenant(TenantSpec{Name: ts[i].name, Tier: tier, Multiplier: mult}); err != nil {
				t.Fatal(err)
			}
			tn, _ := s.Tenant(ts[i].name)
			ts[i].w = s.Weight(&tn, 0)
		}
		costs := func(i int) int64 { return rapid.Int64Range(ts[i].minC, ts[i].maxC).Draw(t, "cost") }
		for i := range ts { // backlog of 3 each, from the same instant
			for range 3 {
				if _, err := s.Submit(0, Submission{Tenant: ts[i].name, Size: MD, EstCostMs: costs(i)}); err != nil {
					t.Fatal(err)
				}
			}
		}
		step := func(c int64, w Weight) VirtualTime { v, _ := tagStep(c, w); return v }
		n := rapid.IntRange(10, 400).Draw(t, "dispatches")
		for d := 1; d <= n; d++ {
			a, ok, err := s.Dispatch(0, MD, "w")
			if err != nil || !ok {
				t.Fatalf("dispatch %d: %v %v", d, ok, err)
			}
			j, _ := s.Job(a.Job)
			var me *tstate
			for _, x := range ts {
				if x.name == s.TenantName(a.Tenant) {
					me = x
				}
			}
			me.service += step(j.EstCostMs, me.w)
			// keep it backlogged
			if _, err := s.Submit(0, Submission{Tenant: me.name, Size: MD, EstCostMs: costs(int(a.Tenant))}); err != nil {
				t.Fatal(err)
			}
			for _, x := range ts {
				for _, y := range ts {
					bound := step(x.maxC, x.w) + step(y.maxC, y.w)
					if diff := x.service - y.service; diff > bound {
						t.Fatalf("after %d dispatches %s is ahead of %s by %s virtual ms, bound %s", d, x.name, y.name, diff, bound)
					}
				}
			}
			// No starvation: between two dispatches of x, each other tenant
			// y can gain at most 2·bound + one job of normalised service.
			for _, x := range ts {
				limit := 1
				for _, y := range ts {
					if y != x {
						b := step(x.maxC, x.w) + step(y.maxC, y.w)
						limit += int((2*b+step(y.maxC, y.w))/max(step(y.minC, y.w), 1)) + 1
					}
				}
				if d-x.lastAt > limit {
					t.Fatalf("%s has waited %d dispatches, limit %d", x.name, d-x.lastAt, limit)
				}
			}
			me.lastAt = d
		}
	})
}

// TestGroupFairnessBound: under group_order=fair, groups of one tenant that
// stay backlogged share its dispatches equally in cost: after every
// dispatch the service Σ est_cost of any two groups differs by at most
// max_cost_i + max_cost_j, the SFQ bound at weight 1 — whatever another
// tenant does beside them.
func TestGroupFairnessBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s, _ := New(DefaultConfig())
		if _, err := s.UpsertTenant(TenantSpec{Name: "a", Tier: Gold, GroupOrder: GroupFair}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpsertTenant(TenantSpec{Name: "b", Tier: Tier(rapid.IntRange(0, 4).Draw(t, "b_tier"))}); err != nil {
			t.Fatal(err)
		}
		ng := rapid.IntRange(2, 8).Draw(t, "groups")
		minC, maxC := make([]int64, ng), make([]int64, ng)
		service := make([]int64, ng)
		cost := func(g int) int64 { return rapid.Int64Range(minC[g], maxC[g]).Draw(t, "cost") }
		for g := range ng {
			minC[g] = rapid.Int64Range(1, 5000).Draw(t, "min_cost")
			maxC[g] = rapid.Int64Range(minC[g], 3*minC[g]+100).Draw(t, "max_cost")
			for range rapid.IntRange(1, 3).Draw(t, "backlog") {
				if _, err := s.Submit(0, Submission{Tenant: "a", Group: fmt.Sprintf("g%d", g), Size: MD, EstCostMs: cost(g)}); err != nil {
					t.Fatal(err)
				}
			}
		}
		for range rapid.IntRange(0, 5).Draw(t, "b_jobs") {
			s.Submit(0, Submission{Tenant: "b", Size: MD, EstCostMs: rapid.Int64Range(1, 5000).Draw(t, "b_cost")})
		}
		n := rapid.IntRange(10, 300).Draw(t, "dispatches")
		for d := 1; d <= n; d++ {
			a, ok, err := s.Dispatch(0, MD, "w")
			if err != nil || !ok {
				t.Fatalf("dispatch %d: %v %v", d, ok, err)
			}
			j, _ := s.Job(a.Job)
			if s.TenantName(a.Tenant) == "b" {
				s.Submit(0, Submission{Tenant: "b", Size: MD, EstCostMs: rapid.Int64Range(1, 5000).Draw(t, "b_cost")})
				continue
			}
			var g int
			fmt.Sscanf(j.Group(), "g%d", &g)
			service[g] += j.EstCostMs
			if _, err := s.Submit(0, Submission{Tenant: "a", Group: j.Group(), Size: MD, EstCostMs: cost(g)}); err != nil {
				t.Fatal(err)
			}
			for x := range ng {
				for y := range ng {
					if diff := service[x] - service[y]; diff > maxC[x]+maxC[y] {
						t.Fatalf("after %d dispatches group g%d is ahead of g%d by %d ms, bound %d", d, x, y, diff, maxC[x]+maxC[y])
					}
				}
			}
		}
		if err := s.Verify(); err != nil {
			t.Fatal(err)
		}
	})
}
