package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// seededFSM returns a state machine holding two tenants, queued, running
// and finished jobs with idempotency keys, two workers and a member, at
// index 10: what a fuzzed entry can reach beyond an empty state.
func seededFSM(t testing.TB) *FSM {
	h := newHarness(t)
	h.apply(tenant("a", pb.Tier_GOLD), tenant("b", pb.Tier_FREE))
	h.apply(submit("a", "k1", 1000, "run 1"), submit("a", "k2", 2000, "run 2"), submit("b", "", 500, "run 3"), submit("b", "k4", 100, "run 4"))
	h.apply(dispatch("w1", 1), dispatch("w2", 1))
	h.apply(started(1, 1, "w1"))
	h.now += 500
	h.apply(finished(1, 1, "w1", 900))
	h.apply(&clusterpb.Command{Cmd: &clusterpb.Command_MemberUpsert{MemberUpsert: &clusterpb.MemberUpsert{Id: "n1", RaftAddr: "127.0.0.1:7440", GrpcAddr: "127.0.0.1:7400"}}})
	for h.index < 10 {
		h.apply(&clusterpb.Command{Cmd: &clusterpb.Command_GrantLeases{GrantLeases: &clusterpb.GrantLeases{}}})
	}
	return h.f
}

// seedEnvelopes are the committed seed corpus of FuzzApplyEntry: one
// envelope per command kind, against the seeded state's jobs, tenants and
// workers, and a few edge cases.
func seedEnvelopes() map[string]*clusterpb.Envelope {
	env := func(cmds ...*clusterpb.Command) *clusterpb.Envelope {
		return &clusterpb.Envelope{Version: Version, StampMs: 2_000, WallMs: 1_764_403_200_000, Commands: cmds}
	}
	cfg := ConfigToPB(DefaultConfig())
	return map[string]*clusterpb.Envelope{
		"submit":          env(&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "a", IdempotencyKey: "k9", JobType: "t", Size: pb.Size_LG, EstCostMs: 5000, Payload: []byte("x"), MaxAttempts: 3, TimeoutMs: 60000}}}),
		"submit-repeat":   env(submit("a", "k1", 1000, "run 1")),
		"dispatch":        env(dispatch("w3", 1), dispatch("w1", 2)),
		"started":         env(started(2, 1, "w2")),
		"heartbeats":      env(&clusterpb.Command{Cmd: &clusterpb.Command_Heartbeats{Heartbeats: &clusterpb.HeartbeatBatch{Heartbeats: []*clusterpb.Heartbeat{{Job: 2, Attempt: 1, WorkerId: "w2", CpuMs: 100}}}}}),
		"finished":        env(&clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: 2, Attempt: 1, WorkerId: "w2", Outcome: pb.Outcome_FAILED, CpuMs: 10, ExitCode: 2, StderrTail: "boom"}}}),
		"cancel":          env(&clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Tenant: "b", Job: 3}}}),
		"expire":          env(&clusterpb.Command{Cmd: &clusterpb.Command_Expire{Expire: &clusterpb.Expire{Job: 2, Attempt: 1, Kind: clusterpb.ExpireKind_ACK}}}),
		"grant-leases":    env(&clusterpb.Command{Cmd: &clusterpb.Command_GrantLeases{GrantLeases: &clusterpb.GrantLeases{}}}),
		"tenant-upsert":   env(&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "b", Tier: pb.Tier_DIAMOND, Multiplier: 3, Caps: &pb.Caps{MaxRunning: 2, MaxRunningSm: 1, MaxInflightCpuMs: 10000, MaxQueued: 5}}}}),
		"tenant-delete":   env(&clusterpb.Command{Cmd: &clusterpb.Command_TenantDelete{TenantDelete: &clusterpb.TenantDelete{Name: "b"}}}),
		"set-config":      env(&clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: cfg}}}),
		"prune":           env(&clusterpb.Command{Cmd: &clusterpb.Command_Prune{Prune: &clusterpb.Prune{}}}),
		"member-upsert":   env(&clusterpb.Command{Cmd: &clusterpb.Command_MemberUpsert{MemberUpsert: &clusterpb.MemberUpsert{Id: "n2", RaftAddr: "127.0.0.1:7441", GrpcAddr: "127.0.0.1:7401", HttpAddr: "127.0.0.1:7481"}}}),
		"member-remove":   env(&clusterpb.Command{Cmd: &clusterpb.Command_MemberRemove{MemberRemove: &clusterpb.MemberRemove{Id: "n1"}}}),
		"worker-drain":    env(&clusterpb.Command{Cmd: &clusterpb.Command_WorkerDrain{WorkerDrain: &clusterpb.WorkerDrain{WorkerId: "w1"}}}),
		"empty-command":   env(&clusterpb.Command{}),
		"submit-class":    env(&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "a", Size: pb.Size_SM, JobClass: pb.Class_HIGH, DeadlineMs: 5000}}}),
		"feature-level":   env(&clusterpb.Command{Cmd: &clusterpb.Command_SetFeatureLevel{SetFeatureLevel: &clusterpb.SetFeatureLevel{Level: Level2}}}),
		"feature-level-9": env(&clusterpb.Command{Cmd: &clusterpb.Command_SetFeatureLevel{SetFeatureLevel: &clusterpb.SetFeatureLevel{Level: 9}}}),
		"feature-level-4": env(&clusterpb.Command{Cmd: &clusterpb.Command_SetFeatureLevel{SetFeatureLevel: &clusterpb.SetFeatureLevel{Level: Level4}}}),
		"submit-group":    env(&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "a", Size: pb.Size_MD, EstCostMs: 700, Group: "cust:42"}}}),
		"tenant-groups":   env(&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "a", Tier: pb.Tier_GOLD, GroupCap: 1, GroupOrder: pb.GroupOrder_GROUP_FAIR, MaxGroups: 3}}}),
		"set-group":       env(&clusterpb.Command{Cmd: &clusterpb.Command_SetGroup{SetGroup: &clusterpb.SetGroup{Tenant: "a", Group: "g", CapKind: clusterpb.GroupCapKind_GROUP_CAP_LIMIT, Limit: 2, AsTenant: true}}}),
		"clock-jump":      {Version: Version, StampMs: 1 << 62, Commands: []*clusterpb.Command{{Cmd: &clusterpb.Command_Prune{Prune: &clusterpb.Prune{}}}}},
		"unknown-version": {Version: Version + 1, Commands: []*clusterpb.Command{{Cmd: &clusterpb.Command_GrantLeases{GrantLeases: &clusterpb.GrantLeases{}}}}},
	}
}

