package rpc

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/auth"
	"github.com/baristahq/barista/internal/connlimit"
	"github.com/baristahq/barista/internal/evidencecall"
	"github.com/baristahq/barista/internal/inflight"
	"github.com/baristahq/barista/internal/ratelimit"
	"github.com/baristahq/barista/internal/share"
	"github.com/baristahq/barista/internal/statemetrics"
	"github.com/baristahq/barista/internal/watchlimit"
	"github.com/baristahq/barista/internal/wire"
	"github.com/baristahq/barista/leader"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/schedule"
	"github.com/baristahq/barista/webhook"
)

// Options configure a node's gRPC server.
type Options struct {
	Logger hclog.Logger
	// Auth checks tokens and roles (required).
	Auth *Auth
	// TLS, when set, serves gRPC over TLS.
	TLS *tls.Config
	// PeerTLS, when set, is used to dial other members (forwarding).
	PeerTLS *tls.Config
	// Reflection serves the gRPC server reflection service (grpcurl and
	// other tools read the API's schema from it).
	Reflection bool
	// UnsafeDebug lets Apply propose envelopes of another version (tests of
	// the fatal-entry path). Never enable it in production.
	UnsafeDebug bool
	// ForwardSingly plays a build before batched forwarding: as a
	// follower it forwards each call of submits as it came, and as the
	// leader it answers ForwardSubmits and ForwardCommands UNIMPLEMENTED
	// (compatibility tests only).
	ForwardSingly bool
	// MetricsMaxTenants bounds the tenants with their own series on
	// /metrics: all of them while there are at most this many, beyond
	// that only those an admin marked export_metrics. 0 is read as
	// DefaultMetricsMaxTenants; MetricsOnlyMarked (any negative value)
	// exports only the marked.
	MetricsMaxTenants int
	// Webhooks is the node's webhook deliverer (nil: webhook calls that
	// need the key are refused).
	Webhooks *webhook.Deliverer
	// Limits bound what callers can make the gRPC server hold (zero
	// fields: the defaults).
	Limits Limits
	// Conns, if set, bounds the connections of the listener Serve is
	// given (connlimit.Limiter.Listen): a call marks its connection
	// active.
	Conns *connlimit.Limiter
}

// Server is a node's gRPC server with every service registered.
type Server struct {
	GRPC     *grpc.Server
	Health   *health.Server
	leader   *leaderConns
	base     base
	stopOnce sync.Once
	watching sync.WaitGroup
	auth     *Auth
	// The services, which the web console calls in this process (they
	// forward to the leader as they do for a gRPC caller).
	client  *ClientService
	admin   *AdminService
	workers *WorkerService
	// limits are the server's limits; conns bounds its connections (nil:
	// none).
	limits Limits
	conns  *connlimit.Limiter
	// gatewayKey marks the gateway's calls to this node (gatewayHeader);
	// gatewayConns are its connections (GatewayConn), which Stop closes.
	gatewayKey   string
	gatewayConns struct {
		sync.Mutex
		list []*grpc.ClientConn
	}
}

func metricsMaxTenants(n int) int {
	switch {
	case n == 0:
		return DefaultMetricsMaxTenants
	case n < 0:
		return 0
	}
	return n
}

// streamWorkers is how many goroutines serve streams (grpc.NumStreamWorkers).
const streamWorkers = 256

