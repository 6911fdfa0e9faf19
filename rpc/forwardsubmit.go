package rpc

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/baristahq/barista/internal/pbcodec"
	pb "github.com/baristahq/barista/proto"
)

// Forwarded single submits travel in batches. A follower does not make one
// call to the leader for each Submit it is given: a few senders each take
// the submits waiting at that moment (at most forwardMaxSubmits, about
// forwardMaxBytes) and carry them in one ForwardSubmits call, so the more
// callers a follower has, the fewer calls per submit it makes; a lone
// submit goes at once, alone. Each submit carries its own caller's
// authorization, and the leader checks each exactly as if its caller had
// called Submit there (authentication, tenant scope, fields, feature
// level, state, submit rate), then proposes the accepted ones together.
// Each caller gets its own answer, with its own status.
//
// A leader of an older build answers UNIMPLEMENTED: the submits of that
// call are then forwarded one call each, as before.
const (
	forwardSenders    = 4
	forwardMaxSubmits = MaxBatch
	forwardMaxBytes   = 1 << 20
	// forwardTimeout bounds a batch's call when none of its callers set a
	// deadline.
	forwardTimeout = 30 * time.Second
)

// submitMethod is the method each forwarded submit is authorized for.
const submitMethod = "/barista.v1.Client/Submit"

// How a forwarded submit was handled.
type forwardHow uint8

const (
	forwardSent   forwardHow = iota // the answer is the leader's (or the error of getting it)
	forwardLocal                    // this node leads now: handle it here
	forwardSingly                   // the leader does not batch: forward it alone
)

type forwardItem struct {
	ctx   context.Context
	authz string
	req   *pb.SubmitRequest
	size  int
	done  chan forwardAnswer
}

type forwardAnswer struct {
	resp  *pb.SubmitResponse
	err   error
	how   forwardHow
	index uint64 // of the leader's entry that applied the batch
}

// submitForwarder gathers a follower's single submits for the leader.
type submitForwarder struct {
	b     *base
	queue chan *forwardItem
	start sync.Once
	life  context.Context // ends when the server stops
}

func newSubmitForwarder(b *base) *submitForwarder {
	return &submitForwarder{b: b, queue: make(chan *forwardItem, forwardMaxSubmits)}
}

// forwardSubmit sends a single submit on to the leader, batched with the
// others of the moment; handled is false when this node is to apply it
// itself (it leads, or the call was forwarded to it).
func (s *ClientService) forwardSubmit(ctx context.Context, tenant string, req *pb.SubmitRequest) (*pb.SubmitResponse, bool, error) {
	if s.node.IsLeader() {
		return nil, false, nil
	}
	fwd := forwardedSubmit(tenant, req)
	if !s.forwardSingly && len(metadata.ValueFromIncomingContext(ctx, forwardedKey)) == 0 {
		// The value this node authenticated the caller by (the last
		// bearer token, as Auth.identifyFor reads it).
		var authz string
		for _, v := range metadata.ValueFromIncomingContext(ctx, "authorization") {
			if strings.HasPrefix(v, "Bearer ") {
				authz = v
			}
		}
		a := s.forwarder.submit(ctx, authz, fwd)
		switch a.how {
		case forwardSent:
			setIndexHeader(ctx, a.index)
			return a.resp, true, a.err
		case forwardLocal:
			return nil, false, nil
		}
	}
	return forward(ctx, &s.base, func(ctx context.Context, cc *grpc.ClientConn) (*pb.SubmitResponse, error) {
		return pb.NewClientClient(cc).Submit(ctx, fwd)
	})
}

