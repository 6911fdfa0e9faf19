package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/internal/wire"
	pb "github.com/baristahq/barista/proto"
)

// MaxMessageBytes is the largest message a node sends or receives (4 MiB);
// a Client's connections accept as much.
const MaxMessageBytes = wire.MaxMessageBytes

// Options are a Client's settings; the zero value connects in plaintext
// without a token, with the defaults below.
type Options struct {
	// Token is the bearer token sent with every call ("" sends none).
	Token string
	// TLS, if set, secures every connection (TLSConfig loads one from
	// files); nil connects in plaintext.
	TLS *tls.Config
	// InsecureGRPC lets a Token go in plaintext (TLS nil) to nodes that
	// are not on this machine; without it New refuses them
	// (ErrTokenInClear), as a server refuses a plaintext non-loopback
	// --grpc-addr without --insecure-grpc.
	InsecureGRPC bool
	// CallTimeout bounds a unary call, its retries included, when the
	// context allows longer: 0 means 15 s, a negative value leaves the
	// context alone. Watch and Stream are bounded by their context only.
	CallTimeout time.Duration
	// ConnectTimeout bounds the wait for one node's connection to be
	// ready before the next node is tried: 0 means 2 s.
	ConnectTimeout time.Duration
	// Backoff is the pause between rounds of a retried unary call
	// through every node: 0 means 100 ms, doubling up to 2 s.
	Backoff Backoff
	// WatchBackoff is the pause before a watch reconnects once it has
	// tried every node (it moves to the next node at once): 0 means 300
	// ms, doubling up to 10 s, and back to the first once an event
	// arrives.
	WatchBackoff Backoff
	// OnWatchRetry, if set, is called before a watch reconnects, with
	// the error that broke it (nil: the node ended the stream), the
	// sequence number it resumes from (0: the next new event) and the
	// pause before it does (0 when it moves on to the next node at
	// once).
	OnWatchRetry func(err error, from uint64, wait time.Duration)
	// OnWatchOpen, if set, is called when a watch's stream opens, with
	// the sequence number it starts at and the one the next new event
	// will have (a watch from beyond it waits for events to come), from
	// a server that says both.
	OnWatchOpen func(from, next uint64)
	// DialOptions are added to every connection's options (interceptors,
	// for instance).
	DialOptions []grpc.DialOption
}

// Backoff is an exponential pause: First, doubled after each failure up
// to Max.
type Backoff struct {
	First, Max time.Duration
}

func (b Backoff) or(def Backoff) Backoff {
	if b.First <= 0 {
		b.First = def.First
	}
	if b.Max < b.First {
		b.Max = max(def.Max, b.First)
	}
	return b
}

// Defaults of Options.
const (
	DefaultCallTimeout    = 15 * time.Second
	DefaultConnectTimeout = 2 * time.Second
)

var (
	defaultBackoff      = Backoff{First: 100 * time.Millisecond, Max: 2 * time.Second}
	defaultWatchBackoff = Backoff{First: 300 * time.Millisecond, Max: 10 * time.Second}
)

// Client calls a barista cluster through any of its nodes. It is safe for
// concurrent use.
type Client struct {
	addrs []string
	opts  Options

	mu     sync.Mutex
	conns  []*grpc.ClientConn
	next   int // the node tried first: the last one that answered, or the one after the last that failed
	closed bool

	// lastIndex is the highest log index the answers to this client's
	// writes named (HeaderIndex); every call carries it (HeaderMinIndex),
	// so that a node that serves a read from its own state (a watch)
	// answers only once it holds those writes.
	lastIndex atomic.Uint64
}

