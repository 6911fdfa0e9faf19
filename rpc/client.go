package rpc

import (
	"context"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/baristahq/barista/client"
	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/connlimit"
	"github.com/baristahq/barista/internal/pbcodec"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
)

// ClientService implements pb.ClientServer.
type ClientService struct {
	pb.UnimplementedClientServer
	base
	// workers holds the leader's worker sessions (ExplainJob's no_worker).
	workers *WorkerService
	// submits holds tenants to the submit rate (on the leader).
	submits *submitLimiter
	// forwarder carries single submits to the leader in batches (on a
	// follower).
	forwarder *submitForwarder
	// forwardSingly plays a build before batched forwarding (Options).
	forwardSingly bool
	// watches bounds the watch streams and ends those that fall behind.
	watches *watchLimits
}

// ListJobs pages: at most MaxPage jobs (defaultPage unless asked), and
// no more than maxPageBytes of encoded jobs, so that a page always fits
// one message (fsm.MaxMessageBytes) with room to spare. One job larger
// than maxPageBytes comes alone: MaxPayloadLimit keeps it within a
// message.
const (
	defaultPage  = 100
	MaxPage      = 1000
	maxPageBytes = 3 << 20
)

// validateSubmit checks a submit on any node, before it is forwarded:
// what only the wire can get wrong (an idempotency key given but empty),
// then the state machine's own check of what needs no state
// (fsm.SubmitFields: the rules and messages of Apply). cfg is this node's
// configuration.
func validateSubmit(cmd *pb.SubmitJob, req *pb.SubmitRequest, cfg fsm.Config, level uint32) error {
	if req.IdempotencyKey != nil && *req.IdempotencyKey == "" {
		return status.Error(codes.InvalidArgument, "idempotency_key: given but empty (omit it to submit without deduplication)")
	}
	if _, r := fsm.SubmitFields(cmd, cfg, level); r != nil {
		return refusalErr(r)
	}
	return nil
}

// submitConfig is the configuration a submit is checked against here. A
// follower may not have applied the leader's latest change yet: it lets a
// submit without a cost through for the leader to judge, so that one
// right after "config set estimate=auto" is not refused by a node behind.
func (s *ClientService) submitConfig() fsm.Config {
	cfg := s.node.FSM.Config()
	if !s.node.IsLeader() {
		cfg.Sched.Estimate = sfq.EstimateAuto
	}
	return cfg
}

// submitCommand is the command of a submit for tenant.
func submitCommand(tenant string, req *pb.SubmitRequest) *pb.Command {
	job := &pb.SubmitJob{}
	setSubmitJob(job, tenant, req)
	return &pb.Command{Cmd: &pb.Command_Submit{Submit: job}}
}

func setSubmitJob(job *pb.SubmitJob, tenant string, req *pb.SubmitRequest) {
	job.Tenant, job.IdempotencyKey, job.JobType, job.Size = tenant, req.GetIdempotencyKey(), req.JobType, req.Size
	job.EstCostMs, job.Payload, job.MaxAttempts, job.TimeoutMs = req.EstCostMs, req.Payload, req.MaxAttempts, req.TimeoutMs
	job.JobClass, job.DeadlineMs, job.Group = req.Class, req.DeadlineMs, req.Group
	job.DelayMs, job.ExpireMs, job.RetryBackoffMs = req.DelayMs, req.ExpireMs, req.RetryBackoffMs
	job.Pool = req.Pool
}

// forwardedSubmit is what a follower sends the leader for a submit.
func forwardedSubmit(tenant string, req *pb.SubmitRequest) *pb.SubmitRequest {
	fwd := &pb.SubmitRequest{}
	setForwarded(fwd, tenant, req)
	return fwd
}

func setForwarded(fwd *pb.SubmitRequest, tenant string, req *pb.SubmitRequest) {
	fwd.Tenant, fwd.IdempotencyKey, fwd.JobType, fwd.Size = tenant, req.IdempotencyKey, req.JobType, req.Size
	fwd.EstCostMs, fwd.Payload, fwd.MaxAttempts, fwd.TimeoutMs = req.EstCostMs, req.Payload, req.MaxAttempts, req.TimeoutMs
	fwd.Class, fwd.DeadlineMs, fwd.Group = req.Class, req.DeadlineMs, req.Group
	fwd.DelayMs, fwd.ExpireMs, fwd.RetryBackoffMs = req.DelayMs, req.ExpireMs, req.RetryBackoffMs
	fwd.Pool = req.Pool
}

