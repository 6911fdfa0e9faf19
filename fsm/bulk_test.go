package fsm

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// randomBulk draws a Redrive, CancelJobs or Purge against the small world
// of randomCommand.
func randomBulk(t *rapid.T, tenants []string, job uint64) *clusterpb.Command {
	c := &clusterpb.BulkJobs{Tenant: rapid.SampledFrom(tenants).Draw(t, "btenant"),
		RequestKey: rapid.SampledFrom([]string{"", "r1", "r2"}).Draw(t, "rkey")}
	if rapid.Bool().Draw(t, "byids") {
		c.Jobs = []uint64{job, job + 1}
	} else {
		c.Filter = &pb.JobFilter{Group: rapid.SampledFrom([]string{"", "g1"}).Draw(t, "bgroup")}
		c.After = rapid.Uint64Range(0, 3).Draw(t, "after")
	}
	switch rapid.IntRange(0, 2).Draw(t, "bulkop") {
	case 0:
		c.MaxAttempts = uint32(rapid.IntRange(0, 4).Draw(t, "bmax"))
		return &clusterpb.Command{Cmd: &clusterpb.Command_Redrive{Redrive: c}}
	case 1:
		return &clusterpb.Command{Cmd: &clusterpb.Command_CancelJobs{CancelJobs: c}}
	}
	return &clusterpb.Command{Cmd: &clusterpb.Command_Purge{Purge: c}}
}

func redriveCmd(c *clusterpb.BulkJobs) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_Redrive{Redrive: c}}
}
func cancelJobsCmd(c *clusterpb.BulkJobs) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_CancelJobs{CancelJobs: c}}
}
func purgeCmd(c *clusterpb.BulkJobs) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_Purge{Purge: c}}
}

func failedRun(job uint64, attempt uint32, worker string) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: job, Attempt: attempt, WorkerId: worker, Outcome: pb.Outcome_FAILED, CpuMs: 5, ExitCode: 3}}}
}

// failJobs submits n jobs of tenant with max_attempts 1 and fails each
// once; they end failed with IDs first..first+n-1.
func (h *harness) failJobs(tenant string, n int, group string) {
	h.t.Helper()
	for range n {
		r := h.one(submitJob(&clusterpb.SubmitJob{Tenant: tenant, Size: pb.Size_MD, EstCostMs: 100, MaxAttempts: 1, Group: group, Payload: []byte("p")}))
		if r.Code != OK {
			h.t.Fatalf("submit: %v", r.Err())
		}
	}
	for range n {
		h.now++
		d := h.one(dispatch("w1", uint64(h.now)))
		if !d.Assigned {
			h.t.Fatalf("dispatch: %+v", d)
		}
		if r := h.one(failedRun(uint64(d.Job), d.Attempt, "w1")); r.Code != OK {
			h.t.Fatalf("fail: %v", r.Err())
		}
	}
}

func items(b *BulkResult) string {
	var out []string
	for _, it := range b.Items {
		if it.Done {
			out = append(out, fmt.Sprintf("%d:%s", it.Job, it.State))
		} else {
			out = append(out, fmt.Sprintf("%d skipped %s", it.Job, it.Reason))
		}
	}
	return strings.Join(out, "; ")
}

