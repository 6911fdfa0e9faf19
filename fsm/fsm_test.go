package fsm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/raft"
	"pgregory.net/rapid"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// harness applies commands one envelope at a time.
type harness struct {
	t     testing.TB
	f     *FSM
	index uint64
	now   sfq.Time
}

func newHarness(t testing.TB) *harness { return &harness{t: t, f: NewLatest(), now: 1_000} }

// newAt returns an empty state machine at feature level l.
func newAt(l uint32) *FSM {
	f := New()
	f.setLevel(l)
	return f
}

func (h *harness) apply(cmds ...*clusterpb.Command) []Result {
	h.t.Helper()
	h.index++
	res, err := h.f.ApplyEnvelope(h.index, &clusterpb.Envelope{Version: Version, StampMs: int64(h.now), Commands: cmds})
	if err != nil {
		h.t.Fatalf("apply: %v", err)
	}
	return res
}

func (h *harness) one(c *clusterpb.Command) Result { return h.apply(c)[0] }

func tenant(name string, tier pb.Tier) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: name, Tier: tier}}}
}

func submit(tenant, key string, cost int64, payload string) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: tenant, IdempotencyKey: key, Size: pb.Size_MD, EstCostMs: cost, Payload: []byte(payload)}}}
}

func dispatch(worker string, credit uint64) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: worker, Size: pb.Size_MD, Credit: credit}}}
}

func started(job uint64, attempt uint32, worker string) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_Started{Started: &clusterpb.Started{Job: job, Attempt: attempt, WorkerId: worker}}}
}

func finished(job uint64, attempt uint32, worker string, cpu int64) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: job, Attempt: attempt, WorkerId: worker, Outcome: pb.Outcome_OK, CpuMs: cpu}}}
}

func TestDefaultConfigValid(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := ConfigFromPB(ConfigToPB(DefaultConfig())); err != nil {
		t.Fatal(err)
	}
}

func TestIdempotentSubmit(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	r1 := h.one(submit("acme", "k1", 1000, "run a"))
	if r1.Code != OK || !r1.Created || r1.Job != 1 {
		t.Fatalf("first submit: %+v", r1)
	}
	r2 := h.one(submit("acme", "k1", 1000, "run a"))
	if r2.Code != OK || r2.Created || r2.Job != 1 {
		t.Fatalf("repeat: %+v", r2)
	}
	r3 := h.one(submit("acme", "k1", 1000, "run b"))
	if r3.Code != AlreadyExists || !strings.Contains(r3.Msg, `idempotency key "k1"`) {
		t.Fatalf("different content: %+v", r3)
	}
	// Another tenant may use the same key.
	h.one(tenant("beta", pb.Tier_FREE))
	if r := h.one(submit("beta", "k1", 1000, "run a")); !r.Created || r.Job != 2 {
		t.Fatalf("other tenant: %+v", r)
	}
	// No key: no dedupe.
	if a, b := h.one(submit("acme", "", 1000, "x")), h.one(submit("acme", "", 1000, "x")); a.Job == b.Job {
		t.Fatal("keyless submits were deduplicated")
	}
	// The key outlives its job's pruning, then expires with the window.
	cfg := DefaultConfig()
	cfg.JobRetentionMs = 0
	cfg.DeadLetterRetentionMs = 1 // the cancelled job is a dead letter
	cfg.DedupeWindowMs = 60_000
	h.one(&clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: ConfigToPB(cfg)}}})
	h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Tenant: "acme", Job: 1}}})
	h.now += 10
	if r := h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Prune{Prune: &clusterpb.Prune{}}}); r.Count == 0 {
		t.Fatal("nothing pruned")
	}
	if _, ok := h.job(1); ok {
		t.Fatal("job 1 was not pruned")
	}
	if r := h.one(submit("acme", "k1", 1000, "run a")); r.Code != NotFound || r.Created || r.Job != 0 ||
		!strings.HasPrefix(r.Msg, `idempotency key "k1" of tenant "acme" was used for job 1, which no longer exists`) {
		t.Fatalf("the key of a pruned job: %+v (want NOT_FOUND: the key stays taken, and names the job that is gone)", r)
	}
	h.now += 24 * 3600 * 1000
	h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Prune{Prune: &clusterpb.Prune{}}})
	if r := h.one(submit("acme", "k1", 1000, "run a")); !r.Created || r.Job == 1 {
		t.Fatalf("key remembered past its window: %+v", r)
	}
	if err := h.f.Verify(); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) job(id sfq.JobID) (j sfq.Job, ok bool) {
	h.f.Read(func(s *sfq.Scheduler) { j, ok = s.Job(id) })
	return j, ok
}

