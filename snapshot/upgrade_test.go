package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
	"github.com/baristahq/barista/snapshot/scenario"
)

// dumpState lists every job, tenant and event of f, one per line. With
// endedWorkers false, a job that ended on a worker is listed without it:
// builds before snapshot format 3 did not keep it.
func dumpState(f *fsm.FSM, endedWorkers bool) []string {
	var out []string
	f.Read(func(s *sfq.Scheduler) {
		s.Tenants(func(i uint32, t *sfq.Tenant) bool {
			out = append(out, fmt.Sprintf("tenant %d %+v", i, *t))
			return true
		})
		s.Jobs(0, func(j *sfq.Job) bool {
			c := *j
			if !endedWorkers && c.State.Terminal() {
				c.Worker = ""
			}
			res := c.Result
			c.Result = nil
			line := fmt.Sprintf("job %q", fmt.Sprintf("%+v", c))
			if res != nil {
				line += fmt.Sprintf(" result %+v", *res)
			}
			out = append(out, line)
			return true
		})
	})
	f.Events(0, func(ev *fsm.Event) bool {
		out = append(out, fmt.Sprintf("event %+v", *ev))
		return true
	})
	return out
}

// sameState checks that a state loaded from an older snapshot is the
// state the same commands build today, but for the worker the jobs that
// ended on a worker keep now (endedOnWorker of them): the older build
// cleared it.
func sameState(t *testing.T, what string, loaded, replayed *fsm.FSM, endedOnWorker int) {
	t.Helper()
	got, want := dumpState(loaded, true), dumpState(replayed, false)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s loads to\n%s\nthe same commands build\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	diff := 0
	for i, l := range dumpState(replayed, true) {
		if l != want[i] {
			diff++
		}
	}
	if diff != endedOnWorker {
		t.Fatalf("%s: %d ended jobs keep their worker today, want %d", what, diff, endedOnWorker)
	}
}

// fixture is a snapshot file an older build wrote: its format, the index
// it was taken at, the feature level it holds, and the state hash that
// build reported (the SHA-256 of its state part). Loaded, it hashes alike,
// unless newer says this build holds more of it (format 2: wall times).
type fixture struct {
	file   string
	format byte
	index  uint64
	level  uint32
	hash   string
	newer  bool
}

// load reads the fixture, checks that it is what the older build wrote,
// and loads it into a new state machine, which must be at the fixture's
// index and level and hash as the older build did. It returns the loaded
// machine and the file's bytes.
func (fx fixture) load(t *testing.T) (*fsm.FSM, []byte) {
	t.Helper()
	raw, err := os.ReadFile("testdata/" + fx.file)
	if err != nil {
		t.Fatal(err)
	}
	if raw[len(magic)] != fx.format {
		t.Fatalf("%s is format %d, want %d", fx.file, raw[len(magic)], fx.format)
	}
	state := raw[len(magic)+2 : len(raw)-sha256.Size]
	if sum := sha256.Sum256(state); hex.EncodeToString(sum[:]) != fx.hash {
		t.Fatalf("%s: state hash %x, want %s", fx.file, sum, fx.hash)
	}
	loaded := fsm.New()
	index, err := Read(bytes.NewReader(raw), loaded)
	if err != nil {
		t.Fatalf("reading a format %d snapshot: %v", fx.format, err)
	}
	if h, _ := loaded.Hash(); index != fx.index || loaded.Level() != fx.level || (hex.EncodeToString(h[:]) != fx.hash) != fx.newer {
		t.Fatalf("%s loaded at index %d, level %d, hash %x; want %d, %d, %s", fx.file, index, loaded.Level(), h, fx.index, fx.level, fx.hash)
	}
	return loaded, raw
}

// roundTrip writes f as a snapshot, which must be of format, and reads it
// back into a new machine, which must hold the same state at the same
// level; it returns that machine.
func roundTrip(t *testing.T, f *fsm.FSM, format byte) *fsm.FSM {
	t.Helper()
	b := snapshotBytes(t, f)
	if b[len(magic)] != format {
		t.Fatalf("at level %d: format %d, want %d", f.Level(), b[len(magic)], format)
	}
	again := fsm.New()
	if _, err := Read(bytes.NewReader(b), again); err != nil {
		t.Fatal(err)
	}
	h1, _ := again.Hash()
	h2, _ := f.Hash()
	if h1 != h2 || again.Level() != f.Level() {
		t.Fatalf("a round trip at level %d changed the state (level %d after)", f.Level(), again.Level())
	}
	return again
}