// submitSlab makes the submit commands of a batch from slices allocated
// once for the batch, not three objects a job.
type submitSlab struct {
	cmds   []pb.Command
	oneofs []pb.Command_Submit
	jobs   []pb.SubmitJob
}

func newSubmitSlab(n int) *submitSlab {
	return &submitSlab{make([]pb.Command, n), make([]pb.Command_Submit, n), make([]pb.SubmitJob, n)}
}

// command is submitCommand(tenant, req), from the slab.
func (s *submitSlab) command(tenant string, req *pb.SubmitRequest) *pb.Command {
	c, o, job := &s.cmds[0], &s.oneofs[0], &s.jobs[0]
	s.cmds, s.oneofs, s.jobs = s.cmds[1:], s.oneofs[1:], s.jobs[1:]
	setSubmitJob(job, tenant, req)
	o.Submit = job
	c.Cmd = o
	return c
}

// levelErr refuses a command that needs a feature level above the
// cluster's (fsm.CheckLevel) as FAILED_PRECONDITION. Every node checks it
// before forwarding: a node of a build that does not know a field would
// drop it.
func levelErr(f *fsm.FSM, c *pb.Command) error {
	if err := fsm.CheckLevel(c, f.Level()); err != nil {
		return refusalErr(err.(*fsm.Refusal))
	}
	return nil
}