// New returns a Client of the nodes at addrs (gRPC HOST:PORT of any
// nodes of one cluster; the first is tried first). It connects lazily:
// New fails only on an empty list or an address gRPC cannot parse.
func New(addrs []string, opts Options) (*Client, error) {
	c := &Client{opts: opts}
	c.opts.Backoff = opts.Backoff.or(defaultBackoff)
	c.opts.WatchBackoff = opts.WatchBackoff.or(defaultWatchBackoff)
	if c.opts.ConnectTimeout <= 0 {
		c.opts.ConnectTimeout = DefaultConnectTimeout
	}
	if c.opts.CallTimeout == 0 {
		c.opts.CallTimeout = DefaultCallTimeout
	}
	for _, a := range addrs {
		if a = strings.TrimSpace(a); a != "" {
			c.addrs = append(c.addrs, a)
		}
	}
	if len(c.addrs) == 0 {
		return nil, errors.New("client: no node address given")
	}
	if a := TokenInClear(c.addrs, opts.Token, opts.TLS); a != "" && !opts.InsecureGRPC {
		return nil, fmt.Errorf("client: %w: node %s is not on this machine and Options.TLS is not set (set it, or Options.InsecureGRPC to send the token anyway)", ErrTokenInClear, a)
	}
	dial := dialOptions(opts.Token, opts.TLS, opts.InsecureGRPC)
	dial = append(dial, grpc.WithChainUnaryInterceptor(trackCall, c.carryIndex), grpc.WithChainStreamInterceptor(c.carryIndexStream),
		grpc.WithConnectParams(connectParams))
	dial = append(dial, opts.DialOptions...)
	for _, a := range c.addrs {
		cc, err := grpc.NewClient(a, dial...)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("client: node address %q: %w", a, err)
		}
		c.conns = append(c.conns, cc)
	}
	return c, nil
}

// Flow-control windows of every barista connection, fixed (StaticWindows):
// gRPC's default estimates the link's bandwidth-delay product with a PING
// after each message received while none is outstanding, which on a
// worker's stream (a message or two a job) doubled the writes of both
// ends; a connection with fixed windows sends none. One stream moves at
// most StreamWindowBytes per round trip: 1 GB/s on a LAN, 20 MB/s at
// 50 ms.
const (
	StreamWindowBytes = wire.StreamWindowBytes
	ConnWindowBytes   = wire.ConnWindowBytes
)

// StaticWindows fixes a connection's flow-control windows (see
// StreamWindowBytes).
var StaticWindows = wire.StaticWindows

// DialOptions are the options of a connection to a node: the transport
// credentials (TLS if tlsCfg is set), the bearer token (if any),
// keepalive pings that notice a vanished node, the cluster's message
// size and the fixed flow-control windows (StaticWindows). A program
// that opens its own connections (a worker agent) uses them. Without
// TLS, a call to a node that is not on this machine fails
// (ErrTokenInClear) rather than send the token in clear; see
// InsecureDialOptions.
func DialOptions(token string, tlsCfg *tls.Config) []grpc.DialOption {
	return dialOptions(token, tlsCfg, false)
}

// InsecureDialOptions are DialOptions without TLS whose token goes in
// clear to any node (the switch --insecure-grpc of barista worker).
func InsecureDialOptions(token string) []grpc.DialOption { return dialOptions(token, nil, true) }

func dialOptions(token string, tlsCfg *tls.Config, clearOK bool) []grpc.DialOption {
	creds := insecure.NewCredentials()
	if tlsCfg != nil {
		creds = credentials.NewTLS(tlsCfg)
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		// A ping every 10 s on a silent connection, dropped after 5 s
		// without an answer (the nodes accept pings every 5 s or slower):
		// a call or stream to a node that vanished fails instead of
		// hanging.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
	}
	opts = append(opts, StaticWindows...)
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: token, clearOK: clearOK}))
	}
	return opts
}

// connectParams retry a refused connection quickly: a node that restarts
// is used again within a couple of seconds.
var connectParams = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
	MinConnectTimeout: 5 * time.Second,
}

// bearer sends "authorization: Bearer TOKEN" with every call; over a
// connection without TLS only to a node on this machine, unless clearOK.
type bearer struct {
	token   string
	clearOK bool
}