// submit queues one submit and waits for its answer.
func (f *submitForwarder) submit(ctx context.Context, authz string, req *pb.SubmitRequest) forwardAnswer {
	f.start.Do(func() {
		life, cancel := context.WithCancel(context.Background())
		f.life = life
		go func() { <-f.b.stopping; cancel() }()
		for range forwardSenders {
			go f.run()
		}
	})
	it := &forwardItem{ctx: ctx, authz: authz, req: req, size: pbcodec.Size(req), done: make(chan forwardAnswer, 1)}
	select {
	case f.queue <- it:
	case <-ctx.Done():
		return forwardAnswer{err: status.FromContextError(ctx.Err()).Err()}
	case <-f.b.stopping:
		return forwardAnswer{err: status.Error(codes.Unavailable, "the server is stopping")}
	}
	select {
	case a := <-it.done:
		return a
	case <-ctx.Done():
		// The batch may still carry it: as with any call that ends
		// before its answer, the job may exist (an idempotency key
		// makes the retry safe).
		return forwardAnswer{err: status.FromContextError(ctx.Err()).Err()}
	case <-f.b.stopping:
		return forwardAnswer{err: status.Error(codes.Unavailable, "the server is stopping; the submit may or may not have been applied")}
	}
}

// run is one sender: it takes the submits waiting now and sends them.
func (f *submitForwarder) run() {
	var next *forwardItem // taken, but over the last batch's size
	for {
		batch := make([]*forwardItem, 0, 16)
		if next != nil {
			batch, next = append(batch, next), nil
		} else {
			select {
			case it := <-f.queue:
				batch = append(batch, it)
			case <-f.b.stopping:
				return
			}
		}
		size := batch[0].size
	gather:
		for len(batch) < forwardMaxSubmits {
			select {
			case it := <-f.queue:
				if size+it.size > forwardMaxBytes {
					next = it
					break gather
				}
				batch, size = append(batch, it), size+it.size
			default:
				break gather
			}
		}
		f.send(batch)
	}
}

// send makes one ForwardSubmits call to the leader for batch and answers
// every item.
func (f *submitForwarder) send(batch []*forwardItem) {
	live := batch[:0]
	var deadline time.Time
	for _, it := range batch {
		if err := it.ctx.Err(); err != nil {
			it.done <- forwardAnswer{err: status.FromContextError(err).Err()}
			continue
		}
		d, ok := it.ctx.Deadline()
		if !ok {
			d = time.Now().Add(forwardTimeout)
		}
		if d.After(deadline) {
			deadline = d
		}
		live = append(live, it)
	}
	if len(live) == 0 {
		return
	}
	answerAll := func(a forwardAnswer) {
		for _, it := range live {
			it.done <- a
		}
	}
	ctx, cancel := context.WithDeadline(f.life, deadline)
	defer cancel()
	req := &pb.ForwardSubmitsRequest{Submits: make([]*pb.ForwardedSubmit, len(live))}
	for i, it := range live {
		req.Submits[i] = &pb.ForwardedSubmit{Authorization: it.authz, Job: it.req}
	}
	// forward carries the call as any forwarded call: over a ready
	// connection to the leader, waiting out an election, and again to the
	// next leader when the one it reached no longer leads. The call itself
	// is this member's own, made with its admin token and charged to it
	// (memberHeader), never to a caller whose submit it carries: a
	// caller at its bounds on the leader then refuses no other caller's
	// submit. Each caller's share of the call is what it gave this node
	// (each submit was read here under its caller's bounds); the leader
	// authorizes every submit again by its own token. A member without
	// an admin token sends the first caller's.
	member := f.b.selfToken != ""
	switch {
	case member:
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer "+f.b.selfToken))
	case live[0].authz != "":
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", live[0].authz))
	}
	var index uint64
	resp, handled, err := forward(ctx, f.b, func(ctx context.Context, cc *grpc.ClientConn) (*pb.ForwardSubmitsResponse, error) {
		if member {
			ctx = metadata.AppendToOutgoingContext(ctx, memberHeader, f.b.node.ID())
		}
		return pb.NewNodeClient(cc).ForwardSubmits(context.WithValue(ctx, indexSink{}, &index), req)
	})
	switch {
	case !handled:
		answerAll(forwardAnswer{how: forwardLocal})
		return
	case status.Code(err) == codes.Unimplemented:
		answerAll(forwardAnswer{how: forwardSingly})
		return
	case err != nil:
		answerAll(forwardAnswer{err: err})
		return
	case len(resp.Results) != len(live):
		answerAll(forwardAnswer{err: status.Errorf(codes.Internal, "the leader answered %d forwarded submits with %d results", len(live), len(resp.Results))})
		return
	}
	f.b.metrics.forwardBatches.Inc()
	f.b.metrics.forwardedSubmits.Add(float64(len(live)))
	for i, r := range resp.Results {
		a := forwardedAnswer(r)
		a.index = index
		live[i].done <- a
	}
}

