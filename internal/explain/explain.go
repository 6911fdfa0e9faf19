// Package explain says why a job is where it is (SPEC §3 "Why a job
// waits"): the fields of the API's answer and one paragraph, from the
// core's reason (sfq.Reason), the job and its tenant. Pure: rpc's
// ExplainJob reads the reason from the state, adds what only the leader
// knows (the workers that fit the job), and calls it. A new reason is a
// case in ToPB (its fields) and in TextIn (its paragraph).
package explain

import (
	"fmt"
	"strings"
	"time"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/wire"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
)

// ToPB converts a reason of a job of tenant t, with its paragraph.
func ToPB(j *sfq.Job, t *sfq.Tenant, r sfq.Reason, now *pb.ClockNow) *pb.ExplainJobResponse {
	out := &pb.ExplainJobResponse{JobId: uint64(j.ID), Reason: r.Name(), Size: fsm.SizeToPB(j.Size), Class: fsm.ClassToPB(j.Class),
		Group: j.Group()}
	switch r.Kind {
	case sfq.ReasonGroupTurn:
		out.GroupOrder = t.GroupOrder.String()
	case sfq.ReasonScheduled:
		out.DueMs = int64(r.Due)
	case sfq.ReasonPaused:
		out.Vertex = r.Vertex
	case sfq.ReasonBehind:
		out.Position = r.Position
	case sfq.ReasonCap:
		out.Vertex, out.Current, out.Limit = r.Cap.String(), r.Current, r.Limit
	case sfq.ReasonRate:
		out.Vertex, out.EligibleAtMs = r.Vertex, int64(r.EligibleAt)
	case sfq.ReasonWaiting:
		out.Ahead, out.TagMs, out.VnowMs = r.Ahead, r.Tag.String(), r.VirtualNow.String()
	case sfq.ReasonAssigned, sfq.ReasonRunning:
		out.WorkerId = r.Worker
	case sfq.ReasonNoWorker:
		out.Kind = r.NoWorkerKind
	case sfq.ReasonResource:
		rb := &r.Resource
		out.Resource, out.ReservedJobId = rb.Resource, uint64(rb.Reserved)
		if rb.Tenant {
			out.TenantHeld, out.TenantMax = rb.TenantHeld, &rb.TenantMax
		} else {
			out.Held, out.Capacity = rb.Held, rb.Capacity
		}
	}
	out.Schedule, out.ScheduleSlotMs, out.ScheduleRunKey, _ = scheduleOf(j)
	out.Text = Text(j, t, r, now, 0)
	out.Now = now
	return out
}

// scheduleOf reads which schedule fired job j (SPEC §3 "Schedules"), from
// its key: the schedule, the slot, or a run-now's key.
func scheduleOf(j *sfq.Job) (name string, slot int64, run string, ok bool) {
	n, t, run, ok := fsm.ParseScheduleKey(j.Key())
	return n, int64(t), run, ok
}

// scheduleText is the sentence that says which schedule fired job j, or
// "".
func scheduleText(j *sfq.Job, now *pb.ClockNow) string {
	name, slot, run, ok := scheduleOf(j)
	switch {
	case !ok:
		return ""
	case run != "":
		return fmt.Sprintf(" Schedule %s fired it: a run-now (key %s).", name, run)
	}
	return fmt.Sprintf(" Schedule %s fired it, for its slot %s.", name, wire.When(now, slot))
}

// Text says a reason of a job of the pool default in one paragraph
// (TextIn).
func Text(j *sfq.Job, t *sfq.Tenant, r sfq.Reason, now *pb.ClockNow, busy int) string {
	return TextIn(j, t, "", r, now, busy)
}

