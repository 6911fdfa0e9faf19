// Package evidence holds the documents of SPEC §3 "Evidence of fairness"
// that the servers issue and anyone may check: a tenant's usage statement
// and its certificate of fairness, their encodings (JSON, the statement
// also as CSV), the certificate's digest and its verifier. It imports
// nothing of the servers: the Go client re-exports it, and the Python and
// TypeScript SDKs carry ports of the verifier that its tests hold to the
// same answers (docs/fairness.md).
package evidence

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Window is the part of the log a document covers: the entries FromIndex
// to ToIndex (none when ToIndex < FromIndex) and the cluster time FromMs
// to ToMs. Open says the window asked for reached past the last entry
// the node had applied, which ends it instead. StartHash is the state hash
// (hex SHA-256) before entry FromIndex, EndHash after entry ToIndex: every
// node that applied those entries holds those states.
type Window struct {
	FromIndex uint64 `json:"from_index"`
	ToIndex   uint64 `json:"to_index"`
	FromMs    int64  `json:"from_ms"`
	ToMs      int64  `json:"to_ms"`
	Open      bool   `json:"open"`
	StartHash string `json:"start_hash"`
	EndHash   string `json:"end_hash"`
}

// Statement is a tenant's usage over a window (SPEC §3 "Evidence of
// fairness"): its CPU by pool, size and class, its runs by outcome, how
// long its jobs waited for a worker, and its share of each pool and
// class beside what it was entitled to.
type Statement struct {
	Version int     `json:"version"`
	Tenant  string  `json:"tenant"`
	Window  Window  `json:"window"`
	CPU     []Usage `json:"cpu"`
	// Runs and Waiting are the totals of every row of CPU.
	Runs    Outcomes `json:"runs"`
	CPUMs   int64    `json:"cpu_ms"`
	Waiting Waiting  `json:"waiting"`
	Shares  []Share  `json:"shares"`
}

// StatementVersion is the version of the statement's format.
const StatementVersion = 1

// Usage is one (pool, size, class) row of a statement: the CPU billed for
// the tenant's runs that ended in the window (accepted reports, and the
// reports of stale attempts, "zombies", which are billed too), those runs
// by outcome, and the jobs dispatched in the window with how long each had
// waited in its queue.
type Usage struct {
	Pool       string   `json:"pool"`
	Size       string   `json:"size"`
	Class      string   `json:"class"`
	CPUMs      int64    `json:"cpu_ms"`
	Runs       Outcomes `json:"runs"`
	Dispatches uint64   `json:"dispatches"`
	Waiting    Waiting  `json:"waiting"`
	waits      []int64
}

// AddWait records a dispatch that had waited ms in its queue.
func (u *Usage) AddWait(ms int64) {
	u.Dispatches++
	u.waits = append(u.waits, ms)
}

// Outcomes counts runs by how they ended: as their worker reported (OK,
// Failed, Cancelled, Snoozed), lost with their worker's lease (Lost),
// never started by the worker they were assigned to (Unstarted), or
// reported after the attempt was over (Zombie: billed, nothing else).
type Outcomes struct {
	OK        uint64 `json:"ok"`
	Failed    uint64 `json:"failed"`
	Cancelled uint64 `json:"cancelled"`
	Snoozed   uint64 `json:"snoozed"`
	Lost      uint64 `json:"lost"`
	Unstarted uint64 `json:"unstarted"`
	Zombie    uint64 `json:"zombie"`
}

// OutcomeNames lists the outcomes in the order of Outcomes' fields.
var OutcomeNames = [...]string{"ok", "failed", "cancelled", "snoozed", "lost", "unstarted", "zombie"}

func (o *Outcomes) counts() [len(OutcomeNames)]*uint64 {
	return [...]*uint64{&o.OK, &o.Failed, &o.Cancelled, &o.Snoozed, &o.Lost, &o.Unstarted, &o.Zombie}
}

