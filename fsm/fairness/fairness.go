// Package fairness keeps the fairness report of SPEC §7. For each priority
// class and tenant, over windows of cluster time (Windows: 1 min, 10 min,
// 1 h) and over everything the ledger saw, it gives:
//
//   - charged: the CPU charged to the tenant's tag, the estimate at dispatch
//     corrected by (actual − estimate) when the run's Finished is accepted,
//     in CPU ms, and the class's total of it;
//   - entitled: the integral over time of weight / (sum of the weights of
//     the tenants with eligible work in the class), taken while the class
//     had any eligible work, and how long that was ("busy");
//   - billed (whole run only): the CPU of finished runs, zombies included.
//
// Share, entitlement and their ratio follow (Figures). The lag of a tag
// behind virtual_now, read from the core at report time, is Lag.
//
// A Ledger is fed by the state machine while it applies the log: Charge
// and Bill for what a dispatch or a Finished did, and Observe for each
// tenant a command touched (its eligible classes and weight afterwards).
// It is derived, not replicated: it is in no snapshot and no state hash,
// and a node that loads a snapshot starts a new ledger there (Since). It
// reads no clock and computes in integers only, so every node that applied
// the same entries from the same start holds the same figures; floats
// appear only when Figures are presented.
//
// Cost. A write is O(1) and allocates nothing once the tenant has an
// account in the class: a charge adds to one bucket per window. The
// entitlement of every eligible tenant moves whenever any tenant's
// eligibility changes; rather than touch them all, each class keeps a
// running integral R(t) = ∫ 2^64/W(t) dt (W the sum of eligible weights),
// and a tenant eligible at weight w from t0 to t1 accrues w × (R(t1) −
// R(t0)) / 2^64 ms of entitlement, settled into its buckets when its
// eligibility or weight changes (at most 13 buckets a window) and added by
// readers while it lasts. R is kept at every 5 s boundary of the last
// hour (a mark), so that accruals split exactly into the buckets. A read
// costs O(1) per row and window.
package fairness

import (
	"math/bits"

	"github.com/baristahq/barista/sfq"
)

// Window is one span of the live report.
type Window struct {
	Name string   // "1m", "10m", "1h"
	Len  sfq.Time // nominal length, cluster ms
	// bucket is the granularity: Len / perWindow.
	bucket sfq.Time
}

// NumWindows is the number of windows of the live report.
const NumWindows = 3

// Windows are the windows of the live report, shortest first.
var Windows = [NumWindows]Window{
	{Name: "1m", Len: 60_000, bucket: 5_000},
	{Name: "10m", Len: 600_000, bucket: 50_000},
	{Name: "1h", Len: 3_600_000, bucket: 300_000},
}

const (
	// perWindow is the number of whole buckets in a window. A window also
	// holds the bucket now is in, so it covers between Len and Len plus
	// one bucket (Figures.SpanMs says how much).
	perWindow = 12
	slots     = perWindow + 1
	// markStep divides every bucket length; the class integral is kept
	// at each multiple of it.
	markStep sfq.Time = 5_000
	// numMarks covers the longest window and its current bucket.
	numMarks = int64(3_600_000/5_000 + 300_000/5_000 + 1)
)

// u128 is an unsigned 128-bit integer; sums and differences wrap, which
// keeps differences exact for as long as R runs (its absolute value never
// matters).
type u128 struct{ hi, lo uint64 }

func (a u128) add(b u128) u128 {
	lo, c := bits.Add64(a.lo, b.lo, 0)
	hi, _ := bits.Add64(a.hi, b.hi, c)
	return u128{hi, lo}
}

func (a u128) sub(b u128) u128 {
	lo, br := bits.Sub64(a.lo, b.lo, 0)
	hi, _ := bits.Sub64(a.hi, b.hi, br)
	return u128{hi, lo}
}

// slope returns floor(dt × 2^64 / w), for dt >= 0 and w > 0: how far R
// moves in dt ms while the eligible weights sum to w.
func slope(dt sfq.Time, w int64) u128 {
	if dt <= 0 || w <= 0 {
		return u128{}
	}
	q, r := uint64(dt)/uint64(w), uint64(dt)%uint64(w)
	lo, _ := bits.Div64(r, 0, uint64(w))
	return u128{q, lo}
}

