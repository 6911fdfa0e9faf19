package sfq

import (
	"strconv"
	"strings"
	"time"
)

// Pauses and rate limits (SPEC §3 "Delays, expiry, pause and rate limits";
// feature level 5).
//
// A paused tenant is blocked by a tenant-level limit (every head of it,
// as its max_running would), a paused group by a group-level one (passed
// over: its tenant's other groups go on). A rate limit is a GCRA in
// cluster-time microseconds: interval I = ceil(period / N), tolerance
// tau = (burst - 1) * I, theoretical arrival time tat (0 at first). A
// head is eligible at t iff t >= tat - tau for its tenant's limit and for
// its group's; a dispatch at t sets tat = max(tat, t) + I on both.
//
// Eligibility now changes with time alone, so the core keeps the time it
// last evaluated it at (evalUs) and, in rateT and rateG, the tenants and
// groups whose limit blocks them at that time, by the time it stops
// (tat - tau). Every command that takes effect first advances that time to
// its own (advance): the limits that stopped blocking are re-evaluated,
// their tenants (and groups) clamped as they become eligible; then the
// command takes effect and re-places what it touched. A refused command
// advances nothing. Dispatch stays O(log T): the heaps are keyed by time.

// RateLimit is a rate limit: at most N dispatches per period, bursts up
// to Burst (0: N). The zero value is no limit.
type RateLimit struct {
	N        uint32
	PeriodMs int64
	Burst    uint32
}

// Bounds of a rate limit.
const (
	// MaxRatePeriodMs bounds a rate limit's period (30 days).
	MaxRatePeriodMs = 30 * 24 * 3600 * 1000
	// MaxRateBurst bounds a burst.
	MaxRateBurst = 1_000_000
)

// None reports whether r is no limit.
func (r RateLimit) None() bool { return r.N == 0 }

// BurstOf returns the burst in force: Burst, or N when it is 0.
func (r RateLimit) BurstOf() uint32 {
	if r.Burst == 0 {
		return r.N
	}
	return r.Burst
}

// IntervalUs returns the GCRA interval I = ceil(period / N) in µs.
func (r RateLimit) IntervalUs() int64 {
	if r.N == 0 {
		return 0
	}
	p := r.PeriodMs * 1000
	return (p + int64(r.N) - 1) / int64(r.N)
}

// PerPeriod prints the rate alone, N/PERIOD ("none" for no limit).
func (r RateLimit) PerPeriod() string {
	if r.N == 0 {
		return "none"
	}
	return strconv.FormatUint(uint64(r.N), 10) + "/" + (time.Duration(r.PeriodMs) * time.Millisecond).String()
}

// toleranceUs returns tau = (burst - 1) * I in µs.
func (r RateLimit) toleranceUs() int64 { return int64(r.BurstOf()-1) * r.IntervalUs() }

// Validate checks a rate limit, naming what (e.g. "rate") in its error.
func (r RateLimit) Validate(what string) error {
	if r.N == 0 {
		if r.PeriodMs != 0 || r.Burst != 0 {
			return invalidf("", "%s has a period or burst but no count N (want N/PERIOD with N >= 1)", what)
		}
		return nil
	}
	if r.PeriodMs < 1 || r.PeriodMs > MaxRatePeriodMs {
		return invalidf("", "%s period %d ms (want 1 ms .. 720h)", what, r.PeriodMs)
	}
	if int64(r.N) > r.PeriodMs*1000 {
		return invalidf("", "%s %d per %d ms has an interval below 1 µs (want N <= PERIOD in µs)", what, r.N, r.PeriodMs)
	}
	if r.BurstOf() > MaxRateBurst {
		return invalidf("", "%s burst %d (want 1..%d; without a burst it is N)", what, r.BurstOf(), MaxRateBurst)
	}
	return nil
}

// String prints the limit as N/PERIOD (Go duration syntax), with
// " burst=B" when the burst is not N; "none" for no limit.
func (r RateLimit) String() string {
	if r.N == 0 {
		return "none"
	}
	s := r.PerPeriod()
	if r.Burst != 0 && r.Burst != r.N {
		s += " burst=" + strconv.FormatUint(uint64(r.Burst), 10)
	}
	return s
}