// replayScript runs a scenario script of testdata on a new machine.
func replayScript(t *testing.T, file string) *scenario.Machine {
	t.Helper()
	m := scenario.NewMachine()
	script, err := os.Open("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	defer script.Close()
	if _, err := scenario.Run(script, m, io.Discard, scenario.Options{}); err != nil {
		t.Fatal(err)
	}
	return m
}

// v1StateHash is the state hash the build of snapshot format 1 reported for
// testdata/upgrade-v1.snap (the SHA-256 of its state part).
const v1StateHash = "22a3fb7a595b15af46c6904f37ee8c509b0d2a8ad380b434f707bbe4995b7949"

// TestUpgradeFromV1: a snapshot written by format 1 loads into the current
// build at feature level 1, where it hashes, and is written back, exactly
// as the old build did; raised to level 2 it is the state the same
// commands build today, and both go on alike.
func TestUpgradeFromV1(t *testing.T) {
	// At level 1 this build hashes it as the old build did, and writes it
	// back byte for byte: a voter still on the old build can install it.
	loaded, raw := fixture{"upgrade-v1.snap", 1, 31, fsm.Level1, v1StateHash, false}.load(t)
	if b := snapshotBytes(t, loaded); !bytes.Equal(b, raw) {
		t.Fatalf("written back at level 1: %d bytes, format %d, not the old build's file", len(b), b[len(magic)])
	}
	replayed := replayScript(t, "upgrade-v1.txt")
	// The leader raises the level once every voter runs the new build.
	if res, err := loaded.ApplyEnvelope(32, &clusterpb.Envelope{Version: fsm.Version, StampMs: 1, Commands: []*clusterpb.Command{
		{Cmd: &clusterpb.Command_SetFeatureLevel{SetFeatureLevel: &clusterpb.SetFeatureLevel{Level: fsm.Level2}}}}}); err != nil || res[0].Code != fsm.OK {
		t.Fatalf("raising the level: %v %v", res, err)
	}
	// Job 8 completed on its worker: a build of format 1 did not keep it.
	sameState(t, "a format 1 snapshot", loaded, replayed.F, 1)

	// Both go on alike, with the features format 1 did not have.
	more := "at 50s\ntenant gold max_class=critical deadlines=on\nsubmit gold size=md cost=1s class=critical\n" +
		"submit gold size=sm cost=1s deadline=10s\ndispatch md worker=u1\ndispatch md worker=u2\ndispatch md worker=u3\nfinish 1 cpu=1s\nshow job 1\nshow tenant gold class=critical\n"
	var out1, out2 bytes.Buffer
	on := &scenario.Machine{F: loaded}
	scenario.Run(strings.NewReader(more), on, &out1, scenario.Options{})
	scenario.Run(strings.NewReader(more), replayed, &out2, scenario.Options{})
	// (The hash lines differ: the two machines numbered their dispatch
	// credits differently.)
	if strings.Split(out1.String(), "hash=")[0] != strings.Split(out2.String(), "hash=")[0] {
		t.Fatalf("after the upgrade:\n%s\nreplayed:\n%s", out1.String(), out2.String())
	}
	if !strings.Contains(out1.String(), "dispatch 1 tenant=gold job=10 size=md") {
		t.Fatalf("the critical job did not go first:\n%s", out1.String())
	}

	// At level 2 it is written again in format 3, the format of level 2.
	roundTrip(t, loaded, formatLevel2)
}

// TestUnknownFormatRefused: a format this build does not know is refused
// and named.
func TestUnknownFormatRefused(t *testing.T) {
	raw, err := os.ReadFile("testdata/upgrade-v1.snap")
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte(nil), raw...)
	bad[len(magic)] = FormatVersion + 1
	_, err = Read(bytes.NewReader(bad), fsm.New())
	if err == nil || !strings.Contains(err.Error(), "unsupported snapshot format version 8 (this build reads 1 to 7)") {
		t.Fatalf("got %v", err)
	}
}

// v2StateHash is the state hash the build of snapshot format 2 reported
// for testdata/upgrade-v2.snap.
const v2StateHash = "b21e65d5417ffc2428a443e80a611710f9fed19775339b625e29308da0909857"

