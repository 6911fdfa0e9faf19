package rpc

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/internal/connlimit"
	"github.com/baristahq/barista/internal/inflight"
)

// Request bytes in flight. gRPC reads a request as its bytes arrive, and
// lets a caller send a whole message (up to limits.max_message_bytes)
// before its handler sees any of it: a caller that stalls the last byte
// of many requests would hold their bytes for as long as it likes. So a
// unary call reserves, before its request is read, the largest request it
// may be from its caller's budget of request bytes in flight and from the
// node's, and gives it back once the request is read; a call over a
// budget waits for bytes to come back while the requests ahead of it are
// being read (a burst of small requests), and is refused unread once
// they stall (its caller's budget: RESOURCE_EXHAUSTED, to retry once its
// other requests are in; the node's: UNAVAILABLE, another node may take
// it). A request not read within limits.request_read_timeout closes its
// connection. Calls without a token (health checks) share one
// budget of their own, smaller. Streams are bounded by the streams of a
// connection (limits.streams_per_connection) and the connections of an
// address (docs/security.md, "Limits").

// unauthenticatedRequestBytes is the budget of the calls without a
// token, together.
const unauthenticatedRequestBytes = 16 << 20

// A call over a budget waits for request bytes to be given back while
// some are at least every reserveProgress (the requests ahead of it are
// being read, not stalled), for at most reserveWait, before it is
// refused.
const (
	reserveProgress = 100 * time.Millisecond
	reserveWait     = 2 * time.Second
)

// requestBudget reserves a unary call's request bytes.
type requestBudget struct {
	callers, anonymous *inflight.Budget
	size               int64 // what one request reserves
	readTimeout        time.Duration
	conns              *connlimit.Limiter // nil: no connection to close
	// shares bounds each caller's calls in progress (nil: none).
	shares *edgeShares
}

// reserve reserves a request's bytes for the caller of ctx.
func (b *requestBudget) reserve(ctx context.Context) (func(), error) {
	key, ok := callerKey(ctx)
	budget := b.callers
	if !ok {
		budget, key = b.anonymous, ""
	}
	release, which := budget.ReserveWait(ctx, key, b.size, reserveProgress, reserveWait)
	switch which {
	case inflight.PerIdentity:
		held, _ := budget.Held(key)
		return nil, status.Errorf(codes.ResourceExhausted, "this caller's requests being read hold %d bytes of its %d (limits.request_bytes_per_identity; each reserves limits.max_message_bytes until it is in); retry once they are in",
			held, budget.PerIdentity())
	case inflight.Total:
		return nil, status.Error(codes.Unavailable, "this node holds its bound of request bytes in flight (limits.request_bytes); retry, or ask another node")
	}
	return release, nil
}

// watchRead closes the connection of ctx's call if its request has not
// been read within the read timeout: stop ends the watch once it is.
func (b *requestBudget) watchRead(ctx context.Context) (stop func()) {
	if b.conns == nil || b.readTimeout <= 0 {
		return func() {}
	}
	p, ok := peer.FromContext(ctx)
	if !ok {
		return func() {}
	}
	t := time.AfterFunc(b.readTimeout, func() {
		if c, ok := b.conns.Lookup(p.LocalAddr, p.Addr); ok {
			c.Close()
		}
	})
	return func() { t.Stop() }
}

// budgeted returns desc with each unary method reserving its request's
// bytes (requestBudget) before the request is read.
func budgeted(desc *grpc.ServiceDesc, b *requestBudget) *grpc.ServiceDesc {
	d := *desc
	d.Methods = make([]grpc.MethodDesc, len(desc.Methods))
	for i, m := range desc.Methods {
		h := m.Handler
		d.Methods[i] = grpc.MethodDesc{MethodName: m.MethodName, Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			done, err := b.shares.takeCall(ctx)
			if err != nil {
				return nil, err
			}
			defer done()
			release, err := b.reserve(ctx)
			if err != nil {
				return nil, err
			}
			defer release()
			stop := b.watchRead(ctx)
			read := func(m any) error {
				err := dec(m)
				stop()
				release() // read: its bytes are the handler's now
				return err
			}
			return h(srv, ctx, read, ic)
		}}
	}
	return &d
}