// accrue returns floor(w × d / 2^40): the entitlement, in ms × 2^24, of a
// tenant of weight w eligible while R moved by d. While it was eligible
// its weight was part of W, so w × d < dt × 2^64 and the result fits for
// any dt below 2^39 ms (17 years).
func accrue(w int64, d u128) int64 {
	if w <= 0 {
		return 0
	}
	h1, l1 := bits.Mul64(uint64(w), d.lo)
	_, l2 := bits.Mul64(uint64(w), d.hi)
	mid := h1 + l2
	return int64(mid<<24 | l1>>40)
}

// EntitledOne is one ms of entitlement: Figures.EntitledQ24 counts ms ×
// 2^24. (A floor at every accrual costs at most 2^-24 ms: the figures keep
// about seven digits even over a busy time of a few ms.)
const EntitledOne = 1 << 24

// mark is the class integral and busy time at a multiple of markStep.
type mark struct {
	k    int64 // the mark is at k × markStep
	r    u128
	busy int64
}

// ring holds per-bucket sums of the last slots buckets of one window.
// Writes come in bucket order: never below head.
type ring struct {
	head int64 // newest bucket written: v holds head-perWindow .. head
	v    [slots]int64
}

// add adds x to bucket n (>= head), making it the newest and clearing the
// buckets it skips.
func (g *ring) add(n, x int64) {
	if n > g.head {
		for k := g.head + 1; k <= n && k <= g.head+slots; k++ {
			g.v[k%slots] = 0
		}
		g.head = n
	}
	g.v[n%slots] += x
}

// sum adds the buckets from lo to hi (hi <= the bucket of now).
func (g *ring) sum(lo, hi int64) (s int64) {
	lo = max(lo, g.head-perWindow, 0)
	hi = min(hi, g.head)
	for k := lo; k <= hi; k++ {
		s += g.v[k%slots]
	}
	return s
}

// Totals are what a tenant accrued since the ledger started (a class
// keeps its ChargedMs and BilledMs).
type Totals struct {
	ChargedMs   int64
	BilledMs    int64
	EntitledQ24 int64 // ms × EntitledOne
}

// acct is one tenant's account in one class. Its entitlement is settled
// (written to ent) only when its eligibility or weight changes: a tenant
// that stays eligible at one weight accrues from `at` on, which readers
// add themselves, so that a dispatch to a backlogged tenant costs a
// charge alone.
type acct struct {
	elig    bool
	w       int64    // weight while eligible (Q16)
	r0      u128     // the class integral at `at`
	at      sfq.Time // entitlement settled up to here
	total   Totals
	charged [NumWindows]ring
	ent     [NumWindows]ring
}

// class is one class's book.
type class struct {
	w       int64    // sum of the weights of the eligible tenants
	r       u128     // the integral R at `at`
	busy    int64    // ms with eligible work, up to `at`
	at      sfq.Time // R and busy are advanced up to here
	marks   []mark   // numMarks, by k % numMarks; nil until first advanced
	total   Totals
	charged [NumWindows]ring // the class's total of charged
	accts   []*acct          // by tenant index; nil: never active in the class
}

// Ledger is the fairness report's state. It is not safe for concurrent
// use: the state machine writes it under its write lock and reads it
// under its read lock.
type Ledger struct {
	since   sfq.Time
	classes [sfq.NumClasses]class
	// dispatched counts the dispatches of each job size, in the buckets
	// of the window RateWindow.
	dispatched [sfq.NumSizes]ring
}

// RateWindow is the window (an index of Windows) over which DispatchRate
// counts dispatches: 10 minutes.
const RateWindow = 1

// New returns an empty ledger starting at cluster time since.
func New(since sfq.Time) *Ledger {
	l := &Ledger{since: since}
	for c := range l.classes {
		l.classes[c].at = since
	}
	return l
}

// Since returns when the ledger started: it covers nothing before.
func (l *Ledger) Since() sfq.Time { return l.since }

