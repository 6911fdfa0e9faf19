package fsm

import (
	"testing"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// keepAllBut is a tenant upsert of name that keeps every field but the
// ones set.
func keepAllBut(name string, u *clusterpb.TenantUpsert, set ...string) *clusterpb.Command {
	u.Name = name
	for _, f := range TenantFields() {
		named := false
		for _, s := range set {
			named = named || s == f
		}
		if !named {
			u.Keep = append(u.Keep, f)
		}
	}
	return &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: u}}
}

func tenantOf(t *testing.T, f *FSM, name string) sfq.Tenant {
	t.Helper()
	var out sfq.Tenant
	var ok bool
	f.Read(func(s *sfq.Scheduler) { out, ok = s.Tenant(name) })
	if !ok {
		t.Fatalf("no tenant %q", name)
	}
	return out
}

// TestTenantUpsertKeeps: an upsert changes only the fields it does not
// keep: the case (tier and max_class given, cap, rate and
// deadline permit kept), an explicit 0 clears, a rate removed drops its
// burst, a new tenant needs its tier, keep names only fields, and the
// refusal of a burst without a rate names the tenant.
func TestTenantUpsertKeeps(t *testing.T) {
	h := newHarness(t)
	h.one(&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "case2", Tier: pb.Tier_SILVER,
		Caps: &pb.Caps{MaxRunning: 3}, RateN: 10, RatePeriodMs: 60_000, RateBurst: 4, AllowDeadlines: true, ExportMetrics: true}}})

	h.one(keepAllBut("case2", &clusterpb.TenantUpsert{Tier: pb.Tier_GOLD, MaxClass: pb.Class_HIGH}, "tier", "max_class"))
	got := tenantOf(t, h.f, "case2")
	if got.Tier != sfq.Gold || got.MaxClass != sfq.ClassHigh || got.Caps.MaxRunning != 3 || got.Rate != (sfq.RateLimit{N: 10, PeriodMs: 60_000, Burst: 4}) ||
		!got.AllowDeadlines || !exported(h.f, "case2") {
		t.Fatalf("after the upsert of tier and max_class: %+v", got.TenantSpec)
	}

	// 0 given is 0: the cap goes; a rate given without its burst keeps it.
	h.one(keepAllBut("case2", &clusterpb.TenantUpsert{RateN: 5, RatePeriodMs: 1000}, "caps.max_running", "rate"))
	got = tenantOf(t, h.f, "case2")
	if got.Caps.MaxRunning != 0 || got.Rate != (sfq.RateLimit{N: 5, PeriodMs: 1000, Burst: 4}) || got.Tier != sfq.Gold {
		t.Fatalf("after clearing the cap: %+v", got.TenantSpec)
	}
	// A rate removed drops its burst.
	h.one(keepAllBut("case2", &clusterpb.TenantUpsert{}, "rate"))
	if got = tenantOf(t, h.f, "case2"); got.Rate != (sfq.RateLimit{}) {
		t.Fatalf("after removing the rate: %+v", got.Rate)
	}
	// Nothing named: nothing changes.
	before, _ := h.f.Freeze()
	h.one(keepAllBut("case2", &clusterpb.TenantUpsert{}))
	after, _ := h.f.Freeze()
	if string(encodeFSM(before)) != string(encodeFSM(after)) {
		t.Fatal("an upsert that names no field changed the state")
	}

	for _, tc := range []struct {
		cmd  *clusterpb.Command
		want string
	}{
		{keepAllBut("newbie", &clusterpb.TenantUpsert{Multiplier: 2}, "multiplier"), `tier: required to create tenant "newbie" (free, bronze, silver, gold or diamond)`},
		{keepAllBut("case2", &clusterpb.TenantUpsert{RateBurst: 3}, "rate_burst"), `rate_burst: tenant "case2" has no rate limit: give a rate (N/PERIOD) with its burst`},
		{&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "case2", Keep: []string{"tier", "color"}}}},
			`keep: "color" is not a field of a tenant upsert (want tier, multiplier, caps.max_running, caps.max_running_sm, caps.max_running_md, caps.max_running_lg, caps.max_inflight_cpu_ms, caps.max_queued, caps.max_running_critical, caps.max_running_high, caps.max_running_deadline, export_metrics, max_class, allow_deadlines, group_cap, group_order, max_groups, rate, rate_burst)`},
		{&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "case2", Keep: []string{"tier", "tier"}}}}, `keep: "tier" is named twice`},
	} {
		if r := h.apply(tc.cmd)[0]; r.Code != Invalid || r.Msg != tc.want {
			t.Errorf("%v: %s %q\nwant %q", tc.cmd, r.Code, r.Msg, tc.want)
		}
		if r := h.f.Admit(tc.cmd); r.Msg != tc.want {
			t.Errorf("the leader's check of %v: %q", tc.cmd, r.Msg)
		}
	}
	// A new tenant named with its tier takes the defaults for the rest.
	h.one(keepAllBut("newbie", &clusterpb.TenantUpsert{Tier: pb.Tier_FREE}, "tier"))
	if got := tenantOf(t, h.f, "newbie"); got.TenantSpec != (sfq.TenantSpec{Name: "newbie", Tier: sfq.Free, Multiplier: 1, MaxClass: sfq.ClassNormal}) {
		t.Fatalf("a new tenant: %+v", got.TenantSpec)
	}
}