// Add counts one run of outcome name; it reports false for an unknown
// name.
func (o *Outcomes) Add(name string) bool {
	i := slices.Index(OutcomeNames[:], name)
	if i < 0 {
		return false
	}
	*o.counts()[i]++
	return true
}

func (o *Outcomes) plus(b Outcomes) {
	dst, src := o.counts(), b.counts()
	for i := range dst {
		*dst[i] += *src[i]
	}
}

// Total is the number of runs.
func (o Outcomes) Total() uint64 {
	var n uint64
	for _, c := range o.counts() {
		n += *c
	}
	return n
}

// Waiting is how long dispatched jobs had waited in their queue, in
// cluster ms: since they entered it (submitted, released from a delay or
// back-off, requeued, redriven) or, for a job that entered it before the
// window and whose event is no longer retained, since its submit. The
// percentiles are nearest-rank.
type Waiting struct {
	Dispatches uint64 `json:"dispatches"`
	P50Ms      int64  `json:"p50_ms"`
	P95Ms      int64  `json:"p95_ms"`
	MaxMs      int64  `json:"max_ms"`
}

func waitingOf(w []int64) Waiting {
	if len(w) == 0 {
		return Waiting{}
	}
	s := slices.Clone(w)
	slices.Sort(s)
	rank := func(q float64) int64 { return s[max(int(math.Ceil(q*float64(len(s))))-1, 0)] }
	return Waiting{Dispatches: uint64(len(s)), P50Ms: rank(0.50), P95Ms: rank(0.95), MaxMs: s[len(s)-1]}
}

// Share is one (pool, class) row of a statement: the CPU charged to the
// tenant's tag there (estimates at dispatch, corrected at finish) against
// the class's, the CPU billed against the class's, its entitlement (its
// weight over the weights of the tenants with eligible work, averaged
// over the time the class had any: BusyMs) and the shares that follow.
// A share is null when its denominator is not positive.
type Share struct {
	Pool           string `json:"pool"`
	Class          string `json:"class"`
	ChargedMs      int64  `json:"charged_ms"`
	ClassChargedMs int64  `json:"class_charged_ms"`
	BilledMs       int64  `json:"billed_ms"`
	ClassBilledMs  int64  `json:"class_billed_ms"`
	BusyMs         int64  `json:"busy_ms"`
	// EntitledQ24 is the entitlement integral in ms × 2^24.
	EntitledQ24 int64  `json:"entitled_q24"`
	Received    *Fixed `json:"received"`
	Billed      *Fixed `json:"billed"`
	Entitled    *Fixed `json:"entitled"`
}

// Fixed is a share, written with six decimals.
type Fixed float64

// MarshalJSON writes the value with six decimals.
func (f Fixed) MarshalJSON() ([]byte, error) {
	return []byte(strconv.FormatFloat(float64(f), 'f', 6, 64)), nil
}

func ratio(num, den int64) *Fixed {
	if den <= 0 {
		return nil
	}
	f := Fixed(float64(num) / float64(den))
	return &f
}

// Finish computes what follows from the rows (the totals, percentiles and
// shares) and sorts the rows; the builder calls it once.
func (s *Statement) Finish() {
	s.Version = StatementVersion
	var all []int64
	s.Runs, s.CPUMs = Outcomes{}, 0
	for i := range s.CPU {
		u := &s.CPU[i]
		u.Waiting = waitingOf(u.waits)
		all = append(all, u.waits...)
		s.Runs.plus(u.Runs)
		s.CPUMs += u.CPUMs
	}
	s.Waiting = waitingOf(all)
	for i := range s.Shares {
		sh := &s.Shares[i]
		sh.Received = ratio(sh.ChargedMs, sh.ClassChargedMs)
		sh.Billed = ratio(sh.BilledMs, sh.ClassBilledMs)
		if sh.BusyMs > 0 {
			e := Fixed(float64(sh.EntitledQ24) / (1 << 24) / float64(sh.BusyMs))
			sh.Entitled = &e
		}
	}
	if s.CPU == nil {
		s.CPU = []Usage{}
	}
	if s.Shares == nil {
		s.Shares = []Share{}
	}
}

