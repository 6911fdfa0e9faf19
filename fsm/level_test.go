package fsm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

func setLevelCmd(l uint32) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_SetFeatureLevel{SetFeatureLevel: &clusterpb.SetFeatureLevel{Level: l}}}
}

// TestFeatureLevel: a state that never saw SetFeatureLevel is at level 1.
// There, every command that needs level 2 is refused (naming the field and
// both levels), a completion teaches no estimate and a tier move keeps no
// carry, so the state stays what version 1 encodes, which is what it
// writes and hashes. SetFeatureLevel raises it (never lowers it), and a
// level this build does not know stops the node.
func TestFeatureLevel(t *testing.T) {
	h := &harness{t: t, f: New(), now: 1_000}
	if l := h.f.Level(); l != Level1 {
		t.Fatalf("a new state machine is at level %d", l)
	}
	h.one(tenant("acme", pb.Tier_GOLD))
	msg := func(what string) string {
		return "FAILED_PRECONDITION: " + what + " needs cluster feature level 2; the cluster is at level 1 until every voter runs a build that understands level 2 (docs/operations.md, \"Upgrades\")"
	}
	refused := []struct {
		cmd  *clusterpb.Command
		what string
	}{
		{submitJob(&clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1, JobClass: pb.Class_HIGH}), "class high"},
		{submitJob(&clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1, DeadlineMs: 5000}), "deadline"},
		{upsert(&clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD, MaxClass: pb.Class_CRITICAL}), "max_class critical"},
		{upsert(&clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD, AllowDeadlines: true}), "allow_deadlines"},
		{upsert(&clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD, Caps: &pb.Caps{MaxRunningCritical: 1}}), "cap_critical"},
		{upsert(&clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD, Caps: &pb.Caps{MaxRunningHigh: 1}}), "cap_high"},
		{upsert(&clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD, Caps: &pb.Caps{MaxRunningDeadline: 1}}), "deadline_cap"},
		{upsert(&clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD, ExportMetrics: true}), "export_metrics"},
		{setConfigWith(func(p *pb.SchedulerConfig) { p.Estimate = pb.Estimate_AUTO }), "estimate=auto"},
		{setConfigWith(func(p *pb.SchedulerConfig) { p.DefaultCostMs = 30_000 }), "default_cost"},
	}
	for _, c := range refused {
		if r := h.one(c.cmd); r.Code != FailedPrecondition || r.Err().Error() != msg(c.what) {
			t.Errorf("%s at level 1: %v", c.what, r.Err())
		}
		if err := CheckLevel(c.cmd, Level1); err == nil || err.(*Refusal).Line() != msg(c.what) {
			t.Errorf("CheckLevel of %s: %v", c.what, err)
		}
	}
	// What level 1 holds is accepted: the defaults of the new fields too.
	for _, c := range []*clusterpb.Command{
		submitJob(&clusterpb.SubmitJob{Tenant: "acme", JobType: "render", Size: pb.Size_MD, EstCostMs: 1000, JobClass: pb.Class_NORMAL}),
		upsert(&clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_SILVER, MaxClass: pb.Class_NORMAL, Caps: &pb.Caps{MaxRunning: 2}}),
		setConfigWith(func(p *pb.SchedulerConfig) { p.Estimate, p.DefaultCostMs = pb.Estimate_SUBMITTED, sfq.DefaultCostMs }),
	} {
		if r := h.one(c); r.Code != OK {
			t.Fatalf("%v at level 1: %v", c, r.Err())
		}
	}
	// A completion teaches nothing; the tier move above kept no carry.
	d := h.one(dispatch("w1", 1))
	h.one(started(uint64(d.Job), d.Attempt, "w1"))
	if r := h.one(finished(uint64(d.Job), d.Attempt, "w1", 900)); r.Code != OK {
		t.Fatal(r.Err())
	}
	h.f.Read(func(s *sfq.Scheduler) {
		if _, ok := s.Estimate("acme", "render"); ok {
			t.Error("a completion at level 1 taught an estimate")
		}
	})
	if err := h.f.Verify(); err != nil {
		t.Fatal(err)
	}
	// Written as version 1; read back at level 1, to the same hash.
	v, _ := h.f.Freeze()
	if v.StateVersion() != 1 || v.Level() != Level1 {
		t.Fatalf("state version %d at level %d", v.StateVersion(), v.Level())
	}
	enc := encodeFSM(v)
	back := New()
	if err := back.Restore(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(enc))), h.index); err != nil {
		t.Fatal(err)
	}
	h1, _ := h.f.Hash()
	h2, _ := back.Hash()
	if h1 != h2 || back.Level() != Level1 {
		t.Fatalf("restored at level %d, hash equal %t", back.Level(), h1 == h2)
	}

	// Raise it.
	if r := h.one(setLevelCmd(Level2)); r.Code != OK || r.Outcome != sfq.Changed || h.f.Level() != Level2 {
		t.Fatalf("raise to 2: %+v, level %d", r, h.f.Level())
	}
	if r := h.one(setLevelCmd(Level1)); r.Code != OK || r.Outcome != sfq.Duplicate || h.f.Level() != Level2 {
		t.Fatalf("lower to 1: %+v, level %d", r, h.f.Level())
	}
	// (The submits come before the upserts that grant them.)
	for i, c := range refused {
		want := OK
		if i < 2 {
			want = PermissionDenied
		}
		if r := h.one(c.cmd); r.Code != want {
			t.Errorf("%s at level 2: %v", c.what, r.Err())
		}
	}
	if v, _ := h.f.Freeze(); v.StateVersion() == 1 {
		t.Fatal("a state at level 2 is written as version 1")
	}
	// Now a completion teaches.
	h.one(setConfigWith(func(p *pb.SchedulerConfig) {}))
	h.one(submitJob(&clusterpb.SubmitJob{Tenant: "acme", JobType: "render", Size: pb.Size_MD, EstCostMs: 1000}))
	d = h.one(dispatch("w1", 2))
	h.one(started(uint64(d.Job), d.Attempt, "w1"))
	h.one(finished(uint64(d.Job), d.Attempt, "w1", 700))
	h.f.Read(func(s *sfq.Scheduler) {
		if st, ok := s.Estimate("acme", "render"); !ok || st.EMAMs != 700 {
			t.Errorf("a completion at level 2: %+v %v", st, ok)
		}
	})
	// A state at level 2 reads back at level 2.
	v, _ = h.f.Freeze()
	back = New()
	if err := back.Restore(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(encodeFSM(v)))), h.index); err != nil || back.Level() != Level2 {
		t.Fatalf("restored level 2 state: level %d, %v", back.Level(), err)
	}

	// A level this build does not know stops it.
	_, err := h.f.ApplyEnvelope(h.index+1, &clusterpb.Envelope{Version: Version, StampMs: 2000, Commands: []*clusterpb.Command{setLevelCmd(MaxFeatureLevel + 1)}})
	var fe *FatalError
	if !errors.As(err, &fe) || !errors.Is(err, ErrFeatureLevel) || fe.Index != h.index+1 ||
		!strings.Contains(err.Error(), fmt.Sprintf("unknown feature level %d (this build understands up to %d): upgrade this node", MaxFeatureLevel+1, MaxFeatureLevel)) {
		t.Fatalf("level 5: %v", err)
	}
}