func (b bearer) GetRequestMetadata(ctx context.Context, uri ...string) (map[string]string, error) {
	if !b.clearOK && !secured(ctx) && len(uri) > 0 && !onThisMachine(authority(uri[0])) {
		return nil, fmt.Errorf("%w: node %s is not on this machine and the connection has no TLS", ErrTokenInClear, authority(uri[0]))
	}
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// RequireTransportSecurity is false: a token may go to a node on loopback
// in plaintext (GetRequestMetadata refuses any other without TLS).
func (bearer) RequireTransportSecurity() bool { return false }

// Addrs returns the node addresses the Client calls, in the order given.
func (c *Client) Addrs() []string { return append([]string(nil), c.addrs...) }

// Close closes the connections. Calls in progress fail; later calls
// return ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var first error
	for _, cc := range c.conns {
		if err := cc.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Call runs fn, a unary call on the connection it is given, through the
// nodes: see the package documentation for when it is sent again. fn may
// call any service of the node (Client, Admin, Node, Worker); a call of
// fn is repeated only if the request is one that is safe to repeat. The
// context, further bounded by Options.CallTimeout, bounds every attempt
// and the pauses between them. A failure is an *Error, unless fn
// returned an error without a gRPC status, which is returned as it is.
func (c *Client) Call(ctx context.Context, fn func(ctx context.Context, cc grpc.ClientConnInterface) error) error {
	if c.opts.CallTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.CallTimeout)
		defer cancel()
	}
	return c.run(ctx, true, fn)
}

// Stream runs fn, which opens and reads (or writes) a stream on the
// connection it is given, on the first node whose connection is ready;
// if fn fails with UNAVAILABLE or DEADLINE_EXCEEDED it is run again on
// the next node, once per node at most. fn must be safe to run again
// (start its work afresh). Only the context bounds it.
func (c *Client) Stream(ctx context.Context, fn func(ctx context.Context, cc grpc.ClientConnInterface) error) error {
	return c.run(ctx, false, fn)
}

// run is Call and Stream: a round through the nodes from the preferred
// one, and with rounds more rounds with backoff until ctx ends.
func (c *Client) run(ctx context.Context, rounds bool, fn func(ctx context.Context, cc grpc.ClientConnInterface) error) error {
	var last error
	pause := c.opts.Backoff.First
	for {
		c.mu.Lock()
		closed, start := c.closed, c.next
		c.mu.Unlock()
		if closed {
			return ErrClosed
		}
		for k := range c.conns {
			i := (start + k) % len(c.conns)
			cc := c.conns[i]
			if !c.waitReady(ctx, cc) {
				if ctx.Err() != nil {
					break
				}
				if why := diagnose(ctx, c.addrs[i], c.opts.TLS); why != "" {
					// No retry mends it: the caller must change its
					// settings.
					return wrap(status.Error(codes.Unavailable, why))
				}
				last = status.Errorf(codes.Unavailable, "cannot connect to %s", c.addrs[i])
				c.skip(i)
				continue
			}
			info := &callInfo{}
			err := fn(context.WithValue(ctx, callInfoKey{}, info), cc)
			if err == nil || !retryable(err) {
				// The node answered: ask it first next time.
				c.prefer(i)
				return wrap(err)
			}
			last = err
			c.skip(i)
			if info.sent && !info.idempotent && !IsNotLeader(err) {
				// It may have been served: repeating it could do it twice.
				return wrap(err)
			}
		}
		if !rounds || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		if ctx.Err() != nil {
			break
		}
		pause = min(2*pause, c.opts.Backoff.Max)
	}
	if last == nil {
		last = status.FromContextError(ctx.Err()).Err()
	}
	return wrap(last)
}

// prefer makes node i the first one tried: it answered.
func (c *Client) prefer(i int) {
	c.mu.Lock()
	c.next = i
	c.mu.Unlock()
}

// skip makes the node after i the first one tried if i was: i failed.
func (c *Client) skip(i int) {
	c.mu.Lock()
	if c.next == i {
		c.next = (i + 1) % len(c.conns)
	}
	c.mu.Unlock()
}

// retryable reports whether another attempt may succeed where one failed:
// the node or the connection failed, or the attempt ran out of time.
func retryable(err error) bool {
	st, ok := status.FromError(err)
	return ok && (st.Code() == codes.Unavailable || st.Code() == codes.DeadlineExceeded)
}

