package fsm

import (
	"bufio"
	"bytes"
	"testing"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// TestSubmitRateSetting: submit_rate needs feature level 5 (refused at 4,
// naming it and both levels, and the state unchanged); at 5 it is stored,
// written as FSM state version 7 and read back; off drops the period and
// the burst; a bad rate is refused naming it.
func TestSubmitRateSetting(t *testing.T) {
	h := &harness{t: t, f: newAt(Level4), now: 1_000}
	set := func(n uint32, periodMs int64, burst uint32) *clusterpb.Command {
		p := ConfigToPB(DefaultConfig())
		p.SubmitRateN, p.SubmitRatePeriodMs, p.SubmitBurst = n, periodMs, burst
		return &clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: p}}}
	}
	h.one(tenant("acme", pb.Tier_GOLD))
	before, _ := h.f.Hash()
	want := `FAILED_PRECONDITION: submit_rate needs cluster feature level 5; the cluster is at level 4 until every voter runs a build that understands level 5 (docs/operations.md, "Upgrades")`
	if r := h.one(set(100, 1000, 20)); r.Code != FailedPrecondition || r.Err().Error() != want {
		t.Fatalf("at level 4: %v", r.Err())
	}
	if after, _ := h.f.Hash(); after != before {
		t.Fatal("a refused SetConfig changed the state")
	}
	// Off is not a setting of level 5: the same config at level 4 applies.
	if r := h.one(set(0, 1000, 20)); r.Code != OK || h.f.Config().SubmitRate != (sfq.RateLimit{}) {
		t.Fatalf("off at level 4: %v %+v", r.Err(), h.f.Config().SubmitRate)
	}
	if v, _ := h.f.Freeze(); v.StateVersion() != 6 {
		t.Fatalf("level 4 writes version %d", v.StateVersion())
	}

	h.one(setLevelCmd(Level5))
	if r := h.one(set(100, 1000, 20)); r.Code != OK {
		t.Fatalf("at level 5: %v", r.Err())
	}
	if got := h.f.Config().SubmitRate; got != (sfq.RateLimit{N: 100, PeriodMs: 1000, Burst: 20}) {
		t.Fatalf("stored %+v", got)
	}
	v, _ := h.f.Freeze()
	enc := encodeFSM(v)
	if v.StateVersion() != 7 || enc[0] != 7 {
		t.Fatalf("level 5 writes version %d", v.StateVersion())
	}
	back := New()
	if err := back.Restore(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(enc))), h.index); err != nil || back.Level() != Level5 ||
		back.Config().SubmitRate != h.f.Config().SubmitRate {
		t.Fatalf("restore: level %d, %+v, %v", back.Level(), back.Config().SubmitRate, err)
	}
	for _, c := range []struct {
		cmd *clusterpb.Command
		msg string
	}{
		{set(100, 0, 0), "INVALID_ARGUMENT: submit_rate period 0 ms (want 1 ms .. 720h)"},
		{set(2000, 1, 0), "INVALID_ARGUMENT: submit_rate 2000 per 1 ms has an interval below 1 µs (want N <= PERIOD in µs)"},
	} {
		if r := h.one(c.cmd); r.Err() == nil || r.Err().Error() != c.msg {
			t.Errorf("got %v, want %s", r.Err(), c.msg)
		}
	}
}