// setConfigWith is a SetConfig of the defaults changed by fn.
func setConfigWith(fn func(p *pb.SchedulerConfig)) *clusterpb.Command {
	p := ConfigToPB(DefaultConfig())
	fn(p)
	return &clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: p}}}
}

// TestRequiredLevelIsTheHighest: a command with fields of several levels
// needs the highest of them, named (a submit of class high in a group at
// level 3 is refused for its group, not let through for its class).
func TestRequiredLevelIsTheHighest(t *testing.T) {
	cfg := ConfigToPB(DefaultConfig())
	cfg.Estimate, cfg.SubmitRateN, cfg.SubmitRatePeriodMs = pb.Estimate_AUTO, 10, 1000
	for _, c := range []struct {
		cmd   *clusterpb.Command
		level uint32
		what  string
	}{
		{submitJob(&clusterpb.SubmitJob{Tenant: "a", JobClass: pb.Class_HIGH, Group: "g"}), Level4, "group"},
		{submitJob(&clusterpb.SubmitJob{Tenant: "a", DeadlineMs: 5000, Group: "g"}), Level4, "group"},
		{submitJob(&clusterpb.SubmitJob{Tenant: "a", JobClass: pb.Class_HIGH, DeadlineMs: 5000}), Level2, "class high"},
		{upsert(&clusterpb.TenantUpsert{Name: "a", MaxClass: pb.Class_HIGH, GroupCap: 2}), Level4, "group_cap"},
		{&clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: cfg}}}, Level5, "submit_rate"},
		{&clusterpb.Command{Cmd: &clusterpb.Command_WebhookSet{WebhookSet: &clusterpb.WebhookSet{Tenant: "a", Kinds: []string{"queued", "redriven"}}}}, Level5, "webhook kind redriven"},
	} {
		if l, what := RequiredLevel(c.cmd); l != c.level || what != c.what {
			t.Errorf("%v: level %d %q, want %d %q", c.cmd, l, what, c.level, c.what)
		}
	}
}

