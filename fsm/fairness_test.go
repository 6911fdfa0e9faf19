package fsm

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"testing"

	"github.com/baristahq/barista/fsm/fairness"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// fairRows returns the rows of a report by "class/tenant".
func fairRows(rep FairnessReport) map[string]fairness.Line {
	out := map[string]fairness.Line{}
	for _, r := range rep.Rows {
		out[r.Class.String()+"/"+r.Name] = r
	}
	return out
}

// TestFairnessFedByApply: the state machine charges a dispatch's estimate
// and a finished run's correction, bills the run's CPU, and weights the
// entitlement by the time each tenant had eligible work; the lag is the
// tag's distance behind virtual_now at the tenant's weight.
func TestFairnessFedByApply(t *testing.T) {
	h := newHarness(t) // at 1 s
	h.apply(tenant("gold", pb.Tier_GOLD), tenant("free", pb.Tier_FREE), tenant("idle", pb.Tier_DIAMOND))
	// Jobs 1, 2 of gold (2 s each), 3, 4 of free (1 s each).
	h.apply(submit("gold", "", 2000, ""), submit("gold", "", 2000, ""), submit("free", "", 1000, ""), submit("free", "", 1000, ""))
	// Gold then free (both at start 0); each keeps a job queued.
	if a, b := h.one(dispatch("w1", 1)), h.one(dispatch("w2", 1)); a.Job != 1 || b.Job != 3 {
		t.Fatalf("dispatches: %+v %+v", a, b)
	}
	h.now = 11_000
	// Gold used 3 s of its 2 s estimate (+1 s), free 0.5 s of 1 s (−0.5 s).
	h.apply(finished(1, 1, "w1", 3000), finished(3, 1, "w2", 500))
	h.now = 21_000
	h.apply(&clusterpb.Command{Cmd: &clusterpb.Command_GrantLeases{GrantLeases: &clusterpb.GrantLeases{}}}) // moves the clock only

	rep := h.f.Fairness(false)
	if rep.Now != 21_000 || rep.Since != 0 || len(rep.Rows) != 2 {
		t.Fatalf("report at %d since %d: %+v", rep.Now, rep.Since, rep.Rows)
	}
	rows := fairRows(rep)
	gold, free := rows["normal/gold"], rows["normal/free"]
	for g := range fairness.Windows {
		gf, ff := gold.Windows[g], free.Windows[g]
		// Both eligible from 1 s to 21 s.
		if gf.ChargedMs != 3000 || ff.ChargedMs != 500 || gf.ClassChargedMs != 3500 || gf.BusyMs != 20_000 || gf.SpanMs != 21_000 {
			t.Errorf("window %d: gold %+v free %+v", g, gf, ff)
		}
		share, _ := gf.Share()
		entitled, _ := gf.Entitled()
		ratio, ok := gf.Ratio()
		if math.Abs(share-6.0/7) > 1e-12 || math.Abs(entitled-8.0/9) > 1e-7 || !ok || math.Abs(ratio-(6.0/7)/(8.0/9)) > 1e-6 {
			t.Errorf("gold: share %v entitled %v ratio %v", share, entitled, ratio)
		}
	}
	if gold.Whole.BilledMs != 3000 || free.Whole.BilledMs != 500 || gold.Whole.ClassBilledMs != 3500 {
		t.Errorf("billed: gold %+v free %+v", gold.Whole, free.Whole)
	}
	// virtual_now is 0 (both started at 0). Gold's tag: 250 + 1000/8 =
	// 375 virtual ms, 3 CPU s at weight 8 ahead; free's 1000 − 500.
	if gold.LagCPUMs != -3000 || free.LagCPUMs != -500 || !gold.Eligible || gold.Weight != 8*sfq.WeightOne {
		t.Errorf("lag: gold %d (eligible %v weight %d) free %d", gold.LagCPUMs, gold.Eligible, gold.Weight, free.LagCPUMs)
	}

	// The live view: a row per tenant, idle's without figures.
	top, now, since := h.f.Top(60_000)
	if now != 21_000 || since != 0 || len(top) != 3 {
		t.Fatalf("top: %+v", top)
	}
	for i, want := range []struct {
		name       string
		dispatches uint64
		cost       int64
		charged    int64
	}{{"gold", 1, 2000, 3000}, {"free", 1, 1000, 500}, {"idle", 0, 0, 0}} {
		r := top[i]
		if r.Name != want.name || r.Class != sfq.ClassNormal || r.Dispatches != want.dispatches || r.DispatchedCostMs != want.cost ||
			r.Fair.Windows[0].ChargedMs != want.charged {
			t.Errorf("top row %d: %+v", i, r)
		}
	}

	// Loading the state starts a new ledger there: nothing charged yet,
	// both still eligible.
	v, err := h.f.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	n := New()
	if err := n.Restore(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(encodeFSM(v)))), v.Index); err != nil {
		t.Fatal(err)
	}
	rep = n.Fairness(true)
	if rep.Since != 21_000 || len(rep.Rows) != 0 {
		t.Errorf("restored, at once: %+v", rep)
	}
	if live := n.Fairness(false); len(live.Rows) != 2 || !live.Rows[0].Eligible || live.Rows[0].Windows[0].SpanMs != 0 {
		t.Errorf("restored live rows: %+v", live.Rows)
	}
}