func TestSubmitValidation(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	cases := []struct {
		cmd  *clusterpb.SubmitJob
		code Code
		msg  string
	}{
		{&clusterpb.SubmitJob{Tenant: "nobody", Size: pb.Size_SM, EstCostMs: 1}, NotFound, `unknown tenant "nobody"`},
		{&clusterpb.SubmitJob{Tenant: "acme", EstCostMs: 1}, Invalid, "size"},
		{&clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 0}, Invalid, "est_cost_ms: must be positive (got 0)"},
		{&clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1, Payload: make([]byte, 2<<20)}, Invalid, "payload: 2097152 bytes, over the cluster's limit of 1048576"},
		{&clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1, IdempotencyKey: strings.Repeat("k", 257)}, Invalid, "idempotency_key: 257 bytes, at most 256"},
	}
	for _, c := range cases {
		r := h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: c.cmd}})
		if r.Code != c.code || !strings.Contains(r.Msg, c.msg) {
			t.Errorf("%v: got %s %q, want %s containing %q", c.cmd, r.Code, r.Msg, c.code, c.msg)
		}
	}
	h.one(&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD, Caps: &pb.Caps{MaxQueued: 1}}}})
	h.one(submit("acme", "", 1, ""))
	if r := h.one(submit("acme", "", 1, "")); r.Code != ResourceExhausted || !strings.Contains(r.Msg, "max_queued") {
		t.Errorf("quota: %+v", r)
	}
}

func TestDispatchRetryAndFencing(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	h.one(submit("acme", "", 1000, ""))
	h.one(submit("acme", "", 1000, ""))
	a := h.one(dispatch("w1", 7))
	if !a.Assigned || a.Job != 1 || a.Attempt != 1 || a.Outcome != sfq.Changed {
		t.Fatalf("dispatch: %+v", a)
	}
	// A retry with the same credit returns the same assignment.
	if b := h.one(dispatch("w1", 7)); !b.Assigned || b.Job != 1 || b.Outcome != sfq.Duplicate {
		t.Fatalf("retry: %+v", b)
	}
	// A new credit while the worker still holds its job is refused.
	if c := h.one(dispatch("w1", 8)); c.Code != FailedPrecondition || !strings.Contains(c.Msg, "still holds job 1") {
		t.Fatalf("second job for a busy worker: %+v", c)
	}
	if r := h.one(started(1, 1, "w2")); r.Outcome != sfq.Stale || r.Code != FailedPrecondition {
		t.Fatalf("start from another worker: %+v", r)
	}
	if r := h.one(started(1, 1, "w1")); r.Outcome != sfq.Changed || r.Code != OK {
		t.Fatalf("start: %+v", r)
	}
	if r := h.one(finished(1, 1, "w1", 900)); r.Outcome != sfq.Changed {
		t.Fatalf("finish: %+v", r)
	}
	if r := h.one(finished(1, 1, "w1", 900)); r.Outcome != sfq.Duplicate || r.Code != OK {
		t.Fatalf("repeat finish: %+v", r)
	}
	if d := h.one(dispatch("w1", 8)); !d.Assigned || d.Job != 2 {
		t.Fatalf("next dispatch: %+v", d)
	}
	h.one(&clusterpb.Command{Cmd: &clusterpb.Command_WorkerDrain{WorkerDrain: &clusterpb.WorkerDrain{WorkerId: "w9", Drain: true}}})
	if r := h.one(dispatch("w9", 1)); r.Code != FailedPrecondition || !strings.Contains(r.Msg, "drained") {
		t.Fatalf("drained worker: %+v", r)
	}
	var billed int64
	h.f.Read(func(s *sfq.Scheduler) { t, _ := s.Tenant("acme"); billed = t.Billing.CPUMs })
	if billed != 900 {
		t.Fatalf("billed %d, want 900 (a repeated Finished is not charged again)", billed)
	}
}

func TestCancelIsTenantScoped(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	h.one(tenant("beta", pb.Tier_GOLD))
	h.one(submit("acme", "", 1000, ""))
	r := h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Tenant: "beta", Job: 1}}})
	missing := h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Tenant: "beta", Job: 99}}})
	if r.Code != NotFound || r.Msg != "job 1 not found" || missing.Msg != "job 99 not found" {
		t.Fatalf("cross-tenant cancel: %+v / %+v", r, missing)
	}
	if r := h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Tenant: "acme", Job: 1}}}); r.Code != OK {
		t.Fatalf("cancel: %+v", r)
	}
	if j, _ := h.job(1); j.State != sfq.Cancelled {
		t.Fatalf("state %s", j.State)
	}
}

