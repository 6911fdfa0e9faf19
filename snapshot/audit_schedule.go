package snapshot

import (
	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// ScheduleFact is what an accepted schedule command did (a "schedule"
// fact; SPEC §8 rule 14), with the fact's Tenant, Index and At (the
// entry's cluster time): Op is set, pause, resume, delete, fire, miss or
// run_now; the schedule's Name, and after the command its Spec, Zone,
// Version, Since (slots after it fire), CatchupMs, JitterMs and Paused; a
// fire's Slot and Outcome (fired, skipped, refused), a miss's Slot (the
// newest it spent) and Count. A fire or run-now that submitted a job
// also reports a "submit" fact of it, with its key.
type ScheduleFact struct {
	Op        string `json:"op"`
	Name      string `json:"name"`
	Spec      string `json:"spec,omitempty"`
	Zone      string `json:"zone,omitempty"`
	Version   uint64 `json:"version,omitempty"`
	Since     int64  `json:"since,omitempty"`
	CatchupMs int64  `json:"catchup_ms,omitempty"`
	JitterMs  int64  `json:"jitter_ms,omitempty"`
	Paused    bool   `json:"paused,omitempty"`
	Slot      int64  `json:"slot,omitempty"`
	Count     uint64 `json:"count,omitempty"`
	Outcome   string `json:"outcome,omitempty"`
}

// scheduleFacts reports a schedule command c that applied as r at
// cluster time clock (none for any other command, or one that changed
// nothing). It reads f: call it outside f.Read.
func scheduleFacts(f *fsm.FSM, index uint64, c *clusterpb.Command, r fsm.Result, clock sfq.Time) []AuditFact {
	if r.Code != fsm.OK || r.Outcome != sfq.Changed {
		return nil
	}
	var tenant, name string
	sf := &ScheduleFact{}
	switch x := c.Cmd.(type) {
	case *clusterpb.Command_ScheduleSet:
		tenant, name, sf.Op = x.ScheduleSet.Tenant, x.ScheduleSet.Name, "set"
	case *clusterpb.Command_SchedulePause:
		tenant, name, sf.Op = x.SchedulePause.Tenant, x.SchedulePause.Name, "pause"
		if x.SchedulePause.Resume {
			sf.Op = "resume"
		}
	case *clusterpb.Command_ScheduleDelete:
		tenant, name, sf.Op = x.ScheduleDelete.Tenant, x.ScheduleDelete.Name, "delete"
	case *clusterpb.Command_ScheduleFire:
		tenant, name, sf.Op, sf.Slot = x.ScheduleFire.Tenant, x.ScheduleFire.Name, "fire", x.ScheduleFire.SlotMs
		sf.Outcome = r.Fire.String()
	case *clusterpb.Command_ScheduleMiss:
		tenant, name, sf.Op, sf.Slot, sf.Count = x.ScheduleMiss.Tenant, x.ScheduleMiss.Name, "miss", x.ScheduleMiss.ThroughMs, x.ScheduleMiss.Count
	case *clusterpb.Command_ScheduleRunNow:
		tenant, name, sf.Op = x.ScheduleRunNow.Tenant, x.ScheduleRunNow.Name, "run_now"
	default:
		return nil
	}
	sf.Name = name
	if s, ok := f.GetSchedule(tenant, name); ok {
		sf.Spec, sf.Zone, sf.Version, sf.Since = s.Spec, s.Zone, s.Version, int64(s.Since)
		sf.CatchupMs, sf.JitterMs, sf.Paused = s.CatchupMs, s.JitterMs, s.Paused
	}
	out := []AuditFact{{Kind: "schedule", Index: index, Tenant: tenant, At: int64(clock), Schedule: sf}}
	if r.Job != 0 && r.Created {
		fact := AuditFact{Kind: "submit", Index: index, Job: uint64(r.Job), Tenant: tenant, Created: true}
		f.Read(func(s *sfq.Scheduler) {
			if j, ok := s.Job(r.Job); ok {
				fact.Key = j.Key()
				fact.Form, fact.JobKind = formFact(&j)
			}
		})
		out = append(out, fact)
	}
	return out
}
