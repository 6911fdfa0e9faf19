package sfq

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// pauseRig drives a scheduler and checks Verify and an encode/decode round
// trip (same hash, same bytes) after every step.
type pauseRig struct {
	t *testing.T
	s *Scheduler
}

func newPauseRig(t *testing.T) *pauseRig {
	s, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return &pauseRig{t: t, s: s}
}

func (r *pauseRig) check() {
	r.t.Helper()
	if err := r.s.Verify(); err != nil {
		r.t.Fatal(err)
	}
	var buf bytes.Buffer
	e := NewEncoder(&buf)
	r.s.Freeze().Encode(e)
	if err := e.Flush(); err != nil {
		r.t.Fatal(err)
	}
	d, err := Decode(NewDecoder(bytes.NewReader(buf.Bytes())))
	if err != nil {
		r.t.Fatalf("decode: %v", err)
	}
	if d.Hash() != r.s.Hash() {
		r.t.Fatal("hash differs after a round trip")
	}
}

func (r *pauseRig) tenant(spec TenantSpec) {
	r.t.Helper()
	if _, err := r.s.UpsertTenant(spec); err != nil {
		r.t.Fatal(err)
	}
	r.check()
}

func (r *pauseRig) submit(now Time, tenant, group string, n int) {
	r.t.Helper()
	for range n {
		if _, err := r.s.Submit(now, Submission{Tenant: tenant, Size: SM, EstCostMs: 1000, Group: group}); err != nil {
			r.t.Fatal(err)
		}
	}
	r.check()
}

// dispatch asks for one job at now and returns "tenant/group#id" or "-".
func (r *pauseRig) dispatch(now Time) string {
	r.t.Helper()
	a, ok, err := r.s.Dispatch(now, SM, "w")
	if err != nil {
		r.t.Fatal(err)
	}
	r.check()
	if !ok {
		return "-"
	}
	j, _ := r.s.Job(a.Job)
	return fmt.Sprintf("%s/%s#%d", r.s.TenantName(a.Tenant), j.Group(), a.Job)
}

// dispatchTimes dispatches once every step ms from 0 to until and returns
// the times a job was given.
func (r *pauseRig) dispatchTimes(step, until Time) []Time {
	var got []Time
	for now := Time(0); now <= until; now += step {
		for r.dispatch(now) != "-" {
			got = append(got, now)
		}
	}
	return got
}

// TestRateGCRAExactTimes: rate=2/1s gives I = 500 ms; with burst=1 (tau =
// 0) one dispatch every 500 ms from 0; with burst=3 (tau = 1 s) three at
// 0 (tat 0 -> 0.5 s -> 1 s -> 1.5 s, the third allowed since 0 >= 1 s -
// 1 s), then one every 500 ms from 500 ms (tat 1.5 s - tau).
func TestRateGCRAExactTimes(t *testing.T) {
	for _, c := range []struct {
		burst uint32
		want  string
	}{
		{1, "[0 500 1000 1500 2000]"},
		{3, "[0 0 0 500 1000 1500 2000]"},
	} {
		r := newPauseRig(t)
		r.tenant(TenantSpec{Name: "a", Tier: Gold, Rate: RateLimit{N: 2, PeriodMs: 1000, Burst: c.burst}})
		r.submit(0, "a", "", 20)
		times := r.dispatchTimes(100, 2000)
		if got := fmt.Sprint(times); got != c.want {
			t.Errorf("burst=%d: dispatch times %s, want %s", c.burst, got, c.want)
		}
		if at, ok := r.s.NextRateEligible(); !ok || at != 2500 {
			t.Errorf("burst=%d: next rate-eligible %d %v, want 2500", c.burst, at, ok)
		}
		// A queued job's reason names the limit and when it allows one.
		head := JobID(len(times) + 1)
		if re, err := r.s.Explain(head); err != nil || re.Format() != "reason=rate vertex=tenant eligible_at=2500" {
			t.Errorf("burst=%d: explain %d: %s %v", c.burst, head, re.Format(), err)
		}
	}
}