// TextIn says a reason of a job of pool ("": the pool default, which
// its paragraph does not name) in one paragraph. Names in it (tenant,
// group, worker, pool) are validated names without spaces or control
// characters. busy, for a waiting job, is how many workers fit it when
// every one of them is busy (0: some is idle, or the workers are not
// known).
func TextIn(j *sfq.Job, t *sfq.Tenant, pool string, r sfq.Reason, now *pb.ClockNow, busy int) string {
	tenant := t.Name
	id := fmt.Sprintf("Job %d (tenant %s, class %s, size %s", j.ID, tenant, j.Class, j.Size)
	if pool != "" {
		id += ", pool " + pool
	}
	if g := j.Group(); g != "" {
		id += ", group " + g
	}
	if at := j.DeadlineAt(); at != 0 {
		id += ", deadline " + wire.When(now, int64(at))
	}
	id += ")"
	plural := func(n uint64, one, many string) string {
		if n == 1 {
			return "1 " + one
		}
		return fmt.Sprintf("%d %s", n, many)
	}
	var b strings.Builder
	b.WriteString(id)
	switch r.Kind {
	case sfq.ReasonScheduled:
		if res := j.Result; res != nil && res.Snoozes != 0 && !res.Pending() {
			fmt.Fprintf(&b, " is scheduled: its last run snoozed (%s in a row); it enters its queue %s.",
				plural(uint64(res.Snoozes), "snooze", "snoozes"), wire.When(now, int64(r.Due)))
			break
		}
		fmt.Fprintf(&b, " is scheduled: it enters its queue %s.", wire.When(now, int64(r.Due)))
	case sfq.ReasonPaused:
		b.WriteString(pauseReason(tenant, j.Group(), pool, r.Vertex))
	case sfq.ReasonBehind:
		queue := "queue"
		if j.HasDeadline() {
			queue = "deadline queue"
		}
		fmt.Fprintf(&b, " waits behind %s of its %s (same tenant, class and size): they go first, in order.",
			plural(r.Position, "older job", "older jobs"), queue)
	case sfq.ReasonCap:
		fmt.Fprintf(&b, " is next in its queue but a cap holds it: %s.", capText(j, tenant, pool, r))
	case sfq.ReasonResource:
		b.WriteString(resourceText(tenant, &r.Resource))
	case sfq.ReasonRate:
		fmt.Fprintf(&b, " is held by the %s rate limit: it may go %s.", r.Vertex, wire.When(now, int64(r.EligibleAt)))
	case sfq.ReasonHeld:
		fmt.Fprintf(&b, " is held back: an older %s job of tenant %s is blocked by one of the tenant's limits, and jobs of one size keep their order, in this class and below, whatever their group.", j.Size, tenant)
	case sfq.ReasonGroupTurn:
		if t.GroupOrder == sfq.GroupFair {
			fmt.Fprintf(&b, " could run, but another group of tenant %s goes first: under group_order fair the group with the lowest group tag does.", tenant)
		} else {
			fmt.Fprintf(&b, " could run, but an older job of another group of tenant %s goes first: under group_order fifo the oldest does.", tenant)
		}
	case sfq.ReasonHigherClass:
		fmt.Fprintf(&b, " could run, but a higher class than %s has an eligible job that fits the same workers: higher classes go first.", j.Class)
	case sfq.ReasonNoWorker:
		of := ""
		if pool != "" {
			of = "of pool " + pool + " "
		}
		switch {
		case r.NoWorkerKind == "command":
			fmt.Fprintf(&b, " could run, but no connected, undrained worker %sof size %s or larger runs command jobs: it waits for one (no job fails for want of a worker).", of, j.Size)
		case r.NoWorkerKind != "":
			fmt.Fprintf(&b, " could run, but no connected, undrained worker %sof size %s or larger runs its kind %q: it waits for a worker that registered it (no job fails for want of a worker).", of, j.Size, r.NoWorkerKind)
		case pool != "":
			fmt.Fprintf(&b, " could run, but no connected worker of pool %s fits %s: none undrained of size %s or larger is there to take it.", pool, j.Size, j.Size)
		default:
			fmt.Fprintf(&b, " could run, but no connected, undrained worker of size %s or larger is there to take it.", j.Size)
		}
	case sfq.ReasonWaiting:
		of := ""
		if pool != "" {
			of = "of pool " + pool + " "
		}
		if r.Ahead == 0 && busy > 0 && r.Larger > 0 {
			// Next for the workers of its size; a larger worker takes a
			// job of its own size first.
			larger := "the larger job that waits"
			if r.Larger > 1 {
				larger = fmt.Sprintf("one of the %d larger jobs that wait", r.Larger)
			}
			fmt.Fprintf(&b, " is next among the %s jobs of its class, and every worker that fits it (%s %sof size %s or larger) is busy: a worker of size %s takes it when it asks for work, but a larger worker takes %s first (a job of its own size).",
				j.Size, plural(uint64(busy), "worker", "workers"), of, j.Size, j.Size, larger)
		} else if r.Ahead == 0 && busy > 0 {
			fmt.Fprintf(&b, " is next: nothing goes before it, and every worker that fits it (%s %sof size %s or larger) is busy; the first to ask for work takes it.",
				plural(uint64(busy), "worker", "workers"), of, j.Size)
		} else if j.HasDeadline() {
			fmt.Fprintf(&b, " could run and waits its turn: %s of class %s with an earlier deadline go%s first.",
				plural(r.Ahead, "deadline job", "deadline jobs"), j.Class, verbS(r.Ahead))
		} else {
			fmt.Fprintf(&b, " could run and waits its turn: %s go%s first (deadline jobs of its class, and tenants with an earlier start tag).",
				plural(r.Ahead, "candidate", "candidates"), verbS(r.Ahead))
		}
		fmt.Fprintf(&b, " Tenant %s's tag in class %s is %s virtual ms; the class's virtual_now is %s.", tenant, j.Class, r.Tag, r.VirtualNow)
	case sfq.ReasonAssigned:
		fmt.Fprintf(&b, " is assigned to worker %s, which has not reported it started.", r.Worker)
	case sfq.ReasonRunning:
		fmt.Fprintf(&b, " is running on worker %s.", r.Worker)
	case sfq.ReasonTerminal:
		fmt.Fprintf(&b, " has ended: %s.", r.State)
	default:
		fmt.Fprintf(&b, ": %s.", r.Name())
	}
	b.WriteString(scheduleText(j, now))
	return b.String()
}

