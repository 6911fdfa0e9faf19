package leader

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/sfq"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newMemory(t *testing.T, adjust func(*fsm.Config)) *Memory {
	t.Helper()
	cfg := fsm.DefaultConfig()
	cfg.Sched.AckTimeoutMs, cfg.Sched.LeaseTimeoutMs = 2_000, 30_000
	if adjust != nil {
		adjust(&cfg)
	}
	m, err := NewConfigured(cfg, 5_000_000)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func must(t *testing.T, m *Memory, cmds ...*clusterpb.Command) []fsm.Result {
	t.Helper()
	res, err := m.Propose(context.Background(), cmds)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Code != fsm.OK {
			t.Fatalf("command %d refused: %s", i, r.Msg)
		}
	}
	return res
}

// TestExpireRunTimeout: a started run over its own timeout is expired with
// kind timeout at its deadline and not a millisecond before, once.
func TestExpireRunTimeout(t *testing.T) {
	m := newMemory(t, nil)
	must(t, m, &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_SILVER}}})
	job := must(t, m, &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1000, TimeoutMs: 60_000}}})[0].Job
	if r := must(t, m, &clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: "w1", Size: pb.Size_SM}}})[0]; !r.Assigned || r.Job != job {
		t.Fatalf("dispatch %+v", r)
	}
	must(t, m, &clusterpb.Command{Cmd: &clusterpb.Command_Started{Started: &clusterpb.Started{Job: uint64(job), Attempt: 1, WorkerId: "w1"}}})
	start, _ := m.ClusterNow()
	met, log := NewDeadlineMetrics(nil), hclog.NewNullLogger()
	// Heartbeats keep the lease; only the run's own timeout is left.
	for range 3 {
		m.Advance(19_999 * time.Millisecond)
		must(t, m, &clusterpb.Command{Cmd: &clusterpb.Command_Heartbeats{Heartbeats: &clusterpb.HeartbeatBatch{Heartbeats: []*clusterpb.Heartbeat{{Job: uint64(job), Attempt: 1, WorkerId: "w1"}}}}})
	}
	m.Advance(2 * time.Millisecond)
	if now, _ := m.ClusterNow(); now != start+59_999 {
		t.Fatalf("cluster time %d", now-start)
	}
	expire := func() int {
		now, _ := m.ClusterNow()
		n, err := ExpireDue(context.Background(), m, now, log, met)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := expire(); n != 0 {
		t.Fatalf("expired %d a millisecond before the timeout", n)
	}
	m.Advance(time.Millisecond)
	if n := expire(); n != 1 {
		t.Fatalf("expired %d at the timeout, want 1", n)
	}
	for kind, want := range map[string]float64{"ack": 0, "lease": 0, "timeout": 1} {
		if got := testutil.ToFloat64(met.Expiries(kind)); got != want {
			t.Errorf("%s expiries %v, want %v", kind, got, want)
		}
	}
	// The run is told to stop (its worker gets the cancel order); a
	// second pass expires nothing again.
	if j, _, _ := m.State().Job(job); j.Cancel != sfq.CancelTimeout {
		t.Fatalf("job's cancel is %v after its timeout, want timeout", j.Cancel)
	}
	if n := expire(); n != 0 {
		t.Fatalf("a second pass expired %d", n)
	}
}

// TestPruneOnce: nothing is proposed while nothing is due; a cancelled
// job (a dead letter) past its retention is pruned by one Prune entry.
func TestPruneOnce(t *testing.T) {
	m := newMemory(t, func(c *fsm.Config) { c.JobRetentionMs, c.DeadLetterRetentionMs = 60_000, 60_000 })
	must(t, m, &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_SILVER}}})
	job := must(t, m, &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1000}}})[0].Job
	must(t, m, &clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Tenant: "acme", Job: uint64(job)}}})
	entries := len(m.Entries())
	if err := PruneOnce(context.Background(), m); err != nil || len(m.Entries()) != entries {
		t.Fatalf("a prune was proposed with nothing due (%v)", err)
	}
	m.Advance(61 * time.Second)
	must(t, m, &clusterpb.Command{Cmd: &clusterpb.Command_GrantLeases{GrantLeases: &clusterpb.GrantLeases{}}}) // moves the applied clock
	if err := PruneOnce(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	last := m.Entries()[len(m.Entries())-1]
	if len(last) != 1 || last[0].GetPrune() == nil {
		t.Fatalf("the last entry is %v, want one Prune", last)
	}
	if _, _, ok := m.State().Job(job); ok {
		t.Fatal("the job outlived its retention")
	}
}

// TestPruneDeadLetterBounds: a tenant over its dead-letter bound makes a
// Prune due at once, and the Prune drops its oldest dead letters down to
// the bound; completed jobs are not counted.
func TestPruneDeadLetterBounds(t *testing.T) {
	m := newMemory(t, func(c *fsm.Config) { c.DeadLetterMaxJobs = 2 })
	must(t, m, &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_SILVER}}})
	var jobs []sfq.JobID
	for range 4 {
		jobs = append(jobs, must(t, m, &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1000}}})[0].Job)
	}
	for _, id := range jobs[:2] {
		must(t, m, &clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Tenant: "acme", Job: uint64(id)}}})
		m.Advance(time.Second)
	}
	entries := len(m.Entries())
	if err := PruneOnce(context.Background(), m); err != nil || len(m.Entries()) != entries {
		t.Fatalf("a prune was proposed at the bound (%v)", err)
	}
	must(t, m, &clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Tenant: "acme", Job: uint64(jobs[2])}}})
	if err := PruneOnce(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if last := m.Entries()[len(m.Entries())-1]; len(last) != 1 || last[0].GetPrune() == nil {
		t.Fatalf("the last entry is %v, want one Prune", last)
	}
	for i, id := range jobs {
		if _, _, ok := m.State().Job(id); ok != (i != 0) {
			t.Fatalf("job %d kept %v, want only the oldest dead letter (job %d) gone", id, ok, jobs[0])
		}
	}
}

// TestMemoryNotLeader: a Memory that does not lead proposes nothing and
// has no cluster time, as a follower.
func TestMemoryNotLeader(t *testing.T) {
	m := newMemory(t, nil)
	m.SetLeading(false)
	if _, err := m.Propose(context.Background(), []*clusterpb.Command{{Cmd: &clusterpb.Command_Prune{Prune: &clusterpb.Prune{}}}}); !errors.Is(err, raftnode.ErrNotLeader) {
		t.Fatalf("Propose: %v, want ErrNotLeader", err)
	}
	if _, ok := m.ClusterNow(); ok {
		t.Fatal("a follower has cluster time")
	}
	if n, err := ExpireDue(context.Background(), m, 1<<40, hclog.NewNullLogger(), nil); n != 0 || err != nil {
		t.Fatalf("expiry with nothing due: %d %v", n, err)
	}
}

// TestLoopsStopWithLeadership: the pruner, the deadlines and the delays loops return when
// their context ends (goleak checks nothing is left).
func TestLoopsStopWithLeadership(t *testing.T) {
	m := newMemory(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 3)
	for _, loop := range []raftnode.LeaderLoop{Pruner(m, time.Millisecond, hclog.NewNullLogger()), Deadlines(m, hclog.NewNullLogger(), nil), Delays(m, hclog.NewNullLogger())} {
		go func() { loop(ctx); done <- struct{}{} }()
	}
	time.Sleep(30 * time.Millisecond) // let both loops tick at least once
	cancel()
	for range 3 {
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("a loop outlived its leadership")
		}
	}
}