// TestRateTenantNeverBlocksOthers: a rate-limited tenant is passed over
// and the other tenant takes every other dispatch; the limited tenant's
// head says rate with its eligible time.
func TestRateTenantNeverBlocksOthers(t *testing.T) {
	r := newPauseRig(t)
	r.tenant(TenantSpec{Name: "a", Tier: Diamond, Rate: RateLimit{N: 1, PeriodMs: 1000}})
	r.tenant(TenantSpec{Name: "b", Tier: Free})
	r.submit(0, "a", "", 5) // 1..5
	r.submit(0, "b", "", 5) // 6..10
	var got []string
	for range 4 {
		got = append(got, r.dispatch(10))
	}
	if s := strings.Join(got, " "); s != "a/#1 b/#6 b/#7 b/#8" {
		t.Errorf("dispatches %s", s)
	}
	re, _ := r.s.Explain(2)
	if re.Format() != "reason=rate vertex=tenant eligible_at=1010" {
		t.Errorf("explain 2: %s", re.Format())
	}
	re, _ = r.s.Explain(3)
	if re.Format() != "reason=behind position=1" {
		t.Errorf("explain 3: %s", re.Format())
	}
	if got := r.dispatch(1009); got != "b/#9" {
		t.Errorf("at 1009: %s", got)
	}
	if got := r.dispatch(1010); got != "a/#2" {
		t.Errorf("at 1010: %s", got)
	}
}

// TestRateGroupNeverBlocksOtherGroups: a rate-limited group is passed
// over; the tenant's other group goes on; then the limited one is due.
func TestRateGroupNeverBlocksOtherGroups(t *testing.T) {
	r := newPauseRig(t)
	r.tenant(TenantSpec{Name: "a", Tier: Gold})
	if err := r.s.SetGroup("a", "slow", GroupSettings{Rate: RateLimit{N: 1, PeriodMs: 1000}}); err != nil {
		t.Fatal(err)
	}
	r.check()
	r.submit(0, "a", "slow", 3) // 1..3
	r.submit(0, "a", "fast", 3) // 4..6
	var got []string
	for range 4 {
		got = append(got, r.dispatch(0))
	}
	got = append(got, r.dispatch(1000), r.dispatch(1500), r.dispatch(2000))
	if s := strings.Join(got, " "); s != "a/slow#1 a/fast#4 a/fast#5 a/fast#6 a/slow#2 - a/slow#3" {
		t.Errorf("dispatches %s", s)
	}
}

// TestPauseTenantBanksNoCredit: a paused tenant is passed over while the
// other runs; on resume its tag is clamped to virtual_now, so it gets its
// share from then on, not a catch-up burst.
func TestPauseTenantBanksNoCredit(t *testing.T) {
	r := newPauseRig(t)
	r.tenant(TenantSpec{Name: "a", Tier: Gold})
	r.tenant(TenantSpec{Name: "b", Tier: Gold})
	r.submit(0, "a", "", 10) // 1..10
	r.submit(0, "b", "", 10) // 11..20
	if ch, err := r.s.PauseTenant("a", true, true); !ch || err != nil {
		t.Fatal(ch, err)
	}
	r.check()
	if ch, _ := r.s.PauseTenant("a", true, true); ch {
		t.Error("pausing a paused tenant changed something")
	}
	re, _ := r.s.Explain(1)
	if re.Format() != "reason=paused vertex=tenant" {
		t.Errorf("explain 1: %s", re.Format())
	}
	var got []string
	for range 4 {
		got = append(got, r.dispatch(0))
	}
	// b ran 4 jobs (tag 4 × 125 = 500 virtual ms); a resumes at
	// virtual_now (375, b's last start), then they alternate.
	if _, err := r.s.PauseTenant("a", false, true); err != nil {
		t.Fatal(err)
	}
	r.check()
	a, _ := r.s.Tenant("a")
	if a.FinishTag != r.s.VirtualNow() || a.FinishTag != VirtualTime(375_000) {
		t.Errorf("a's tag after resume %s, virtual_now %s", a.FinishTag, r.s.VirtualNow())
	}
	for range 4 {
		got = append(got, r.dispatch(0))
	}
	if s := strings.Join(got, " "); s != "b/#11 b/#12 b/#13 b/#14 a/#1 a/#2 b/#15 a/#3" {
		t.Errorf("dispatches %s", s)
	}
}

