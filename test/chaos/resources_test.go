package chaos

import (
	"testing"

	"github.com/baristahq/barista/snapshot"
)

// resourceHistory is a valid history of one resource, api (capacity 2,
// tenant_max 1): job 1 of tenant a and job 2 of tenant b each take a
// unit; job 1 finishes, its unit goes back; the capacity falls to 0 while
// job 2 holds its unit (a decrease preempts nothing). Job 1 held the
// reservation of api at its pick; at job 2's, job 9 held api's and job 2
// db's, ranked before it (blocked since 400 against 500), so job 2 may
// take api's units.
func resourceHistory() *History {
	one := uint32(1)
	res := func(index uint64, capacity uint32, held uint64, holders ...string) snapshot.AuditFact {
		return snapshot.AuditFact{Kind: "resources", Index: index, Resources: []snapshot.ResourceFact{{Name: "api", Capacity: capacity, TenantMax: &one, Held: held, Holders: holders}}}
	}
	dispatch := func(index, job uint64, tenant string, held uint64) snapshot.AuditFact {
		return snapshot.AuditFact{Kind: "dispatch", Index: index, Job: job, Tenant: tenant, Attempt: 1, Size: "sm", Class: "normal", Running: 1, RunningSize: 1,
			Uses: []snapshot.ResourceUseFact{{Resource: "api", Units: 1, Held: held, Capacity: 2, TenantHeld: 1, TenantMax: &one}}}
	}
	h := &History{Nodes: []NodeFinal{{ID: "n1", Index: 10, Hash: "h"}}, AuditIndex: 10, AuditHash: "h"}
	first, second := dispatch(2, 1, "a", 1), dispatch(3, 2, "b", 2)
	first.Reservations = []string{"api/1/300"}
	second.Reservations = []string{"api/9/500", "db/2/400"}
	h.Audit = []snapshot.AuditFact{
		res(1, 2, 0),
		first,
		res(2, 2, 1, "1/1/1"),
		second,
		res(3, 2, 2, "1/1/1", "2/1/1"),
		{Kind: "finish", Index: 4, Job: 1, Tenant: "a", Attempt: 1, Outcome: "ok"},
		{Kind: "terminal", Index: 4, Job: 1, Tenant: "a", State: "succeeded"},
		res(4, 2, 1, "2/1/1"),
		res(5, 0, 1, "2/1/1"),
	}
	return h
}

// TestCheckerAcceptsResources: units taken within capacity and the
// tenants' limits, given back at the end of a run, and held across a
// decrease of the capacity break no rule.
func TestCheckerAcceptsResources(t *testing.T) {
	if vs := Check(resourceHistory()); len(vs) != 0 {
		t.Fatal(Report(vs))
	}
}

// TestCheckerCatchesBrokenResources: each way of breaking SPEC §8 rule 13
// is a violation of rule 13 naming it.
func TestCheckerCatchesBrokenResources(t *testing.T) {
	expectBroken(t, 13, resourceHistory, []brokenCase{
		{"a dispatch beyond the capacity", "index 3: dispatching job 2 raised resource api to 3 units held, its capacity 2", func(h *History) {
			setFactAt(h, "dispatch", 3, func(f *snapshot.AuditFact) { f.Uses[0].Held = 3 })
		}},
		{"a dispatch beyond the tenant's limit", "index 3: dispatching job 2 raised tenant b to 2 units of resource api, its limit 1", func(h *History) {
			setFactAt(h, "dispatch", 3, func(f *snapshot.AuditFact) { f.Uses[0].TenantHeld = 2 })
		}},
		{"a unit held by a run that ended", "index 4: job 1 (attempt 1) holds 1 units of resource api, and that run had ended (dispatched at index 2)", func(h *History) {
			setFactAt(h, "resources", 4, func(f *snapshot.AuditFact) {
				f.Resources[0].Held, f.Resources[0].Holders = 2, []string{"1/1/1", "2/1/1"}
			})
		}},
		{"a unit held by a run never dispatched", "index 3: job 7 (attempt 1) holds 1 units of resource api, and that run was never dispatched", func(h *History) {
			setFactAt(h, "resources", 3, func(f *snapshot.AuditFact) { f.Resources[0].Holders[1] = "7/1/1" })
		}},
		{"a unit held by an older attempt", "index 3: job 2 (attempt 2) holds 1 units of resource api, and that run was never dispatched", func(h *History) {
			setFactAt(h, "resources", 3, func(f *snapshot.AuditFact) { f.Resources[0].Holders[1] = "2/2/1" })
		}},
		{"more units held than the dispatch took", "index 3: job 2 (attempt 1) holds 2 units of resource api, its dispatch at index 3 took 1", func(h *History) {
			setFactAt(h, "resources", 3, func(f *snapshot.AuditFact) { f.Resources[0].Held, f.Resources[0].Holders[1] = 3, "2/1/2" })
		}},
		{"a unit held past its worker's reconnect without it", "index 5: job 2 (attempt 1) holds 1 units of resource api, and that run had ended (dispatched at index 3)", func(h *History) {
			h.Audit = append(h.Audit[:8], append([]snapshot.AuditFact{{Kind: "hello", Index: 5, Job: 2, Attempt: 1, Worker: "w", FailuresBefore: 0, Failures: 1, Hello: &snapshot.HelloFact{Before: "running", State: "queued"}}}, h.Audit[8:]...)...)
		}},
		{"a count no live job accounts for", "index 5: resource api counts 2 units held, its live jobs hold 1", func(h *History) {
			setFactAt(h, "resources", 5, func(f *snapshot.AuditFact) { f.Resources[0].Held = 2 })
		}},
		{"a unit kept after the run ended", "index 4: resource api counts 2 units held, its live jobs hold 1", func(h *History) {
			setFactAt(h, "resources", 4, func(f *snapshot.AuditFact) { f.Resources[0].Held = 2 })
		}},
		{"units taken past another job's reservation", "index 3: dispatching job 2 took 1 units of resource api while job 9's reservation of it stood (blocked since 500)", func(h *History) {
			setFactAt(h, "dispatch", 3, func(f *snapshot.AuditFact) { f.Reservations = []string{"api/9/500"} })
		}},
		{"units taken past a reservation ranked before the job's own", "index 3: dispatching job 2 took 1 units of resource api while job 9's reservation of it stood (blocked since 500)", func(h *History) {
			setFactAt(h, "dispatch", 3, func(f *snapshot.AuditFact) { f.Reservations = []string{"api/9/500", "db/2/600"} })
		}},
		{"units taken past a reservation of the same rank and a lower job", "index 3: dispatching job 2 took 1 units of resource api while job 1's reservation of it stood (blocked since 500)", func(h *History) {
			setFactAt(h, "dispatch", 3, func(f *snapshot.AuditFact) { f.Reservations = []string{"api/1/500", "db/2/500"} })
		}},
	})
}
