package fsm

import (
	"bufio"
	"bytes"
	"fmt"
	"testing"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

func pauseCmd(tenant, group string, all, resume bool) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_Pause{Pause: &clusterpb.Pause{Tenant: tenant, Group: group, All: all, Resume: resume}}}
}

func tenantPauseCmd(tenant, group string, resume bool) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_Pause{Pause: &clusterpb.Pause{Tenant: tenant, Group: group, Resume: resume, AsTenant: true}}}
}

func groupRateCmd(tenant, group string, n uint32, periodMs int64, burst uint32) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_SetGroup{SetGroup: &clusterpb.SetGroup{Tenant: tenant, Group: group, SetRate: true, RateN: n,
		RatePeriodMs: periodMs, RateBurst: burst}}}
}

// TestFeatureLevel5Pauses: at level 4 pause, resume and rate limits are
// refused at the edge and in Apply, naming the field and both levels, and
// change nothing; at level 5 they go through, and the state (written as
// version 7) restores to the same hash.
func TestFeatureLevel5Pauses(t *testing.T) {
	h := &harness{t: t, f: newAt(Level4), now: 1_000}
	h.one(tenant("acme", pb.Tier_GOLD))
	refused := []levelCase{
		{pauseCmd("acme", "", false, false), "pause"},
		{pauseCmd("acme", "g", false, false), "pause"},
		{pauseCmd("", "", true, false), "pause"},
		{pauseCmd("acme", "", false, true), "resume"},
		{upsert(&clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD, RateN: 2, RatePeriodMs: 1000}), "rate"},
		{upsert(&clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD, RateN: 2, RatePeriodMs: 1000, RateBurst: 3}), "rate"},
		{groupRateCmd("acme", "g", 1, 1000, 0), "group rate"},
	}
	h.refusedBelow(Level5, refused)
	if v, _ := h.f.Freeze(); v.StateVersion() != 6 {
		t.Fatalf("level 4 writes version %d", v.StateVersion())
	}
	h.one(setLevelCmd(Level5))
	for _, c := range refused {
		if r := h.one(c.cmd); r.Code != OK {
			t.Errorf("%s at level 5: %v", c.what, r.Err())
		}
	}
	v, _ := h.f.Freeze()
	if v.StateVersion() != 7 {
		t.Fatalf("level 5 writes version %d", v.StateVersion())
	}
	back := New()
	if err := back.Restore(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(encodeFSM(v)))), h.index); err != nil {
		t.Fatal(err)
	}
	h1, _ := h.f.Hash()
	h2, _ := back.Hash()
	if h1 != h2 {
		t.Fatal("a level 5 state restores to another state")
	}
	var ta sfq.Tenant
	var g sfq.Group
	var all bool
	h.f.Read(func(s *sfq.Scheduler) {
		ta, _ = s.Tenant("acme")
		g, _ = s.Group("acme", "g")
		all = s.DispatchPaused()
	})
	if ta.Paused() || !g.Paused() || !all || ta.Rate.String() != "2/1s burst=3" || g.Rate.String() != "1/1s" {
		t.Fatalf("tenant paused %v rate %s, group paused %v rate %s, all %v", ta.Paused(), ta.Rate, g.Paused(), g.Rate, all)
	}
}

// TestPauseEventsAndRefusals: pausing and resuming a tenant or a group
// records a tenant-level event (job 0, the group in the worker's place)
// in the tenant's stream, once; a repeat is a duplicate with no event;
// bad input is refused naming the field and changes nothing.
func TestPauseEventsAndRefusals(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	for _, c := range []struct {
		cmd  *clusterpb.Command
		want string
	}{
		{pauseCmd("acme", "", false, false), "OK changed"},
		{pauseCmd("acme", "", false, false), "OK duplicate"},
		{pauseCmd("acme", "eu", false, false), "OK changed"},
		{pauseCmd("acme", "eu", false, true), "OK changed"},
		{pauseCmd("acme", "", false, true), "OK changed"},
		// The tenant's own token: its own pause it lifts; an admin's not.
		{tenantPauseCmd("acme", "", false), "OK changed"},
		{tenantPauseCmd("acme", "", true), "OK changed"},
		{tenantPauseCmd("acme", "eu", false), "OK changed"},
		{pauseCmd("acme", "eu", false, false), "OK changed"},
		{tenantPauseCmd("acme", "eu", true), "PERMISSION_DENIED: group eu of tenant acme was paused by an admin: only an admin may resume it"},
		{pauseCmd("acme", "eu", false, true), "OK changed"},
		{pauseCmd("acme", "", false, false), "OK changed"},
		{tenantPauseCmd("acme", "", true), "PERMISSION_DENIED: tenant acme was paused by an admin: only an admin may resume it"},
		{pauseCmd("acme", "", false, true), "OK changed"},
		{&clusterpb.Command{Cmd: &clusterpb.Command_Pause{Pause: &clusterpb.Pause{All: true, AsTenant: true}}}, "PERMISSION_DENIED: all dispatch is paused and resumed by an admin"},
		{pauseCmd("nope", "", false, false), `NOT_FOUND: unknown tenant "nope"`},
		{pauseCmd("acme", "bad name", false, false), `INVALID_ARGUMENT: group name "bad name" has ' ' at byte 3 (allowed: A-Z a-z 0-9 . _ : @ -)`},
		{pauseCmd("acme", "", true, false), "INVALID_ARGUMENT: a pause of all dispatch names no tenant or group"},
		{upsert(&clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD, RateN: 5}), "INVALID_ARGUMENT: rate period 0 ms (want 1 ms .. 720h)"},
		{upsert(&clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD, RatePeriodMs: 5}), "INVALID_ARGUMENT: rate has a period or burst but no count N (want N/PERIOD with N >= 1)"},
		{groupRateCmd("acme", "g", 5000, 1, 0), "INVALID_ARGUMENT: rate 5000 per 1 ms has an interval below 1 µs (want N <= PERIOD in µs)"},
		{&clusterpb.Command{Cmd: &clusterpb.Command_SetGroup{SetGroup: &clusterpb.SetGroup{Tenant: "acme", Group: "g", SetRate: true, RateN: 1, RatePeriodMs: 1000, AsTenant: true}}},
			"PERMISSION_DENIED: rate: a group's rate limit is set by an admin"},
	} {
		before, _ := h.f.Hash()
		r := h.one(c.cmd)
		got := fmt.Sprintf("OK %s", r.Outcome)
		if r.Code != OK {
			got = r.Err().Error()
			if after, _ := h.f.Hash(); after != before {
				t.Errorf("refused %v changed the state", c.cmd)
			}
		}
		if got != c.want {
			t.Errorf("%v: %s, want %s", c.cmd, got, c.want)
		}
	}
	var evs []string
	h.f.Events(0, func(ev *Event) bool {
		evs = append(evs, fmt.Sprintf("%s job=%d tenant=%d group=%q", ev.Kind, ev.Job, ev.Tenant, ev.Worker))
		return true
	})
	want := `[paused job=0 tenant=0 group="" paused job=0 tenant=0 group="eu" resumed job=0 tenant=0 group="eu" resumed job=0 tenant=0 group=""` +
		` paused job=0 tenant=0 group="" resumed job=0 tenant=0 group="" paused job=0 tenant=0 group="eu" paused job=0 tenant=0 group="eu"` +
		` resumed job=0 tenant=0 group="eu" paused job=0 tenant=0 group="" resumed job=0 tenant=0 group=""]`
	if got := fmt.Sprint(evs); got != want {
		t.Errorf("events %s\nwant %s", got, want)
	}
	// The resumed group, with no job and no setting, is forgotten.
	h.f.Read(func(s *sfq.Scheduler) {
		if _, ok := s.Group("acme", "eu"); ok {
			t.Error("a resumed group without jobs was kept")
		}
	})
}