// TestUpgradeFromV2: a snapshot written by format 2 loads into the current
// build as the state the same commands build today without wall clocks:
// its jobs and events show their cluster times as wall times, its results
// have no stdout tail, its ended jobs no worker. Both go on alike, and
// what the loaded state does next gets wall times like any other.
func TestUpgradeFromV2(t *testing.T) {
	loaded, _ := fixture{"upgrade-v2.snap", 2, 28, fsm.Level2, v2StateHash, true}.load(t)
	replayed := replayScript(t, "upgrade-v2.txt")
	// Jobs 1 and 3 completed, 2 was cancelled on its worker.
	sameState(t, "a format 2 snapshot", loaded, replayed.F, 3)
	loaded.Read(func(s *sfq.Scheduler) {
		s.Jobs(0, func(j *sfq.Job) bool {
			if j.SubmittedWall() != j.SubmittedAt || j.EndedWall() != j.EndedAt || (j.Result != nil && j.Result.StdoutTail != "") {
				t.Errorf("job %d: submitted %d (wall %d), ended %d (wall %d), result %+v", j.ID, j.SubmittedAt, j.SubmittedWall(), j.EndedAt, j.EndedWall(), j.Result)
			}
			return true
		})
	})

	// The loaded state goes on: a run finished by a new worker keeps the
	// wall clock of its entry, its worker and its stdout tail.
	const wall = 41_000 + 68_321 // the wall clock 68 s ahead
	fin := &clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: 5, Attempt: 2, WorkerId: "lg-8",
		Outcome: pb.Outcome_OK, CpuMs: 1000, StdoutTail: "done\n"}}}
	res, err := loaded.ApplyEnvelope(29, &clusterpb.Envelope{Version: fsm.Version, StampMs: 41_000, WallMs: wall, Commands: []*clusterpb.Command{fin}})
	if err != nil || res[0].Err() != nil {
		t.Fatalf("finish job 5: %v %v", err, res)
	}
	j, _, _ := loaded.Job(5)
	if j.State != sfq.Completed || j.EndedAt != 41_000 || j.EndedWall() != wall || j.Worker != "lg-8" || j.Result.StdoutTail != "done\n" || j.SubmittedWall() != j.SubmittedAt {
		t.Fatalf("job 5 after the upgrade: %+v %+v", j, j.Result)
	}

	// Written again, it is of the format of level 2 and reads back alike.
	roundTrip(t, loaded, formatLevel2)
}

// v3StateHash is the state hash the build of snapshot format 3 (feature
// level 2) reported for testdata/upgrade-v3.snap.
const v3StateHash = "4f8c1a10288aadb2e94e5e96a4e90e4e24f6c6df791105c898269a58a2407e27"