// Submit queues a job. A follower sends it on to the leader with the
// other single submits that arrive meanwhile (forwardsubmit.go).
func (s *ClientService) Submit(ctx context.Context, req *pb.SubmitRequest) (*pb.SubmitResponse, error) {
	_, cmd, err := s.checkSubmit(ctx, req, s.submitConfig())
	if err != nil {
		return nil, err
	}
	if resp, handled, err := s.forwardSubmit(ctx, cmd.GetSubmit().Tenant, req); handled {
		return resp, err
	}
	errs := []error{nil}
	if known := s.admitSubmits(ctx, []*pb.Command{cmd}, errs); known[0] != 0 {
		return &pb.SubmitResponse{JobId: uint64(known[0])}, nil
	}
	if errs[0] != nil {
		return nil, errs[0]
	}
	res, err := s.propose(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if err := resultErr(res[0]); err != nil {
		return nil, err
	}
	return &pb.SubmitResponse{JobId: uint64(res[0].Job), Created: res[0].Created}, nil
}

// checkSubmit checks a submit at the edge, on any node: its tenant for the
// caller (ctx's identity), its fields, and the cluster's feature level. It
// returns the tenant and the command.
func (s *ClientService) checkSubmit(ctx context.Context, req *pb.SubmitRequest, cfg fsm.Config) (string, *pb.Command, error) {
	tenant, err := submitTenant(ctx, req.Tenant, cfg.Pools)
	if err != nil {
		return "", nil, err
	}
	cmd := submitCommand(tenant, req)
	level := s.node.FSM.Level()
	if err := validateSubmit(cmd.GetSubmit(), req, cfg, level); err != nil {
		return "", nil, err
	}
	if err := levelErr(s.node.FSM, cmd); err != nil {
		return "", nil, err
	}
	return tenant, cmd, nil
}

// admitSubmits is the leader's check of single submits before it
// proposes them: the state machine's own check (admitChecked), then the
// submit rate, submit by submit. errs[i] already set skips a submit; a
// refusal is written there. known[i] is the job of a keyed resend,
// answered from the state with no entry.
func (s *ClientService) admitSubmits(ctx context.Context, cmds []*pb.Command, errs []error) (known []sfq.JobID) {
	known = s.admitChecked(ctx, cmds, errs)
	if r := s.node.FSM.Config().SubmitRate; r.N != 0 {
		for i, c := range cmds {
			if errs[i] != nil || known[i] != 0 {
				continue
			}
			tenant := c.GetSubmit().Tenant
			if n, wait := s.submits.take(tenant, r, 1); n == 0 {
				errs[i] = submitRateError(tenant, r, wait)
			}
		}
	}
	return known
}

// admitChecked checks submits on the leader as Apply would
// (fsm.AdmitSubmits: each as if the ones before it that it admits were
// applied, so that a batch's jobs count toward their tenant's quotas).
// errs[i] already set skips a submit; a refusal is written there. A keyed
// resend of a job that exists is answered from the state: known[i] is
// that job (errs[i] stays nil), and the answer's index header names the
// state it read.
func (s *ClientService) admitChecked(ctx context.Context, cmds []*pb.Command, errs []error) (known []sfq.JobID) {
	jobs := make([]*pb.SubmitJob, len(cmds))
	verdicts := make([]fsm.Result, len(cmds))
	for i, c := range cmds {
		jobs[i] = c.GetSubmit()
		if errs[i] != nil {
			verdicts[i].Code = fsm.Internal // skipped
		}
	}
	index := s.node.FSM.AdmitSubmits(jobs, verdicts)
	known = make([]sfq.JobID, len(cmds))
	for i := range cmds {
		if errs[i] != nil {
			continue
		}
		switch v := verdicts[i]; {
		case v.Refused():
			errs[i] = resultErr(v)
		case v.Job != 0:
			known[i] = v.Job
			setIndexHeader(ctx, index)
		}
	}
	return known
}

// jobToPB converts a job record of sc, with its payload or without.
func jobToPB(sc *sfq.Scheduler, j *sfq.Job, payload bool) *pb.Job {
	out := &pb.Job{
		JobId: uint64(j.ID), Tenant: sc.TenantName(j.Tenant), Pool: sc.PoolName(sc.LanePool(j.Tenant)), State: j.State.String(), Attempt: j.Attempt, Failures: uint32(j.Failures),
		MaxAttempts: uint32(j.MaxAttempts), Size: fsm.SizeToPB(j.Size), EstCostMs: j.EstCostMs, CpuMs: j.CPUMs,
		JobType: j.Type(), IdempotencyKey: j.Key(), SubmittedAtMs: int64(j.SubmittedAt), EndedAtMs: int64(j.EndedAt),
		SubmittedWallMs: int64(j.SubmittedWall()), EndedWallMs: int64(j.EndedWall()),
		WorkerId: j.Worker, Cancel: j.Cancel.String(), TimeoutMs: j.TimeoutMs, Group: j.Group(),
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
	jobClassToPB(out, j)
	return out
}

// jobClassToPB adds a job's class, deadline and estimate source.
func jobClassToPB(out *pb.Job, j *sfq.Job) {
	out.Class, out.EstSource, out.DeadlineAtMs = fsm.ClassToPB(j.Class), j.EstSource.String(), int64(j.DeadlineAt())
	out.DueAtMs, out.ExpireAtMs = int64(j.DueAt()), int64(j.ExpireAt())
}

// markDeadlineMissed sets deadline_missed on the jobs still queued at or
// past their deadline at cluster time now: whenever they are dispatched,
// it is late. (Whether a dispatched job went late, its assigned event
// says: reason deadline_missed.)
func markDeadlineMissed(now sfq.Time, jobs ...*pb.Job) {
	for _, j := range jobs {
		if j.DeadlineAtMs != 0 && j.State == sfq.Queued.String() && int64(now) >= j.DeadlineAtMs {
			j.DeadlineMissed = true
		}
	}
}

// JobNotFound is the refusal of a job that does not exist or is another
// tenant's: the same NOT_FOUND either way.
func JobNotFound(id uint64) error { return status.Errorf(codes.NotFound, "job %d not found", id) }

// GetJob returns one job of the caller's tenant.
func (s *ClientService) GetJob(ctx context.Context, req *pb.GetJobRequest) (*pb.Job, error) {
	tenant, err := scopeTenant(ctx, req.Tenant, false)
	if err != nil {
		return nil, err
	}
	fwd := &pb.GetJobRequest{Tenant: tenant, JobId: req.JobId}
	return read(ctx, &s.base, req.Read, func(ctx context.Context, cc *grpc.ClientConn) (*pb.Job, error) {
		return pb.NewClientClient(cc).GetJob(ctx, fwd)
	}, func() (out *pb.Job, err error) {
		s.node.FSM.Read(func(sc *sfq.Scheduler) {
			j, ok := sc.TenantJob(tenant, sfq.JobID(req.JobId))
			if !ok {
				err = JobNotFound(req.JobId)
				return
			}
			out = jobToPB(sc, &j, true)
		})
		if out != nil {
			clock, _ := s.node.FSM.Clock()
			markDeadlineMissed(clock, out)
			out.Now = s.clockNow()
		}
		return out, err
	})
}

// PageToken encodes where the next page of ListJobs starts.
func PageToken(next sfq.JobID) string { return "p" + strconv.FormatUint(uint64(next), 10) }

// DownToken encodes where the next page of a newest-first list starts
// (that job, then older ones).
func DownToken(next sfq.JobID) string { return "d" + strconv.FormatUint(uint64(next), 10) }

// ParseListToken reads a ListJobs page token: "p" tokens go up, "d"
// tokens down; a token of the other direction is refused.
func ParseListToken(tok string, down bool) (sfq.JobID, error) {
	if !down || tok == "" {
		return ParsePageToken(tok)
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(tok, "d"), 10, 64)
	if err != nil || !strings.HasPrefix(tok, "d") || v == 0 {
		return 0, status.Errorf(codes.InvalidArgument, "page_token: %q is not a token this server issued for a newest-first list", tok)
	}
	return sfq.JobID(v), nil
}

// ParsePageToken reads a PageToken.
func ParsePageToken(tok string) (sfq.JobID, error) {
	if tok == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(tok, "p"), 10, 64)
	if err != nil || !strings.HasPrefix(tok, "p") || v == 0 {
		return 0, status.Errorf(codes.InvalidArgument, "page_token: %q is not a token this server issued", tok)
	}
	return sfq.JobID(v), nil
}

// listPage reads one page of ListJobs from the state: the jobs of tenant
// (every tenant's if empty) from ID from on, of one state unless state is
// 0 and of one pool unless pool is "" (the caller checked that it
// exists), at most size of them and no more than maxBytes once encoded (but
// never none while one remains). The next page token names the first job
// left out, so the next page starts exactly there. ok is false when the
// tenant does not exist. With down the page goes from ID from (0: the
// newest) down, and its token goes on downwards.
func listPage(sc *sfq.Scheduler, tenant string, state sfq.State, pool string, from sfq.JobID, down bool, size int, payload bool, maxBytes int) (out *pb.ListJobsResponse, ok bool) {
	pid, _ := sc.PoolID(pool)
	out = &pb.ListJobsResponse{}
	total := 0
	walk, token := sc.TenantJobs, PageToken
	if down {
		walk, token = sc.TenantJobsDown, DownToken
	}
	ok = walk(tenant, from, func(j *sfq.Job) bool {
		if (state != 0 && j.State != state) || (pool != "" && sc.LanePool(j.Tenant) != pid) {
			return true
		}
		if len(out.Jobs) == size {
			out.NextPageToken = token(j.ID)
			return false
		}
		pj := jobToPB(sc, j, payload)
		// The bytes this job adds to the response: field tag, length, body.
		n := protowire.SizeTag(1) + protowire.SizeBytes(pbcodec.Size(pj))
		if len(out.Jobs) > 0 && total+n > maxBytes {
			out.NextPageToken = token(j.ID)
			return false
		}
		total += n
		out.Jobs = append(out.Jobs, pj)
		return true
	})
	return out, ok
}

// ListJobs pages through a tenant's jobs from the newest down (or,
// oldest_first, in ID order), optionally of one state, without their
// payloads unless asked.
func (s *ClientService) ListJobs(ctx context.Context, req *pb.ListJobsRequest) (*pb.ListJobsResponse, error) {
	tenant, err := scopeTenant(ctx, req.Tenant, false)
	if err != nil {
		return nil, err
	}
	var state sfq.State
	if req.State != "" {
		if state, err = sfq.ParseState(strings.ToLower(req.State)); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "state: %q (want queued, assigned, running, completed, failed, cancelled, timed_out, scheduled or expired)", req.State)
		}
	}
	if err := poolNameErr("pool", req.Pool); err != nil {
		return nil, err
	}
	if req.NewestFirst && req.OldestFirst {
		return nil, status.Error(codes.InvalidArgument, "oldest_first: true with newest_first: true; give one of them (newest first is the default)")
	}
	newest := !req.OldestFirst
	from, err := ParseListToken(req.PageToken, newest)
	if err != nil {
		return nil, err
	}
	size, err := pageSize(req.PageSize)
	if err != nil {
		return nil, err
	}
	fwd := &pb.ListJobsRequest{Tenant: tenant, State: req.State, PageSize: req.PageSize, PageToken: req.PageToken, IncludePayload: req.IncludePayload,
		NewestFirst: newest, OldestFirst: !newest, Pool: req.Pool} // newest_first for a leader of an older build
	return read(ctx, &s.base, req.Read, func(ctx context.Context, cc *grpc.ClientConn) (*pb.ListJobsResponse, error) {
		return pb.NewClientClient(cc).ListJobs(ctx, fwd)
	}, func() (out *pb.ListJobsResponse, err error) {
		s.node.FSM.Read(func(sc *sfq.Scheduler) {
			if err = knownPool(sc, "pool", req.Pool); err != nil {
				return
			}
			var ok bool
			if out, ok = listPage(sc, tenant, state, req.Pool, from, newest, size, req.IncludePayload, maxPageBytes); !ok {
				err = status.Errorf(codes.NotFound, "tenant: %q not found", tenant)
			}
		})
		if err == nil {
			clock, _ := s.node.FSM.Clock()
			markDeadlineMissed(clock, out.Jobs...)
			now := s.clockNow()
			for _, j := range out.Jobs {
				j.Now = now
			}
		}
		return out, err
	})
}

