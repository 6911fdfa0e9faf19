package fairness

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/baristahq/barista/sfq"
)

const (
	normal = sfq.ClassNormal
	high   = sfq.ClassHigh
)

func weight(n int64) sfq.Weight { return sfq.Weight(n) * sfq.WeightOne }

func rowsOf(l *Ledger, now sfq.Time) map[string]Row {
	out := map[string]Row{}
	l.Rows(now, func(r *Row) bool {
		out[fmt.Sprintf("%s/%d", r.Class, r.Tenant)] = *r
		return true
	})
	return out
}

// mustFloat checks that v is defined and want to within 1e-9.
func mustFloat(t *testing.T, what string, v float64, ok bool, want float64) {
	t.Helper()
	mustNear(t, what, v, ok, want, 1e-9)
}

// mustNear checks that v is defined and want to within tol.
func mustNear(t *testing.T, what string, v float64, ok bool, want, tol float64) {
	t.Helper()
	if !ok || math.Abs(v-want) > tol {
		t.Errorf("%s = %v (defined %v), want %v", what, v, ok, want)
	}
}

// TestTwoTenantsBacklogged: gold (8) and free (1) eligible for a whole
// minute, charged 8:1 — share, entitlement and ratio in every window, and
// over the whole run.
func TestTwoTenantsBacklogged(t *testing.T) {
	l := New(0)
	l.Observe(0, 0, 1<<normal, weight(8))
	l.Observe(0, 1, 1<<normal, weight(1))
	for s := sfq.Time(0); s < 60_000; s += 1000 {
		// Gold is charged 8 s and free 1 s in every second.
		l.Charge(s, normal, 0, 8000)
		l.Charge(s, normal, 1, 1000)
	}
	l.Bill(60_000, normal, 0, 16_000)
	l.Bill(60_000, normal, 1, 2_000)
	rows := rowsOf(l, 60_000)
	gold, free := rows["normal/0"], rows["normal/1"]
	for g := range Windows {
		f := gold.Windows[g]
		if f.SpanMs != 60_000 || f.BusyMs != 60_000 || f.ChargedMs != 480_000 || f.ClassChargedMs != 540_000 {
			t.Errorf("window %s: %+v", Windows[g].Name, f)
		}
		// 60 s × 8/9 in ms × 2^24, floored at each of the 60 accruals.
		if want := int64(60_000 * 8 * EntitledOne / 9); f.EntitledQ24 < want-60 || f.EntitledQ24 > want {
			t.Errorf("window %s: entitled %d, want %d", Windows[g].Name, f.EntitledQ24, want)
		}
		s, ok := f.Share()
		mustFloat(t, "gold share", s, ok, 8.0/9)
		e, ok := f.Entitled()
		mustApprox(t, "gold entitled", e, ok, 8.0/9)
		r, ok := f.Ratio()
		mustApprox(t, "gold ratio", r, ok, 1)
		e, ok = free.Windows[g].Entitled()
		mustApprox(t, "free entitled", e, ok, 1.0/9)
	}
	w := gold.Whole
	if w.BilledMs != 16_000 || w.ClassBilledMs != 18_000 || w.SpanMs != 60_000 || w.BusyMs != 60_000 {
		t.Errorf("whole: %+v", w)
	}
	s, ok := w.BilledShare()
	mustFloat(t, "billed share", s, ok, 16.0/18)
	r, ok := w.BilledRatio()
	mustApprox(t, "billed ratio", r, ok, 1)
	if !gold.Eligible || gold.Weight != weight(8) {
		t.Errorf("gold: eligible %v weight %d", gold.Eligible, gold.Weight)
	}
}

