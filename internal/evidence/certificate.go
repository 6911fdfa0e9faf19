package evidence

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// Certificate is the evidence a tenant can check that the scheduler kept
// its order (SPEC §3 "Evidence of fairness"): for each dispatch in the
// window, in a pool of the tenant's, while the tenant had a candidate
// there, the key of the job chosen beside the key of each of the tenant's
// candidates, and for each candidate the rule that let the chosen job go
// first. Other tenants appear under opaque names ("t1", "t2", ... in the
// order they first appear in the certificate); the tenant's own jobs as
// "self". Digest chains every line to the header (CertificateDigest).
type Certificate struct {
	Version int    `json:"version"`
	Tenant  string `json:"tenant"`
	Window  Window `json:"window"`
	// Policy is the steal policy in force ("prefer-fit" or "reserve"),
	// MarginUs reserve's margin in virtual µs, Clamp "activation" or
	// "dispatch". A window in which the configuration changed is cut at
	// the change: a certificate has one.
	Policy   string `json:"policy"`
	MarginUs int64  `json:"margin_us"`
	Clamp    string `json:"clamp"`
	Lines    []Line `json:"lines"`
	Digest   string `json:"digest"`
}

// CertificateVersion is the version of the certificate's format.
const CertificateVersion = 1

// Line is one dispatch: its log index and cluster time, the pool and the
// size of the worker it served, the key of the job it chose and the keys
// of the tenant's candidates it did not choose, each with the rule that
// put the chosen job first.
type Line struct {
	Index      uint64 `json:"index"`
	AtMs       int64  `json:"at_ms"`
	Pool       string `json:"pool"`
	WorkerSize string `json:"worker_size"`
	Chosen     Key    `json:"chosen"`
	Mine       []Key  `json:"mine"`
}

// Key is a job's dispatch key: its class, size, deadline (DeadlineAtMs,
// 0: none), the start tag it would be charged at (virtual µs, a decimal
// string: it may pass 2^53) and its tenant's tier (0 free .. 4 diamond).
// Among jobs without a deadline of one class the order is (Start, higher
// Tier, larger Size, lower Job); among deadline jobs (DeadlineAtMs, Job).
// Tenant names the chosen job's tenant; Reason, on a candidate, the rule.
type Key struct {
	Tenant       string `json:"tenant,omitempty"`
	Job          uint64 `json:"job"`
	Class        string `json:"class"`
	Size         string `json:"size"`
	DeadlineAtMs int64  `json:"deadline_at_ms"`
	Start        string `json:"start"`
	Tier         int    `json:"tier"`
	Reason       string `json:"reason,omitempty"`
}

// Self is the Tenant of the certificate's own tenant's jobs.
const Self = "self"

// The reasons a candidate was not chosen, in the order a certificate
// gives the first that holds:
const (
	// ReasonSize: the worker is smaller than the candidate.
	ReasonSize = "size"
	// ReasonClass: the chosen job is of a higher class.
	ReasonClass = "class"
	// ReasonDeadline: same class; the chosen job has a deadline, the
	// candidate none.
	ReasonDeadline = "deadline"
	// ReasonKey: same class, the same kind of key (both deadlines, or
	// neither and both of the worker's size or both smaller): the chosen
	// key is lower.
	ReasonKey = "key"
	// ReasonFit: same class, neither has a deadline, the chosen job is of
	// the worker's size and the candidate smaller: the worker takes its
	// own size first (prefer-fit; under reserve, unless the candidate's
	// start is lower by more than the margin).
	ReasonFit = "fit"
	// ReasonReserve: same class, neither has a deadline, the chosen job
	// is smaller than the worker and the candidate of its size: under
	// reserve, the chosen start is lower by more than the margin.
	ReasonReserve = "reserve"
)

// Reasons lists the reasons in the order they are given.
var Reasons = []string{ReasonSize, ReasonClass, ReasonDeadline, ReasonKey, ReasonFit, ReasonReserve}

