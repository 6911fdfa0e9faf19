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

// TestQuotasByDefault: a new cluster's tenants hold at most
// default_max_queued queued jobs (unless a max_queued of their own says
// otherwise) and max_queued_bytes of payloads in unfinished jobs; a
// submit beyond either is RESOURCE_EXHAUSTED, naming the quota; an ended
// job frees its bytes; a redrive counts as a submit. A snapshot restores
// the settings and the counts.
func TestQuotasByDefault(t *testing.T) {
	h := newHarness(t)
	if c := h.f.Config(); c.DefaultMaxQueued != DefaultMaxQueued || c.MaxQueuedBytes != DefaultMaxQueuedBytes {
		t.Fatalf("a new cluster's quotas: %d jobs, %d bytes", c.DefaultMaxQueued, c.MaxQueuedBytes)
	}
	h.one(setConfigWith(func(p *pb.SchedulerConfig) { p.DefaultMaxQueued, p.MaxQueuedBytes = 2, 1000 }))
	h.one(tenant("a", pb.Tier_GOLD))
	h.one(&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "own", Tier: pb.Tier_GOLD, Caps: &pb.Caps{MaxQueued: 3}}}})
	payload := func(n int) string { return strings.Repeat("x", n) }
	for i := range 2 {
		if r := h.one(submit("a", "", 1, payload(300))); r.Code != OK {
			t.Fatalf("submit %d: %+v", i, r)
		}
	}
	r := h.one(submit("a", "", 1, payload(1)))
	if r.Code != ResourceExhausted || r.Msg != `tenant "a" has 2 queued jobs, the cluster's default_max_queued (it has no max_queued of its own)` {
		t.Fatalf("a third job: %+v", r)
	}
	// A tenant's own max_queued stands over the default.
	for i := range 3 {
		if r := h.one(submit("own", "", 1, "")); r.Code != OK {
			t.Fatalf("own's submit %d: %+v", i, r)
		}
	}
	if r := h.one(submit("own", "", 1, "")); r.Code != ResourceExhausted || r.Msg != `tenant "own" has 3 queued jobs, its max_queued quota` {
		t.Fatalf("own's fourth job: %+v", r)
	}
	// Bytes: job 1 runs (its 300 bytes still count), job 2 is cancelled
	// (its bytes are freed); 300 + 701 > 1000.
	d := h.one(dispatch("w1", 1))
	h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Tenant: "a", Job: 2}}})
	r = h.one(submit("a", "", 1, payload(701)))
	if want := `tenant "a" holds 300 bytes of payloads in its unfinished jobs; with this job's 701 it would pass the cluster's max_queued_bytes of 1000`; r.Code != ResourceExhausted || r.Msg != want {
		t.Fatalf("701 bytes more: %+v\nwant %s", r, want)
	}
	if r := h.one(submit("a", "", 1, payload(700))); r.Code != OK {
		t.Fatalf("700 bytes more: %+v", r)
	}
	// The run ends: its bytes are freed; a redrive counts them again.
	h.one(finished(uint64(d.Job), d.Attempt, "w1", 5))
	r = h.one(redriveCmd(&clusterpb.BulkJobs{Tenant: "a", Jobs: []uint64{2}}))
	if items(r.Bulk) != "2:queued" {
		t.Fatalf("redrive: %s", items(r.Bulk))
	}
	h.f.Read(func(s *sfq.Scheduler) {
		ti, _ := s.TenantIndex("a")
		if got := s.UnfinishedPayload(ti); got != 1000 {
			t.Fatalf("a's unfinished payload bytes: %d, want 1000", got)
		}
	})
	r = h.one(redriveCmd(&clusterpb.BulkJobs{Tenant: "a", Jobs: []uint64{2}}))
	if err := h.f.Verify(); err != nil {
		t.Fatal(err)
	}
	v, _ := h.f.Freeze()
	back := New()
	if err := back.Restore(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(encodeFSM(v)))), h.index); err != nil {
		t.Fatal(err)
	}
	if c := back.Config(); back.Level() != h.f.Level() || c.DefaultMaxQueued != 2 || c.MaxQueuedBytes != 1000 {
		t.Fatalf("restored: level %d, quotas %d jobs %d bytes", back.Level(), c.DefaultMaxQueued, c.MaxQueuedBytes)
	}
	h1, _ := h.f.Hash()
	h2, _ := back.Hash()
	if h1 != h2 {
		t.Fatal("the restored state hashes differently")
	}
}