// ParseRate reads "N/PERIOD" (PERIOD in Go duration syntax, whole
// milliseconds, e.g. 100/1m) or "none" (also "off"), with the burst
// given apart (0: N). The error names the field and the rule.
func ParseRate(s string, burst uint32) (RateLimit, error) {
	if s == "none" || s == "off" || s == "" {
		if burst != 0 {
			return RateLimit{}, invalidf("", "burst %d without a rate", burst)
		}
		return RateLimit{}, nil
	}
	ns, ps, ok := strings.Cut(s, "/")
	if !ok {
		return RateLimit{}, invalidf("", "rate %q (want N/PERIOD, e.g. 100/1m, or none)", s)
	}
	n, err := strconv.ParseUint(ns, 10, 32)
	if err != nil || n < 1 {
		return RateLimit{}, invalidf("", "rate %q: N must be a whole number >= 1", s)
	}
	d, err := time.ParseDuration(ps)
	if err != nil || d%time.Millisecond != 0 || d <= 0 {
		return RateLimit{}, invalidf("", "rate %q: PERIOD must be a positive duration in whole milliseconds (e.g. 1s, 1m)", s)
	}
	r := RateLimit{N: uint32(n), PeriodMs: d.Milliseconds(), Burst: burst}
	return r, r.Validate("rate")
}

// rateBlocks reports whether limit r with tat blocks a dispatch at nowUs.
func rateBlocks(r RateLimit, tat, nowUs int64) bool {
	return r.N != 0 && nowUs < tat-r.toleranceUs()
}

// eligibleAtUs returns when limit r with tat next allows a dispatch.
func eligibleAtUs(r RateLimit, tat int64) int64 { return tat - r.toleranceUs() }

// usToMs rounds a time in µs up to whole ms: the first cluster time (in
// ms) at or after it.
func usToMs(us int64) Time {
	if us <= 0 {
		return Time(-((-us) / 1000))
	}
	return Time((us + 999) / 1000)
}

// PausedBy says whether, and by whom, a tenant or a group is paused: a
// pause set by an admin is lifted by an admin only; one the tenant set
// (with its own client token) by either.
type PausedBy uint8

// The pause owners.
const (
	NotPaused PausedBy = iota
	PausedByTenant
	PausedByAdmin
	numPausedBy
)

func (p PausedBy) String() string {
	switch p {
	case PausedByTenant:
		return "tenant"
	case PausedByAdmin:
		return "admin"
	}
	return "no"
}

// TenantPause is a tenant's pause and rate-limit state, for reads.
type TenantPause struct {
	Paused PausedBy
	// RateTAT is its limit's theoretical arrival time, µs of cluster time.
	RateTAT int64
}

// PauseState returns the tenant's pause and GCRA state.
func (t *Tenant) PauseState() TenantPause { return TenantPause{Paused: t.paused, RateTAT: t.rateTAT} }

// Paused reports whether the tenant is paused.
func (t *Tenant) Paused() bool { return t.paused != NotPaused }

// PausedBy reports who paused the tenant.
func (t *Tenant) PausedBy() PausedBy { return t.paused }

// Paused reports whether the group is paused.
func (g *Group) Paused() bool { return g.paused != NotPaused }

// PausedBy reports who paused the group.
func (g *Group) PausedBy() PausedBy { return g.paused }

// pauseStep returns a pause owner after a pause (pause) or resume by an
// admin or not, and whether that is allowed: an admin's pause wins over
// the tenant's and is lifted by an admin only.
func pauseStep(cur PausedBy, pause, admin bool) (next PausedBy, ok bool) {
	switch {
	case pause && admin:
		return PausedByAdmin, true
	case pause:
		if cur == NotPaused {
			return PausedByTenant, true
		}
		return cur, true
	case cur == PausedByAdmin && !admin:
		return cur, false
	}
	return NotPaused, true
}

// RateTAT returns the group's GCRA theoretical arrival time (µs).
func (g *Group) RateTAT() int64 { return g.rateTAT }

// RateEligibleAt returns from when the tenant's rate limit allows a
// dispatch (ms of cluster time, rounded up; 0 for a limit that never held
// it), and whether it has a limit.
func (t *Tenant) RateEligibleAt() (Time, bool) {
	if t.Rate.None() {
		return 0, false
	}
	return max(0, usToMs(eligibleAtUs(t.Rate, t.rateTAT))), true
}

