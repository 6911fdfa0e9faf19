package client

import (
	"context"
	"iter"
	"time"

	pb "github.com/baristahq/barista/proto"
)

// The typed calls of one tenant's jobs: list, cancel, explain, run now
// (Insert, InsertMany and JobGet are in typed.go). Each takes the tenant
// ("" for a client token's own; an admin token names one) and answers in
// Go types.

// JobListOpts choose the jobs JobList yields. The zero value lists the
// caller's tenant's jobs, newest first, without payloads.
type JobListOpts struct {
	Tenant string
	State  JobState // "": every state
	Pool   string   // "": every pool ("default": the pool default)
	// OldestFirst lists them in ID order from the oldest up.
	OldestFirst bool
	// WithPayload returns each job's payload (a page then holds fewer
	// jobs).
	WithPayload bool
	// PageSize bounds each page fetched (0: 100; at most 1000).
	PageSize int
	// Stale reads from the node's own state, without asking the leader:
	// faster, possibly behind.
	Stale bool
}

// JobList yields the tenant's jobs opts choose, one page (one call,
// bounded by Options.CallTimeout) at a time, until the last or until
// the loop stops; a failure is yielded once, with a nil job, and ends
// it.
//
//	for j, err := range c.JobList(ctx, client.JobListOpts{State: client.JobQueued}) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(j.ID, j.Kind, j.SubmittedAt)
//	}
func (c *Client) JobList(ctx context.Context, opts JobListOpts) iter.Seq2[*Job, error] {
	req := &pb.ListJobsRequest{Tenant: opts.Tenant, State: string(opts.State), Pool: opts.Pool, OldestFirst: opts.OldestFirst,
		IncludePayload: opts.WithPayload, PageSize: uint32(min(max(opts.PageSize, 0), 1<<31))}
	if opts.Stale {
		req.Read = &pb.ReadOptions{Stale: true}
	}
	return func(yield func(*Job, error) bool) {
		for j, err := range c.Jobs(ctx, req) {
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(JobFromProto(j), nil) {
				return
			}
		}
	}
}

// CancelResult is what JobCancel did: the job's State after it, and
// whether its worker is being told to stop (a running or assigned job
// ends cancelled once the worker confirms or its lease expires).
type CancelResult struct {
	State           JobState
	CancelRequested bool
}

// JobCancel cancels one job of the tenant: a scheduled or queued job is
// cancelled at once, an assigned or running one once its worker stops it
// (CancelResult.CancelRequested). It is sent once (a second cancel
// answers differently).
func (c *Client) JobCancel(ctx context.Context, tenant string, id uint64) (*CancelResult, error) {
	resp, err := c.CancelJob(ctx, &pb.CancelJobRequest{Tenant: tenant, JobId: id})
	if err != nil {
		return nil, err
	}
	return &CancelResult{State: JobState(resp.State), CancelRequested: resp.CancelRequested}, nil
}

// JobRunNow releases a scheduled job of the tenant at once (its delay,
// backoff or snooze cut short) and returns its state after: queued. It
// is sent once: a second run-now of a job already released is refused.
func (c *Client) JobRunNow(ctx context.Context, tenant string, id uint64) (JobState, error) {
	resp, err := c.RunJobNow(ctx, &pb.RunJobNowRequest{Tenant: tenant, JobId: id})
	if err != nil {
		return "", err
	}
	return JobState(resp.State), nil
}

// Place is a queued job's place in line (docs/fairness.md, "Place in
// line"): the jobs workers of its size would be given before it if they
// asked one after another and nothing else happened.
type Place struct {
	Ahead    int  // the jobs before it
	OwnAhead int  // of Ahead, its own tenant's
	Complete bool // false: the count stopped at 10,000 (Ahead is a lower bound)
	// EstimatedStart is an estimate of its start (zero when nothing ran
	// in its pool in the last 10 minutes to estimate from).
	EstimatedStart time.Time
	// RatePerMinute is its pool's recent dispatches of its size or
	// smaller a minute; Share its tenant's entitled share of its class.
	RatePerMinute float64
	Share         float64
}