// TestRedriveByIDs: per-job results (redriven, or skipped with the
// reason); a redriven job is queued with failures 0, keeps its attempt,
// takes the new max_attempts, and its events are redriven then queued; a
// retry with the request key returns the first call's answer and changes
// nothing; the same key with other content is ALREADY_EXISTS.
func TestRedriveByIDs(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	h.one(tenant("beta", pb.Tier_GOLD))
	h.failJobs("acme", 2, "")        // jobs 1, 2 failed
	h.one(submit("acme", "", 1, "")) // job 3 queued
	h.one(submit("beta", "", 1, "")) // job 4, another tenant's
	events := h.f.nextEvent
	r := h.one(redriveCmd(&clusterpb.BulkJobs{Tenant: "acme", Jobs: []uint64{2, 3, 4, 99, 2}, MaxAttempts: 5, RequestKey: "rq1"}))
	if r.Code != OK || r.Bulk == nil {
		t.Fatalf("redrive: %+v", r)
	}
	want := "2:queued; 3 skipped is queued (Redrive takes failed, timed_out, expired or cancelled jobs); 4 skipped not found; 99 skipped not found; 2 skipped is queued (Redrive takes failed, timed_out, expired or cancelled jobs)"
	if got := items(r.Bulk); got != want || r.Bulk.Done != 1 || r.Bulk.Skipped != 4 || r.Count != 1 || r.Bulk.Next != 0 {
		t.Fatalf("items:\n got %s\nwant %s\n%+v", got, want, r.Bulk)
	}
	j, _ := h.job(2)
	if j.State != sfq.Queued || j.Failures != 0 || j.Attempt != 1 || j.MaxAttempts != 5 {
		t.Fatalf("job 2: %+v", j.Life)
	}
	var kinds []string
	for seq := events; seq < h.f.nextEvent; seq++ {
		ev, _ := h.f.events.Get(seq)
		kinds = append(kinds, fmt.Sprintf("%d:%s@%d", ev.Job, ev.Kind, ev.Attempt))
	}
	if got := strings.Join(kinds, " "); got != "2:redriven@1 2:queued@1" {
		t.Fatalf("events %s", got)
	}
	before, _ := h.f.Hash()
	again := h.one(redriveCmd(&clusterpb.BulkJobs{Tenant: "acme", Jobs: []uint64{2, 3, 4, 99, 2}, MaxAttempts: 5, RequestKey: "rq1"}))
	if again.Code != OK || !again.Bulk.Duplicate || len(again.Bulk.Items) != 0 || again.Bulk.Next != 0 {
		t.Fatalf("retry: %+v %+v", again, again.Bulk)
	}
	if after, _ := h.f.Hash(); after != before {
		t.Fatal("a retried redrive changed the state")
	}
	other := h.one(redriveCmd(&clusterpb.BulkJobs{Tenant: "acme", Jobs: []uint64{1}, RequestKey: "rq1"}))
	if other.Code != AlreadyExists || other.Msg != `request key "rq1" of tenant "acme" was used for another request` {
		t.Fatalf("other content: %+v", other)
	}
	// A submit's key and a bulk key of the same text do not meet.
	if s := h.one(submit("acme", "rq1", 1, "")); s.Code != OK || !s.Created {
		t.Fatalf("submit with the key text: %+v", s)
	}
	// The dispatch after the redrive is attempt 2.
	d := h.one(dispatch("w2", 1))
	if d.Job != 2 || d.Attempt != 2 {
		t.Fatalf("dispatch: job %d attempt %d (want 2, 2)", d.Job, d.Attempt)
	}
	if err := h.f.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestRedriveFilterLimit: a filter takes the first 10,000 matches by
// ascending ID and names the continuation; the next call from it takes
// the rest. Filters on group and submit time match exactly.
func TestRedriveFilterLimit(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	const n = MaxBulkJobs + 5
	h.failJobs("acme", n, "")
	h.failJobs("acme", 3, "g1") // jobs 10006..10008
	h.one(submit("acme", "", 1, ""))
	r := h.one(redriveCmd(&clusterpb.BulkJobs{Tenant: "acme", Filter: &pb.JobFilter{States: []string{"failed"}}}))
	if r.Code != OK || r.Bulk.Done != MaxBulkJobs || r.Bulk.Skipped != 0 || r.Bulk.Next != MaxBulkJobs+1 {
		t.Fatalf("first call: done %d skipped %d next %d", r.Bulk.Done, r.Bulk.Skipped, r.Bulk.Next)
	}
	if r.Bulk.Items[0].Job != 1 || r.Bulk.Items[MaxBulkJobs-1].Job != MaxBulkJobs {
		t.Fatalf("first call took %d..%d", r.Bulk.Items[0].Job, r.Bulk.Items[MaxBulkJobs-1].Job)
	}
	r = h.one(redriveCmd(&clusterpb.BulkJobs{Tenant: "acme", Filter: &pb.JobFilter{States: []string{"failed"}, Group: "g1"}, After: uint64(r.Bulk.Next)}))
	if got := items(r.Bulk); got != "10006:queued; 10007:queued; 10008:queued" || r.Bulk.Next != 0 {
		t.Fatalf("group g1: %s next %d", got, r.Bulk.Next)
	}
	j, _ := h.job(10002)
	r = h.one(redriveCmd(&clusterpb.BulkJobs{Tenant: "acme", Filter: &pb.JobFilter{SubmittedFromMs: int64(j.SubmittedAt), SubmittedToMs: int64(j.SubmittedAt) + 1}}))
	if r.Code != OK || r.Bulk.Done != 5 || r.Bulk.Next != 0 {
		t.Fatalf("by submit time: %s", items(r.Bulk))
	}
	if err := h.f.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestRedriveQuota: the tenant's max_queued is checked again in Apply; a
// filtered redrive stops at the quota with the job it stopped at as its
// continuation; by IDs the rest are skipped with the reason.
func TestRedriveQuota(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	h.failJobs("acme", 4, "")
	h.one(upsert(&clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD, Caps: &pb.Caps{MaxQueued: 2}}))
	r := h.one(redriveCmd(&clusterpb.BulkJobs{Tenant: "acme", Filter: &pb.JobFilter{}}))
	if got := items(r.Bulk); got != "1:queued; 2:queued" || r.Bulk.Next != 3 || r.Bulk.Stopped != `tenant "acme" has 2 queued jobs, its max_queued quota` {
		t.Fatalf("filter: %s next %d stopped %q", got, r.Bulk.Next, r.Bulk.Stopped)
	}
	r = h.one(redriveCmd(&clusterpb.BulkJobs{Tenant: "acme", Jobs: []uint64{3, 4}}))
	want := `3 skipped tenant "acme" has 2 queued jobs, its max_queued quota; 4 skipped tenant "acme" has 2 queued jobs, its max_queued quota`
	if got := items(r.Bulk); got != want || r.Bulk.Done != 0 {
		t.Fatalf("ids: %s", got)
	}
	if j, _ := h.job(3); j.State != sfq.Failed {
		t.Fatalf("job 3 is %s", j.State)
	}
	if err := h.f.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestCancelJobsAndPurge: a filtered cancel ends queued jobs at once and
// asks live ones to stop; a purge deletes ended jobs by the same filter.
func TestCancelJobsAndPurge(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	h.failJobs("acme", 1, "") // job 1 failed
	h.one(submit("acme", "", 1, ""))
	h.one(submit("acme", "", 1, ""))
	d := h.one(dispatch("w2", 1)) // job 2 assigned
	r := h.one(cancelJobsCmd(&clusterpb.BulkJobs{Tenant: "acme", Filter: &pb.JobFilter{}}))
	if got := items(r.Bulk); got != "2:assigned; 3:cancelled" {
		t.Fatalf("cancel: %s", got)
	}
	if j, _ := h.job(2); j.Cancel != sfq.CancelRequested {
		t.Fatalf("job 2 cancel %s", j.Cancel)
	}
	r = h.one(cancelJobsCmd(&clusterpb.BulkJobs{Tenant: "acme", Filter: &pb.JobFilter{}}))
	if got := items(r.Bulk); got != "2 skipped cancel already requested" {
		t.Fatalf("cancel again: %s", got)
	}
	h.one(finished(uint64(d.Job), d.Attempt, "w2", 5)) // completes job 2
	r = h.one(purgeCmd(&clusterpb.BulkJobs{Tenant: "acme", Filter: &pb.JobFilter{States: []string{"failed", "completed"}}}))
	if got := items(r.Bulk); got != "1:none; 2:none" {
		t.Fatalf("purge: %s", got)
	}
	if _, ok := h.job(1); ok {
		t.Fatal("job 1 kept")
	}
	if r := h.one(purgeCmd(&clusterpb.BulkJobs{Tenant: "acme", Filter: &pb.JobFilter{States: []string{"queued"}}})); r.Code != Invalid ||
		r.Msg != `filter.states: "queued" is not a state Purge takes (want completed, failed, cancelled, timed_out or expired)` {
		t.Fatalf("purge queued: %+v", r)
	}
	if err := h.f.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestFeatureLevel5Bulk: at level 4 Redrive, CancelJobs, Purge and a
// dead-letter setting are refused naming the command and both levels, and
// the state is written exactly as before (version 6); at level 5 the
// dead-letter settings ride in the state (version 7) and read back.
func TestFeatureLevel5Bulk(t *testing.T) {
	h := &harness{t: t, f: newAt(Level4), now: 1_000}
	h.one(tenant("acme", pb.Tier_GOLD))
	h.failJobs("acme", 1, "")
	cfg := DefaultConfig()
	cfg.DeadLetterMaxJobs = 7
	refused := []levelCase{
		{redriveCmd(&clusterpb.BulkJobs{Tenant: "acme", Jobs: []uint64{1}}), "Redrive"},
		{cancelJobsCmd(&clusterpb.BulkJobs{Tenant: "acme", Filter: &pb.JobFilter{}}), "CancelJobs"},
		{purgeCmd(&clusterpb.BulkJobs{Tenant: "acme", Filter: &pb.JobFilter{}}), "Purge"},
		{&clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: ConfigToPB(cfg)}}}, "dead_letter_max_jobs"},
	}
	h.refusedBelow(Level5, refused)
	// The defaults pass at level 4 (a client echoing GetConfig).
	if r := h.one(&clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: ConfigToPB(DefaultConfig())}}}); r.Code != OK {
		t.Fatalf("defaults at level 4: %v", r.Err())
	}
	v, _ := h.f.Freeze()
	if enc := encodeFSM(v); enc[0] != 6 {
		t.Fatalf("level 4 writes version %d", enc[0])
	}
	h.one(setLevelCmd(Level5))
	for _, c := range refused {
		if r := h.one(c.cmd); r.Code != OK {
			t.Errorf("%s at level 5: %v", c.what, r.Err())
		}
	}
	v, _ = h.f.Freeze()
	enc := encodeFSM(v)
	back := New()
	if err := back.Restore(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(enc))), h.index); err != nil || back.Level() != Level5 {
		t.Fatalf("restore at level 5: %d %v", back.Level(), err)
	}
	if back.cfg.DeadLetters != (DeadLetters{DefaultDeadLetterRetentionMs, 7, DefaultDeadLetterMaxBytes}) {
		t.Fatalf("restored dead letters %+v", back.cfg.DeadLetters)
	}
	h1, _ := h.f.Hash()
	h2, _ := back.Hash()
	if h1 != h2 || enc[0] != 7 {
		t.Fatalf("level 5 state: version %d, hashes equal %v", enc[0], h1 == h2)
	}
}

