package sfq

import (
	"errors"
	"testing"
)

// resWorld is a scheduler with tenants and resources for the tests of
// resources.
type resWorld struct {
	t   *testing.T
	s   *Scheduler
	now Time
	n   int
}

func newResWorld(t *testing.T, tenants ...string) *resWorld {
	t.Helper()
	s, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range tenants {
		if _, err := s.UpsertTenant(TenantSpec{Name: name, Tier: Free}); err != nil {
			t.Fatal(err)
		}
	}
	return &resWorld{t: t, s: s}
}

func (w *resWorld) resource(name string, capacity, tenantMax uint32) {
	w.t.Helper()
	if _, err := w.s.SetResource(w.now, ResourceSpec{Name: name, Capacity: capacity, TenantMax: tenantMax}); err != nil {
		w.t.Fatal(err)
	}
	w.verify()
}

func (w *resWorld) submit(tenant string, cost int64, uses ...Use) JobID {
	w.t.Helper()
	id, err := w.s.Submit(w.now, Submission{Tenant: tenant, Size: SM, EstCostMs: cost, Uses: uses})
	if err != nil {
		w.t.Fatal(err)
	}
	w.verify()
	return id
}

func (w *resWorld) dispatch() JobID {
	w.t.Helper()
	w.n++
	a, _, err := w.s.Dispatch(w.now, SM, "w")
	if err != nil {
		w.t.Fatal(err)
	}
	w.verify()
	return a.Job
}

func (w *resWorld) finish(id JobID) {
	w.t.Helper()
	j, _ := w.s.Job(id)
	if _, err := w.s.Finish(w.now, id, j.Attempt, j.Worker, OutcomeOK, j.EstCostMs, RunResult{}); err != nil {
		w.t.Fatal(err)
	}
	w.verify()
}

func (w *resWorld) verify() {
	w.t.Helper()
	if err := w.s.Verify(); err != nil {
		w.t.Fatal(err)
	}
	if d := reloaded(w.t, w.s); d.Hash() != w.s.Hash() {
		w.t.Fatal("reloaded state differs")
	}
}

func (w *resWorld) held(name string) uint64 {
	r, ok := w.s.Resource(name)
	if !ok {
		w.t.Fatalf("no resource %s", name)
	}
	return r.Held
}

// TestResourcePassOver: a head blocked only by a resource is passed
// over; the jobs behind it go, and it keeps its place.
func TestResourcePassOver(t *testing.T) {
	w := newResWorld(t, "a")
	w.resource("api", 1, NoTenantMax)
	j1 := w.submit("a", 1000, Use{"api", 1})
	j2 := w.submit("a", 1000, Use{"api", 1})
	j3 := w.submit("a", 1000)
	if got := w.dispatch(); got != j1 {
		t.Fatalf("first dispatch %d, want %d", got, j1)
	}
	if w.held("api") != 1 {
		t.Fatalf("held %d", w.held("api"))
	}
	if got := w.dispatch(); got != j3 {
		t.Fatalf("second dispatch %d, want %d (job %d passed over)", got, j3, j2)
	}
	if got := w.dispatch(); got != 0 {
		t.Fatalf("third dispatch %d, want none", got)
	}
	r, _ := w.s.Explain(j2)
	if r.Kind != ReasonResource || r.Resource.Resource != "api" || r.Resource.Held != 1 || r.Resource.Capacity != 1 {
		t.Fatalf("explain %s", r.Format())
	}
	w.finish(j1)
	if w.held("api") != 0 {
		t.Fatalf("held %d after the run ended", w.held("api"))
	}
	if got := w.dispatch(); got != j2 {
		t.Fatalf("after the unit is free: %d, want %d", got, j2)
	}
}

// TestResourceTenantMax: a tenant at its limit is passed over; another
// tenant takes the unit.
func TestResourceTenantMax(t *testing.T) {
	w := newResWorld(t, "a", "b")
	w.resource("api", 4, 2)
	var as []JobID
	for range 4 {
		as = append(as, w.submit("a", 1000, Use{"api", 1}))
	}
	w.dispatch()
	w.dispatch()
	b1 := w.submit("b", 1000, Use{"api", 1})
	if got := w.dispatch(); got != b1 {
		t.Fatalf("a is at its tenant_max 2: got %d, want b's %d", got, b1)
	}
	if got := w.dispatch(); got != 0 {
		t.Fatalf("got %d, want none (a at its max)", got)
	}
	r, _ := w.s.Explain(as[2])
	if r.Kind != ReasonResource || !r.Resource.Tenant || r.Resource.TenantHeld != 2 || r.Resource.TenantMax != 2 {
		t.Fatalf("explain %s", r.Format())
	}
	// A tenant's own limit replaces the resource's.
	if _, err := w.s.SetResourceLimit(w.now, "api", "a", 3); err != nil {
		t.Fatal(err)
	}
	if got := w.dispatch(); got != as[2] {
		t.Fatalf("got %d, want %d", got, as[2])
	}
	if got := w.dispatch(); got != 0 {
		t.Fatalf("got %d, want none (capacity 4 held)", got)
	}
}