// advance moves the class integral and busy time to now, recording the
// marks it passes (only the last numMarks: older ones are never read).
func (c *class) advance(now sfq.Time) {
	if now <= c.at {
		return
	}
	if c.marks == nil {
		c.marks = make([]mark, numMarks)
		for i := range c.marks {
			c.marks[i].k = -1
		}
	}
	first, last := int64(c.at)/int64(markStep)+1, int64(now)/int64(markStep)
	first = max(first, last-numMarks+1)
	for k := first; k <= last; k++ {
		r, busy := c.project(sfq.Time(k) * markStep)
		c.marks[k%numMarks] = mark{k: k, r: r, busy: busy}
	}
	c.r, c.busy = c.project(now)
	c.at = now
}

// project returns R and the busy time at t >= c.at: the eligible weights
// have not changed since c.at.
func (c *class) project(t sfq.Time) (u128, int64) {
	d := t - c.at
	if c.w <= 0 || d <= 0 {
		return c.r, c.busy
	}
	return c.r.add(slope(d, c.w)), c.busy + int64(d)
}

// at returns R and the busy time at t, a multiple of markStep no older
// than the marks kept, or any t >= c.at.
func (c *class) valueAt(t sfq.Time) (u128, int64) {
	if t >= c.at {
		return c.project(t)
	}
	k := int64(t) / int64(markStep)
	if c.marks != nil && k >= 0 {
		if m := &c.marks[k%numMarks]; m.k == k {
			return m.r, m.busy
		}
	}
	// Before the class was first advanced: nothing had accrued.
	return u128{}, 0
}

// get returns tenant ti's account, creating it (settled at the class's
// time) if create is set.
func (c *class) get(ti uint32, create bool) *acct {
	if int(ti) < len(c.accts) && c.accts[ti] != nil {
		return c.accts[ti]
	}
	if !create {
		return nil
	}
	for int(ti) >= len(c.accts) {
		c.accts = append(c.accts, nil)
	}
	a := &acct{at: c.at, r0: c.r}
	for g := range a.ent {
		a.ent[g].head = int64(c.at / Windows[g].bucket)
		a.charged[g].head = a.ent[g].head
	}
	c.accts[ti] = a
	return a
}

// settle credits an eligible account with its entitlement from a.at to
// c.at (the class must be advanced to the time of the write that
// follows), split into the buckets of each window.
func (a *acct) settle(c *class) {
	now := c.at
	if now <= a.at {
		return
	}
	if a.elig {
		a.total.EntitledQ24 += accrue(a.w, c.r.sub(a.r0))
		for g := range a.ent {
			b := Windows[g].bucket
			from, to := int64(a.at/b), int64(now/b)
			from = max(from, to-perWindow)
			for n := from; n <= to; n++ {
				s, e := max(a.at, sfq.Time(n)*b), min(now, sfq.Time(n+1)*b)
				rs, re := a.r0, c.r
				if s != a.at {
					rs, _ = c.valueAt(s)
				}
				if e != now {
					re, _ = c.valueAt(e)
				}
				a.ent[g].add(n, accrue(a.w, re.sub(rs)))
			}
		}
	}
	a.at, a.r0 = now, c.r
}

// Charge records ms of CPU charged to tenant ti's tag in class cl at now:
// a dispatch's estimate, or a finished run's correction (negative when
// the estimate was too high).
func (l *Ledger) Charge(now sfq.Time, cl sfq.Class, ti uint32, ms int64) {
	if cl >= sfq.NumClasses || ms == 0 {
		return
	}
	c := &l.classes[cl]
	c.advance(now)
	a := c.get(ti, true)
	for g := range a.charged {
		n := int64(c.at / Windows[g].bucket)
		a.charged[g].add(n, ms)
		c.charged[g].add(n, ms)
	}
	a.total.ChargedMs += ms
	c.total.ChargedMs += ms
}

// Dispatched records a dispatch of a job of size sz at now.
func (l *Ledger) Dispatched(now sfq.Time, sz sfq.Size) {
	if sz < sfq.NumSizes {
		l.dispatched[sz].add(int64(now/Windows[RateWindow].bucket), 1)
	}
}

