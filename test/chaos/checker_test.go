package chaos

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baristahq/barista/snapshot"
)

var t0 = time.Unix(1_800_000_000, 0)

// validHistory is a small consistent history: two fairness tenants of
// equal weight, alternating sm jobs of 1000 ms of class normal on one
// worker (normal and low had eligible jobs), each in its tenant's group g1
// of cap 1, every job completed with cpu = est.
func validHistory() *History {
	h := &History{Fair: []string{"fa", "fb"}, Overlap: 100 * time.Millisecond,
		Nodes:      []NodeFinal{{"n1", 40, "abc"}, {"n2", 40, "abc"}, {"n3", 40, "abc"}},
		AuditIndex: 40, AuditHash: "abc"}
	idx := uint64(0)
	fact := func(f snapshot.AuditFact) {
		idx++
		f.Index = idx
		h.Audit = append(h.Audit, f)
		h.Audit = append(h.Audit, snapshot.AuditFact{Kind: "entry", Index: idx, VirtualNow: int64(idx) * 10})
	}
	for j := uint64(1); j <= 6; j++ {
		tenant := []string{"fa", "fb"}[j%2]
		key := "k" + string(rune('0'+j))
		fact(snapshot.AuditFact{Kind: "submit", Job: j, Tenant: tenant, Key: key, Created: true})
		h.Ops = append(h.Ops, Op{Kind: "submit", Key: key, Tenant: tenant, Job: j, Invoke: t0, Ack: t0.Add(time.Millisecond), Result: "ok", Tries: 1})
	}
	for j := uint64(1); j <= 4; j++ {
		tenant := []string{"fa", "fb"}[j%2]
		fact(snapshot.AuditFact{Kind: "dispatch", Job: j, Tenant: tenant, Size: "sm", Attempt: 1, EstCostMs: 1000, Weight: 65536,
			Running: 1, RunningSize: 1, InflightCPUMs: 1000, MaxRunning: 2, Backlogged: []string{"fa", "fb"},
			Class: "normal", Eligible: []string{"normal", "low", "low:deadline"}, BackloggedIn: []string{"fa:normal", "fb:normal"},
			Group: "g1", GroupRunning: 1, GroupCap: 1})
		fact(snapshot.AuditFact{Kind: "finish", Job: j, Tenant: tenant, Attempt: 1, CPUMs: 1000, EstCostMs: 1000, Weight: 65536})
		fact(snapshot.AuditFact{Kind: "terminal", Job: j, Tenant: tenant, State: "completed"})
		start := t0.Add(time.Duration(j) * time.Second)
		h.Attempts = append(h.Attempts, Attempt{Job: j, Attempt: 1, Worker: "w1", Start: start, End: start.Add(500 * time.Millisecond), Ended: true})
		h.Events = append(h.Events, WatchEvent{Watcher: 0, Seq: j, Job: j, Kind: "completed", Attempt: 1}, WatchEvent{Watcher: 1, Seq: j, Job: j, Kind: "completed", Attempt: 1})
	}
	// Job 7 of tenant dz was delayed (due at 5000 ms), released at its due
	// time and dispatched before its expire_at (9000 ms).
	fact(snapshot.AuditFact{Kind: "scheduled", Job: 7, Tenant: "dz", At: 1000, DueAt: 5000})
	fact(snapshot.AuditFact{Kind: "release", Job: 7, Tenant: "dz", At: 5000, DueAt: 5000})
	fact(snapshot.AuditFact{Kind: "dispatch", Job: 7, Tenant: "dz", Size: "sm", Attempt: 1, EstCostMs: 1000, Weight: 65536,
		Running: 1, RunningSize: 1, InflightCPUMs: 1000, Class: "normal", Eligible: []string{"normal"}, At: 5200, ExpireAt: 9000})
	// Its run snoozed 2 s at 6000 ms: scheduled, due at 8000 ms, its
	// failures unchanged.
	fact(snapshot.AuditFact{Kind: "finish", Job: 7, Tenant: "dz", Attempt: 1, CPUMs: 500, EstCostMs: 1000, Weight: 65536,
		Snooze: &snapshot.SnoozeFact{SnoozeMs: 2000, Snoozes: 1, MaxSnoozes: 100, State: "scheduled", Cancel: "none", At: 6000, DueAt: 8000}})
	fact(snapshot.AuditFact{Kind: "scheduled", Job: 7, Tenant: "dz", At: 6000, DueAt: 8000})
	for j := uint64(1); j <= 6; j++ {
		h.Audit = append(h.Audit, snapshot.AuditFact{Kind: "job", Job: j, Tenant: []string{"fa", "fb"}[j%2], Key: "k" + string(rune('0'+j)), State: "completed"})
	}
	return h
}

