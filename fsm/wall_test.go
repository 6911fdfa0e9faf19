package fsm

import (
	"bytes"
	"fmt"
	"testing"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// wallLog is a job's life in entries stamped with cluster time and the
// leader's wall clock: the wall clock runs 68.321 s ahead from the
// second entry on (the cluster was down that long), and one entry carries
// none (an older leader).
func wallLog(wallAhead int64) []*clusterpb.Envelope {
	const c0 = 1_796_094_462_175
	fin := finished(1, 1, "w1", 900)
	fin.GetFinished().StderrTail, fin.GetFinished().StdoutTail = "err\n", "out\n"
	steps := []struct {
		at, wall int64
		cmd      *clusterpb.Command
	}{
		// Wall times are kept from feature level 2 on.
		{c0, c0, &clusterpb.Command{Cmd: &clusterpb.Command_SetFeatureLevel{SetFeatureLevel: &clusterpb.SetFeatureLevel{Level: Level2}}}},
		{c0, c0, tenant("a", pb.Tier_GOLD)},
		{c0 + 10, c0 + 10 + wallAhead, submit("a", "", 1000, "run")},
		{c0 + 20, c0 + 20 + wallAhead, dispatch("w1", 1)},
		{c0 + 30, 0, started(1, 1, "w1")},
		{c0 + 1030, c0 + 1030 + wallAhead, fin},
	}
	var log []*clusterpb.Envelope
	for _, s := range steps {
		log = append(log, &clusterpb.Envelope{Version: Version, StampMs: s.at, WallMs: s.wall, Commands: []*clusterpb.Command{s.cmd}})
	}
	return log
}

func applyLog(t *testing.T, log []*clusterpb.Envelope) *FSM {
	t.Helper()
	f := New()
	for i, env := range log {
		res, err := f.ApplyEnvelope(uint64(i+1), env)
		if err != nil || res[0].Code != OK {
			t.Fatalf("entry %d: %v %+v", i+1, err, res)
		}
	}
	return f
}

// TestWallTimesAreReplicatedState: a job and its events keep the wall
// clock of the entries that made them beside their cluster time (an entry
// without one shows its cluster time); the ended job keeps its worker and
// both output tails. All of it is in the hash and survives a snapshot
// round trip; the same log under another wall clock hashes differently.
func TestWallTimesAreReplicatedState(t *testing.T) {
	const c0, ahead = 1_796_094_462_175, 68_321
	f := applyLog(t, wallLog(ahead))
	j, _, _ := f.Job(1)
	if j.SubmittedAt != c0+10 || j.SubmittedWall() != c0+10+ahead || j.EndedAt != c0+1030 || j.EndedWall() != c0+1030+ahead {
		t.Fatalf("submitted %d (wall %d), ended %d (wall %d)", j.SubmittedAt, j.SubmittedWall(), j.EndedAt, j.EndedWall())
	}
	if j.State != sfq.Completed || j.Worker != "w1" || j.Result == nil || j.Result.StdoutTail != "out\n" || j.Result.StderrTail != "err\n" {
		t.Fatalf("job %+v result %+v", j, j.Result)
	}
	var got []string
	f.Events(1, func(ev *Event) bool {
		got = append(got, fmt.Sprintf("%s at=%d wall=%d", ev.Kind, int64(ev.At)-c0, int64(ev.Wall())-c0))
		return true
	})
	want := []string{"queued at=10 wall=68331", "assigned at=20 wall=68341", "started at=30 wall=30", "completed at=1030 wall=69351"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %q, want %q", got, want)
	}

	h, _ := f.Hash()
	roundTrip(t, f)
	v, err := f.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	n, err := DecodeState(sfq.NewDecoder(bytes.NewReader(encodeFSM(v))), v.Index)
	if err != nil {
		t.Fatal(err)
	}
	if nj, _, _ := n.Job(1); nj.SubmittedWall() != j.SubmittedWall() || nj.EndedWall() != j.EndedWall() || nj.Worker != "w1" || *nj.Result != *j.Result {
		t.Fatalf("restored job %+v %+v", nj, nj.Result)
	}
	var restored []string
	n.Events(1, func(ev *Event) bool {
		restored = append(restored, fmt.Sprintf("%s at=%d wall=%d", ev.Kind, int64(ev.At)-c0, int64(ev.Wall())-c0))
		return true
	})
	if fmt.Sprint(restored) != fmt.Sprint(want) {
		t.Fatalf("restored events %q", restored)
	}

	for _, c := range []struct {
		ahead int64
		same  bool
	}{{ahead, true}, {ahead + 1, false}, {0, false}} {
		if o, _ := applyLog(t, wallLog(c.ahead)).Hash(); (o == h) != c.same {
			t.Errorf("wall clock %d ms ahead: hash equal %v, want %v", c.ahead, o == h, c.same)
		}
	}
}

// encodeLegacy writes v, a state without members or idempotency keys, as
// FSM state version 2 or 3 did: no event wall times, and the metrics
// section only in version 3. (Its core part is the core's current
// encoding, which carries its own version.)
func encodeLegacy(v *View, version int) []byte {
	var buf bytes.Buffer
	e := sfq.NewEncoder(&buf)
	e.Uvarint(uint64(version))
	if version == stateVersionMetrics {
		v.encodeMetrics(e)
	}
	e.Varint(int64(v.clock))
	e.Bool(v.configured)
	encodeConfig(e, &v.cfg, coreConfigVersion(version))
	e.Uvarint(uint64(len(v.members)))
	encodeWorkers(e, v.workers, v.StateVersion())
	e.Uvarint(v.nextKey)
	e.Uvarint(0)
	e.Uvarint(v.nextEvent)
	e.Uvarint(uint64(v.events.Len()))
	v.events.Each(0, func(seq uint64, ev *eventRecord) bool {
		var b bytes.Buffer
		x := sfq.NewEncoder(&b)
		encodeEvent(x, seq, ev, stateVersion)
		x.Flush()
		e.Flush()
		buf.Write(b.Bytes()[:b.Len()-1]) // without the wall delta (0: one byte)
		return true
	})
	v.sched.Encode(e)
	e.Flush()
	return buf.Bytes()
}

// TestReadsStateVersions2And3: states written before events had wall
// times still load, their events showing their cluster time as wall time,
// version 3's metrics section included; written again they are version 4
// (they are at level 2).
func TestReadsStateVersions2And3(t *testing.T) {
	for _, version := range []int{2, 3} {
		t.Run(fmt.Sprint(version), func(t *testing.T) {
			// Built at level 2: what versions 2 and 3 hold.
			h := &harness{t: t, f: New(), now: 1_000}
			h.one(setLevelCmd(Level2))
			h.one(markedTenant("a", pb.Tier_GOLD, version == 3))
			h.one(submit("a", "", 1000, "run"))
			h.one(dispatch("w1", 1))
			v, err := h.f.Freeze()
			if err != nil {
				t.Fatal(err)
			}
			n, err := DecodeState(sfq.NewDecoder(bytes.NewReader(encodeLegacy(v, version))), v.Index)
			if err != nil {
				t.Fatal(err)
			}
			// No entry carried a wall clock: the state is the same.
			if got, want := func() [32]byte { x, _ := n.Hash(); return x }(), HashView(v); got != want {
				t.Fatalf("version %d loads to hash %x, want %x", version, got, want)
			}
			var kinds []string
			n.Events(1, func(ev *Event) bool {
				if ev.Wall() != ev.At {
					t.Errorf("event %d: wall %d, at %d", ev.Seq, ev.Wall(), ev.At)
				}
				kinds = append(kinds, ev.Kind.String())
				return true
			})
			if fmt.Sprint(kinds) != "[queued assigned]" {
				t.Fatalf("events %v", kinds)
			}
			marked := false
			n.ReadTenants(func(s *sfq.Scheduler, x TenantFlags) { i, _ := s.TenantIndex("a"); marked = x.ExportMetrics(i) })
			if marked != (version == 3) {
				t.Fatalf("export_metrics %v", marked)
			}
			nv, _ := n.Freeze()
			if b := encodeFSM(nv); b[0] != stateVersionLevel2 {
				t.Fatalf("written again as version %d", b[0])
			}
		})
	}
}

// TestEventRecordSize: every queued job has a queued event, so the log
// keeps one in a few bytes: kind, reason and flags, the job and time from
// the block's base, the tenant and the wall-clock delta.
func TestEventRecordSize(t *testing.T) {
	blk := &eventBlock{job: 1_000_000, at: 1_700_000_000_000}
	ev := eventRecord{Job: 1_000_200, At: 1_700_000_004_000, Tenant: 999, Kind: EvQueued,
		wall: sfq.MakeWallDelta(1_700_000_004_012, 1_700_000_004_000)}
	if got := len(appendEvent(nil, blk, &ev)); got != 10 {
		t.Fatalf("a queued event takes %d bytes; want 10", got)
	}
}

// TestEventExitCodeClamped: below Level7 (Apply took any exit code; the
// edge allowed -1..255) an event keeps an exit code outside 16 bits
// clamped, and the job's result keeps it as reported. From Level7 Apply
// refuses it, as the edge does, and nothing changes.
func TestEventExitCodeClamped(t *testing.T) {
	h7 := newHarness(t)
	h7.one(tenant("a", pb.Tier_GOLD))
	h7.one(submit("a", "", 1000, "run"))
	h7.one(dispatch("w1", 1))
	bad := finished(1, 1, "w1", 5)
	bad.GetFinished().Outcome, bad.GetFinished().ExitCode = pb.Outcome_FAILED, 256
	before, _ := h7.f.Hash()
	if r := h7.one(bad); r.Code != Invalid || r.Msg != "exit_code: 256 is out of range -1..255" {
		t.Fatalf("at level 7: %+v", r)
	}
	if after, _ := h7.f.Hash(); after != before {
		t.Fatal("a refused Finished changed the state")
	}
	h := &harness{t: t, f: NewAtLevel(Level6), now: 1_000}
	h.one(tenant("a", pb.Tier_GOLD))
	h.one(submit("a", "", 1000, "run"))
	h.one(dispatch("w1", 1))
	fin := finished(1, 1, "w1", 5)
	fin.GetFinished().Outcome, fin.GetFinished().ExitCode = pb.Outcome_FAILED, -70_000
	if r := h.one(fin); r.Code != OK {
		t.Fatal(r)
	}
	var got []int16
	h.f.Events(1, func(ev *Event) bool { got = append(got, ev.ExitCode); return true })
	if j, _, _ := h.f.Job(1); fmt.Sprint(got) != "[0 0 -32768]" || j.Result.ExitCode != -70_000 {
		t.Fatalf("event exit codes %v, result %d", got, j.Result.ExitCode)
	}
	roundTrip(t, h.f)
}