// waitReady connects cc and waits up to ConnectTimeout for it to be
// ready; a connection that is refused (or still failing) returns false at
// once, after asking it to try again now.
func (c *Client) waitReady(ctx context.Context, cc *grpc.ClientConn) bool {
	ctx, cancel := context.WithTimeout(ctx, c.opts.ConnectTimeout)
	defer cancel()
	cc.Connect()
	for {
		switch st := cc.GetState(); st {
		case connectivity.Ready:
			return true
		case connectivity.TransientFailure:
			cc.ResetConnectBackoff()
			return false
		case connectivity.Shutdown:
			return false
		default:
			if !cc.WaitForStateChange(ctx, st) {
				return false
			}
		}
	}
}

// callInfo records what one attempt did (set by trackCall): whether a
// request went out, and whether it may be repeated.
type callInfo struct{ sent, idempotent bool }

type callInfoKey struct{}

// trackCall notes each unary request before it goes out.
// LastIndex returns the highest log index the answers to this client's
// writes named (0 before the first).
func (c *Client) LastIndex() uint64 { return c.lastIndex.Load() }

// withMinIndex adds HeaderMinIndex to an outgoing call once the client
// has written.
func (c *Client) withMinIndex(ctx context.Context) context.Context {
	if i := c.lastIndex.Load(); i > 0 {
		return metadata.AppendToOutgoingContext(ctx, HeaderMinIndex, strconv.FormatUint(i, 10))
	}
	return ctx
}

// carryIndex sends the client's last write index with a call and keeps
// the index its answer names.
func (c *Client) carryIndex(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var md metadata.MD
	err := invoker(c.withMinIndex(ctx), method, req, reply, cc, append(opts, grpc.Header(&md))...)
	for _, v := range md.Get(HeaderIndex) {
		if i, perr := strconv.ParseUint(v, 10, 64); perr == nil {
			for {
				old := c.lastIndex.Load()
				if i <= old || c.lastIndex.CompareAndSwap(old, i) {
					break
				}
			}
		}
	}
	return err
}

// carryIndexStream sends the client's last write index with a stream (a
// watch).
func (c *Client) carryIndexStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return streamer(c.withMinIndex(ctx), desc, cc, method, opts...)
}

func trackCall(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if info, ok := ctx.Value(callInfoKey{}).(*callInfo); ok {
		info.sent = true
		info.idempotent = idempotent(method, req)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// idempotent reports whether sending a request twice has the effect of
// sending it once: reads, submits with an idempotency key (every job of a
// batch keyed), upserts of tenants, pools, subscriptions and
// configuration, drains, joins. A
// submit without a key, a cancel or a delete is not (the second answer
// differs, or a second job is made), nor a webhook set (the answer that
// shows a new secret comes once) or replay. A group's cap is set to a
// value: SetGroup may be repeated. A Redrive, CancelJobs or PurgeJobs
// with a request key is (a retry returns the first call's continuation),
// and so is a dry run. A schedule is set to a definition, and a run-now
// with a key fires once.
func idempotent(method string, req any) bool {
	name := method[strings.LastIndexByte(method, '/')+1:]
	switch r := req.(type) {
	case *pb.BulkJobsRequest:
		return r.GetRequestKey() != "" || r.GetDryRun()
	case *pb.SubmitRequest:
		return r.GetIdempotencyKey() != ""
	case *pb.RunScheduleNowRequest:
		return r.GetKey() != ""
	case *pb.SubmitBatchRequest:
		for _, j := range r.Jobs {
			if j.GetIdempotencyKey() == "" {
				return false
			}
		}
		return len(r.Jobs) > 0
	}
	for _, p := range []string{"Get", "List", "Status", "TenantUsage", "Top", "ExplainJob", "UpsertTenant", "SetGroup", "Pause", "SetConfig", "Drain", "Join", "WebhookGet", "WebhookStatus",
		"PoolSet", "PoolGet", "PoolList", "SubscriptionSet", "SubscriptionDelete", "SubscriptionList", "SetSchedule",
		"ResourceSet", "ResourceGet", "ResourceList"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
