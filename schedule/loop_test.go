package schedule

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/leader"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func must(t *testing.T, m *leader.Memory, cmds ...*clusterpb.Command) []fsm.Result {
	t.Helper()
	res, err := m.Apply(cmds...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func tenantCmd(name string) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: name, Tier: pb.Tier_SILVER}}}
}

func setCmd(tenant, name, spec string, overlap pb.Overlap, jitterMs int64) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_ScheduleSet{ScheduleSet: &clusterpb.ScheduleSet{Tenant: tenant, Name: name, Spec: spec,
		Overlap: overlap, JitterMs: jitterMs, Job: &clusterpb.SubmitJob{JobType: "tick", Size: pb.Size_SM, EstCostMs: 100}}}}
}

// pass syncs the loop and fires what is due at now; it returns the
// entries the pass proposed (each a list of commands).
func pass(t *testing.T, l *Loop, m *leader.Memory, now sfq.Time) [][]*clusterpb.Command {
	t.Helper()
	m.SetNow(now)
	before := len(m.Entries())
	for {
		l.Sync()
		more, err := l.FireDue(context.Background(), now)
		if err != nil {
			t.Fatal(err)
		}
		if !more {
			break
		}
	}
	return m.Entries()[before:]
}

func schedule(t *testing.T, m *leader.Memory, tenant, name string) fsm.ScheduleInfo {
	t.Helper()
	s, ok := m.State().GetSchedule(tenant, name)
	if !ok {
		t.Fatalf("no schedule %s/%s", tenant, name)
	}
	return s
}

// TestLoopFiresEachSlotOnce: nothing is proposed before a slot or between
// slots; at a slot one entry fires it; a second pass, or a new leader's
// loop, fires nothing again.
func TestLoopFiresEachSlotOnce(t *testing.T) {
	m := leader.NewMemory(1_000)
	must(t, m, tenantCmd("acme"), setCmd("acme", "s", "@every 10s", pb.Overlap_OVERLAP_ALLOW, 0))
	l := NewLoop(m, nil, nil)
	if got := pass(t, l, m, 9_999); len(got) != 0 {
		t.Fatalf("before the slot: %v", got)
	}
	if at, ok := l.NextFire(); !ok || at != 10_000 {
		t.Fatalf("next fire %d %v", at, ok)
	}
	got := pass(t, l, m, 10_000)
	if len(got) != 1 || len(got[0]) != 1 || got[0][0].GetScheduleFire().GetSlotMs() != 10_000 {
		t.Fatalf("at the slot: %v", got)
	}
	for _, now := range []sfq.Time{10_000, 15_000, 19_999} {
		if got := pass(t, l, m, now); len(got) != 0 {
			t.Fatalf("between slots, at %d: %v", now, got)
		}
	}
	// A new leader reads the state: the spent slot is not fired again.
	l2 := NewLoop(m, nil, nil)
	if got := pass(t, l2, m, 19_999); len(got) != 0 {
		t.Fatalf("a new leader: %v", got)
	}
	if got := pass(t, l2, m, 20_000); len(got) != 1 {
		t.Fatalf("a new leader at the next slot: %v", got)
	}
	if s := schedule(t, m, "acme", "s"); s.Fired != 2 || s.LastSlot != 20_000 {
		t.Fatalf("the schedule: %+v", s.Schedule)
	}
}

// TestLoopCoalesces: the fires of many schedules due at one time share
// entries, MaxBatch commands each.
func TestLoopCoalesces(t *testing.T) {
	m := leader.NewMemory(1_000)
	must(t, m, &clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: func() *pb.SchedulerConfig {
		c := fsm.DefaultConfig()
		c.MaxSchedules = 1000
		c.DefaultMaxQueued = 0
		return fsm.ConfigToPB(c)
	}()}}})
	var cmds []*clusterpb.Command
	for i := range 5 {
		cmds = append(cmds, tenantCmd(fmt.Sprintf("t%d", i)))
		for j := range 1000 {
			cmds = append(cmds, setCmd(fmt.Sprintf("t%d", i), fmt.Sprintf("s%d", j), "* * * * *", pb.Overlap_OVERLAP_ALLOW, 0))
		}
	}
	must(t, m, cmds...)
	l := NewLoop(m, nil, nil)
	got := pass(t, l, m, 60_000)
	if len(got) != 2 || len(got[0]) != MaxBatch || len(got[1]) != 5000-MaxBatch {
		t.Fatalf("%d entries: %d and %d commands", len(got), len(got[0]), len(got[len(got)-1]))
	}
	if n := m.State().ScheduleTotals(nil); n.Fired != 5000 {
		t.Fatalf("fired %d", n.Fired)
	}
	if got := pass(t, l, m, 119_999); len(got) != 0 {
		t.Fatalf("between the minutes: %d entries", len(got))
	}
}

