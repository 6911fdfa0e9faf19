package rpc

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/baristahq/barista/internal/auth"
	"github.com/baristahq/barista/internal/connlimit"
	"github.com/baristahq/barista/internal/wire"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/raftnode"
)

// What a front of the node in this process (its HTTP side, package web)
// uses of the gRPC server: the node and the server's settings, the
// services themselves, which it calls in this process as a caller would
// (CallerContext), the views it shows that the API has no call for
// (LocalTop, Peers), a connection to the node's own listener for the
// HTTP/JSON gateway (GatewayConn), and goroutines that end with the server
// (Go).

// Node is the node the server serves.
func (s *Server) Node() *raftnode.Node { return s.base.node }

// Auth is the server's authenticator.
func (s *Server) Auth() *Auth { return s.auth }

// Limits are the server's limits, each zero field given its default.
func (s *Server) Limits() Limits { return s.limits }

// Conns bounds the connections of the server's listeners (nil: none),
// the HTTP listener's with them.
func (s *Server) Conns() *connlimit.Limiter { return s.conns }

// Logger is the server's logger.
func (s *Server) Logger() hclog.Logger { return s.base.log }

// Client is the client service: called in this process with a
// CallerContext, it checks, scopes and forwards to the leader as for a
// gRPC caller.
func (s *Server) Client() *ClientService { return s.client }

// Workers is the worker service, called as Client is.
func (s *Server) Workers() *WorkerService { return s.workers }

// CallerContext is the context of a call of a service made in this
// process for a caller: ctx with the caller's identity, as the auth
// interceptor would set it, and its bearer token ("" for none), which a
// follower forwards to the leader with the call.
func CallerContext(ctx context.Context, id auth.Identity, token string) context.Context {
	md := metadata.MD{}
	if token != "" {
		md.Set("authorization", "Bearer "+token)
	}
	return context.WithValue(metadata.NewIncomingContext(ctx, md), identityKey{}, id)
}

// LocalTop is the live view of fair shares over window, from this node's
// own state (the view Top answers on the leader).
func (s *Server) LocalTop(window time.Duration) *pb.TopResponse { return topView(&s.base, window) }

// Peers lists the members as the leader sees them (the view of
// list-peers), or as this node does when no leader answers.
func (s *Server) Peers(ctx context.Context) *clusterpb.ListPeersResponse {
	b := &s.base
	peers, err := b.leaderPeers(ctx)
	if err != nil {
		b.log.Debug("console: peers from the leader", "error", err)
		peers, _ = peersView(ctx, b)
	}
	return peers
}

// Go runs fn in a goroutine the server owns: stop is closed when Stop
// begins, and Stop waits for fn to return. It is called before Stop.
func (s *Server) Go(fn func(stop <-chan struct{})) {
	s.watching.Add(1)
	go func() {
		defer s.watching.Done()
		fn(s.base.stopping)
	}()
}

// gatewayWindow is the flow-control window of each call on the
// gateway's connection to its own node: what a stream whose HTTP client
// reads nothing can make the gateway hold (the gRPC server then holds
// the stream back, and ends it once it has been stuck for
// limits.watch_stall_timeout).
const gatewayWindow = 64 << 10

// GatewayConn is a connection of the HTTP/JSON gateway to this node's own
// gRPC listener (with the TLS configuration the node uses to reach other
// members, when there is one), with small windows (gatewayWindow); its
// calls carry the gateway's mark, so that the watch limits know its
// streams for the gateway's (it ends a stream its HTTP client does not
// read) and the connection limits its connection for none of its
// callers'.
// Stop closes it.
func (s *Server) GatewayConn() (*grpc.ClientConn, error) {
	addr, err := selfDialAddr(s.base.node.Config().GRPCAddr)
	if err != nil {
		return nil, err
	}
	mark := metadata.Pairs(gatewayHeader, s.gatewayKey)
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(s.leader.creds), MessageLimits,
		grpc.WithStaticStreamWindowSize(gatewayWindow), grpc.WithStaticConnWindowSize(wire.ConnWindowBytes),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(metadata.NewOutgoingContext(ctx, metadata.Join(mark, metadataOut(ctx))), desc, cc, method, opts...)
		}),
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(metadata.NewOutgoingContext(ctx, metadata.Join(mark, metadataOut(ctx))), method, req, reply, cc, opts...)
		}))
	if err != nil {
		return nil, err
	}
	s.gatewayConns.Lock()
	s.gatewayConns.list = append(s.gatewayConns.list, cc)
	s.gatewayConns.Unlock()
	return cc, nil
}

// metadataOut is a context's outgoing metadata (none: empty).
func metadataOut(ctx context.Context) metadata.MD {
	md, _ := metadata.FromOutgoingContext(ctx)
	return md
}

// selfDialAddr turns the gRPC bind address into one this process can
// dial: an unspecified host (every interface) becomes loopback.
func selfDialAddr(bind string) (string, error) {
	host, port, err := net.SplitHostPort(bind)
	if err != nil {
		return "", fmt.Errorf("gRPC address %q: %w", bind, err)
	}
	switch ip := net.ParseIP(host); {
	case host == "" || (ip != nil && ip.IsUnspecified() && ip.To4() != nil):
		host = "127.0.0.1"
	case ip != nil && ip.IsUnspecified():
		host = "::1"
	}
	return net.JoinHostPort(host, port), nil
}