// TestWriteFuzzSeeds writes the seed corpus of FuzzApplyEntry (run with
// BARISTA_WRITE_SEEDS=1 after a change of the command encoding).
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("BARISTA_WRITE_SEEDS") == "" {
		t.Skip("set BARISTA_WRITE_SEEDS=1 to rewrite testdata/fuzz/FuzzApplyEntry")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzApplyEntry")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, env := range seedEnvelopes() {
		b, err := Encode(env)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "seed-"+name), fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "seed-not-protobuf"), []byte("go test fuzz v1\n[]byte(\"\\xff\\xff\\xff\\xff\")\n"), 0o644)
}

// FuzzApplyEntry applies arbitrary bytes as a log entry to a fresh state
// machine and to a seeded one. An entry that does not decode (or carries
// another version) latches the fatal state; one that decodes is applied,
// one result per command. Never a panic; afterwards the state passes its
// own check and survives a snapshot round trip with the same hash.
func FuzzApplyEntry(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, m := range []*FSM{New(), seededFSM(t)} {
			out := m.Apply(&raft.Log{Index: 100, Term: 1, Type: raft.LogCommand, Data: data})
			env, decodeErr := Decode(data)
			if decodeErr != nil {
				var fe *FatalError
				if err, _ := out.(error); !errors.As(err, &fe) || fe.Index != 100 {
					t.Fatalf("an undecodable entry (%v) gave %T %v", decodeErr, out, out)
				}
				select {
				case <-m.Fatal():
				default:
					t.Fatal("an undecodable entry did not latch the fatal state")
				}
				continue
			}
			if err, _ := out.(error); errors.Is(err, ErrApplyPanic) {
				t.Fatalf("applying %v: %v", env, err)
			} else if errors.Is(err, ErrFeatureLevel) {
				continue // a level this build does not know stops the node
			}
			res, ok := out.([]Result)
			if !ok || len(res) != len(env.Commands) {
				t.Fatalf("%d commands gave %T %v", len(env.Commands), out, out)
			}
			if err := m.Verify(); err != nil {
				t.Fatalf("after %v: %v", env, err)
			}
			roundTrip(t, m)
		}
	})
}

// roundTrip encodes the state as a snapshot body, decodes it, and checks
// the hash.
func roundTrip(t *testing.T, m *FSM) {
	t.Helper()
	v, err := m.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	n, err := DecodeState(sfq.NewDecoder(bytes.NewReader(encodeFSM(v))), v.Index)
	if err != nil {
		t.Fatalf("the state does not decode: %v", err)
	}
	if got, index := n.Hash(); got != HashView(v) || index != v.Index {
		t.Fatalf("round trip: hash %x at %d, want %x at %d", got, index, HashView(v), v.Index)
	}
}