// TestEntitlementIsTimeWeighted: free is eligible alone for 30 s, then
// with gold for 30 s: (30 × 1 + 30 × 1/9) / 60 and (30 × 8/9) / 60.
func TestEntitlementIsTimeWeighted(t *testing.T) {
	l := New(0)
	l.Observe(0, 1, 1<<normal, weight(1))
	l.Observe(30_000, 0, 1<<normal, weight(8))
	rows := rowsOf(l, 60_000)
	e, ok := rows["normal/1"].Windows[0].Entitled()
	mustApprox(t, "free", e, ok, (30+30.0/9)/60)
	e, ok = rows["normal/0"].Windows[0].Entitled()
	mustApprox(t, "gold", e, ok, (30*8.0/9)/60)
	// Nobody has charges: share and ratio are undefined.
	f := rows["normal/0"].Windows[0]
	if _, ok := f.Share(); ok {
		t.Error("a share without charges")
	}
	if _, ok := f.Ratio(); ok {
		t.Error("a ratio without charges")
	}
	// Gold leaves at 45 s; from then free is alone again, and between 50 s
	// and 60 s nobody is eligible: busy is 50 s.
	l.Observe(45_000, 0, 0, weight(8))
	l.Observe(50_000, 1, 0, weight(1))
	rows = rowsOf(l, 60_000)
	if b := rows["normal/1"].Windows[0].BusyMs; b != 50_000 {
		t.Errorf("busy %d, want 50000", b)
	}
	e, ok = rows["normal/1"].Windows[0].Entitled()
	mustApprox(t, "free after", e, ok, (30+15.0/9+5)/50)
	e, ok = rows["normal/0"].Windows[0].Entitled()
	mustApprox(t, "gold after", e, ok, (15*8.0/9)/50)
	if rows["normal/0"].Eligible || rows["normal/1"].Eligible {
		t.Error("eligible after leaving")
	}
}

// mustApprox checks that v is defined and want to within 1e-7.
func mustApprox(t *testing.T, what string, v float64, ok bool, want float64) {
	t.Helper()
	mustNear(t, what, v, ok, want, 1e-7)
}

// TestWindowsRoll: a charge leaves the 1 min window after 60 to 65 s, the
// 10 min one after 10 to 11 min, and stays in the whole run; a class's
// windows are separate from another class's.
func TestWindowsRoll(t *testing.T) {
	l := New(0)
	l.Observe(0, 0, 1<<normal|1<<high, weight(2))
	l.Charge(1_000, normal, 0, 7_000)
	l.Charge(1_000, high, 0, 3_000)
	check := func(now sfq.Time, want [NumWindows]int64, span [NumWindows]int64) {
		t.Helper()
		r := rowsOf(l, now)["normal/0"]
		for g := range Windows {
			if f := r.Windows[g]; f.ChargedMs != want[g] || f.ClassChargedMs != want[g] || f.SpanMs != span[g] {
				t.Errorf("at %d window %s: %+v, want charged %d span %d", now, Windows[g].Name, f, want[g], span[g])
			}
		}
		if r.Whole.ChargedMs != 7_000 {
			t.Errorf("whole %+v", r.Whole)
		}
	}
	check(64_999, [3]int64{7000, 7000, 7000}, [3]int64{64_999, 64_999, 64_999})
	// At 65 s the 1 min window starts at 5 s: the charge at 1 s is out.
	check(65_000, [3]int64{0, 7000, 7000}, [3]int64{60_000, 65_000, 65_000})
	check(649_999, [3]int64{0, 7000, 7000}, [3]int64{64_999, 649_999, 649_999})
	check(650_000, [3]int64{0, 0, 7000}, [3]int64{60_000, 600_000, 650_000})
	check(3_899_999, [3]int64{0, 0, 7000}, [3]int64{64_999, 649_999, 3_899_999})
	check(3_900_000, [3]int64{0, 0, 0}, [3]int64{60_000, 600_000, 3_600_000})
	// The tenant stayed eligible at weight 2 alone: entitled to all of it.
	r := rowsOf(l, 3_900_000)["normal/0"]
	e, ok := r.Windows[2].Entitled()
	mustApprox(t, "alone", e, ok, 1)
	if r.Whole.BusyMs != 3_900_000 {
		t.Errorf("busy %d", r.Whole.BusyMs)
	}
	// A write after a long quiet spell clears the old buckets.
	l.Charge(10_000_000, normal, 0, 500)
	r = rowsOf(l, 10_000_000)["normal/0"]
	if r.Windows[0].ChargedMs != 500 || r.Windows[2].ChargedMs != 500 || r.Whole.ChargedMs != 7_500 {
		t.Errorf("after a quiet spell: %+v", r)
	}
}

// TestSinceLimitsSpan: a ledger started at 100 s (a node restored from a
// snapshot) covers nothing before.
func TestSinceLimitsSpan(t *testing.T) {
	l := New(100_000)
	l.Observe(100_000, 3, 1<<normal, weight(4))
	r := rowsOf(l, 130_000)["normal/3"]
	if f := r.Windows[0]; f.SpanMs != 30_000 || f.BusyMs != 30_000 {
		t.Errorf("%+v", f)
	}
	if r.Whole.SpanMs != 30_000 || l.Since() != 100_000 {
		t.Errorf("whole %+v since %d", r.Whole, l.Since())
	}
}

