package rpc

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/protoadapt"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/ratelimit"
	"github.com/baristahq/barista/internal/text"
	"github.com/baristahq/barista/internal/wire"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/sfq"
	"github.com/baristahq/barista/webhook"
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
	// selfToken is an admin token of this server's configuration, for its
	// own calls to the leader ("" in open mode).
	selfToken string
	// webhooks is the webhook deliverer (nil: none), for its key and the
	// leader's delivery status.
	webhooks *webhook.Deliverer
	// stopping closes when the server begins to stop: long streams
	// (watches, worker sessions) end at once so their clients move to
	// another node instead of holding the shutdown.
	stopping chan struct{}
	// poolWorkers counts the connected workers of a pool (NewServer sets
	// it; 0 on a node without worker sessions).
	poolWorkers func(pool string) int
	// writes holds each identity's write calls to the write rate (on the
	// leader), writeRate.
	writes    *ratelimit.Limiter
	writeRate sfq.RateLimit
	// shares bounds each identity's calls in progress and held reads
	// (edgeshare.go; nil: no bound).
	shares *edgeShares
}

// write is the path of a write call: every node checks what of the
// command needs no state (edgeCheck) before anything is forwarded, a
// follower forwards the call (done, with the leader's answer), and the
// leader checks the command on its state as Apply would (admit: a
// refusal costs no entry, and a command that would change nothing is
// answered without one) and proposes it, a refusal becoming its status
// (done, with the error). Otherwise it returns the command's result, for
// the caller to answer from.
func write[T any](ctx context.Context, b *base, cmd *clusterpb.Command, call func(ctx context.Context, cc *grpc.ClientConn) (T, error)) (
	res fsm.Result, resp T, done bool, err error) {
	if err := b.edgeCheck(cmd); err != nil {
		return res, resp, true, err
	}
	if resp, handled, err := forward(ctx, b, call); handled {
		return res, resp, true, err
	}
	res, err = b.commit(ctx, cmd)
	return res, resp, err != nil, err
}

// edgeCheck is what every node checks of a command before it forwards
// it: the cluster's feature level (a node of a build that does not know
// a field would drop it) and the rules of its Apply that read only the
// command (fsm.CheckFields), with Apply's messages.
func (b *base) edgeCheck(cmd *clusterpb.Command) error {
	if err := levelErr(b.node.FSM, cmd); err != nil {
		return err
	}
	if r := fsm.CheckFields(cmd, b.node.FSM.Config(), b.node.FSM.Level()); r != nil {
		return refusalErr(r)
	}
	return nil
}

// commit is the leader's half of a write: the caller's write rate, the
// command as the cluster's level applies it (fsm.FSM.Resolve), its whole
// check on this node's state (fsm.FSM.Admit, the check Apply makes
// first), then its proposal. A command the check refuses is not
// proposed; one it finds would change nothing (Outcome sfq.Duplicate) is
// answered from the state, with the index of the state it read.
func (b *base) commit(ctx context.Context, cmd *clusterpb.Command) (fsm.Result, error) {
	if b.writes != nil {
		key := IdentityFrom(ctx).Key()
		if n, wait := b.writes.Take(key, b.writeRate, 1); n == 0 {
			b.unproposed(cmd, "rate")
			return fsm.Result{}, writeRateError(b.writeRate, wait)
		}
	}
	cmd = b.node.FSM.Resolve(cmd)
	if v := b.node.FSM.Admit(cmd); v.Refused() {
		b.unproposed(cmd, "refused")
		return v, resultErr(v)
	} else if v.Outcome == sfq.Duplicate {
		_, index := b.node.FSM.Clock()
		setIndexHeader(ctx, index)
		b.unproposed(cmd, "unchanged")
		return v, nil
	}
	out, err := b.propose(ctx, cmd)
	if err != nil {
		return fsm.Result{}, err
	}
	chargeBulk(b, ctx, out[0])
	if err := resultErr(out[0]); err != nil {
		return out[0], err
	}
	return out[0], nil
}

// unproposed counts a write answered without an entry.
func (b *base) unproposed(cmd *clusterpb.Command, reason string) {
	if b.metrics != nil {
		b.metrics.writesUnproposed.WithLabelValues(fsm.CommandName(cmd), reason).Inc()
	}
}