// TestResourceReservation: a job that needs 3 units is not starved by
// jobs that need 1: after resource_reserve_after it takes the
// reservation, and no other job takes units until it runs.
func TestResourceReservation(t *testing.T) {
	w := newResWorld(t, "a", "b")
	w.resource("lic", 3, NoTenantMax)
	var small []JobID
	for range 3 {
		small = append(small, w.submit("a", 1000, Use{"lic", 1}))
	}
	for range 3 {
		w.dispatch()
	}
	big := w.submit("b", 1000, Use{"lic", 3})
	for range 10 {
		small = append(small, w.submit("a", 1000, Use{"lic", 1}))
	}
	// Churn for 60 s: a unit frees and a small job takes it each 10 s.
	next := 3
	for range 6 {
		w.now += 10_000
		w.finish(small[next-3])
		if got := w.dispatch(); got != small[next] {
			t.Fatalf("at %d: got %d, want small job %d", w.now, got, small[next])
		}
		next++
	}
	// Blocked since its submit at 0, for 70 s > 60 s: the next dispatch
	// gives it the reservation, and the unit a run frees stays free.
	w.now += 10_000
	w.finish(small[next-3])
	if got := w.dispatch(); got != 0 {
		t.Fatalf("with the reservation standing: got %d, want none", got)
	}
	// Queued: the big job (3 units, 1 free) and 4 small ones, which fit
	// but are held back by the reservation: all 5 are blocked.
	if info, _ := w.s.Resource("lic"); info.Reserved != big || info.Queued != 5 || info.Blocked != 5 {
		t.Fatalf("reserved by %d (want %d), queued %d blocked %d (want 5 and 5)", info.Reserved, big, info.Queued, info.Blocked)
	}
	r, _ := w.s.Explain(small[next])
	if r.Kind != ReasonResource || r.Resource.Reserved != big {
		t.Fatalf("explain %s", r.Format())
	}
	w.finish(small[next-2])
	w.finish(small[next-1])
	// 3 free units: the big job has room and waits only for a worker.
	if info, _ := w.s.Resource("lic"); info.Reserved != big || info.Queued != 5 || info.Blocked != 4 {
		t.Fatalf("with room for the holder: reserved by %d, queued %d blocked %d (want 5 and 4)", info.Reserved, info.Queued, info.Blocked)
	}
	if got := w.dispatch(); got != big {
		t.Fatalf("got %d, want the big job %d", got, big)
	}
	if info, _ := w.s.Resource("lic"); info.Reserved != 0 || info.Held != 3 || info.Queued != 4 || info.Blocked != 4 {
		t.Fatalf("after its dispatch: %+v", info)
	}
}

// TestResourceCapacityDecrease: a decrease below what is held preempts
// nothing; no unit is taken until held is below the new capacity.
func TestResourceCapacityDecrease(t *testing.T) {
	w := newResWorld(t, "a")
	w.resource("db", 3, NoTenantMax)
	var js []JobID
	for range 5 {
		js = append(js, w.submit("a", 1000, Use{"db", 1}))
	}
	for range 3 {
		w.dispatch()
	}
	w.resource("db", 1, NoTenantMax)
	if w.held("db") != 3 {
		t.Fatalf("held %d", w.held("db"))
	}
	w.finish(js[0])
	if got := w.dispatch(); got != 0 {
		t.Fatalf("held 2 of capacity 1: got %d", got)
	}
	w.finish(js[1])
	w.finish(js[2])
	if got := w.dispatch(); got != js[3] {
		t.Fatalf("got %d, want %d", got, js[3])
	}
}

// TestResourceSubmitChecks: an unknown resource is NotFound, units
// above the capacity Invalid; a resource in use is not deleted.
func TestResourceSubmitChecks(t *testing.T) {
	w := newResWorld(t, "a")
	w.resource("api", 2, NoTenantMax)
	if _, err := w.s.Submit(0, Submission{Tenant: "a", EstCostMs: 1, Uses: []Use{{"nope", 1}}}); !errors.Is(err, ErrUnknownResource) {
		t.Fatalf("unknown resource: %v", err)
	}
	if _, err := w.s.Submit(0, Submission{Tenant: "a", EstCostMs: 1, Uses: []Use{{"api", 3}}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("3 units of 2: %v", err)
	}
	id := w.submit("a", 1, Use{"api", 2})
	if err := w.s.DeleteResource("api"); err == nil {
		t.Fatal("deleted a resource a queued job uses")
	}
	if _, err := w.s.Cancel(0, id); err != nil {
		t.Fatal(err)
	}
	w.verify()
	if err := w.s.DeleteResource("api"); err != nil {
		t.Fatal(err)
	}
	w.verify()
}