// withRedrive adds to a valid history job 5's redrive: its first run
// (attempt 1) fails, it is redriven, and its second run (attempt 2)
// completes, in the audit, the watchers' streams and the journal.
func withRedrive(h *History) *History {
	d := snapshot.AuditFact{Kind: "dispatch", Job: 5, Tenant: "fb", Size: "sm", EstCostMs: 1000, Weight: 65536, Running: 1, RunningSize: 1,
		InflightCPUMs: 1000, MaxRunning: 2, Backlogged: []string{"fb"}, BackloggedIn: []string{"fb:normal"}, Class: "normal", Eligible: []string{"normal"}}
	first, second := d, d
	first.Index, first.Attempt = 50, 1
	second.Index, second.Attempt = 53, 2
	h.Audit = append(h.Audit, first,
		snapshot.AuditFact{Kind: "terminal", Index: 51, Job: 5, Tenant: "fb", State: "failed"},
		snapshot.AuditFact{Kind: "redrive", Index: 52, Job: 5, Tenant: "fb", Attempt: 1, State: "queued"},
		second,
		snapshot.AuditFact{Kind: "finish", Index: 54, Job: 5, Tenant: "fb", Attempt: 2, CPUMs: 1000, EstCostMs: 1000, Weight: 65536},
		snapshot.AuditFact{Kind: "terminal", Index: 55, Job: 5, Tenant: "fb", State: "completed"})
	h.Events = append(h.Events, WatchEvent{Seq: 20, Job: 5, Kind: "failed", Attempt: 1}, WatchEvent{Seq: 21, Job: 5, Kind: "redriven", Attempt: 1},
		WatchEvent{Seq: 22, Job: 5, Kind: "completed", Attempt: 2})
	h.Attempts = append(h.Attempts, Attempt{Job: 5, Attempt: 1, Worker: "w1", Start: t0.Add(20 * time.Second), End: t0.Add(21 * time.Second), Ended: true},
		Attempt{Job: 5, Attempt: 2, Worker: "w2", Start: t0.Add(30 * time.Second), End: t0.Add(31 * time.Second), Ended: true})
	return h
}

// TestCheckerAcceptsARedrive: a job that failed, was redriven and ran
// again on a higher attempt ends twice (once in each life) and breaks no
// rule.
func TestCheckerAcceptsARedrive(t *testing.T) {
	if vs := Check(withRedrive(validHistory())); len(vs) != 0 {
		t.Fatal(Report(vs))
	}
}

// setFact changes the facts of one kind and job.
func setFact(h *History, kind string, job uint64, fn func(f *snapshot.AuditFact)) {
	for i := range h.Audit {
		if h.Audit[i].Kind == kind && h.Audit[i].Job == job {
			fn(&h.Audit[i])
		}
	}
}

// setFactAt is setFact for the facts of kind at a log index.
func setFactAt(h *History, kind string, index uint64, fn func(f *snapshot.AuditFact)) {
	for i := range h.Audit {
		if h.Audit[i].Kind == kind && h.Audit[i].Index == index {
			fn(&h.Audit[i])
		}
	}
}

// brokenCase is one way of breaking a rule: break_ changes a valid
// history, and a violation of the rule must mention want.
type brokenCase struct {
	name   string
	want   string
	break_ func(h *History)
}

// expectBroken runs each case on a fresh valid history: a violation of
// rule mentions its want, and no rule but rule and those of also breaks.
func expectBroken(t *testing.T, rule int, fresh func() *History, cases []brokenCase, also ...int) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := fresh()
			c.break_(h)
			vs := Check(h)
			found := false
			for _, v := range vs {
				if v.Rule != rule && !slices.Contains(also, v.Rule) {
					t.Errorf("unexpected %s", v)
				}
				if v.Rule == rule && strings.Contains(v.Msg, c.want) {
					found = true
				}
			}
			if !found {
				t.Fatalf("no violation of rule %d mentions %q:\n%s", rule, c.want, Report(vs))
			}
		})
	}
}