// NewServer builds the gRPC server of a node.
func NewServer(node *raftnode.Node, opt Options) *Server {
	if opt.Logger == nil {
		opt.Logger = hclog.NewNullLogger()
	}
	limits := opt.Limits.withDefaults()
	var peerCreds credentials.TransportCredentials
	if opt.PeerTLS != nil {
		peerCreds = credentials.NewTLS(opt.PeerTLS)
	}
	b := base{node: node, leader: newLeaderConns(node, peerCreds), log: opt.Logger, metrics: newMetrics(node.Metrics.Registry, node, metricsMaxTenants(opt.MetricsMaxTenants)),
		stopping: make(chan struct{}), selfToken: opt.Auth.AdminToken(), webhooks: opt.Webhooks,
		writes: ratelimit.New(time.Now, nil), writeRate: limits.WriteRate,
		shares: &edgeShares{
			calls: share.New("grpc_calls_in_progress", "Unary gRPC calls in progress (at most limits.calls_per_identity of one caller).",
				limits.CallsPerIdentity, 0, node.Metrics.Registry),
			heldReads: share.New("held_reads", "Reads this node holds until it has applied their caller's last write (at most limits.held_reads_per_identity of one caller, limits.held_reads in all).",
				limits.HeldReadsPerIdentity, limits.HeldReads, node.Metrics.Registry)}}
	// The connected workers of a pool, as the leader's worker sessions
	// count them: PoolDelete refuses a pool that has any, and PoolGet,
	// PoolList and top show them.
	var workers *WorkerService
	b.poolWorkers = func(pool string) int {
		if workers == nil {
			return 0
		}
		return workers.connectedNow(pool)
	}
	node.Metrics.Registry.MustRegister(statemetrics.NewPoolWorkers(node, func(pool string) int { return b.poolWorkers(pool) }))
	sopts := []grpc.ServerOption{
		// Explicit, and the same on every connection a node makes (see
		// leaderConns.dial): max_payload_bytes is bounded by it. What it
		// receives may be bounded lower (limits.max_message_bytes).
		grpc.MaxRecvMsgSize(limits.MaxMessageBytes),
		grpc.MaxSendMsgSize(fsm.MaxMessageBytes),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, MaxConnectionIdle: limits.ConnectionIdle}),
		// A call's token and role are checked before its stream is made,
		// before any byte of its request is read.
		grpc.InTapHandle(opt.Auth.TapHandle),
		grpc.MaxConcurrentStreams(uint32(limits.StreamsPerConnection)),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		// Streams run on long-lived goroutines whose stacks have grown
		// already, not on a new goroutine each whose stack grows again:
		// that growth was a tenth of a leader's CPU under single submits
		// and a sixth under reads. Past streamWorkers concurrent streams
		// (a worker's Connect holds one for its life), a stream gets a
		// goroutine of its own as before.
		grpc.NumStreamWorkers(streamWorkers),
		grpc.StaticStreamWindowSize(wire.StreamWindowBytes),
		grpc.StaticConnWindowSize(wire.ConnWindowBytes),
	}
	gatewayKey := rand.Text()
	unary, stream := []grpc.UnaryServerInterceptor{opt.Auth.UnaryInterceptor}, []grpc.StreamServerInterceptor{opt.Auth.StreamInterceptor}
	if opt.Conns != nil {
		cu, cs := opt.Conns.Interceptors(func(ctx context.Context) connlimit.Caller { return connCaller(ctx, gatewayKey) })
		unary = append([]grpc.UnaryServerInterceptor{cu}, unary...)
		stream = append([]grpc.StreamServerInterceptor{cs}, stream...)
		sopts = append(sopts, grpc.StatsHandler(opt.Conns.StatsHandler()))
	}
	sopts = append(sopts, grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(stream...))
	if opt.TLS != nil {
		sopts = append(sopts, grpc.Creds(credentials.NewTLS(opt.TLS)))
	}
	s := &Server{GRPC: grpc.NewServer(sopts...), Health: health.NewServer(), leader: b.leader, base: b, auth: opt.Auth, limits: limits, conns: opt.Conns}
	s.gatewayKey = gatewayKey
	workers = newWorkerService(b)
	workers.bindings = newBindingRecords(limits.WorkerRecordsPerBinding, limits.WorkerRecordsUnbound, node.FSM)
	watches := watchlimit.New(watchlimit.Config{Streams: limits.WatchStreams, PerIdentity: limits.WatchStreamsPerIdentity, Stall: limits.WatchStall,
		Conns: opt.Conns, Gateway: func(ctx context.Context) bool { return fromGateway(ctx, gatewayKey) }}, node.Metrics.Registry)
	s.client, s.admin, s.workers = &ClientService{base: b, workers: workers, submits: ratelimit.New(time.Now, b.metrics.submitsLimited),
		forwarder: newSubmitForwarder(&b), forwardSingly: opt.ForwardSingly, watches: watches,
		evidence: evidencecall.Limit{Refused: b.metrics.evidenceRefused}}, &AdminService{base: b, workers: workers}, workers
	budget := &requestBudget{
		callers:   inflight.New("grpc_request", limits.RequestBytesPerIdentity, limits.RequestBytes, node.Metrics.Registry),
		anonymous: inflight.New("grpc_unauthenticated_request", unauthenticatedRequestBytes, unauthenticatedRequestBytes, node.Metrics.Registry),
		size:      int64(limits.MaxMessageBytes), readTimeout: limits.RequestReadTimeout, conns: opt.Conns, shares: b.shares}
	s.GRPC.RegisterService(budgeted(&clusterpb.Node_ServiceDesc, budget), &NodeService{base: b, unsafeDebug: opt.UnsafeDebug, client: s.client, auth: opt.Auth})
	s.GRPC.RegisterService(budgeted(&pb.Client_ServiceDesc, budget), s.client)
	s.GRPC.RegisterService(budgeted(&pb.Admin_ServiceDesc, budget), s.admin)
	s.GRPC.RegisterService(budgeted(&pb.Worker_ServiceDesc, budget), workers)
	node.SetLevelProber(levelProber{&s.base})
	loops := leader.Loops{Workers: workers.lead,
		Schedules: schedule.Run(leader.OnRaft(node), opt.Logger.Named("schedules"), schedule.NewMetrics(node.Metrics.Registry))}
	if opt.Webhooks != nil {
		loops.Webhooks = opt.Webhooks.Run
	}
	leader.Establish(node, loops, opt.Logger.Named("leader"), node.Metrics.Registry)
	s.GRPC.RegisterService(budgeted(&healthpb.Health_ServiceDesc, budget), s.Health)
	if opt.Reflection {
		reflection.Register(s.GRPC)
	}
	s.watching.Add(1)
	go s.watchHealth()
	return s
}

