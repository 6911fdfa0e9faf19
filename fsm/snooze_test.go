package fsm

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// TestSnooze: at level 7 a run that ends snoozed sends its job back
// through scheduled for the snooze with the event reason snoozed, its
// failures unchanged; the max_snoozes-th snooze in a row ends it failed,
// snoozed_too_often. The count survives a snapshot. Below level 7 a
// SNOOZED outcome and max_snoozes are refused, naming the level, and
// nothing changes.
func TestSnooze(t *testing.T) {
	h := &harness{t: t, f: newAt(Level7), now: 1_000}
	cfg := DefaultConfig()
	cfg.Sched.MaxSnoozes = 2
	if r := h.one(&clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: ConfigToPB(cfg)}}}); r.Code != OK {
		t.Fatalf("set max_snoozes: %+v", r)
	}
	h.one(tenant("a", pb.Tier_GOLD))
	h.one(submit("a", "", 100, ""))
	h.runOnce(&clusterpb.Finished{Outcome: pb.Outcome_SNOOZED, CpuMs: 40, SnoozeMs: 5_000})
	j, _ := h.job(1)
	if j.State != sfq.Scheduled || j.Failures != 0 || j.DueAt() != h.now+5_000 || j.Result.Snoozes != 1 || j.CPUMs != 40 {
		t.Fatalf("after a snooze: %s, %d failures, due %d (now %d), result %+v", j.State, j.Failures, j.DueAt(), h.now, j.Result)
	}
	// The count survives a snapshot and a restore.
	v, _ := h.f.Freeze()
	b := encodeFSM(v)
	n := New()
	if err := n.Restore(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(b))), h.index); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if v2, _ := n.Freeze(); !bytes.Equal(encodeFSM(v2), b) {
		t.Fatal("the restored state encodes differently")
	}
	h.now += 5_000
	if r := h.one(releaseCmd("", false, 1)); r.Code != OK {
		t.Fatalf("release: %+v", r)
	}
	h.runOnce(&clusterpb.Finished{Outcome: pb.Outcome_SNOOZED, CpuMs: 40, SnoozeMs: 5_000})
	if j, _ = h.job(1); j.State != sfq.Failed || j.Result.Snoozes != 2 {
		t.Fatalf("after the second snooze in a row: %s, result %+v; want failed", j.State, j.Result)
	}
	want := "1:queued 1:assigned 1:started 1:scheduled:snoozed 1:released 1:assigned 1:started 1:failed:snoozed_too_often"
	if got := eventKinds(h.f); got != want {
		t.Errorf("events\n %s\nwant\n %s", got, want)
	}

	// Below level 7: refused, naming the field and the level.
	h6 := &harness{t: t, f: newAt(Level6), now: 1_000}
	h6.one(tenant("a", pb.Tier_GOLD))
	h6.one(submit("a", "", 100, ""))
	d := h6.one(dispatch("w1", 1))
	h6.one(started(uint64(d.Job), d.Attempt, "w1"))
	before, _ := h6.f.Hash()
	r := h6.one(&clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: uint64(d.Job), Attempt: d.Attempt, WorkerId: "w1", Outcome: pb.Outcome_SNOOZED, SnoozeMs: 5_000}}})
	if r.Code == OK || !strings.Contains(r.Err().Error(), "level 7") {
		t.Errorf("a snooze at level 6: %+v, want refused naming level 7", r)
	}
	cfg6 := DefaultConfig()
	cfg6.Sched.MaxSnoozes = 3
	if r := h6.one(&clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: ConfigToPB(cfg6)}}}); r.Code == OK || !strings.Contains(r.Err().Error(), "max_snoozes") {
		t.Errorf("max_snoozes at level 6: %+v, want refused naming it", r)
	}
	if after, _ := h6.f.Hash(); after != before {
		t.Error("a refused snooze changed the state")
	}
}

// TestSnoozeBounds: a snooze under 1 s or over 24 h is refused as
// invalid, naming snooze_ms, and changes nothing.
func TestSnoozeBounds(t *testing.T) {
	h := &harness{t: t, f: newAt(Level7), now: 1_000}
	h.one(tenant("a", pb.Tier_GOLD))
	h.one(submit("a", "", 100, ""))
	d := h.one(dispatch("w1", 1))
	h.one(started(uint64(d.Job), d.Attempt, "w1"))
	before, _ := h.f.Hash()
	for _, ms := range []int64{0, 999, 24*3600*1000 + 1, -5} {
		r := h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: uint64(d.Job), Attempt: d.Attempt, WorkerId: "w1", Outcome: pb.Outcome_SNOOZED, SnoozeMs: ms}}})
		if r.Code != Invalid || !strings.Contains(r.Err().Error(), "snooze_ms") {
			t.Errorf("snooze %d ms: %+v, want invalid naming snooze_ms", ms, r)
		}
	}
	if after, _ := h.f.Hash(); after != before {
		t.Error("a refused snooze changed the state")
	}
}
