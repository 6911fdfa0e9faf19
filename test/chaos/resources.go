package chaos

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/test/cluster"
)

// checkResources (13): no dispatch takes units of a resource beyond its
// capacity, or beyond its tenant's limit in force (a decrease preempts
// nothing: the units held may stay above a lowered capacity while runs
// end, but no dispatch adds to them); and after each command that
// changed a resource, the units the state counts held are those of its
// holders (the live jobs of the job table that use it), and each holder
// is a run the history dispatched with those units and did not end
// since (no accepted Finished of that attempt, no terminal state, no
// redrive, no reconnect of its worker without it).
func checkResources(h *History) []Violation {
	var out []Violation
	bad := func(format string, args ...any) { out = append(out, Violation{13, fmt.Sprintf(format, args...)}) }
	type run struct {
		attempt uint32
		index   uint64
		units   map[string]uint32
		ended   bool
	}
	runs := map[uint64]*run{} // job -> its last dispatched run
	for _, f := range h.Audit {
		switch f.Kind {
		case "dispatch":
			r := &run{attempt: f.Attempt, index: f.Index, units: map[string]uint32{}}
			runs[f.Job] = r
			stood := map[string]reservation{}
			for _, rv := range f.Reservations {
				res, v, ok := parseReservation(rv)
				if !ok {
					bad("index %d: a reservation the checker cannot read: %q", f.Index, rv)
					continue
				}
				stood[res] = v
			}
			for _, u := range f.Uses {
				if v, ok := stood[u.Resource]; ok && v.job != f.Job && !outranks(stood, f.Job, v) {
					bad("index %d: dispatching job %d took %d units of resource %s while job %d's reservation of it stood (blocked since %d)", f.Index, f.Job, u.Units, u.Resource, v.job, v.since)
				}
			}
			for _, u := range f.Uses {
				r.units[u.Resource] = u.Units
				if u.Held > uint64(u.Capacity) {
					bad("index %d: dispatching job %d raised resource %s to %d units held, its capacity %d", f.Index, f.Job, u.Resource, u.Held, u.Capacity)
				}
				if u.TenantMax != nil && u.TenantHeld > *u.TenantMax {
					bad("index %d: dispatching job %d raised tenant %s to %d units of resource %s, its limit %d", f.Index, f.Job, f.Tenant, u.TenantHeld, u.Resource, *u.TenantMax)
				}
			}
		case "finish":
			if r := runs[f.Job]; r != nil && r.attempt == f.Attempt {
				r.ended = true
			}
		case "terminal", "redrive":
			if r := runs[f.Job]; r != nil {
				r.ended = true
			}
		case "hello":
			if r := runs[f.Job]; f.Hello != nil && f.Job != 0 && !f.Hello.Listed && r != nil && r.attempt == f.Attempt {
				r.ended = true
			}
		case "resources":
			for _, res := range f.Resources {
				var sum uint64
				for _, hd := range res.Holders {
					job, attempt, units, ok := parseHolder(hd)
					if !ok {
						bad("index %d: resource %s has a holder the checker cannot read: %q", f.Index, res.Name, hd)
						continue
					}
					sum += uint64(units)
					switch r := runs[job]; {
					case r == nil || r.attempt != attempt:
						bad("index %d: job %d (attempt %d) holds %d units of resource %s, and that run was never dispatched", f.Index, job, attempt, units, res.Name)
					case r.ended:
						bad("index %d: job %d (attempt %d) holds %d units of resource %s, and that run had ended (dispatched at index %d)", f.Index, job, attempt, units, res.Name, r.index)
					case r.units[res.Name] != units:
						bad("index %d: job %d (attempt %d) holds %d units of resource %s, its dispatch at index %d took %d", f.Index, job, attempt, units, res.Name, r.index, r.units[res.Name])
					}
				}
				if sum != res.Held {
					bad("index %d: resource %s counts %d units held, its live jobs hold %d", f.Index, res.Name, res.Held, sum)
				}
			}
		}
	}
	return out
}

// reservation is one that stood at a dispatch's pick: its job and since
// when that job was blocked (its rank).
type reservation struct {
	job   uint64
	since int64
}

// outranks reports whether job holds a reservation among stood ranked
// before v (blocked longer, then a lower job ID): the one exception to
// "while a reservation stands no other job takes units of it", which
// keeps two reservations from waiting on each other (docs/resources.md).
func outranks(stood map[string]reservation, job uint64, v reservation) bool {
	for _, o := range stood {
		if o.job == job && (o.since < v.since || (o.since == v.since && job < v.job)) {
			return true
		}
	}
	return false
}