// RateEligibleAt is Tenant.RateEligibleAt for a group's limit.
func (g *Group) RateEligibleAt() (Time, bool) {
	if g.Rate.None() {
		return 0, false
	}
	return max(0, usToMs(eligibleAtUs(g.Rate, g.rateTAT))), true
}

// DispatchPaused reports whether all dispatch is paused (maintenance).
func (s *Scheduler) DispatchPaused() bool { return s.pausedAll }

// tenantGate reports whether tenant t is blocked by its pause or its rate
// limit at the time eligibility was last evaluated.
func (s *Scheduler) tenantGate(t *Tenant) bool {
	return t.paused != NotPaused || rateBlocks(t.Rate, t.rateTAT, s.evalUs)
}

// groupGate reports whether group g is blocked by its pause or its rate
// limit at the time eligibility was last evaluated.
func (s *Scheduler) groupGate(g *Group) bool {
	return g.paused != NotPaused || rateBlocks(g.Rate, g.rateTAT, s.evalUs)
}

// NextRateEligible returns the earliest cluster time (ms, rounded up) at
// which a rate limit that blocks a tenant or a group stops blocking it —
// the time the leader's dispatcher should look again — and whether there
// is one.
func (s *Scheduler) NextRateEligible() (Time, bool) {
	var at int64
	ok := false
	for _, h := range [2]*tenantHeap{&s.rateT, &s.rateG} {
		if e := h.top(); e != nil && (!ok || int64(e.tag) < at) {
			at, ok = int64(e.tag), true
		}
	}
	return usToMs(at), ok
}

// SetClock gives the cluster time of the inputs that follow (the state
// machine sets that of each log entry), for the commands that take no
// time argument (UpsertTenant, SetGroup, DeleteTenant, SetConfig, Prune,
// the pauses): each re-evaluates eligibility at it first, as the commands
// that take a time do at theirs. It is not state: the time a command
// takes effect at is.
func (s *Scheduler) SetClock(now Time) { s.clock = now }

// advance brings eligibility to cluster time now, as every command that
// takes effect does first: the tenants and groups whose rate limit stopped
// blocking them by then are re-placed (clamped if they become eligible),
// then the jobs whose expire_at has passed lapse out of their queues.
func (s *Scheduler) advance(now Time) {
	s.advanceRates(now)
	s.lapse(now)
}

// advanceRates moves the evaluation time to now (never back) and
// re-places the tenants and groups whose rate limit stopped blocking them
// by then, clamping those that become eligible.
func (s *Scheduler) advanceRates(now Time) {
	if now > s.clock {
		s.clock = now
	}
	us := int64(s.clock) * 1000
	if us <= s.evalUs {
		return
	}
	s.evalUs = us
	for {
		e := s.rateG.top()
		if e == nil || int64(e.tag) > us {
			break
		}
		gs := e.tenant
		s.rateG.remove(gs)
		g := s.groups.Get(uint64(gs))
		if g == nil {
			continue
		}
		ti := g.Tenant
		t := s.tenants.Get(uint64(ti))
		var was [NumClasses]bool
		if t.GroupOrder == GroupFair {
			was = s.groupEligibility(ti, gs)
		}
		if s.setBlocked(ti, gs, s.groupBlocked(t, g)) != 0 {
			s.place(ti, &placeOpts{clamp: true, touched: gs + 1, was: was}, allSlots)
		}
	}
	for {
		e := s.rateT.top()
		if e == nil || int64(e.tag) > us {
			break
		}
		ti := e.tenant
		s.rateT.remove(ti)
		if t := s.tenants.Get(uint64(ti)); t != nil && !t.Deleted {
			s.eachLane(ti, func(l uint32) { s.place(l, &placeOpts{clamp: true}, allSlots) }) // its rate limit holds it in every pool
		}
	}
}

// rekeyRateT puts tenant ti in rateT iff its limit blocks it at evalUs,
// keyed by when it stops.
func (s *Scheduler) rekeyRateT(ti uint32) {
	t := s.tenants.Get(uint64(ti))
	if t != nil && !t.Deleted && rateBlocks(t.Rate, t.rateTAT, s.evalUs) {
		s.rateT.set(hentry{tag: VirtualTime(eligibleAtUs(t.Rate, t.rateTAT)), tenant: ti})
		return
	}
	s.rateT.remove(ti)
}

