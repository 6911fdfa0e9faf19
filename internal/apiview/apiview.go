// Package apiview presents the replicated state's records as the API's
// messages: a job, a tenant and its usage, a group, a pool, a
// subscription, a window of the fairness report, the configuration in
// force. Each is a pure function of what a read of the state gives it
// (under fsm.FSM.Read); the caller adds what only it knows (the clock a
// node answers with, its connected workers).
package apiview

import (
	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/fsm/fairness"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
)

// Job converts a job record of sc, with its payload or without.
func Job(sc *sfq.Scheduler, j *sfq.Job, payload bool) *pb.Job {
	out := &pb.Job{
		JobId: uint64(j.ID), Tenant: sc.TenantName(j.Tenant), Pool: sc.PoolName(sc.LanePool(j.Tenant)), State: j.State.String(), Attempt: j.Attempt, Failures: uint32(j.Failures),
		MaxAttempts: uint32(j.MaxAttempts), Size: fsm.SizeToPB(j.Size), EstCostMs: j.EstCostMs, CpuMs: j.CPUMs,
		JobType: j.Type(), IdempotencyKey: j.Key(), SubmittedAtMs: int64(j.SubmittedAt), EndedAtMs: int64(j.EndedAt),
		SubmittedWallMs: int64(j.SubmittedWall()), EndedWallMs: int64(j.EndedWall()),
		WorkerId: j.Worker, Cancel: j.Cancel.String(), TimeoutMs: j.TimeoutMs, Group: j.Group(), Form: fsm.JobFormToPB(j.Form()),
		Uses: fsm.UsesToPB(j.Uses()),
	}
	if payload {
		out.Payload = []byte(j.Payload())
	}
	if j.Attempt > 0 {
		out.StartTagMs = j.StartTag.String()
	}
	if j.Result != nil && !j.Result.Pending() {
		out.HasResult, out.ExitCode, out.StderrTail, out.StdoutTail = true, j.Result.ExitCode, j.Result.StderrTail, j.Result.StdoutTail
		out.CpuSource, out.Failure = j.Result.CPUSource.String(), j.Result.Failure.String()
	}
	if j.Result != nil {
		out.Snoozes = uint32(j.Result.Snoozes)
	}
	jobClass(out, j)
	return out
}

// jobClass adds a job's class, deadline and estimate source.
func jobClass(out *pb.Job, j *sfq.Job) {
	out.Class, out.EstSource, out.DeadlineAtMs = fsm.ClassToPB(j.Class), j.EstSource.String(), int64(j.DeadlineAt())
	out.DueAtMs, out.ExpireAtMs = int64(j.DueAt()), int64(j.ExpireAt())
}

// MarkDeadlineMissed sets deadline_missed on the jobs still queued at or
// past their deadline at cluster time now: whenever they are dispatched,
// it is late. (Whether a dispatched job went late, its assigned event
// says: reason deadline_missed.)
func MarkDeadlineMissed(now sfq.Time, jobs ...*pb.Job) {
	for _, j := range jobs {
		if j.DeadlineAtMs != 0 && j.State == sfq.Queued.String() && int64(now) >= j.DeadlineAtMs {
			j.DeadlineMissed = true
		}
	}
}

// Tenant converts the configuration of tenant t, whose lane index is i.
func Tenant(i uint32, t *sfq.Tenant, flags fsm.TenantFlags) *pb.Tenant {
	out := &pb.Tenant{Name: t.Name, Tier: fsm.TierToPB(t.Tier), Multiplier: t.Multiplier, Caps: fsm.CapsToPB(t.Caps),
		ExportMetrics: flags.ExportMetrics(i), MaxClass: fsm.ClassToPB(t.MaxClass), AllowDeadlines: t.AllowDeadlines,
		GroupCap: t.GroupCap, GroupOrder: fsm.GroupOrderToPB(t.GroupOrder), MaxGroups: t.MaxGroups, Groups: t.Groups,
		Paused: Paused(t.PausedBy())}
	if at, ok := t.RateEligibleAt(); ok {
		out.Rate, out.RateBurst, out.RateEligibleAtMs = Rate(t.Rate), t.Rate.Burst, int64(at)
	}
	return out
}

// ReadTenant returns a live tenant's configuration in f (this node's
// state), or nil.
func ReadTenant(f *fsm.FSM, name string) (out *pb.Tenant) {
	f.ReadTenants(func(sc *sfq.Scheduler, flags fsm.TenantFlags) {
		if i, ok := sc.TenantIndex(name); ok {
			t, _ := sc.TenantTotals(i) // its jobs in every pool
			out = Tenant(i, &t, flags)
		}
	})
	return out
}