func TestEventsOfALifecycle(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	h.one(submit("acme", "", 1000, ""))
	h.one(dispatch("w1", 1))
	h.one(started(1, 1, "w1"))
	h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Job: 1}}})
	h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: 1, Attempt: 1, WorkerId: "w1", Outcome: pb.Outcome_CANCELLED, CpuMs: 5}}})
	var got []string
	first, next := h.f.Events(0, func(ev *Event) bool {
		got = append(got, fmt.Sprintf("%d:%s:%s", ev.Seq, ev.Kind, ev.Reason))
		return true
	})
	want := "1:queued: 2:assigned: 3:started: 4:cancel_requested:requested 5:cancelled:requested"
	if strings.Join(got, " ") != want || first != 1 || next != 6 {
		t.Fatalf("events %v (first %d next %d), want %s", got, first, next, want)
	}
	// Count retention.
	cfg := DefaultConfig()
	cfg.EventRetentionCount = 2
	h.one(&clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: ConfigToPB(cfg)}}})
	h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Prune{Prune: &clusterpb.Prune{}}})
	if first, _ := h.f.Events(0, func(*Event) bool { return true }); first != 4 {
		t.Fatalf("after pruning to 2 events the first is %d", first)
	}
}

func TestSetConfigOrdering(t *testing.T) {
	h := newHarness(t)
	cfg := DefaultConfig()
	cfg.SelfKillAfterMs = 30_000
	r := h.one(&clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: ConfigToPB(cfg)}}})
	if r.Code != Invalid || !strings.Contains(r.Msg, "self_kill_after 30s must be below lease_timeout 30s") {
		t.Fatalf("%+v", r)
	}
	cfg = DefaultConfig()
	cfg.HeartbeatIntervalMs = 25_000
	r = h.one(&clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: ConfigToPB(cfg)}}})
	if r.Code != Invalid || !strings.Contains(r.Msg, "heartbeat_interval 25s must be below self_kill_after 25s") {
		t.Fatalf("%+v", r)
	}
	if h.f.Config() != DefaultConfig() {
		t.Fatal("a refused config was applied")
	}
}

func TestClockIsMonotonic(t *testing.T) {
	h := newHarness(t)
	h.now = 5000
	h.apply()
	h.now = 3000 // an older stamp (a deposed leader's) cannot move time back
	h.apply()
	if c, i := h.f.Clock(); c != 5000 || i != 2 {
		t.Fatalf("clock %d at %d", c, i)
	}
}

func TestFatalEntryLatches(t *testing.T) {
	f := New()
	good, _ := Encode(&clusterpb.Envelope{Version: Version, StampMs: 1, Commands: []*clusterpb.Command{tenant("a", pb.Tier_FREE)}})
	if res := f.Apply(&raft.Log{Index: 1, Data: good}); res.([]Result)[0].Code != OK {
		t.Fatal(res)
	}
	bad, _ := Encode(&clusterpb.Envelope{Version: 99})
	res := f.Apply(&raft.Log{Index: 2, Data: bad})
	var fe *FatalError
	if err, _ := res.(error); !errors.As(err, &fe) || fe.Index != 2 || !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("unknown version: %v", res)
	}
	select {
	case <-f.Fatal():
	default:
		t.Fatal("fatal channel not closed")
	}
	if _, ok := f.Apply(&raft.Log{Index: 3, Data: good}).(*FatalError); !ok {
		t.Fatal("an entry after a fatal one was applied")
	}
	if _, err := f.Freeze(); !errors.As(err, &fe) {
		t.Fatal("a snapshot was allowed after a fatal entry")
	}
	if !strings.Contains(fe.Error(), "log entry 2") {
		t.Fatalf("message %q does not name the index", fe.Error())
	}
	g := New()
	if _, ok := g.Apply(&raft.Log{Index: 7, Data: []byte{0xff, 0xff, 0xff}}).(*FatalError); !ok {
		t.Fatal("garbage was applied")
	}
}

func encodeFSM(v *View) []byte {
	var buf bytes.Buffer
	e := sfq.NewEncoder(&buf)
	v.Encode(e)
	_ = e.Flush() // a bytes.Buffer never fails
	return buf.Bytes()
}