// TestDeadLetterRetention: at level 5 completed jobs keep the job
// retention and dead letters theirs; a tenant over its dead-letter bound
// loses its oldest first, by the leader's Prune; at level 4 every ended
// job keeps the job retention, as before.
func TestDeadLetterRetention(t *testing.T) {
	for _, level := range []uint32{Level4, Level5} {
		h := &harness{t: t, f: newAt(level), now: 1_000}
		h.one(tenant("acme", pb.Tier_GOLD))
		cfg := DefaultConfig()
		cfg.JobRetentionMs = 1000
		if level == Level5 {
			cfg.DeadLetterMaxJobs = 2
		}
		h.one(&clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: ConfigToPB(cfg)}}})
		h.failJobs("acme", 3, "")        // jobs 1..3 failed
		h.one(submit("acme", "", 1, "")) // job 4
		d := h.one(dispatch("w2", 1))
		h.one(finished(uint64(d.Job), d.Attempt, "w2", 5))
		due := h.f.PruneDue(h.now)
		if due != (level == Level5) {
			t.Fatalf("level %d: prune due %v at once", level, due)
		}
		r := h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Prune{Prune: &clusterpb.Prune{}}})
		var kept []sfq.JobID
		for id := sfq.JobID(1); id <= 4; id++ {
			if _, ok := h.job(id); ok {
				kept = append(kept, id)
			}
		}
		if want := map[uint32]string{Level4: "[1 2 3 4]", Level5: "[2 3 4]"}[level]; fmt.Sprint(kept) != want || r.Count != uint64(4-len(kept)) {
			t.Fatalf("level %d: kept %v (want %s), count %d", level, kept, want, r.Count)
		}
		h.now += 2000
		if !h.f.PruneDue(h.now) {
			t.Fatalf("level %d: nothing due after the job retention", level)
		}
		h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Prune{Prune: &clusterpb.Prune{}}})
		kept = nil
		for id := sfq.JobID(1); id <= 4; id++ {
			if _, ok := h.job(id); ok {
				kept = append(kept, id)
			}
		}
		if want := map[uint32]string{Level4: "[]", Level5: "[2 3]"}[level]; fmt.Sprint(kept) != want {
			t.Fatalf("level %d: after the job retention kept %v (want %s)", level, kept, want)
		}
		if level == Level5 {
			h.now += DefaultDeadLetterRetentionMs
			h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Prune{Prune: &clusterpb.Prune{}}})
			if _, ok := h.job(2); ok {
				t.Fatal("a dead letter outlived its retention")
			}
		}
		if err := h.f.Verify(); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkRedrive10000: one Redrive entry by filter taking 10,000 dead
