package rpc

import (
	"fmt"
	"testing"
	"time"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// TestDispatchRateLimitedWake: a tenant alone at rate=2/1s burst=1 with an
// idle worker. The first round gives job 1; the next finds its head held
// by the limit (no proposal: budget 0) and the dispatcher's wake-up is
// exactly the time it is allowed, 500 ms later. A round at that cluster
// time gives job 2, with nothing else in the log in between. All dispatch
// paused: no proposal at all, whatever is eligible.
func TestDispatchRateLimitedWake(t *testing.T) {
	m := newMemHub(t)
	m.propose(&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "a", Tier: pb.Tier_GOLD,
		RateN: 2, RatePeriodMs: 1000, RateBurst: 1}}})
	for range 3 {
		m.submit("a", pb.Size_SM)
	}
	w := m.ready("w1", sfq.SM)
	if !m.h.dispatchRound() {
		t.Fatal("first round assigned nothing")
	}
	if got := fmt.Sprint(sent(w)); got != "[assign 1/1]" {
		t.Fatalf("sent %s", got)
	}
	finish := func(job uint64) {
		m.handle(w, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Started{Started: &pb.JobStarted{Job: job, Attempt: 1}}})
		m.handle(w, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Finished{Finished: &pb.JobFinished{Job: job, Attempt: 1,
			Outcome: pb.Outcome_OK, CpuMs: 1000}}})
		m.handle(w, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Ready{Ready: &pb.Ready{}}})
		sent(w)
	}
	finish(1)
	entries := len(m.mem.Entries())
	m.mem.Advance(100 * time.Millisecond)
	if m.h.dispatchRound() {
		t.Fatal("a round assigned a job the limit holds")
	}
	if n := len(m.mem.Entries()); n != entries {
		t.Fatalf("a round proposed %d entries while the only head was held", n-entries)
	}
	d, ok := m.h.rateWake()
	if !ok || d != 400*time.Millisecond {
		t.Fatalf("wake in %v %v, want 400ms", d, ok)
	}
	m.mem.Advance(d)
	if _, ok := m.h.rateWake(); ok {
		t.Fatal("a due wake-up is armed again (the loop would spin)")
	}
	if !m.h.dispatchRound() {
		t.Fatal("no job at the rate-eligible time")
	}
	if got := fmt.Sprint(sent(w)); got != "[assign 2/1]" {
		t.Fatalf("sent %s", got)
	}
	finish(2)
	m.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Pause{Pause: &clusterpb.Pause{All: true}}})
	m.mem.Advance(time.Second)
	entries = len(m.mem.Entries())
	if m.h.dispatchRound() || len(m.mem.Entries()) != entries {
		t.Fatal("a round proposed a dispatch while all dispatch is paused")
	}
	m.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Pause{Pause: &clusterpb.Pause{All: true, Resume: true}}})
	if !m.h.dispatchRound() {
		t.Fatal("no job after resuming all dispatch")
	}
	if got := fmt.Sprint(sent(w)); got != "[assign 3/1]" {
		t.Fatalf("sent %s", got)
	}
}

// TestTenantLevelEventToPB: a paused event (job 0) names its group in
// group, not in worker_id.
func TestTenantLevelEventToPB(t *testing.T) {
	ev := fsm.Event{Seq: 3}
	ev.Kind, ev.Worker = fsm.EvPaused, "eu"
	got := EventToPB(&ev, "acme")
	if got.Kind != "paused" || got.JobId != 0 || got.Group != "eu" || got.WorkerId != "" || got.Tenant != "acme" {
		t.Errorf("event %v", got)
	}
	ev.Kind, ev.Worker = fsm.EvAssigned, "w1"
	if got := EventToPB(&ev, "acme"); got.WorkerId != "w1" || got.Group != "" {
		t.Errorf("assigned event %v", got)
	}
}

// TestDispatchRateDueSpendsNoCredit: when a rate limit allows its tenant
// again but that tenant has nothing queued (another's jobs are queued,
// paused), one round asks and gets nothing, the next asks nothing (no
// entry per change), and the worker's unspent credit gets a job once one
// is eligible.
func TestDispatchRateDueSpendsNoCredit(t *testing.T) {
	m := newMemHub(t)
	m.propose(&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "a", Tier: pb.Tier_GOLD,
		RateN: 1, RatePeriodMs: 1000, RateBurst: 1}}}, tenant("b", pb.Tier_GOLD))
	m.submit("a", pb.Size_SM)
	s, err := m.h.open("w1", sfq.SM, "")
	if err != nil {
		t.Fatal(err)
	}
	m.handle(s, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Ready{Ready: &pb.Ready{Credit: 1}}})
	if !m.h.dispatchRound() || fmt.Sprint(sent(s)) != "[assign 1/1]" {
		t.Fatal("job 1 was not assigned")
	}
	m.handle(s, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Started{Started: &pb.JobStarted{Job: 1, Attempt: 1}}})
	m.handle(s, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Finished{Finished: &pb.JobFinished{Job: 1, Attempt: 1, Outcome: pb.Outcome_OK, CpuMs: 10}}})
	m.handle(s, &pb.WorkerMessage{Msg: &pb.WorkerMessage_Ready{Ready: &pb.Ready{Credit: 2}}})
	sent(s)
	m.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Pause{Pause: &clusterpb.Pause{Tenant: "b"}}})
	m.submit("b", pb.Size_SM)
	m.mem.Advance(2 * time.Second) // a's limit allows it again; a has nothing queued
	entries := len(m.mem.Entries())
	if m.h.dispatchRound() {
		t.Fatal("a job was assigned")
	}
	if m.h.dispatchRound(); len(m.mem.Entries()) != entries+1 {
		t.Fatalf("%d entries for two rounds, want 1", len(m.mem.Entries())-entries)
	}
	m.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Pause{Pause: &clusterpb.Pause{Tenant: "b", Resume: true}}})
	if !m.h.dispatchRound() || fmt.Sprint(sent(s)) != "[assign 2/1]" {
		t.Fatal("the unspent credit got no job")
	}
}