// JSON is the statement's JSON document.
func (s *Statement) JSON() []byte {
	b, _ := json.MarshalIndent(s, "", "  ")
	return append(b, '\n')
}

// CSV is the statement as CSV, one figure a row: section, pool, size,
// class, metric, value. Sections: tenant (name; after a single quote when
// it starts with =, +, - or @, which a spreadsheet would read as a
// formula), window (metric from_index, to_index,
// from_ms, to_ms, open, start_hash, end_hash), cpu (per pool, size and
// class: cpu_ms, dispatches, each outcome, wait_p50_ms, wait_p95_ms,
// wait_max_ms), total (the same over every row) and share (per pool and
// class: charged_ms, class_charged_ms, billed_ms, class_billed_ms,
// busy_ms, received, billed, entitled; empty when undefined).
func (s *Statement) CSV() []byte {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	row := func(section, pool, size, class, metric, value string) {
		w.Write([]string{section, pool, size, class, metric, value})
	}
	row("section", "pool", "size", "class", "metric", "value")
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	row("tenant", "", "", "", "name", spreadsheetSafe(s.Tenant))
	win := s.Window
	row("window", "", "", "", "from_index", u(win.FromIndex))
	row("window", "", "", "", "to_index", u(win.ToIndex))
	row("window", "", "", "", "from_ms", i(win.FromMs))
	row("window", "", "", "", "to_ms", i(win.ToMs))
	row("window", "", "", "", "open", strconv.FormatBool(win.Open))
	row("window", "", "", "", "start_hash", win.StartHash)
	row("window", "", "", "", "end_hash", win.EndHash)
	usage := func(section, pool, size, class string, cpu int64, runs Outcomes, wt Waiting) {
		row(section, pool, size, class, "cpu_ms", i(cpu))
		row(section, pool, size, class, "dispatches", u(wt.Dispatches))
		for k, c := range runs.counts() {
			row(section, pool, size, class, OutcomeNames[k], u(*c))
		}
		row(section, pool, size, class, "wait_p50_ms", i(wt.P50Ms))
		row(section, pool, size, class, "wait_p95_ms", i(wt.P95Ms))
		row(section, pool, size, class, "wait_max_ms", i(wt.MaxMs))
	}
	for _, c := range s.CPU {
		usage("cpu", c.Pool, c.Size, c.Class, c.CPUMs, c.Runs, c.Waiting)
	}
	usage("total", "", "", "", s.CPUMs, s.Runs, s.Waiting)
	fixed := func(f *Fixed) string {
		if f == nil {
			return ""
		}
		return strconv.FormatFloat(float64(*f), 'f', 6, 64)
	}
	for _, sh := range s.Shares {
		for _, kv := range [][2]string{{"charged_ms", i(sh.ChargedMs)}, {"class_charged_ms", i(sh.ClassChargedMs)}, {"billed_ms", i(sh.BilledMs)},
			{"class_billed_ms", i(sh.ClassBilledMs)}, {"busy_ms", i(sh.BusyMs)}, {"received", fixed(sh.Received)}, {"billed", fixed(sh.Billed)},
			{"entitled", fixed(sh.Entitled)}} {
			row("share", sh.Pool, "", sh.Class, kv[0], kv[1])
		}
	}
	w.Flush()
	return buf.Bytes()
}

// spreadsheetSafe keeps a name a spreadsheet would read as a formula
// (one starting with =, +, -, @) from being one: it is written after a
// single quote. The tenant's name is the statement's one cell that is
// not a number or a fixed word.
func spreadsheetSafe(s string) string {
	if s != "" && strings.ContainsRune("=+-@", rune(s[0])) {
		return "'" + s
	}
	return s
}

// ParseStatement reads a statement's JSON document.
func ParseStatement(b []byte) (*Statement, error) {
	var s Statement
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
