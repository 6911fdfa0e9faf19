package rpc

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/auth"
	"github.com/baristahq/barista/internal/share"
)

// What a node's gRPC server shares among its callers is shared per
// identity (docs/security.md, "Shared at the edge"): request bytes being
// read (requests.go), calls in progress and reads held until this node
// has applied the caller's last write (here), watch streams
// (internal/watchlimit), write calls on the leader (the write rate), and the
// connections (internal/connlimit). A caller at its own bound is refused
// at once; it never makes another caller wait or fail.

// memberHeader names the member whose own call this is (its value, a
// member's ID), on a call made with an admin token: a follower's batch
// of forwarded submits. Such a call is charged to that member, not to
// any of the callers whose submits it carries (each of which the
// leader authorizes again on its own).
const memberHeader = "x-barista-member"

// callerKey is the key a call is charged to in the per-identity bounds:
// its caller's identity, or a member's own for a member's call (an
// admin's call naming its member); ok is false for a call without a
// token.
func callerKey(ctx context.Context) (key string, ok bool) {
	id, ok := ctx.Value(identityKey{}).(auth.Identity)
	if !ok {
		return "", false
	}
	if id.Role == auth.RoleAdmin {
		if v := metadata.ValueFromIncomingContext(ctx, memberHeader); len(v) > 0 {
			return "member:" + v[0], true
		}
	}
	return id.Key(), true
}

// bulkJobsPerWrite is how many jobs a bulk command (a cancel, redrive or
// purge of up to 10,000 jobs) may look at for the price of one write
// call: the rest of what it looked at is charged to its caller's write
// rate once it is applied, so that a storm of bulk commands writes no
// more events a second than its caller's write rate allows 100-fold.
const bulkJobsPerWrite = 100

// chargeBulk charges the jobs a bulk command looked at to its caller's
// write rate (bulkJobsPerWrite a write; the call itself paid one).
func chargeBulk(b *base, ctx context.Context, r fsm.Result) {
	if r.Bulk == nil || b.writes == nil {
		return
	}
	n := int((r.Bulk.Done + r.Bulk.Skipped) / bulkJobsPerWrite)
	b.writes.Charge(IdentityFrom(ctx).Key(), b.writeRate, n-1)
}

// Defaults of the per-identity bounds of calls in progress and held
// reads.
const (
	// DefaultCallsPerIdentity: unary calls of one caller in progress on
	// a node (above the 256 concurrent callers barista bench drives
	// through one token).
	DefaultCallsPerIdentity = 1024
	// DefaultHeldReadsPerIdentity and DefaultHeldReads: reads waiting
	// for this node to apply the caller's last write (at most
	// ReadWait each).
	DefaultHeldReadsPerIdentity = 64
	DefaultHeldReads            = 4096
)

// edgeShares are the per-identity bounds of calls in progress and held
// reads.
type edgeShares struct {
	calls, heldReads *share.Limiter
}

// takeCall takes a place among the caller's calls in progress; a call
// without a token has none to take (connlimit bounds those).
func (e *edgeShares) takeCall(ctx context.Context) (func(), error) {
	key, ok := callerKey(ctx)
	if e == nil || e.calls == nil || !ok {
		return func() {}, nil
	}
	release, which := e.calls.Take(key)
	if which != share.None {
		return nil, status.Errorf(codes.ResourceExhausted, "this caller has %d calls in progress on this node, the most it may (limits.calls_per_identity); retry once some have ended",
			e.calls.PerIdentity())
	}
	return release, nil
}

// holdRead takes a place among the caller's reads held until this node
// has applied its last write: over the caller's bound RESOURCE_EXHAUSTED,
// over the node's UNAVAILABLE (another node, or the leader, may serve
// it), at once.
func (e *edgeShares) holdRead(ctx context.Context, index uint64) (func(), error) {
	if e == nil || e.heldReads == nil {
		return func() {}, nil
	}
	key, _ := callerKey(ctx)
	release, which := e.heldReads.Take(key)
	switch which {
	case share.PerIdentity:
		return nil, status.Errorf(codes.ResourceExhausted,
			"this caller has %d reads waiting for this node to apply its last write, the most it may (limits.held_reads_per_identity); this one waited for index %d: retry, or read from the leader",
			e.heldReads.PerIdentity(), index)
	case share.Total:
		return nil, status.Errorf(codes.Unavailable,
			"this node holds %d reads waiting for it to apply their callers' last writes (limits.held_reads); this one waited for index %d: try another node",
			e.heldReads.Total(), index)
	}
	return release, nil
}
