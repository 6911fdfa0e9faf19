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