var (
	sizeRank  = map[string]int{"sm": 0, "md": 1, "lg": 2}
	classRank = map[string]int{"critical": 3, "high": 2, "normal": 1, "low": 0} // higher goes first
)

// Holds reports whether reason r lets job c go before candidate m on a
// worker of size ws under the certificate's policy; an error names a key
// or policy it cannot read.
func (cert *Certificate) Holds(r, ws string, c, m *Key) (bool, error) {
	w, ok := sizeRank[ws]
	if !ok {
		return false, fmt.Errorf("worker size %q", ws)
	}
	cs, ok1 := sizeRank[c.Size]
	ms, ok2 := sizeRank[m.Size]
	cc, ok3 := classRank[c.Class]
	mc, ok4 := classRank[m.Class]
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return false, fmt.Errorf("size or class of job %d or %d", c.Job, m.Job)
	}
	cStart, ok1 := new(big.Int).SetString(c.Start, 10)
	mStart, ok2 := new(big.Int).SetString(m.Start, 10)
	if !ok1 || !ok2 {
		return false, fmt.Errorf("start of job %d or %d", c.Job, m.Job)
	}
	margin := big.NewInt(cert.MarginUs)
	cdl, mdl := c.DeadlineAtMs != 0, m.DeadlineAtMs != 0
	same := cc == mc
	switch r {
	case ReasonSize:
		return ms > w, nil
	case ReasonClass:
		return cc > mc, nil
	case ReasonDeadline:
		return same && cdl && !mdl, nil
	case ReasonKey:
		switch {
		case !same:
			return false, nil
		case cdl && mdl:
			return c.DeadlineAtMs < m.DeadlineAtMs || (c.DeadlineAtMs == m.DeadlineAtMs && c.Job < m.Job), nil
		case cdl || mdl:
			return false, nil
		case (cs == w) != (ms == w):
			return false, nil
		}
		if d := cStart.Cmp(mStart); d != 0 {
			return d < 0, nil
		}
		if c.Tier != m.Tier {
			return c.Tier > m.Tier, nil
		}
		if cs != ms {
			return cs > ms, nil
		}
		return c.Job < m.Job, nil
	case ReasonFit:
		if !same || cdl || mdl || cs != w || ms >= w {
			return false, nil
		}
		switch cert.Policy {
		case "prefer-fit":
			return true, nil
		case "reserve": // not stolen: c.start - m.start <= margin
			d := new(big.Int).Sub(cStart, mStart)
			return d.Cmp(margin) <= 0, nil
		}
		return false, fmt.Errorf("policy %q", cert.Policy)
	case ReasonReserve:
		if !same || cdl || mdl || cs >= w || ms != w || cert.Policy != "reserve" {
			return false, nil
		}
		d := new(big.Int).Sub(mStart, cStart)
		return d.Cmp(margin) > 0, nil
	}
	return false, fmt.Errorf("unknown reason %q", r)
}

// ReasonFor returns the first reason that lets c go before m on a worker
// of size ws, or "" when none does (the dispatch broke the order).
func (cert *Certificate) ReasonFor(ws string, c, m *Key) string {
	for _, r := range Reasons {
		if ok, err := cert.Holds(r, ws, c, m); err == nil && ok {
			return r
		}
	}
	return ""
}

// canon writes a field of the digest's canonical text: the value, then a
// newline (no field holds one: names refuse control characters).
func canon(b *strings.Builder, v string) { b.WriteString(v); b.WriteByte('\n') }

func canonKey(b *strings.Builder, k *Key) {
	for _, v := range []string{k.Tenant, strconv.FormatUint(k.Job, 10), k.Class, k.Size, strconv.FormatInt(k.DeadlineAtMs, 10), k.Start,
		strconv.Itoa(k.Tier), k.Reason} {
		canon(b, v)
	}
}

