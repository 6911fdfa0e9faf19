package fsm

import (
	"fmt"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
)

// The cluster's feature level (SPEC §4 "Feature level"; docs/operations.md
// "Upgrades"). A level names what the commands and the state may hold. It
// is replicated: the leader raises it with SetFeatureLevel once every voter
// reports that its build understands the new level, it never goes down,
// and a command that needs a higher level is refused at the edge and again
// in Apply. So a cluster of mixed builds only ever commits what all of
// them apply alike.
const (
	// Level1 is what builds before feature levels hold and write:
	// snapshot format 1. A state that never saw SetFeatureLevel is at
	// Level1.
	Level1 uint32 = 1
	// Level2 adds priority classes, deadlines, learned cost estimates
	// (estimate=auto and the moving averages, which are learned from this
	// level on), tenants' export_metrics marks and per-tier carries; its
	// state is written as snapshot format 2.
	Level2 uint32 = 2
	// Level3 adds webhooks: the commands that set, delete, acknowledge
	// and replay a tenant's endpoint, and the webhook section of the
	// state (state version 5, snapshot format 4). A build of level 2
	// knows none of them: it would refuse each as unknown and could not
	// read the state.
	Level3 uint32 = 3
	// Level4 adds groups: a submit's group, a tenant's group_cap,
	// group_order=fair and max_groups, and SetGroup; its state is written
	// as snapshot format 5 (FSM state version 6, the core's version 4).
	// Below it no command can put anything of groups into the state, so a
	// cluster at level 3 holds and writes exactly what the build before
	// groups does.
	Level4 uint32 = 4
	// Level5 adds the job lifecycle levers: delayed and expiring jobs,
	// retry backoff, pauses, rate limits, dead letters with redrive, bulk
	// cancel and purge; its state is written as snapshot format 6 (FSM
	// state version 7, the core's version 5). Below it no command can put
	// any of them into the state, so a cluster at level 4 holds and writes
	// exactly what the build before them does.
	Level5 uint32 = 5
	// MaxFeatureLevel is the highest level this build understands.
	MaxFeatureLevel = Level5
)

// ErrFeatureLevel marks a SetFeatureLevel above what this build
// understands: the node stops rather than apply it.
var ErrFeatureLevel = fmt.Errorf("unknown feature level")

// RequiredLevel returns the feature level a command needs and, when that
// is above Level1, what needs it (a field and its value). It is the one
// check of the edge and of Apply.
func RequiredLevel(c *pb.Command) (uint32, string) {
	switch cmd := c.GetCmd().(type) {
	case *pb.Command_Submit:
		s := cmd.Submit
		if k := s.JobClass; k != pb.Class_CLASS_UNSPECIFIED && k != pb.Class_NORMAL {
			return Level2, "class " + className(k)
		}
		if s.DeadlineMs != 0 {
			return Level2, "deadline"
		}
		if s.Group != "" {
			return Level4, "group"
		}
	case *pb.Command_TenantUpsert:
		u := cmd.TenantUpsert
		c := u.GetCaps()
		switch {
		case u.GroupCap != 0:
			return Level4, "group_cap"
		case u.GroupOrder == pb.GroupOrder_GROUP_FAIR:
			return Level4, "group_order fair"
		case u.MaxGroups != 0:
			return Level4, "max_groups"
		case u.MaxClass != pb.Class_CLASS_UNSPECIFIED && u.MaxClass != pb.Class_NORMAL:
			return Level2, "max_class " + className(u.MaxClass)
		case u.AllowDeadlines:
			return Level2, "allow_deadlines"
		case c.GetMaxRunningCritical() != 0:
			return Level2, "cap_critical"
		case c.GetMaxRunningHigh() != 0:
			return Level2, "cap_high"
		case c.GetMaxRunningDeadline() != 0:
			return Level2, "deadline_cap"
		case u.ExportMetrics:
			return Level2, "export_metrics"
		}
	case *pb.Command_WebhookSet:
		for _, n := range cmd.WebhookSet.Kinds {
			if k, ok := ParseEventKind(n); ok && k > EvTimedOut {
				return Level5, "webhook kind " + n
			}
		}
		return Level3, "webhook set"
	case *pb.Command_WebhookDelete:
		return Level3, "webhook delete"
	case *pb.Command_WebhookAck:
		return Level3, "webhook ack"
	case *pb.Command_WebhookReplay:
		return Level3, "webhook replay"
	case *pb.Command_SetGroup:
		return Level4, "SetGroup"
	case *pb.Command_SetConfig:
		p := cmd.SetConfig.GetConfig()
		if e := p.GetEstimate(); e != pb.Estimate_ESTIMATE_UNSPECIFIED && e != pb.Estimate_SUBMITTED {
			return Level2, "estimate=auto"
		}
		if d := p.GetDefaultCostMs(); d != 0 && d != sfq.DefaultCostMs {
			return Level2, "default_cost"
		}
		if l, what := deadLetterLevel(p); l > Level1 {
			return l, what
		}
	case *pb.Command_Redrive:
		return Level5, "Redrive"
	case *pb.Command_CancelJobs:
		return Level5, "CancelJobs"
	case *pb.Command_Purge:
		return Level5, "Purge"
	}
	return Level1, ""
}