// TestQuotasNeedLevel6: below level 6 the quotas are refused at the edge
// and in Apply, naming them; a configuration that carries the defaults
// (ConfigToPB of DefaultConfig) is taken and keeps none, so nothing is
// counted; once the level is raised the cluster still has none until
// they are set.
func TestQuotasNeedLevel6(t *testing.T) {
	h := &harness{t: t, f: newAt(Level5), now: 1_000}
	h.one(tenant("a", pb.Tier_GOLD))
	set := setConfigWith(func(p *pb.SchedulerConfig) { p.DefaultMaxQueued = 1 })
	h.refusedBelow(Level6, []levelCase{{set, "default_max_queued"},
		{setConfigWith(func(p *pb.SchedulerConfig) { p.MaxQueuedBytes = 10 }), "max_queued_bytes"}})
	if r := h.one(setConfigWith(func(*pb.SchedulerConfig) {})); r.Code != OK {
		t.Fatalf("the defaults at level 5: %+v", r)
	}
	if c := h.f.Config(); c.DefaultMaxQueued != 0 || c.MaxQueuedBytes != 0 {
		t.Fatalf("quotas at level 5: %d jobs, %d bytes", c.DefaultMaxQueued, c.MaxQueuedBytes)
	}
	for i := range 3 {
		if r := h.one(submit("a", "", 1, "")); r.Code != OK {
			t.Fatalf("submit %d at level 5: %+v", i, r)
		}
	}
	h.one(setLevelCmd(Level6))
	if c := h.f.Config(); c.DefaultMaxQueued != 0 || c.MaxQueuedBytes != 0 {
		t.Fatalf("quotas once raised to 6: %d jobs, %d bytes", c.DefaultMaxQueued, c.MaxQueuedBytes)
	}
	if r := h.one(set); r.Code != OK || h.f.Config().DefaultMaxQueued != 1 {
		t.Fatalf("default_max_queued at level 6: %+v", r)
	}
	if r := h.one(submit("a", "", 1, "")); r.Code != ResourceExhausted {
		t.Fatalf("a fourth job over a default of 1: %+v", r)
	}
}

// TestPermanentFailure: a failed report marked permanent ends the job
// failed at once (event failed, reason unrunnable) at level 6; at level 5
// the mark means nothing and the job is retried, as builds before level
// 6 apply it.
func TestPermanentFailure(t *testing.T) {
	for _, level := range []uint32{Level5, Level6} {
		h := &harness{t: t, f: newAt(level), now: 1_000}
		h.one(tenant("a", pb.Tier_GOLD))
		h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "a", Size: pb.Size_MD, EstCostMs: 100, MaxAttempts: 3}}})
		d := h.one(dispatch("w1", 1))
		h.one(started(uint64(d.Job), d.Attempt, "w1"))
		h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: uint64(d.Job), Attempt: d.Attempt, WorkerId: "w1",
			Outcome: pb.Outcome_FAILED, ExitCode: 127, Permanent: true}}})
		j, _ := h.job(d.Job)
		want, kinds := sfq.Queued, "1:queued 1:assigned 1:started 1:requeued:run_failed"
		if level == Level6 {
			want, kinds = sfq.Failed, "1:queued 1:assigned 1:started 1:failed:unrunnable"
		}
		if j.State != want || j.Failures != 1 {
			t.Errorf("level %d: job %s with %d failures, want %s", level, j.State, j.Failures, want)
		}
		if got := eventKinds(h.f); got != kinds {
			t.Errorf("level %d: events %s, want %s", level, got, kinds)
		}
	}
}