// TestRateLimitCoalesced: dispatches in one entry (one cluster time) and
// across entries follow the GCRA; a state restored mid-way goes on alike.
func TestRateLimitCoalesced(t *testing.T) {
	h := newHarness(t)
	h.now = 0
	h.one(upsert(&clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD, RateN: 2, RatePeriodMs: 1000, RateBurst: 3}))
	for range 10 {
		h.one(submit("acme", "", 1000, ""))
	}
	// One entry at t=0 with five dispatches: three go through (burst 3).
	res := h.apply(dispatch("w1", 1), dispatch("w2", 1), dispatch("w3", 1), dispatch("w4", 1), dispatch("w5", 1))
	var got []bool
	for _, r := range res {
		got = append(got, r.Assigned)
	}
	if fmt.Sprint(got) != "[true true true false false]" {
		t.Fatalf("coalesced dispatches %v", got)
	}
	v, _ := h.f.Freeze()
	back := New()
	if err := back.Restore(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(encodeFSM(v)))), h.index); err != nil {
		t.Fatal(err)
	}
	other := &harness{t: t, f: back, index: h.index}
	for _, now := range []sfq.Time{499, 500, 999, 1000} {
		h.now, other.now = now, now
		a := h.one(dispatch("w4", uint64(now)))
		b := other.one(dispatch("w4", uint64(now)))
		if a.Assigned != b.Assigned || a.Assigned != (now == 500 || now == 1000) {
			t.Errorf("at %d: assigned %v, restored %v", now, a.Assigned, b.Assigned)
		}
		if a.Assigned {
			h.one(finished(uint64(a.Job), a.Attempt, "w4", 1000))
			other.one(finished(uint64(b.Job), b.Attempt, "w4", 1000))
		}
		h1, _ := h.f.Hash()
		h2, _ := back.Hash()
		if h1 != h2 {
			t.Fatalf("at %d the restored state diverged", now)
		}
	}
}

// TestEmptyDispatchKeepsCredit: from level 5 a Dispatch that gives nothing
// leaves the worker's credit unspent: the same credit gets a job once one
// is eligible (a rate limit allows it). At level 4 it is spent, as the
// builds before did.
func TestEmptyDispatchKeepsCredit(t *testing.T) {
	for _, c := range []struct {
		level uint32
		want  bool
	}{{Level4, false}, {Level5, true}} {
		h := &harness{t: t, f: newAt(c.level), now: 1_000}
		h.one(tenant("acme", pb.Tier_GOLD))
		if r := h.one(dispatch("w1", 7)); r.Assigned || r.Code != OK {
			t.Fatalf("level %d: empty dispatch %+v", c.level, r)
		}
		h.one(submit("acme", "", 1000, ""))
		r := h.one(dispatch("w1", 7))
		if r.Assigned != c.want {
			t.Errorf("level %d: the same credit after an empty dispatch: assigned %v (outcome %s), want %v", c.level, r.Assigned, r.Outcome, c.want)
		}
		if c.want {
			// A retry of the dispatch that gave the job gives it again.
			if again := h.one(dispatch("w1", 7)); !again.Assigned || again.Job != r.Job || again.Outcome != sfq.Duplicate {
				t.Errorf("retry %+v", again)
			}
		}
	}
}