// TestFairnessZombieAndCancel: a zombie's CPU is billed and never
// charged; cancelling the last queued job ends the tenant's eligibility;
// deleting a tenant keeps its figures in the whole-run report.
func TestFairnessZombieAndCancel(t *testing.T) {
	h := newHarness(t)
	h.apply(tenant("a", pb.Tier_SILVER))
	h.apply(submit("a", "", 1000, ""), submit("a", "", 1000, ""))
	h.one(dispatch("w1", 1)) // job 1, attempt 1
	h.now = 40_000           // the ack deadline passed: job 1 goes back, attempt 1 is stale
	if r := h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Expire{Expire: &clusterpb.Expire{Job: 1, Attempt: 1, Kind: clusterpb.ExpireKind_ACK}}}); r.Code != OK {
		t.Fatalf("expire: %+v", r)
	}
	if r := h.one(finished(1, 1, "w1", 700)); r.Outcome != sfq.Zombie {
		t.Fatalf("zombie: %+v", r)
	}
	h.now = 50_000
	for _, j := range []uint64{1, 2} {
		if r := h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Job: j}}}); r.Code != OK {
			t.Fatalf("cancel %d: %+v", j, r)
		}
	}
	h.now = 70_000
	h.one(&clusterpb.Command{Cmd: &clusterpb.Command_TenantDelete{TenantDelete: &clusterpb.TenantDelete{Name: "a"}}})
	if rows := h.f.Fairness(false).Rows; len(rows) != 0 {
		t.Errorf("a deleted tenant in the live report: %+v", rows)
	}
	rows := h.f.Fairness(true).Rows
	if len(rows) != 1 {
		t.Fatalf("whole: %+v", rows)
	}
	r := rows[0]
	// Eligible from 1 s to 50 s, alone: entitled to all of it.
	e, _ := r.Whole.Entitled()
	if r.Name != "a" || !r.Deleted || r.Eligible || r.Whole.ChargedMs != 1000 || r.Whole.BilledMs != 700 || r.Whole.BusyMs != 49_000 || math.Abs(e-1) > 1e-9 {
		t.Errorf("whole row: %+v (entitled %v)", r, e)
	}
}

// TestFairnessEntitlementSumsToOne: whatever the commands, the
// entitlements of a class's rows add up to 1 over every window with
// eligible work, and every node applying the same entries reports the
// same figures.
func TestFairnessEntitlementSumsToOne(t *testing.T) {
	a, b := newHarness(t), newHarness(t)
	apply := func(cmds ...*clusterpb.Command) {
		a.apply(cmds...)
		b.apply(cmds...)
	}
	for i, tier := range []pb.Tier{pb.Tier_FREE, pb.Tier_BRONZE, pb.Tier_SILVER, pb.Tier_GOLD, pb.Tier_DIAMOND} {
		apply(tenant(fmt.Sprintf("t%d", i), tier))
	}
	credit := uint64(0)
	for step := range 300 {
		a.now += sfq.Time(step%7) * 1700
		b.now = a.now
		apply(submit(fmt.Sprintf("t%d", step*7%5), "", int64(500+step%3*700), ""))
		if step%2 == 0 {
			credit++
			w := fmt.Sprintf("w%d", step%4)
			r := a.one(dispatch(w, credit))
			b.one(dispatch(w, credit))
			if r.Assigned {
				apply(finished(uint64(r.Job), r.Attempt, w, int64(step%5*400)))
			}
		}
	}
	ra, rb := a.f.Fairness(true), b.f.Fairness(true)
	if fmt.Sprint(ra) != fmt.Sprint(rb) {
		t.Fatalf("two nodes differ:\n%+v\n%+v", ra, rb)
	}
	for g := 0; g <= fairness.NumWindows; g++ {
		sum, busy := 0.0, int64(0)
		for _, r := range a.f.Fairness(false).Rows {
			f := r.Whole.Figures
			if g < fairness.NumWindows {
				f = r.Windows[g]
			}
			e, ok := f.Entitled()
			if ok {
				sum += e
				busy = f.BusyMs
			}
		}
		if busy == 0 || math.Abs(sum-1) > 1e-6 {
			t.Errorf("window %d: entitlements sum to %v over %d ms", g, sum, busy)
		}
	}
}