func TestCheckerAcceptsAValidHistory(t *testing.T) {
	if vs := Check(validHistory()); len(vs) != 0 {
		t.Fatal(Report(vs))
	}
}

// TestFairnessInsideEachClass: rule 6 holds inside a class, among jobs
// without a deadline. While both fairness tenants are backlogged in class
// normal, one's jobs of class high (where the other has none) and its
// deadline jobs are no unfairness; the same dispatches without a deadline
// in class normal are (the "starved tenant" case below), and so are they
// in class high once both are backlogged there.
func TestFairnessInsideEachClass(t *testing.T) {
	build := func(faHigh bool) *History {
		h := validHistory()
		idx := uint64(100)
		for j := uint64(10); j < 30; j++ {
			idx++
			f := snapshot.AuditFact{Kind: "dispatch", Index: idx, Job: j, Tenant: "fb", Size: "sm", Attempt: 1,
				EstCostMs: 1000, Weight: 65536, Running: 1, Backlogged: []string{"fa", "fb"}, Class: "high", Eligible: []string{"high", "normal"},
				BackloggedIn: []string{"fb:high", "fa:normal", "fb:normal"}}
			if faHigh {
				f.BackloggedIn = append(f.BackloggedIn, "fa:high")
			}
			if j%2 == 0 {
				f.Class, f.Deadline, f.Eligible = "normal", true, []string{"normal", "normal:deadline"}
			}
			h.Audit = append(h.Audit, f)
		}
		return h
	}
	if vs := Check(build(false)); len(vs) != 0 {
		t.Fatal(Report(vs))
	}
	vs := Check(build(true))
	if len(vs) != 1 || vs[0].String() != "invariant 6: class high: tenants fa and fb, both backlogged from index 102 to 120: normalised service difference moved by 10000000 virtual ms, bound 8000000" {
		t.Fatal(Report(vs))
	}
}

// TestFairnessInsideEachPool: rule 6 holds inside each pool, among the
// fairness tenants of that pool. fa and fb, the pool default's, are both
// backlogged in the pool gpu too, where fa's jobs are held (a
// subscription of burst 0) and fb alone is served: no unfairness, in
// gpu or in the pool default (the same dispatches in the pool default
// are: the "starved tenant" case below).
func TestFairnessInsideEachPool(t *testing.T) {
	h := validHistory()
	idx := uint64(100)
	for j := uint64(10); j < 30; j++ {
		idx++
		h.Audit = append(h.Audit, snapshot.AuditFact{Kind: "dispatch", Index: idx, Job: j, Tenant: "fb", Size: "md", Attempt: 1,
			EstCostMs: 1000, Weight: 65536, Running: 1, Pool: "gpu", WorkerPool: "gpu", BackloggedIn: []string{"fa:normal", "fb:normal"}})
	}
	if vs := Check(h); len(vs) != 0 {
		t.Fatal(Report(vs))
	}
}