// Dispatches returns the dispatches of jobs of size at most sz over the
// window RateWindow at now, and the cluster time that window spans.
func (l *Ledger) Dispatches(now sfq.Time, sz sfq.Size) (n, spanMs int64) {
	w := Windows[RateWindow]
	b := int64(now / w.bucket)
	for s := sfq.Size(0); s <= sz && s < sfq.NumSizes; s++ {
		n += l.dispatched[s].sum(b-perWindow, b)
	}
	start := max(sfq.Time(b-perWindow)*w.bucket, 0, l.since)
	return n, int64(now - start)
}

// Charged returns the CPU charged (estimates at dispatch, corrected at
// finish) in class cl and in every class over the window RateWindow at
// now, and the cluster time that window spans.
func (l *Ledger) Charged(now sfq.Time, cl sfq.Class) (class, all, spanMs int64) {
	w := Windows[RateWindow]
	b := int64(now / w.bucket)
	for c := range l.classes {
		v := l.classes[c].charged[RateWindow].sum(b-perWindow, b)
		all += v
		if sfq.Class(c) == cl {
			class = v
		}
	}
	start := max(sfq.Time(b-perWindow)*w.bucket, 0, l.since)
	return class, all, int64(now - start)
}

// Entitlement returns tenant ti's weight in class cl and the sum of the
// weights of the tenants with eligible work there, as last observed (0,
// 0 when it has none).
func (l *Ledger) Entitlement(cl sfq.Class, ti uint32) (w, sum int64) {
	if cl >= sfq.NumClasses {
		return 0, 0
	}
	c := &l.classes[cl]
	if a := c.get(ti, false); a != nil && a.elig {
		return a.w, c.w
	}
	return 0, c.w
}

// Error is a window's fairness error: of the rows with an entitlement in
// the window (tenants that had eligible work) and a share defined, the
// largest difference between share and entitlement (SPEC §3 "Evidence of
// fairness"), and the row it is in. OK is false when no row has both.
type Error struct {
	Value           float64
	Class           sfq.Class
	Tenant          uint32
	Share, Entitled float64
	OK              bool
}

