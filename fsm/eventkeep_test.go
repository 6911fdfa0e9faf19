package fsm

import (
	"bytes"
	"fmt"
	"testing"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// tenantEvents lists tenant's events (its kept ones, then the log's) from
// from on, as "seq:kind", and the first seq TenantEvents names.
func (h *harness) tenantEvents(tenant string, from uint64) (string, uint64) {
	h.t.Helper()
	var ti uint32
	h.f.Read(func(sc *sfq.Scheduler) { ti, _ = sc.TenantIndex(tenant) })
	var out []string
	first, _ := h.f.TenantEvents(ti, from, func(ev *Event) bool {
		if ev.Tenant == ti {
			out = append(out, fmt.Sprintf("%d:%s", ev.Seq, ev.Kind))
		}
		return true
	})
	return fmt.Sprint(out), first
}

// TestKeptEvents (finding 4): with the log's count at 4 and
// event_retention_per_tenant at 3, tenant a's two events survive tenant
// b's flood of 12: pruned from the log, they are kept for a, whose watch
// reads them from seq 1; b keeps at most its own newest 3 beside the
// log's 4; a's webhook gets no gap for them. Kept events are in the state's
// encoding and its hash, survive a round trip, and are aged out by
// event_retention like the log's. Without the setting (0, as below level
// 8), the same flood prunes a's events and leaves a gap.
func TestKeptEvents(t *testing.T) {
	run := func(perTenant uint64) *harness {
		h := newHarness(t)
		h.one(setConfigWith(func(p *pb.SchedulerConfig) {
			p.EventRetentionCount, p.EventRetentionPerTenant, p.EventRetentionMs = 4, perTenant, 60_000
		}))
		h.one(tenant("a", pb.Tier_GOLD))
		h.one(tenant("b", pb.Tier_GOLD))
		h.one(webhookSet("a", "https://a.example/", false, 0, 1))
		h.one(submit("a", "", 1000, "x")) // 1
		h.one(submit("a", "", 1000, "x")) // 2
		for range 12 {
			h.one(submit("b", "", 1000, "x")) // 3..14
		}
		h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Prune{Prune: &clusterpb.Prune{}}})
		return h
	}
	h := run(3)
	if got, first := h.tenantEvents("a", 1); got != "[1:queued 2:queued]" || first != 1 {
		t.Errorf("a's events from 1: %s, first %d; want both, first 1", got, first)
	}
	// b keeps its newest 3 of 3..10 (8..10), and as the tenants keep 5,
	// over the count of 4, b (keeping the most) gives up 8.
	if got, first := h.tenantEvents("b", 1); got != "[9:queued 10:queued 11:queued 12:queued 13:queued 14:queued]" || first != 9 {
		t.Errorf("b's events from 1: %s, first %d; want 9..10 kept and the log's 4, first 9", got, first)
	}
	if got, _ := h.tenantEvents("a", 2); got != "[2:queued]" {
		t.Errorf("a's events from 2: %s", got)
	}
	if w := h.webhook("a"); w.GapFrom != 0 {
		t.Errorf("a's webhook gap %d..%d, want none", w.GapFrom, w.GapTo)
	}
	if err := h.f.Verify(); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, h.f)
	before, _ := h.f.Hash()
	// The kept events are in the hash: one fewer (aged out) changes it.
	h.now += 61_000
	h.one(submit("b", "", 1000, "x")) // 15
	h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Prune{Prune: &clusterpb.Prune{}}})
	if got, first := h.tenantEvents("a", 1); got != "[]" || first != 15 {
		t.Errorf("a's events after event_retention: %s, first %d; want none, first 15", got, first)
	}
	if after, _ := h.f.Hash(); after == before {
		t.Error("the kept events are not in the hash")
	}
	if len(h.f.kept) != 0 || h.f.keptN != 0 {
		t.Errorf("kept after the age: %d tenants, %d events", len(h.f.kept), h.f.keptN)
	}
	if w := h.webhook("a"); w.GapFrom != 1 || w.GapTo != 2 {
		t.Errorf("a's webhook gap once its events aged out: %d..%d, want 1..2", w.GapFrom, w.GapTo)
	}

	off := run(0)
	if got, first := off.tenantEvents("a", 1); got != "[]" || first != 11 {
		t.Errorf("without event_retention_per_tenant, a's events from 1: %s, first %d; want none, first 11", got, first)
	}
	if w := off.webhook("a"); w.GapFrom != 1 || w.GapTo != 2 {
		t.Errorf("without event_retention_per_tenant, a's webhook gap %d..%d, want 1..2", w.GapFrom, w.GapTo)
	}
}

