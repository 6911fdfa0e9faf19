package snapshot_test

import (
	"testing"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/sfq"
	"github.com/baristahq/barista/snapshot"
	"github.com/baristahq/barista/snapshot/scenario"
)

// fairTenant is a tenant of the fairness workload: its tier, the CPU its
// jobs take and the cost it states for them.
type fairTenant struct {
	name      string
	tier      sfq.Tier
	cpu, cost int64
}

// fairTenants are the fairness report's workload's
// (testdata/scenarios/five-tiers-wrong-estimates.txt): silver states half
// its jobs' CPU, gold half as much again.
var fairTenants = []fairTenant{
	{"free", sfq.Free, 1000, 1000}, {"bronze", sfq.Bronze, 2000, 2000}, {"silver", sfq.Silver, 3000, 1500},
	{"gold", sfq.Gold, 2000, 3000}, {"diamond", sfq.Diamond, 4000, 4000},
}

// simulateFairness runs the fairness workload on a state machine for dur
// of cluster time — the five tenants kept backlogged, workers md workers
// each asking for a job when free and finishing it after its CPU time —
// and returns its log.
func simulateFairness(t testing.TB, workers int, dur sfq.Time) *snapshot.MemorySource {
	t.Helper()
	m := scenario.NewMachine()
	m.Record = true
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	byName := map[string]fairTenant{}
	for _, ft := range fairTenants {
		must(m.UpsertTenant(0, sfq.TenantSpec{Name: ft.name, Tier: ft.tier}))
		byName[ft.name] = ft
	}
	topUp := func(now sfq.Time) {
		for _, ft := range fairTenants {
			tn, _, _ := m.TenantState(ft.name, sfq.ClassNormal)
			for q := tn.QueuedTotal(); q < 10; q++ {
				_, err := m.Submit(now, sfq.Submission{Tenant: ft.name, Size: sfq.MD, EstCostMs: ft.cost})
				must(err)
			}
		}
	}
	type run struct {
		job     sfq.JobID
		attempt uint32
		cpu     int64
		ends    sfq.Time
	}
	names := make([]string, workers)
	runs := make([]*run, workers)
	for i := range names {
		names[i] = "w" + string(rune('1'+i))
	}
	now := sfq.Time(0)
	topUp(now)
	for now < dur {
		for i, r := range runs {
			if r != nil && r.ends <= now {
				must(m.Finish(now, r.job, r.attempt, names[i], sfq.OutcomeOK, r.cpu, false, 0))
				runs[i] = nil
			}
		}
		topUp(now)
		for i := range runs {
			if runs[i] != nil {
				continue
			}
			a, ok, err := m.Dispatch(now, "", sfq.MD, names[i])
			must(err)
			if !ok {
				t.Fatalf("nothing to dispatch at %d", now)
			}
			ft := byName[m.TenantName(a.Tenant)]
			runs[i] = &run{job: a.Job, attempt: a.Attempt, cpu: ft.cpu, ends: now + sfq.Time(ft.cpu)}
		}
		next := dur
		for _, r := range runs {
			next = min(next, r.ends)
		}
		now = next
	}
	return &snapshot.MemorySource{New: func() *fsm.FSM { return fsm.NewAtLevel(scenario.DefaultLevel) }, Entries: m.Entries}
}