// parseReservation reads a reservation as a "dispatch" fact writes it:
// RESOURCE/JOB/SINCE.
func parseReservation(s string) (string, reservation, bool) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return "", reservation{}, false
	}
	j, err1 := strconv.ParseUint(parts[1], 10, 64)
	since, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return "", reservation{}, false
	}
	return parts[0], reservation{job: j, since: since}, true
}

// parseHolder reads a holder as a "resources" fact writes it:
// JOB/ATTEMPT/UNITS.
func parseHolder(s string) (job uint64, attempt, units uint32, ok bool) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return 0, 0, 0, false
	}
	j, err1 := strconv.ParseUint(parts[0], 10, 64)
	a, err2 := strconv.ParseUint(parts[1], 10, 32)
	u, err3 := strconv.ParseUint(parts[2], 10, 32)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, 0, false
	}
	return j, uint32(a), uint32(u), true
}

// The run's resources (SPEC §3 "Resources", §8 rule 13), with
// Config.Resources: r-one of capacity 1, r-four of capacity 4 and
// tenant_max 2, r-eight of capacity 8. A submit's key draws what its job
// uses: one job in 20 r-one:1, one in 10 r-four:1, one in 10 r-eight:2,
// the rest none; every tenant's jobs, in both pools, and the jobs of
// every fifth schedule use r-four:1.
var runResources = []struct {
	name      string
	capacity  uint32
	tenantMax *uint32
}{{"r-one", 1, nil}, {"r-four", 4, proto.Uint32(2)}, {"r-eight", 8, nil}}

// runReserveAfter is the run's resource_reserve_after: short, so that
// jobs r-one and r-eight block take their reservations within the run
// (the second half of rule 13).
const runReserveAfter = 250 * time.Millisecond

// setReserveAfter sets the run's resource_reserve_after.
func (r *Run) setReserveAfter(ctx context.Context) {
	if !r.cfg.Resources {
		return
	}
	if _, err := r.retry(ctx, 0, func(ctx context.Context, n *cluster.Node) error {
		admin := pb.NewAdminClient(n.Conn())
		cfg, err := admin.GetConfig(ctx, &pb.GetConfigRequest{})
		if err != nil {
			return err
		}
		cfg.ResourceReserveAfterMs = proto.Int64(runReserveAfter.Milliseconds())
		_, err = admin.SetConfig(ctx, &pb.SetConfigRequest{Config: cfg})
		return err
	}); err != nil {
		r.t.Fatalf("resource_reserve_after: %v", err)
	}
}

// resourceCommands are the commands that declare the run's resources.
func (r *Run) resourceCommands() []*clusterpb.Command {
	if !r.cfg.Resources {
		return nil
	}
	var cmds []*clusterpb.Command
	for _, res := range runResources {
		cmds = append(cmds, &clusterpb.Command{Cmd: &clusterpb.Command_ResourceSet{ResourceSet: &clusterpb.ResourceSet{Name: res.name,
			Capacity: proto.Uint32(res.capacity), TenantMax: res.tenantMax}}})
	}
	return cmds
}

// usesOf is what the job of a submit with key uses (nil: nothing).
func (r *Run) usesOf(key string) []*pb.ResourceUse {
	if !r.cfg.Resources {
		return nil
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	switch d := h.Sum32() % 20; {
	case d == 0:
		return []*pb.ResourceUse{{Resource: "r-one", Units: 1}}
	case d <= 2:
		return []*pb.ResourceUse{{Resource: "r-four", Units: 1}}
	case d <= 4:
		return []*pb.ResourceUse{{Resource: "r-eight", Units: 2}}
	}
	return nil
}

// resourcesLine counts the dispatches of jobs that used each resource and
// the most units each held after one.
func resourcesLine(h *History) string {
	n := map[string]int{}
	top := map[string]uint64{}
	seen := map[string]bool{}
	for _, f := range h.Audit {
		for _, u := range f.Uses {
			n[u.Resource+" dispatches"]++
			top[u.Resource] = max(top[u.Resource], u.Held)
		}
		for _, rv := range f.Reservations {
			res, v, ok := parseReservation(rv)
			if !ok {
				continue
			}
			if !seen[rv] {
				seen[rv] = true
				n[res+" reservations"]++
			}
			if v.job == f.Job {
				n[res+" dispatches of its reserved job"]++
			}
		}
	}
	for name, held := range top {
		n[name+" most held"] = int(held)
	}
	return countLine(n)
}