// CancelJob cancels a job of the caller's tenant.
func (s *ClientService) CancelJob(ctx context.Context, req *pb.CancelJobRequest) (*pb.CancelJobResponse, error) {
	tenant, err := scopeTenant(ctx, req.Tenant, false)
	if err != nil {
		return nil, err
	}
	fwd := &pb.CancelJobRequest{Tenant: tenant, JobId: req.JobId}
	cmd := &pb.Command{Cmd: &pb.Command_Cancel{Cancel: &pb.CancelJob{Tenant: tenant, Job: req.JobId}}}
	if _, resp, done, err := write(ctx, &s.base, cmd, func(ctx context.Context, cc *grpc.ClientConn) (*pb.CancelJobResponse, error) {
		return pb.NewClientClient(cc).CancelJob(ctx, fwd)
	}); done {
		return resp, err
	}
	var out pb.CancelJobResponse
	s.node.FSM.Read(func(sc *sfq.Scheduler) {
		if j, ok := sc.Job(sfq.JobID(req.JobId)); ok {
			out.State, out.CancelRequested = j.State.String(), j.State.Live() && j.Cancel != sfq.CancelNone
		}
	})
	return &out, nil
}

// EventToPB converts an event of tenant.
func EventToPB(ev *fsm.Event, tenant string) *pb.Event {
	out := &pb.Event{Seq: ev.Seq, JobId: uint64(ev.Job), Tenant: tenant, Attempt: ev.Attempt, Kind: ev.Kind.String(),
		AtMs: int64(ev.At), WallMs: int64(ev.Wall()), WorkerId: ev.Worker, CpuMs: ev.CPUMs, ExitCode: int32(ev.ExitCode)}
	if ev.Kind.TenantLevel() {
		out.WorkerId, out.Group = "", eventGroup(ev)
	} else {
		out.Pool = ev.PoolLabel()
	}
	if ev.Reason != fsm.ReasonNone {
		out.Reason = ev.Reason.String()
	}
	return out
}