// TestTenantUpsertKeepBelowLevel7: below level 7 Apply ignores keep, as
// builds before it do (so a cluster of mixed builds applies alike), and
// the leader resolves it from the state before it proposes (Resolve).
func TestTenantUpsertKeepBelowLevel7(t *testing.T) {
	h := &harness{t: t, f: NewAtLevel(Level6), now: 1_000}
	h.one(&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "a", Tier: pb.Tier_SILVER, Caps: &pb.Caps{MaxRunning: 3}}}})
	partial := keepAllBut("a", &clusterpb.TenantUpsert{Tier: pb.Tier_GOLD}, "tier")
	resolved := h.f.Resolve(partial)
	u := resolved.GetTenantUpsert()
	if len(u.Keep) != 0 || u.Tier != pb.Tier_GOLD || u.GetCaps().GetMaxRunning() != 3 {
		t.Fatalf("resolved below level 7: %v", u)
	}
	h.one(resolved)
	if got := tenantOf(t, h.f, "a"); got.Tier != sfq.Gold || got.Caps.MaxRunning != 3 {
		t.Fatalf("after the resolved upsert: %+v", got.TenantSpec)
	}
	// The same command applied unresolved sets every field, as builds
	// before level 7 do.
	h.one(partial)
	if got := tenantOf(t, h.f, "a"); got.Caps.MaxRunning != 0 {
		t.Fatalf("below level 7 keep was honoured: %+v", got.TenantSpec)
	}
	if again := newHarness(t).f.Resolve(partial); again != partial {
		t.Fatal("at level 7 Resolve changed the command")
	}
}

// TestWebhookSetKeeps: from level 7 a webhook set that leaves out the URL
// or the kinds keeps them, "all" sets every kind again, and a new
// endpoint needs its URL.
func TestWebhookSetKeeps(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("a", pb.Tier_GOLD))
	set := func(url string, kinds ...string) *clusterpb.Command {
		return &clusterpb.Command{Cmd: &clusterpb.Command_WebhookSet{WebhookSet: &clusterpb.WebhookSet{Tenant: "a", Url: url, Kinds: kinds, KeyId: 1}}}
	}
	if r := h.apply(set(""))[0]; r.Msg != `url: required to create the webhook of tenant "a"` {
		t.Fatalf("a new endpoint without url: %+v", r)
	}
	h.one(set("https://hooks.example.com/a", "completed", "failed"))
	h.one(set("https://hooks.example.com/b"))
	w, _ := h.f.WebhookOf("a")
	if w.URL != "https://hooks.example.com/b" || len(WebhookKindNames(w.Kinds)) != 2 {
		t.Fatalf("after a set without kinds: %+v", w)
	}
	h.one(set("", "queued"))
	w, _ = h.f.WebhookOf("a")
	if w.URL != "https://hooks.example.com/b" || w.Kinds != 1<<EvQueued {
		t.Fatalf("after a set without url: %+v", w)
	}
	h.one(set("", "all"))
	if w, _ = h.f.WebhookOf("a"); w.Kinds != 0 {
		t.Fatalf("after kinds all: %+v", w)
	}
}

func exported(f *FSM, name string) (on bool) {
	f.ReadTenants(func(s *sfq.Scheduler, flags TenantFlags) {
		i, ok := s.TenantIndex(name)
		on = ok && flags.ExportMetrics(i)
	})
	return on
}
