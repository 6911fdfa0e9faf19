package web

import (
	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/sfq"
)

// What the console reads from this node's own replicated state, where
// the API has no call for it: counts of jobs by state, class and size,
// and a job's events (as WatchEvents reads them, from the node it is
// asked). Everything else it reads through the API, from the leader.

// jobStates are the states a job count has, in their order.
var jobStates = []sfq.State{sfq.Scheduled, sfq.Queued, sfq.Assigned, sfq.Running, sfq.Completed, sfq.Failed, sfq.Cancelled, sfq.TimedOut, sfq.Expired}

// jobCounts counts jobs by state, class and size.
type jobCounts [sfq.Expired + 1][sfq.NumClasses][sfq.NumSizes]uint32

// countJobs counts the jobs of tenant (every tenant's if empty) in the
// job table, and reports false if no live tenant has that name. One pass
// over the table, like a ListJobs page with a state filter.
func countJobs(f *fsm.FSM, tenant string) (out jobCounts, ok bool) {
	f.Read(func(sc *sfq.Scheduler) {
		ok = sc.TenantJobs(tenant, 0, func(j *sfq.Job) bool {
			if j.State >= sfq.Queued && j.State <= sfq.Expired && j.Class < sfq.NumClasses && j.Size < sfq.NumSizes {
				out[j.State][j.Class][j.Size]++
			}
			return true
		})
	})
	return out, ok
}

// maxJobEvents bounds the events a job page shows.
const maxJobEvents = 500

// jobEvents returns a job's retained events in order (at most
// maxJobEvents; more reports the rest were left out) and whether events
// of it may have been pruned already (the oldest retained event is
// younger than its submit). Events are in cluster-time order, so the
// scan starts at the first event at or after the job's submit, found by
// bisection, and stops at its end (endedAt, 0 while it has not ended; a
// job that ended may have been redriven since).
func jobEvents(f *fsm.FSM, id sfq.JobID, submittedAt, endedAt sfq.Time) (evs []fsm.Event, more, pruned bool) {
	first, next := f.Events(^uint64(0), func(*fsm.Event) bool { return false })
	at := func(seq uint64) (t sfq.Time) {
		f.Events(seq, func(ev *fsm.Event) bool { t = ev.At; return false })
		return t
	}
	if first < next && at(first) > submittedAt {
		pruned = true
	}
	lo, hi := first, next
	for lo < hi {
		mid := lo + (hi-lo)/2
		if at(mid) < submittedAt {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	f.Events(lo, func(ev *fsm.Event) bool {
		if ev.Job != id {
			return true
		}
		if len(evs) == maxJobEvents {
			more = true
			return false
		}
		evs = append(evs, *ev)
		// A job that ended and was redriven has events after its first
		// end: the scan stops at the end it is in now (endedAt), if any.
		return !(ev.Kind.Terminal() && endedAt != 0 && ev.At >= endedAt)
	})
	return evs, more, pruned
}