// WatchEvents streams the tenant's events from this node's state, in
// order, waiting for new ones; the stream ends only with the caller.
func (s *ClientService) WatchEvents(req *pb.WatchEventsRequest, stream grpc.ServerStreamingServer[pb.Event]) error {
	ctx := stream.Context()
	tenant, err := scopeTenant(ctx, req.Tenant, false)
	if err != nil {
		return err
	}
	release, err := s.watches.acquire(IdentityFrom(ctx))
	if err != nil {
		return err
	}
	var stuck connlimit.Conn // set when the watch falls behind
	defer func() { release(stuck) }()
	// The job or tenant may be a write the caller just made through
	// another node: this node reads its own state once it has applied it.
	if err := s.catchUp(ctx, true); err != nil {
		return err
	}
	f := s.node.FSM
	var ti uint32
	var ok bool
	if tenant != "" {
		f.Read(func(sc *sfq.Scheduler) { ti, ok = sc.TenantIndex(tenant) })
		if !ok {
			return status.Errorf(codes.NotFound, "tenant: %q not found", tenant)
		}
	}
	if req.JobId != 0 {
		f.Read(func(sc *sfq.Scheduler) { _, ok = sc.TenantJob(tenant, sfq.JobID(req.JobId)) })
		if !ok {
			return status.Errorf(codes.NotFound, "job %d not found", req.JobId)
		}
	}
	// A tenant's watch reads its kept events too (those the cluster's
	// count pruned from the log: fsm.TenantEvents); an admin's watch of
	// every tenant, the log.
	read := f.Events
	if tenant != "" {
		read = func(from uint64, fn func(*fsm.Event) bool) (uint64, uint64) { return f.TenantEvents(ti, from, fn) }
	}
	cursor := req.FromSeq
	first, next := read(^uint64(0), func(*fsm.Event) bool { return false })
	switch {
	case req.FromOldest:
		cursor = first
	case cursor == 0:
		cursor = next
	case cursor < first:
		return status.Errorf(codes.OutOfRange, "from_seq: %d is older than the oldest retained event (%d)", cursor, first)
	}
	// The watch is accepted: headers now, not with the first event (the
	// HTTP/JSON stream answers 200 as soon as they arrive). They say where
	// the stream starts, so that a client whose stream breaks before an
	// event resumes there, not at a later "next new event".
	if err := stream.SendHeader(metadata.Pairs(client.HeaderWatchCursor, strconv.FormatUint(cursor, 10),
		client.HeaderWatchNext, strconv.FormatUint(next, 10))); err != nil {
		return err
	}
	out := startWatchSender(stream, cursor)
	defer func() {
		out.abandon()
		if out.behind {
			stuck = s.watches.stuckConn(ctx)
		}
	}()
	for {
		changed := f.Changed()
		var events []fsm.Event
		last := cursor
		ending := false // the batch ends with a terminal event of the watched job
		// The callback runs under the state's read lock: it may not call
		// the FSM again (tenant names are looked up after).
		first, _ := read(cursor, func(ev *fsm.Event) bool {
			last = ev.Seq + 1
			if (tenant == "" || ev.Tenant == ti) && (req.JobId == 0 || uint64(ev.Job) == req.JobId) {
				events = append(events, *ev)
				ending = req.JobId != 0 && ev.Kind.Terminal()
			}
			return len(events) < watchBatch && !ending
		})
		if first > cursor {
			return status.Errorf(codes.OutOfRange, "from_seq: events from %d on were pruned before this watch read them (oldest retained: %d)", cursor, first)
		}
		ended := false
		batch := make([]*pb.Event, len(events))
		f.Read(func(sc *sfq.Scheduler) {
			if ending {
				// The watch ends at the job's current ending, not at an
				// earlier one it has left (a redrive).
				ended = finalEnd(sc, tenant, &events[len(events)-1])
			}
			for i := range events {
				name := tenant
				if name == "" {
					name = sc.TenantName(events[i].Tenant)
				}
				batch[i] = EventToPB(&events[i], name)
			}
		})
		if len(batch) > 0 {
			if err := s.watches.send(ctx, out, batch); err != nil {
				return err
			}
		}
		if ended {
			return s.watches.finish(ctx, out)
		}
		if last > cursor {
			cursor = last
			continue
		}
		// Caught up.
		if req.JobId != 0 || req.UntilIdle {
			done := false
			f.Read(func(sc *sfq.Scheduler) {
				if req.JobId != 0 {
					// Its terminal event was pruned before it was read.
					j, ok := sc.TenantJob(tenant, sfq.JobID(req.JobId))
					done = !ok || j.State.Terminal()
				} else {
					done = idle(sc, tenant)
				}
			})
			if done {
				return s.watches.finish(ctx, out)
			}
		}
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-s.stopping:
			return status.Errorf(codes.Unavailable, "this node is shutting down; resume the watch on another node from seq %d", out.next.Load())
		case <-out.done:
			return out.err
		case <-changed:
		}
	}
}

