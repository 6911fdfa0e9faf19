package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
)

// oldMeaningsLog is a log that goes through every command whose meaning
// changed with a feature level before level 8: the submit that made an
// implicit tenant before it was refused, an upsert that keeps fields,
// a webhook set that leaves its URL or kinds out, a dispatch that gives
// nothing, reports refused and accepted (when a worker counts as seen),
// a Finished with the fields of levels 6 and 7, a SetConfig with the
// quota settings, the prune of drained workers and ended jobs, a tenant's
// move between tiers.
func oldMeaningsLog() []struct {
	at  int64
	cmd *clusterpb.Command
} {
	type step = struct {
		at  int64
		cmd *clusterpb.Command
	}
	kinds := func(url string, keyID uint64, kinds ...string) *clusterpb.Command {
		return &clusterpb.Command{Cmd: &clusterpb.Command_WebhookSet{WebhookSet: &clusterpb.WebhookSet{Tenant: "acme", Url: url, Kinds: kinds, KeyId: keyID}}}
	}
	withWorker := func(c *clusterpb.Command, w string, size pb.Size) *clusterpb.Command {
		c.GetDispatch().WorkerId, c.GetDispatch().Size = w, size
		return c
	}
	fin := func(job uint64, attempt uint32, worker string, f *clusterpb.Finished) *clusterpb.Command {
		f.Job, f.Attempt, f.WorkerId = job, attempt, worker
		return &clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: f}}
	}
	return []step{
		{1000, setConfigWith(func(p *pb.SchedulerConfig) { p.JobRetentionMs = 20_000 })},
		{1000, setConfigWith(func(p *pb.SchedulerConfig) {
			p.JobRetentionMs, p.DeadLetterRetentionMs = 20_000, 20_000
			p.ImplicitTenants, p.DefaultMaxQueued, p.MaxTotalQueuedBytes = pb.Tier_BRONZE, 50, 1<<30
		})},
		{1000, tenant("acme", pb.Tier_GOLD)},
		{1000, upsert(&clusterpb.TenantUpsert{Name: "acme", Multiplier: 2, Keep: []string{"tier"}})},
		{1000, submitJob(&clusterpb.SubmitJob{Tenant: "newco", Size: pb.Size_MD, EstCostMs: 100, JobClass: pb.Class_HIGH})},
		{1000, submitJob(&clusterpb.SubmitJob{Tenant: "newco", Size: pb.Size_MD, EstCostMs: 100})},
		{1000, submit("acme", "k1", 1000, "a")},
		{1000, submit("acme", "k2", 1000, "b")},
		{1000, submit("acme", "", 1000, "c")},
		{1500, withWorker(dispatch("w1", 1), "w1", pb.Size_MD)},
		{1500, withWorker(dispatch("w2", 7), "w2", pb.Size_SM)},
		{2000, started(1, 1, "w1")},
		{2000, started(1, 9, "w2")},
		{2500, &clusterpb.Command{Cmd: &clusterpb.Command_Heartbeats{Heartbeats: &clusterpb.HeartbeatBatch{Heartbeats: []*clusterpb.Heartbeat{
			{Job: 1, Attempt: 1, WorkerId: "w1", CpuMs: 10}, {Job: 2, Attempt: 3, WorkerId: "w2", CpuMs: 5}}}}}},
		{3000, fin(1, 1, "w1", &clusterpb.Finished{Outcome: pb.Outcome_FAILED, CpuMs: 300, ExitCode: 300, Permanent: true,
			CpuSource: pb.CpuSource_CPU_SOURCE_CGROUP, Failure: pb.RunFailure_OOM_KILLED})},
		{3000, withWorker(dispatch("w1", 2), "w1", pb.Size_MD)},
		{3500, fin(2, 1, "w1", &clusterpb.Finished{Outcome: pb.Outcome_FAILED, CpuMs: 200, ExitCode: 7, Permanent: true,
			CpuSource: pb.CpuSource_CPU_SOURCE_PROC})},
		{3500, withWorker(dispatch("w1", 3), "w1", pb.Size_MD)},
		{3600, withWorker(dispatch("w3", 4), "w3", pb.Size_LG)},
		{3700, fin(3, 1, "w1", &clusterpb.Finished{Outcome: pb.Outcome_OK, CpuMs: 900, ExitCode: 0})},
		{3800, withWorker(dispatch("w3", 5), "w3", pb.Size_LG)},
		{4000, &clusterpb.Command{Cmd: &clusterpb.Command_WorkerDrain{WorkerDrain: &clusterpb.WorkerDrain{WorkerId: "w2", Drain: true}}}},
		{4000, kinds("", 1)},
		{4000, kinds("https://example.com/hook", 1)},
		{4000, kinds("", 1, "completed")},
		{4000, kinds("https://example.com/other", 1)},
		{4000, kinds("https://example.com/hook", 1, "completed", "failed")},
		{4000, kinds("https://example.com/other", 1)},
		{4500, tenant("acme", pb.Tier_SILVER)},
		{60_000, &clusterpb.Command{Cmd: &clusterpb.Command_Prune{Prune: &clusterpb.Prune{}}}},
		{90_000, &clusterpb.Command{Cmd: &clusterpb.Command_Prune{Prune: &clusterpb.Prune{}}}},
	}
}

