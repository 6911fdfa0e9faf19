package rpc

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/apiview"
	"github.com/baristahq/barista/internal/text"
	"github.com/baristahq/barista/internal/wire"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// One submit pipeline (docs/architecture.md, "The life of a submit").
// A request becomes a command once, on the node it reaches (edgeSubmit:
// the caller's tenant, what of the command needs no state, the feature
// level). A follower forwards that command, with its caller's
// authorization, to the leader (forwardsubmit.go), whichever call brought
// it: Submit, SubmitBatch, HTTP/JSON. The leader checks each command on
// its state as Apply will (admitSubmits: a refusal costs no entry) and
// proposes the others together (submitOnLeader); Apply checks them again.

// MaxBatch bounds SubmitBatch.
const MaxBatch = text.MaxBatch

// submitMethod is the method each forwarded submit is authorized for.
const submitMethod = "/barista.v1.Client/Submit"

// submitted is the answer to one submit the leader took: its job, and
// whether the submit made it (false: a keyed resend of an existing job).
type submitted struct {
	job     sfq.JobID
	created bool
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

// edgeSubmit makes job the command of req for the caller of ctx and checks
// what of it needs no state: the tenant (a client token's own, never
// another; an admin's as named, or none when the cluster has a
// default_tenant, which Apply resolves), what only the wire can get wrong
// (an idempotency key given but empty), the state machine's own rules of
// the fields (fsm.SubmitFields, with Apply's messages) and the cluster's
// feature level.
func edgeSubmit(ctx context.Context, req *pb.SubmitRequest, job *clusterpb.SubmitJob, cfg fsm.Config, level uint32) error {
	required := cfg.Pools.DefaultTenant == ""
	tenant, err := scopeTenant(ctx, req.Tenant, required)
	if err != nil {
		return err
	}
	apiview.SetSubmitJob(job, tenant, req)
	if req.IdempotencyKey != nil && *req.IdempotencyKey == "" {
		return fieldErr(codes.InvalidArgument, "idempotency_key", "given but empty (omit it to submit without deduplication)")
	}
	if r := apiview.ReservedKey(job.IdempotencyKey); r != nil {
		return refusalErr(r)
	}
	if _, r := fsm.SubmitFields(job, cfg, level); r != nil {
		return refusalErr(r)
	}
	one := clusterpb.Command_Submit{Submit: job}
	if err := fsm.CheckLevel(&clusterpb.Command{Cmd: &one}, level); err != nil {
		return refusalErr(err.(*fsm.Refusal))
	}
	return nil
}

// levelErr refuses a command that needs a feature level above the
// cluster's (fsm.CheckLevel) as FAILED_PRECONDITION. Every node checks it
// before forwarding: a node of a build that does not know a field would
// drop it.
func levelErr(f *fsm.FSM, c *clusterpb.Command) error {
	if err := fsm.CheckLevel(c, f.Level()); err != nil {
		return refusalErr(err.(*fsm.Refusal))
	}
	return nil
}

// callerAuthz is the value this node authenticated the caller of ctx by
// (the last bearer token, as Auth.identifyFor reads it), which a
// forwarded submit carries.
func callerAuthz(ctx context.Context) string {
	var authz string
	for _, v := range metadata.ValueFromIncomingContext(ctx, "authorization") {
		if strings.HasPrefix(v, "Bearer ") {
			authz = v
		}
	}
	return authz
}

// forwarding reports whether this node is to send the submits of ctx's
// call on to the leader (it does not lead, and the call was not itself
// forwarded here: that one is refused as not the leader's, for its sender
// to send again).
func (s *ClientService) forwarding(ctx context.Context) (bool, error) {
	if s.node.IsLeader() {
		return false, nil
	}
	if len(metadata.ValueFromIncomingContext(ctx, forwardedKey)) > 0 {
		return false, errNotLeader
	}
	return true, nil
}

// Submit queues a job. A follower sends its command on to the leader
// with the other submits that arrive meanwhile (forwardsubmit.go).
func (s *ClientService) Submit(ctx context.Context, req *pb.SubmitRequest) (*pb.SubmitResponse, error) {
	job := &clusterpb.SubmitJob{}
	if err := edgeSubmit(ctx, req, job, s.submitConfig(), s.node.FSM.Level()); err != nil {
		return nil, err
	}
	if fwd, err := s.forwarding(ctx); err != nil {
		return nil, err
	} else if fwd {
		a := forwardAnswer{how: forwardSingly}
		if !s.forwardSingly {
			a = s.forwarder.submit(ctx, callerAuthz(ctx), job)
		}
		switch a.how {
		case forwardSent:
			setIndexHeader(ctx, a.index)
			if a.err == nil && req.ReturnJob {
				s.returnJob(ctx, job.Tenant, a.resp, a.index)
			}
			return a.resp, a.err
		case forwardSingly:
			resp, _, err := forward(ctx, &s.base, func(ctx context.Context, cc *grpc.ClientConn) (*pb.SubmitResponse, error) {
				return pb.NewClientClient(cc).Submit(ctx, req)
			})
			return resp, err
		}
		// forwardLocal: this node leads now.
	}
	errs := []error{nil}
	out, err := s.submitOnLeader(ctx, []*clusterpb.Command{{Cmd: &clusterpb.Command_Submit{Submit: job}}}, errs)
	if err != nil {
		return nil, err
	}
	if errs[0] != nil {
		return nil, errs[0]
	}
	resp := &pb.SubmitResponse{JobId: uint64(out[0].job), Created: out[0].created}
	if req.ReturnJob {
		s.returnJob(ctx, job.Tenant, resp, 0)
	}
	return resp, nil
}

// returnJobWait bounds how long a follower that forwarded a submit waits
// for its own state to hold the job it answers (return_job).
const returnJobWait = time.Second

// returnJob puts the submitted job into resp (return_job), without its
// payload, as this node's state holds it once it has applied index (0:
// it has: this node proposed the submit, or answered it from its state).
// A node that has not applied index within returnJobWait leaves the job
// out: the caller reads it itself.
func (s *ClientService) returnJob(ctx context.Context, tenant string, resp *pb.SubmitResponse, index uint64) {
	if index > 0 {
		wctx, cancel := context.WithTimeout(ctx, returnJobWait)
		err := s.node.FSM.WaitApplied(wctx, index)
		cancel()
		if err != nil {
			return
		}
	}
	var out *pb.Job
	s.node.FSM.Read(func(sc *sfq.Scheduler) {
		if j, ok := sc.TenantJob(tenant, sfq.JobID(resp.JobId)); ok {
			out = apiview.Job(sc, &j, false)
		}
	})
	if out == nil {
		return
	}
	clock, _ := s.node.FSM.Clock()
	apiview.MarkDeadlineMissed(clock, out)
	out.Now = s.clockNow()
	resp.Job = out
}

// SubmitBatch submits up to MaxBatch jobs: each is checked and answered
// on its own, the accepted ones proposed together.
func (s *ClientService) SubmitBatch(ctx context.Context, req *pb.SubmitBatchRequest) (*pb.SubmitBatchResponse, error) {
	n := len(req.Jobs)
	if n == 0 || n > MaxBatch {
		return nil, fieldErr(codes.InvalidArgument, "jobs", "%d given (want 1..%d)", n, MaxBatch)
	}
	cfg, level := s.submitConfig(), s.node.FSM.Level()
	slab := newSubmitSlab(n)
	cmds, errs := make([]*clusterpb.Command, n), make([]error, n)
	for i, j := range req.Jobs {
		cmds[i] = slab.command()
		if err := edgeSubmit(ctx, j, cmds[i].GetSubmit(), cfg, level); err != nil {
			if status.Code(err) == codes.PermissionDenied {
				return nil, err // a token naming another tenant is refused whole
			}
			errs[i] = err
		}
	}
	out := &pb.SubmitBatchResponse{Results: make([]*pb.SubmitResult, n)}
	results := make([]pb.SubmitResult, n) // out.Results point here
	for i := range results {
		out.Results[i] = &results[i]
	}
	if fwd, err := s.forwarding(ctx); err != nil {
		return nil, err
	} else if fwd {
		var answers []forwardAnswer
		how := forwardSingly
		if !s.forwardSingly {
			answers, how = s.forwarder.submitAll(ctx, callerAuthz(ctx), cmds, errs)
		}
		switch how {
		case forwardSingly:
			// The leader does not take forwarded commands (an earlier
			// build): the call goes on as it came.
			resp, _, err := forward(ctx, &s.base, func(ctx context.Context, cc *grpc.ClientConn) (*pb.SubmitBatchResponse, error) {
				return pb.NewClientClient(cc).SubmitBatch(ctx, req)
			})
			return resp, err
		case forwardSent:
			var index uint64
			for i, a := range answers {
				index = max(index, a.index)
				switch {
				case errs[i] != nil:
					setResultErr(&results[i], errs[i])
				case a.err != nil:
					setResultErr(&results[i], a.err)
				default:
					results[i].JobId, results[i].Created = a.resp.JobId, a.resp.Created
				}
			}
			setIndexHeader(ctx, index)
			return out, nil
		}
		// forwardLocal: this node leads now.
	}
	res, err := s.submitOnLeader(ctx, cmds, errs)
	if err != nil {
		return nil, err
	}
	for i := range cmds {
		if errs[i] != nil {
			setResultErr(&results[i], errs[i])
		} else {
			results[i].JobId, results[i].Created = uint64(res[i].job), res[i].created
		}
	}
	return out, nil
}

// submitOnLeader takes, on the leader, submits already made commands:
// each is checked on the state as Apply will (admitSubmits), the
// accepted ones are proposed together, and each gets its answer: a
// refusal in errs[i] (errs[i] already set skips cmds[i]), or its job. The
// error is the proposal's, when it failed as a whole.
func (s *ClientService) submitOnLeader(ctx context.Context, cmds []*clusterpb.Command, errs []error) ([]submitted, error) {
	out := make([]submitted, len(cmds))
	known := s.admitSubmits(ctx, cmds, errs)
	var props []*clusterpb.Command
	var which []int
	for i := range cmds {
		switch {
		case errs[i] != nil:
		case known[i] != 0:
			out[i].job = known[i]
		default:
			props, which = append(props, cmds[i]), append(which, i)
		}
	}
	if len(props) == 0 {
		return out, nil
	}
	res, err := s.propose(ctx, props...)
	if err != nil {
		return nil, err
	}
	for k, r := range res {
		if err := resultErr(r); err != nil {
			errs[which[k]] = err
		} else {
			out[which[k]] = submitted{job: r.Job, created: r.Created}
		}
	}
	return out, nil
}

// admitSubmits is the leader's check of submits before it proposes them:
// the state machine's own check (fsm.AdmitSubmits: each as if the ones
// before it that it admits were applied, so that a batch's jobs count
// toward their tenant's quotas), then the submit rate, tenant by tenant
// in the order of cmds (limitBatch). errs[i] already set skips a submit;
// a refusal is written there. A keyed resend of a job that exists is
// answered from the state: known[i] is that job (errs[i] stays nil), and
// the answer's index header names the state it read.
func (s *ClientService) admitSubmits(ctx context.Context, cmds []*clusterpb.Command, errs []error) (known []sfq.JobID) {
	jobs := make([]*clusterpb.SubmitJob, len(cmds))
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
	if r := s.node.FSM.Config().SubmitRate; r.N != 0 {
		s.limitBatch(r, cmds, errs, known)
	}
	return known
}

// limitBatch holds submits to the submit rate r, tenant by tenant in the
// order of cmds: the submits beyond a tenant's allowance are refused
// (errs). Submits already refused, and keyed resends answered from the
// state (known), take nothing.
func (s *ClientService) limitBatch(r sfq.RateLimit, cmds []*clusterpb.Command, errs []error, known []sfq.JobID) {
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
		n, wait := s.submits.Take(tenant, r, want[tenant])
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

// ForwardCommands takes, on the leader, the submits a follower made
// commands of: each is authorized and its tenant checked for its caller,
// then the commands take the leader's half of the pipeline
// (submitOnLeader).
func (s *NodeService) ForwardCommands(ctx context.Context, req *clusterpb.ForwardCommandsRequest) (*clusterpb.ForwardSubmitsResponse, error) {
	return s.client.forwardedCommands(ctx, s.auth, req)
}

func (s *ClientService) forwardedCommands(ctx context.Context, auth *Auth, req *clusterpb.ForwardCommandsRequest) (*clusterpb.ForwardSubmitsResponse, error) {
	if s.forwardSingly {
		return nil, status.Error(codes.Unimplemented, "method ForwardCommands not implemented")
	}
	n := len(req.Submits)
	if n == 0 || n > forwardMaxSubmits {
		return nil, fieldErr(codes.InvalidArgument, "submits", "%d given (want 1..%d)", n, forwardMaxSubmits)
	}
	if !s.node.IsLeader() {
		return nil, errNotLeader
	}
	cmds, errs := make([]*clusterpb.Command, n), make([]error, n)
	for i, fc := range req.Submits {
		cmds[i] = &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: fc.GetSubmit()}}
		if fc.GetSubmit() == nil {
			errs[i] = fieldErr(codes.InvalidArgument, "submit", "required")
			continue
		}
		errs[i] = forwardedTenant(ctx, auth, fc.Authorization, fc.Submit.Tenant)
	}
	res, err := s.submitOnLeader(ctx, cmds, errs)
	if err != nil {
		return nil, err
	}
	return forwardedResults(res, errs), nil
}