// finalEnd reports whether terminal event ev is its job's current ending:
// the job has ended (or is gone) in that state at that time. An ending
// the job left by a redrive is not.
func finalEnd(sc *sfq.Scheduler, tenant string, ev *fsm.Event) bool {
	j, ok := sc.TenantJob(tenant, ev.Job)
	return !ok || (j.State.Terminal() && j.State.String() == ev.Kind.String() && j.EndedAt == ev.At)
}

// watchBatch bounds the events a watch reads at once: with the batch
// its sender holds, what a watch whose client reads nothing keeps beside
// gRPC's own buffer.
const watchBatch = 128

// idle reports whether a tenant (every tenant, if none is named) has no
// queued or running job.
func idle(sc *sfq.Scheduler, tenant string) bool {
	busy := false
	sc.Tenants(func(_ uint32, t *sfq.Tenant) bool {
		if (tenant == "" || t.Name == tenant) && !t.Deleted && (t.QueuedTotal() > 0 || t.Running > 0) {
			busy = true
		}
		return !busy
	})
	return !busy
}

// TenantUsage reports a tenant's counters, weight and tag.
func (s *ClientService) TenantUsage(ctx context.Context, req *pb.TenantUsageRequest) (*pb.TenantUsageResponse, error) {
	tenant, err := scopeTenant(ctx, req.Tenant, true)
	if err != nil {
		return nil, err
	}
	top := int(req.TopGroups)
	switch {
	case top == 0:
		top = defaultTopGroups
	case top > MaxPage:
		return nil, status.Errorf(codes.InvalidArgument, "top_groups: %d, at most %d", top, MaxPage)
	}
	fwd := &pb.TenantUsageRequest{Tenant: tenant, TopGroups: req.TopGroups}
	return read(ctx, &s.base, req.Read, func(ctx context.Context, cc *grpc.ClientConn) (*pb.TenantUsageResponse, error) {
		return pb.NewClientClient(cc).TenantUsage(ctx, fwd)
	}, func() (*pb.TenantUsageResponse, error) {
		clock, _ := s.node.FSM.Clock()
		var out *pb.TenantUsageResponse
		s.node.FSM.Read(func(sc *sfq.Scheduler) {
			t, ok := sc.Tenant(tenant)
			if !ok {
				return
			}
			b := t.Billing
			out = &pb.TenantUsageResponse{
				Tenant: t.Name, Tier: fsm.TierToPB(t.Tier), Running: t.Running, RunningBySize: t.RunningBySize[:],
				Queued: t.QueuedTotal(), QueuedBySize: t.Queued[:], Scheduled: t.Scheduled, InflightCpuMs: t.InflightCPUMs,
				CpuBilledMs: b.CPUMs, ZombieCpuMs: b.ZombieCPUMs,
				Weight:      float64(sc.Weight(&t, clock)) / float64(sfq.WeightOne),
				FinishTagMs: t.FinishTag.String(), VirtualNowMs: sc.VirtualNow().String(), UsageMs: sc.DecayedUsage(&t, clock),
				Submitted: b.Submitted, Dispatches: b.Dispatches, Completed: b.Completed, Failed: b.Failed,
				Cancelled: b.Cancelled, TimedOut: b.TimedOut, Failures: b.Failures, Requeues: b.Requeues,
			}
			groups, n := sc.TopGroups(tenant, top)
			out.Groups, out.GroupCount = groupUsage(&t, groups), uint32(n)
			out.Paused = pausedText(t.PausedBy())
			if at, ok := t.RateEligibleAt(); ok {
				out.Rate, out.RateBurst, out.RateEligibleAtMs = rateText(t.Rate), t.Rate.Burst, int64(at)
			}
		})
		if out == nil {
			return nil, status.Errorf(codes.NotFound, "tenant: %q not found", tenant)
		}
		out.Now = s.clockNow()
		return out, nil
	})
}