// letters (the most a call takes) among 10,000 completed jobs of the same
// tenant, then a CancelJobs of the same 10,000: how long one bulk entry
// holds Apply.
func BenchmarkRedrive10000(b *testing.B) {
	for range b.N {
		b.StopTimer()
		h := newHarness(b)
		h.one(tenant("acme", pb.Tier_GOLD))
		h.failJobs("acme", MaxBulkJobs, "")
		for range MaxBulkJobs {
			h.one(submit("acme", "", 1, ""))
			h.now++
			d := h.one(dispatch("w2", uint64(h.now)))
			h.one(finished(uint64(d.Job), d.Attempt, "w2", 1))
		}
		b.StartTimer()
		r := h.one(redriveCmd(&clusterpb.BulkJobs{Tenant: "acme", Filter: &pb.JobFilter{}}))
		c := h.one(cancelJobsCmd(&clusterpb.BulkJobs{Tenant: "acme", Filter: &pb.JobFilter{}}))
		b.StopTimer()
		if r.Bulk.Done != MaxBulkJobs || c.Bulk.Done != MaxBulkJobs {
			b.Fatalf("redriven %d, cancelled %d", r.Bulk.Done, c.Bulk.Done)
		}
		b.StartTimer()
	}
}

// TestKeyOfAPurgedJob: a submit with the idempotency key of a job that was
// purged is not answered with that job: NOT_FOUND says what became of it
// and for how long the key stays taken; once the dedupe window has passed
// the key makes a new job.
func TestKeyOfAPurgedJob(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	first := h.one(submit("acme", "k1", 1, ""))
	h.one(cancelJobsCmd(&clusterpb.BulkJobs{Tenant: "acme", Jobs: []uint64{uint64(first.Job)}}))
	if r := h.one(purgeCmd(&clusterpb.BulkJobs{Tenant: "acme", Jobs: []uint64{uint64(first.Job)}})); items(r.Bulk) != fmt.Sprintf("%d:none", first.Job) {
		t.Fatalf("purge: %s", items(r.Bulk))
	}
	h.now += 1000
	again := h.one(submit("acme", "k1", 1, ""))
	want := fmt.Sprintf(`idempotency key "k1" of tenant "acme" was used for job %d, which no longer exists (purged, or pruned after it ended); the key is taken for 23h59m59s more, its dedupe window`, first.Job)
	if again.Code != NotFound || again.Msg != want || again.Job != 0 {
		t.Fatalf("the key of a purged job: %+v\nwant NOT_FOUND %q", again, want)
	}
	h.now += 24 * 3600 * 1000
	fresh := h.one(submit("acme", "k1", 1, ""))
	if fresh.Code != OK || !fresh.Created || fresh.Job == first.Job {
		t.Fatalf("after the dedupe window: %+v", fresh)
	}
}
