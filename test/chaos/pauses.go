package chaos

import (
	"fmt"
	"sort"

	"github.com/baristahq/barista/snapshot"
)

// checkPauses (8): no dispatch of a tenant or a group after the index of
// its pause (until its resume), none in a pool while it is paused, and
// none at all while all dispatch is paused. The pauses are replayed from
// the audit's own pause facts.
func checkPauses(h *History) []Violation {
	var out []Violation
	paused := map[string]bool{} // "tenant" or "tenant/group"
	pools := map[string]bool{}  // paused pools, by poolName
	all := false
	for _, f := range h.Audit {
		switch f.Kind {
		case "pause":
			switch {
			case f.Pool != "":
				pools[poolName(f.Pool)] = f.Paused
			case f.All:
				all = f.Paused
			case f.Group != "":
				paused[f.Tenant+"/"+f.Group] = f.Paused
			default:
				paused[f.Tenant] = f.Paused
			}
		case "dispatch":
			switch {
			case all:
				out = append(out, Violation{8, fmt.Sprintf("index %d: job %d of tenant %s dispatched while all dispatch is paused", f.Index, f.Job, f.Tenant)})
			case pools[poolName(f.Pool)]:
				out = append(out, Violation{8, fmt.Sprintf("index %d: job %d of tenant %s dispatched while its pool %s is paused", f.Index, f.Job, f.Tenant, poolName(f.Pool))})
			case paused[f.Tenant]:
				out = append(out, Violation{8, fmt.Sprintf("index %d: job %d dispatched while its tenant %s is paused", f.Index, f.Job, f.Tenant)})
			case f.Group != "" && paused[f.Tenant+"/"+f.Group]:
				out = append(out, Violation{8, fmt.Sprintf("index %d: job %d dispatched while its group %q of tenant %s is paused", f.Index, f.Job, f.Group, f.Tenant)})
			}
		}
	}
	return out
}

// rateSpan is the dispatches (cluster ms) of one tenant or group under one
// rate limit, from the index the limit was set.
type rateSpan struct {
	who      string
	from     uint64
	n, burst uint32
	periodMs int64
	at       []int64
	lastIdx  []uint64
}

// checkRates (8): under a rate limit N/PERIOD with burst B (I = ceil(PERIOD
// / N) µs), no window of cluster time W between two dispatches of the
// tenant (or group) holds more than B + floor(W / I) of them. A window is
// checked inside one span of an unchanged limit (a change keeps the GCRA
// state, so a span starts with what the earlier limit left, which the
// rateHolder names what a rate-limit fact limits: "tenant" or
// "tenant/group".
func rateHolder(f snapshot.AuditFact) string {
	if f.Group != "" {
		return f.Tenant + "/" + f.Group
	}
	return f.Tenant
}

// bound allows). O(n²) in a span's dispatches.
func checkRates(h *History) []Violation {
	spans := map[string]*rateSpan{}
	var done []*rateSpan
	for _, f := range h.Audit {
		switch f.Kind {
		case "rate":
			who := rateHolder(f)
			if old := spans[who]; old != nil {
				if old.n == f.RateN && old.periodMs == f.RatePeriodMs && old.burst == f.RateBurst {
					continue
				}
				done = append(done, old)
				delete(spans, who)
			}
			if f.RateN > 0 {
				spans[who] = &rateSpan{who: who, from: f.Index, n: f.RateN, periodMs: f.RatePeriodMs, burst: f.RateBurst}
			}
		case "dispatch":
			for _, who := range []string{f.Tenant, f.Tenant + "/" + f.Group} {
				if sp := spans[who]; sp != nil && (who == f.Tenant || f.Group != "") {
					sp.at = append(sp.at, f.At)
					sp.lastIdx = append(sp.lastIdx, f.Index)
				}
			}
		}
	}
	for _, sp := range spans {
		done = append(done, sp)
	}
	sort.Slice(done, func(i, j int) bool {
		if done[i].who != done[j].who {
			return done[i].who < done[j].who
		}
		return done[i].from < done[j].from
	})
	var out []Violation
	for _, sp := range done {
		if v, ok := sp.worst(); ok {
			out = append(out, v)
		}
	}
	return out
}

// worst returns the first window of the span over its bound.
func (sp *rateSpan) worst() (Violation, bool) {
	i := (sp.periodMs*1000 + int64(sp.n) - 1) / int64(sp.n)
	for a := range sp.at {
		for b := a; b < len(sp.at); b++ {
			w := sp.at[b] - sp.at[a]
			allowed := int64(sp.burst) + w*1000/i
			if got := int64(b - a + 1); got > allowed {
				return Violation{8, fmt.Sprintf("%s at rate %d/%d ms burst %d: %d dispatches in the %d ms from index %d to %d, over burst + floor(W/I) = %d",
					sp.who, sp.n, sp.periodMs, sp.burst, got, w, sp.lastIdx[a], sp.lastIdx[b], allowed)}, true
			}
		}
	}
	return Violation{}, false
}

// leverLine counts the pauses and rate limits of a run's log and the
// dispatches made under a rate limit (the ones checkRates checks).
func leverLine(h *History) string {
	pauses, resumes, rates := 0, 0, 0
	for _, f := range h.Audit {
		switch {
		case f.Kind == "pause" && f.Paused:
			pauses++
		case f.Kind == "pause":
			resumes++
		case f.Kind == "rate" && f.RateN > 0:
			rates++
		}
	}
	limited := 0
	spans := map[string]bool{}
	for _, f := range h.Audit {
		switch f.Kind {
		case "rate":
			who := rateHolder(f)
			spans[who] = f.RateN > 0
		case "dispatch":
			if spans[f.Tenant] || (f.Group != "" && spans[f.Tenant+"/"+f.Group]) {
				limited++
			}
		}
	}
	return fmt.Sprintf("%d pauses, %d resumes, %d rate limits set; %d dispatches under a rate limit", pauses, resumes, rates, limited)
}

// rateFact is a helper of the tests: the audit fact of a rate limit.
func rateFact(index uint64, tenant, group string, n uint32, periodMs int64, burst uint32) snapshot.AuditFact {
	return snapshot.AuditFact{Kind: "rate", Index: index, Tenant: tenant, Group: group, RateN: n, RatePeriodMs: periodMs, RateBurst: burst}
}