// TenantUsage converts the counters, weight and tag of tenant at cluster
// time clock, with its top groups (the most queued first), or nil when
// sc has no such tenant.
func TenantUsage(sc *sfq.Scheduler, tenant string, clock sfq.Time, top int) *pb.TenantUsageResponse {
	t, ok := sc.Tenant(tenant)
	if !ok {
		return nil
	}
	b := t.Billing
	out := &pb.TenantUsageResponse{
		Tenant: t.Name, Tier: fsm.TierToPB(t.Tier), Running: t.Running, RunningBySize: t.RunningBySize[:],
		Queued: t.QueuedTotal(), QueuedBySize: t.Queued[:], Scheduled: t.Scheduled, InflightCpuMs: t.InflightCPUMs,
		CpuBilledMs: b.CPUMs, ZombieCpuMs: b.ZombieCPUMs,
		Weight:      float64(sc.Weight(&t, clock)) / float64(sfq.WeightOne),
		FinishTagMs: t.FinishTag.String(), VirtualNowMs: sc.VirtualNow().String(), UsageMs: sc.DecayedUsage(&t, clock),
		Submitted: b.Submitted, Dispatches: b.Dispatches, Completed: b.Completed, Failed: b.Failed,
		Cancelled: b.Cancelled, TimedOut: b.TimedOut, Failures: b.Failures, Requeues: b.Requeues,
	}
	groups, n := sc.TopGroups(tenant, top)
	out.Groups, out.GroupCount = GroupUsage(&t, groups), uint32(n)
	out.Paused = Paused(t.PausedBy())
	if at, ok := t.RateEligibleAt(); ok {
		out.Rate, out.RateBurst, out.RateEligibleAtMs = Rate(t.Rate), t.Rate.Burst, int64(at)
	}
	return out
}

// Group converts a group of tenant t.
func Group(t *sfq.Tenant, g *sfq.Group) *pb.Group {
	out := &pb.Group{Tenant: t.Name, Name: g.Name, Cap: g.Cap.String(), TenantCap: g.TenantCap, Limit: sfq.CapOf(t, g),
		Running: g.Running, Queued: g.Queued, Paused: Paused(g.PausedBy())}
	if at, ok := g.RateEligibleAt(); ok {
		out.Rate, out.RateBurst, out.RateEligibleAtMs = Rate(g.Rate), g.Rate.Burst, int64(at)
	}
	return out
}

// GroupUsage converts groups into usage rows.
func GroupUsage(t *sfq.Tenant, gs []sfq.Group) []*pb.GroupUsage {
	out := make([]*pb.GroupUsage, len(gs))
	for i := range gs {
		out[i] = &pb.GroupUsage{Name: gs[i].Name, Running: gs[i].Running, Queued: gs[i].Queued, Limit: sfq.CapOf(t, &gs[i])}
	}
	return out
}

// Paused is who paused a tenant or a group, as the API shows it: "",
// "tenant" or "admin".
func Paused(p sfq.PausedBy) string {
	if p == sfq.NotPaused {
		return ""
	}
	return p.String()
}

// Rate is a rate limit as the API shows it ("N/PERIOD"; the burst is
// a field of its own).
func Rate(r sfq.RateLimit) string {
	r.Burst = 0
	return r.String()
}

// Pool presents a pool with its connected workers.
func Pool(p *sfq.Pool, workers int) *pb.Pool {
	out := &pb.Pool{Name: p.Name, Weights: p.Weights.String(), SubscriptionsRequired: p.Required, Paused: p.Paused,
		Scheduled: p.Scheduled, Queued: p.Queued, Running: p.Running, Tenants: uint32(p.Lanes), Workers: uint32(workers)}
	// In the order the API documents (critical, high, normal, low), not
	// the core's index order.
	for _, c := range sfq.ClassesInOrder {
		out.VirtualNowMs = append(out.VirtualNowMs, p.VirtualNow[c].String())
	}
	return out
}

// Subscription returns tenant's subscription in pool with its running
// jobs there, or nil.
func Subscription(sc *sfq.Scheduler, tenant, pool string) *pb.Subscription {
	burst, ok := sc.Subscription(tenant, pool)
	if !ok {
		return nil
	}
	l, _ := sc.Lane(tenant, pool)
	p, _ := sc.Pool(pool)
	return &pb.Subscription{Tenant: tenant, Pool: p.Name, Burst: burst, Running: l.Running}
}

// Config is the configuration in force with the cluster's feature
// level.
func Config(f *fsm.FSM) *pb.SchedulerConfig {
	p := fsm.ConfigToPB(f.Config())
	p.FeatureLevel = f.Level()
	return p
}

// FairnessErrors presents the pools' live fairness errors.
func FairnessErrors(errs []fsm.PoolFairness) []*pb.FairnessError {
	var out []*pb.FairnessError
	for _, e := range errs {
		fe := &pb.FairnessError{Pool: e.Pool, Window: e.Window, Defined: e.OK}
		if e.OK {
			fe.Error, fe.Tenant, fe.Class, fe.Share, fe.Entitled = e.Value, e.TenantName, fsm.ClassToPB(e.Class), e.Share, e.Entitled
		}
		out = append(out, fe)
	}
	return out
}

// FairWindow presents one window of the fairness report.
func FairWindow(name string, f fairness.Figures) *pb.FairWindow {
	w := &pb.FairWindow{Window: name, SpanMs: f.SpanMs, ChargedMs: f.ChargedMs, ClassChargedMs: f.ClassChargedMs, BusyMs: f.BusyMs}
	if v, ok := f.Share(); ok {
		w.Share = &v
	}
	if v, ok := f.Entitled(); ok {
		w.Entitled = &v
	}
	if v, ok := f.Ratio(); ok {
		w.Ratio = &v
	}
	return w
}