// TestUpgradeFromV3: a snapshot written by format 3 loads into the current
// build at feature level 2, where it hashes, and is written back, exactly
// as the build of format 3 did, and where webhooks are refused; raised to
// level 3 it is the state the same commands build today, takes an
// endpoint, and is written as format 4.
func TestUpgradeFromV3(t *testing.T) {
	loaded, raw := fixture{"upgrade-v3.snap", 3, 28, fsm.Level2, v3StateHash, false}.load(t)
	if b := snapshotBytes(t, loaded); !bytes.Equal(b, raw) {
		t.Fatalf("written back at level 2: %d bytes, format %d, not the old build's file", len(b), b[len(magic)])
	}
	set := &clusterpb.Command{Cmd: &clusterpb.Command_WebhookSet{WebhookSet: &clusterpb.WebhookSet{Tenant: "gold", Url: "https://hooks.example.com/", KeyId: 1}}}
	apply := func(index uint64, cmd *clusterpb.Command) fsm.Result {
		t.Helper()
		res, err := loaded.ApplyEnvelope(index, &clusterpb.Envelope{Version: fsm.Version, StampMs: 1, Commands: []*clusterpb.Command{cmd}})
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	if r := apply(29, set); r.Code != fsm.FailedPrecondition {
		t.Fatalf("a webhook at level 2: %+v", r)
	}

	replayed := replayScript(t, "upgrade-v3.txt")
	if r := apply(30, &clusterpb.Command{Cmd: &clusterpb.Command_SetFeatureLevel{SetFeatureLevel: &clusterpb.SetFeatureLevel{Level: fsm.Level3}}}); r.Code != fsm.OK || loaded.Level() != fsm.Level3 {
		t.Fatalf("raising the level: %+v", r)
	}
	if got, want := dumpState(loaded, true), dumpState(replayed.F, true); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("a format 3 snapshot loads to\n%s\nthe same commands build\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if h1, h2 := func() [32]byte { h, _ := loaded.Hash(); return h }(), func() [32]byte { h, _ := replayed.F.Hash(); return h }(); h1 != h2 {
		t.Fatalf("raised to level 3: hash %x, the same commands build %x", h1, h2)
	}
	if r := apply(31, set); r.Code != fsm.OK || !r.Created {
		t.Fatalf("a webhook at level 3: %+v", r)
	}
	if again := roundTrip(t, loaded, formatLevel3); !again.HasWebhooks() {
		t.Fatal("the webhook did not survive the round trip")
	}
}

// beforeGroupsStateHash is the state hash the build before groups (feature
// level 3, snapshot format 4) reported for testdata/before-groups-v4.snap.
const beforeGroupsStateHash = "8fc450c21deb5a12521e6148a3162c987d49250b2f0023134ab9f718ad0a2567"

// beforeGroupsWall is what the build before groups applied after the
// script of testdata/before-groups-v4.txt, at indexes 29 to 32: entries
// with a wall clock 71 s ahead, one ending a job with a stdout tail, the
// last setting a webhook.
func beforeGroupsWall() []*clusterpb.Envelope {
	return []*clusterpb.Envelope{
		{Version: fsm.Version, StampMs: 4000, WallMs: 4000 + 71_234, Commands: []*clusterpb.Command{{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "idle", Size: pb.Size_MD, EstCostMs: 1500, JobType: "late"}}}}},
		{Version: fsm.Version, StampMs: 5000, WallMs: 5000 + 71_300, Commands: []*clusterpb.Command{{Cmd: &clusterpb.Command_Started{Started: &clusterpb.Started{Job: 2, Attempt: 1, WorkerId: "md-6"}}}}},
		{Version: fsm.Version, StampMs: 6000, WallMs: 6000 + 71_400, Commands: []*clusterpb.Command{{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: 2, Attempt: 1, WorkerId: "md-6",
			Outcome: pb.Outcome_OK, CpuMs: 1100, StdoutTail: "rendered\n", StderrTail: "warn\n"}}}}},
		{Version: fsm.Version, StampMs: 6500, WallMs: 6500 + 71_400, Commands: []*clusterpb.Command{{Cmd: &clusterpb.Command_WebhookSet{WebhookSet: &clusterpb.WebhookSet{Tenant: "gold",
			Url: "https://hooks.example.com/gold", KeyId: 1}}}}},
	}
}

