package rpc

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/internal/wire"
	"github.com/baristahq/barista/proto/clusterpb"
)

// Read-your-writes on every node (docs/api.md, "Consistency").
//
// A write's answer carries the index of the log entry that applied it
// (header x-barista-index; a follower relays the leader's). Most reads
// are served by the leader, whose state holds every write it has
// acknowledged. A read a node serves from its own state (a watch, or a
// stale read) first waits until that state has applied the caller's
// last write: the index the caller names (x-barista-min-index, which the
// Go client sends after each write it made), else — a watch — the index
// the leader has applied when asked (Node.ReadIndex), which covers every
// write acknowledged before the call.

// ReadIndex answers, on the leader, the index of the last entry its state
// has applied, once it has confirmed that it still leads.
func (s *NodeService) ReadIndex(ctx context.Context, _ *clusterpb.ReadIndexRequest) (*clusterpb.ReadIndexResponse, error) {
	if !s.node.IsLeader() {
		return nil, errNotLeader
	}
	if err := s.node.ConsistentRead(ctx); err != nil {
		return nil, proposeErr(err)
	}
	_, index := s.node.FSM.Clock()
	return &clusterpb.ReadIndexResponse{Index: index}, nil
}

// setIndexHeader puts the index of the entry that applied a write in the
// answer's headers (nothing if ctx is not a call's, or its headers have
// gone), or in the indexSink ctx carries.
func setIndexHeader(ctx context.Context, index uint64) {
	if index == 0 {
		return
	}
	if sink, ok := ctx.Value(indexSink{}).(*uint64); ok {
		*sink = max(*sink, index)
		return
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs(wire.HeaderIndex, strconv.FormatUint(index, 10)))
}

// indexSink, as a context value (*uint64), collects the index of a call
// to the leader that no caller's answer carries directly (a batch of
// forwarded submits, which answers many callers).
type indexSink struct{}

// relayIndex is the interceptor of a follower's connections to the
// leader: it passes the index header of the leader's answer on to the
// follower's own caller.
func relayIndex(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var md metadata.MD
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Header(&md))...)
	if v := md.Get(wire.HeaderIndex); len(v) > 0 {
		if index, perr := strconv.ParseUint(v[len(v)-1], 10, 64); perr == nil {
			setIndexHeader(ctx, index)
		}
	}
	return err
}

// minIndex returns the index a caller asks a read to have applied (0: none
// named, or not a number).
func minIndex(ctx context.Context) uint64 {
	v := metadata.ValueFromIncomingContext(ctx, wire.HeaderMinIndex)
	if len(v) == 0 {
		return 0
	}
	index, err := strconv.ParseUint(v[0], 10, 64)
	if err != nil {
		return 0
	}
	return index
}

// ReadWait bounds how long a node holds a read until its state has
// applied the caller's last write.
const ReadWait = ForwardWait

// catchUp waits until this node's state has applied the caller's last
// write before a read from its own state: the index the caller names,
// else, with leaderIndex (a watch), the index the leader has applied. A
// leader (or a stale read without an index) serves at once. A leader of
// an earlier build, which does not know ReadIndex, leaves the read as
// such builds serve it.
func (b *base) catchUp(ctx context.Context, leaderIndex bool) error {
	index := minIndex(ctx)
	if index == 0 && leaderIndex && !b.node.IsLeader() {
		var err error
		if index, err = b.leaderReadIndex(ctx); err != nil {
			if status.Code(err) == codes.Unimplemented {
				b.log.Debug("the leader does not answer ReadIndex (an earlier build): reading this node's state as it is")
				return nil
			}
			return err
		}
	}
	if index == 0 {
		return nil
	}
	if _, applied := b.node.FSM.Clock(); applied < index {
		release, err := b.shares.holdRead(ctx, index)
		if err != nil {
			return err
		}
		defer release()
	}
	wctx, cancel := context.WithTimeout(ctx, ReadWait)
	defer cancel()
	if err := b.node.FSM.WaitApplied(wctx, index); err != nil {
		if ctx.Err() != nil {
			return status.FromContextError(ctx.Err()).Err()
		}
		_, applied := b.node.FSM.Clock()
		return status.Errorf(codes.Unavailable, "this node has applied the log up to index %d, not yet %d, after %s: try another node", applied, index, ReadWait)
	}
	return nil
}

// CatchUp waits until this node's state has applied every entry the
// leader had applied when asked (or the index ctx's caller names): what
// a read of this node's own state needs to show at least what a read
// served by the leader just showed. A leader returns at once.
func (s *ClientService) CatchUp(ctx context.Context) error { return s.catchUp(ctx, true) }

// leaderReadIndex asks the leader for the index its state has applied,
// with the caller's authorization (or this server's own token).
func (b *base) leaderReadIndex(ctx context.Context) (uint64, error) {
	out := metadata.MD{}
	auth := metadata.ValueFromIncomingContext(ctx, "authorization")
	if len(auth) == 0 && b.selfToken != "" {
		auth = []string{"Bearer " + b.selfToken}
	}
	for _, v := range auth {
		out.Append("authorization", v)
	}
	deadline := time.Now().Add(ForwardWait)
	for {
		cc, _, err := b.leader.leader(ctx, deadline)
		if err == errIsLeader {
			return 0, nil // it leads now: its own state is the leader's
		}
		if err != nil {
			return 0, err
		}
		resp, err := clusterpb.NewNodeClient(cc).ReadIndex(metadata.NewOutgoingContext(ctx, out), &clusterpb.ReadIndexRequest{})
		if !IsNotLeader(err) || time.Now().After(deadline) {
			return resp.GetIndex(), err
		}
		select {
		case <-ctx.Done():
			return 0, status.FromContextError(ctx.Err()).Err()
		case <-time.After(25 * time.Millisecond):
		}
	}
}