// rekeyRateG is rekeyRateT for group gs.
func (s *Scheduler) rekeyRateG(gs uint32) {
	g := s.groups.Get(uint64(gs))
	if g != nil && rateBlocks(g.Rate, g.rateTAT, s.evalUs) {
		s.rateG.set(hentry{tag: VirtualTime(eligibleAtUs(g.Rate, g.rateTAT)), tenant: gs})
		return
	}
	s.rateG.remove(gs)
}

// rebuildRates recomputes rateT and rateG from the tables (on restore).
func (s *Scheduler) rebuildRates() {
	s.rateT = tenantHeap{order: byDeadline}
	s.rateG = tenantHeap{order: byDeadline}
	for i := range s.rt {
		s.rekeyRateT(uint32(i))
	}
	s.groups.View().Each(func(slot uint64, _ *Group) bool {
		s.rekeyRateG(uint32(slot))
		return true
	})
}

// chargeRates advances the GCRA state of lane ti's tenant (kept on its
// own record) and of group gs (kept alike on the group's records in every
// pool) for a dispatch at the evaluation time. It reports whether the
// tenant's limit now blocks it (its every slot changes).
func (s *Scheduler) chargeRates(ti, gs uint32) bool {
	blocked := false
	o := s.owner(ti)
	if t := s.tenants.Get(uint64(o)); !t.Rate.None() {
		tm := s.tenants.Mut(uint64(o))
		tm.rateTAT = max(tm.rateTAT, s.evalUs) + tm.Rate.IntervalUs()
		s.rekeyRateT(o)
		blocked = rateBlocks(tm.Rate, tm.rateTAT, s.evalUs)
	}
	if g := s.groups.Get(uint64(gs)); !g.Rate.None() {
		gm := s.groups.Mut(uint64(gs))
		gm.rateTAT = max(gm.rateTAT, s.evalUs) + gm.Rate.IntervalUs()
		s.rekeyRateG(gs)
		tat := gm.rateTAT
		s.siblingGroups(gs, func(l, sib uint32) {
			s.groups.Mut(uint64(sib)).rateTAT = tat
			s.rekeyRateG(sib)
			s.reblock(l, sib)
		})
	}
	return blocked
}

// PauseTenant pauses (or resumes) a tenant: its queued jobs are
// ineligible until resumed; running jobs go on and submits are accepted.
// On resume the activation clamp applies (a paused tenant counts as held
// by its own caps), so pausing banks no credit. admin says who acts: an
// admin's pause is lifted by an admin only (ErrPermission). It reports
// whether anything changed (pausing a paused tenant does not, unless an
// admin takes over the tenant's own pause).
func (s *Scheduler) PauseTenant(name string, pause, admin bool) (bool, error) {
	if changed, err := s.CheckPauseTenant(name, pause, admin); !changed {
		return false, err
	}
	ti, _ := s.TenantIndex(name)
	cur := s.tenants.Get(uint64(ti)).paused
	next, _ := pauseStep(cur, pause, admin)
	s.advance(s.clock)
	s.tenants.Mut(uint64(ti)).paused = next
	if (cur == NotPaused) != (next == NotPaused) {
		s.eachLane(ti, func(l uint32) { s.place(l, &placeOpts{clamp: true}, allSlots) }) // a pause holds it in every pool
	}
	return true, nil
}

// PauseGroup pauses (or resumes) one named group of a tenant: its queued
// jobs are ineligible until resumed, and it never holds back the tenant's
// other groups. Pausing a group that does not exist creates it (it counts
// against max_groups, ErrExhausted); a paused group is kept while it has
// no job. admin says who acts, as for PauseTenant. It reports whether
// anything changed.
func (s *Scheduler) PauseGroup(tenant, name string, pause, admin bool) (bool, error) {
	if changed, err := s.CheckPauseGroup(tenant, name, pause, admin); !changed {
		return false, err
	}
	ti, _ := s.TenantIndex(tenant)
	slots := s.groupSlots(ti, name)
	if len(slots) == 0 {
		next, _ := pauseStep(NotPaused, true, admin)
		s.advance(s.clock)
		gs := s.newGroup(ti, name, GroupSettings{})
		s.groups.Mut(uint64(gs)).paused = next
		s.joinHeaps(ti, gs)
		return true, nil
	}
	cur := s.groups.Get(uint64(slots[0][1])).paused
	next, _ := pauseStep(cur, pause, admin)
	// The group's records in every pool pause alike.
	for _, ls := range slots {
		s.changeGroup(ls[0], ls[1], func(g *Group) { g.paused = next })
	}
	return true, nil
}