// TestCheckerCatchesBrokenHistories breaks a valid history one way at a
// time: the checker reports exactly that rule, naming the job or index.
func TestCheckerCatchesBrokenHistories(t *testing.T) {
	drop := func(h *History, pred func(f snapshot.AuditFact) bool) {
		var keep []snapshot.AuditFact
		for _, f := range h.Audit {
			if !pred(f) {
				keep = append(keep, f)
			}
		}
		h.Audit = keep
	}
	cases := []struct {
		name   string
		rule   int
		want   string
		break_ func(h *History)
	}{
		{"delayed job released early", 9, "index 20: job 7 released at 4999 ms, before its due time 5000 ms", func(h *History) {
			setFact(h, "release", 7, func(f *snapshot.AuditFact) { f.At = 4999 })
		}},
		{"delayed job dispatched unreleased", 9, "index 21: job 7 dispatched at 5200 ms while scheduled (due 5000 ms), never released", func(h *History) {
			drop(h, func(f snapshot.AuditFact) bool { return f.Kind == "release" })
		}},
		{"expired job dispatched", 9, "index 21: job 7 first dispatched at 5200 ms, at or after its expire_at 5200 ms", func(h *History) {
			setFact(h, "dispatch", 7, func(f *snapshot.AuditFact) { f.ExpireAt = 5200 })
		}},
		{"snooze counted as a failure", 9, "index 22: job 7 snoozed 2000 ms: failures went from 0 to 1", func(h *History) {
			setFact(h, "finish", 7, func(f *snapshot.AuditFact) { f.Snooze.Failures = 1 })
		}},
		{"snooze due at the wrong time", 9, "index 22: job 7 snoozed 2000 ms: it is scheduled due at 7999 ms, want scheduled due at 8000 ms", func(h *History) {
			setFact(h, "finish", 7, func(f *snapshot.AuditFact) { f.Snooze.DueAt = 7999 })
		}},
		{"snoozed too often, not failed", 9, "its snooze 100 in a row (max_snoozes 100) left it scheduled, not failed", func(h *History) {
			setFact(h, "finish", 7, func(f *snapshot.AuditFact) { f.Snooze.Snoozes = 100 })
		}},
		{"snooze beats a pending cancel", 9, "with a pending cancel (requested) it is scheduled", func(h *History) {
			setFact(h, "finish", 7, func(f *snapshot.AuditFact) { f.Snooze.Cancel = "requested" })
		}},
		{"lost submit", 1, "job 3 (key \"k3\"", func(h *History) {
			drop(h, func(f snapshot.AuditFact) bool { return f.Kind == "job" && f.Job == 3 })
		}},
		{"submit never in the log", 1, "acknowledged submit of job 5", func(h *History) {
			drop(h, func(f snapshot.AuditFact) bool { return f.Kind == "submit" && f.Job == 5 })
		}},
		{"key created twice", 1, "key \"k2\" created 2 jobs", func(h *History) {
			h.Audit = append(h.Audit, snapshot.AuditFact{Kind: "submit", Index: 99, Job: 7, Tenant: "fa", Key: "k2", Created: true})
		}},
		{"double completion", 2, "job 2 reached a terminal state 2 times", func(h *History) {
			h.Audit = append(h.Audit, snapshot.AuditFact{Kind: "terminal", Index: 39, Job: 2, State: "failed"})
		}},
		{"two accepted Finished", 2, "job 4 had 2 accepted Finished reports of attempt 1, at indexes [17 39]", func(h *History) {
			h.Audit = append(h.Audit, snapshot.AuditFact{Kind: "finish", Index: 39, Job: 4, Tenant: "fb", Attempt: 1, EstCostMs: 1000, Weight: 65536})
		}},
		{"Finished of an attempt never dispatched", 2, "job 4 had an accepted Finished of attempt 2 at index 39, an attempt never dispatched", func(h *History) {
			h.Audit = append(h.Audit, snapshot.AuditFact{Kind: "finish", Index: 39, Job: 4, Tenant: "fb", Attempt: 2, EstCostMs: 1000, Weight: 65536})
		}},
		{"concurrent attempts", 2, "job 1: attempt 1 (worker w1) still ran", func(h *History) {
			h.Attempts = append(h.Attempts, Attempt{Job: 1, Attempt: 2, Worker: "w2", Start: t0.Add(1100 * time.Millisecond), End: t0.Add(3 * time.Second), Ended: true})
		}},
		{"one attempt run twice", 2, "job 2 attempt 1 ran twice", func(h *History) {
			h.Attempts = append(h.Attempts, Attempt{Job: 2, Attempt: 1, Worker: "w9", Start: t0.Add(9 * time.Second), End: t0.Add(10 * time.Second), Ended: true})
		}},
		{"watchers disagree", 5, "event 3: watcher 0 saw job 3 completed", func(h *History) {
			h.Events = append(h.Events, WatchEvent{Watcher: 2, Seq: 3, Job: 3, Kind: "failed", Attempt: 1})
		}},
		{"over-cap step", 3, "index 10: dispatching job 2 raised tenant fa to 3 running, cap 2", func(h *History) {
			setFact(h, "dispatch", 2, func(f *snapshot.AuditFact) { f.Running = 3 })
		}},
		{"in-flight cap", 3, "raised tenant fb to 2500 ms in flight, cap 2000", func(h *History) {
			setFact(h, "dispatch", 3, func(f *snapshot.AuditFact) { f.InflightCPUMs, f.MaxInflightCPUMs = 2500, 2000 })
		}},
		{"virtual time back", 4, "index 5: virtual_now went back", func(h *History) {
			setFactAt(h, "entry", 5, func(f *snapshot.AuditFact) { f.VirtualNow = 1 })
		}},
		{"counters off", 4, "index 8: tenant fa: running 2, derived 1", func(h *History) {
			setFactAt(h, "entry", 8, func(f *snapshot.AuditFact) { f.Verify = "tenant fa: running 2, derived 1" })
		}},
		{"diverging hash", 5, "node n3 ends at index 40 hash def", func(h *History) { h.Nodes[2].Hash = "def" }},
		{"replay diverges", 5, "the audited replay ends at index 40 hash 999", func(h *History) { h.AuditHash = "999" }},
		{"lower class first", 7, "index 13: dispatching job 3 of class normal (tenant fb, size sm) while class high had an eligible job the worker fits", func(h *History) {
			setFact(h, "dispatch", 3, func(f *snapshot.AuditFact) { f.Eligible = []string{"high", "normal"} })
		}},
		{"no deadline before a deadline job", 7, "index 10: dispatching job 2 of class normal without a deadline (tenant fa) while a job of its class with a deadline was eligible", func(h *History) {
			setFact(h, "dispatch", 2, func(f *snapshot.AuditFact) { f.Eligible = []string{"normal", "normal:deadline"} })
		}},
		{"over a group's cap", 8, "index 10: dispatching job 2 raised group \"g1\" of tenant fa to 2 running, its cap 1", func(h *History) {
			setFact(h, "dispatch", 2, func(f *snapshot.AuditFact) { f.GroupRunning = 2 })
		}},
		{"redrive of a live job", 9, "index 52: job 5 redriven while live (dispatched as attempt 1 at index 50, not ended since)", func(h *History) {
			withRedrive(h)
			drop(h, func(f snapshot.AuditFact) bool { return f.Kind == "terminal" && f.Index == 51 })
		}},
		{"a redriven job on an old attempt", 9, "index 53: job 5 dispatched as attempt 1 after its redrive at index 52, not above attempt 1", func(h *History) {
			withRedrive(h)
			setFactAt(h, "dispatch", 53, func(f *snapshot.AuditFact) { f.Attempt = 1 })
			drop(h, func(f snapshot.AuditFact) bool { return f.Kind == "finish" && f.Index == 54 })
		}},
		{"two ends without a redrive event", 2, "job 5 has two terminal events: 20 and 22", func(h *History) {
			withRedrive(h)
			h.Events = slices.DeleteFunc(h.Events, func(e WatchEvent) bool { return e.Kind == "redriven" })
		}},
		{"two ends without a redrive", 2, "job 5 reached a terminal state 2 times: failed at index 51, completed at index 55", func(h *History) {
			withRedrive(h)
			drop(h, func(f snapshot.AuditFact) bool { return f.Kind == "redrive" })
		}},
		{"dispatch of a paused tenant", 8, "index 10: job 2 dispatched while its tenant fa is paused", func(h *History) {
			h.Audit = append([]snapshot.AuditFact{{Kind: "pause", Index: 1, Tenant: "fa", Paused: true}}, h.Audit...)
		}},
		{"dispatch of a paused group", 8, "index 7: job 1 dispatched while its group \"g1\" of tenant fb is paused", func(h *History) {
			h.Audit = append([]snapshot.AuditFact{{Kind: "pause", Index: 1, Tenant: "fb", Group: "g1", Paused: true}}, h.Audit...)
		}},
		{"dispatch while all dispatch is paused", 8, "index 13: job 3 of tenant fb dispatched while all dispatch is paused", func(h *History) {
			var at int
			for i, f := range h.Audit {
				if f.Kind == "dispatch" && f.Job == 3 {
					at = i
				}
			}
			h.Audit = append(h.Audit[:at:at], append([]snapshot.AuditFact{{Kind: "pause", Index: 12, All: true, Paused: true}}, h.Audit[at:]...)...)
		}},
		{"a rate window over burst + floor(W/I)", 8, "fa at rate 1/1000 ms burst 1: 2 dispatches in the 999 ms from index 10 to 16, over burst + floor(W/I) = 1", func(h *History) {
			h.Audit = append([]snapshot.AuditFact{rateFact(1, "fa", "", 1, 1000, 1)}, h.Audit...)
			for i := range h.Audit {
				if h.Audit[i].Kind == "dispatch" {
					h.Audit[i].At = int64(h.Audit[i].Job-1) * 999 / 2 // jobs 2 and 4 of fa 999 ms apart
				}
			}
		}},
		{"a group's rate window", 8, "fb/g1 at rate 2/1000 ms burst 1: 2 dispatches in the 400 ms", func(h *History) {
			h.Audit = append([]snapshot.AuditFact{rateFact(1, "fb", "g1", 2, 1000, 1)}, h.Audit...)
			for i := range h.Audit {
				if h.Audit[i].Kind == "dispatch" {
					h.Audit[i].At = int64(h.Audit[i].Job) * 200 // jobs 1 and 3 of fb 400 ms apart; I = 500 ms
				}
			}
		}},
		{"dispatch across pools", 11, "index 10: job 2 of pool gpu (tenant fa) dispatched to a worker of pool default", func(h *History) {
			setFact(h, "dispatch", 2, func(f *snapshot.AuditFact) { f.Pool = "gpu" })
		}},
		{"over a subscription's burst", 11, "index 13: dispatching job 3 raised tenant fb to 2 running in pool gpu, its subscription's burst 1", func(h *History) {
			setFact(h, "dispatch", 3, func(f *snapshot.AuditFact) {
				f.Pool, f.WorkerPool, f.Subscribed, f.Burst, f.PoolRunning = "gpu", "gpu", true, 1, 2
			})
		}},
		{"dispatch in a paused pool", 8, "index 13: job 3 of tenant fb dispatched while its pool gpu is paused", func(h *History) {
			h.Audit = append([]snapshot.AuditFact{{Kind: "pause", Index: 1, Pool: "gpu", Paused: true}}, h.Audit...)
			setFact(h, "dispatch", 3, func(f *snapshot.AuditFact) { f.Pool, f.WorkerPool = "gpu", "gpu" })
		}},
		{"dispatch in the paused pool default", 8, "index 7: job 1 of tenant fb dispatched while its pool default is paused", func(h *History) {
			h.Audit = append([]snapshot.AuditFact{{Kind: "pause", Index: 1, Pool: "default", Paused: true}}, h.Audit...)
		}},
		{"starved tenant in another pool", 6, "pool gpu, class normal: tenants ga and gb, both backlogged", func(h *History) {
			h.PoolFair = map[string][]string{"gpu": {"ga", "gb"}}
			idx := uint64(100)
			for j := uint64(10); j < 30; j++ { // gb alone is served while ga waits
				idx++
				h.Audit = append(h.Audit, snapshot.AuditFact{Kind: "dispatch", Index: idx, Job: j, Tenant: "gb", Size: "md", Attempt: 1,
					EstCostMs: 1000, Weight: 65536, Running: 1, Pool: "gpu", WorkerPool: "gpu", BackloggedIn: []string{"ga:normal", "gb:normal"}})
			}
		}},
		{"starved tenant", 6, "class normal: tenants fa and fb, both backlogged", func(h *History) {
			idx := uint64(100)
			for j := uint64(10); j < 30; j++ { // fb alone is served while fa waits
				idx++
				h.Audit = append(h.Audit, snapshot.AuditFact{Kind: "dispatch", Index: idx, Job: j, Tenant: "fb", Size: "sm", Attempt: 1,
					EstCostMs: 1000, Weight: 65536, Running: 1, Backlogged: []string{"fa", "fb"}, BackloggedIn: []string{"fa:normal", "fb:normal"}})
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := validHistory()
			c.break_(h)
			vs := Check(h)
			if len(vs) == 0 {
				t.Fatal("the checker accepted the broken history")
			}
			found := false
			for _, v := range vs {
				if v.Rule != c.rule {
					t.Errorf("unexpected %s", v)
				}
				if strings.Contains(v.Msg, c.want) {
					found = true
				}
			}
			if !found {
				t.Fatalf("no violation of rule %d mentions %q:\n%s", c.rule, c.want, Report(vs))
			}
		})
	}
}

// TestRatesWithinBound: dispatches at exactly the GCRA's pace pass the
// rate check, a limit change starts a new span, and a resumed tenant's
// dispatches pass the pause check.
func TestRatesWithinBound(t *testing.T) {
	h := validHistory()
	h.Audit = append([]snapshot.AuditFact{rateFact(1, "fa", "", 2, 1000, 2), {Kind: "pause", Index: 1, Tenant: "fa", Paused: true},
		{Kind: "pause", Index: 1, Tenant: "fa"}}, h.Audit...)
	for i := range h.Audit {
		if h.Audit[i].Kind == "dispatch" {
			h.Audit[i].At = 0 // fa's jobs 2 and 4 at once: the burst of 2
		}
	}
	if vs := Check(h); len(vs) > 0 {
		t.Fatalf("burst 2 at once:\n%s", Report(vs))
	}
	// Burst 1 from the 3rd dispatch on (a new span): fa has one dispatch in it.
	var at int
	for i, f := range h.Audit {
		if f.Kind == "dispatch" && f.Job == 3 {
			at = i
		}
	}
	h.Audit = append(h.Audit[:at:at], append([]snapshot.AuditFact{rateFact(12, "fa", "", 2, 1000, 1)}, h.Audit[at:]...)...)
	if vs := Check(h); len(vs) > 0 {
		t.Fatalf("a new span:\n%s", Report(vs))
	}
}

func TestReadJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	ns := func(d time.Duration) int64 { return t0.Add(d).UnixNano() }
	body := strings.Join([]string{
		"S 7 1 w1 " + itoa(ns(0)),
		"T 7 1 w1 " + itoa(ns(100*time.Millisecond)),
		"S 7 2 w2 " + itoa(ns(2*time.Second)),
		"T 7 1 w1 " + itoa(ns(200*time.Millisecond)),
		"E 7 2 w2 " + itoa(ns(3*time.Second)),
	}, "\n") + "\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadJournal(path, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	want := []Attempt{
		{Job: 7, Attempt: 1, Worker: "w1", Start: t0, End: t0.Add(300 * time.Millisecond)},
		{Job: 7, Attempt: 2, Worker: "w2", Start: t0.Add(2 * time.Second), End: t0.Add(3 * time.Second), Ended: true},
	}
	if len(got) != 2 {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if !got[i].Start.Equal(want[i].Start) || !got[i].End.Equal(want[i].End) || got[i].Ended != want[i].Ended || got[i].Attempt != want[i].Attempt {
			t.Errorf("attempt %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	os.WriteFile(path, []byte("S 7 x w1 1\n"), 0o644)
	if _, err := ReadJournal(path, time.Millisecond); err == nil || !strings.Contains(err.Error(), ":1: malformed") {
		t.Fatalf("malformed line: %v", err)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// withKinds adds to a history the jobs of kinds of tenant kd: job 20 a
// function job of kind digest, 21 a command job, 22 a function job of
// kind thumb that no worker runs (it waits, queued). Workers: py
// registered digest, cmd runs commands, old says neither (every job).
// Job 21's run on cmd ends unknown_kind (no failure, queued); py
// reconnects without job 20, which it had started (a lost lease: one
// failure); old reconnects without job 21, never started (queued, no
// failure); job 20 then completes on py.
func withKinds(h *History) *History {
	digest := &snapshot.RunsFact{Kinds: []string{"digest"}}
	commands := &snapshot.RunsFact{Commands: true}
	d := func(index, job uint64, attempt uint32, worker string, runs *snapshot.RunsFact) snapshot.AuditFact {
		f := snapshot.AuditFact{Kind: "dispatch", Index: index, Job: job, Tenant: "kd", Size: "sm", Attempt: attempt, EstCostMs: 1000, Weight: 65536, Running: 1,
			Class: "normal", Worker: worker, Runs: runs, Form: "function", JobKind: "digest"}
		if job == 21 {
			f.Form, f.JobKind = "command", ""
		}
		return f
	}
	h.Audit = append(h.Audit,
		snapshot.AuditFact{Kind: "submit", Index: 60, Job: 20, Tenant: "kd", Created: true, Form: "function", JobKind: "digest"},
		snapshot.AuditFact{Kind: "submit", Index: 61, Job: 21, Tenant: "kd", Created: true, Form: "command"},
		snapshot.AuditFact{Kind: "submit", Index: 61, Job: 22, Tenant: "kd", Created: true, Form: "function", JobKind: "thumb"},
		snapshot.AuditFact{Kind: "hello", Index: 62, Worker: "py", Runs: digest, Hello: &snapshot.HelloFact{}},
		snapshot.AuditFact{Kind: "hello", Index: 63, Worker: "cmd", Runs: commands, Hello: &snapshot.HelloFact{}},
		d(64, 20, 1, "py", digest),
		d(65, 21, 1, "cmd", commands),
		snapshot.AuditFact{Kind: "finish", Index: 66, Job: 21, Tenant: "kd", Attempt: 1, EstCostMs: 1000, Weight: 65536, Outcome: "unknown_kind", State: "queued"},
		snapshot.AuditFact{Kind: "hello", Index: 67, Worker: "py", Runs: digest, Job: 20, Attempt: 1, Tenant: "kd", Failures: 1,
			Hello: &snapshot.HelloFact{Before: "running", Cancel: "none", State: "queued"}},
		d(68, 21, 2, "old", nil),
		snapshot.AuditFact{Kind: "hello", Index: 69, Worker: "old", Job: 21, Attempt: 2, Tenant: "kd", Hello: &snapshot.HelloFact{Before: "assigned", Cancel: "none", State: "queued"}},
		d(70, 20, 2, "py", digest),
		snapshot.AuditFact{Kind: "finish", Index: 71, Job: 20, Tenant: "kd", Attempt: 2, CPUMs: 1000, EstCostMs: 1000, Weight: 65536, Outcome: "ok"},
		snapshot.AuditFact{Kind: "terminal", Index: 71, Job: 20, Tenant: "kd", State: "completed"},
	)
	return h
}

// TestCheckerAcceptsKinds: routing by kind, an unknown_kind run and two
// reconnects that each lose a run break no rule.
func TestCheckerAcceptsKinds(t *testing.T) {
	if vs := Check(withKinds(validHistory())); len(vs) != 0 {
		t.Fatal(Report(vs))
	}
}

// TestCheckerCatchesBrokenKinds: each way of breaking SPEC §8 rule 12 is
// a violation of rule 12 naming it.
func TestCheckerCatchesBrokenKinds(t *testing.T) {
	expectBroken(t, 12, func() *History { return withKinds(validHistory()) }, []brokenCase{
		{"function job to a worker without its kind", "index 64: job 20 (a function job of kind digest) dispatched to worker py, which runs no command jobs and the kinds [resize]", func(h *History) {
			setFactAt(h, "dispatch", 64, func(f *snapshot.AuditFact) { f.Runs = &snapshot.RunsFact{Kinds: []string{"resize"}} })
		}},
		{"function job to a worker that said it does not run it", "which runs command jobs and every kind but [digest]", func(h *History) {
			setFactAt(h, "dispatch", 70, func(f *snapshot.AuditFact) {
				f.Runs = &snapshot.RunsFact{Commands: true, AllKinds: true, Kinds: []string{"digest"}}
			})
		}},
		{"command job to a worker without commands", "index 65: job 21 (a command job) dispatched to worker cmd, which runs no command jobs and the kinds [digest]", func(h *History) {
			setFactAt(h, "dispatch", 65, func(f *snapshot.AuditFact) { f.Runs = &snapshot.RunsFact{Kinds: []string{"digest"}} })
		}},
		{"unknown_kind counted as a failure", "index 66: job 21's run ended unknown_kind and its failures went from 0 to 1", func(h *History) {
			setFactAt(h, "finish", 66, func(f *snapshot.AuditFact) { f.Failures = 1 })
		}},
		{"unknown_kind failed the job", "index 66: job 21's run ended unknown_kind and the job failed", func(h *History) {
			setFactAt(h, "finish", 66, func(f *snapshot.AuditFact) { f.State = "failed" })
		}},
		{"failed for want of a worker", "index 72: job 22 failed, never dispatched", func(h *History) {
			h.Audit = append(h.Audit, snapshot.AuditFact{Kind: "terminal", Index: 72, Job: 22, Tenant: "kd", State: "failed"})
		}},
		{"slot still held past a reconnect", "index 67: worker py reconnected without job 20 (attempt 1, running): its record still holds a run", func(h *History) {
			setFactAt(h, "hello", 67, func(f *snapshot.AuditFact) { f.Hello.Held = true })
		}},
		{"job still live past a reconnect", "index 69: worker old reconnected without job 21 (attempt 2, assigned): the job is still assigned", func(h *History) {
			setFactAt(h, "hello", 69, func(f *snapshot.AuditFact) { f.Hello.State = "assigned" })
		}},
		{"never-started job counted as a failure", "never started, its failures went from 0 to 1", func(h *History) {
			setFactAt(h, "hello", 69, func(f *snapshot.AuditFact) { f.Failures = 1 })
		}},
		{"started job not counted", "started, its failures went from 0 to 0, not counted as a lost lease", func(h *History) {
			setFactAt(h, "hello", 67, func(f *snapshot.AuditFact) { f.Failures = 0 })
		}},
	})
}
