package leader

import (
	"context"
	"testing"
	"time"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// tickAt moves m to start+at and runs one pass of the clock loop.
func tickAt(t *testing.T, m *Memory, start sfq.Time, at time.Duration) (bool, time.Duration) {
	t.Helper()
	m.SetNow(start + sfq.Time(at.Milliseconds()))
	ticked, wait, err := TickOnce(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	return ticked, wait
}

// TestClockTicksIdle: on an idle cluster the leader commits a tick, an
// entry without a command, each clock_tick exactly (not a millisecond
// before), so that the applied clock is never more than clock_tick behind
// the leader's: the most a crash of the leader would lose.
func TestClockTicksIdle(t *testing.T) {
	m := newMemory(t, nil)
	start, _ := m.ClusterNow()
	entries := len(m.Entries())
	var at []time.Duration
	for step := time.Duration(0); step <= 20*time.Second; step += 100 * time.Millisecond {
		ticked, wait := tickAt(t, m, start, step)
		if ticked {
			at = append(at, step)
		}
		clock, _ := m.State().Clock()
		if behind := time.Duration(start+sfq.Time(step.Milliseconds())-clock) * time.Millisecond; behind >= time.Second {
			t.Fatalf("at %s the applied clock is %s behind", step, behind)
		}
		if !ticked && wait != time.Second-step%time.Second {
			t.Fatalf("at %s the loop waits %s", step, wait)
		}
	}
	if len(at) != 20 {
		t.Fatalf("%d ticks in 20 s: %v", len(at), at)
	}
	for i, a := range at {
		if a != time.Duration(i+1)*time.Second {
			t.Fatalf("tick %d at %s, want %s", i, a, time.Duration(i+1)*time.Second)
		}
	}
	got := m.Entries()[entries:]
	if len(got) != 20 {
		t.Fatalf("%d entries, want 20 ticks", len(got))
	}
	for i, e := range got {
		if len(e) != 0 {
			t.Fatalf("tick %d carries %d commands", i, len(e))
		}
	}
	// 999 ms after the last tick: none; at 1 s: one.
	if ticked, wait := tickAt(t, m, start, 20*time.Second+999*time.Millisecond); ticked || wait != time.Millisecond {
		t.Fatalf("999 ms after a tick: ticked %v, wait %s", ticked, wait)
	}
	if ticked, _ := tickAt(t, m, start, 21*time.Second); !ticked {
		t.Fatal("1 s after a tick: none")
	}
}

// TestClockTicksBusy: while entries are stamped more often than
// clock_tick, the leader adds none; a shorter clock_tick set by the
// configuration takes effect at the next pass; a node that does not lead
// proposes nothing.
func TestClockTicksBusy(t *testing.T) {
	m := newMemory(t, nil)
	start, _ := m.ClusterNow()
	must(t, m, &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_SILVER}}})
	for step := 100 * time.Millisecond; step <= 60*time.Second; step += 100 * time.Millisecond {
		if step%(900*time.Millisecond) == 0 {
			m.SetNow(start + sfq.Time(step.Milliseconds()))
			must(t, m, delayed("acme", 0, 0))
		}
		if ticked, _ := tickAt(t, m, start, step); ticked {
			t.Fatalf("a tick at %s, 900 ms apart entries", step)
		}
	}

	cfg := fsm.ConfigToPB(m.State().Config())
	cfg.ClockTickMs = 250
	m.SetNow(start + 60_000)
	must(t, m, &clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: cfg}}})
	if ticked, wait := tickAt(t, m, start, 60*time.Second+249*time.Millisecond); ticked || wait != time.Millisecond {
		t.Fatalf("249 ms idle under a 250 ms tick: ticked %v, wait %s", ticked, wait)
	}
	if ticked, _ := tickAt(t, m, start, 60*time.Second+250*time.Millisecond); !ticked {
		t.Fatal("250 ms idle under a 250 ms tick: none")
	}

	m.SetLeading(false)
	entries := len(m.Entries())
	if ticked, _ := tickAt(t, m, start, 2*time.Minute); ticked || len(m.Entries()) != entries {
		t.Fatal("a node that does not lead ticked")
	}
}