// CheckPauseTenant is PauseTenant's verdict without the change: the
// tenant, and whether this caller may lift its pause. It reports whether
// PauseTenant would change anything. It changes nothing.
func (s *Scheduler) CheckPauseTenant(name string, pause, admin bool) (bool, error) {
	ti, ok := s.TenantIndex(name)
	if !ok {
		return false, UnknownTenant(name)
	}
	cur := s.tenants.Get(uint64(ti)).paused
	next, ok := pauseStep(cur, pause, admin)
	if !ok {
		return false, permissionf("", "", "tenant %s was paused by an admin: only an admin may resume it", name)
	}
	return next != cur, nil
}

// CheckPauseGroup is PauseGroup's verdict without the change: the
// group's name, the tenant, max_groups for a group it would make, and
// whether this caller may lift the group's pause. It reports whether
// PauseGroup would change anything. It changes nothing.
func (s *Scheduler) CheckPauseGroup(tenant, name string, pause, admin bool) (bool, error) {
	if err := ValidateGroupName(name); err != nil {
		return false, err
	}
	t, slots, err := s.groupOf(tenant, name)
	switch {
	case err != nil:
		return false, err
	case len(slots) == 0 && !pause:
		return false, nil
	case len(slots) == 0:
		return true, groupRoom(t, "pausing a new group", name)
	}
	cur := s.groups.Get(uint64(slots[0][1])).paused
	next, ok := pauseStep(cur, pause, admin)
	if !ok {
		return false, permissionf("", "", "group %s of tenant %s was paused by an admin: only an admin may resume it", name, tenant)
	}
	return next != cur, nil
}

// PauseDispatch pauses (or resumes) all dispatch, for maintenance: only a
// gate on Dispatch, which gives no job while it is on. Eligibility, tags
// and queues are untouched, and resuming clamps nothing. It reports
// whether anything changed.
func (s *Scheduler) PauseDispatch(pause bool) bool {
	if s.pausedAll == pause {
		return false
	}
	s.advance(s.clock)
	s.pausedAll = pause
	return true
}

// setTenantRate applies a change of tenant ti's rate limit from old:
// changing N, the period or the burst keeps tat; removing the limit
// forgets it.
func (s *Scheduler) setTenantRate(ti uint32, old RateLimit) {
	t := s.tenants.Get(uint64(ti))
	if t.Rate == old {
		return
	}
	if t.Rate.None() {
		s.tenants.Mut(uint64(ti)).rateTAT = 0
	}
	s.rekeyRateT(ti)
}

// setGroupRate is setTenantRate for group gs.
func (s *Scheduler) setGroupRate(gs uint32, old RateLimit) {
	g := s.groups.Get(uint64(gs))
	if g.Rate == old {
		return
	}
	if g.Rate.None() {
		s.groups.Mut(uint64(gs)).rateTAT = 0
	}
	s.rekeyRateG(gs)
}

// usesPauses reports whether the state holds a pause (of all dispatch, a
// tenant or a group) or a rate limit.
func (v *View) usesPauses() bool {
	if v.pausedAll {
		return true
	}
	uses := false
	v.tenants.Each(func(_ uint64, t *Tenant) bool {
		uses = t.paused != NotPaused || !t.Rate.None() || t.rateTAT != 0
		return !uses
	})
	if uses {
		return true
	}
	v.groups.Each(func(_ uint64, g *Group) bool {
		uses = g.paused != NotPaused || !g.Rate.None() || g.rateTAT != 0
		return !uses
	})
	return uses
}

func encodeRate(e *Encoder, r RateLimit, tat int64) {
	e.Uvarint(uint64(r.N))
	e.Varint(r.PeriodMs)
	e.Uvarint(uint64(r.Burst))
	e.Varint(tat)
}

func decodeRate(d *Decoder, what string) (RateLimit, int64) {
	r := RateLimit{N: d.Uint32(), PeriodMs: d.Varint(), Burst: d.Uint32()}
	tat := d.Varint()
	if d.Err() == nil {
		if err := r.Validate(what); err != nil {
			d.Fail("%v", err)
		} else if r.None() && tat != 0 {
			d.Fail("%s: no limit but a tat of %d", what, tat)
		}
	}
	return r, tat
}

