package sfq

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// simulatedPlace dispatches workers of job id's size in its pool, one
// after another, on a copy of s, and returns how many jobs they got
// before it (ok false: it never came, or another job left nothing).
func simulatedPlace(t fataler, s *Scheduler, id JobID, now Time) (uint64, bool) {
	c := reloaded(t, s)
	j, _ := c.Job(id)
	pid := c.LanePool(j.Tenant)
	var n uint64
	for i := 0; ; i++ {
		a, ok, err := c.DispatchPool(now, pid, j.Size, fmt.Sprintf("sim-%d", i))
		if err != nil {
			t.Fatalf("simulated dispatch: %v", err)
		}
		if !ok {
			return n, false
		}
		if a.Job == id {
			return n, true
		}
		n++
	}
}

// TestPlaceMatchesDispatches: with no cap, rate limit or pause in play and
// the prefer-fit policy, a queued job's place in line is exactly the
// number of jobs that workers of its size, asking one after another, are
// given before it — for random tenants (tiers, multipliers, group
// orders), classes, sizes, deadlines, groups, costs, both clamps and
// decay, after random dispatches and finishes.
func TestPlaceMatchesDispatches(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := DefaultConfig()
		cfg.Clamp = ClampMode(rapid.IntRange(0, 1).Draw(t, "clamp"))
		if rapid.Bool().Draw(t, "decay") {
			cfg.Decay = &Decay{HalfLifeMs: rapid.Int64Range(1000, 100_000).Draw(t, "half_life"), NormMs: rapid.Int64Range(1000, 50_000).Draw(t, "norm")}
		}
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		nt := rapid.IntRange(1, 5).Draw(t, "tenants")
		for i := range nt {
			spec := TenantSpec{Name: fmt.Sprintf("t%d", i), Tier: Tier(rapid.IntRange(0, NumTiers-1).Draw(t, "tier")),
				Multiplier: uint32(rapid.IntRange(1, 3).Draw(t, "mult")), MaxClass: ClassCritical, AllowDeadlines: true,
				GroupOrder: GroupOrder(rapid.IntRange(0, 1).Draw(t, "group_order"))}
			if _, err := s.UpsertTenant(spec); err != nil {
				t.Fatal(err)
			}
		}
		now := Time(0)
		var live []Assignment
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for range steps {
			now += Time(rapid.Int64Range(0, 2000).Draw(t, "dt"))
			switch rapid.IntRange(0, 9).Draw(t, "op") {
			case 0, 1, 2, 3, 4, 5:
				sub := Submission{Tenant: fmt.Sprintf("t%d", rapid.IntRange(0, nt-1).Draw(t, "who")),
					Size: Size(rapid.IntRange(0, NumSizes-1).Draw(t, "size")), EstCostMs: rapid.Int64Range(1, 5000).Draw(t, "cost"),
					Class: Class(rapid.IntRange(0, NumClasses-1).Draw(t, "class")), Group: rapid.SampledFrom([]string{"", "a", "b"}).Draw(t, "group")}
				if rapid.IntRange(0, 4).Draw(t, "dl") == 0 {
					sub.DeadlineMs = rapid.Int64Range(1000, 60_000).Draw(t, "deadline")
				}
				if _, err := s.Submit(now, sub); err != nil {
					t.Fatal(err)
				}
			case 6, 7:
				a, ok, err := s.Dispatch(now, Size(rapid.IntRange(0, NumSizes-1).Draw(t, "wsize")), fmt.Sprintf("w%d", len(live)))
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					live = append(live, a)
				}
			default:
				if len(live) == 0 {
					continue
				}
				i := rapid.IntRange(0, len(live)-1).Draw(t, "finish")
				a := live[i]
				j, _ := s.Job(a.Job)
				if _, err := s.Finish(now, a.Job, a.Attempt, j.Worker, OutcomeOK, rapid.Int64Range(0, 6000).Draw(t, "cpu"), RunResult{}); err != nil {
					t.Fatal(err)
				}
				live = append(live[:i], live[i+1:]...)
			}
		}
		// Every queued job's place, against the dispatches.
		s.Jobs(0, func(j *Job) bool {
			pl, ok, err := s.Place(j.ID, now, 1<<20)
			if err != nil {
				t.Fatalf("place of job %d: %v", j.ID, err)
			}
			if !ok {
				if j.State == Queued {
					t.Fatalf("queued job %d has no place", j.ID)
				}
				return true
			}
			want, came := simulatedPlace(t, s, j.ID, now)
			if !came {
				t.Fatalf("job %d never came to workers of its size", j.ID)
			}
			if !pl.Complete || pl.Ahead != want {
				t.Fatalf("job %d (%s %s, deadline %v): place %+v, dispatched after %d", j.ID, j.Class, j.Size, j.HasDeadline(), pl, want)
			}
			return true
		})
	})
}