// TestWeightChange: a weight change while eligible splits the accrual.
func TestWeightChange(t *testing.T) {
	l := New(0)
	l.Observe(0, 0, 1<<normal, weight(1))
	l.Observe(0, 1, 1<<normal, weight(1))
	l.Observe(20_000, 0, 1<<normal, weight(3))
	rows := rowsOf(l, 40_000)
	e, ok := rows["normal/0"].Windows[0].Entitled()
	mustApprox(t, "a", e, ok, (20*0.5+20*0.75)/40)
	e, ok = rows["normal/1"].Windows[0].Entitled()
	mustApprox(t, "b", e, ok, (20*0.5+20*0.25)/40)
}

func TestLag(t *testing.T) {
	for _, c := range []struct {
		vnow, tag sfq.VirtualTime
		w         sfq.Weight
		want      int64
	}{
		{1_000_000, 0, weight(1), 1000},             // 1 virtual s behind at weight 1: owed 1 CPU s
		{1_000_000, 875_000, weight(8), 1000},       // 125 virtual ms at weight 8: 1 CPU s
		{0, 125_000, weight(8), -1000},              // ahead by a 1 s job of gold
		{500, 0, weight(1), 0},                      // under a CPU ms: 0
		{1 << 62, -(1 << 62), weight(1), 1<<63 - 1}, // the difference overflows
		{0, 1 << 62, weight(1 << 20), -1 << 63},
		{7, 7, weight(16), 0},
		{1_000_000, 0, 0, 0},
	} {
		if got := Lag(c.vnow, c.tag, c.w); got != c.want {
			t.Errorf("Lag(%d, %d, %d) = %d, want %d", c.vnow, c.tag, c.w, got, c.want)
		}
	}
}

// TestAgainstExactModel drives a ledger with random charges, bills,
// eligibility and weight changes of a few tenants in two classes over a
// few hours, and checks every figure of every window against the
// definitions computed exactly (rational arithmetic over the event list).
func TestAgainstExactModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		type event struct {
			at     sfq.Time
			tenant uint32
			class  sfq.Class
			kind   int // 0 observe, 1 charge, 2 bill
			mask   uint8
			w      sfq.Weight
			ms     int64
		}
		since := sfq.Time(rapid.Int64Range(0, 10_000).Draw(rt, "since"))
		l := New(since)
		now := since
		var evs []event
		n := rapid.IntRange(1, 120).Draw(rt, "n")
		for i := range n {
			now += sfq.Time(rapid.SampledFrom([]int64{0, 1, 999, 5_000, 13_000, 60_000, 290_000, 2_000_000}).Draw(rt, fmt.Sprintf("dt%d", i)))
			e := event{at: now, tenant: uint32(rapid.IntRange(0, 3).Draw(rt, "tenant")), class: sfq.Class(rapid.IntRange(0, 1).Draw(rt, "class"))}
			switch e.kind = rapid.IntRange(0, 2).Draw(rt, "kind"); e.kind {
			case 0:
				e.mask = uint8(rapid.IntRange(0, 3).Draw(rt, "mask"))
				e.w = sfq.Weight(rapid.SampledFrom([]int64{64, 65536, 2 * 65536, 16 * 65536, 1 << 36}).Draw(rt, "w"))
				l.Observe(e.at, e.tenant, e.mask, e.w)
			case 1:
				e.ms = rapid.Int64Range(-5_000, 60_000).Draw(rt, "ms")
				l.Charge(e.at, e.class, e.tenant, e.ms)
			case 2:
				e.ms = rapid.Int64Range(0, 60_000).Draw(rt, "ms")
				l.Bill(e.at, e.class, e.tenant, e.ms)
			}
			evs = append(evs, e)
		}
		end := now + sfq.Time(rapid.Int64Range(0, 400_000).Draw(rt, "tail"))
		// The exact model: per class, eligibility intervals.
		type state struct {
			on bool
			w  int64
		}
		exact := func(cl sfq.Class, from, to sfq.Time) (ent map[uint32]*big.Rat, busy *big.Rat) {
			ent = map[uint32]*big.Rat{}
			busy = new(big.Rat)
			st := map[uint32]state{}
			t0 := since
			flush := func(t1 sfq.Time) {
				a, b := max(t0, from), min(t1, to)
				if b <= a {
					return
				}
				var W int64
				for _, s := range st {
					if s.on {
						W += s.w
					}
				}
				if W == 0 {
					return
				}
				d := big.NewRat(int64(b-a), 1)
				busy.Add(busy, d)
				for ti, s := range st {
					if s.on {
						if ent[ti] == nil {
							ent[ti] = new(big.Rat)
						}
						ent[ti].Add(ent[ti], new(big.Rat).Mul(d, big.NewRat(s.w, W)))
					}
				}
			}
			for _, e := range evs {
				if e.kind != 0 {
					continue
				}
				flush(e.at)
				t0 = e.at
				on := e.mask&(1<<cl) != 0 && e.w > 0
				st[e.tenant] = state{on: on, w: int64(e.w)}
			}
			flush(to)
			return ent, busy
		}
		charged := func(cl sfq.Class, ti uint32, from, to sfq.Time, kind int) (mine, all int64) {
			for _, e := range evs {
				if e.kind == kind && e.class == cl && e.at >= from && e.at <= to {
					all += e.ms
					if e.tenant == ti {
						mine += e.ms
					}
				}
			}
			return mine, all
		}
		l.Rows(end, func(r *Row) bool {
			starts := [NumWindows + 1]sfq.Time{}
			for g, w := range Windows {
				starts[g] = max(sfq.Time(int64(end/w.bucket)-perWindow)*w.bucket, 0)
			}
			starts[NumWindows] = since
			figs := append(r.Windows[:], r.Whole.Figures)
			for g, f := range figs {
				from := max(starts[g], since)
				if f.SpanMs != int64(end-from) {
					rt.Fatalf("%s/%d window %d: span %d, want %d", r.Class, r.Tenant, g, f.SpanMs, end-from)
				}
				mine, all := charged(r.Class, r.Tenant, starts[g], end, 1)
				if f.ChargedMs != mine || f.ClassChargedMs != all {
					rt.Fatalf("%s/%d window %d: charged %d of %d, want %d of %d", r.Class, r.Tenant, g, f.ChargedMs, f.ClassChargedMs, mine, all)
				}
				ent, busy := exact(r.Class, from, end)
				if b, _ := busy.Float64(); float64(f.BusyMs) != b {
					rt.Fatalf("%s/%d window %d: busy %d, want %v", r.Class, r.Tenant, g, f.BusyMs, b)
				}
				want := 0.0
				if e := ent[r.Tenant]; e != nil {
					want, _ = e.Float64()
				}
				// Each accrual floors below one unit of 2^-24 ms; there are
				// at most a few per event and bucket.
				if got := float64(f.EntitledQ24) / EntitledOne; math.Abs(got-want) > 1e-4 {
					rt.Fatalf("%s/%d window %d: entitled %v ms, want %v", r.Class, r.Tenant, g, got, want)
				}
			}
			mine, all := charged(r.Class, r.Tenant, since, end, 2)
			if r.Whole.BilledMs != mine || r.Whole.ClassBilledMs != all {
				rt.Fatalf("%s/%d: billed %d of %d, want %d of %d", r.Class, r.Tenant, r.Whole.BilledMs, r.Whole.ClassBilledMs, mine, all)
			}
			return true
		})
	})
}