// CertificateDigest is the digest a certificate carries: h0 = SHA-256 of
// the header's canonical text, then for each line h = SHA-256(h ‖ the
// line's canonical text), in hex. A canonical text is fields, each
// followed by a newline: the header's "barista-certificate", version,
// tenant, from_index, to_index, from_ms, to_ms, open (true/false),
// start_hash, end_hash, policy, margin_us, clamp; a line's index, at_ms,
// pool, worker_size, the chosen key, the number of candidates and each
// candidate's key; a key's tenant, job, class, size, deadline_at_ms,
// start, tier, reason.
func CertificateDigest(cert *Certificate) string {
	var b strings.Builder
	w := cert.Window
	for _, v := range []string{"barista-certificate", strconv.Itoa(cert.Version), cert.Tenant, strconv.FormatUint(w.FromIndex, 10),
		strconv.FormatUint(w.ToIndex, 10), strconv.FormatInt(w.FromMs, 10), strconv.FormatInt(w.ToMs, 10), strconv.FormatBool(w.Open),
		w.StartHash, w.EndHash, cert.Policy, strconv.FormatInt(cert.MarginUs, 10), cert.Clamp} {
		canon(&b, v)
	}
	h := sha256.Sum256([]byte(b.String()))
	for i := range cert.Lines {
		l := &cert.Lines[i]
		b.Reset()
		b.Write(h[:])
		canon(&b, strconv.FormatUint(l.Index, 10))
		canon(&b, strconv.FormatInt(l.AtMs, 10))
		canon(&b, l.Pool)
		canon(&b, l.WorkerSize)
		canonKey(&b, &l.Chosen)
		canon(&b, strconv.Itoa(len(l.Mine)))
		for k := range l.Mine {
			canonKey(&b, &l.Mine[k])
		}
		h = sha256.Sum256([]byte(b.String()))
	}
	return hex.EncodeToString(h[:])
}

// Seal sets the certificate's version and digest; the builder calls it
// last.
func (cert *Certificate) Seal() {
	cert.Version = CertificateVersion
	if cert.Lines == nil {
		cert.Lines = []Line{}
	}
	cert.Digest = CertificateDigest(cert)
}

// JSON is the certificate's JSON document.
func (cert *Certificate) JSON() []byte {
	b, _ := json.MarshalIndent(cert, "", "  ")
	return append(b, '\n')
}

// ParseCertificate reads a certificate's JSON document.
func ParseCertificate(b []byte) (*Certificate, error) {
	var c Certificate
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("not a certificate: %w", err)
	}
	if c.Version != CertificateVersion {
		return nil, fmt.Errorf("certificate version %d (this verifier reads %d)", c.Version, CertificateVersion)
	}
	return &c, nil
}

// Failure is a check a certificate failed: the line (its position in
// Lines, -1 for the whole certificate), its log index and the job (0:
// none) it is about, and why.
type Failure struct {
	Line  int    `json:"line"`
	Index uint64 `json:"index,omitempty"`
	Job   uint64 `json:"job,omitempty"`
	Why   string `json:"why"`
}

// Report is a verification's outcome: the lines and candidates checked,
// and every failure (none: the certificate holds).
type Report struct {
	Lines      int       `json:"lines"`
	Candidates int       `json:"candidates"`
	Failures   []Failure `json:"failures"`
}

// OK reports whether the certificate verified.
func (r *Report) OK() bool { return len(r.Failures) == 0 }

