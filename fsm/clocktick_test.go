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

// TestTickMovesOnlyTheClock: an envelope without commands (a clock tick)
// moves the clock and the wall time it carries, emits no event and
// changes nothing else of the state: a state that applied it encodes as
// the same state with its clock set, and Apply returns no result.
func TestTickMovesOnlyTheClock(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("a", pb.Tier_GOLD))
	h.one(submit("a", "", 1000, ""))
	_, next := h.f.Events(0, func(*Event) bool { return true })

	h.index++
	res, err := h.f.ApplyEnvelope(h.index, &clusterpb.Envelope{Version: Version, StampMs: 61_000, WallMs: 1_700_000_061_500})
	if err != nil || len(res) != 0 {
		t.Fatalf("tick: %v %v", res, err)
	}
	if clock, index := h.f.Clock(); clock != 61_000 || index != h.index {
		t.Fatalf("clock %d at index %d, want 61000 at %d", clock, index, h.index)
	}
	if wall, cluster := h.f.WallClock(); wall != 1_700_000_061_500 || cluster != 61_000 {
		t.Fatalf("wall clock %d cluster %d", wall, cluster)
	}
	if _, after := h.f.Events(0, func(*Event) bool { return true }); after != next {
		t.Fatalf("the tick emitted events: next seq %d, want %d", after, next)
	}
	// A tick with an older stamp leaves the clock where it is.
	h.index++
	if _, err := h.f.ApplyEnvelope(h.index, &clusterpb.Envelope{Version: Version, StampMs: 60_000}); err != nil {
		t.Fatal(err)
	}
	if clock, _ := h.f.Clock(); clock != 61_000 {
		t.Fatalf("an older stamp moved the clock back to %d", clock)
	}

	// The same commands without the ticks, with the clock set by a last
	// command's stamp instead, hold the same state.
	g := newHarness(t)
	g.one(tenant("a", pb.Tier_GOLD))
	g.one(submit("a", "", 1000, ""))
	g.now = 61_000
	g.apply()
	a, _ := h.f.Freeze()
	b, _ := g.f.Freeze()
	if !bytes.Equal(encodeFSM(a), encodeFSM(b)) {
		t.Fatal("a state that applied ticks differs from one whose clock moved without them")
	}
}

// TestClockTickSetting: clock_tick is 1 s by default and 100 ms .. 1 h;
// another value needs feature level 7 (its state is version 10), and
// the seed of a cluster below level 7 carries the default.
func TestClockTickSetting(t *testing.T) {
	if got := DefaultConfig().ClockTick().String(); got != "1s" {
		t.Fatalf("default clock_tick %s", got)
	}
	for _, tc := range []struct {
		ms   int64
		want string
	}{
		{0, ""}, {100, ""}, {3_600_000, ""},
		{99, "clock_tick is 99ms (want 100ms .. 1h0m0s)"},
		{3_600_001, "clock_tick is 1h0m0.001s (want 100ms .. 1h0m0s)"},
	} {
		p := ConfigToPB(DefaultConfig())
		p.ClockTickMs = tc.ms
		_, err := ConfigFromPB(p)
		if got := errText(err); got != tc.want {
			t.Errorf("clock_tick_ms %d: %q, want %q", tc.ms, got, tc.want)
		}
	}

	h := &harness{t: t, f: NewAtLevel(Level6), now: 1_000}
	r := h.apply(setConfigWith(func(p *pb.SchedulerConfig) { p.ClockTickMs = 250 }))[0]
	if !r.Refused() || !strings.HasPrefix(r.Msg, "clock_tick needs cluster feature level 7") {
		t.Fatalf("clock_tick 250ms at level 6: %+v", r)
	}
	// The default, named or not, is every level's.
	if r := h.apply(setConfigWith(func(p *pb.SchedulerConfig) { p.ClockTickMs = 1000 }))[0]; r.Refused() {
		t.Fatalf("clock_tick 1s at level 6: %+v", r)
	}
	p := ConfigToPB(DefaultConfig())
	p.ClockTickMs = 250
	ConfigAtLevel(p, Level6)
	if p.ClockTickMs != 0 {
		t.Fatalf("ConfigAtLevel(6) kept clock_tick %d", p.ClockTickMs)
	}

	h = newHarness(t)
	h.one(setConfigWith(func(p *pb.SchedulerConfig) { p.ClockTickMs = 250 }))
	if got := h.f.Config().ClockTickMs; got != 250 {
		t.Fatalf("clock_tick %d ms, want 250", got)
	}
	if got := ConfigToPB(h.f.Config()).ClockTickMs; got != 250 {
		t.Fatalf("ConfigToPB: %d", got)
	}
}

// TestLevel7RoundTrip: a state at feature level 7 is written as state
// version 10 and reads back at level 7 with its clock_tick, to the same
// bytes — with the default clock_tick too (a state of version 8 or 9
// reads back at level 6, so a node restored from a snapshot of a level-7
// cluster would apply what follows as level 6 does).
func TestLevel7RoundTrip(t *testing.T) {
	for _, tick := range []int64{DefaultClockTickMs, 250} {
		h := &harness{t: t, f: NewAtLevel(Level7), now: 1_000}
		h.one(tenant("a", pb.Tier_GOLD))
		h.one(submit("a", "", 1000, ""))
		h.one(setConfigWith(func(p *pb.SchedulerConfig) { p.ClockTickMs = tick }))
		v, _ := h.f.Freeze()
		if got := v.StateVersion(); got != stateVersionLevel7 {
			t.Fatalf("a level-7 state is version %d, want %d", got, stateVersionLevel7)
		}
		b := encodeFSM(v)
		back := New()
		if err := back.Restore(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(b))), h.index); err != nil {
			t.Fatal(err)
		}
		if back.Level() != Level7 || back.Config().ClockTickMs != tick {
			t.Fatalf("clock_tick %d: restored at level %d with clock_tick %d", tick, back.Level(), back.Config().ClockTickMs)
		}
		w, _ := back.Freeze()
		if !bytes.Equal(encodeFSM(w), b) {
			t.Fatalf("clock_tick %d: the restored state encodes differently", tick)
		}
	}
	// Below level 7 a clock_tick other than the default is refused as
	// the state of another level.
	f := NewAtLevel(Level6)
	f.cfg.ClockTickMs = 250
	if err := f.Verify(); err == nil || !strings.Contains(err.Error(), "clock_tick") {
		t.Fatalf("level 6 with clock_tick 250ms: %v", err)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
