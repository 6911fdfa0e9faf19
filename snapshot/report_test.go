package snapshot

import (
	"io"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
)

// TestReplayWholeReport: the fairness report of a replayed data directory
// covers the whole log when it reaches back to index 1, snapshots
// notwithstanding, and starts at the snapshot when the log before it is
// compacted.
func TestReplayWholeReport(t *testing.T) {
	type entry struct {
		at  int64
		cmd *clusterpb.Command
	}
	submit := func(tenant string) entry {
		return entry{0, &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: tenant, Size: pb.Size_MD, EstCostMs: 1000}}}}
	}
	entries := []entry{
		{0, &clusterpb.Command{Cmd: &clusterpb.Command_SetFeatureLevel{SetFeatureLevel: &clusterpb.SetFeatureLevel{Level: fsm.Level2}}}},
		{0, &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "a", Tier: pb.Tier_GOLD}}}},
		{0, &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "b", Tier: pb.Tier_FREE}}}},
		submit("a"), submit("a"), submit("b"), submit("b"),
		// Jobs 1 (a) and 3 (b) run at 1 s; a's takes 2 s of CPU, b's 1 s.
		{1000, &clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: "w1", Size: pb.Size_MD, Credit: 1}}}},
		{1000, &clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: "w2", Size: pb.Size_MD, Credit: 1}}}},
		{11_000, &clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: 1, Attempt: 1, WorkerId: "w1", CpuMs: 2000, Outcome: pb.Outcome_OK}}}},
		{11_000, &clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: 3, Attempt: 1, WorkerId: "w2", CpuMs: 1000, Outcome: pb.Outcome_OK}}}},
	}
	const snapAt = 9 // after the dispatches
	logs := make([]*raft.Log, len(entries))
	for i, e := range entries {
		data, err := fsm.Encode(&clusterpb.Envelope{Version: fsm.Version, StampMs: e.at, Commands: []*clusterpb.Command{e.cmd}})
		if err != nil {
			t.Fatal(err)
		}
		logs[i] = &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: data}
	}
	// dataDir writes the log from index first, and a snapshot at snapAt.
	dataDir := func(first uint64) string {
		dir := t.TempDir()
		db, err := raftboltdb.NewBoltStore(filepath.Join(dir, LogFile))
		if err != nil {
			t.Fatal(err)
		}
		if err := db.StoreLogs(logs[first-1:]); err != nil {
			t.Fatal(err)
		}
		db.Close()
		f := fsm.New()
		for _, l := range logs[:snapAt] {
			if res, ok := f.Apply(l).([]fsm.Result); !ok || res[0].Code != fsm.OK {
				t.Fatalf("entry %d: %v", l.Index, res)
			}
		}
		store, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hclog.New(&hclog.LoggerOptions{Output: io.Discard}))
		if err != nil {
			t.Fatal(err)
		}
		sink, err := store.Create(raft.SnapshotVersionMax, snapAt, 1, raft.Configuration{}, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		v, err := f.Freeze()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Write(sink, v); err != nil {
			t.Fatal(err)
		}
		if err := sink.Close(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	for _, c := range []struct {
		first, snapshotAt  uint64
		since              int64
		chargedA, chargedB int64
		entitledA          float64
	}{
		// The whole log: a and b charged 1 s at dispatch, a +1 s at its
		// finish; both had eligible work from 0 s to 11 s.
		{first: 1, snapshotAt: 0, since: 0, chargedA: 2000, chargedB: 1000, entitledA: 8.0 / 9},
		// From the snapshot at 1 s: the corrections only.
		{first: snapAt + 1, snapshotAt: snapAt, since: 1000, chargedA: 1000, chargedB: 0, entitledA: 8.0 / 9},
	} {
		res, f, err := ReplayWhole(dataDir(c.first), 0)
		if err != nil {
			t.Fatal(err)
		}
		rep := f.Fairness(true)
		if res.SnapshotAt != c.snapshotAt || res.Index != uint64(len(entries)) || int64(rep.Since) != c.since || len(rep.Rows) != 2 {
			t.Fatalf("log from %d: %+v, report since %d: %+v", c.first, res, rep.Since, rep.Rows)
		}
		a, b := rep.Rows[0], rep.Rows[1]
		e, _ := a.Whole.Entitled()
		share, _ := a.Whole.BilledShare()
		if a.Name != "a" || b.Name != "b" || a.Whole.BilledMs != 2000 || b.Whole.BilledMs != 1000 || share != 2.0/3 ||
			a.Whole.ChargedMs != c.chargedA || b.Whole.ChargedMs != c.chargedB || e < c.entitledA-1e-7 || e > c.entitledA+1e-7 ||
			a.Whole.BusyMs != 11_000-c.since {
			t.Errorf("log from %d: a %+v b %+v (entitled %v)", c.first, a, b, e)
		}
	}
}