// connCaller says who a call is from for the connection limits: a call
// with a token is authenticated, and a client token's connections count
// for its tenant (limits.connections_per_identity). The admin, workers,
// the members' forwarding and this node's own HTTP/JSON gateway (whose
// calls carry gatewayKey) are not bounded so: a fleet of workers may
// share one token, and the gateway's one connection carries every
// tenant's calls.
func connCaller(ctx context.Context, gatewayKey string) connlimit.Caller {
	id, ok := ctx.Value(identityKey{}).(auth.Identity)
	if !ok {
		return connlimit.Caller{}
	}
	c := connlimit.Caller{Authenticated: true}
	if id.Role == auth.RoleClient && !fromGateway(ctx, gatewayKey) {
		c.Identity = id.Key()
	}
	return c
}

// gatewayHeader carries Server.gatewayKey on the gateway's calls.
const gatewayHeader = "barista-gateway"

// fromGateway reports whether a call carries the mark of this node's
// own HTTP/JSON gateway (gatewayHeader with key).
func fromGateway(ctx context.Context, key string) bool {
	v := metadata.ValueFromIncomingContext(ctx, gatewayHeader)
	return key != "" && len(v) > 0 && subtle.ConstantTimeCompare([]byte(v[0]), []byte(key)) == 1
}

// healthEvery is how often the gRPC health status follows the node's.
const healthEvery = 500 * time.Millisecond

// watchHealth keeps the gRPC health status (the whole server, service "")
// in step with the node's readiness, as /readyz reports it.
func (s *Server) watchHealth() {
	defer s.watching.Done()
	t := time.NewTicker(healthEvery)
	defer t.Stop()
	last := healthpb.HealthCheckResponse_UNKNOWN
	for {
		st := healthpb.HealthCheckResponse_NOT_SERVING
		if h := s.base.node.Health(); h.Ready {
			st = healthpb.HealthCheckResponse_SERVING
		} else if st != last {
			if last == healthpb.HealthCheckResponse_UNKNOWN {
				// At start: a node is not ready until it knows a leader.
				s.base.log.Info("not ready yet", "reason", h.Reason)
			} else {
				s.base.log.Warn("not ready", "reason", h.Reason)
			}
		}
		if st != last {
			s.Health.SetServingStatus("", st)
			last = st
		}
		select {
		case <-s.base.stopping:
			return
		case <-t.C:
		}
	}
}

// Serve serves on lis until Stop.
func (s *Server) Serve(lis net.Listener) error { return s.GRPC.Serve(lis) }

// Stop stops gracefully, forcing after timeout, and closes connections to
// other members.
func (s *Server) Stop(timeout time.Duration) {
	s.stopOnce.Do(func() { close(s.base.stopping) })
	s.watching.Wait()
	s.Health.Shutdown()
	done := make(chan struct{})
	go func() { s.GRPC.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		s.GRPC.Stop()
	}
	s.leader.Close()
	s.gatewayConns.Lock()
	for _, cc := range s.gatewayConns.list {
		cc.Close()
	}
	s.gatewayConns.list = nil
	s.gatewayConns.Unlock()
}
