package sfq

import (
	"bytes"
	"errors"
	"fmt"
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
	d := reloaded(t, s)
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
// written as version 3, as before groups; a job of a named group, a group
// setting or group_order=fair makes it version 4 for as long as anything
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
	if v := version(s); v != 3 {
		t.Fatalf("without groups: version %d, want 3", v)
	}
	g, _ := s.Submit(0, Submission{Tenant: "a", Size: SM, EstCostMs: 10, Group: "g"})
	if v := version(s); v != 4 {
		t.Fatalf("with a job of group g: version %d, want 4", v)
	}
	s.Cancel(0, g)
	if v := version(s); v != 4 {
		t.Fatalf("with a cancelled job of group g in the table: version %d, want 4", v)
	}
	if n := s.Prune(1, 10); n != 1 {
		t.Fatalf("pruned %d", n)
	}
	if v := version(s); v != 3 {
		t.Fatalf("once the job of group g is pruned: version %d, want 3", v)
	}
	if err := s.SetGroup("a", "h", GroupSettings{Cap: 3}); err != nil {
		t.Fatal(err)
	}
	if v := version(s); v != 4 {
		t.Fatalf("with a setting on group h: version %d, want 4", v)
	}
	s.SetGroup("a", "h", GroupSettings{})
	if _, ok := s.Group("a", "h"); ok {
		t.Fatal("group h without job or setting was not forgotten")
	}
	s.UpsertTenant(TenantSpec{Name: "a", Tier: Gold, GroupOrder: GroupFair})
	if v := version(s); v != 4 {
		t.Fatalf("with group_order=fair: version %d, want 4", v)
	}
	s.Dispatch(0, SM, "w")
	s.UpsertTenant(TenantSpec{Name: "a", Tier: Gold})
	if v := version(s); v != 4 {
		t.Fatalf("back to fifo with a group tag left: version %d, want 4", v)
	}
	_ = id
}

// TestVersion1Encoding: a state that holds only what version 1 can (class
// normal, no deadline, no learned estimate) written as version 1 decodes
// to the same state; with learning off, completions teach nothing, so the
// state keeps fitting. Anything version 1 cannot hold is named.
func TestVersion1Encoding(t *testing.T) {
	s, _ := New(DefaultConfig())
	s.SetVersion1(true)
	s.UpsertTenant(TenantSpec{Name: "a", Tier: Gold, Caps: Caps{MaxRunning: 3}})
	s.UpsertTenant(TenantSpec{Name: "b", Tier: Free})
	for i := range 6 {
		if _, err := s.Submit(Time(i), Submission{Tenant: []string{"a", "b"}[i%2], Type: "render", Size: Size(i % 3), EstCostMs: 1000, Key: fmt.Sprint("k", i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		a, ok, _ := s.Dispatch(10, LG, fmt.Sprint("w", i))
		if !ok {
			t.Fatal("nothing dispatched")
		}
		if i < 2 {
			s.Finish(11, a.Job, a.Attempt, fmt.Sprint("w", i), OutcomeOK, 900, RunResult{})
		}
	}
	if _, ok := s.Estimate("a", "render"); ok {
		t.Fatal("learned an estimate with learning off")
	}
	v := s.Freeze()
	if err := v.FitsVersion1(); err != nil {
		t.Fatalf("FitsVersion1: %v", err)
	}
	var buf bytes.Buffer
	e := NewEncoder(&buf)
	v.EncodeVersion(e, 1)
	e.Flush()
	if buf.Bytes()[0] != 1 {
		t.Fatalf("version byte %d", buf.Bytes()[0])
	}
	d, err := decodeBytes(buf.Bytes())
	if err != nil {
		t.Fatalf("decode version 1: %v", err)
	}
	if d.Hash() != s.Hash() {
		t.Fatal("a state written as version 1 decodes to another state")
	}
	if len(buf.Bytes()) >= len(encodeView(v)) {
		t.Fatalf("version 1 is %d bytes, version 2 %d", len(buf.Bytes()), len(encodeView(v)))
	}

	for _, c := range []struct {
		change func(s *Scheduler)
		want   string
	}{
		{func(s *Scheduler) { s.UpsertTenant(TenantSpec{Name: "a", Tier: Gold, MaxClass: ClassHigh}) }, "tenant a has max_class high, allow_deadlines false"},
		{func(s *Scheduler) {
			s.UpsertTenant(TenantSpec{Name: "b", Tier: Free, Caps: Caps{MaxRunningDeadline: 1}})
		}, "tenant b has a class or deadline cap"},
		{func(s *Scheduler) {
			s.UpsertTenant(TenantSpec{Name: "a", Tier: Gold, AllowDeadlines: true})
			s.Submit(20, Submission{Tenant: "a", Size: SM, EstCostMs: 5, DeadlineMs: 5000})
			s.UpsertTenant(TenantSpec{Name: "a", Tier: Gold})
		}, "job 7 has class normal, a deadline true, estimate from submitted"},
		{func(s *Scheduler) {
			s.SetVersion1(false)
			a, _, _ := s.Dispatch(30, LG, "w9")
			s.Finish(31, a.Job, a.Attempt, "w9", OutcomeOK, 5, RunResult{})
		}, "1 learned cost estimates"},
		{func(s *Scheduler) {
			cfg := DefaultConfig()
			cfg.Estimate = EstimateAuto
			s.SetConfig(cfg)
		}, "estimate=auto default_cost=60000 ms"},
	} {
		w, _ := decodeBytes(buf.Bytes())
		w.SetVersion1(true)
		c.change(w)
		if err := w.Freeze().FitsVersion1(); err == nil || err.Error() != c.want {
			t.Errorf("FitsVersion1 = %v, want %q", err, c.want)
		}
	}
}
