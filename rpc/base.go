package rpc

import (
	"context"
	"strconv"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"barista/fsm"
	pb "barista/proto"
	"barista/raftnode"
)

// forwardedKey marks a request a follower forwarded to the leader, so
// that it is never forwarded twice.
const forwardedKey = "x-barista-forwarded"

// base is what every service shares: the node, connections to the leader,
// and a logger.
type base struct {
	node    *raftnode.Node
	leader  *leaderConns
	log     hclog.Logger
	metrics *metrics
	// stopping closes when the server begins to stop: long streams
	// (watches, worker sessions) end at once so their clients move to
	// another node instead of holding the shutdown.
	stopping chan struct{}
}

// forward sends a call to the leader, carrying the caller's bearer token.
// It returns handled=false when this node leads and must serve the call.
func forward[T any](ctx context.Context, b *base, call func(ctx context.Context, cc *grpc.ClientConn) (T, error)) (resp T, handled bool, err error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if len(md.Get(forwardedKey)) > 0 {
		if !b.node.IsLeader() {
			return resp, true, status.Error(codes.Unavailable, "forwarded to a node that is no longer the leader; retry")
		}
		return resp, false, nil
	}
	cc, _, err := b.leader.leader(ctx)
	if err == errIsLeader {
		return resp, false, nil
	}
	if err != nil {
		return resp, true, err
	}
	out := metadata.Pairs(forwardedKey, "1")
	for _, v := range md.Get("authorization") {
		out.Append("authorization", v)
	}
	resp, err = call(metadata.NewOutgoingContext(ctx, out), cc)
	return resp, true, err
}

// read serves a read: from local state if stale reads are asked for,
// else forwarded to the leader, which serves it after confirming its
// leadership (a linearizable read).
func read[T any](ctx context.Context, b *base, ro *pb.ReadOptions, remote func(ctx context.Context, cc *grpc.ClientConn) (T, error), local func() (T, error)) (T, error) {
	if ro.GetStale() {
		staleHeader(ctx, b.node.ID(), b.node.Health())
		return local()
	}
	resp, handled, err := forward(ctx, b, remote)
	if handled {
		return resp, err
	}
	if err := b.node.ConsistentRead(ctx); err != nil {
		return resp, proposeErr(err)
	}
	return local()
}

// Headers of a stale read: how far behind the leader this node may be.
const (
	HeaderAppliedIndex  = "x-barista-applied-index"
	HeaderBehindEntries = "x-barista-behind-entries"
	HeaderBehindMs      = "x-barista-behind-ms"
	HeaderNode          = "x-barista-node"
)

// staleHeader tells a stale reader how old the state it reads may be:
// the entries and milliseconds this node is behind the commit index the
// leader last announced to it (a follower cut off from its leader knows
// only what it was last told).
func staleHeader(ctx context.Context, node string, h raftnode.Health) {
	behind := h.Behind
	if h.LastContact > behind {
		behind = h.LastContact
	}
	grpc.SetHeader(ctx, metadata.Pairs(
		HeaderNode, node,
		HeaderAppliedIndex, strconv.FormatUint(h.Applied, 10),
		HeaderBehindEntries, strconv.FormatUint(h.BehindEntries, 10),
		HeaderBehindMs, strconv.FormatInt(behind.Milliseconds(), 10)))
}

// propose replicates commands (this node must lead) and maps errors.
func (b *base) propose(ctx context.Context, cmds ...*pb.Command) ([]fsm.Result, error) {
	_, res, err := b.node.Propose(ctx, cmds)
	if err != nil {
		return nil, proposeErr(err)
	}
	return res, nil
}

// grpcCode maps a state machine refusal to a gRPC code.
func grpcCode(c fsm.Code) codes.Code {
	switch c {
	case fsm.OK:
		return codes.OK
	case fsm.Invalid:
		return codes.InvalidArgument
	case fsm.NotFound:
		return codes.NotFound
	case fsm.AlreadyExists:
		return codes.AlreadyExists
	case fsm.FailedPrecondition:
		return codes.FailedPrecondition
	case fsm.ResourceExhausted:
		return codes.ResourceExhausted
	}
	return codes.Internal
}

// resultErr turns a refused result into a gRPC status error.
func resultErr(r fsm.Result) error {
	if r.Code == fsm.OK {
		return nil
	}
	return status.Error(grpcCode(r.Code), r.Msg)
}