// randomCommand draws one command of any kind against a small world.
func randomCommand(t *rapid.T, jobs uint64) *clusterpb.Command {
	tenants := []string{"a", "b", "c"}
	workers := []string{"w1", "w2", "w3", "w4"}
	job := rapid.Uint64Range(1, max(jobs, 1)).Draw(t, "job")
	attempt := uint32(rapid.IntRange(1, 3).Draw(t, "attempt"))
	worker := rapid.SampledFrom(workers).Draw(t, "worker")
	switch rapid.IntRange(0, 28).Draw(t, "kind") {
	case 25, 26:
		// Pools: refused below level 6.
		pool := rapid.SampledFrom([]string{"", "gpu", "gpu", "eu"}).Draw(t, "pool")
		if rapid.Bool().Draw(t, "pooldispatch") {
			return &clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: worker, Size: pb.Size(rapid.IntRange(1, 3).Draw(t, "wsize")),
				Credit: rapid.Uint64Range(1, 1000).Draw(t, "credit"), Pool: pool}}}
		}
		return &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: rapid.SampledFrom(tenants).Draw(t, "tenant"),
			Size: pb.Size(rapid.IntRange(1, 3).Draw(t, "size")), EstCostMs: rapid.Int64Range(1, 5000).Draw(t, "cost"),
			Group: rapid.SampledFrom([]string{"", "g1"}).Draw(t, "group"), Pool: pool}}}
	case 27:
		name := rapid.SampledFrom([]string{"gpu", "eu"}).Draw(t, "poolname")
		switch rapid.IntRange(0, 3).Draw(t, "poolop") {
		case 0:
			return &clusterpb.Command{Cmd: &clusterpb.Command_PoolSet{PoolSet: &clusterpb.PoolSet{Name: name,
				Weights: new(rapid.SampledFrom([]string{"default", "equal", "a:3,c:9"}).Draw(t, "weights"))}}}
		case 1:
			return &clusterpb.Command{Cmd: &clusterpb.Command_PoolDelete{PoolDelete: &clusterpb.PoolDelete{Name: name}}}
		case 2:
			return &clusterpb.Command{Cmd: &clusterpb.Command_Pause{Pause: &clusterpb.Pause{Pool: name, Resume: rapid.Bool().Draw(t, "resume")}}}
		}
		var burst *uint32
		if rapid.Bool().Draw(t, "burst") {
			burst = new(uint32(rapid.IntRange(0, 2).Draw(t, "burstn")))
		}
		return &clusterpb.Command{Cmd: &clusterpb.Command_SubscriptionSet{SubscriptionSet: &clusterpb.SubscriptionSet{Tenant: rapid.SampledFrom(tenants).Draw(t, "tenant"),
			Pool: rapid.SampledFrom([]string{"default", "gpu"}).Draw(t, "subpool"), Burst: burst}}}
	case 28:
		return &clusterpb.Command{Cmd: &clusterpb.Command_SetFeatureLevel{SetFeatureLevel: &clusterpb.SetFeatureLevel{Level: Level6}}}
	case 15, 16:
		// Delays, expiry and a job's own backoff: refused below level 5.
		sj := &clusterpb.SubmitJob{Tenant: rapid.SampledFrom(tenants).Draw(t, "tenant"), Size: pb.Size(rapid.IntRange(1, 3).Draw(t, "size")),
			EstCostMs: rapid.Int64Range(1, 5000).Draw(t, "cost"), DelayMs: rapid.SampledFrom([]int64{0, 1, 5000, 30_000}).Draw(t, "delay"),
			Group: rapid.SampledFrom([]string{"", "g1"}).Draw(t, "group")}
		if rapid.Bool().Draw(t, "expires") {
			sj.ExpireMs = sj.DelayMs + rapid.Int64Range(1000, 40_000).Draw(t, "expire")
		}
		if rapid.Bool().Draw(t, "ownbackoff") {
			sj.RetryBackoffMs = new(rapid.Int64Range(0, 20_000).Draw(t, "backoff"))
		}
		return &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: sj}}
	case 17:
		jobs := []uint64{job}
		if rapid.Bool().Draw(t, "two") {
			jobs = append(jobs, rapid.Uint64Range(1, max(jobs[0], 1)+1).Draw(t, "job2"))
		}
		return &clusterpb.Command{Cmd: &clusterpb.Command_Release{Release: &clusterpb.Release{Jobs: jobs, Now: rapid.Bool().Draw(t, "now"),
			Tenant: rapid.SampledFrom([]string{"", "a"}).Draw(t, "rtenant")}}}
	case 18:
		if rapid.Bool().Draw(t, "setbackoff") {
			return setConfigWith(func(p *pb.SchedulerConfig) {
				p.RetryBackoffMs = rapid.Int64Range(0, 10_000).Draw(t, "cfgbackoff")
				p.RetryBackoffMaxMs = p.RetryBackoffMs * rapid.Int64Range(1, 4).Draw(t, "cfgmax")
			})
		}
		return &clusterpb.Command{Cmd: &clusterpb.Command_Expire{Expire: &clusterpb.Expire{Job: job, Kind: clusterpb.ExpireKind_TTL}}}
	case 19:
		// Pauses: refused below level 5.
		pt, pg := rapid.SampledFrom([]string{"a", "b", ""}).Draw(t, "ptenant"), rapid.SampledFrom([]string{"", "", "g1"}).Draw(t, "pgroup")
		if pt == "" {
			pg = "" // all dispatch
		}
		return pauseCmd(pt, pg, pt == "", rapid.Bool().Draw(t, "resume"))
	case 20:
		// Rate limits: refused below level 5.
		n := uint32(rapid.IntRange(0, 3).Draw(t, "rate"))
		var period int64
		if n > 0 {
			period = 1000
		}
		if rapid.Bool().Draw(t, "grouprate") {
			return groupRateCmd(rapid.SampledFrom(tenants).Draw(t, "tenant"), "g1", n, period, 0)
		}
		return upsert(&clusterpb.TenantUpsert{Name: rapid.SampledFrom(tenants).Draw(t, "tenant"), Tier: pb.Tier_SILVER, RateN: n, RatePeriodMs: period})
	case 21, 22, 23:
		// Bulk commands: refused below level 5.
		return randomBulk(t, tenants, job)
	case 24:
		cfg := DefaultConfig()
		cfg.JobRetentionMs = 0
		cfg.DeadLetterRetentionMs = rapid.SampledFrom([]int64{1, 5000}).Draw(t, "dlretention")
		cfg.DeadLetterMaxJobs = uint64(rapid.IntRange(1, 3).Draw(t, "dlmax"))
		cfg.DeadLetterMaxBytes = uint64(rapid.IntRange(1, 1000).Draw(t, "dlbytes"))
		return &clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: ConfigToPB(cfg)}}}
	case 13:
		return &clusterpb.Command{Cmd: &clusterpb.Command_SetFeatureLevel{SetFeatureLevel: &clusterpb.SetFeatureLevel{Level: rapid.SampledFrom([]uint32{Level2, Level3, Level4, Level5}).Draw(t, "level")}}}
	case 14:
		// Groups: refused below level 3.
		return &clusterpb.Command{Cmd: &clusterpb.Command_SetGroup{SetGroup: &clusterpb.SetGroup{Tenant: rapid.SampledFrom(tenants).Draw(t, "tenant"),
			Group: rapid.SampledFrom([]string{"g1", "g2"}).Draw(t, "group"), CapKind: clusterpb.GroupCapKind(rapid.IntRange(1, 3).Draw(t, "capkind")),
			Limit: uint32(rapid.IntRange(1, 2).Draw(t, "limit")), AsTenant: rapid.Bool().Draw(t, "astenant")}}}
	case 0, 1, 2:
		return &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: rapid.SampledFrom(tenants).Draw(t, "tenant"),
			IdempotencyKey: rapid.SampledFrom([]string{"", "", "k1", "k2"}).Draw(t, "key"), Size: pb.Size(rapid.IntRange(1, 3).Draw(t, "size")),
			EstCostMs: rapid.Int64Range(1, 5000).Draw(t, "cost"), Group: rapid.SampledFrom([]string{"", "", "g1", "g2"}).Draw(t, "group")}}}
	case 3, 4:
		return &clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: worker, Size: pb.Size(rapid.IntRange(1, 3).Draw(t, "wsize")), Credit: rapid.Uint64Range(1, 1000).Draw(t, "credit")}}}
	case 5:
		return started(job, attempt, worker)
	case 6:
		return &clusterpb.Command{Cmd: &clusterpb.Command_Heartbeats{Heartbeats: &clusterpb.HeartbeatBatch{Heartbeats: []*clusterpb.Heartbeat{{Job: job, Attempt: attempt, WorkerId: worker, CpuMs: 10}}}}}
	case 7:
		return &clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: job, Attempt: attempt, WorkerId: worker, Outcome: pb.Outcome(rapid.IntRange(1, 3).Draw(t, "outcome")), CpuMs: rapid.Int64Range(0, 9000).Draw(t, "cpu")}}}
	case 8:
		return &clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Job: job}}}
	case 9:
		return &clusterpb.Command{Cmd: &clusterpb.Command_Expire{Expire: &clusterpb.Expire{Job: job, Attempt: attempt, Kind: clusterpb.ExpireKind(rapid.IntRange(1, 4).Draw(t, "ekind"))}}}
	case 10:
		return &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: rapid.SampledFrom(tenants).Draw(t, "tenant"),
			Tier: pb.Tier(rapid.IntRange(1, 5).Draw(t, "tier")), Caps: &pb.Caps{MaxRunning: uint32(rapid.IntRange(0, 3).Draw(t, "cap"))},
			ExportMetrics: rapid.Bool().Draw(t, "export"), GroupCap: uint32(rapid.IntRange(0, 2).Draw(t, "groupcap")),
			GroupOrder: pb.GroupOrder(rapid.IntRange(0, 2).Draw(t, "grouporder"))}}}
	case 11:
		// Refused while the tenant has live jobs; a later upsert of the
		// name creates a new tenant.
		return deleteTenant(rapid.SampledFrom(tenants).Draw(t, "tenant"))
	default:
		return &clusterpb.Command{Cmd: &clusterpb.Command_Prune{Prune: &clusterpb.Prune{Limit: 5}}}
	}
}