// TestUpgradeBeforeGroups: a snapshot written by the build before groups
// (feature level 3, format 4, a webhook included) loads into this build at
// level 3 as the state the same entries build here, every queued or live
// job in its tenant's unnamed group; at level 3 this build writes it back
// byte for byte (same hash) and refuses everything of groups. Raised to
// level 4, the loaded and the replayed states go on alike with groups,
// caps and both group orders, and are written as format 5, which reads
// back to the same state.
func TestUpgradeBeforeGroups(t *testing.T) {
	loaded, raw := fixture{"before-groups-v4.snap", 4, 32, fsm.Level3, beforeGroupsStateHash, false}.load(t)
	replayed := replayScript(t, "before-groups-v4.txt")
	for i, env := range beforeGroupsWall() {
		if res, err := replayed.F.ApplyEnvelope(uint64(29+i), env); err != nil || res[0].Err() != nil {
			t.Fatalf("entry %d: %v %v", 29+i, err, res)
		}
	}
	if got, want := strings.Join(dumpState(loaded, true), "\n"), strings.Join(dumpState(replayed.F, true), "\n"); got != want {
		t.Fatalf("a format 4 snapshot from before groups loads to\n%s\nthe same entries build\n%s", got, want)
	}
	h1, _ := loaded.Hash()
	if h2, _ := replayed.F.Hash(); h1 != h2 {
		t.Fatalf("loaded %x, replayed %x", h1, h2)
	}
	// Written back at level 3: the very bytes the build before groups wrote.
	if b := snapshotBytes(t, loaded); !bytes.Equal(b, raw) {
		t.Fatalf("rewritten at level 3: %d bytes, format %d; not the fixture's %d bytes", len(b), b[len(magic)], len(raw))
	}
	var groups []string
	loaded.Read(func(s *sfq.Scheduler) {
		s.Tenants(func(_ uint32, tn *sfq.Tenant) bool {
			s.Groups(tn.Name, func(g *sfq.Group) bool {
				groups = append(groups, fmt.Sprintf("%s/%q running=%d queued=%d", tn.Name, g.Name, g.Running, g.Queued))
				return true
			})
			return true
		})
	})
	if got := strings.Join(groups, " "); got != `gold/"" running=1 queued=1 free/"" running=1 queued=3 idle/"" running=1 queued=1` {
		t.Fatalf("groups after the upgrade: %s", got)
	}
	// At level 3, groups are refused and change nothing.
	var refused bytes.Buffer
	scenario.Run(strings.NewReader("submit gold size=md cost=1s group=a\ngroup gold a cap=1\n"), &scenario.Machine{F: loaded}, &refused, scenario.Options{})
	if n := strings.Count(refused.String(), "FAILED_PRECONDITION"); n != 2 {
		t.Fatalf("at level 3:\n%s", refused.String())
	}
	if h, _ := loaded.Hash(); h != h1 {
		t.Fatal("a refused group command changed the state")
	}

	more := "at 50s\nlevel 4\ntenant gold tier=gold max_class=critical deadlines=on cap_high=1 deadline_cap=1 group_cap=1 group_order=fair\n" +
		"tenant free tier=free inflight_cpu=3s group_order=fair\n" +
		"submit gold x2 size=md cost=1s group=a\nsubmit gold x2 size=md cost=1s group=b\nsubmit free x2 size=md cost=1s group=c\n" +
		"group gold b cap=2\n" + strings.Repeat("dispatch md worker=u%d\n", 6) + "finish 7 cpu=1s\nfinish 3 cpu=1s\n" +
		strings.Repeat("dispatch md worker=v%d\n", 3) + "show group gold a\nshow group gold b\nshow tenant free\n"
	more = numbered(more)
	var out1, out2 bytes.Buffer
	scenario.Run(strings.NewReader(more), &scenario.Machine{F: loaded}, &out1, scenario.Options{})
	scenario.Run(strings.NewReader(more), replayed, &out2, scenario.Options{})
	// (The hashes differ: each Machine numbers its own workers' credits.)
	if a, b := strings.Split(out1.String(), "hash=")[0], strings.Split(out2.String(), "hash=")[0]; a != b || strings.Contains(a, "error") {
		t.Fatalf("after the upgrade:\n%s\nreplayed:\n%s", out1.String(), out2.String())
	}
	if !strings.Contains(out1.String(), "group=a") || !strings.Contains(out1.String(), "group gold b cap=2") {
		t.Fatalf("the groups did not run:\n%s", out1.String())
	}
	t.Logf("after the upgrade:\n%s", out1.String())

	// At level 4 it is written as format 5 and reads back alike.
	roundTrip(t, loaded, formatLevel4)
}

// numbered replaces each %d of a script by 1, 2, 3, ... in order.
func numbered(script string) string {
	var b strings.Builder
	for i, part := range strings.Split(script, "%d") {
		if i > 0 {
			fmt.Fprintf(&b, "%d", i)
		}
		b.WriteString(part)
	}
	return b.String()
}

// beforeLeversStateHash is the state hash the build before the levers
// (feature level 4, snapshot format 5) reported for
// testdata/before-levers-v5.snap.
const beforeLeversStateHash = "860307b9b63cfe07fd3ad19b201d655c1dbaafe53d36d6b8c8bae2c5382e1639"