// TestTotalQueuedBytes: a new cluster at level 7 holds at most
// max_total_queued_bytes of payloads in every tenant's unfinished jobs
// together; a submit, a job of a batch or a redrive beyond it is
// RESOURCE_EXHAUSTED (QUOTA_EXCEEDED), naming it; an ended job frees its
// bytes; the setting and the count survive a snapshot. Below level 7 the
// setting is refused, naming it, and a raised cluster has none until set.
func TestTotalQueuedBytes(t *testing.T) {
	h := newHarness(t)
	if got := h.f.Config().MaxTotalQueuedBytes; got != DefaultMaxTotalQueuedBytes {
		t.Fatalf("a new cluster's max_total_queued_bytes: %d", got)
	}
	h.one(setConfigWith(func(p *pb.SchedulerConfig) { p.MaxTotalQueuedBytes = 1000 }))
	h.one(tenant("a", pb.Tier_GOLD))
	h.one(tenant("b", pb.Tier_FREE))
	payload := func(n int) string { return strings.Repeat("x", n) }
	for _, s := range []*clusterpb.Command{submit("a", "", 1, payload(400)), submit("b", "", 1, payload(500))} {
		if r := h.one(s); r.Code != OK {
			t.Fatalf("submit: %+v", r)
		}
	}
	r := h.one(submit("b", "", 1, payload(101)))
	want := `the tenants hold 900 bytes of payloads in their unfinished jobs; with this job's 101 they would pass the cluster's max_total_queued_bytes of 1000`
	if r.Code != ResourceExhausted || r.Reason != "QUOTA_EXCEEDED" || r.Msg != want {
		t.Fatalf("101 bytes more: %+v\nwant %s", r, want)
	}
	// A batch counts the jobs before each one: 60 + 50 > 100 left.
	batch := []*clusterpb.SubmitJob{submit("a", "", 1, payload(60)).GetSubmit(), submit("b", "", 1, payload(50)).GetSubmit()}
	out := make([]Result, 2)
	h.f.AdmitSubmits(batch, out)
	if out[0].Refused() || !out[1].Refused() || !strings.Contains(out[1].Msg, "max_total_queued_bytes") {
		t.Fatalf("a batch of 60 and 50 bytes with 100 left: %+v", out)
	}
	// Job 1 (400 bytes) is cancelled: its bytes are freed.
	h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Tenant: "a", Job: 1}}})
	if r := h.one(submit("b", "", 1, payload(500))); r.Code != OK {
		t.Fatalf("500 bytes once 400 are freed: %+v", r)
	}
	// A redrive counts as a submit: 1000 held, 400 more is refused.
	r = h.one(redriveCmd(&clusterpb.BulkJobs{Tenant: "a", Jobs: []uint64{1}}))
	if !strings.Contains(items(r.Bulk), "max_total_queued_bytes") {
		t.Fatalf("redrive over the total: %s", items(r.Bulk))
	}
	if err := h.f.Verify(); err != nil {
		t.Fatal(err)
	}
	v, _ := h.f.Freeze()
	back := New()
	if err := back.Restore(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(encodeFSM(v)))), h.index); err != nil {
		t.Fatal(err)
	}
	if got := back.Config().MaxTotalQueuedBytes; got != 1000 {
		t.Fatalf("restored max_total_queued_bytes: %d", got)
	}
	back.Read(func(s *sfq.Scheduler) {
		if got := s.UnfinishedPayloadAll(); got != 1000 {
			t.Fatalf("restored total of unfinished payloads: %d, want 1000", got)
		}
	})

	h6 := &harness{t: t, f: newAt(Level6), now: 1_000}
	h6.one(tenant("a", pb.Tier_GOLD))
	h6.refusedBelow(Level7, []levelCase{{setConfigWith(func(p *pb.SchedulerConfig) { p.MaxTotalQueuedBytes = 10 }), "max_total_queued_bytes"}})
	if got := h6.f.Config().MaxTotalQueuedBytes; got != 0 {
		t.Fatalf("max_total_queued_bytes at level 6: %d", got)
	}
	h6.one(setLevelCmd(Level7))
	if got := h6.f.Config().MaxTotalQueuedBytes; got != 0 {
		t.Fatalf("max_total_queued_bytes once raised to 7: %d", got)
	}
}