// levelCase is a command that needs a feature level, and the field its
// refusal names.
type levelCase struct {
	cmd  *clusterpb.Command
	what string
}

// refusedBelow checks, on h at level need-1, that each command is refused
// by Apply and by CheckLevel naming its field and both levels, passes
// CheckLevel at need, and that the refusals leave the state as it was.
func (h *harness) refusedBelow(need uint32, cases []levelCase) {
	h.t.Helper()
	have := need - 1
	before, _ := h.f.Hash()
	for _, c := range cases {
		want := "FAILED_PRECONDITION: " + LevelMessage(c.what, need, have)
		if r := h.one(c.cmd); r.Code != FailedPrecondition || r.Err().Error() != want {
			h.t.Errorf("%s at level %d: %v", c.what, have, r.Err())
		}
		if err := CheckLevel(c.cmd, have); err == nil || err.(*Refusal).Line() != want {
			h.t.Errorf("CheckLevel of %s: %v", c.what, err)
		}
		if err := CheckLevel(c.cmd, need); err != nil {
			h.t.Errorf("CheckLevel of %s at level %d: %v", c.what, need, err)
		}
	}
	if after, _ := h.f.Hash(); after != before {
		h.t.Fatal("a refused command changed the state")
	}
}

// TestCheckLevelAtTheLatestLevel: at this build's highest level no
// command is refused and nothing is allocated to say what it needs (a
// dispatch or a submit in a pool other than default names its pool);
// below it, the same commands are refused, naming the pool.
func TestCheckLevelAtTheLatestLevel(t *testing.T) {
	cmds := []*clusterpb.Command{dispatchIn("w1", "gpu", 1), submitIn("a", "gpu")}
	for _, c := range cmds {
		if allocs := testing.AllocsPerRun(100, func() {
			if err := CheckLevel(c, MaxFeatureLevel); err != nil {
				t.Fatal(err)
			}
		}); allocs != 0 {
			t.Errorf("CheckLevel of %v at level %d: %v allocations", c, MaxFeatureLevel, allocs)
		}
		if err := CheckLevel(c, Level5); err == nil || err.(*Refusal).Msg != LevelMessage("pool gpu", Level6, Level5) {
			t.Errorf("CheckLevel of %v at level 5: %v", c, err)
		}
	}
}