// beforeLeversWall is what the build before the levers applied after the
// script of testdata/before-levers-v5.txt, at indexes 34 to 37.
func beforeLeversWall() []*clusterpb.Envelope {
	return []*clusterpb.Envelope{
		{Version: fsm.Version, StampMs: 4000, WallMs: 4000 + 71_234, Commands: []*clusterpb.Command{{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "idle", Size: pb.Size_MD, EstCostMs: 1500, JobType: "late", Group: "z"}}}}},
		{Version: fsm.Version, StampMs: 5000, WallMs: 5000 + 71_300, Commands: []*clusterpb.Command{{Cmd: &clusterpb.Command_Started{Started: &clusterpb.Started{Job: 2, Attempt: 1, WorkerId: "md-7"}}}}},
		{Version: fsm.Version, StampMs: 6000, WallMs: 6000 + 71_400, Commands: []*clusterpb.Command{{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: 2, Attempt: 1, WorkerId: "md-7",
			Outcome: pb.Outcome_OK, CpuMs: 1100, StdoutTail: "rendered\n", StderrTail: "warn\n"}}}}},
		{Version: fsm.Version, StampMs: 6500, WallMs: 6500 + 71_400, Commands: []*clusterpb.Command{{Cmd: &clusterpb.Command_WebhookSet{WebhookSet: &clusterpb.WebhookSet{Tenant: "gold",
			Url: "https://hooks.example.com/gold", KeyId: 1}}}}},
	}
}

// TestUpgradeBeforeLevers: a snapshot written by the build before the
// levers (feature level 4, format 5: groups, classes, deadlines, learned
// estimates, a webhook) loads into this build at level 4 as the state the
// same entries build here, hashes as that build did, and is written back
// byte for byte; the commands and settings of level 5 (submit_rate, a
// delay, an expiry, a pause, a rate limit, a redrive) are refused and
// change nothing.
// Raised to level 5 it takes them and is written as format 6, which reads
// back to the same state.
func TestUpgradeBeforeLevers(t *testing.T) {
	loaded, raw := fixture{"before-levers-v5.snap", 5, 37, fsm.Level4, beforeLeversStateHash, false}.load(t)
	replayed := replayScript(t, "before-levers-v5.txt")
	for i, env := range beforeLeversWall() {
		if res, err := replayed.F.ApplyEnvelope(uint64(34+i), env); err != nil || res[0].Err() != nil {
			t.Fatalf("entry %d: %v %v", 34+i, err, res)
		}
	}
	if got, want := strings.Join(dumpState(loaded, true), "\n"), strings.Join(dumpState(replayed.F, true), "\n"); got != want {
		t.Fatalf("a format 5 snapshot from before the levers loads to\n%s\nthe same entries build\n%s", got, want)
	}
	h1, _ := loaded.Hash()
	if h2, _ := replayed.F.Hash(); h1 != h2 {
		t.Fatalf("loaded %x, replayed %x", h1, h2)
	}
	if b := snapshotBytes(t, loaded); !bytes.Equal(b, raw) {
		t.Fatalf("rewritten at level 4: %d bytes, format %d; not the fixture's %d bytes", len(b), b[len(magic)], len(raw))
	}
	apply := func(index uint64, cmd *clusterpb.Command) fsm.Result {
		t.Helper()
		// At the last entry's cluster time: a refusal changes nothing.
		res, err := loaded.ApplyEnvelope(index, &clusterpb.Envelope{Version: fsm.Version, StampMs: 6500, Commands: []*clusterpb.Command{cmd}})
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	cfg := fsm.ConfigToPB(loaded.Config())
	cfg.SubmitRateN, cfg.SubmitRatePeriodMs = 100, 1000
	rate := &clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: cfg}}}
	for i, c := range []*clusterpb.Command{rate,
		{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "gold", Size: pb.Size_SM, EstCostMs: 1000, DelayMs: 5000}}},
		{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "gold", Size: pb.Size_SM, EstCostMs: 1000, ExpireMs: 5000}}},
		{Cmd: &clusterpb.Command_Pause{Pause: &clusterpb.Pause{Tenant: "gold"}}},
		{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "free", Tier: pb.Tier_FREE, RateN: 1, RatePeriodMs: 1000}}},
		{Cmd: &clusterpb.Command_Redrive{Redrive: &clusterpb.BulkJobs{Tenant: "gold", Jobs: []uint64{6}}}},
	} {
		if r := apply(38, c); r.Code != fsm.FailedPrecondition || !strings.Contains(r.Msg, "needs cluster feature level 5; the cluster is at level 4") {
			t.Fatalf("command %d of level 5 at level 4: %+v", i, r)
		}
	}
	if h, _ := loaded.Hash(); h != h1 {
		t.Fatal("a refused command of level 5 changed the state")
	}

	if r := apply(39, &clusterpb.Command{Cmd: &clusterpb.Command_SetFeatureLevel{SetFeatureLevel: &clusterpb.SetFeatureLevel{Level: fsm.Level5}}}); r.Code != fsm.OK || loaded.Level() != fsm.Level5 {
		t.Fatalf("raising the level: %+v", r)
	}
	if r := apply(40, rate); r.Code != fsm.OK || loaded.Config().SubmitRate.N != 100 {
		t.Fatalf("submit_rate at level 5: %+v", r)
	}
	again := roundTrip(t, loaded, formatLevel5)
	if again.Config().SubmitRate != loaded.Config().SubmitRate || !again.HasWebhooks() {
		t.Fatalf("after the round trip: %+v, webhooks %t", again.Config().SubmitRate, again.HasWebhooks())
	}
}

