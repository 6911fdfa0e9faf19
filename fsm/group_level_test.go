package fsm

import (
	"bufio"
	"bytes"
	"errors"
	"testing"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

func setGroupCmd(tenant, group string, kind clusterpb.GroupCapKind, limit uint32, asTenant bool) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_SetGroup{SetGroup: &clusterpb.SetGroup{Tenant: tenant, Group: group, CapKind: kind, Limit: limit, AsTenant: asTenant}}}
}

// TestFeatureLevel4Groups: at level 3 every command that puts anything of
// groups into the state is refused, naming the field and both levels, so
// the state stays what the build before groups holds and is written as
// version 5 (the core's version 3); group_order fifo, the default, is
// accepted. SetFeatureLevel 4 lets them through; the state is then
// written as version 6 and read back at level 4. A version 5 state that
// holds groups is refused on restore.
func TestFeatureLevel4Groups(t *testing.T) {
	h := &harness{t: t, f: newAt(Level3), now: 1_000}
	h.one(tenant("acme", pb.Tier_GOLD))
	h.one(submit("acme", "", 1000, "p"))
	refused := []levelCase{
		{submitJob(&clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1, Group: "g"}), "group"},
		{upsert(&clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD, GroupCap: 1}), "group_cap"},
		{upsert(&clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD, GroupOrder: pb.GroupOrder_GROUP_FAIR}), "group_order fair"},
		{upsert(&clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD, MaxGroups: 5}), "max_groups"},
		{setGroupCmd("acme", "g", clusterpb.GroupCapKind_GROUP_CAP_LIMIT, 1, false), "SetGroup"},
		{setGroupCmd("acme", "g", clusterpb.GroupCapKind_GROUP_CAP_NONE, 0, true), "SetGroup"},
	}
	h.refusedBelow(Level4, refused)
	if r := h.one(upsert(&clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD, GroupOrder: pb.GroupOrder_GROUP_FIFO})); r.Code != OK {
		t.Fatalf("group_order fifo at level 3: %v", r.Err())
	}
	v, _ := h.f.Freeze()
	enc := encodeFSM(v)
	if v.StateVersion() != 5 || enc[0] != 5 {
		t.Fatalf("level 3 writes version %d (byte %d), want 5", v.StateVersion(), enc[0])
	}
	back := New()
	if err := back.Restore(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(enc))), h.index); err != nil || back.Level() != Level3 {
		t.Fatalf("restore at level 3: level %d, %v", back.Level(), err)
	}

	// Raise it: the same commands go through.
	if r := h.one(setLevelCmd(Level4)); r.Code != OK || r.Outcome != sfq.Changed || h.f.Level() != Level4 {
		t.Fatalf("raise to 4: %+v", r)
	}
	for _, c := range refused {
		if r := h.one(c.cmd); r.Code != OK {
			t.Errorf("%s at level 4: %v", c.what, r.Err())
		}
	}
	var g sfq.Group
	var ta sfq.Tenant
	h.f.Read(func(s *sfq.Scheduler) { g, _ = s.Group("acme", "g"); ta, _ = s.Tenant("acme") })
	// The last upsert (max_groups=5) replaced group_cap and group_order.
	if g.Cap != 1 || g.TenantCap != 0 || g.Queued != 1 || ta.MaxGroups != 5 || ta.GroupCap != 0 || ta.GroupOrder != sfq.GroupFIFO || ta.Groups != 1 {
		t.Fatalf("group %+v, tenant group_cap %d order %s max_groups %d groups %d", g, ta.GroupCap, ta.GroupOrder, ta.MaxGroups, ta.Groups)
	}
	v, _ = h.f.Freeze()
	enc = encodeFSM(v)
	if v.StateVersion() != 6 || enc[0] != 6 {
		t.Fatalf("level 4 writes version %d, want 6", v.StateVersion())
	}
	back = New()
	if err := back.Restore(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(enc))), h.index); err != nil || back.Level() != Level4 {
		t.Fatalf("restore at level 4: level %d, %v", back.Level(), err)
	}
	h1, _ := h.f.Hash()
	h2, _ := back.Hash()
	if h1 != h2 {
		t.Fatal("a level 4 state restores to another state")
	}

	// The same bytes labelled version 5 claim level 3 while holding
	// groups: refused.
	bad := append([]byte{5}, enc[1:]...)
	err := New().Restore(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(bad))), h.index)
	want := "state verification failed: at feature level 3 the state holds groups (a job of a named group, a group setting, a group tag, or a tenant's group_cap, group_order or max_groups)"
	if !errors.Is(err, sfq.ErrVerify) || err.Error() != want {
		t.Fatalf("a version 5 state with groups: %v", err)
	}
}