// TestPlaceTakesLimitsAsTheyStand: a tenant at its cap contributes none of
// its jobs; a job of a capped tenant has no place; the count stops at the
// limit and says so.
func TestPlaceTakesLimitsAsTheyStand(t *testing.T) {
	s, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []TenantSpec{{Name: "a"}, {Name: "b", Caps: Caps{MaxRunning: 1}}, {Name: "c"}} {
		if _, err := s.UpsertTenant(spec); err != nil {
			t.Fatal(err)
		}
	}
	submit := func(tenant string, n int) {
		for range n {
			if _, err := s.Submit(0, Submission{Tenant: tenant, Size: MD, EstCostMs: 1000}); err != nil {
				t.Fatal(err)
			}
		}
	}
	submit("b", 3) // jobs 1-3
	if _, ok, err := s.Dispatch(0, MD, "w1"); err != nil || !ok {
		t.Fatalf("dispatch: %v %v", ok, err)
	}
	submit("a", 3) // jobs 4-6
	submit("c", 3) // jobs 7-9
	for _, tc := range []struct {
		job        JobID
		ok         bool
		ahead, own uint64
	}{
		{2, false, 0, 0}, // b is at its cap
		{4, true, 0, 0},
		{7, true, 1, 0}, // a's job 4 goes first (same tag, lower ID)
		{9, true, 5, 2}, // a c a c ... in turn: 4 7 5 8 6 9
		{6, true, 4, 2}, // 4 7 5 8
	} {
		pl, ok, err := s.Place(tc.job, 0, 100)
		if err != nil || ok != tc.ok || pl.Ahead != tc.ahead || pl.Own != tc.own || (ok && !pl.Complete) {
			t.Errorf("job %d: place %+v ok %v err %v, want ok %v ahead %d own %d", tc.job, pl, ok, err, tc.ok, tc.ahead, tc.own)
		}
	}
	if pl, ok, _ := s.Place(9, 0, 3); !ok || pl.Ahead != 3 || pl.Complete {
		t.Errorf("limited: %+v %v, want 3 and incomplete", pl, ok)
	}
}

// BenchmarkPlace: the place of the newest job of one of 100 backlogged
// tenants with 1,000 queued md jobs each (100,000 queued): the count
// stops at fsm's PlaceLimit, 10,000 jobs; and of a tenant's next job,
// with 100 tenants' candidates to walk.
func BenchmarkPlace(b *testing.B) {
	s, err := New(DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	var last, next JobID
	for i := range 100 {
		name := fmt.Sprintf("t%d", i)
		if _, err := s.UpsertTenant(TenantSpec{Name: name, Tier: Tier(i % NumTiers)}); err != nil {
			b.Fatal(err)
		}
	}
	for k := range 1000 {
		for i := range 100 {
			id, err := s.Submit(0, Submission{Tenant: fmt.Sprintf("t%d", i), Size: MD, EstCostMs: 1000})
			if err != nil {
				b.Fatal(err)
			}
			if i == 50 && k == 0 {
				next = id
			}
			last = id
		}
	}
	for _, bc := range []struct {
		name string
		id   JobID
	}{{"newest-limited", last}, {"next", next}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok, err := s.Place(bc.id, 0, 10_000); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		})
	}
}
