package chaos

// The run's report (faults, failovers, operations, jobs, requeues, fenced
// writes, delays and levers) and the metric sums it reads.

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/baristahq/barista/test/cluster"
)

// report summarises a run: faults by kind, failovers, operations by
// kind and outcome, jobs, requeues and fenced writes.
func (r *Run) report(h *History, fenced float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos run: seed %d, %d nodes, %d workers, %s of faults, partitions %v\n", r.cfg.Seed, r.cfg.Nodes, len(r.c.Workers), r.cfg.Duration, r.net != nil)
	kinds := map[string]int{}
	var failovers []string
	for _, f := range r.faults {
		kinds[f.Kind]++
		if f.Failover > 0 {
			failovers = append(failovers, fmt.Sprintf("%s %s: %s", f.Kind, f.Target, f.Failover.Round(time.Millisecond)))
		}
	}
	fmt.Fprintf(&b, "faults: %d %s\n", len(r.faults), countLine(kinds))
	fmt.Fprintf(&b, "failovers (fault to next committed dispatch): %s\n", strings.Join(failovers, "; "))
	ops := map[string]int{}
	for _, o := range h.Ops {
		outcome := "acked"
		if !o.Acked() {
			outcome = "not-acked"
		}
		ops[o.Kind+"/"+outcome]++
		if o.Tries > 1 {
			ops[o.Kind+"/retried"]++
		}
	}
	fmt.Fprintf(&b, "operations: %s\n", countLine(ops))
	facts := map[string]int{}
	for _, f := range h.Audit {
		facts[f.Kind]++
	}
	requeued := 0
	seen := map[uint64]bool{}
	for _, e := range h.Events {
		if e.Kind == "requeued" && !seen[e.Seq] {
			requeued++
		}
		seen[e.Seq] = true
	}
	fmt.Fprintf(&b, "log: %d entries, %d jobs, %d dispatches, %d accepted finishes, %d terminal, %d redriven; requeues seen %d; fenced writes rejected %.0f; attempts run %d; watch events %d\n",
		facts["entry"], facts["job"], facts["dispatch"], facts["finish"], facts["terminal"], facts["redrive"], requeued, fenced, len(h.Attempts), len(h.Events))
	classes := map[string]int{}
	for _, f := range h.Audit {
		if f.Kind == "dispatch" {
			k := classOf(f)
			if f.Deadline {
				k += ":deadline"
				if f.DeadlineMissed {
					classes["deadline-missed"]++
				}
			}
			classes[k]++
		}
	}
	fmt.Fprintf(&b, "dispatches by class: %s\n", countLine(classes))
	pools := map[string]int{}
	for _, f := range h.Audit {
		if f.Kind == "dispatch" {
			switch {
			case f.Pool == "":
				pools["default"]++
			case f.Subscribed && f.PoolRunning == f.Burst:
				pools[f.Pool+"-at-burst"]++
			default:
				pools[f.Pool]++
			}
		}
	}
	fmt.Fprintf(&b, "dispatches by pool (at-burst: the dispatch filled its tenant's subscription): %s\n", countLine(pools))
	groups := map[string]int{}
	for _, f := range h.Audit {
		if f.Kind == "dispatch" {
			switch {
			case f.Group == "":
				groups["unnamed"]++
			case f.GroupCap > 0 && f.GroupRunning == f.GroupCap:
				groups["named-at-cap"]++
			case f.GroupCap > 0:
				groups["named-capped"]++
			default:
				groups["named-uncapped"]++
			}
		}
	}
	fmt.Fprintf(&b, "dispatches by group (at-cap: the dispatch filled its group's cap): %s\n", countLine(groups))
	// Delays: how late releases came after their due time (cluster time),
	// and how many jobs expired.
	var late []int64
	expired := 0
	for _, f := range h.Audit {
		switch {
		case f.Kind == "release" && !f.Forced:
			late = append(late, f.At-f.DueAt)
		case f.Kind == "terminal" && f.State == "expired":
			expired++
		}
	}
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	if n := len(late); n > 0 {
		fmt.Fprintf(&b, "delays: %d scheduled, %d released (lateness p50 %d ms, max %d ms of cluster time), %d expired\n",
			facts["scheduled"], n, late[n/2], late[n-1], expired)
	}
	fmt.Fprintf(&b, "levers: %s\n", leverLine(h))
	fmt.Fprintf(&b, "kinds: %s\n", kindsLine(h))
	fmt.Fprintf(&b, "schedules: %d; %s\n", r.cfg.Schedules, schedulesLine(h))
	if r.cfg.Resources {
		fmt.Fprintf(&b, "resources: %s\n", resourcesLine(h))
	}
	return b.String()
}

// kindsLine counts the dispatches by the job's form (any: a job of no
// form) and the workers' sessions (hello), those that lost the run their
// worker held (lost-assigned: never started; lost-running: started) and
// those that kept it (resumed).
func kindsLine(h *History) string {
	n := map[string]int{}
	for _, f := range h.Audit {
		switch {
		case f.Kind == "dispatch" && f.Form == "":
			n["dispatch-any"]++
		case f.Kind == "dispatch":
			n["dispatch-"+f.Form]++
		case f.Kind == "hello":
			n["hello"]++
			switch {
			case f.Job == 0 || f.Hello == nil:
			case f.Hello.Listed:
				n["resumed"]++
			default:
				n["lost-"+f.Hello.Before]++
			}
		}
	}
	return countLine(n)
}

func countLine(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// scrapeSum adds every sample of a metric on a node's /metrics.
func scrapeSum(addr, name string) float64 {
	m, _ := cluster.Scrape("http://" + addr + "/metrics")
	sum := 0.0
	for k, v := range m {
		if cluster.Series(k, name) {
			sum += v
		}
	}
	return sum
}