// Verify checks a certificate: its digest, that its lines are in log and
// time order inside its window, and that each candidate's reason holds —
// that every dispatch went to a job with a lower key or a rule of the
// order that outranks it (SPEC §3: class, deadline, a worker that could
// not take the tenant's job).
func Verify(cert *Certificate) *Report {
	rep := &Report{Lines: len(cert.Lines), Failures: []Failure{}}
	fail := func(line int, index, job uint64, format string, args ...any) {
		rep.Failures = append(rep.Failures, Failure{Line: line, Index: index, Job: job, Why: fmt.Sprintf(format, args...)})
	}
	if got := CertificateDigest(cert); got != cert.Digest {
		fail(-1, 0, 0, "the digest is %s but the certificate's content hashes to %s: it was changed after it was issued", cert.Digest, got)
	}
	if cert.Policy != "prefer-fit" && cert.Policy != "reserve" {
		fail(-1, 0, 0, "unknown policy %q", cert.Policy)
	}
	w := cert.Window
	var prev *Line
	for i := range cert.Lines {
		l := &cert.Lines[i]
		if l.Index < w.FromIndex || l.Index > w.ToIndex {
			fail(i, l.Index, 0, "index %d is outside the window %d..%d", l.Index, w.FromIndex, w.ToIndex)
		}
		if l.AtMs < w.FromMs || l.AtMs > w.ToMs {
			fail(i, l.Index, 0, "time %d is outside the window %d..%d", l.AtMs, w.FromMs, w.ToMs)
		}
		if prev != nil && (l.Index < prev.Index || l.AtMs < prev.AtMs) {
			fail(i, l.Index, 0, "out of order: index %d at %d ms after index %d at %d ms", l.Index, l.AtMs, prev.Index, prev.AtMs)
		}
		prev = l
		c := &l.Chosen
		if c.Tenant != Self && !opaque(c.Tenant) {
			fail(i, l.Index, c.Job, "the chosen job's tenant %q is neither %q nor an opaque name", c.Tenant, Self)
		}
		if ws, cs := sizeRank[l.WorkerSize], sizeRank[c.Size]; cs > ws {
			fail(i, l.Index, c.Job, "a %s worker was given the %s job %d", l.WorkerSize, c.Size, c.Job)
		}
		if len(l.Mine) == 0 && c.Tenant != Self {
			fail(i, l.Index, c.Job, "a line without a candidate of the tenant's")
		}
		for k := range l.Mine {
			m := &l.Mine[k]
			rep.Candidates++
			if m.Job == c.Job {
				fail(i, l.Index, m.Job, "job %d is both chosen and a candidate not chosen", m.Job)
				continue
			}
			ok, err := false, error(nil)
			if m.Reason != "" {
				ok, err = cert.Holds(m.Reason, l.WorkerSize, c, m)
			}
			switch {
			case err != nil:
				fail(i, l.Index, m.Job, "candidate job %d: %v", m.Job, err)
			case !ok && m.Reason == "":
				fail(i, l.Index, m.Job, "job %d (%s) went before candidate job %d (%s) and no rule of the order lets it", c.Job, keyText(c), m.Job, keyText(m))
			case !ok:
				why := "no rule of the order lets it"
				if r := cert.ReasonFor(l.WorkerSize, c, m); r != "" {
					why = "the rule that does is " + r
				}
				fail(i, l.Index, m.Job, "job %d (%s) went before candidate job %d (%s) for reason %q, which does not hold: %s", c.Job, keyText(c), m.Job, keyText(m), m.Reason, why)
			}
		}
	}
	return rep
}

// opaque reports whether name is an opaque tenant name: t1, t2, ...
func opaque(name string) bool {
	n, ok := strings.CutPrefix(name, "t")
	v, err := strconv.ParseUint(n, 10, 32)
	return ok && err == nil && v > 0 && strconv.FormatUint(v, 10) == n
}

func keyText(k *Key) string {
	s := fmt.Sprintf("%s %s start %s tier %d", k.Class, k.Size, k.Start, k.Tier)
	if k.DeadlineAtMs != 0 {
		s += fmt.Sprintf(" deadline %d", k.DeadlineAtMs)
	}
	return s
}

// SortedReasons is Reasons sorted, for tables.
func SortedReasons() []string { return slices.Sorted(slices.Values(Reasons)) }
