package rpc

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/internal/pbcodec"
	"github.com/baristahq/barista/internal/wire"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
)

// A follower's submits travel to the leader as the commands it made of
// them (submit.go), in batches. A follower does not make one call to the
// leader for each Submit it is given: a few senders each take the submits
// waiting at that moment (at most forwardMaxSubmits, about
// forwardMaxBytes) and carry them in one ForwardCommands call, so the
// more callers a follower has, the fewer calls per submit it makes; a
// lone submit goes at once, alone. A SubmitBatch's jobs go in calls of
// their own (submitAll). Each submit carries its own caller's
// authorization, and the leader checks it and the command's tenant, then
// each command on its state as Apply will, and proposes the accepted ones
// together. Each caller gets its own answer, with its own status.
//
// A leader of an earlier build answers UNIMPLEMENTED: the submits of
// that call are then forwarded as the calls that brought them, one each.
const (
	forwardSenders    = 4
	forwardMaxSubmits = MaxBatch
	forwardMaxBytes   = 1 << 20
	// forwardTimeout bounds a batch's call when none of its callers set a
	// deadline.
	forwardTimeout = 30 * time.Second
)

// How a forwarded submit was handled.
type forwardHow uint8

const (
	forwardSent   forwardHow = iota // the answer is the leader's (or the error of getting it)
	forwardLocal                    // this node leads now: handle it here
	forwardSingly                   // the leader does not take commands: forward the call as it came
)

type forwardItem struct {
	ctx   context.Context
	authz string
	job   *clusterpb.SubmitJob
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

// begin starts the senders, once.
func (f *submitForwarder) begin() {
	f.start.Do(func() {
		life, cancel := context.WithCancel(context.Background())
		f.life = life
		go func() { <-f.b.stopping; cancel() }()
		for range forwardSenders {
			go f.run()
		}
	})
}

// submit queues one submit's command and waits for its answer.
func (f *submitForwarder) submit(ctx context.Context, authz string, job *clusterpb.SubmitJob) forwardAnswer {
	f.begin()
	it := &forwardItem{ctx: ctx, authz: authz, job: job, size: pbcodec.Size(job), done: make(chan forwardAnswer, 1)}
	select {
	case f.queue <- it:
	case <-ctx.Done():
		return forwardAnswer{err: status.FromContextError(ctx.Err()).Err()}
	case <-f.b.stopping:
		return forwardAnswer{err: status.Error(codes.Unavailable, "the server is stopping")}
	}
	return f.wait(ctx, it)
}

// wait returns the answer of it.
func (f *submitForwarder) wait(ctx context.Context, it *forwardItem) forwardAnswer {
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

// submitAll forwards the commands of one call's submits (a SubmitBatch)
// in calls of their own, in order, and returns one answer per command
// (those with errs[i] set are not sent) and how they went: forwardSent,
// or, when the first call found that this node leads now
// (forwardLocal) or that the leader takes no commands (forwardSingly, an
// earlier build), nothing sent: the caller serves the call itself, or
// forwards it as it came.
func (f *submitForwarder) submitAll(ctx context.Context, authz string, cmds []*clusterpb.Command, errs []error) ([]forwardAnswer, forwardHow) {
	f.begin()
	out := make([]forwardAnswer, len(cmds))
	var batch []*forwardItem
	var idx []int
	size, sent := 0, false
	flush := func() forwardHow {
		if len(batch) == 0 {
			return forwardSent
		}
		f.send(batch)
		for k, it := range batch {
			a := <-it.done
			if a.how != forwardSent && !sent {
				return a.how
			}
			if a.how != forwardSent {
				// The leader changed under the batch, after a part of it
				// was taken: the rest is not sent again here.
				a = forwardAnswer{err: status.Error(codes.Unavailable, "the leader changed while this batch was forwarded; this job was not submitted")}
			}
			out[idx[k]] = a
		}
		batch, idx, size, sent = batch[:0], idx[:0], 0, true
		return forwardSent
	}
	for i, c := range cmds {
		if errs[i] != nil {
			continue
		}
		n := pbcodec.Size(c.GetSubmit())
		if len(batch) > 0 && (len(batch) == forwardMaxSubmits || size+n > forwardMaxBytes) {
			if how := flush(); how != forwardSent {
				return nil, how
			}
		}
		batch = append(batch, &forwardItem{ctx: ctx, authz: authz, job: c.GetSubmit(), size: n, done: make(chan forwardAnswer, 1)})
		idx = append(idx, i)
		size += n
	}
	if how := flush(); how != forwardSent {
		return nil, how
	}
	return out, forwardSent
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

// send makes one ForwardCommands call to the leader for batch and answers
// every item.
func (f *submitForwarder) send(batch []*forwardItem) {
	live := batch[:0:0]
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
	req := &clusterpb.ForwardCommandsRequest{Submits: make([]*clusterpb.ForwardedCommand, len(live))}
	for i, it := range live {
		req.Submits[i] = &clusterpb.ForwardedCommand{Authorization: it.authz, Submit: it.job}
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
	resp, handled, err := forward(ctx, f.b, func(ctx context.Context, cc *grpc.ClientConn) (*clusterpb.ForwardSubmitsResponse, error) {
		if member {
			ctx = metadata.AppendToOutgoingContext(ctx, memberHeader, f.b.node.ID())
		}
		return clusterpb.NewNodeClient(cc).ForwardCommands(context.WithValue(ctx, indexSink{}, &index), req)
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

// forwardedAnswer reads one result of a forwarded call of submits.
func forwardedAnswer(r *clusterpb.ForwardedSubmitResult) forwardAnswer {
	if len(r.Status) == 0 {
		return forwardAnswer{resp: &pb.SubmitResponse{JobId: r.JobId, Created: r.Created}}
	}
	st, err := wire.StatusFromBytes(r.Status)
	if err != nil {
		return forwardAnswer{err: status.Errorf(codes.Internal, "the leader's answer to a forwarded submit: %v", err)}
	}
	return forwardAnswer{err: st.Err()}
}
