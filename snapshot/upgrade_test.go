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

// v1StateHash is the state hash the build of snapshot format 1 reported for
// testdata/upgrade-v1.snap (the SHA-256 of its state part).
const v1StateHash = "22a3fb7a595b15af46c6904f37ee8c509b0d2a8ad380b434f707bbe4995b7949"

// TestUpgradeFromV1: a snapshot written by format 1 loads into the current
// build at feature level 1, where it hashes, and is written back, exactly
// as the old build did; raised to level 2 it is the state the same
// commands build today, and both go on alike.
func TestUpgradeFromV1(t *testing.T) {
	raw, err := os.ReadFile("testdata/upgrade-v1.snap")
	if err != nil {
		t.Fatal(err)
	}
	if raw[len(magic)] != 1 {
		t.Fatalf("fixture is format %d, want 1", raw[len(magic)])
	}
	// The fixture is what the old build wrote: its state part hashes to
	// the hash that build reported (header: magic, version 1, index 31).
	state := raw[len(magic)+2 : len(raw)-sha256.Size]
	if sum := sha256.Sum256(state); hex.EncodeToString(sum[:]) != v1StateHash {
		t.Fatalf("fixture state hash %x, want %s", sum, v1StateHash)
	}

	loaded := fsm.New()
	index, err := Read(bytes.NewReader(raw), loaded)
	if err != nil {
		t.Fatalf("reading a format 1 snapshot: %v", err)
	}
	if index != 31 {
		t.Fatalf("index %d, want 31", index)
	}
	// At level 1 this build hashes it as the old build did, and writes it
	// back byte for byte: a voter still on the old build can install it.
	if h, _ := loaded.Hash(); loaded.Level() != fsm.Level1 || hex.EncodeToString(h[:]) != v1StateHash {
		t.Fatalf("loaded at level %d with hash %x, want level 1 and %s", loaded.Level(), h, v1StateHash)
	}
	v1, err := loaded.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	var back bytes.Buffer
	if _, err := Write(&back, v1); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.Bytes(), raw) {
		t.Fatalf("written back at level 1: %d bytes, format %d, not the old build's file", back.Len(), back.Bytes()[len(magic)])
	}

	replayed := scenario.NewMachine()
	script, err := os.Open("testdata/upgrade-v1.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer script.Close()
	if _, err := scenario.Run(script, replayed, io.Discard, scenario.Options{}); err != nil {
		t.Fatal(err)
	}
	// The leader raises the level once every voter runs the new build.
	if res, err := loaded.ApplyEnvelope(32, &pb.Envelope{Version: fsm.Version, StampMs: 1, Commands: []*pb.Command{
		{Cmd: &pb.Command_SetFeatureLevel{SetFeatureLevel: &pb.SetFeatureLevel{Level: fsm.Level2}}}}}); err != nil || res[0].Code != fsm.OK {
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
	v, err := loaded.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := Write(&buf, v); err != nil {
		t.Fatal(err)
	}
	if got := buf.Bytes()[len(magic)]; got != 3 {
		t.Fatalf("rewritten snapshot is format %d", got)
	}
	again := fsm.New()
	if _, err := Read(&buf, again); err != nil {
		t.Fatal(err)
	}
	if a, b := again.Hash(); a != func() [32]byte { h, _ := loaded.Hash(); return h }() {
		t.Fatalf("round trip changed the state (index %d)", b)
	}
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
	if err == nil || !strings.Contains(err.Error(), "unsupported snapshot format version 7 (this build reads 1 to 6)") {
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
	raw, err := os.ReadFile("testdata/upgrade-v2.snap")
	if err != nil {
		t.Fatal(err)
	}
	if raw[len(magic)] != 2 {
		t.Fatalf("fixture is format %d, want 2", raw[len(magic)])
	}
	state := raw[len(magic)+2 : len(raw)-sha256.Size]
	if sum := sha256.Sum256(state); hex.EncodeToString(sum[:]) != v2StateHash {
		t.Fatalf("fixture state hash %x, want %s", sum, v2StateHash)
	}
	loaded := fsm.New()
	index, err := Read(bytes.NewReader(raw), loaded)
	if err != nil {
		t.Fatalf("reading a format 2 snapshot: %v", err)
	}
	if index != 28 {
		t.Fatalf("index %d, want 28", index)
	}
	replayed := scenario.NewMachine()
	script, err := os.Open("testdata/upgrade-v2.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer script.Close()
	if _, err := scenario.Run(script, replayed, io.Discard, scenario.Options{}); err != nil {
		t.Fatal(err)
	}
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
	fin := &pb.Command{Cmd: &pb.Command_Finished{Finished: &pb.Finished{Job: 5, Attempt: 2, WorkerId: "lg-8",
		Outcome: pb.Outcome_OK, CpuMs: 1000, StdoutTail: "done\n"}}}
	res, err := loaded.ApplyEnvelope(29, &pb.Envelope{Version: fsm.Version, StampMs: 41_000, WallMs: wall, Commands: []*pb.Command{fin}})
	if err != nil || res[0].Err() != nil {
		t.Fatalf("finish job 5: %v %v", err, res)
	}
	j, _, _ := loaded.Job(5)
	if j.State != sfq.Completed || j.EndedAt != 41_000 || j.EndedWall() != wall || j.Worker != "lg-8" || j.Result.StdoutTail != "done\n" || j.SubmittedWall() != j.SubmittedAt {
		t.Fatalf("job 5 after the upgrade: %+v %+v", j, j.Result)
	}

	// Written again, it is of the format of level 2 and reads back alike.
	v, err := loaded.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := Write(&buf, v); err != nil {
		t.Fatal(err)
	}
	if got := buf.Bytes()[len(magic)]; got != 3 {
		t.Fatalf("rewritten snapshot is format %d", got)
	}
	again := fsm.New()
	if _, err := Read(&buf, again); err != nil {
		t.Fatal(err)
	}
	h1, _ := again.Hash()
	h2, _ := loaded.Hash()
	if h1 != h2 {
		t.Fatal("round trip changed the state")
	}
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
	raw, err := os.ReadFile("testdata/upgrade-v3.snap")
	if err != nil {
		t.Fatal(err)
	}
	if raw[len(magic)] != 3 {
		t.Fatalf("fixture is format %d, want 3", raw[len(magic)])
	}
	state := raw[len(magic)+2 : len(raw)-sha256.Size]
	if sum := sha256.Sum256(state); hex.EncodeToString(sum[:]) != v3StateHash {
		t.Fatalf("fixture state hash %x, want %s", sum, v3StateHash)
	}
	loaded := fsm.New()
	index, err := Read(bytes.NewReader(raw), loaded)
	if err != nil {
		t.Fatalf("reading a format 3 snapshot: %v", err)
	}
	if index != 28 {
		t.Fatalf("index %d, want 28", index)
	}
	if h, _ := loaded.Hash(); loaded.Level() != fsm.Level2 || hex.EncodeToString(h[:]) != v3StateHash {
		t.Fatalf("loaded at level %d with hash %x, want level 2 and %s", loaded.Level(), h, v3StateHash)
	}
	v2, err := loaded.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	var back bytes.Buffer
	if _, err := Write(&back, v2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.Bytes(), raw) {
		t.Fatalf("written back at level 2: %d bytes, format %d, not the old build's file", back.Len(), back.Bytes()[len(magic)])
	}
	set := &pb.Command{Cmd: &pb.Command_WebhookSet{WebhookSet: &pb.WebhookSet{Tenant: "gold", Url: "https://hooks.example.com/", KeyId: 1}}}
	apply := func(index uint64, cmd *pb.Command) fsm.Result {
		t.Helper()
		res, err := loaded.ApplyEnvelope(index, &pb.Envelope{Version: fsm.Version, StampMs: 1, Commands: []*pb.Command{cmd}})
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	if r := apply(29, set); r.Code != fsm.FailedPrecondition {
		t.Fatalf("a webhook at level 2: %+v", r)
	}

	replayed := scenario.NewMachine()
	script, err := os.Open("testdata/upgrade-v3.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer script.Close()
	if _, err := scenario.Run(script, replayed, io.Discard, scenario.Options{}); err != nil {
		t.Fatal(err)
	}
	if r := apply(30, &pb.Command{Cmd: &pb.Command_SetFeatureLevel{SetFeatureLevel: &pb.SetFeatureLevel{Level: fsm.Level3}}}); r.Code != fsm.OK || loaded.Level() != fsm.Level3 {
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

	v, err := loaded.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := Write(&buf, v); err != nil {
		t.Fatal(err)
	}
	if got := buf.Bytes()[len(magic)]; got != formatLevel3 || formatLevel3 != 4 {
		t.Fatalf("rewritten snapshot is format %d", got)
	}
	again := fsm.New()
	if _, err := Read(&buf, again); err != nil {
		t.Fatal(err)
	}
	h1, _ := again.Hash()
	h2, _ := loaded.Hash()
	if h1 != h2 || again.Level() != fsm.Level3 || !again.HasWebhooks() {
		t.Fatalf("round trip: same hash %t, level %d, webhooks %t", h1 == h2, again.Level(), again.HasWebhooks())
	}
}

// beforeGroupsStateHash is the state hash the build before groups (feature
// level 3, snapshot format 4) reported for testdata/before-groups-v4.snap.
const beforeGroupsStateHash = "8fc450c21deb5a12521e6148a3162c987d49250b2f0023134ab9f718ad0a2567"

// beforeGroupsWall is what the build before groups applied after the
// script of testdata/before-groups-v4.txt, at indexes 29 to 32: entries
// with a wall clock 71 s ahead, one ending a job with a stdout tail, the
// last setting a webhook.
func beforeGroupsWall() []*pb.Envelope {
	return []*pb.Envelope{
		{Version: fsm.Version, StampMs: 4000, WallMs: 4000 + 71_234, Commands: []*pb.Command{{Cmd: &pb.Command_Submit{Submit: &pb.SubmitJob{Tenant: "idle", Size: pb.Size_MD, EstCostMs: 1500, JobType: "late"}}}}},
		{Version: fsm.Version, StampMs: 5000, WallMs: 5000 + 71_300, Commands: []*pb.Command{{Cmd: &pb.Command_Started{Started: &pb.Started{Job: 2, Attempt: 1, WorkerId: "md-6"}}}}},
		{Version: fsm.Version, StampMs: 6000, WallMs: 6000 + 71_400, Commands: []*pb.Command{{Cmd: &pb.Command_Finished{Finished: &pb.Finished{Job: 2, Attempt: 1, WorkerId: "md-6",
			Outcome: pb.Outcome_OK, CpuMs: 1100, StdoutTail: "rendered\n", StderrTail: "warn\n"}}}}},
		{Version: fsm.Version, StampMs: 6500, WallMs: 6500 + 71_400, Commands: []*pb.Command{{Cmd: &pb.Command_WebhookSet{WebhookSet: &pb.WebhookSet{Tenant: "gold",
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
	raw, err := os.ReadFile("testdata/before-groups-v4.snap")
	if err != nil {
		t.Fatal(err)
	}
	if raw[len(magic)] != 4 {
		t.Fatalf("fixture is format %d, want 4", raw[len(magic)])
	}
	state := raw[len(magic)+2 : len(raw)-sha256.Size]
	if sum := sha256.Sum256(state); hex.EncodeToString(sum[:]) != beforeGroupsStateHash {
		t.Fatalf("fixture state hash %x, want %s", sum, beforeGroupsStateHash)
	}
	loaded := fsm.New()
	index, err := Read(bytes.NewReader(raw), loaded)
	if err != nil {
		t.Fatal(err)
	}
	if index != 32 || loaded.Level() != fsm.Level3 {
		t.Fatalf("index %d level %d, want 32 and 3", index, loaded.Level())
	}
	replayed := scenario.NewMachine()
	script, err := os.Open("testdata/before-groups-v4.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer script.Close()
	if _, err := scenario.Run(script, replayed, io.Discard, scenario.Options{}); err != nil {
		t.Fatal(err)
	}
	for i, env := range beforeGroupsWall() {
		if res, err := replayed.F.ApplyEnvelope(uint64(29+i), env); err != nil || res[0].Err() != nil {
			t.Fatalf("entry %d: %v %v", 29+i, err, res)
		}
	}
	if got, want := strings.Join(dumpState(loaded, true), "\n"), strings.Join(dumpState(replayed.F, true), "\n"); got != want {
		t.Fatalf("a format 4 snapshot from before groups loads to\n%s\nthe same entries build\n%s", got, want)
	}
	h1, _ := loaded.Hash()
	h2, _ := replayed.F.Hash()
	if h1 != h2 || hex.EncodeToString(h1[:]) != beforeGroupsStateHash {
		t.Fatalf("loaded %x, replayed %x, the build before groups %s", h1, h2, beforeGroupsStateHash)
	}
	// Written back at level 3: the very bytes the build before groups wrote.
	v, err := loaded.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := Write(&buf, v); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), raw) {
		t.Fatalf("rewritten at level 3: %d bytes, format %d; not the fixture's %d bytes", buf.Len(), buf.Bytes()[len(magic)], len(raw))
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
	v, err = loaded.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if _, err := Write(&buf, v); err != nil {
		t.Fatal(err)
	}
	if got := buf.Bytes()[len(magic)]; got != formatLevel4 || formatLevel4 != 5 {
		t.Fatalf("at level 4: format %d", got)
	}
	again := fsm.New()
	if _, err := Read(&buf, again); err != nil {
		t.Fatal(err)
	}
	a, _ := again.Hash()
	b, _ := loaded.Hash()
	if a != b || again.Level() != fsm.Level4 {
		t.Fatalf("a round trip of a state with groups changed it (level %d)", again.Level())
	}
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
