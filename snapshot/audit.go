package snapshot

import (
	"fmt"
	"slices"

	"github.com/hashicorp/raft"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// An AuditFact is one fact an audited replay reports (barista replay
// --audit prints them as JSON lines). Kind says which fields are set:
//
//   - "entry": one per applied log entry: Index, VirtualNow after it,
//     and Verify, the error of the state's self-check ("" when the counters
//     equal what the job table derives).
//   - "submit": Index, Job, Tenant, Key, Created (false: an earlier job
//     with the same key was returned), Code (a refusal).
//   - "dispatch": an assigning Dispatch: Index, Job, Tenant, Size (the
//     job's), Attempt, EstCostMs, Weight (the divisor of its tag step);
//     the tenant's counters after it (Running, RunningSize for the job's
//     size, InflightCPUMs) and the caps in force (MaxRunning,
//     MaxRunningSize, MaxInflightCPUMs; 0 = none); Backlogged, the
//     tenants with queued jobs just before it, and BackloggedIn, as
//     "tenant:class", the classes in which each had queued jobs without
//     a deadline (SPEC §8 rule 6 holds inside a class); Class, Deadline and
//     DeadlineMissed of the job, Start, the start tag it was charged at
//     (virtual µs), and Eligible, the classes with an eligible job the
//     worker fits just before it ("high", and "high:deadline" when one
//     has a deadline), for SPEC §8 rule 7; Group, the job's group ("":
//     the unnamed group), GroupRunning, its group's running jobs after it,
//     and GroupCap, the group's cap in force (0 = none), for rule 8.
//   - "finish": an accepted Finished: Index, Job, Tenant, Attempt, CPUMs,
//     EstCostMs, Weight; for a run that snoozed (level 7), Snooze.
//   - "terminal": a job entering a terminal state: Index, Job, Tenant,
//     State (a bulk CancelJobs reports each job it ended).
//   - "redrive": a job a Redrive moved back to its queue: Index, Job,
//     Tenant, Attempt (its attempt, which keeps counting), State (after).
//   - "job": after the last entry, one per job in the table: Job, Tenant,
//     Key, State.
//   - "hello": a worker's new session (WorkerHello, feature level 8; see
//     HelloFact).
//   - "schedule": an accepted schedule command (feature level 8; see
//     ScheduleFact), and a "submit" of the job a fire submitted.
//   - "resources": every resource after a command that changed the
//     units one holds or its settings (feature level 8; see
//     ResourceFact).
type AuditFact struct {
	Kind             string   `json:"kind"`
	Index            uint64   `json:"index,omitempty"`
	Job              uint64   `json:"job,omitempty"`
	Tenant           string   `json:"tenant,omitempty"`
	Key              string   `json:"key,omitempty"`
	Created          bool     `json:"created,omitempty"`
	Code             string   `json:"code,omitempty"`
	Size             string   `json:"size,omitempty"`
	Attempt          uint32   `json:"attempt,omitempty"`
	State            string   `json:"state,omitempty"`
	EstCostMs        int64    `json:"est_cost_ms,omitempty"`
	CPUMs            int64    `json:"cpu_ms,omitempty"`
	Weight           int64    `json:"weight,omitempty"`
	Running          uint32   `json:"running,omitempty"`
	RunningSize      uint32   `json:"running_size,omitempty"`
	InflightCPUMs    int64    `json:"inflight_cpu_ms,omitempty"`
	MaxRunning       uint32   `json:"max_running,omitempty"`
	MaxRunningSize   uint32   `json:"max_running_size,omitempty"`
	MaxInflightCPUMs int64    `json:"max_inflight_cpu_ms,omitempty"`
	Backlogged       []string `json:"backlogged,omitempty"`
	BackloggedIn     []string `json:"backlogged_in,omitempty"`
	Class            string   `json:"class,omitempty"`
	Deadline         bool     `json:"deadline,omitempty"`
	DeadlineMissed   bool     `json:"deadline_missed,omitempty"`
	Start            int64    `json:"start,omitempty"`
	Eligible         []string `json:"eligible,omitempty"`
	Group            string   `json:"group,omitempty"`
	GroupRunning     uint32   `json:"group_running,omitempty"`
	GroupCap         uint32   `json:"group_cap,omitempty"`
	VirtualNow       int64    `json:"virtual_now,omitempty"`
	Verify           string   `json:"verify,omitempty"`
	// At is the entry's cluster time (dispatch, scheduled, release);
	// DueAt a scheduled job's due time (scheduled, and a release: the
	// due time it was released from); ExpireAt a dispatched job's
	// expire_at; Forced a release by run-now.
	At       int64 `json:"at,omitempty"`
	DueAt    int64 `json:"due_at,omitempty"`
	ExpireAt int64 `json:"expire_at,omitempty"`
	Forced   bool  `json:"forced,omitempty"`
	// A "pause" fact says Paused (true: paused, false: resumed)
	// of a Tenant, a Group of it, or All dispatch; a "rate" fact the rate
	// limit in force (RateN per RatePeriodMs, RateBurst 0: N; RateN 0:
	// none) of a Tenant or, with Group, of a group, after a tenant upsert
	// or a SetGroup that set it.
	All          bool   `json:"all,omitempty"`
	Paused       bool   `json:"paused,omitempty"`
	RateN        uint32 `json:"rate_n,omitempty"`
	RatePeriodMs int64  `json:"rate_period_ms,omitempty"`
	RateBurst    uint32 `json:"rate_burst,omitempty"`
	// Pools (feature level 6; "" is the pool default). A dispatch says
	// its job's Pool and the WorkerPool its Dispatch named (SPEC §8 rule
	// 11: always the same), the tenant's assigned and running jobs in
	// that pool after it (PoolRunning) and, when the tenant has a
	// subscription there (Subscribed), its Burst. Its Running,
	// RunningSize and InflightCPUMs are the tenant's in every pool (the
	// caps hold across pools), and Backlogged, BackloggedIn and Eligible
	// are of the worker's pool (rules 6 and 7 hold inside each pool). A
	// "pause" fact of a pool names it in Pool, as the command does (the
	// pool default as "default").
	Pool        string `json:"pool,omitempty"`
	WorkerPool  string `json:"worker_pool,omitempty"`
	PoolRunning uint32 `json:"pool_running,omitempty"`
	Subscribed  bool   `json:"subscribed,omitempty"`
	Burst       uint32 `json:"burst,omitempty"`
	// Snooze is set on the "finish" fact of a run that snoozed.
	Snooze *SnoozeFact `json:"snooze,omitempty"`
	// Kinds (feature level 8, SPEC §8 rule 12). A "submit" and a
	// "dispatch" say the job's Form ("command", "function"; "" for a job
	// every worker runs) and a function job's JobKind; a dispatch also
	// names its Worker and what the worker's record said it runs just
	// before (Runs; nil: every job). A "finish" says its Outcome; one of
	// unknown_kind also the job's failures before and after it and its
	// State after.
	Form           string     `json:"form,omitempty"`
	JobKind        string     `json:"job_kind,omitempty"`
	Worker         string     `json:"worker,omitempty"`
	Runs           *RunsFact  `json:"runs,omitempty"`
	Outcome        string     `json:"outcome,omitempty"`
	FailuresBefore uint16     `json:"failures_before,omitempty"`
	Failures       uint16     `json:"failures,omitempty"`
	Hello          *HelloFact `json:"hello,omitempty"`
	// Schedule is set on a "schedule" fact (feature level 8, SPEC §8 rule
	// 14; audit_schedule.go).
	Schedule *ScheduleFact `json:"schedule,omitempty"`
	// Resources (feature level 8, SPEC §8 rule 13; audit_resource.go): a
	// "dispatch" of a job that uses resources lists them in Uses; a
	// "resources" fact (Index) lists every resource after a command that
	// changed one's units held or settings. A "dispatch" also lists in
	// Reservations the reservations that stood at its pick, as
	// "RESOURCE/JOB/SINCE" (SINCE: when that job was blocked since, in
	// cluster ms).
	Uses         []ResourceUseFact `json:"uses,omitempty"`
	Resources    []ResourceFact    `json:"resources,omitempty"`
	Reservations []string          `json:"reservations,omitempty"`
}

// RunsFact is what a worker runs (sfq.Runs): command jobs if Commands;
// the function jobs of the kinds in Kinds, or with AllKinds of every kind
// but those.
type RunsFact struct {
	Commands bool     `json:"commands,omitempty"`
	AllKinds bool     `json:"all_kinds,omitempty"`
	Kinds    []string `json:"kinds,omitempty"`
}

// RunsJob reports whether a worker of r runs a job of form and kind (a
// job of no form: every worker does).
func (r *RunsFact) RunsJob(form, kind string) bool {
	switch {
	case r == nil || form == "":
		return true
	case form == sfq.FormCommand.String():
		return r.Commands
	}
	return slices.Contains(r.Kinds, kind) != r.AllKinds
}

// HelloFact is what a worker's new session did (SPEC §5 "reconcile on
// reconnect"): the runs its Hello listed (Holds, as "JOB/ATTEMPT") and
// what it says it runs (the fact's Runs, nil: every job); the run the
// state said it held, if one was live on it (the fact's Job and Attempt,
// with Before its state, Cancel its pending cancel, the fact's
// FailuresBefore its failures), whether the Hello Listed it, and after
// the Hello that job's State and the fact's Failures, and whether the
// worker's record still holds a live run (Held).
type HelloFact struct {
	Holds  []string `json:"holds,omitempty"`
	Before string   `json:"before,omitempty"`
	Cancel string   `json:"cancel,omitempty"`
	Listed bool     `json:"listed,omitempty"`
	State  string   `json:"state,omitempty"`
	Held   bool     `json:"held,omitempty"`
}

// runsFact is what sfq.Runs says, nil for every job.
func runsFact(r *sfq.Runs) *RunsFact {
	if r.All() {
		return nil
	}
	return &RunsFact{Commands: r.Commands, AllKinds: r.AllKinds, Kinds: r.Kinds}
}

// formFact is a job's form and, for a function job, its kind.
func formFact(j *sfq.Job) (form, kind string) {
	switch j.Form() {
	case sfq.FormCommand:
		return sfq.FormCommand.String(), ""
	case sfq.FormFunction:
		return sfq.FormFunction.String(), j.Type()
	}
	return "", ""
}

// heldRun returns the run the record of worker w holds, while it is live.
func heldRun(f *fsm.FSM, id string) (sfq.Job, bool) {
	w, ok := f.Worker(id)
	if !ok || w.Job == 0 {
		return sfq.Job{}, false
	}
	var j sfq.Job
	f.Read(func(s *sfq.Scheduler) { j, ok = s.Job(w.Job) })
	if !ok || !j.HeldBy(w.ID, w.Attempt) {
		return sfq.Job{}, false
	}
	return j, true
}

// helloFact reports a WorkerHello: held is the run its worker held
// before it (ok: one was live), failures that run's failures then.
func helloFact(f *fsm.FSM, index uint64, c *clusterpb.WorkerHello, held sfq.Job, ok bool) AuditFact {
	fact := AuditFact{Kind: "hello", Index: index, Worker: c.WorkerId, Hello: &HelloFact{}}
	if w, known := f.Worker(c.WorkerId); known {
		fact.Runs = runsFact(w.Runs)
	}
	for _, h := range c.Holds {
		fact.Hello.Holds = append(fact.Hello.Holds, fmt.Sprintf("%d/%d", h.Job, h.Attempt))
	}
	_, fact.Hello.Held = heldRun(f, c.WorkerId)
	if !ok {
		return fact
	}
	fact.Job, fact.Attempt, fact.FailuresBefore = uint64(held.ID), held.Attempt, held.Failures
	fact.Hello.Before, fact.Hello.Cancel = held.State.String(), held.Cancel.String()
	fact.Hello.Listed = slices.ContainsFunc(c.Holds, func(h *clusterpb.HeldJob) bool { return sfq.JobID(h.Job) == held.ID && h.Attempt == held.Attempt })
	f.Read(func(s *sfq.Scheduler) {
		if j, ok := s.Job(held.ID); ok {
			fact.Tenant, fact.Hello.State, fact.Failures = s.TenantName(j.Tenant), j.State.String(), j.Failures
		}
	})
	return fact
}

// SnoozeFact is what a snoozed run did to its job (SPEC §3 "Job
// lifecycle"): its SnoozeMs, the job's failures before and after the
// Finished, its snoozes in a row after it and the MaxSnoozes in force,
// its State and Cancel after it, and, when scheduled, its DueAt beside
// the entry's cluster time At.
type SnoozeFact struct {
	SnoozeMs       int64  `json:"snooze_ms"`
	FailuresBefore uint16 `json:"failures_before"`
	Failures       uint16 `json:"failures"`
	Snoozes        uint16 `json:"snoozes"`
	MaxSnoozes     uint16 `json:"max_snoozes"`
	State          string `json:"state"`
	Cancel         string `json:"cancel"`
	At             int64  `json:"at"`
	DueAt          int64  `json:"due_at,omitempty"`
}

type auditor struct{ emit func(AuditFact) }

// Audit replays a data directory's whole log from index 1, without
// snapshots, applying every command as its own step (a coalesced entry
// applies alike, see the fsm tests), and reports what each step did to
// emit. The log must not have been compacted: audited clusters run with a
// TrailingLogs above their entry count. until works as in Replay.
func Audit(dataDir string, until uint64, emit func(AuditFact)) (ReplayResult, error) {
	res, _, err := replay(dataDir, until, nil, &auditor{emit: emit}, false)
	return res, err
}

// jobState reads a job's state, tenant and key.
func jobState(s *sfq.Scheduler, id sfq.JobID) (sfq.State, string, bool) {
	j, ok := s.Job(id)
	if !ok {
		return 0, "", false
	}
	return j.State, s.TenantName(j.Tenant), true
}

// poolOf is the name an audit fact gives a command's pool: "" for the pool
// default, whether the command names none or "default".
func poolOf(name string) string {
	if name == sfq.DefaultPoolName {
		return ""
	}
	return name
}

// commandJob names the job a command acts on (0: none known before it
// applies).
func commandJob(c *clusterpb.Command) uint64 {
	switch x := c.Cmd.(type) {
	case *clusterpb.Command_Started:
		return x.Started.Job
	case *clusterpb.Command_Finished:
		return x.Finished.Job
	case *clusterpb.Command_Cancel:
		return x.Cancel.Job
	case *clusterpb.Command_Expire:
		return x.Expire.Job
	}
	return 0
}

func (a *auditor) entry(f *fsm.FSM, l *raft.Log) error {
	env, err := fsm.Decode(l.Data)
	if err != nil {
		return &fsm.FatalError{Index: l.Index, Err: err}
	}
	if len(env.Commands) == 0 {
		// A clock tick: it moves the clock and says nothing to audit.
		_, err := f.ApplyEnvelope(l.Index, env)
		return err
	}
	for _, c := range env.Commands {
		var backlogged, backloggedIn, eligible []string
		var before sfq.State
		var known bool
		var failuresBefore uint16
		job := commandJob(c)
		var dueBefore map[uint64]sfq.Time // scheduled jobs a Release names
		// What a Dispatch's worker runs, and the run a Hello's worker
		// holds, before the command (the records of fsm, read apart from
		// the core).
		var runs *RunsFact
		if d := c.GetDispatch(); d != nil {
			if w, ok := f.Worker(d.WorkerId); ok {
				runs = runsFact(w.Runs)
			}
		}
		var held sfq.Job
		var holds bool
		var mark []ResourceFact // the resources before the command
		if h := c.GetWorkerHello(); h != nil {
			held, holds = heldRun(f, h.WorkerId)
		}
		f.Read(func(s *sfq.Scheduler) {
			mark = resourceMark(s)
			if rel := c.GetRelease(); rel != nil {
				dueBefore = map[uint64]sfq.Time{}
				for _, id := range rel.Jobs {
					if j, ok := s.Job(sfq.JobID(id)); ok && j.State == sfq.Scheduled {
						dueBefore[id] = j.DueAt()
					}
				}
			}
			if d := c.GetDispatch(); d != nil {
				// What the worker's pool holds (nothing, for a pool the
				// state does not know: the Dispatch is refused).
				pid, known := s.PoolID(poolOf(d.Pool))
				s.Tenants(func(i uint32, _ *sfq.Tenant) bool {
					for _, l := range s.Lanes(i) {
						t, _ := s.TenantAt(l)
						if !known || s.LanePool(l) != pid || t.Deleted || t.QueuedTotal() == 0 {
							continue
						}
						backlogged = append(backlogged, t.Name)
						in := s.QueuedIn(l)
						for _, c := range sfq.Classes() {
							if in&(1<<c) != 0 {
								backloggedIn = append(backloggedIn, t.Name+":"+c.String())
							}
						}
					}
					return true
				})
				if size, err := fsm.SizeFromPB(d.Size); err == nil && known {
					for _, cl := range sfq.Classes() {
						fair, dl := s.PoolEligibleIn(pid, cl, size)
						if fair {
							eligible = append(eligible, cl.String())
						}
						if dl {
							eligible = append(eligible, cl.String()+":deadline")
						}
					}
				}
			}
			if job != 0 {
				before, _, known = jobState(s, sfq.JobID(job))
				if j, ok := s.Job(sfq.JobID(job)); ok {
					failuresBefore = j.Failures
				}
			}
		})
		one := &clusterpb.Envelope{Version: env.Version, StampMs: env.StampMs, WallMs: env.WallMs, Commands: []*clusterpb.Command{c}}
		var reservations []string // those that stood at a Dispatch's pick
		if c.GetDispatch() != nil {
			f.SetPickObserver(func(s *sfq.Scheduler, _ sfq.PoolID, _ sfq.Size, _ *sfq.Runs) { reservations = standingReservations(s) })
		}
		out, err := f.ApplyEnvelope(l.Index, one)
		if c.GetDispatch() != nil {
			f.SetPickObserver(nil)
		}
		if err != nil {
			return err
		}
		r := out[0]
		clock, _ := f.Clock()
		var emitHello *clusterpb.WorkerHello
		f.Read(func(s *sfq.Scheduler) {
			switch x := c.Cmd.(type) {
			case *clusterpb.Command_Submit:
				fact := AuditFact{Kind: "submit", Index: l.Index, Job: uint64(r.Job), Tenant: x.Submit.Tenant, Key: x.Submit.IdempotencyKey, Created: r.Created}
				if r.Code != fsm.OK {
					fact.Code = r.Code.String()
				}
				if j, ok := s.Job(r.Job); ok && r.Code == fsm.OK {
					fact.Form, fact.JobKind = formFact(&j)
				}
				a.emit(fact)
				if j, ok := s.Job(r.Job); ok && r.Created && j.State == sfq.Scheduled {
					a.emit(AuditFact{Kind: "scheduled", Index: l.Index, Job: uint64(r.Job), Tenant: x.Submit.Tenant, At: int64(clock), DueAt: int64(j.DueAt())})
				}
			case *clusterpb.Command_Release:
				for _, id := range x.Release.Jobs {
					due, was := dueBefore[id]
					if j, ok := s.Job(sfq.JobID(id)); was && ok && j.State != sfq.Scheduled {
						a.emit(AuditFact{Kind: "release", Index: l.Index, Job: id, Tenant: s.TenantName(j.Tenant), At: int64(clock), DueAt: int64(due), Forced: x.Release.Now})
					}
				}
			case *clusterpb.Command_Dispatch:
				if !r.Assigned {
					return
				}
				j, _ := s.Job(r.Job)
				t, _ := s.TenantTotals(j.Tenant) // the tenant's counters in every pool
				lane, _ := s.TenantAt(j.Tenant)  // and in the job's pool
				g, _ := s.Group(t.Name, j.Group())
				pool := ""
				if id := s.LanePool(j.Tenant); id != sfq.DefaultPool {
					pool = s.PoolName(id)
				}
				burst, subscribed := s.Subscription(t.Name, pool)
				workerPool := poolOf(x.Dispatch.Pool)
				form, kind := formFact(&j)
				a.emit(AuditFact{Form: form, JobKind: kind, Worker: x.Dispatch.WorkerId, Runs: runs, Kind: "dispatch", Group: j.Group(), GroupRunning: g.Running, GroupCap: sfq.CapOf(&t, &g), Index: l.Index, Job: uint64(r.Job), Tenant: t.Name, Size: j.Size.String(), Attempt: r.Attempt,
					EstCostMs: j.EstCostMs, Weight: int64(j.Weight), Running: t.Running, RunningSize: t.RunningBySize[j.Size],
					InflightCPUMs: t.InflightCPUMs, MaxRunning: t.Caps.MaxRunning, MaxRunningSize: t.Caps.MaxRunningSize[j.Size],
					MaxInflightCPUMs: t.Caps.MaxInflightCPUMs, Backlogged: backlogged, BackloggedIn: backloggedIn,
					Class: j.Class.String(), Deadline: j.HasDeadline(), DeadlineMissed: r.DeadlineMissed, Start: int64(j.StartTag), Eligible: eligible,
					At: int64(clock), ExpireAt: int64(j.ExpireAt()),
					Pool: pool, WorkerPool: workerPool, PoolRunning: lane.Running, Subscribed: subscribed, Burst: burst, Uses: usesFacts(s, &j), Reservations: reservations})
			case *clusterpb.Command_Redrive, *clusterpb.Command_CancelJobs:
				if r.Bulk == nil {
					return
				}
				for _, it := range r.Bulk.Items {
					j, ok := s.Job(it.Job)
					switch {
					case !it.Done || !ok:
					case c.GetRedrive() != nil:
						a.emit(AuditFact{Kind: "redrive", Index: l.Index, Job: uint64(it.Job), Tenant: s.TenantName(j.Tenant), Attempt: j.Attempt, State: j.State.String()})
					case j.State.Terminal():
						a.emit(AuditFact{Kind: "terminal", Index: l.Index, Job: uint64(it.Job), Tenant: s.TenantName(j.Tenant), State: j.State.String()})
					}
				}
			case *clusterpb.Command_Pause:
				if r.Code == fsm.OK && r.Outcome == sfq.Changed {
					a.emit(AuditFact{Kind: "pause", Index: l.Index, Tenant: x.Pause.Tenant, Group: x.Pause.Group, All: x.Pause.All, Paused: !x.Pause.Resume,
						Pool: x.Pause.Pool})
				}
			case *clusterpb.Command_TenantUpsert:
				if t, ok := s.Tenant(x.TenantUpsert.Name); ok && r.Code == fsm.OK {
					a.emit(AuditFact{Kind: "rate", Index: l.Index, Tenant: t.Name, RateN: t.Rate.N, RatePeriodMs: t.Rate.PeriodMs, RateBurst: t.Rate.BurstOf()})
				}
			case *clusterpb.Command_SetGroup:
				if g, ok := s.Group(x.SetGroup.Tenant, x.SetGroup.Group); ok && r.Code == fsm.OK && x.SetGroup.SetRate {
					a.emit(AuditFact{Kind: "rate", Index: l.Index, Tenant: x.SetGroup.Tenant, Group: g.Name, RateN: g.Rate.N, RatePeriodMs: g.Rate.PeriodMs,
						RateBurst: g.Rate.BurstOf()})
				} else if !ok && r.Code == fsm.OK && x.SetGroup.SetRate {
					a.emit(AuditFact{Kind: "rate", Index: l.Index, Tenant: x.SetGroup.Tenant, Group: x.SetGroup.Group})
				}
			case *clusterpb.Command_WorkerHello:
				if r.Code == fsm.OK {
					// Read below, outside the scheduler's read.
					emitHello = x.WorkerHello
				}
			case *clusterpb.Command_Finished:
				if r.Code == fsm.OK && r.Outcome == sfq.Changed {
					j, _ := s.Job(sfq.JobID(x.Finished.Job))
					outcome, _ := fsm.OutcomeFromPB(x.Finished.Outcome)
					fact := AuditFact{Kind: "finish", Index: l.Index, Job: x.Finished.Job, Tenant: s.TenantName(j.Tenant), Attempt: x.Finished.Attempt,
						CPUMs: x.Finished.CpuMs, EstCostMs: j.EstCostMs, Weight: int64(j.Weight), Outcome: outcome.String()}
					if outcome == sfq.OutcomeUnknownKind {
						fact.FailuresBefore, fact.Failures, fact.State = failuresBefore, j.Failures, j.State.String()
					}
					if outcome == sfq.OutcomeSnoozed && f.Level() >= fsm.Level7 {
						fact.Snooze = &SnoozeFact{SnoozeMs: x.Finished.SnoozeMs, FailuresBefore: failuresBefore, Failures: j.Failures,
							MaxSnoozes: f.Config().Sched.MaxSnoozes, State: j.State.String(), Cancel: j.Cancel.String(), At: int64(clock), DueAt: int64(j.DueAt())}
						if j.Result != nil {
							fact.Snooze.Snoozes = j.Result.Snoozes
						}
					}
					a.emit(fact)
					if j.State == sfq.Scheduled {
						a.emit(AuditFact{Kind: "scheduled", Index: l.Index, Job: x.Finished.Job, Tenant: s.TenantName(j.Tenant), At: int64(clock), DueAt: int64(j.DueAt())})
					}
				}
			}
			if job != 0 && known {
				if after, tenant, ok := jobState(s, sfq.JobID(job)); ok && after.Terminal() && !before.Terminal() {
					a.emit(AuditFact{Kind: "terminal", Index: l.Index, Job: job, Tenant: tenant, State: after.String()})
				}
			}
			if len(mark) > 0 || s.ResourceCount() > 0 {
				if fact := resourcesFact(s, l.Index, c, mark); fact != nil {
					a.emit(*fact)
				}
			}
		})
		for _, fact := range scheduleFacts(f, l.Index, c, r, clock) {
			a.emit(fact)
		}
		if emitHello != nil {
			fact := helloFact(f, l.Index, emitHello, held, holds)
			a.emit(fact)
			if st, err := sfq.ParseState(fact.Hello.State); holds && err == nil && st.Terminal() {
				// The run it lost was its job's last (or a pending cancel
				// ended it).
				a.emit(AuditFact{Kind: "terminal", Index: l.Index, Job: fact.Job, Tenant: fact.Tenant, State: fact.Hello.State})
			}
		}
	}
	var vnow int64
	var verr error
	f.Read(func(s *sfq.Scheduler) { vnow = int64(s.VirtualNow()) })
	verr = f.Verify()
	fact := AuditFact{Kind: "entry", Index: l.Index, VirtualNow: vnow}
	if verr != nil {
		fact.Verify = verr.Error()
	}
	a.emit(fact)
	return nil
}

// finish reports every job of the final state.
func (a *auditor) finish(f *fsm.FSM) {
	f.Read(func(s *sfq.Scheduler) {
		s.Jobs(0, func(j *sfq.Job) bool {
			a.emit(AuditFact{Kind: "job", Job: uint64(j.ID), Tenant: s.TenantName(j.Tenant), Key: j.Key(), State: j.State.String()})
			return true
		})
	})
}