func className(c pb.Class) string {
	if k, err := ClassFromPB(c); err == nil {
		return k.String()
	}
	return c.String()
}

// LevelMessage is the refusal of what, which needs level need, in a
// cluster at level have.
func LevelMessage(what string, need, have uint32) string {
	return fmt.Sprintf("%s needs cluster feature level %d; the cluster is at level %d until every voter runs a build that understands level %d (docs/operations.md, \"Upgrades\")",
		what, need, have, need)
}

// CheckLevel refuses a command that needs a feature level above have, with
// the message of LevelMessage.
func CheckLevel(c *pb.Command, have uint32) error {
	if need, what := RequiredLevel(c); need > have {
		return &Refusal{Code: FailedPrecondition, Msg: LevelMessage(what, need, have)}
	}
	return nil
}

// Level returns the cluster's feature level as of the last applied entry.
func (f *FSM) Level() uint32 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.level
}

// setLevel sets the level and what follows from it in the core.
func (f *FSM) setLevel(l uint32) {
	f.level = l
	f.sched.SetVersion1(l < Level2)
}

// NewLatest returns an empty state machine at MaxFeatureLevel, as a new
// cluster's first leader makes it: for tools and tests that start from
// nothing (scenarios, benchmarks). A node, and the replay of a data
// directory, start from New: a log that never raised the level is at
// Level1.
func NewLatest() *FSM { return NewAtLevel(MaxFeatureLevel) }

// NewAtLevel returns an empty state machine at feature level l (at most
// MaxFeatureLevel), as a new cluster's first leader makes it while some
// voter understands no higher level.
func NewAtLevel(l uint32) *FSM {
	f := New()
	f.setLevel(min(max(l, Level1), MaxFeatureLevel))
	return f
}

func (f *FSM) applySetFeatureLevel(c *pb.SetFeatureLevel) Result {
	switch {
	case c.Level > MaxFeatureLevel:
		// Every voter said it understands the level; this node does not
		// (it runs an older build than it reported, or is no voter). It
		// must not go on without it.
		f.latch(fmt.Errorf("%w %d (this build understands up to %d): upgrade this node", ErrFeatureLevel, c.Level, MaxFeatureLevel))
		return refusef(FailedPrecondition, "feature level %d is unknown to this build", c.Level)
	case c.Level <= f.level:
		return Result{Outcome: sfq.Duplicate}
	}
	f.setLevel(c.Level)
	return Result{Outcome: sfq.Changed, Count: uint64(c.Level)}
}

// fitsLevel checks that the state holds nothing its level cannot (below
// Level5 nothing of its levers; below Level4 nothing of groups; below Level3 no webhooks; at Level1 nothing
// the version 1 encoding would leave out).
func (f *FSM) fitsLevel() error {
	if f.level < Level5 {
		if err := f.sched.Peek().FitsVersion4(); err != nil {
			return fmt.Errorf("%w: at feature level %d the state holds %v", sfq.ErrVerify, f.level, err)
		}
	}
	if f.level < Level4 {
		if err := f.sched.Peek().FitsVersion3(); err != nil {
			return fmt.Errorf("%w: at feature level %d the state holds %v", sfq.ErrVerify, f.level, err)
		}
	}
	if f.level < Level3 && (f.whSerial != 0 || len(f.webhooks) > 0) {
		return fmt.Errorf("%w: at feature level %d the state holds webhooks", sfq.ErrVerify, f.level)
	}
	if f.level >= Level2 {
		return nil
	}
	if err := f.sched.Peek().FitsVersion1(); err != nil {
		return fmt.Errorf("%w: at feature level %d the state holds %v", sfq.ErrVerify, f.level, err)
	}
	if len(f.exported) > 0 || f.tierCarry != [sfq.NumTiers]Counters{} {
		return fmt.Errorf("%w: at feature level %d the state holds export_metrics marks or tier carries", sfq.ErrVerify, f.level)
	}
	return nil
}