func placeOf(now *pb.ClockNow, p *pb.PlaceInLine) *Place {
	if p == nil {
		return nil
	}
	out := &Place{Ahead: int(p.Ahead), OwnAhead: int(p.OwnAhead), Complete: p.Complete, RatePerMinute: p.RatePerMinute, Share: p.Share}
	if p.EstimatedStartMs != 0 {
		out.EstimatedStart, _ = WallAt(now, p.EstimatedStartMs)
	}
	return out
}

// Explanation is why a job is where it is (SPEC §3 "Why a job waits"):
// its Reason, Text (the same in one readable paragraph), and the fields
// of that reason; the fields of other reasons are zero.
type Explanation struct {
	JobID  uint64
	Reason WaitReason
	Text   string
	Size   Size
	Class  Class
	Group  string // its group ("": the unnamed group)

	Position int // WaitBehind: the queued jobs ahead in its queue
	// Vertex: for WaitCap the cap (tenant_running, tenant_size,
	// tenant_inflight, class, deadline, group_running); for WaitPaused and
	// WaitRate what holds it (all, tenant, group).
	Vertex string
	// Current and Limit: WaitCap's count and limit (CPU milliseconds for
	// tenant_inflight).
	Current, Limit int64
	// Ahead: for WaitWaiting, the candidates that go before it.
	Ahead int
	// FittingWorkers and WorkersBusy: for WaitWaiting, the connected,
	// undrained workers that fit it, and whether all of them are busy.
	FittingWorkers int
	WorkersBusy    bool
	Worker         string     // WaitAssigned, WaitRunning
	DueAt          time.Time  // WaitScheduled
	EligibleAt     time.Time  // WaitRate
	GroupOrder     GroupOrder // WaitGroupTurn: its tenant's
	// Kind: for WaitNoWorker, the kind no connected worker of its pool
	// and size runs ("command" for a command job).
	Kind  string
	Place *Place // a queued job's place in line (nil: none)
	// Resource: for WaitResource, the resource that holds it back and how.
	Resource *ResourceBlock
}

// ResourceBlock says how a resource holds a job back (WaitResource): it
// has Held of its Capacity units held and no room for the job's; or
// (Tenant) the job's tenant holds TenantHeld units, its TenantMax; or
// another job's reservation of it (Reserved) stands.
type ResourceBlock struct {
	Name                  string
	Held, Capacity        int
	Tenant                bool
	TenantHeld, TenantMax int
	Reserved              uint64
}

// JobExplain says why a job of the tenant is where it is.
func (c *Client) JobExplain(ctx context.Context, tenant string, id uint64) (*Explanation, error) {
	r, err := c.ExplainJob(ctx, &pb.ExplainJobRequest{Tenant: tenant, JobId: id})
	if err != nil {
		return nil, err
	}
	wall := func(ms int64) time.Time {
		if ms == 0 {
			return time.Time{}
		}
		t, _ := WallAt(r.Now, ms)
		return t
	}
	out := &Explanation{JobID: r.JobId, Reason: WaitReason(r.Reason), Text: r.Text, Size: sizeOf(r.Size), Class: classOf(r.Class), Group: r.Group,
		Position: int(r.Position), Vertex: r.Vertex, Current: r.Current, Limit: r.Limit, Ahead: int(r.Ahead),
		FittingWorkers: int(r.FittingWorkers), WorkersBusy: r.WorkersBusy, Worker: r.WorkerId, DueAt: wall(r.DueMs),
		EligibleAt: wall(r.EligibleAtMs), Kind: r.Kind, Place: placeOf(r.Now, r.Place)}
	if r.GroupOrder != "" {
		out.GroupOrder = GroupOrder(r.GroupOrder)
	}
	if r.Resource != "" {
		out.Resource = &ResourceBlock{Name: r.Resource, Held: int(r.Held), Capacity: int(r.Capacity), Tenant: r.TenantMax != nil,
			TenantHeld: int(r.TenantHeld), TenantMax: int(r.GetTenantMax()), Reserved: r.ReservedJobId}
	}
	return out, nil
}
