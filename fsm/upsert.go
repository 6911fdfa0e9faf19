package fsm

import (
	"slices"
	"strings"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// Upserts that change only what they name (feature level 7). An admin
// upsert of a tenant leaves every field it does not name as it was: the
// command lists them in keep, and its check takes them from the tenant's
// current settings (a new tenant's: their defaults) before anything else
// — so the upsert is one entry, applied on the state of its index, and
// two admins changing different fields at once both see their change.
// Without keep an upsert sets every field, as every build before level 7
// applies it; and below Level7 Apply ignores keep as those builds do,
// while the leader resolves it before it proposes (Resolve), so that a
// cluster of mixed builds applies the same full upsert everywhere.

// tenantField is one field of a tenant upsert that keep may name.
type tenantField struct {
	name string
	copy func(dst, src *clusterpb.TenantUpsert)
}

// capsOf returns u's caps, made if absent.
func capsOf(u *clusterpb.TenantUpsert) *pb.Caps {
	if u.Caps == nil {
		u.Caps = &pb.Caps{}
	}
	return u.Caps
}

var tenantFields = []tenantField{
	{"tier", func(d, s *clusterpb.TenantUpsert) { d.Tier = s.Tier }},
	{"multiplier", func(d, s *clusterpb.TenantUpsert) { d.Multiplier = s.Multiplier }},
	{"caps.max_running", func(d, s *clusterpb.TenantUpsert) { capsOf(d).MaxRunning = s.GetCaps().GetMaxRunning() }},
	{"caps.max_running_sm", func(d, s *clusterpb.TenantUpsert) { capsOf(d).MaxRunningSm = s.GetCaps().GetMaxRunningSm() }},
	{"caps.max_running_md", func(d, s *clusterpb.TenantUpsert) { capsOf(d).MaxRunningMd = s.GetCaps().GetMaxRunningMd() }},
	{"caps.max_running_lg", func(d, s *clusterpb.TenantUpsert) { capsOf(d).MaxRunningLg = s.GetCaps().GetMaxRunningLg() }},
	{"caps.max_inflight_cpu_ms", func(d, s *clusterpb.TenantUpsert) { capsOf(d).MaxInflightCpuMs = s.GetCaps().GetMaxInflightCpuMs() }},
	{"caps.max_queued", func(d, s *clusterpb.TenantUpsert) { capsOf(d).MaxQueued = s.GetCaps().GetMaxQueued() }},
	{"caps.max_running_critical", func(d, s *clusterpb.TenantUpsert) { capsOf(d).MaxRunningCritical = s.GetCaps().GetMaxRunningCritical() }},
	{"caps.max_running_high", func(d, s *clusterpb.TenantUpsert) { capsOf(d).MaxRunningHigh = s.GetCaps().GetMaxRunningHigh() }},
	{"caps.max_running_deadline", func(d, s *clusterpb.TenantUpsert) { capsOf(d).MaxRunningDeadline = s.GetCaps().GetMaxRunningDeadline() }},
	{"export_metrics", func(d, s *clusterpb.TenantUpsert) { d.ExportMetrics = s.ExportMetrics }},
	{"max_class", func(d, s *clusterpb.TenantUpsert) { d.MaxClass = s.MaxClass }},
	{"allow_deadlines", func(d, s *clusterpb.TenantUpsert) { d.AllowDeadlines = s.AllowDeadlines }},
	{"group_cap", func(d, s *clusterpb.TenantUpsert) { d.GroupCap = s.GroupCap }},
	{"group_order", func(d, s *clusterpb.TenantUpsert) { d.GroupOrder = s.GroupOrder }},
	{"max_groups", func(d, s *clusterpb.TenantUpsert) { d.MaxGroups = s.MaxGroups }},
	{"rate", func(d, s *clusterpb.TenantUpsert) { d.RateN, d.RatePeriodMs = s.RateN, s.RatePeriodMs }},
	{"rate_burst", func(d, s *clusterpb.TenantUpsert) { d.RateBurst = s.RateBurst }},
}

// TenantFields lists the names a tenant upsert's keep may hold, in the
// order of UpsertTenantRequest.
func TenantFields() []string {
	out := make([]string, len(tenantFields))
	for i, f := range tenantFields {
		out[i] = f.name
	}
	return out
}

// checkKeep refuses a keep that names a field twice or a field that is
// not one.
func checkKeep(keep []string) Result {
	for i, k := range keep {
		if !slices.ContainsFunc(tenantFields, func(f tenantField) bool { return f.name == k }) {
			return refusef(Invalid, "keep", "%q is not a field of a tenant upsert (want %s)", k, strings.Join(TenantFields(), ", "))
		}
		if slices.Contains(keep[:i], k) {
			return refusef(Invalid, "keep", "%q is named twice", k)
		}
	}
	return Result{}
}

// mergeTenantUpsert returns the upsert c makes of a tenant whose current
// settings are base: base with every field c does not keep taken from c.
// A rate c removes drops its burst too unless c sets one.
func mergeTenantUpsert(c, base *clusterpb.TenantUpsert) *clusterpb.TenantUpsert {
	out := &clusterpb.TenantUpsert{Name: c.Name, Tier: base.Tier, Multiplier: base.Multiplier, ExportMetrics: base.ExportMetrics,
		MaxClass: base.MaxClass, AllowDeadlines: base.AllowDeadlines, GroupCap: base.GroupCap, GroupOrder: base.GroupOrder,
		MaxGroups: base.MaxGroups, RateN: base.RateN, RatePeriodMs: base.RatePeriodMs, RateBurst: base.RateBurst}
	if base.Caps != nil {
		out.Caps = CapsToPB(CapsFromPB(base.Caps))
	}
	for _, f := range tenantFields {
		if !slices.Contains(c.Keep, f.name) {
			f.copy(out, c)
		}
	}
	if !slices.Contains(c.Keep, "rate") && c.RateN == 0 && slices.Contains(c.Keep, "rate_burst") {
		out.RateBurst = 0
	}
	return out
}

// tenantUpsert is what the check of a tenant upsert found: the upsert
// with every field set (kept ones from the tenant) and its spec.
type tenantUpsert struct {
	full *clusterpb.TenantUpsert
	spec sfq.TenantSpec
}

// checkTenantUpsert is the check of a tenant upsert: the fields it keeps
// (taken from the tenant, which must exist unless the tier is given),
// then every field.
func (f *FSM) checkTenantUpsert(c *clusterpb.TenantUpsert) (tenantUpsert, Result) {
	full := c
	if len(c.Keep) > 0 {
		if r := checkKeep(c.Keep); r.Refused() {
			return tenantUpsert{}, r
		}
		base, ok := f.tenantUpsertOf(c.Name)
		if !ok {
			if slices.Contains(c.Keep, "tier") {
				return tenantUpsert{}, refusef(Invalid, "tier", "required to create tenant %q (free, bronze, silver, gold or diamond)", c.Name)
			}
			base = &clusterpb.TenantUpsert{}
		}
		full = mergeTenantUpsert(c, base)
		if full.RateN == 0 && full.RateBurst != 0 && slices.Contains(c.Keep, "rate") {
			return tenantUpsert{}, refusef(Invalid, "rate_burst", "tenant %q has no rate limit: give a rate (N/PERIOD) with its burst", c.Name)
		}
	}
	spec, err := tenantSpec(full)
	if err != nil {
		return tenantUpsert{}, refuse(err)
	}
	return tenantUpsert{full, spec}, Result{}
}

// Resolve returns the command c as the leader proposes it at the
// cluster's level: below Level7, a tenant upsert that keeps fields with
// them taken from the tenant as it stands (and keep dropped), which
// every build applies alike; else c itself. Below Level7 two upserts of
// one tenant resolved at the same moment may thus undo each other's
// change; from Level7 Apply takes the kept fields at its own index.
func (f *FSM) Resolve(c *clusterpb.Command) *clusterpb.Command {
	if w := c.GetWebhookSet(); w != nil {
		return f.resolveWebhookSet(c, w)
	}
	u := c.GetTenantUpsert()
	if u == nil || len(u.Keep) == 0 {
		return c
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.level >= Level7 || checkKeep(u.Keep).Refused() {
		return c
	}
	base, ok := f.tenantUpsertOf(u.Name)
	if !ok {
		base = &clusterpb.TenantUpsert{}
		if slices.Contains(u.Keep, "tier") {
			return c // refused by its check, as at Level7
		}
	}
	return &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: mergeTenantUpsert(u, base)}}
}