// forwardedTenant checks, on the leader, that the caller of a forwarded
// submit (its authorization) may name its command's tenant: a client
// token its own alone, an admin any (or none, for the default_tenant).
func forwardedTenant(ctx context.Context, auth *Auth, authz, tenant string) error {
	id, err := auth.identifyFor(submitMethod, []string{authz})
	if err != nil {
		return err
	}
	if id != nil {
		ctx = context.WithValue(ctx, identityKey{}, *id)
	}
	got, err := scopeTenant(ctx, tenant, false)
	if err != nil {
		return err
	}
	if got != tenant {
		return fieldErr(codes.PermissionDenied, "tenant", "a forwarded submit of tenant %q for a token of tenant %q", tenant, got)
	}
	return nil
}

// forwardedResults is the answer of a forwarded call of submits, from
// what submitOnLeader answered them.
func forwardedResults(res []submitted, errs []error) *clusterpb.ForwardSubmitsResponse {
	out := &clusterpb.ForwardSubmitsResponse{Results: make([]*clusterpb.ForwardedSubmitResult, len(res))}
	for i, r := range res {
		if errs[i] != nil {
			out.Results[i] = &clusterpb.ForwardedSubmitResult{Status: wire.StatusBytes(errs[i])}
		} else {
			out.Results[i] = &clusterpb.ForwardedSubmitResult{JobId: uint64(r.job), Created: r.created}
		}
	}
	return out
}