// TestKeptEventsBounded: the kept events of every tenant together stay
// within event_retention_count; past it the tenant keeping the most
// loses its oldest, so a tenant keeping few keeps them.
func TestKeptEventsBounded(t *testing.T) {
	h := newHarness(t)
	h.one(setConfigWith(func(p *pb.SchedulerConfig) { p.EventRetentionCount, p.EventRetentionPerTenant = 4, 3 }))
	for _, name := range []string{"a", "b", "c"} {
		h.one(tenant(name, pb.Tier_GOLD))
	}
	h.one(submit("a", "", 1000, "x")) // 1
	for range 3 {
		h.one(submit("b", "", 1000, "x")) // 2..4
	}
	for range 7 {
		h.one(submit("c", "", 1000, "x")) // 5..11
	}
	h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Prune{Prune: &clusterpb.Prune{}}})
	// The log keeps 8..11; 1..7 were pruned from it: a keeps 1, b 2..4,
	// c 5..7 — 7 kept, over 4: c (3) and b (3) give up their oldest
	// until 4 are left, the lowest index first among equals.
	if h.f.keptN != 4 {
		t.Fatalf("%d kept, want 4", h.f.keptN)
	}
	for name, want := range map[string]string{"a": "[1:queued]", "b": "[4:queued]", "c": "[6:queued 7:queued 8:queued 9:queued 10:queued 11:queued]"} {
		if got, _ := h.tenantEvents(name, 1); got != want {
			t.Errorf("%s's events: %s, want %s", name, got, want)
		}
	}
	if err := h.f.Verify(); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, h.f)
}

// TestLevel8Settings: event_retention_per_tenant and max_worker_records
// need feature level 8; a new cluster at level 8 starts with their
// defaults, a cluster raised to it with none; a state at level 8 is
// version 11 and reads back at level 8 with them.
func TestLevel8Settings(t *testing.T) {
	h := &harness{t: t, f: NewAtLevel(Level7), now: 1_000}
	if r := h.one(setConfigWith(func(p *pb.SchedulerConfig) { p.EventRetentionPerTenant = 5 })); r.Code != FailedPrecondition {
		t.Fatalf("event_retention_per_tenant at level 7: %+v", r)
	}
	if r := h.one(setConfigWith(func(p *pb.SchedulerConfig) { p.MaxWorkerRecords = 5 })); r.Code != FailedPrecondition {
		t.Fatalf("max_worker_records at level 7: %+v", r)
	}
	h.one(&clusterpb.Command{Cmd: &clusterpb.Command_SetFeatureLevel{SetFeatureLevel: &clusterpb.SetFeatureLevel{Level: Level8}}})
	if c := h.f.Config(); c.EventRetentionPerTenant != 0 || c.MaxWorkerRecords != 0 {
		t.Fatalf("raised to level 8: %d, %d; want none until set", c.EventRetentionPerTenant, c.MaxWorkerRecords)
	}
	if c := NewLatest().Config(); c.EventRetentionPerTenant != DefaultEventRetentionPerTenant || c.MaxWorkerRecords != DefaultMaxWorkerRecords {
		t.Fatalf("a new cluster: %d, %d", c.EventRetentionPerTenant, c.MaxWorkerRecords)
	}
	h.one(setConfigWith(func(p *pb.SchedulerConfig) { p.EventRetentionPerTenant, p.MaxWorkerRecords = 5, 7 }))
	v, _ := h.f.Freeze()
	if v.StateVersion() != stateVersionLevel8 {
		t.Fatalf("state version %d", v.StateVersion())
	}
	n, err := DecodeState(sfq.NewDecoder(bytes.NewReader(encodeFSM(v))), v.Index)
	if err != nil {
		t.Fatal(err)
	}
	if c := n.Config(); n.Level() != Level8 || c.EventRetentionPerTenant != 5 || c.MaxWorkerRecords != 7 {
		t.Fatalf("read back at level %d: %d, %d", n.Level(), c.EventRetentionPerTenant, c.MaxWorkerRecords)
	}
}

// TestWorkerDrainCheck (finding 5): a drain that changes nothing is a
// Duplicate (the leader proposes nothing); one that would make a record
// past max_worker_records is refused, and Apply makes the same check.
func TestWorkerDrainCheck(t *testing.T) {
	h := newHarness(t)
	h.one(setConfigWith(func(p *pb.SchedulerConfig) { p.MaxWorkerRecords = 2 }))
	drain := func(id string, on bool) *clusterpb.Command {
		return &clusterpb.Command{Cmd: &clusterpb.Command_WorkerDrain{WorkerDrain: &clusterpb.WorkerDrain{WorkerId: id, Drain: on}}}
	}
	for _, c := range []struct {
		id      string
		on      bool
		outcome string
	}{
		{"w1", true, "changed"}, {"w1", true, "duplicate"}, {"w1", false, "changed"}, {"w1", false, "duplicate"},
		{"w2", true, "changed"}, {"w3", true, "refused"}, {"w2", true, "duplicate"},
	} {
		admit := h.f.Admit(drain(c.id, c.on))
		r := h.one(drain(c.id, c.on))
		got := "changed"
		switch {
		case r.Refused():
			got = "refused"
		case r.Outcome == sfq.Duplicate:
			got = "duplicate"
		}
		if got != c.outcome || admit.Code != r.Code || admit.Outcome != r.Outcome {
			t.Errorf("drain %s=%v: %s (%+v), admitted %+v; want %s", c.id, c.on, got, r, admit, c.outcome)
		}
	}
	if _, ok := h.f.Worker("w3"); ok {
		t.Error("the refused drain made a record")
	}
}