// beforeQuotasStateHash is the state hash the build before feature level
// 6 reported for testdata/before-quotas-v6.snap.
const beforeQuotasStateHash = "1b968812099a9f14264a8bcf7345c5670b2954b0ea2f145097ed1481ac2e5dd5"

// TestUpgradeToLevel6: a snapshot the build before feature level 6 wrote
// at level 5 (format 6: delays, expiry, retry backoff, pauses, rate
// limits, a redrive, dead letters) loads into this build at level 5,
// hashes as that build did and is written back byte for byte; the quotas
// by default and a permanent failure are refused or mean nothing there,
// and change nothing. Raised to level 6 it has no quotas until they are
// set, takes them, and is written as format 7, which reads back alike.
func TestUpgradeToLevel6(t *testing.T) {
	loaded, raw := fixture{"before-quotas-v6.snap", 6, 34, fsm.Level5, beforeQuotasStateHash, false}.load(t)
	if b := snapshotBytes(t, loaded); !bytes.Equal(b, raw) {
		t.Fatalf("rewritten at level 5: %d bytes, format %d; not the fixture's %d bytes", len(b), b[len(magic)], len(raw))
	}
	if c := loaded.Config(); c.DefaultMaxQueued != 0 || c.MaxQueuedBytes != 0 {
		t.Fatalf("quotas of a level-5 state: %d jobs, %d bytes", c.DefaultMaxQueued, c.MaxQueuedBytes)
	}
	h1, _ := loaded.Hash()
	apply := func(index uint64, cmd *clusterpb.Command) fsm.Result {
		t.Helper()
		res, err := loaded.ApplyEnvelope(index, &clusterpb.Envelope{Version: fsm.Version, StampMs: 8000, Commands: []*clusterpb.Command{cmd}})
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	cfg := fsm.ConfigToPB(loaded.Config())
	cfg.DefaultMaxQueued, cfg.MaxQueuedBytes = 1, 100
	quotas := &clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: cfg}}}
	if r := apply(35, quotas); r.Code != fsm.FailedPrecondition || !strings.Contains(r.Msg, "default_max_queued needs cluster feature level 6; the cluster is at level 5") {
		t.Fatalf("quotas at level 5: %+v", r)
	}
	if h, _ := loaded.Hash(); h != h1 {
		t.Fatal("a refused command of level 6 changed the state")
	}
	if r := apply(36, &clusterpb.Command{Cmd: &clusterpb.Command_SetFeatureLevel{SetFeatureLevel: &clusterpb.SetFeatureLevel{Level: fsm.Level6}}}); r.Code != fsm.OK || loaded.Level() != fsm.Level6 {
		t.Fatalf("raising the level: %+v", r)
	}
	if c := loaded.Config(); c.DefaultMaxQueued != 0 || c.MaxQueuedBytes != 0 {
		t.Fatalf("quotas once raised: %d jobs, %d bytes (none until set)", c.DefaultMaxQueued, c.MaxQueuedBytes)
	}
	if r := apply(37, quotas); r.Code != fsm.OK || loaded.Config().DefaultMaxQueued != 1 {
		t.Fatalf("quotas at level 6: %+v", r)
	}
	again := roundTrip(t, loaded, FormatVersion)
	if c := again.Config(); c.DefaultMaxQueued != 1 || c.MaxQueuedBytes != 100 || again.Level() != fsm.Level6 {
		t.Fatalf("after the round trip: level %d, %d jobs, %d bytes", again.Level(), c.DefaultMaxQueued, c.MaxQueuedBytes)
	}
}