func encodeTenantPauses(e *Encoder, t *Tenant) {
	e.Byte(byte(t.paused))
	encodeRate(e, t.Rate, t.rateTAT)
}

func decodeTenantPauses(d *Decoder, t *Tenant) {
	t.paused = PausedBy(d.Enum("tenant pause", byte(numPausedBy)))
	t.Rate, t.rateTAT = decodeRate(d, "tenant "+t.Name+" rate")
}

func encodeGroupPauses(e *Encoder, g *Group) {
	e.Byte(byte(g.paused))
	encodeRate(e, g.Rate, g.rateTAT)
}

func decodeGroupPauses(d *Decoder, g *Group) {
	g.paused = PausedBy(d.Enum("group pause", byte(numPausedBy)))
	g.Rate, g.rateTAT = decodeRate(d, "group "+g.Name+" rate")
}

// encodePauses writes the pause of all dispatch and the time eligibility
// was last evaluated at, which rate limits are judged by: 0 while no rate
// limit is set, since nothing reads it then (so that a state restored from
// an encoding without it goes on with the same hashes).
func (v *View) encodePauses(e *Encoder) {
	e.Bool(v.pausedAll)
	at := int64(0)
	if v.anyRate() {
		at = v.evalUs
	}
	e.Varint(at)
}

// anyRate reports whether a tenant or a group has a rate limit.
func (v *View) anyRate() bool {
	uses := false
	v.tenants.Each(func(_ uint64, t *Tenant) bool {
		uses = !t.Rate.None() && !t.Deleted
		return !uses
	})
	if !uses {
		v.groups.Each(func(_ uint64, g *Group) bool {
			uses = !g.Rate.None()
			return !uses
		})
	}
	return uses
}

func (s *Scheduler) decodePauses(d *Decoder) {
	s.pausedAll = d.Bool()
	s.evalUs = d.Varint()
	s.clock = Time(s.evalUs / 1000)
}

// verifyRates checks rateT and rateG against the tables: exactly the
// tenants and groups whose limit blocks them at the evaluation time, keyed
// by when it stops.
func (s *Scheduler) verifyRates(report func(string, ...any)) {
	n := 0
	for i := range s.rt {
		ti := uint32(i)
		t := s.tenants.Get(uint64(ti))
		e := s.rateT.get(ti)
		want := t != nil && !t.Deleted && rateBlocks(t.Rate, t.rateTAT, s.evalUs)
		if want {
			n++
		}
		switch {
		case want != (e != nil):
			report("tenant %d rate limit blocks it: %v, in the rate heap: %v", ti, want, e != nil)
		case e != nil && int64(e.tag) != eligibleAtUs(t.Rate, t.rateTAT):
			report("tenant %q rate heap key %d, eligible at %d µs", t.Name, e.tag, eligibleAtUs(t.Rate, t.rateTAT))
		}
		if t != nil && t.Rate.None() && t.rateTAT != 0 {
			report("tenant %q has no rate limit and a tat of %d", t.Name, t.rateTAT)
		}
	}
	if n != s.rateT.Len() {
		report("tenant rate heap holds %d entries, %d tenants are rate-blocked", s.rateT.Len(), n)
	}
	n = 0
	s.groups.View().Each(func(slot uint64, g *Group) bool {
		e := s.rateG.get(uint32(slot))
		want := rateBlocks(g.Rate, g.rateTAT, s.evalUs)
		if want {
			n++
		}
		switch {
		case want != (e != nil):
			report("group %q (slot %d) rate limit blocks it: %v, in the rate heap: %v", g.Name, slot, want, e != nil)
		case e != nil && int64(e.tag) != eligibleAtUs(g.Rate, g.rateTAT):
			report("group %q rate heap key %d, eligible at %d µs", g.Name, e.tag, eligibleAtUs(g.Rate, g.rateTAT))
		}
		if g.Rate.None() && g.rateTAT != 0 {
			report("group %q has no rate limit and a tat of %d", g.Name, g.rateTAT)
		}
		if g.paused != NotPaused && g.Name == "" {
			report("tenant %d's unnamed group is paused", g.Tenant)
		}
		return true
	})
	if n != s.rateG.Len() {
		report("group rate heap holds %d entries, %d groups are rate-blocked", s.rateG.Len(), n)
	}
}
