package sfq

import (
	"math"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestWallDelta(t *testing.T) {
	const at = Time(1_796_094_462_175) // a cluster time of 2026
	day := Time(24 * 3600 * 1000)
	for _, c := range []struct {
		name     string
		wall, at Time
		want     Time // the wall time read back
		delta    WallDelta
	}{
		{"unknown wall clock", 0, at, at, 0},
		{"same", at, at, at, 0},
		{"ahead by 68.3 s (a restart)", at + 68_321, at, at + 68_321, 136_642},
		{"behind by 2 ms (skew)", at - 2, at, at - 2, -4},
		{"12 days exact", at + 12*day + 7, at, at + 12*day + 7, WallDelta(2 * (12*day + 7))},
		{"13 days in seconds, rounded down", at + 13*day + 499, at, at + 13*day, WallDelta(2*13*24*3600 + 1)},
		{"13 days in seconds, rounded up", at + 13*day + 500, at, at + 13*day + 1000, WallDelta(2*(13*24*3600+1) + 1)},
		{"13 days behind, a half rounded up", at - 13*day - 500, at, at - 13*day, WallDelta(-2*13*24*3600 + 1)},
		{"13 days behind, rounded down", at - 13*day - 501, at, at - 13*day - 1000, WallDelta(-2*(13*24*3600+1) + 1)},
		{"a wall clock in 1970 is clamped", 1000, at, at - (1<<30-1)*1000, WallDelta(-2*(1<<30-1) + 1)},
		{"cluster time 0", 1500, 0, 1500, 3000},
		{"extreme values do not overflow", math.MaxInt64, math.MinInt64, math.MinInt64 + (1<<30-1)*1000, WallDelta(2*(1<<30-1) + 1)},
	} {
		d := MakeWallDelta(c.wall, c.at)
		if d != c.delta || d.Wall(c.at) != c.want {
			t.Errorf("%s: delta %d reads %d, want %d reading %d", c.name, d, d.Wall(c.at), c.delta, c.want)
		}
	}
}

// TestWallDeltaProperty: within ±12.4 days the wall time reads back
// exactly; within ±34 years to the nearest second.
func TestWallDeltaProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		at := Time(rapid.Int64Range(0, 1<<45).Draw(t, "at"))
		d := rapid.Int64Range(-(1<<30-1)*1000, (1<<30-1)*1000).Draw(t, "distance")
		wall := at + Time(d)
		if wall == 0 {
			return
		}
		got := MakeWallDelta(wall, at).Wall(at)
		switch {
		case d >= -(1<<30-1) && d <= 1<<30-1:
			if got != wall {
				t.Fatalf("distance %d ms read back as %d", d, got-at)
			}
		default:
			if diff := got - wall; diff < -499 || diff > 500 || (got-at)%1000 != 0 {
				t.Fatalf("distance %d ms read back as %d", d, got-at)
			}
		}
	})
}

// TestJobWallTimes: a job keeps the wall clock of the input that submitted
// it and of the one that ended it, beside their cluster times; its last
// worker and both output tails stay on the ended record; all of it is in
// the encoding (and so the hash) and survives a round trip.
func TestJobWallTimes(t *testing.T) {
	s, _ := New(DefaultConfig())
	if _, err := s.UpsertTenant(TenantSpec{Name: "a", Tier: Gold}); err != nil {
		t.Fatal(err)
	}
	const c0 = Time(1_796_094_462_175)
	s.SetWall(c0 + 68_321) // the cluster was down for 68 s
	id, err := s.Submit(c0, Submission{Tenant: "a", Size: SM, EstCostMs: 10})
	if err != nil {
		t.Fatal(err)
	}
	queued := s.Hash()
	if _, _, err := s.Dispatch(c0+10, SM, "w1"); err != nil {
		t.Fatal(err)
	}
	s.SetWall(0) // an entry without a wall clock (an older leader)
	if _, err := s.Start(c0+20, id, 1, "w1"); err != nil {
		t.Fatal(err)
	}
	s.SetWall(c0 + 70_000)
	if _, err := s.Finish(c0+1000, id, 1, "w1", OutcomeOK, 5, RunResult{StderrTail: "err\n", StdoutTail: "out\n"}); err != nil {
		t.Fatal(err)
	}
	j, _ := s.Job(id)
	if j.SubmittedAt != c0 || j.SubmittedWall() != c0+68_321 || j.EndedAt != c0+1000 || j.EndedWall() != c0+70_000 {
		t.Fatalf("submitted %d (wall %d), ended %d (wall %d)", j.SubmittedAt, j.SubmittedWall(), j.EndedAt, j.EndedWall())
	}
	if j.Worker != "w1" || j.Result.StdoutTail != "out\n" || j.Result.StderrTail != "err\n" {
		t.Fatalf("worker %q, result %+v", j.Worker, *j.Result)
	}
	d, err := decodeBytes(encodeView(s.Freeze()))
	if err != nil {
		t.Fatal(err)
	}
	if d.Hash() != s.Hash() {
		t.Fatal("the decoded state hashes differently")
	}
	if dj, _ := d.Job(id); dj.SubmittedWall() != j.SubmittedWall() || dj.EndedWall() != j.EndedWall() || dj.Worker != "w1" || *dj.Result != *j.Result {
		t.Fatalf("decoded job: %+v %+v", dj, *dj.Result)
	}

	// The wall time is in the hash: the same inputs under another wall
	// clock hash differently; under the same one, alike.
	for _, c := range []struct {
		wall Time
		same bool
	}{{c0 + 68_321, true}, {c0 + 68_322, false}, {0, false}} {
		o, _ := New(DefaultConfig())
		o.UpsertTenant(TenantSpec{Name: "a", Tier: Gold})
		o.SetWall(c.wall)
		o.Submit(c0, Submission{Tenant: "a", Size: SM, EstCostMs: 10})
		if (o.Hash() == queued) != c.same {
			t.Errorf("wall %d: hash equal %v, want %v", c.wall, o.Hash() == queued, c.same)
		}
	}
}

// TestFinishCutsStdoutTail: Apply cuts a stdout tail by OutputTail (the
// edge does already; an entry that did not pass the edge is cut alike).
func TestFinishCutsStdoutTail(t *testing.T) {
	s, _ := New(DefaultConfig())
	s.UpsertTenant(TenantSpec{Name: "a", Tier: Gold})
	id, _ := s.Submit(0, Submission{Tenant: "a", Size: SM, EstCostMs: 10})
	s.Dispatch(0, SM, "w1")
	long := strings.Repeat("é", 3000) + "\xffend"
	if _, err := s.Finish(10, id, 1, "w1", OutcomeOK, 5, RunResult{StdoutTail: long}); err != nil {
		t.Fatal(err)
	}
	j, _ := s.Job(id)
	if got := j.Result.StdoutTail; got != OutputTail(long) || len(got) > MaxOutputTail || !strings.HasSuffix(got, "\uFFFDend") {
		t.Fatalf("stdout tail of %d bytes, ends %q", len(got), got[len(got)-8:])
	}
}
