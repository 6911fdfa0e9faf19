package fsm

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// Delays, expiry and retry backoff in the state machine (feature level
// 5): the Release command, the ttl kind of Expire, the delay fields of a
// submit and the retry backoff settings.

// MaxReleaseBatch bounds the jobs of one Release.
const MaxReleaseBatch = 10_000

// SeedConfig is the configuration a new cluster at feature level 5 starts
// with: DefaultConfig with a retry backoff of 5 s doubling up to 10 min.
// Below level 5 the backoff stays 0 (a failed run is requeued at once).
func SeedConfig() Config {
	c := DefaultConfig()
	c.Sched.RetryBackoffMs = sfq.DefaultRetryBackoffMs
	c.Sched.RetryBackoffMaxMs = sfq.DefaultRetryBackoffMaxMs
	return c
}

// submitDelays returns the delay fields of a submit as the core takes
// them.
func submitDelays(c *clusterpb.SubmitJob, sub *sfq.Submission) {
	sub.DelayMs, sub.ExpireMs = c.DelayMs, c.ExpireMs
	if c.RetryBackoffMs != nil {
		sub.RetryBackoffMs, sub.RetryBackoffSet = *c.RetryBackoffMs, true
	}
}

// appendDelayDigest adds the delay fields of a submit to its digest, only
// when set (a submit without them keeps its digest).
func appendDelayDigest(b []byte, c *clusterpb.SubmitJob) []byte {
	if c.DelayMs == 0 && c.ExpireMs == 0 && c.RetryBackoffMs == nil {
		return b
	}
	b = append(b, 'd')
	b = binary.AppendVarint(b, c.DelayMs)
	b = binary.AppendVarint(b, c.ExpireMs)
	if c.RetryBackoffMs != nil {
		b = append(b, 1)
		b = binary.AppendVarint(b, *c.RetryBackoffMs)
	} else {
		b = append(b, 0)
	}
	return b
}

// delayLevel returns what of a command needs feature level 5 for delays,
// or "".
func delayLevel(c *clusterpb.Command) string {
	switch cmd := c.GetCmd().(type) {
	case *clusterpb.Command_Submit:
		s := cmd.Submit
		switch {
		case s.DelayMs != 0:
			return "delay"
		case s.ExpireMs != 0:
			return "expire"
		case s.RetryBackoffMs != nil:
			return "retry_backoff"
		}
	case *clusterpb.Command_Release:
		return "Release"
	case *clusterpb.Command_Expire:
		if cmd.Expire.Kind == clusterpb.ExpireKind_TTL {
			return "expire ttl"
		}
	case *clusterpb.Command_SetConfig:
		p := cmd.SetConfig.GetConfig()
		if p.GetRetryBackoffMs() != 0 || p.GetRetryBackoffMaxMs() != 0 {
			return "retry_backoff"
		}
	}
	return ""
}

// applyRelease releases scheduled jobs, each on its own: a job not
// scheduled, not due (unless now) or past its expire_at is refused and
// the others go on. With a tenant, another tenant's job is not found.
// The result counts the released jobs; when none was released it is the
// first refusal, else its message lists the refusals (at most 10).
func (f *FSM) applyRelease(c *clusterpb.Release) Result {
	if len(c.Jobs) == 0 || len(c.Jobs) > MaxReleaseBatch {
		return refusef(Invalid, "jobs", "%d (want 1..%d)", len(c.Jobs), MaxReleaseBatch)
	}
	var first Result
	var refused []string
	released := uint64(0)
	var last sfq.JobID
	for _, raw := range c.Jobs {
		id := sfq.JobID(raw)
		var r Result
		if _, ok := f.sched.TenantJob(c.Tenant, id); !ok {
			r = refusef(NotFound, "", "job %d not found", raw)
		} else {
			ch, err := f.sched.Release(f.clock, id, c.Now)
			if err != nil {
				r = refuse(err)
			} else if ch.Outcome == sfq.Changed {
				j, _ := f.sched.Job(id)
				f.emit(EvReleased, &j, ReasonNone)
				f.observe(ch.Tenant)
				released++
				last = id
				continue
			}
		}
		if first.Code == OK {
			first = r
		}
		if len(refused) < 10 {
			refused = append(refused, r.Msg)
		}
	}
	if released == 0 {
		return first
	}
	res := Result{Count: released}
	if len(c.Jobs) == 1 {
		res.Job, res.Outcome = last, sfq.Changed
		if j, ok := f.sched.Job(last); ok {
			res.Tenant = f.sched.TenantName(j.Tenant)
		}
	}
	if len(refused) > 0 {
		res.Msg = fmt.Sprintf("%d of %d refused: %s", len(c.Jobs)-int(released), len(c.Jobs), strings.Join(refused, "; "))
	}
	return res
}

// emitDelay appends the event of a change into or out of the states of
// delays; it reports false for a change it does not name.
func (f *FSM) emitDelay(ch sfq.Change, j *sfq.Job, reason Reason) bool {
	switch {
	case ch.To == sfq.Scheduled:
		f.emit(EvScheduled, j, reason)
	case ch.To == sfq.Expired:
		f.emit(EvExpired, j, ReasonNone)
	default:
		return false
	}
	return true
}

// DueDelays returns, as of the state applied so far, up to limit
// scheduled jobs due at now (by due time, then ID; those past their
// expire_at left out) and up to limit jobs whose expiry is due at now
// (by expire_at, then ID): what the leader proposes as Release and
// Expire ttl.
func (f *FSM) DueDelays(now sfq.Time, limit int) (releases, expiries []sfq.JobID) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.sched.DueReleases(now, limit), f.sched.DueExpiries(now, limit)
}

// NextDelayWake returns the earliest cluster time a scheduled job is due
// or a job expires (false: none).
func (f *FSM) NextDelayWake() (sfq.Time, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.sched.NextDelayWake()
}
