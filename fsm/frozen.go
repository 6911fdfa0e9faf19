package fsm

import (
	"google.golang.org/protobuf/proto"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// Frozen meanings (docs/architecture.md, "Feature levels gate, commands
// keep their meaning"). Until feature level 7 a level could change what a
// command already in use meant; the logs written then still apply as
// they did, so those older meanings live here, and only here: no live
// applier compares the level. From level 8 on a change of meaning is a
// new command type with its own applyX; what this file gains from then on
// is only the new fields of a command, which the levels below the one that
// added them ignore (normalize).
//
// An older meaning is one of three things:
//   - a field that command did not have yet, which it ignores
//     (normalize clears it before the live check and applier see it);
//   - a rule it was not held to yet, or held to differently (the
//     predicates below, each one comparison);
//   - an effect the live applier no longer has (applyFrozen: the effect
//     around the live applier).

// normalize returns a command applied at level as the one of today's
// meaning that does what it did at that level: a copy of c with the fields
// its level did not read cleared (c itself when there are none). Apply,
// the leader's check (Admit) and the edge (CheckFields) call it first,
// after the level check; c is never changed (the leader proposes what it
// checked, and a test may apply one command twice).
func normalize(c *clusterpb.Command, level uint32) *clusterpb.Command {
	if level >= Level8 {
		return c
	}
	switch c.GetCmd().(type) {
	case *clusterpb.Command_Submit:
		if c.GetSubmit().Form == pb.JobForm_JOB_FORM_UNSPECIFIED {
			return c
		}
		c = proto.CloneOf(c)
	case *clusterpb.Command_SetConfig:
		c = proto.CloneOf(c)
	case *clusterpb.Command_TenantUpsert, *clusterpb.Command_Finished:
		if level >= Level7 {
			return c
		}
		c = proto.CloneOf(c)
	default:
		return c
	}
	switch cmd := c.GetCmd().(type) {
	case *clusterpb.Command_Submit:
		// Below 8 a job had no form: every worker ran it (a client of a
		// later build is served as before kinds).
		cmd.Submit.Form = pb.JobForm_JOB_FORM_UNSPECIFIED
	case *clusterpb.Command_TenantUpsert:
		// Below 7 an upsert replaced the tenant whole: keep was not read
		// (the leader resolved it before proposing, Resolve).
		cmd.TenantUpsert.Keep = nil
	case *clusterpb.Command_Finished:
		// How the CPU was measured, why the run failed and a snooze were
		// read from 7; a permanent failure from 6.
		f := cmd.Finished
		f.CpuSource, f.Failure, f.SnoozeMs = 0, 0, 0
		if level < Level6 {
			f.Permanent = false
		}
	case *clusterpb.Command_SetConfig:
		// Below 6 the quotas by default were not state (a SetConfig
		// could carry their defaults, level.go), below 7 the total.
		// Below 8 neither the events each tenant keeps nor the bound on
		// worker records was.
		if p := cmd.SetConfig.GetConfig(); p != nil {
			if level < Level6 {
				p.DefaultMaxQueued, p.MaxQueuedBytes = 0, 0
			}
			if level < Level7 {
				p.MaxTotalQueuedBytes = 0
			}
			p.EventRetentionPerTenant, p.MaxWorkerRecords = 0, 0
		}
	}
	return c
}

// frozenRefusal is the refusal of a command by a rule of its level that
// today's meaning does not have, or nil: below 7 a webhook set had to name
// its URL (from 7 one that leaves it out keeps the endpoint's).
func frozenRefusal(c *clusterpb.Command, level uint32) *Refusal {
	if w := c.GetWebhookSet(); w != nil && w.Url == "" && level < Level7 {
		return refusef(Invalid, "", "%v", ValidateWebhookURL("")).Refusal()
	}
	return nil
}

// formsRead reports whether a submit's form is read: from 8 (below, every
// worker runs every job; normalize clears it).
func formsRead(level uint32) bool { return level >= Level8 }

// payloadLimitAt is the payload limit a submit is held to: below 7 the
// configuration's max_payload_bytes as it stands (a state of an older
// build may hold up to 4 MiB), from 7 no more than a message carries
// (Config.PayloadLimit).
func payloadLimitAt(cfg Config, level uint32) uint32 {
	if level < Level7 {
		return cfg.MaxPayloadBytes
	}
	return cfg.PayloadLimit()
}

// webhookKindsKept reports whether a webhook set that names no kinds
// keeps the endpoint's (from 7; below, it delivered every kind).
func webhookKindsKept(level uint32) bool { return level >= Level7 }

// exitCodesBounded reports whether a Finished's exit code is held to
// MinExitCode..MaxExitCode (from 7; below, any was taken).
func exitCodesBounded(level uint32) bool { return level >= Level7 }

// eventsKeepWall reports whether an event keeps the leader's wall time
// (from 2; the builds before kept none).
func eventsKeepWall(level uint32) bool { return level >= Level2 }

// pruneEveryEndedByJobRetention reports whether a prune removes every
// ended job by the job retention (below 5; from 5 dead letters go by
// their own retention and bounds).
func pruneEveryEndedByJobRetention(level uint32) bool { return level < Level5 }

// tiersCarry reports whether a tenant's move between tiers leaves both
// tiers' counters as they were (from 2; below, the counters moved with
// the tenant).
func tiersCarry(level uint32) bool { return level >= Level2 }

// applyFrozen applies, below level 7, a command whose effect was another
// than today's applier has: it reports false when the live applier is to
// apply it (after what it did before it, if anything).
func (f *FSM) applyFrozen(c *clusterpb.Command) (Result, bool) {
	if f.level >= Level7 {
		return Result{}, false
	}
	switch cmd := c.GetCmd().(type) {
	case *clusterpb.Command_Submit:
		return f.applySubmitBelow7(cmd.Submit), true
	case *clusterpb.Command_Dispatch:
		r := f.applyDispatch(cmd.Dispatch)
		if f.level < Level5 && !r.Refused() && !r.Assigned && r.Outcome != sfq.Duplicate {
			// Below 5 a Dispatch that gave nothing spent its credit.
			if w := f.workers[cmd.Dispatch.WorkerId]; w != nil {
				w.Credit = cmd.Dispatch.Credit
			}
		}
		return r, true
	case *clusterpb.Command_Started:
		f.seenBelow7(cmd.Started.WorkerId)
	case *clusterpb.Command_Heartbeats:
		for _, hb := range cmd.Heartbeats.Heartbeats {
			f.seenBelow7(hb.WorkerId)
		}
	case *clusterpb.Command_Finished:
		f.seenBelow7(cmd.Finished.WorkerId)
	case *clusterpb.Command_Prune:
		// Below 5 every ended job went by the job retention; below 7 a
		// drained worker's record was kept for ever.
		return f.prune(cmd.Prune, pruneRules{everyEndedByJobRetention: pruneEveryEndedByJobRetention(f.level), keepDrained: true}), true
	}
	return Result{}, false
}

// seenBelow7 marks the worker of a report seen before the report is
// applied: below 7 a worker counted as seen whatever became of its report
// (from 7 only an accepted report marks it, workerSeen).
func (f *FSM) seenBelow7(id string) {
	if w := f.workers[id]; w != nil {
		w.LastSeen = f.clock
	}
}

// applySubmitBelow7 applies a submit as below 7: a submit for an unknown
// tenant under implicit_tenants made the tenant once its size, class,
// payload and pool passed, and kept it when a later rule refused the
// submit (legacyImplicit).
func (f *FSM) applySubmitBelow7(c *clusterpb.SubmitJob) Result {
	r := f.applySubmit(c)
	if r.Refused() && f.legacyImplicit(c) {
		f.implicitTenant(c.Tenant)
		ti, _ := f.sched.TenantIndex(c.Tenant)
		f.observe(ti)
	}
	return r
}

// legacyImplicit reports whether Apply before Level7 made the implicit
// tenant of a submit it then refused: it made it once the submit's size,
// class, payload and pool passed, before it checked the other fields,
// the key, the permits, max_groups and the quotas.
func (f *FSM) legacyImplicit(c *clusterpb.SubmitJob) bool {
	if _, err := SizeFromPB(c.Size); err != nil || uint64(len(c.Payload)) > uint64(f.cfg.MaxPayloadBytes) {
		return false
	}
	if _, err := ClassFromPB(c.JobClass); err != nil {
		return false
	}
	if c.Pool != "" {
		if p, ok := f.sched.Pool(c.Pool); !ok || p.Required && f.cfg.Pools.Implicit {
			return false
		}
	}
	if _, ok := f.sched.TenantIndex(c.Tenant); ok {
		return false
	}
	spec, r := f.implicitSpec(c.Tenant)
	return spec != nil && !r.Refused()
}