// tenantFieldsOnly is what CheckFields checks of a tenant upsert: the
// fields it sets, the kept ones standing at valid values (Admit checks
// them on the state).
func tenantFieldsOnly(c *clusterpb.TenantUpsert) error {
	if len(c.Keep) == 0 {
		_, err := tenantSpec(c)
		return err
	}
	if r := checkKeep(c.Keep); r.Refused() {
		return r.Refusal()
	}
	_, err := tenantSpec(mergeTenantUpsert(c, &clusterpb.TenantUpsert{Tier: pb.Tier_FREE, RateN: 1, RatePeriodMs: 1000}))
	return err
}

// tenantUpsertOf returns a live tenant's settings as the upsert that
// would set them all, and whether it exists.
func (f *FSM) tenantUpsertOf(name string) (*clusterpb.TenantUpsert, bool) {
	t, ok := f.sched.Tenant(name)
	if !ok {
		return nil, false
	}
	u := TenantSpecToPB(t.TenantSpec)
	i, _ := f.sched.TenantIndex(name)
	u.ExportMetrics = TenantFlags{f.exported}.ExportMetrics(i)
	return u, true
}

// resolveWebhookSet is Resolve of a webhook set: below Level7, the URL
// and kinds it leaves out taken from the tenant's endpoint.
func (f *FSM) resolveWebhookSet(c *clusterpb.Command, w *clusterpb.WebhookSet) *clusterpb.Command {
	if w.Url != "" && len(w.Kinds) > 0 {
		return c
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.level >= Level7 {
		return c
	}
	ti, ok := f.sched.TenantIndex(w.Tenant)
	if !ok {
		return c
	}
	i, found := f.webhookAt(ti)
	if !found {
		return c
	}
	out := &clusterpb.WebhookSet{Tenant: w.Tenant, Url: w.Url, Kinds: w.Kinds, Rotate: w.Rotate, GraceMs: w.GraceMs, KeyId: w.KeyId}
	if out.Url == "" {
		out.Url = f.webhooks[i].URL
	}
	if len(out.Kinds) == 0 {
		out.Kinds = WebhookKindNames(f.webhooks[i].Kinds)
	}
	return &clusterpb.Command{Cmd: &clusterpb.Command_WebhookSet{WebhookSet: out}}
}