// forward sends a call to the leader, carrying the caller's bearer token.
// It returns handled=false when this node leads and must serve the call.
//
// A call is sent only over a connection that is ready, so a leader that
// died (connection refused) or a node that no longer leads (it refuses a
// forwarded call before doing anything: errNotLeader) means the call was
// never served: the follower keeps holding it until a new leader is known
// and reachable, up to ForwardWait, then forwards it there. A call that
// failed after it was sent is answered as it failed: it may have been
// served, and only the caller knows whether it is safe to repeat.
func forward[T any](ctx context.Context, b *base, call func(ctx context.Context, cc *grpc.ClientConn) (T, error)) (resp T, handled bool, err error) {
	if len(metadata.ValueFromIncomingContext(ctx, forwardedKey)) > 0 {
		if !b.node.IsLeader() {
			return resp, true, errNotLeader
		}
		return resp, false, nil
	}
	if b.node.IsLeader() {
		return resp, false, nil
	}
	out := metadata.Pairs(forwardedKey, "1")
	for _, v := range metadata.ValueFromIncomingContext(ctx, "authorization") {
		out.Append("authorization", v)
	}
	deadline := time.Now().Add(ForwardWait)
	for {
		cc, _, err := b.leader.leader(ctx, deadline)
		if err == errIsLeader {
			return resp, false, nil
		}
		if err != nil {
			return resp, true, err
		}
		resp, err = call(metadata.NewOutgoingContext(ctx, out), cc)
		if !IsNotLeader(err) || time.Now().After(deadline) {
			return resp, true, err
		}
		b.log.Debug("the forwarded-to node no longer leads; waiting for the next leader")
		select {
		case <-ctx.Done():
			return resp, true, status.FromContextError(ctx.Err()).Err()
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// errNotLeader answers a forwarded call on a node that no longer leads.
// It did nothing, so the forwarding follower sends the call again to the
// next leader; the ErrorInfo reason tells it so.
var errNotLeader = notLeader("forwarded to a node that is no longer the leader; retry")

// notLeader is an UNAVAILABLE status that says the node does not lead and
// did nothing with the call (wire.IsNotLeader reads it): any caller may
// send it again.
func notLeader(msg string) error {
	st, _ := status.New(codes.Unavailable, msg).
		WithDetails(&errdetails.ErrorInfo{Reason: wire.ReasonNotLeader, Domain: wire.ErrorDomain})
	return st.Err()
}

// IsNotLeader reports whether a call was refused by a node that no longer
// leads, before it did anything: another node may be asked.
func IsNotLeader(err error) bool { return wire.IsNotLeader(err) }

// read serves a read: from local state if stale reads are asked for,
// else forwarded to the leader, which serves it after confirming its
// leadership (a linearizable read).
func read[T any](ctx context.Context, b *base, ro *pb.ReadOptions, remote func(ctx context.Context, cc *grpc.ClientConn) (T, error), local func() (T, error)) (T, error) {
	if ro.GetStale() {
		// Stale, but not older than the caller's own last write, if it
		// names it.
		if err := b.catchUp(ctx, false); err != nil {
			var zero T
			return zero, err
		}
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
func (b *base) propose(ctx context.Context, cmds ...*clusterpb.Command) ([]fsm.Result, error) {
	index, res, err := b.node.Propose(ctx, cmds)
	if err != nil {
		return nil, proposeErr(err)
	}
	setIndexHeader(ctx, index)
	return res, nil
}

// grpcCodes maps a state machine refusal's code to a gRPC code.
var grpcCodes = [...]codes.Code{
	fsm.OK: codes.OK, fsm.Invalid: codes.InvalidArgument, fsm.NotFound: codes.NotFound,
	fsm.AlreadyExists: codes.AlreadyExists, fsm.FailedPrecondition: codes.FailedPrecondition,
	fsm.ResourceExhausted: codes.ResourceExhausted, fsm.Internal: codes.Internal, fsm.PermissionDenied: codes.PermissionDenied,
}

// grpcCode maps a state machine refusal to a gRPC code.
func grpcCode(c fsm.Code) codes.Code {
	if int(c) < len(grpcCodes) {
		return grpcCodes[c]
	}
	return codes.Internal
}

// refusalErr is the one rendering of a refusal as a gRPC status: its
// code, its message as it is, and, when it names them, its reason as a
// google.rpc.ErrorInfo (domain barista, the field in its metadata) that
// clients branch on (client.ErrQuotaExceeded and its siblings), or its
// field alone as a google.rpc.BadRequest.
func refusalErr(r *fsm.Refusal) error {
	st := status.New(grpcCode(r.Code), r.Msg)
	var detail protoadapt.MessageV1
	switch {
	case r.Reason != "":
		info := &errdetails.ErrorInfo{Reason: r.Reason, Domain: wire.ErrorDomain}
		if r.Field != "" {
			info.Metadata = map[string]string{wire.FieldKey: r.Field}
		}
		detail = info
	case r.Field != "":
		detail = &errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: r.Field, Description: r.Msg}}}
	default:
		return st.Err()
	}
	if d, err := st.WithDetails(detail); err == nil {
		st = d
	}
	return st.Err()
}

// fieldErr is a refusal of the edge's own that names the request field
// at fault: code, the message "field: ..." and, as data, a
// google.rpc.BadRequest naming the field (what refusalErr sends for a
// refusal of the state machine with a field and no reason).
func fieldErr(c codes.Code, field, format string, args ...any) error {
	msg := text.Message(field, format, args...)
	st := status.New(c, msg)
	if d, err := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: msg}}}); err == nil {
		st = d
	}
	return st.Err()
}

// tenantNotFound is the refusal of a read or a call on a tenant that does
// not exist (or is not the caller's to see), with its reason
// (TENANT_UNKNOWN) and field, as the state machine's own refusal of an
// unknown tenant has.
func tenantNotFound(name string) error {
	return refusalErr(sfq.Refusef(sfq.CodeNotFound, text.ReasonTenantUnknown, "tenant", "%q not found", name))
}

// resultErr turns a refused result into a gRPC status error (refusalErr).
func resultErr(r fsm.Result) error {
	if r.Code == fsm.OK {
		return nil
	}
	return refusalErr(r.Refusal())
}

// clockNow pairs this node's cluster time with its wall clock, for the
// answers that carry cluster times (ClockNow): on the leader its running
// clock; on a follower the clock of its last applied entry, moved on by
// the wall time since the leader stamped it (cluster time runs with wall
// time while a leader runs).
func (b *base) clockNow() *pb.ClockNow {
	wall := time.Now().UnixMilli()
	if t, ok := b.node.ClusterNow(); ok {
		return &pb.ClockNow{ClusterMs: int64(t), WallMs: wall}
	}
	lastWall, cluster := b.node.FSM.WallClock()
	if d := wall - int64(lastWall); lastWall > 0 && d > 0 {
		cluster += sfq.Time(d)
	}
	return &pb.ClockNow{ClusterMs: int64(cluster), WallMs: wall}
}
