package sfq

import (
	"bufio"
	"bytes"
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
	return c
}

func TestSchedulerProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := DefaultConfig()
		cfg.Clamp = ClampMode(rapid.IntRange(0, 1).Draw(t, "clamp"))
		if rapid.Bool().Draw(t, "reserve") {
			cfg.Policy = Reserve{Margin: VirtualTime(rapid.Int64Range(0, 2_000_000).Draw(t, "margin"))}
		}
		if rapid.Bool().Draw(t, "decay") {
			cfg.Decay = &Decay{HalfLifeMs: rapid.Int64Range(1000, 100_000).Draw(t, "half_life"), NormMs: rapid.Int64Range(1000, 50_000).Draw(t, "norm")}
		}
		cfg.AckTimeoutMs, cfg.LeaseTimeoutMs = 5_000, 10_000
		s1, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		s2, _ := New(cfg)
		w := &world{s: s1, twin: s2, model: newRefModel()}
		nt := rapid.IntRange(1, 6).Draw(t, "tenants")
		for i := range nt {
			name := fmt.Sprintf("t%d", i)
			w.tenants = append(w.tenants, name)
			spec := TenantSpec{Name: name, Tier: Tier(rapid.IntRange(0, 4).Draw(t, "tier")), Multiplier: uint32(rapid.IntRange(1, 3).Draw(t, "mult")), Caps: drawCaps(t)}
			both(t, w, "upsert", func(s *Scheduler) (bool, error) { return s.UpsertTenant(spec) })
		}
		steps := rapid.IntRange(1, 300).Draw(t, "steps")
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
	})
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
	action := rapid.IntRange(0, 16).Draw(t, "action")
	switch action {
	case 0, 1, 2: // submit
		sub := Submission{
			Tenant:    rapid.SampledFrom(w.tenants).Draw(t, "tenant"),
			Size:      Size(rapid.IntRange(0, 2).Draw(t, "size")),
			EstCostMs: rapid.Int64Range(1, 10_000).Draw(t, "cost"),
			TimeoutMs: rapid.SampledFrom([]int64{0, 0, 20_000}).Draw(t, "timeout"),
		}
		m.beforeSubmit(s)
		both(t, w, "submit", func(s *Scheduler) (JobID, error) { return s.Submit(w.now, sub) })
	case 3, 4, 5: // dispatch, checking every cap of the tenant it picked
		size := Size(rapid.IntRange(0, 2).Draw(t, "worker_size"))
		worker := fmt.Sprintf("w%d", step)
		pred, predOK := m.pick(s, size)
		var predWeight Weight
		if predOK {
			tn, _ := s.TenantAt(pred.tenant)
			predWeight = s.Weight(&tn, w.now)
		}
		a, err := both(t, w, "dispatch", func(s *Scheduler) (Assignment, error) {
			a, _, err := s.Dispatch(w.now, size, worker)
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
			m.dispatched(pred, j.EstCostMs, predWeight)
			tn, _ := s.TenantAt(a.Tenant)
			c := tn.Caps
			if c.MaxRunning > 0 && tn.Running > c.MaxRunning {
				t.Fatalf("dispatch raised %s running to %d over cap %d", tn.Name, tn.Running, c.MaxRunning)
			}
			if m := c.MaxRunningSize[j.Size]; m > 0 && tn.RunningBySize[j.Size] > m {
				t.Fatalf("dispatch raised %s %s running to %d over cap %d", tn.Name, j.Size, tn.RunningBySize[j.Size], m)
			}
			if c.MaxInflightCPUMs > 0 && tn.InflightCPUMs > c.MaxInflightCPUMs && tn.InflightCPUMs != j.EstCostMs {
				t.Fatalf("dispatch raised %s inflight to %d over cap %d", tn.Name, tn.InflightCPUMs, c.MaxInflightCPUMs)
			}
			if j.Size > size || j.State != Assigned || j.Worker != worker {
				t.Fatalf("bad assignment %+v to %s worker", j, size)
			}
		} else if s.Eligible(size) {
			t.Fatalf("no dispatch although Eligible(%s)", size)
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
			out, _ := both(t, w, "finish", func(s *Scheduler) (Outcome, error) {
				ch, err := s.Finish(w.now, j.ID, attempt, j.Worker, outcome, cpu, Result{})
				return ch.Outcome, err
			})
			if out == Changed {
				m.finished(j, cpu)
			}
		}
	case 9: // cancel any job
		id := w.anyJob(t)
		both(t, w, "cancel", func(s *Scheduler) (Outcome, error) {
			ch, err := s.Cancel(w.now, id)
			return ch.Outcome, err
		})
	case 10: // time passes; the reaper expires what is due
		w.now += Time(rapid.Int64Range(0, 15_000).Draw(t, "dt"))
		type due struct {
			id      JobID
			attempt uint32
			kind    EventKind
		}
		var list []due
		s.Due(w.now, func(id JobID, attempt uint32, kind EventKind) bool {
			list = append(list, due{id, attempt, kind})
			return true
		})
		for _, d := range list {
			_, err := both(t, w, "expire", func(s *Scheduler) (Outcome, error) {
				ch, err := s.Expire(w.now, d.id, d.attempt, d.kind)
				return ch.Outcome, err
			})
			if err != nil && d.kind != EvExpireTimeout {
				t.Fatalf("Due reported %+v but Expire refused: %v", d, err)
			}
		}
	case 11: // tenant update: tier and caps (cap decreases preempt nothing)
		spec := TenantSpec{Name: rapid.SampledFrom(w.tenants).Draw(t, "tenant"), Tier: Tier(rapid.IntRange(0, 4).Draw(t, "tier")), Multiplier: 1, Caps: drawCaps(t)}
		both(t, w, "update", func(s *Scheduler) (bool, error) { return s.UpsertTenant(spec) })
	case 12: // leader change, or pruning
		if rapid.Bool().Draw(t, "grant") {
			both(t, w, "grant", func(s *Scheduler) (int, error) { return s.GrantLeases(w.now), nil })
		} else {
			both(t, w, "prune", func(s *Scheduler) (int, error) { return s.Prune(w.now-5_000, 10), nil })
		}
	case 13: // restore the twin from the main scheduler's encoding
		b := encodeView(s.Freeze())
		d, err := decodeBytes(b)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if d.Hash() != s.Hash() {
			t.Fatal("decoded state hashes differently")
		}
		w.twin = d
	case 15: // flip the clamp mode: every tag rises to at least virtual_now
		cfg := s.Config()
		cfg.Clamp = 1 - cfg.Clamp
		both(t, w, "set config", func(s *Scheduler) (bool, error) { return true, s.SetConfig(cfg) })
		s.Tenants(func(ti uint32, _ *Tenant) bool {
			m.ft[ti] = max(m.ft[ti], m.vnow)
			return true
		})
	case 16: // delete an idle tenant (refused while it has jobs); upserting the name creates a new one
		name := rapid.SampledFrom(w.tenants).Draw(t, "tenant")
		ti, _ := s.TenantIndex(name)
		if _, err := both(t, w, "delete", func(s *Scheduler) (bool, error) { return true, s.DeleteTenant(name) }); err == nil {
			delete(m.ft, ti)
			delete(m.elig, ti)
			spec := TenantSpec{Name: name, Tier: Tier(rapid.IntRange(0, 4).Draw(t, "tier"))}
			both(t, w, "re-create", func(s *Scheduler) (bool, error) { return s.UpsertTenant(spec) })
			nti, _ := s.TenantIndex(name)
			tn, _ := s.Tenant(name)
			old := 0
			s.TenantJobs(name, 0, func(*Job) bool { old++; return true })
			if nti <= ti || tn.Billing != (Billing{}) || old != 0 {
				t.Fatalf("re-created %s: index %d after %d, billing %+v, %d jobs of the old one visible", name, nti, ti, tn.Billing, old)
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