// checkRestored restores snap, an encoding of a taken after cut entries
// of log, applies the rest of log to it and checks that it ends with a's
// hash.
func checkRestored(t *rapid.T, a *FSM, snap []byte, cut int, log []*clusterpb.Envelope) {
	b := New()
	if err := b.Restore(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(snap))), uint64(cut)); err != nil {
		t.Fatalf("restore: %v", err)
	}
	for i := cut; i < len(log); i++ {
		if _, err := b.ApplyEnvelope(uint64(i+1), log[i]); err != nil {
			t.Fatal(err)
		}
	}
	ha, _ := a.Hash()
	hb, _ := b.Hash()
	if ha != hb {
		t.Fatalf("restored state diverged: %x vs %x", ha, hb)
	}
}

// TestSnapshotRoundTrip: random command streams; at a random point the
// state is frozen and encoded on another goroutine while Apply goes on;
// the encoding equals a synchronous one taken at the freeze; a state
// restored from it, fed the same remaining commands, ends with the same
// hash as the original.
func TestSnapshotRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := newAt(rapid.SampledFrom([]uint32{Level1, Level2, Level3, Level4, Level5}).Draw(t, "level"))
		var log []*clusterpb.Envelope
		n := rapid.IntRange(1, 150).Draw(t, "n")
		cut := rapid.IntRange(0, n).Draw(t, "cut")
		now, ahead := int64(1000), int64(0) // the wall clock runs ahead after each pause
		var frozen *View
		var want []byte
		var wg sync.WaitGroup
		var got []byte
		for i := 0; i < n; i++ {
			if i == cut {
				var err error
				if frozen, err = a.Freeze(); err != nil {
					t.Fatal(err)
				}
				h, _ := a.Hash()
				if h != HashView(frozen) {
					t.Fatal("frozen view hashes differently from the live state")
				}
				wg.Add(1)
				go func() { defer wg.Done(); got = encodeFSM(frozen) }()
			}
			now += rapid.Int64Range(0, 20_000).Draw(t, "dt")
			ahead += rapid.Int64Range(-2, 5_000_000).Draw(t, "pause")
			cmds := []*clusterpb.Command{tenant("a", pb.Tier_GOLD), tenant("b", pb.Tier_FREE), tenant("c", pb.Tier_SILVER)}
			if i > 0 {
				jobs, _ := a.Counts()
				cmds = []*clusterpb.Command{randomCommand(t, uint64(jobs)+1)}
			}
			env := &clusterpb.Envelope{Version: Version, StampMs: now, WallMs: now + ahead, Commands: cmds}
			log = append(log, env)
			if _, err := a.ApplyEnvelope(uint64(i+1), env); err != nil {
				t.Fatal(err)
			}
			if err := a.Verify(); err != nil {
				t.Fatal(err)
			}
		}
		if frozen == nil {
			return
		}
		wg.Wait()
		want = encodeFSM(frozen)
		if !bytes.Equal(got, want) {
			t.Fatal("encoding a frozen view concurrently with Apply differs")
		}
		checkRestored(t, a, got, cut, log)
	})
}