// forwardedAnswer reads one result of a ForwardSubmits call.
func forwardedAnswer(r *pb.ForwardedSubmitResult) forwardAnswer {
	if len(r.Status) == 0 {
		return forwardAnswer{resp: &pb.SubmitResponse{JobId: r.JobId, Created: r.Created}}
	}
	st, err := ForwardedStatus(r.Status)
	if err != nil {
		return forwardAnswer{err: status.Errorf(codes.Internal, "the leader's answer to a forwarded submit: %v", err)}
	}
	return forwardAnswer{err: st.Err()}
}

// ForwardedStatus reads the status of a refused forwarded submit (a
// google.rpc.Status in wire form); a refusal must not say OK.
func ForwardedStatus(b []byte) (*status.Status, error) {
	var st spb.Status
	if err := proto.Unmarshal(b, &st); err != nil {
		return nil, err
	}
	if st.Code == int32(codes.OK) {
		return nil, errors.New("a refusal with status OK")
	}
	return status.FromProto(&st), nil
}

// ForwardSubmits takes, on the leader, the single submits a follower
// gathered: each is authorized and checked on its own as Submit would,
// and the accepted ones are proposed together.
func (s *NodeService) ForwardSubmits(ctx context.Context, req *pb.ForwardSubmitsRequest) (*pb.ForwardSubmitsResponse, error) {
	return s.client.forwardedSubmits(ctx, s.auth, req)
}

func (s *ClientService) forwardedSubmits(ctx context.Context, auth *Auth, req *pb.ForwardSubmitsRequest) (*pb.ForwardSubmitsResponse, error) {
	if s.forwardSingly {
		return nil, status.Error(codes.Unimplemented, "method ForwardSubmits not implemented")
	}
	n := len(req.Submits)
	if n == 0 || n > forwardMaxSubmits {
		return nil, status.Errorf(codes.InvalidArgument, "submits: %d given (want 1..%d)", n, forwardMaxSubmits)
	}
	if !s.node.IsLeader() {
		return nil, errNotLeader
	}
	cfg := s.submitConfig()
	reqs := make([]*pb.SubmitRequest, n)
	cmds, errs := make([]*pb.Command, n), make([]error, n)
	for i, fs := range req.Submits {
		if reqs[i] = fs.GetJob(); reqs[i] == nil {
			errs[i] = status.Error(codes.InvalidArgument, "job: required")
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
		_, cmds[i], errs[i] = s.checkSubmit(ictx, reqs[i], cfg)
	}
	known := s.admitSubmits(ctx, cmds, errs)
	out := &pb.ForwardSubmitsResponse{Results: make([]*pb.ForwardedSubmitResult, n)}
	var props []*pb.Command
	var which []int
	for i, err := range errs {
		switch {
		case err != nil:
		case known[i] != 0:
			out.Results[i] = &pb.ForwardedSubmitResult{JobId: uint64(known[i])}
		default:
			props, which = append(props, cmds[i]), append(which, i)
		}
	}
	if len(props) > 0 {
		res, err := s.propose(ctx, props...)
		if err != nil {
			return nil, err
		}
		for k, r := range res {
			if err := resultErr(r); err != nil {
				errs[which[k]] = err
			} else {
				out.Results[which[k]] = &pb.ForwardedSubmitResult{JobId: uint64(r.Job), Created: r.Created}
			}
		}
	}
	for i, err := range errs {
		if err != nil {
			b, _ := proto.Marshal(status.Convert(err).Proto())
			out.Results[i] = &pb.ForwardedSubmitResult{Status: b}
		}
	}
	return out, nil
}