// TestNoAllocationsOnTheHotPath: once a tenant's accounts exist, the
// writes a dispatch and a finish make allocate nothing.
func TestNoAllocationsOnTheHotPath(t *testing.T) {
	l := New(0)
	l.Observe(0, 5, 1<<normal, weight(4))
	l.Charge(0, normal, 5, 1000)
	now := sfq.Time(0)
	allocs := testing.AllocsPerRun(1000, func() {
		now += 777
		l.Charge(now, normal, 5, 1000)
		l.Observe(now, 5, 0, weight(4))
		l.Charge(now, normal, 5, -200)
		l.Bill(now, normal, 5, 800)
		l.Observe(now, 5, 1<<normal, weight(4))
	})
	if allocs != 0 {
		t.Errorf("%v allocations per dispatch and finish", allocs)
	}
}

// TestReportTableEscapesControls: a tenant name may hold C1 controls
// (valid UTF-8; U+009B is a terminal's CSI): the table shows them escaped;
// the JSON lines, for programs, carry the name exactly.
func TestReportTableEscapesControls(t *testing.T) {
	lines := []Line{{Name: "evil\u009b31m", Row: Row{Class: sfq.ClassNormal}}}
	var table, js strings.Builder
	if err := WriteBilled(&table, lines, false); err != nil {
		t.Fatal(err)
	}
	if err := WriteBilled(&js, lines, true); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsRune(table.String(), '\u009b') || !strings.Contains(table.String(), `evil\u009b31m`) {
		t.Errorf("table:\n%q", table.String())
	}
	var got struct{ Tenant string }
	if err := json.Unmarshal([]byte(js.String()), &got); err != nil || got.Tenant != "evil\u009b31m" {
		t.Errorf("json: %q (%v)", js.String(), err)
	}
}
