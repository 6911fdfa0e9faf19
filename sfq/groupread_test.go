package sfq

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// showGroups prints groups as name:running/queued, in order.
func showGroups(gs []Group) string {
	var b strings.Builder
	for i, g := range gs {
		if i > 0 {
			b.WriteByte(' ')
		}
		name := g.Name
		if name == "" {
			name = "-"
		}
		fmt.Fprintf(&b, "%s:%d/%d", name, g.Running, g.Queued)
	}
	return b.String()
}

// TestTopGroupsAndSortedGroups: TopGroups orders a tenant's groups by
// queued jobs, then running jobs, then name, and counts them all (the
// unnamed group included); SortedGroups pages through them by name, the
// unnamed group first. Neither sees another tenant's groups.
func TestTopGroupsAndSortedGroups(t *testing.T) {
	s, _ := New(DefaultConfig())
	s.UpsertTenant(TenantSpec{Name: "a", Tier: Gold})
	s.UpsertTenant(TenantSpec{Name: "b", Tier: Gold})
	// b's jobs are md, out of reach of the sm dispatches below.
	submit := func(tenant, group string, n int) {
		size := SM
		if tenant == "b" {
			size = MD
		}
		for range n {
			if _, err := s.Submit(0, Submission{Tenant: tenant, Size: size, EstCostMs: 10, Group: group}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// a: unnamed 2, x 3, y 3, z 1, w 0 jobs (a setting only); b: x 5.
	submit("a", "", 2)
	submit("a", "x", 3)
	submit("a", "y", 3)
	submit("a", "z", 1)
	submit("b", "x", 5)
	if err := s.SetGroup("a", "w", GroupSettings{Cap: 2}); err != nil {
		t.Fatal(err)
	}
	// Two dispatches: the oldest jobs, the unnamed group's (IDs 1, 2).
	for range 2 {
		if _, ok, err := s.Dispatch(0, SM, "w"); !ok || err != nil {
			t.Fatalf("dispatch: %v %v", ok, err)
		}
	}
	// A third: x's first job (ID 3) runs, so x (1 running, 2 queued)
	// sorts after y (0/3) and before the unnamed group (2/0).
	if _, ok, _ := s.Dispatch(0, SM, "w"); !ok {
		t.Fatal("third dispatch")
	}
	for _, c := range []struct {
		n    int
		want string
	}{
		{1, "y:0/3"},
		{3, "y:0/3 x:1/2 z:0/1"},
		{10, "y:0/3 x:1/2 z:0/1 -:2/0 w:0/0"},
	} {
		got, count := s.TopGroups("a", c.n)
		if showGroups(got) != c.want || count != 5 {
			t.Errorf("TopGroups(a, %d) = %s (%d groups), want %s (5)", c.n, showGroups(got), count, c.want)
		}
	}
	if got, count := s.TopGroups("b", 10); showGroups(got) != "x:0/5" || count != 1 {
		t.Errorf("TopGroups(b) = %s (%d)", showGroups(got), count)
	}
	if got, count := s.TopGroups("nobody", 10); got != nil || count != 0 {
		t.Errorf("TopGroups(nobody) = %v, %d", got, count)
	}

	// Pages of two by name: "" (unnamed), w | x, y | z.
	var pages []string
	after, first := "", true
	for {
		gs, more, ok := s.SortedGroups("a", after, first, 2)
		if !ok {
			t.Fatal("tenant a not found")
		}
		pages = append(pages, showGroups(gs))
		if !more {
			break
		}
		after, first = gs[len(gs)-1].Name, false
	}
	if got := strings.Join(pages, " | "); got != "-:2/0 w:0/0 | x:1/2 y:0/3 | z:0/1" {
		t.Errorf("pages: %s", got)
	}
	// After a name between two groups; after the last one.
	if gs, more, _ := s.SortedGroups("a", "xa", false, 10); showGroups(gs) != "y:0/3 z:0/1" || more {
		t.Errorf("after xa: %s more=%v", showGroups(gs), more)
	}
	if gs, more, _ := s.SortedGroups("a", "z", false, 10); len(gs) != 0 || more {
		t.Errorf("after z: %s more=%v", showGroups(gs), more)
	}
	if _, _, ok := s.SortedGroups("nobody", "", true, 10); ok {
		t.Error("SortedGroups found an unknown tenant")
	}
	// The cap in force: w's own cap 2; x inherits the tenant's group_cap
	// (none, then 4); the unnamed group never has one.
	s.UpsertTenant(TenantSpec{Name: "a", Tier: Gold, GroupCap: 4})
	ta, _ := s.Tenant("a")
	for _, c := range []struct {
		name string
		want uint32
	}{{"w", 2}, {"x", 4}, {"", 0}} {
		g, _ := s.Group("a", c.name)
		if got := CapOf(&ta, &g); got != c.want {
			t.Errorf("cap of %q: %d, want %d", c.name, got, c.want)
		}
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestGroupReadsAgainstSorting: whatever the groups and their jobs,
// TopGroups is the first n of all groups sorted by (queued desc, running
// desc, name), and paging SortedGroups returns every group once, by name.
func TestGroupReadsAgainstSorting(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s, _ := New(DefaultConfig())
		s.UpsertTenant(TenantSpec{Name: "a", Tier: Gold})
		for i := range rapid.IntRange(0, 60).Draw(t, "jobs") {
			g := rapid.SampledFrom([]string{"", "b", "c", "d", "e", "f", "g", "h", "x:1", "x@2"}).Draw(t, "group")
			if _, err := s.Submit(Time(i), Submission{Tenant: "a", Size: SM, EstCostMs: 10, Group: g}); err != nil {
				t.Fatal(err)
			}
		}
		for range rapid.IntRange(0, 20).Draw(t, "dispatches") {
			s.Dispatch(0, SM, "w")
		}
		var all []Group
		s.Groups("a", func(g *Group) bool { all = append(all, *g); return true })
		want := slices.Clone(all)
		slices.SortFunc(want, func(x, y Group) int {
			switch {
			case x.Queued != y.Queued:
				return int(y.Queued) - int(x.Queued)
			case x.Running != y.Running:
				return int(y.Running) - int(x.Running)
			}
			return strings.Compare(x.Name, y.Name)
		})
		n := rapid.IntRange(1, 12).Draw(t, "n")
		got, count := s.TopGroups("a", n)
		if count != len(all) || showGroups(got) != showGroups(want[:min(n, len(want))]) {
			t.Fatalf("TopGroups(%d) = %s (%d), want %s (%d)", n, showGroups(got), count, showGroups(want[:min(n, len(want))]), len(all))
		}
		byName := slices.Clone(all)
		slices.SortFunc(byName, func(x, y Group) int { return strings.Compare(x.Name, y.Name) })
		size := rapid.IntRange(1, 5).Draw(t, "page")
		var paged []Group
		after, first := "", true
		for {
			page, more, ok := s.SortedGroups("a", after, first, size)
			if !ok || len(page) > size {
				t.Fatalf("page of %d: %d groups, ok %v", size, len(page), ok)
			}
			paged = append(paged, page...)
			if !more {
				break
			}
			after, first = page[len(page)-1].Name, false
		}
		if showGroups(paged) != showGroups(byName) {
			t.Fatalf("pages of %d: %s, want %s", size, showGroups(paged), showGroups(byName))
		}
	})
}