// BusyWorkers is the busy argument of TextIn: fit when no fitting
// worker is idle.
func BusyWorkers(fit, idle int) int {
	if idle > 0 {
		return 0
	}
	return fit
}

func verbS(n uint64) string {
	if n == 1 {
		return "es"
	}
	return ""
}

// capText names a cap, its count and its limit.
func capText(j *sfq.Job, tenant, pool string, r sfq.Reason) string {
	switch r.Cap {
	case sfq.CapTenantRunning:
		return fmt.Sprintf("tenant %s runs %d jobs, its cap (max_running) is %d", tenant, r.Current, r.Limit)
	case sfq.CapTenantSize:
		return fmt.Sprintf("tenant %s runs %d %s jobs, its cap for %s is %d", tenant, r.Current, j.Size, j.Size, r.Limit)
	case sfq.CapTenantInflight:
		return fmt.Sprintf("tenant %s has %s of estimated CPU in flight; with this job's %s it would pass its cap of %s",
			tenant, msText(r.Current), msText(j.EstCostMs), msText(r.Limit))
	case sfq.CapClass:
		return fmt.Sprintf("tenant %s runs %d jobs of class %s, its cap_%s is %d", tenant, r.Current, j.Class, j.Class, r.Limit)
	case sfq.CapDeadline:
		return fmt.Sprintf("tenant %s runs %d jobs with a deadline, its deadline_cap is %d", tenant, r.Current, r.Limit)
	case sfq.CapGroupRunning:
		return fmt.Sprintf("group %s of tenant %s runs %d jobs, its cap is %d (its other groups are not held back)", j.Group(), tenant, r.Current, r.Limit)
	case sfq.CapSubscription:
		return fmt.Sprintf("tenant %s runs %d jobs in pool %s, its subscription's burst there is %d", tenant, r.Current, poolName(pool), r.Limit)
	}
	return fmt.Sprintf("%s: %d of %d", r.Cap, r.Current, r.Limit)
}

// resourceText says which resource holds a job back, and how (SPEC §3
// "Resources"): the jobs behind it in its queue are not held back by it.
func resourceText(tenant string, rb *sfq.ResourceBlock) string {
	const behind = " The jobs behind it in its queue go first if they can run (it keeps its place)."
	switch {
	case rb.Reserved != 0:
		return fmt.Sprintf(" is next in its queue but resource %s is reserved for job %d, blocked longer (resource_reserve_after): no other job takes its units until that one is dispatched.", rb.Resource, rb.Reserved) + behind
	case rb.Tenant:
		return fmt.Sprintf(" is next in its queue but tenant %s holds %d units of resource %s, its limit (tenant_max %d)."+behind, tenant, rb.TenantHeld, rb.Resource, rb.TenantMax)
	}
	return fmt.Sprintf(" is next in its queue but resource %s has %d of its %d units held and no room for this job's; freed units go by the fair order."+behind, rb.Resource, rb.Held, rb.Capacity)
}

func msText(ms int64) string { return (time.Duration(ms) * time.Millisecond).String() }

// pauseReason says what pause holds a job of tenant (of group, in pool:
// "" for the pool default), and the command that lifts it.
func pauseReason(tenant, group, pool, vertex string) string {
	switch vertex {
	case "all":
		return " waits: all dispatch is paused (barista operator dispatch resume lifts it)."
	case "pool":
		return fmt.Sprintf(" waits: dispatch in pool %s is paused (barista pool resume %s lifts it).", poolName(pool), poolName(pool))
	case "tenant":
		return fmt.Sprintf(" waits: tenant %s is paused (barista tenant resume %s lifts it).", tenant, tenant)
	case "group":
		return fmt.Sprintf(" waits: group %s of tenant %s is paused (barista tenant resume %s --group %s lifts it).", group, tenant, tenant, group)
	}
	return fmt.Sprintf(" waits: dispatch is paused (%s).", vertex)
}

// poolName names a pool in a paragraph: "default" for "".
func poolName(pool string) string {
	if pool == "" {
		return sfq.DefaultPoolName
	}
	return pool
}