// oldMeaningsHashes are the state hashes oldMeaningsLog leaves at each
// feature level: the last one, and a digest of the hash after every
// step. They were recorded by the build before the meanings of levels
// 2..7 were frozen (frozen.go), so that a log of any level replays to the
// state it made when it was written.
var oldMeaningsHashes = map[uint32][2]string{
	1: {"2d0263adb49b018403476c6c48cf6b0435f674cc3a3fc6d688e28f5a55a23fcb", "edca292ba22caff59ad07b853786c5808e0b3c343763b9fd349460e43255149d"},
	2: {"24dad34f9e76a9b01438bcbc50cb46dcb461b09bcd5ade63992b5ec00eaba086", "b3d12ecad11ba26b57b11437d6c8f9867cca3068ebabc9133469c0bece5034a5"},
	3: {"a2c1ac3fc038a5b1c3a7ffcd21fa17895ef106a3d4e55638a8cd0dc755a7ce3c", "81722ba0d4af3d580311bc50e6a5f1c62d2d45224e43927ecab8a527d77fe9be"},
	4: {"2837d24b0a86934e21fd8e57d47d4f8fcd5c543c9a2b880a826661cf4b2ba457", "9ceae66bd3c45d557c507bd32cd8d132d0f50a0d411723cbf5c0002d6538f657"},
	5: {"ae366cda989e9a0b2e63622cb020c7cae60605c28fbf9d02fe0693def5221d13", "c5fd863b7fb20e07a7b7757d87e18b5306ac9d0032049de01d19f393ccdb6e05"},
	6: {"39c69419c2453c7367a94904e0091eb7d2cd6b6e90e82086ce2cf9c268d47c16", "0f2b886c033935c8d6a6b0cf6944f164867a5c016fd07c37513c477a444a47a0"},
	7: {"af70cab3b504043cbb9021ce2b7159217641b576741c54ced64b9644f49c0940", "a006f1050e5fed7280cbc71aa32f8c4d1e268be86403335bd4b4ac6957b72f0e"},
	8: {"9374b234298febc179f7efe917c25a093ef0c767ebc1ab4b474b4e25f485ef3b", "3208cab1b8a061705c61bf214c97962e13bf9ebdcb3f4b65e460496a3ff5b7c5"},
}

// TestOldMeaningsReplay: oldMeaningsLog, applied at each feature level
// from 1 to this build's, leaves the states it left when it was written.
func TestOldMeaningsReplay(t *testing.T) {
	for level := Level1; level <= MaxFeatureLevel; level++ {
		h := &harness{t: t, f: newAt(level)}
		steps := sha256.New()
		var last string
		for _, s := range oldMeaningsLog() {
			h.index++
			// The leader's wall time rides along (events keep it from
			// level 2).
			env := &clusterpb.Envelope{Version: Version, StampMs: s.at, WallMs: 1_700_000_000_000 + s.at, Commands: []*clusterpb.Command{s.cmd}}
			if _, err := h.f.ApplyEnvelope(h.index, env); err != nil {
				t.Fatal(err)
			}
			hash, _ := h.f.Hash()
			last = fmt.Sprintf("%x", hash)
			steps.Write(hash[:])
		}
		if err := h.f.Verify(); err != nil {
			t.Fatalf("level %d: %v", level, err)
		}
		got := [2]string{last, hex.EncodeToString(steps.Sum(nil))}
		want, ok := oldMeaningsHashes[level]
		if !ok {
			t.Errorf("level %d: no recorded hashes; got %q", level, got)
			continue
		}
		if got != want {
			t.Errorf("level %d: hashes %q, recorded %q", level, got, want)
		}
	}
}

// TestEdgeChecksWhatTheLeaderResolves: below Level7 a tenant upsert that
// keeps settings and a webhook set without a URL are resolved by the
// leader on its state (Resolve) before they are read in their level's
// meaning; the edge's check (CheckFields) passes them as sent.
func TestEdgeChecksWhatTheLeaderResolves(t *testing.T) {
	keep := &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{
		Name: "acme", GroupOrder: pb.GroupOrder_GROUP_FIFO, Keep: []string{"tier", "multiplier", "rate"}}}}
	noURL := &clusterpb.Command{Cmd: &clusterpb.Command_WebhookSet{WebhookSet: &clusterpb.WebhookSet{Tenant: "acme"}}}
	for level := Level3; level <= MaxFeatureLevel; level++ {
		if r := CheckFields(keep, DefaultConfig(), level); r != nil {
			t.Errorf("level %d: an upsert that keeps its tier: %v", level, r)
		}
		if r := CheckFields(noURL, DefaultConfig(), level); r != nil {
			t.Errorf("level %d: a webhook set without a URL: %v", level, r)
		}
	}
	f := newAt(Level3)
	if r := f.Admit(f.Resolve(noURL)); !r.Refused() {
		t.Error("level 3: a webhook set without a URL for a tenant with no endpoint is admitted")
	}
}