func TestRestoreRefusesBadState(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	h.one(submit("acme", "k", 1000, "p"))
	v, _ := h.f.Freeze()
	good := encodeFSM(v)
	// Truncated.
	f := New()
	if err := f.Restore(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(good[:len(good)-3]))), 2); !errors.Is(err, sfq.ErrCorrupt) {
		t.Fatalf("truncated: %v", err)
	}
	// Unknown version.
	bad := append([]byte{stateVersion + 1}, good[1:]...)
	if err := f.Restore(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(bad))), 2); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("state version %d", stateVersion+1)) {
		t.Fatalf("version: %v", err)
	}
	// A refused state replaces nothing; a good one counts.
	if n := f.Replaced(); n != 0 {
		t.Fatalf("replaced %d times by refused states", n)
	}
	if err := f.Restore(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(good))), 2); err != nil {
		t.Fatal(err)
	}
	if n := f.Replaced(); n != 1 {
		t.Fatalf("replaced %d times, want 1", n)
	}
}

// TestCoalescedEntriesApplyAlike: the leader packs concurrent commands
// into shared entries. A log of coalesced entries must apply to the same
// state hash, with the same result per command, as the same commands each
// in its own entry at the same leader time.
func TestCoalescedEntriesApplyAlike(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		level := rapid.SampledFrom([]uint32{Level1, Level2, Level3, Level4, Level5}).Draw(t, "level")
		one, packed := newAt(level), newAt(level)
		var oneIdx, packedIdx uint64
		now := int64(1000)
		apply := func(f *FSM, idx *uint64, cmds []*clusterpb.Command) []Result {
			*idx++
			res, err := f.ApplyEnvelope(*idx, &clusterpb.Envelope{Version: Version, StampMs: now, Commands: cmds})
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		setup := []*clusterpb.Command{tenant("a", pb.Tier_GOLD), tenant("b", pb.Tier_FREE), tenant("c", pb.Tier_SILVER)}
		apply(packed, &packedIdx, setup)
		for _, c := range setup {
			apply(one, &oneIdx, []*clusterpb.Command{c})
		}
		entries := rapid.IntRange(1, 40).Draw(t, "entries")
		for range entries {
			now += rapid.Int64Range(0, 20_000).Draw(t, "dt")
			jobs, _ := one.Counts()
			var cmds []*clusterpb.Command
			for range rapid.IntRange(1, 12).Draw(t, "commands") {
				cmds = append(cmds, randomCommand(t, uint64(jobs)+uint64(len(cmds))+1))
			}
			got := apply(packed, &packedIdx, cmds)
			for i, c := range cmds {
				want := apply(one, &oneIdx, []*clusterpb.Command{c})[0]
				if fmt.Sprint(got[i]) != fmt.Sprint(want) {
					t.Fatalf("command %d of a coalesced entry: result %+v, alone %+v", i, got[i], want)
				}
			}
		}
		ho, _ := one.Hash()
		hp, _ := packed.Hash()
		if ho != hp {
			t.Fatalf("coalesced log hashes to %x, one command per entry to %x", hp, ho)
		}
		if err := packed.Verify(); err != nil {
			t.Fatal(err)
		}
	})
}

