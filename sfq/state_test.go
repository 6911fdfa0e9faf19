package sfq

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestRecreatedTenantEncoding: a tenant deleted and created again gets a
// new index; the tombstone keeps the name, the state encodes and decodes
// with both, and the name resolves to the new index. A name shared by a
// live tenant and a later slot is corruption.
func TestRecreatedTenantEncoding(t *testing.T) {
	now := Time(1000)
	s, _ := New(DefaultConfig())
	for _, n := range []string{"a", "b"} {
		if _, err := s.UpsertTenant(TenantSpec{Name: n, Tier: Gold}); err != nil {
			t.Fatal(err)
		}
	}
	id, _ := s.Submit(now, Submission{Tenant: "a", Size: SM, EstCostMs: 10})
	if _, err := s.Cancel(now, id); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTenant("a"); err != nil {
		t.Fatal(err)
	}
	if created, err := s.UpsertTenant(TenantSpec{Name: "a", Tier: Free}); err != nil || !created {
		t.Fatalf("re-create: %v %v", created, err)
	}
	if ti, _ := s.TenantIndex("a"); ti != 2 || s.TenantCount() != 3 || s.TenantName(0) != "a" {
		t.Fatalf("a resolves to %d of %d slots (slot 0 named %q), want 2 of 3", ti, s.TenantCount(), s.TenantName(0))
	}
	if _, ok := s.TenantJob("a", id); ok {
		t.Fatal("the old a's job is visible through the new a")
	}
	b := encodeView(s.Freeze())
	d, err := decodeBytes(b)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if d.Hash() != s.Hash() {
		t.Fatal("decoded state hashes differently")
	}
	if ti, _ := d.TenantIndex("a"); ti != 2 {
		t.Fatalf("decoded: a resolves to %d", ti)
	}
	// Two live tenants of one name: rename b (slot 1, live) to a.
	live, _ := New(DefaultConfig())
	for _, n := range []string{"a", "b"} {
		live.UpsertTenant(TenantSpec{Name: n, Tier: Gold})
	}
	bad := encodeView(live.Freeze())
	i := bytes.Index(bad, []byte{1, 'b'})
	bad[i+1] = 'a'
	if _, err := decodeBytes(bad); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `tenant 1 has a duplicate or empty name "a"`) {
		t.Fatalf("two live tenants named a: %v", err)
	}
	// Verify: a live tenant shadowed by a later slot of its name.
	s.byName["b"] = 2
	s.tenants.Mut(2).Name = "b"
	if err := s.Verify(); !errors.Is(err, ErrVerify) || !strings.Contains(err.Error(), `tenant "b" is not indexed by name`) {
		t.Fatalf("shadowed live tenant: %v", err)
	}
}

// TestStateVersionFollowsGroups: a state that uses nothing of groups is
// written as version 2, as before groups; a job of a named group, a group
// setting or group_order=fair makes it version 3 for as long as anything
// of them is left; both decode to the same state.
func TestStateVersionFollowsGroups(t *testing.T) {
	version := func(s *Scheduler) byte {
		b := encodeView(s.Freeze())
		d, err := decodeBytes(b)
		if err != nil {
			t.Fatal(err)
		}
		if d.Hash() != s.Hash() {
			t.Fatal("the decoded state hashes differently")
		}
		return b[0]
	}
	s, _ := New(DefaultConfig())
	s.UpsertTenant(TenantSpec{Name: "a", Tier: Gold})
	id, _ := s.Submit(0, Submission{Tenant: "a", Size: SM, EstCostMs: 10})
	if v := version(s); v != 2 {
		t.Fatalf("without groups: version %d, want 2", v)
	}
	g, _ := s.Submit(0, Submission{Tenant: "a", Size: SM, EstCostMs: 10, Group: "g"})
	if v := version(s); v != 3 {
		t.Fatalf("with a job of group g: version %d, want 3", v)
	}
	s.Cancel(0, g)
	if v := version(s); v != 3 {
		t.Fatalf("with a cancelled job of group g in the table: version %d, want 3", v)
	}
	if n := s.Prune(1, 10); n != 1 {
		t.Fatalf("pruned %d", n)
	}
	if v := version(s); v != 2 {
		t.Fatalf("once the job of group g is pruned: version %d, want 2", v)
	}
	if err := s.SetGroup("a", "h", GroupSettings{Cap: 3}); err != nil {
		t.Fatal(err)
	}
	if v := version(s); v != 3 {
		t.Fatalf("with a setting on group h: version %d, want 3", v)
	}
	s.SetGroup("a", "h", GroupSettings{})
	if _, ok := s.Group("a", "h"); ok {
		t.Fatal("group h without job or setting was not forgotten")
	}
	s.UpsertTenant(TenantSpec{Name: "a", Tier: Gold, GroupOrder: GroupFair})
	if v := version(s); v != 3 {
		t.Fatalf("with group_order=fair: version %d, want 3", v)
	}
	s.Dispatch(0, SM, "w")
	s.UpsertTenant(TenantSpec{Name: "a", Tier: Gold})
	if v := version(s); v != 3 {
		t.Fatalf("back to fifo with a group tag left: version %d, want 3", v)
	}
	_ = id
}