// ForwardSubmits takes, on the leader, the single submits a follower of
// an earlier build gathered, as requests: each is authorized and made a
// command as a Submit here would (edgeSubmit), then they take the
// leader's half of the pipeline.
func (s *NodeService) ForwardSubmits(ctx context.Context, req *clusterpb.ForwardSubmitsRequest) (*clusterpb.ForwardSubmitsResponse, error) {
	return s.client.forwardedSubmits(ctx, s.auth, req)
}

func (s *ClientService) forwardedSubmits(ctx context.Context, auth *Auth, req *clusterpb.ForwardSubmitsRequest) (*clusterpb.ForwardSubmitsResponse, error) {
	if s.forwardSingly {
		return nil, status.Error(codes.Unimplemented, "method ForwardSubmits not implemented")
	}
	n := len(req.Submits)
	if n == 0 || n > forwardMaxSubmits {
		return nil, fieldErr(codes.InvalidArgument, "submits", "%d given (want 1..%d)", n, forwardMaxSubmits)
	}
	if !s.node.IsLeader() {
		return nil, errNotLeader
	}
	cfg, level := s.submitConfig(), s.node.FSM.Level()
	slab := newSubmitSlab(n)
	cmds, errs := make([]*clusterpb.Command, n), make([]error, n)
	for i, fs := range req.Submits {
		cmds[i] = slab.command()
		if fs.GetJob() == nil {
			errs[i] = fieldErr(codes.InvalidArgument, "job", "required")
			continue
		}
		id, err := auth.identifyFor(submitMethod, []string{fs.Authorization})
		if err != nil {
			errs[i] = err
			continue
		}
		ictx := ctx
		if id != nil {
			ictx = context.WithValue(ctx, identityKey{}, *id)
		}
		errs[i] = edgeSubmit(ictx, fs.GetJob(), cmds[i].GetSubmit(), cfg, level)
	}
	res, err := s.submitOnLeader(ctx, cmds, errs)
	if err != nil {
		return nil, err
	}
	return forwardedResults(res, errs), nil
}

// submitSlab makes the submit commands of a batch from slices allocated
// once for the batch, not three objects a job.
type submitSlab struct {
	cmds   []clusterpb.Command
	oneofs []clusterpb.Command_Submit
	jobs   []clusterpb.SubmitJob
}

func newSubmitSlab(n int) *submitSlab {
	return &submitSlab{make([]clusterpb.Command, n), make([]clusterpb.Command_Submit, n), make([]clusterpb.SubmitJob, n)}
}

// command is an empty submit command, from the slab.
func (s *submitSlab) command() *clusterpb.Command {
	c, o, job := &s.cmds[0], &s.oneofs[0], &s.jobs[0]
	s.cmds, s.oneofs, s.jobs = s.cmds[1:], s.oneofs[1:], s.jobs[1:]
	o.Submit = job
	c.Cmd = o
	return c
}

// setResultErr sets a batch job's refusal: its status, and the same in
// plain fields (wire.SetRefusal; client.SubmitResultError reads it back).
func setResultErr(r *pb.SubmitResult, err error) { wire.SetRefusal(r, err) }

// StatusLine renders an error as "CODE_NAME: message".
func StatusLine(err error) string {
	st := status.Convert(err)
	return wire.CodeName(st.Code()) + ": " + st.Message()
}
