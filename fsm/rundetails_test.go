package fsm

import (
	"bufio"
	"bytes"
	"testing"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// runOnce dispatches job 1's next attempt to w1, starts it and applies
// fin for it (job and attempt filled in).
func (h *harness) runOnce(fin *clusterpb.Finished) {
	h.t.Helper()
	d := h.one(dispatch("w1", uint64(h.index)+1))
	if !d.Assigned {
		h.t.Fatalf("dispatch: %+v", d)
	}
	h.one(started(uint64(d.Job), d.Attempt, "w1"))
	fin.Job, fin.Attempt, fin.WorkerId = uint64(d.Job), d.Attempt, "w1"
	if r := h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: fin}}); r.Code != OK {
		h.t.Fatalf("finish: %+v", r)
	}
}

// TestRunDetails: at level 7 a Finished's CPU source and failure are kept
// on the job, an OOM-killed run is retried like any failed run with the
// event reason oom_killed, and the state is written as version 10, which
// reads back to the same bytes (and level). At level 6 Apply reads
// neither, as the builds before them.
func TestRunDetails(t *testing.T) {
	for _, level := range []uint32{Level6, Level7} {
		h := &harness{t: t, f: newAt(level), now: 1_000}
		h.one(tenant("a", pb.Tier_GOLD))
		h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "a", Size: pb.Size_MD, EstCostMs: 100, MaxAttempts: 3}}})
		h.runOnce(&clusterpb.Finished{Outcome: pb.Outcome_FAILED, CpuMs: 40, ExitCode: -1, CpuSource: pb.CpuSource_CPU_SOURCE_CGROUP, Failure: pb.RunFailure_OOM_KILLED})
		j, _ := h.job(1)
		wantSrc, wantFail, kinds, version := sfq.CPUFromCgroup, sfq.FailureOOMKilled, "1:queued 1:assigned 1:started 1:requeued:oom_killed", stateVersionLevel7
		if level == Level6 {
			wantSrc, wantFail, kinds, version = sfq.CPUUnknown, sfq.FailureNone, "1:queued 1:assigned 1:started 1:requeued:run_failed", stateVersionQuotas
		}
		if j.State != sfq.Queued || j.Failures != 1 || j.Result == nil || j.Result.CPUSource != wantSrc || j.Result.Failure != wantFail {
			t.Fatalf("level %d: job %s, %d failures, result %+v; want queued, 1 failure, %v %v", level, j.State, j.Failures, j.Result, wantSrc, wantFail)
		}
		if got := eventKinds(h.f); got != kinds {
			t.Errorf("level %d: events %s, want %s", level, got, kinds)
		}
		// A completed run: its source is kept, a failure is not.
		h.runOnce(&clusterpb.Finished{Outcome: pb.Outcome_OK, CpuMs: 50, CpuSource: pb.CpuSource_CPU_SOURCE_PROC, Failure: pb.RunFailure_OOM_KILLED})
		if j, _ = h.job(1); j.State != sfq.Completed || j.Result.Failure != sfq.FailureNone {
			t.Fatalf("level %d: after a completed run: %s %+v", level, j.State, j.Result)
		}
		if level == Level7 && j.Result.CPUSource != sfq.CPUFromProc {
			t.Errorf("completed run's CPU source %v, want proc", j.Result.CPUSource)
		}
		v, _ := h.f.Freeze()
		if got := v.StateVersion(); got != version {
			t.Fatalf("level %d: state version %d, want %d", level, got, version)
		}
		b := encodeFSM(v)
		n := New()
		if err := n.Restore(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(b))), h.index); err != nil {
			t.Fatalf("level %d: restore: %v", level, err)
		}
		v2, _ := n.Freeze()
		if !bytes.Equal(encodeFSM(v2), b) {
			t.Fatalf("level %d: the restored state encodes differently", level)
		}
		if rj, _ := n.sched.Job(1); *rj.Result != *j.Result || n.Level() != level {
			t.Errorf("level %d: restored result %+v at level %d, want %+v", level, rj.Result, n.Level(), j.Result)
		}
	}
}

// TestRunDetailsUnsetKeepState: at level 6 a run reported without a CPU
// source or failure (a worker of an earlier build) leaves the state as
// before they existed: version 8. (At level 7 every state is version 10,
// whatever it holds: TestRunDetails.)
func TestRunDetailsUnsetKeepState(t *testing.T) {
	h := &harness{t: t, f: newAt(Level6), now: 1_000}
	h.one(tenant("a", pb.Tier_GOLD))
	h.one(submit("a", "", 100, ""))
	h.runOnce(&clusterpb.Finished{Outcome: pb.Outcome_FAILED, CpuMs: 40, ExitCode: 3})
	v, _ := h.f.Freeze()
	if got := v.StateVersion(); got != stateVersionQuotas {
		t.Fatalf("state version %d, want %d", got, stateVersionQuotas)
	}
	if got := eventKinds(h.f); got != "1:queued 1:assigned 1:started 1:requeued:run_failed" {
		t.Errorf("events %s", got)
	}
}

// TestRunDetailsRefused: at level 7 a CPU source or failure this build
// does not know is refused (the edge refuses it first), and nothing
// changes.
func TestRunDetailsRefused(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("a", pb.Tier_GOLD))
	h.one(submit("a", "", 100, ""))
	d := h.one(dispatch("w1", 1))
	h.one(started(uint64(d.Job), d.Attempt, "w1"))
	before, _ := h.f.Hash()
	for _, fin := range []*clusterpb.Finished{
		{CpuSource: 7},
		{Failure: 9},
	} {
		fin.Job, fin.Attempt, fin.WorkerId, fin.Outcome = uint64(d.Job), d.Attempt, "w1", pb.Outcome_FAILED
		if r := h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: fin}}); r.Code != Invalid {
			t.Errorf("finish %v: %+v, want refused as invalid", fin, r)
		}
	}
	if after, _ := h.f.Hash(); after != before {
		t.Error("a refused finish changed the state")
	}
}

// TestLevel7ReadBack: a state at level 7 that holds no run's details yet
// reads back at level 7, so that a node restored from it (a follower
// caught up by snapshot, a replay of a data directory) applies the next
// run's report as the node that wrote it: the same state, the same hash.
func TestLevel7ReadBack(t *testing.T) {
	h := &harness{t: t, f: NewAtLevel(Level7), now: 1_000}
	h.one(tenant("a", pb.Tier_GOLD))
	h.one(submit("a", "", 100, ""))
	d := h.one(dispatch("w1", 1))
	h.one(started(uint64(d.Job), d.Attempt, "w1"))
	v, _ := h.f.Freeze()
	n := New()
	if err := n.Restore(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(encodeFSM(v)))), h.index); err != nil {
		t.Fatal(err)
	}
	if n.Level() != Level7 {
		t.Fatalf("restored at level %d, want 7", n.Level())
	}
	twin := &harness{t: t, f: n, index: h.index, now: h.now}
	fin := &clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: uint64(d.Job), Attempt: d.Attempt, WorkerId: "w1", Outcome: pb.Outcome_FAILED,
		CpuMs: 40, ExitCode: -1, CpuSource: pb.CpuSource_CPU_SOURCE_CGROUP, Failure: pb.RunFailure_OOM_KILLED}}}
	h.one(fin)
	twin.one(fin)
	a, _ := h.f.Hash()
	b, _ := n.Hash()
	if a != b {
		t.Fatal("the restored node and the one that wrote the state differ after the same report")
	}
}
