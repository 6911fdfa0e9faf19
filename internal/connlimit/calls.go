package connlimit

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// The calls on a connection. A call with a token the server knows marks
// its connection authenticated for good: it leaves the places of the
// connections without one, and counts for its identity when the caller
// bounds that (a client token's tenant; Config.PerIdentity). A
// connection that has made no such call is closed UnauthenticatedIdle
// after its last call began or ended, whatever calls it holds open (a
// health watch holds one for as long as its client likes); a call
// without a token lasts at most UnauthenticatedIdle, and at most
// UnauthenticatedCalls of them are in progress at once, a sixteenth of
// them from one network.

// Metric labels of barista_calls_refused_total.
const (
	boundUnauthenticatedCalls = "unauthenticated_calls"
	boundPerIdentity          = "connections_per_identity"
)

// Errors of Begin.
var (
	// ErrUnauthenticatedCalls: the calls without a token in progress are
	// at their bound (in all, or from the caller's network).
	ErrUnauthenticatedCalls = errors.New("calls without a token in progress are at their bound (limits.unauthenticated_calls)")
	// ErrIdentityConnections: the caller's identity holds its bound of
	// connections.
	ErrIdentityConnections = errors.New("this identity holds its bound of connections to this server (limits.connections_per_identity)")
)

// Caller says who a call is from: Authenticated when it carries a token
// the server knows, and Identity, when not empty, names the identity
// whose connections Config.PerIdentity bounds.
type Caller struct {
	Authenticated bool
	Identity      string
}

// Interceptors mark a gRPC call's connection active (Begin) and note its
// end (End); who says who a call is from. A call Begin refuses is
// answered RESOURCE_EXHAUSTED. The connection is found on the call's
// context, where the stats handler (StatsHandler) put it.
func (l *Limiter) Interceptors(who func(context.Context) Caller) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			ctx, err := l.Begin(ctx, who(ctx))
			if err != nil {
				return nil, status.Error(codes.ResourceExhausted, err.Error())
			}
			defer l.End(ctx)
			return h(ctx, req)
		}, func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			caller := who(ss.Context())
			ctx, err := l.Begin(ss.Context(), caller)
			if err != nil {
				return status.Error(codes.ResourceExhausted, err.Error())
			}
			defer l.End(ctx)
			if !caller.Authenticated && l.cfg.UnauthenticatedIdle > 0 {
				// A stream without a token (a health watch) ends after
				// the time a connection without one may stay.
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, l.cfg.UnauthenticatedIdle)
				defer cancel()
			}
			return h(srv, &ctxStream{ServerStream: ss, ctx: ctx})
		}
}

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }

// callKey marks a call's context with its connection (Begin, End).
type callKey struct{}

type callMark struct {
	c    *conn
	anon bool // counted among the calls without a token
}

// connOf finds the admitted connection of a call's or a request's
// context.
func (l *Limiter) connOf(ctx context.Context) *conn {
	if c, ok := ctx.Value(connCtxKey{}).(*conn); ok {
		return c
	}
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conns[connKey{addrPort(p.LocalAddr), addrPort(p.Addr)}]
}

// Begin notes a call beginning on its connection (ctx carries its peer).
// It returns the context End takes, or an error when a bound refuses the
// call: a call without a token past UnauthenticatedCalls, or the first
// call with a token of a connection whose identity holds PerIdentity
// connections already.
func (l *Limiter) Begin(ctx context.Context, caller Caller) (context.Context, error) {
	c := l.connOf(ctx)
	if c == nil {
		return ctx, nil
	}
	c.markActive()
	anon := !caller.Authenticated
	if anon && !l.takeAnonCall(c.net) {
		l.callsRefused.WithLabelValues(boundUnauthenticatedCalls).Inc()
		return ctx, ErrUnauthenticatedCalls
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if caller.Authenticated && !c.authed {
		if err := l.authenticate(c, caller.Identity); err != nil {
			return ctx, err
		}
	}
	c.calls++
	l.resetIdle(c)
	return context.WithValue(ctx, callKey{}, callMark{c: c, anon: anon}), nil
}

// End notes the end of a call Begin saw.
func (l *Limiter) End(ctx context.Context) {
	m, ok := ctx.Value(callKey{}).(callMark)
	if !ok {
		return
	}
	if m.anon {
		l.giveAnonCall(m.c.net)
	}
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	m.c.calls--
	l.resetIdle(m.c)
}

// Authenticated notes that a request on the connection of ctx (an HTTP
// request: ConnContext put it there) carries a credential the server
// knows, of identity (see Caller). It reports false when the identity
// holds its bound of connections already: the connection stays one
// without a token's call.
func (l *Limiter) Authenticated(ctx context.Context, identity string) bool {
	c, ok := ctx.Value(connCtxKey{}).(*conn)
	if !ok {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.authed {
		return true
	}
	if l.authenticate(c, identity) != nil {
		return false
	}
	if c.idle != nil {
		c.idle.Stop()
	}
	return true
}

// authenticate marks c as having made a call with a token, counted for
// identity (under c.mu).
func (l *Limiter) authenticate(c *conn, identity string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if identity != "" {
		if l.cfg.PerIdentity > 0 && l.byIdentity[identity] >= l.cfg.PerIdentity {
			l.callsRefused.WithLabelValues(boundPerIdentity).Inc()
			return ErrIdentityConnections
		}
		l.byIdentity[identity]++
		c.identity = identity
	}
	c.authed = true
	if c.counted {
		l.authedByNet[c.net]++
	}
	l.dropAnon(c)
	return nil
}

// resetIdle (re)starts the timer that closes a connection without a
// token's call, from now (under c.mu); it stops it for one with.
func (l *Limiter) resetIdle(c *conn) {
	switch {
	case c.authed:
		if c.idle != nil {
			c.idle.Stop()
		}
	case l.cfg.UnauthenticatedIdle <= 0:
	case c.idle == nil:
		c.idle = time.AfterFunc(l.cfg.UnauthenticatedIdle, c.idleClose)
	default:
		c.idle.Reset(l.cfg.UnauthenticatedIdle)
	}
}

// idleClose closes a connection without a token's call whose last call
// began or ended UnauthenticatedIdle ago, whatever calls it holds.
func (c *conn) idleClose() {
	c.mu.Lock()
	authed := c.authed
	c.mu.Unlock()
	if authed {
		return
	}
	c.Close()
	c.ln.l.idle.WithLabelValues(c.ln.name).Inc()
}

// perNetworkCalls is the bound of the calls without a token from one
// network.
func (l *Limiter) perNetworkCalls() int { return max(l.cfg.UnauthenticatedCalls/16, 4) }

// takeAnonCall counts a call without a token from network n in, or
// reports false past a bound.
func (l *Limiter) takeAnonCall(n netip.Prefix) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.cfg.UnauthenticatedCalls; b > 0 && (l.anonCalls >= b || l.anonCallsByNet[n] >= l.perNetworkCalls()) {
		return false
	}
	l.anonCalls++
	l.anonCallsByNet[n]++
	l.anonCallsOpen.Inc()
	return true
}

func (l *Limiter) giveAnonCall(n netip.Prefix) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.anonCalls--
	if l.anonCallsByNet[n]--; l.anonCallsByNet[n] <= 0 {
		delete(l.anonCallsByNet, n)
	}
	l.anonCallsOpen.Dec()
}