// Error returns the fairness error over window g (an index of Windows) at
// now.
func (l *Ledger) Error(now sfq.Time, g int) Error {
	var e Error
	l.Rows(now, func(r *Row) bool {
		f := &r.Windows[g]
		share, ok1 := f.Share()
		ent, ok2 := f.Entitled()
		if !ok1 || !ok2 || f.EntitledQ24 <= 0 {
			return true
		}
		if d := abs(share - ent); !e.OK || d > e.Value {
			e = Error{Value: d, Class: r.Class, Tenant: r.Tenant, Share: share, Entitled: ent, OK: true}
		}
		return true
	})
	return e
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// Bill records ms of CPU of a finished run (zombies included) of tenant ti
// in class cl.
func (l *Ledger) Bill(now sfq.Time, cl sfq.Class, ti uint32, ms int64) {
	if cl >= sfq.NumClasses || ms == 0 {
		return
	}
	c := &l.classes[cl]
	c.advance(now)
	c.get(ti, true).total.BilledMs += ms
	c.total.BilledMs += ms
}

// Observe records tenant ti's state after a command at now touched it:
// the classes where it has eligible work (bit 1<<c of mask) and its
// weight. A weight of 0 or less counts as no eligible work.
func (l *Ledger) Observe(now sfq.Time, ti uint32, mask uint8, w sfq.Weight) {
	if w <= 0 {
		mask = 0
	}
	for cl := range l.classes {
		c := &l.classes[cl]
		on := mask&(1<<cl) != 0
		a := c.get(ti, false)
		if a == nil && !on {
			continue
		}
		if a != nil && a.elig == on && (!on || a.w == int64(w)) {
			continue
		}
		c.advance(now)
		if a == nil {
			a = c.get(ti, true)
		}
		a.settle(c)
		if a.elig {
			c.w -= a.w
		}
		a.elig, a.w = on, 0
		if on {
			a.w = int64(w)
			c.w += a.w
		}
	}
}

// Figures are one window's numbers of a (class, tenant) row.
type Figures struct {
	// SpanMs is the cluster time the window covers (less than its length
	// while the ledger is younger than it).
	SpanMs int64
	// ChargedMs is the tenant's CPU charged in the span; ClassChargedMs
	// the class's.
	ChargedMs, ClassChargedMs int64
	// EntitledQ24 is the tenant's entitlement integral in the span, in ms
	// × EntitledOne; BusyMs how long the class had eligible work in it.
	EntitledQ24, BusyMs int64
}

// Share is ChargedMs / ClassChargedMs; ok is false when the class was
// charged nothing (or, after refunds, less than nothing).
func (f Figures) Share() (share float64, ok bool) {
	if f.ClassChargedMs <= 0 {
		return 0, false
	}
	return float64(f.ChargedMs) / float64(f.ClassChargedMs), true
}

// Entitled is the time-weighted entitlement: EntitledQ24 over BusyMs; ok
// is false when no tenant had eligible work in the span.
func (f Figures) Entitled() (entitled float64, ok bool) {
	if f.BusyMs <= 0 {
		return 0, false
	}
	return float64(f.EntitledQ24) / EntitledOne / float64(f.BusyMs), true
}

// Ratio is Share / Entitled: 1 is exactly the entitlement, below 1 less,
// above 1 more. ok is false when either is undefined or the entitlement
// is 0 (the tenant never had eligible work in the span).
func (f Figures) Ratio() (ratio float64, ok bool) {
	s, ok1 := f.Share()
	e, ok2 := f.Entitled()
	if !ok1 || !ok2 || f.EntitledQ24 <= 0 {
		return 0, false
	}
	return s / e, true
}

// Whole are a row's figures over everything the ledger saw.
type Whole struct {
	Figures
	// BilledMs is the CPU of the tenant's finished runs, ClassBilledMs
	// the class's.
	BilledMs, ClassBilledMs int64
}

// BilledShare is BilledMs / ClassBilledMs (ok false when nothing was
// billed in the class).
func (w Whole) BilledShare() (share float64, ok bool) {
	if w.ClassBilledMs <= 0 {
		return 0, false
	}
	return float64(w.BilledMs) / float64(w.ClassBilledMs), true
}

// BilledRatio is BilledShare / Entitled, defined as Ratio is.
func (w Whole) BilledRatio() (ratio float64, ok bool) {
	s, ok1 := w.BilledShare()
	e, ok2 := w.Entitled()
	if !ok1 || !ok2 || w.EntitledQ24 <= 0 {
		return 0, false
	}
	return s / e, true
}

// Row is one (class, tenant) line of the report.
type Row struct {
	Class  sfq.Class
	Tenant uint32
	// Eligible says the tenant has eligible work in the class now, at
	// Weight (its weight when last observed).
	Eligible bool
	Weight   sfq.Weight
	Windows  [NumWindows]Figures
	Whole    Whole
}

// Active reports whether the row has anything to show in the live report:
// eligible work now, or a charge or an entitlement in the longest window.
func (r *Row) Active() bool {
	f := &r.Windows[NumWindows-1]
	return r.Eligible || f.ChargedMs != 0 || f.EntitledQ24 != 0
}

// classView is what every row of a class shares at one reading.
type classView struct {
	now     sfq.Time
	r       u128
	busy    int64
	buckets [NumWindows]int64 // the bucket now is in
	starts  [NumWindows]sfq.Time
	win     [NumWindows]Figures // the class's part of each window
}

func (l *Ledger) view(c *class, now sfq.Time) classView {
	now = max(now, c.at)
	v := classView{now: now}
	v.r, v.busy = c.project(now)
	for g, w := range Windows {
		n := int64(now / w.bucket)
		start := max(sfq.Time(n-perWindow)*w.bucket, 0)
		v.buckets[g], v.starts[g] = n, start
		_, busyAtStart := c.valueAt(start)
		charged := c.charged[g].sum(n-perWindow, n)
		v.win[g] = Figures{SpanMs: int64(now - max(start, l.since)), ClassChargedMs: charged, BusyMs: v.busy - busyAtStart}
	}
	return v
}

// row computes account a's row.
func (v *classView) row(c *class, cl sfq.Class, ti uint32, a *acct, since sfq.Time) Row {
	r := Row{Class: cl, Tenant: ti, Eligible: a.elig, Weight: sfq.Weight(a.w)}
	for g := range Windows {
		f := v.win[g]
		lo, hi := v.buckets[g]-perWindow, v.buckets[g]
		f.ChargedMs, f.EntitledQ24 = a.charged[g].sum(lo, hi), a.ent[g].sum(lo, hi)
		if a.elig {
			// Not yet settled: from a.at (or the window's start) to now.
			from := a.r0
			if a.at < v.starts[g] {
				from, _ = c.valueAt(v.starts[g])
			}
			f.EntitledQ24 += accrue(a.w, v.r.sub(from))
		}
		r.Windows[g] = f
	}
	ent := a.total.EntitledQ24
	if a.elig {
		ent += accrue(a.w, v.r.sub(a.r0))
	}
	r.Whole = Whole{
		Figures: Figures{SpanMs: int64(v.now - since), ChargedMs: a.total.ChargedMs, ClassChargedMs: c.total.ChargedMs,
			EntitledQ24: ent, BusyMs: v.busy},
		BilledMs: a.total.BilledMs, ClassBilledMs: c.total.BilledMs,
	}
	return r
}

// Rows calls fn with the row of every (class, tenant) the ledger has an
// account for, at now (no earlier than the last write), classes in
// service order (critical, high, normal, low), tenants by index, until fn
// returns false. The row is reused: fn copies what it keeps.
func (l *Ledger) Rows(now sfq.Time, fn func(r *Row) bool) {
	for _, cl := range sfq.Classes() {
		c := &l.classes[cl]
		if len(c.accts) == 0 {
			continue
		}
		v := l.view(c, now)
		for i, a := range c.accts {
			if a == nil {
				continue
			}
			r := v.row(c, cl, uint32(i), a, l.since)
			if !fn(&r) {
				return
			}
		}
	}
}

// TenantRows calls fn with tenant ti's row in each class it has an
// account in, in service order.
func (l *Ledger) TenantRows(now sfq.Time, ti uint32, fn func(r *Row)) {
	for _, cl := range sfq.Classes() {
		c := &l.classes[cl]
		a := c.get(ti, false)
		if a == nil {
			continue
		}
		v := l.view(c, now)
		r := v.row(c, cl, ti, a, l.since)
		fn(&r)
	}
}

// Lag returns how far a tag is behind virtual_now, in CPU ms at weight w:
// (vnow − tag) × w, where one CPU ms at weight 1 is 1000 virtual µs.
// Positive: the tenant is owed service (it goes before tenants at
// virtual_now); negative: it is ahead. Saturates at the int64 range.
func Lag(vnow, tag sfq.VirtualTime, w sfq.Weight) int64 {
	d := int64(vnow) - int64(tag)
	if (vnow >= tag) != (d >= 0) { // the difference overflowed
		if vnow >= tag {
			return 1<<63 - 1
		}
		return -1 << 63
	}
	if w <= 0 || d == 0 {
		return 0
	}
	neg := d < 0
	u := uint64(d)
	if neg {
		u = -u
	}
	const den = 1000 * uint64(sfq.WeightOne)
	hi, lo := bits.Mul64(u, uint64(w))
	if hi >= den {
		if neg {
			return -1 << 63
		}
		return 1<<63 - 1
	}
	q, _ := bits.Div64(hi, lo, den)
	if q > 1<<63-1 {
		q = 1<<63 - 1
	}
	if neg {
		return -int64(q)
	}
	return int64(q)
}

// Line is a row with what the state machine knows of its tenant.
type Line struct {
	Row
	// Pool is the lane's pool ("" for the pool default).
	Pool    string
	Name    string
	Tier    sfq.Tier
	Deleted bool
	// LagCPUMs is how far the tenant's tag in the class is behind the
	// class's virtual_now, at its current weight, in CPU ms (Lag):
	// positive when it is owed service. It means something while the
	// tenant is eligible: one that becomes eligible again is clamped up
	// to virtual_now (the activation clamp) and banks no credit.
	LagCPUMs int64
}