// TestPauseGroupAndAll: a paused group is passed over (its tenant's other
// group goes on) and kept while it has no job; pausing all dispatch gives
// no job and changes no eligibility; resuming it clamps nothing.
func TestPauseGroupAndAll(t *testing.T) {
	r := newPauseRig(t)
	r.tenant(TenantSpec{Name: "a", Tier: Gold})
	if ch, err := r.s.PauseGroup("a", "g", true, true); !ch || err != nil {
		t.Fatal(ch, err)
	}
	r.check()
	if g, ok := r.s.Group("a", "g"); !ok || !g.Paused() {
		t.Fatal("paused group without jobs was not kept")
	}
	r.submit(0, "a", "g", 2) // 1, 2
	r.submit(0, "a", "h", 1) // 3
	if re, _ := r.s.Explain(1); re.Format() != "reason=paused vertex=group" {
		t.Errorf("explain 1: %s", re.Format())
	}
	if got := r.dispatch(0); got != "a/h#3" {
		t.Errorf("dispatch %s", got)
	}
	if got := r.dispatch(0); got != "-" {
		t.Errorf("dispatch %s", got)
	}
	r.s.PauseDispatch(true)
	r.check()
	if re, _ := r.s.Explain(1); re.Format() != "reason=paused vertex=all" {
		t.Errorf("explain 1: %s", re.Format())
	}
	if _, err := r.s.PauseGroup("a", "g", false, true); err != nil {
		t.Fatal(err)
	}
	r.check()
	if got := r.dispatch(0); got != "-" {
		t.Errorf("dispatch under pause all: %s", got)
	}
	if !r.s.Eligible(SM) {
		t.Error("pause all changed eligibility")
	}
	r.s.PauseDispatch(false)
	r.check()
	if got := r.dispatch(0); got != "a/g#1" {
		t.Errorf("dispatch after resume: %s", got)
	}
	if _, err := r.s.PauseGroup("a", "nope", false, true); err != nil {
		t.Errorf("resuming a group that does not exist: %v", err)
	}
	if _, err := r.s.PauseGroup("zz", "g", true, true); !errors.Is(err, ErrUnknownTenant) {
		t.Errorf("pause of an unknown tenant: %v", err)
	}
}

// TestRateChangeKeepsTAT: changing N keeps tat; removing the limit
// forgets it (the tenant is eligible at once); a refused update changes
// nothing.
func TestRateChangeKeepsTAT(t *testing.T) {
	r := newPauseRig(t)
	r.tenant(TenantSpec{Name: "a", Tier: Gold, Rate: RateLimit{N: 1, PeriodMs: 10_000}})
	r.submit(0, "a", "", 5)
	if got := r.dispatch(0); got != "a/#1" {
		t.Fatal(got)
	}
	a, _ := r.s.Tenant("a")
	if a.PauseState().RateTAT != 10_000_000 {
		t.Fatalf("tat %d", a.PauseState().RateTAT)
	}
	r.tenant(TenantSpec{Name: "a", Tier: Gold, Rate: RateLimit{N: 10, PeriodMs: 10_000, Burst: 1}})
	a, _ = r.s.Tenant("a")
	if a.PauseState().RateTAT != 10_000_000 {
		t.Fatalf("tat after a change %d", a.PauseState().RateTAT)
	}
	before := r.s.Hash()
	if _, err := r.s.UpsertTenant(TenantSpec{Name: "a", Tier: Gold, Rate: RateLimit{N: 10}}); err == nil || !strings.Contains(err.Error(), "rate period 0 ms") {
		t.Errorf("bad rate: %v", err)
	}
	if r.s.Hash() != before {
		t.Error("a refused update changed the state")
	}
	// 10 per 10 s with burst 1: I = 1 s, tau = 0, tat kept at 10 s.
	if got := r.dispatch(5000); got != "-" {
		t.Errorf("at 5000: %s", got)
	}
	r.tenant(TenantSpec{Name: "a", Tier: Gold})
	a, _ = r.s.Tenant("a")
	if a.PauseState().RateTAT != 0 {
		t.Errorf("tat after removal %d", a.PauseState().RateTAT)
	}
	if got := r.dispatch(5000); got != "a/#2" {
		t.Errorf("after removal: %s", got)
	}
}