// defaultTopGroups is how many groups TenantUsage lists unless asked.
const defaultTopGroups = 10

// MaxBatch bounds SubmitBatch.
const MaxBatch = 1000

// SubmitBatch submits up to MaxBatch jobs in one proposal.
func (s *ClientService) SubmitBatch(ctx context.Context, req *pb.SubmitBatchRequest) (*pb.SubmitBatchResponse, error) {
	if len(req.Jobs) == 0 || len(req.Jobs) > MaxBatch {
		return nil, status.Errorf(codes.InvalidArgument, "jobs: %d given (want 1..%d)", len(req.Jobs), MaxBatch)
	}
	n := len(req.Jobs)
	out := &pb.SubmitBatchResponse{Results: make([]*pb.SubmitResult, n)}
	results := make([]pb.SubmitResult, n) // out.Results point here
	cfg := s.submitConfig()
	level := s.node.FSM.Level()
	fwd := &pb.SubmitBatchRequest{Jobs: make([]*pb.SubmitRequest, n)}
	fwdJobs := make([]pb.SubmitRequest, n)
	slab, jobCmds := newSubmitSlab(n), make([]*pb.Command, n)
	errs := make([]error, n)
	for i, j := range req.Jobs {
		tenant, err := submitTenant(ctx, j.Tenant, cfg.Pools)
		if err == nil {
			jobCmds[i] = slab.command(tenant, j)
			err = validateSubmit(jobCmds[i].GetSubmit(), j, cfg, level)
		}
		if err == nil {
			err = levelErr(s.node.FSM, jobCmds[i])
		}
		if err != nil {
			if status.Code(err) == codes.PermissionDenied {
				return nil, err // a token naming another tenant is refused whole
			}
			errs[i] = err
		}
		setForwarded(&fwdJobs[i], tenant, j)
		fwd.Jobs[i] = &fwdJobs[i]
	}
	if resp, handled, err := forward(ctx, &s.base, func(ctx context.Context, cc *grpc.ClientConn) (*pb.SubmitBatchResponse, error) {
		return pb.NewClientClient(cc).SubmitBatch(ctx, fwd)
	}); handled {
		return resp, err
	}
	// On the leader: each job as Apply would take it, in the batch's
	// order (a job refused here costs no entry), and the submit rate.
	known := s.admitBatch(ctx, jobCmds, errs)
	cmds := make([]*pb.Command, 0, n)
	which := make([]int, 0, n)
	for i := range jobCmds {
		switch {
		case errs[i] != nil:
			setResultErr(&results[i], errs[i])
		case known[i] != 0:
			results[i].JobId = uint64(known[i])
		default:
			cmds = append(cmds, jobCmds[i])
			which = append(which, i)
			continue
		}
		out.Results[i] = &results[i]
	}
	if len(cmds) > 0 {
		res, err := s.propose(ctx, cmds...)
		if err != nil {
			return nil, err
		}
		for k, r := range res {
			sr := &results[which[k]]
			if err := resultErr(r); err != nil {
				setResultErr(sr, err)
			} else {
				sr.JobId, sr.Created = uint64(r.Job), r.Created
			}
			out.Results[which[k]] = sr
		}
	}
	return out, nil
}