// TestLoopCatchUp: after a gap with no leader, the slots further behind
// than the catch-up window are spent by one miss, and those within it
// fire, oldest first.
func TestLoopCatchUp(t *testing.T) {
	m := leader.NewMemory(1_000)
	must(t, m, tenantCmd("acme"), setCmd("acme", "s", "@every 1s", pb.Overlap_OVERLAP_ALLOW, 0))
	l := NewLoop(m, nil, nil)
	pass(t, l, m, 2_000)
	// No leader from 2 s to 200 s: slots 3 s .. 139 s are more than 60 s
	// behind, 140 s .. 200 s within it.
	got := pass(t, NewLoop(m, nil, nil), m, 200_000)
	if len(got) != 1 {
		t.Fatalf("%d entries", len(got))
	}
	e := got[0]
	if ms := e[0].GetScheduleMiss(); ms == nil || ms.Count != 137 || ms.ThroughMs != 139_000 {
		t.Fatalf("the miss: %v", e[0])
	}
	if len(e) != 62 || e[1].GetScheduleFire().GetSlotMs() != 140_000 || e[61].GetScheduleFire().GetSlotMs() != 200_000 {
		t.Fatalf("the fires: %d commands, %v .. %v", len(e), e[1], e[len(e)-1])
	}
	s := schedule(t, m, "acme", "s")
	if s.Missed != 137 || s.Fired != 62 || s.LastSlot != 200_000 {
		t.Fatalf("the schedule: %+v", s.Schedule)
	}
}

// TestLoopFollowsTheState: a pause stops the fires and a resume starts
// them after it; a change of spec is read at once; a deleted schedule is
// forgotten; jitter moves a fire, not its slot.
func TestLoopFollowsTheState(t *testing.T) {
	m := leader.NewMemory(1_000)
	must(t, m, tenantCmd("acme"), setCmd("acme", "s", "@every 10s", pb.Overlap_OVERLAP_ALLOW, 0))
	l := NewLoop(m, nil, nil)
	pass(t, l, m, 10_000)
	must(t, m, &clusterpb.Command{Cmd: &clusterpb.Command_SchedulePause{SchedulePause: &clusterpb.SchedulePause{Tenant: "acme", Name: "s"}}})
	if got := pass(t, l, m, 40_000); len(got) != 0 {
		t.Fatalf("paused: %v", got)
	}
	m.SetNow(45_000)
	must(t, m, &clusterpb.Command{Cmd: &clusterpb.Command_SchedulePause{SchedulePause: &clusterpb.SchedulePause{Tenant: "acme", Name: "s", Resume: true}}})
	if got := pass(t, l, m, 49_999); len(got) != 0 {
		t.Fatalf("resumed, before the next slot: %v", got)
	}
	if got := pass(t, l, m, 50_000); len(got) != 1 || len(got[0]) != 1 {
		t.Fatalf("resumed: %v", got)
	}
	// Jitter 5 s: slot 60 s is fired at 60 s plus its jitter.
	must(t, m, setCmd("acme", "s", "@every 10s", pb.Overlap_OVERLAP_ALLOW, 5_000))
	at := 60_000 + sfq.Time(fsm.ScheduleJitter("acme", "s", 60_000, 5_000))
	if got := pass(t, l, m, at-1); len(got) != 0 {
		t.Fatalf("before the jitter: %v", got)
	}
	got := pass(t, l, m, at)
	if len(got) != 1 || got[0][0].GetScheduleFire().GetSlotMs() != 60_000 || got[0][0].GetScheduleFire().GetVersion() != 2 {
		t.Fatalf("at the jitter: %v", got)
	}
	must(t, m, &clusterpb.Command{Cmd: &clusterpb.Command_ScheduleDelete{ScheduleDelete: &clusterpb.ScheduleDelete{Tenant: "acme", Name: "s"}}})
	if got := pass(t, l, m, 200_000); len(got) != 0 || len(l.items) != 0 {
		t.Fatalf("deleted: %v, %d items", got, len(l.items))
	}
}

// TestLoopRuns: Run fires what is due and ends with its context.
func TestLoopRuns(t *testing.T) {
	m := leader.NewMemory(1_000)
	must(t, m, tenantCmd("acme"), setCmd("acme", "s", "@every 1s", pb.Overlap_OVERLAP_ALLOW, 0))
	m.SetNow(2_500)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(m, nil, NewMetrics(nil))(ctx)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for schedule(t, m, "acme", "s").LastSlot != 2_000 {
		if time.Now().After(deadline) {
			t.Fatal("the loop fired nothing")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
}