// TestParseRate checks the rate syntax and its errors.
func TestParseRate(t *testing.T) {
	for _, c := range []struct {
		in, want string
	}{
		{"100/1m", "100/1m0s"},
		{"2/1s", "2/1s"},
		{"none", "none"},
		{"0/1s", "rate \"0/1s\": N must be a whole number >= 1"},
		{"5", "rate \"5\" (want N/PERIOD, e.g. 100/1m, or none)"},
		{"5/1us", "rate \"5/1us\": PERIOD must be a positive duration in whole milliseconds (e.g. 1s, 1m)"},
		{"2000/1ms", "rate 2000 per 1 ms has an interval below 1 µs (want N <= PERIOD in µs)"},
		{"1/1000h", "rate period 3600000000 ms (want 1 ms .. 720h)"},
	} {
		r, err := ParseRate(c.in, 0)
		got := r.String()
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("ParseRate(%q) = %s, want %s", c.in, got, c.want)
		}
	}
	if r, _ := ParseRate("60/1m", 5); r.String() != "60/1m0s burst=5" || r.IntervalUs() != 1_000_000 {
		t.Errorf("60/1m burst 5: %s I=%d", r, r.IntervalUs())
	}
	if r, _ := ParseRate("3/1s", 0); r.IntervalUs() != 333_334 {
		t.Errorf("3/1s: I=%d, want 333334 (rounded up)", r.IntervalUs())
	}
}

// TestDispatchAllocatesNothingWithRates: a dispatch that charges a tenant's
// and a group's rate limit allocates nothing.
func TestDispatchAllocatesNothingWithRates(t *testing.T) {
	s, _ := New(DefaultConfig())
	for i := range 50 {
		name := fmt.Sprintf("t%d", i)
		s.UpsertTenant(TenantSpec{Name: name, Tier: Gold, Rate: RateLimit{N: 1000, PeriodMs: 1000}})
		s.SetGroup(name, "g", GroupSettings{Rate: RateLimit{N: 1000, PeriodMs: 1000}})
		for range 200 {
			s.Submit(0, Submission{Tenant: name, Size: SM, EstCostMs: 10, Group: "g"})
		}
	}
	now := Time(0)
	allocs := testing.AllocsPerRun(500, func() {
		now++
		if _, ok, err := s.Dispatch(now, SM, "w"); !ok || err != nil {
			t.Fatal(ok, err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per dispatch", allocs)
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestRateMatchesReferenceGCRA: one tenant under a random limit (changed
// now and then, which keeps tat) and one of its groups under another;
// dispatch attempts at random increasing times are allowed exactly when a
// plain reference GCRA of both limits allows them, and Verify holds
// throughout.
func TestRateMatchesReferenceGCRA(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s, _ := New(DefaultConfig())
		draw := func(what string) RateLimit {
			n := uint32(rapid.IntRange(1, 5).Draw(t, what+"_n"))
			return RateLimit{N: n, PeriodMs: int64(rapid.IntRange(1, 3000).Draw(t, what+"_period")),
				Burst: uint32(rapid.IntRange(0, 4).Draw(t, what+"_burst"))}
		}
		tr, gr := draw("tenant"), draw("group")
		if _, err := s.UpsertTenant(TenantSpec{Name: "a", Tier: Gold, Rate: tr}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetGroup("a", "g", GroupSettings{Rate: gr}); err != nil {
			t.Fatal(err)
		}
		for range 200 {
			if _, err := s.Submit(0, Submission{Tenant: "a", Size: SM, EstCostMs: 1, Group: "g"}); err != nil {
				t.Fatal(err)
			}
		}
		var ttat, gtat int64
		allow := func(r RateLimit, tat, us int64) bool { return us >= tat-int64(r.BurstOf()-1)*r.IntervalUs() }
		now := Time(0)
		for step := range rapid.IntRange(1, 150).Draw(t, "steps") {
			now += Time(rapid.IntRange(0, 700).Draw(t, "dt"))
			if rapid.IntRange(0, 15).Draw(t, "change") == 0 {
				tr = draw("new_tenant")
				s.SetClock(now)
				if _, err := s.UpsertTenant(TenantSpec{Name: "a", Tier: Gold, Rate: tr}); err != nil {
					t.Fatal(err)
				}
			}
			us := int64(now) * 1000
			want := allow(tr, ttat, us) && allow(gr, gtat, us)
			_, ok, err := s.Dispatch(now, SM, "w")
			if err != nil {
				t.Fatal(err)
			}
			if ok != want {
				t.Fatalf("step %d at %d ms: dispatched %v, the reference GCRA says %v (tenant %s tat %d, group %s tat %d)", step, now, ok, want, tr, ttat, gr, gtat)
			}
			if ok {
				ttat = max(ttat, us) + tr.IntervalUs()
				gtat = max(gtat, us) + gr.IntervalUs()
			}
			if err := s.Verify(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