// admitBatch is admitSubmits for a batch: the state machine's check of
// each job, then the submit rate tenant by tenant (limitBatch).
func (s *ClientService) admitBatch(ctx context.Context, cmds []*pb.Command, errs []error) []sfq.JobID {
	known := s.admitChecked(ctx, cmds, errs)
	if r := s.node.FSM.Config().SubmitRate; r.N != 0 {
		s.limitBatch(r, cmds, errs, known)
	}
	return known
}

// limitBatch holds a batch's jobs to the submit rate r, tenant by tenant
// in the batch's order: the jobs beyond a tenant's allowance are refused
// (errs). Jobs already refused, and keyed resends answered from the
// state (known), take nothing.
func (s *ClientService) limitBatch(r sfq.RateLimit, cmds []*pb.Command, errs []error, known []sfq.JobID) {
	var order []string
	want := map[string]int{}
	for i, c := range cmds {
		if errs[i] == nil && known[i] == 0 {
			t := c.GetSubmit().Tenant
			if want[t] == 0 {
				order = append(order, t)
			}
			want[t]++
		}
	}
	for _, tenant := range order {
		n, wait := s.submits.take(tenant, r, want[tenant])
		if n == want[tenant] {
			continue
		}
		refusal := submitRateError(tenant, r, wait)
		for i, c := range cmds {
			if errs[i] == nil && known[i] == 0 && c.GetSubmit().Tenant == tenant {
				if n > 0 {
					n--
				} else {
					errs[i] = refusal
				}
			}
		}
	}
}

// setResultErr sets a batch job's refusal: its status line, its reason
// and the retry delay the cluster asks for (client.SubmitResultError
// reads them back).
func setResultErr(r *pb.SubmitResult, err error) {
	r.Error, r.Reason = StatusLine(err), client.Reason(err)
	if d, ok := client.RetryDelay(err); ok {
		r.RetryAfterMs = max(d.Milliseconds(), 1)
	}
}

// StatusLine renders an error as "CODE_NAME: message".
func StatusLine(err error) string {
	st := status.Convert(err)
	return client.CodeName(st.Code()) + ": " + st.Message()
}

// pageSize reads a request's page_size: 0 is the default page, above
// MaxPage is refused.
func pageSize(n uint32) (int, error) {
	switch {
	case n == 0:
		return defaultPage, nil
	case n > MaxPage:
		return 0, status.Errorf(codes.InvalidArgument, "page_size: %d, at most %d", n, MaxPage)
	}
	return int(n), nil
}
