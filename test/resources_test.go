package test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
	"github.com/baristahq/barista/test/cluster"
	"github.com/baristahq/barista/worker"
)

// TestNoisyNeighbourAtAResource: on a 3-node cluster, tenant flood
// submits 400 jobs that use api:1 (capacity 4) and holds every unit;
// tenant quiet then submits 10 in one batch. Quiet's first job takes the
// very next unit that is freed (the first dispatch after its submit),
// and its ten jobs take at least every other unit. With tenant_max=3,
// flood never holds more than 3 units: quiet's first job starts at once
// (the first dispatch after its submit), and from then until its last
// job starts, quiet holds a unit at every dispatch of flood's.
func TestNoisyNeighbourAtAResource(t *testing.T) {
	c := cluster.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := pb.NewAdminClient(c.Nodes[0].Conn())
	client := pb.NewClientClient(c.Nodes[1].Conn())
	for _, name := range []string{"flood", "quiet"} {
		if _, err := admin.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: name, Tier: pb.Tier_SILVER.Enum()}); err != nil {
			t.Fatal(err)
		}
	}
	setAPI := func(tenantMax *uint32) {
		t.Helper()
		for {
			_, err := admin.ResourceSet(ctx, &pb.ResourceSetRequest{Name: "api", Capacity: proto.Uint32(4), TenantMax: tenantMax})
			if err == nil {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("resource api: %v", err)
			}
			time.Sleep(100 * time.Millisecond) // until the cluster's feature level allows it
		}
	}
	setAPI(nil)
	// More workers than units: the resource is what binds. Each run uses
	// the CPU its job's estimate says, so no cost correction moves a
	// tenant's tag: the fair order is the plain alternation.
	startFakeWorkers(t, c, 6, sfq.SM, worker.FakeRunner{Plan: func(*pb.Assign) worker.FakeSpec {
		return worker.FakeSpec{Duration: 40 * time.Millisecond, CPU: 100 * time.Millisecond}
	}}, nil)
	api := []*pb.ResourceUse{{Resource: "api", Units: 1}}
	batch := func(tenant string, n int) map[uint64]bool {
		t.Helper()
		req := &pb.SubmitBatchRequest{}
		for range n {
			req.Jobs = append(req.Jobs, &pb.SubmitRequest{Tenant: tenant, Size: pb.Size_SM, EstCostMs: 100, Uses: api})
		}
		resp, err := client.SubmitBatch(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[uint64]bool{}
		for _, r := range resp.Results {
			if r.Status != nil || r.JobId == 0 {
				t.Fatalf("%s's batch: %v", tenant, r)
			}
			ids[r.JobId] = true
		}
		return ids
	}
	// waitDone waits until job id has completed: its tenant's backlog
	// is then well under way (a tenant's jobs start in ID order).
	waitDone := func(ids map[uint64]bool, nth int) {
		t.Helper()
		var sorted []uint64
		for id := range ids {
			sorted = append(sorted, id)
		}
		slices.Sort(sorted)
		for {
			j, err := client.GetJob(ctx, &pb.GetJobRequest{Tenant: "flood", JobId: sorted[nth]})
			if err != nil {
				t.Fatal(err)
			}
			if j.State == "completed" {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("flood's job %d does not complete: %s", sorted[nth], j.State)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	events := func() []*pb.Event {
		t.Helper()
		stream, err := client.WatchEvents(ctx, &pb.WatchEventsRequest{FromOldest: true, UntilIdle: true})
		if err != nil {
			t.Fatal(err)
		}
		var out []*pb.Event
		for {
			ev, err := stream.Recv()
			if err != nil {
				break
			}
			out = append(out, ev)
		}
		return out
	}

	// phase floods 400 jobs of flood's, waits until they are well under
	// way, and submits quiet's 10.
	phase := func() (flood, quiet map[uint64]bool) {
		flood = map[uint64]bool{}
		for range 4 {
			maps.Copy(flood, batch("flood", 100))
		}
		waitDone(flood, 8)
		return flood, batch("quiet", 10)
	}
	flood1, quiet1 := phase()
	events() // until every job has ended
	setAPI(proto.Uint32(3))
	flood2, quiet2 := phase()
	all := events()

	// held replays the events of one phase: the units each tenant holds
	// after each event (every job uses api:1 once).
	type step struct {
		ev           *pb.Event
		flood, quiet int
	}
	replay := func(evs []*pb.Event, floodJobs, quietJobs map[uint64]bool) (steps []step, quietQueued int) {
		var held = map[string]int{}
		quietQueued = -1
		for _, ev := range evs {
			if !floodJobs[ev.JobId] && !quietJobs[ev.JobId] {
				continue
			}
			switch ev.Kind {
			case "assigned":
				held[ev.Tenant]++
			case "completed", "failed", "requeued", "cancelled", "timed_out":
				held[ev.Tenant]--
			case "queued":
				if quietJobs[ev.JobId] && quietQueued < 0 {
					quietQueued = len(steps)
				}
			}
			steps = append(steps, step{ev: ev, flood: held["flood"], quiet: held["quiet"]})
		}
		return steps, quietQueued
	}
	check := func(phase string, evs []*pb.Event, floodJobs, quietJobs map[uint64]bool, floodMax int) {
		t.Helper()
		steps, q := replay(evs, floodJobs, quietJobs)
		if q < 0 {
			t.Fatalf("%s: quiet's jobs were never queued", phase)
		}
		most, completed := 0, 0
		for _, s := range steps {
			most = max(most, s.flood)
			if s.flood+s.quiet > 4 {
				t.Fatalf("%s: event %d (%s job %d): %d units held, capacity 4", phase, s.ev.Seq, s.ev.Kind, s.ev.JobId, s.flood+s.quiet)
			}
			if s.ev.Kind == "completed" {
				completed++
			}
		}
		if most != floodMax {
			t.Errorf("%s: flood held at most %d units, want %d", phase, most, floodMax)
		}
		if completed != len(floodJobs)+len(quietJobs) {
			t.Errorf("%s: %d jobs completed, want %d", phase, completed, len(floodJobs)+len(quietJobs))
		}
		// The dispatches after quiet's batch: its first job is the first,
		// and its ten are among the first twenty.
		var order []string
		for _, s := range steps[q:] {
			if s.ev.Kind == "assigned" {
				order = append(order, s.ev.Tenant)
			}
		}
		if len(order) == 0 || order[0] != "quiet" {
			t.Errorf("%s: the first dispatches after quiet's submit went to %v, want quiet first", phase, order[:min(len(order), 5)])
		}
		n := 0
		for _, who := range order[:min(len(order), 20)] {
			if who == "quiet" {
				n++
			}
		}
		if n != 10 {
			t.Errorf("%s: quiet had %d of the first 20 dispatches after its submit, want its 10: %v", phase, n, order[:min(len(order), 20)])
		}
	}
	check("without tenant_max", all, flood1, quiet1, 4)
	check("tenant_max=3", all, flood2, quiet2, 3)

	// With tenant_max=3 quiet never waits for a unit flood holds: while
	// flood holds its 3 units and quiet none with jobs queued, the last
	// unit is free for quiet, and the next dispatch is quiet's.
	steps, _ := replay(all, flood2, quiet2)
	queued, waits := 0, 0
	for i, s := range steps {
		switch {
		case s.ev.Tenant == "quiet" && s.ev.Kind == "queued":
			queued++
		case s.ev.Tenant == "quiet" && s.ev.Kind == "assigned":
			queued--
		}
		if s.flood < 3 || s.quiet > 0 || queued == 0 {
			continue
		}
		waits++
		next := ""
		for _, n := range steps[i+1:] {
			if n.ev.Kind == "assigned" {
				next = n.ev.Tenant
				break
			}
		}
		if next != "quiet" {
			t.Errorf("tenant_max=3: after event %d (%s job %d) flood held %d units, quiet none with %d queued, and the next dispatch went to %q", s.ev.Seq, s.ev.Kind, s.ev.JobId, s.flood, queued, next)
		}
	}
	t.Logf("%d events; with tenant_max=3, quiet was without a unit and flood at its limit with quiet's jobs queued at %d events, each followed by a dispatch of quiet's", len(all), waits)
}