func deleteTenant(name string) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_TenantDelete{TenantDelete: &clusterpb.TenantDelete{Name: name}}}
}

func cancelJob(tenant string, job uint64) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Tenant: tenant, Job: job}}}
}

// TestRecreatedTenantStartsEmpty: a tenant deleted and created again under
// the same name is a new tenant. The old incarnation's idempotency keys,
// jobs and counters are never visible through the new one.
func TestRecreatedTenantStartsEmpty(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	if r := h.one(submit("acme", "K", 1000, "old")); r.Code != OK || !r.Created || r.Job != 1 {
		t.Fatalf("first submit: %+v", r)
	}
	if r := h.one(cancelJob("acme", 1)); r.Code != OK {
		t.Fatalf("cancel: %+v", r)
	}
	if r := h.one(deleteTenant("acme")); r.Code != OK {
		t.Fatalf("delete: %+v", r)
	}
	if r := h.one(tenant("acme", pb.Tier_GOLD)); r.Code != OK || !r.Created {
		t.Fatalf("re-create: %+v", r)
	}
	// The same key and content as the old incarnation's job: a new job.
	if r := h.one(submit("acme", "K", 1000, "old")); r.Code != OK || !r.Created || r.Job != 2 {
		t.Fatalf("submit with the old key: %+v, want a new job 2", r)
	}
	var listed []sfq.JobID
	var old, oldAdmin, fresh bool
	var usage sfq.Billing
	h.f.Read(func(s *sfq.Scheduler) {
		s.TenantJobs("acme", 0, func(j *sfq.Job) bool { listed = append(listed, j.ID); return true })
		_, old = s.TenantJob("acme", 1)
		_, oldAdmin = s.TenantJob("", 1)
		_, fresh = s.TenantJob("acme", 2)
		tn, _ := s.Tenant("acme")
		usage = tn.Billing
	})
	if fmt.Sprint(listed) != "[2]" {
		t.Errorf("acme lists jobs %v, want [2]", listed)
	}
	if old || !oldAdmin || !fresh {
		t.Errorf("job 1 through acme's scope: %v (want false); through the admin's: %v (want true); job 2 through acme's: %v (want true)", old, oldAdmin, fresh)
	}
	if usage != (sfq.Billing{Submitted: 1}) {
		t.Errorf("the new acme's counters %+v, want only its one submit", usage)
	}
	// Cancelling the old job through the new tenant: the same NotFound as
	// for any job that is not its own.
	if r := h.one(cancelJob("acme", 1)); r.Code != NotFound || r.Msg != "job 1 not found" {
		t.Errorf("cancel of the old job through the new tenant: %+v", r)
	}
	// The old key is the new incarnation's own now: a repeat dedupes to job 2.
	if r := h.one(submit("acme", "K", 1000, "old")); r.Code != OK || r.Created || r.Job != 2 {
		t.Errorf("repeat of the key: %+v, want job 2", r)
	}
	if err := h.f.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestPayloadLimitFitsAMessage: max_payload_bytes may not exceed what one
// gRPC message carries beside a job's other fields, in a SetConfig as in
// Validate; a snapshot of an older build holding the limit it accepted
// (4 MiB) still loads, and submits are cut at the message's limit.
func TestPayloadLimitFitsAMessage(t *testing.T) {
	cfg := DefaultConfig()
	for _, c := range []struct {
		v    uint32
		want string
	}{
		{MaxPayloadLimit, ""},
		{0, "max_payload_bytes is 0 (want 1..4128768)"},
		{MaxPayloadLimit + 1, "max_payload_bytes 4128769 is over 4128768, the most a job's payload may be for the job to fit one 4194304-byte gRPC message"},
		{4 << 20, "max_payload_bytes 4194304 is over 4128768, the most a job's payload may be for the job to fit one 4194304-byte gRPC message"},
	} {
		cfg.MaxPayloadBytes = c.v
		err := cfg.Validate()
		if got := fmt.Sprint(err); (err == nil) != (c.want == "") || (err != nil && got != c.want) {
			t.Errorf("max_payload_bytes %d: %v, want %q", c.v, err, c.want)
		}
	}
	h := newHarness(t)
	cfg.MaxPayloadBytes = 4 << 20
	r := h.one(&clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: ConfigToPB(cfg)}}})
	if r.Code != Invalid || !strings.Contains(r.Msg, "max_payload_bytes 4194304 is over 4128768") || h.f.Config().MaxPayloadBytes != 1<<20 {
		t.Fatalf("SetConfig of 4 MiB: %+v (limit now %d)", r, h.f.Config().MaxPayloadBytes)
	}
	// An older build's state with the 4 MiB it accepted.
	h.f.cfg.MaxPayloadBytes = 4 << 20
	v, err := h.f.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	restored := New()
	if err := restored.Restore(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(encodeFSM(v)))), v.Index); err != nil {
		t.Fatalf("a state with max_payload_bytes 4194304 does not load: %v", err)
	}
	if c := restored.Config(); c.MaxPayloadBytes != 4<<20 || c.PayloadLimit() != MaxPayloadLimit {
		t.Fatalf("restored limit %d, effective %d", c.MaxPayloadBytes, c.PayloadLimit())
	}
	// A client reads it back (to show or change it); a new config may not
	// carry it.
	if c, err := StoredConfigFromPB(ConfigToPB(restored.Config())); err != nil || c != restored.Config() {
		t.Fatalf("reading the stored config back: %v", err)
	}
	if _, err := ConfigFromPB(ConfigToPB(restored.Config())); err == nil {
		t.Fatal("a new config with max_payload_bytes 4194304 was accepted")
	}
	h.f.cfg.MaxPayloadBytes = 4<<20 + 1
	v, _ = h.f.Freeze()
	if err := New().Restore(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(encodeFSM(v)))), v.Index); !errors.Is(err, sfq.ErrCorrupt) {
		t.Fatalf("a state over every limit loaded: %v", err)
	}
}
