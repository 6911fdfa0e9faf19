package leader

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

func delayed(tenant string, delayMs, expireMs int64) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: tenant, Size: pb.Size_SM, EstCostMs: 1000, DelayMs: delayMs, ExpireMs: expireMs}}}
}

func jobState(t *testing.T, m *Memory, id sfq.JobID) sfq.State {
	t.Helper()
	j, _, ok := m.State().Job(id)
	if !ok {
		t.Fatalf("job %d is gone", id)
	}
	return j.State
}

// TestReleaseDue: nothing is released before its due time; at it, one
// entry releases every due job in one batched Release and expires every
// job past its expire_at (a scheduled one whose expiry came first is
// expired, not released); a second pass finds nothing.
func TestReleaseDue(t *testing.T) {
	m := newMemory(t, nil)
	must(t, m, &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_SILVER}}})
	start, _ := m.ClusterNow()
	var ids []sfq.JobID
	for _, c := range []*clusterpb.Command{delayed("acme", 1000, 0), delayed("acme", 1000, 0), delayed("acme", 3000, 0), delayed("acme", 0, 2000), delayed("acme", 2500, 2600)} {
		ids = append(ids, must(t, m, c)[0].Job)
	}
	log := hclog.NewNullLogger()
	pass := func(at sfq.Time) (int, int) {
		t.Helper()
		m.SetNow(start + at)
		r, e, err := ReleaseDue(context.Background(), m, start+at, log)
		if err != nil {
			t.Fatal(err)
		}
		return r, e
	}
	if r, e := pass(999); r != 0 || e != 0 {
		t.Fatalf("at 999 ms: released %d, expired %d", r, e)
	}
	entries := len(m.Entries())
	if r, e := pass(1000); r != 2 || e != 0 {
		t.Fatalf("at 1000 ms: released %d, expired %d", r, e)
	}
	if got := m.Entries()[entries]; len(got) != 1 || len(got[0].GetRelease().GetJobs()) != 2 {
		t.Fatalf("the release entry is %v", got)
	}
	if r, e := pass(1000); r != 0 || e != 0 {
		t.Fatalf("second pass: released %d, expired %d", r, e)
	}
	if r, e := pass(2000); r != 0 || e != 1 || jobState(t, m, ids[3]) != sfq.Expired {
		t.Fatalf("at 2000 ms: released %d, expired %d", r, e)
	}
	// Job 5 was due at 2500 but is released only from 2500 on; at 2700
	// its expiry (2600) has passed: it is expired, never released.
	if r, e := pass(2700); r != 0 || e != 1 || jobState(t, m, ids[4]) != sfq.Expired {
		t.Fatalf("at 2700 ms: released %d, expired %d, job 5 %s", r, e, jobState(t, m, ids[4]))
	}
	if r, e := pass(3000); r != 1 || e != 0 {
		t.Fatalf("at 3000 ms: released %d, expired %d", r, e)
	}
	for _, id := range ids[:3] {
		if s := jobState(t, m, id); s != sfq.Queued {
			t.Errorf("job %d is %s", id, s)
		}
	}
	if _, ok := m.State().NextDelayWake(); ok {
		t.Fatal("a wake is left")
	}
}

// TestReleaseTwiceAfterFailover: the release a deposed leader proposed
// and the one its successor proposes for the same jobs both reach the
// log; the second is refused job by job, so each job is released once
// (one released event each).
func TestReleaseTwiceAfterFailover(t *testing.T) {
	m := newMemory(t, nil)
	must(t, m, &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_SILVER}}})
	for range 3 {
		must(t, m, delayed("acme", 1000, 0))
	}
	m.Advance(time.Second)
	now, _ := m.ClusterNow()
	rel, _ := m.State().DueDelays(now, 10)
	old := &clusterpb.Command{Cmd: &clusterpb.Command_Release{Release: &clusterpb.Release{Jobs: []uint64{uint64(rel[0]), uint64(rel[1]), uint64(rel[2])}}}}
	res, err := m.Propose(context.Background(), []*clusterpb.Command{old})
	if err != nil || res[0].Count != 3 {
		t.Fatalf("first release: %+v %v", res, err)
	}
	res, err = m.Propose(context.Background(), []*clusterpb.Command{old})
	if err != nil || res[0].Count != 0 || res[0].Code != fsm.FailedPrecondition {
		t.Fatalf("second release: %+v %v", res, err)
	}
	released := 0
	m.State().Events(0, func(ev *fsm.Event) bool {
		if ev.Kind == fsm.EvReleased {
			released++
		}
		return true
	})
	if released != 3 {
		t.Fatalf("%d released events, want 3", released)
	}
	// The new leader's pass finds nothing left to release.
	if r, e, err := ReleaseDue(context.Background(), m, now, hclog.NewNullLogger()); r != 0 || e != 0 || err != nil {
		t.Fatalf("new leader: %d %d %v", r, e, err)
	}
}

// TestDelaysLoopReleasesOnTime: the loop, running, releases a job within
// its poll of the due time and not before; after a lost leadership (the
// loop stops) a new loop picks up where it left off.
func TestDelaysLoopReleasesOnTime(t *testing.T) {
	m := newMemory(t, nil)
	must(t, m, &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_SILVER}}})
	a := must(t, m, delayed("acme", 10_000, 0))[0].Job
	b := must(t, m, delayed("acme", 20_000, 0))[0].Job
	run := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { Delays(m, hclog.NewNullLogger())(ctx); close(done) }()
		return func() { cancel(); <-done }
	}
	waitState := func(id sfq.JobID, want sfq.State) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for jobState(t, m, id) != want {
			if time.Now().After(deadline) {
				t.Fatalf("job %d is %s, want %s", id, jobState(t, m, id), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	stop := run()
	m.Advance(9_999 * time.Millisecond)
	time.Sleep(3 * delayPoll) // the loop passes at least twice
	if s := jobState(t, m, a); s != sfq.Scheduled {
		t.Fatalf("job %d is %s a millisecond before its due time", a, s)
	}
	m.Advance(time.Millisecond)
	waitState(a, sfq.Queued)
	stop()
	// Failover: a new leader's loop releases the next one.
	m.Advance(10 * time.Second)
	stop = run()
	waitState(b, sfq.Queued)
	stop()
}
