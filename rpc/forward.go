// Package rpc holds a node's gRPC services and what they share: the
// client, admin, node and worker services; tokens and roles (auth.go);
// forwarding to the leader (forward.go, base.go) and the batched forward
// of single submits (forwardsubmit.go); the worker service's leader side,
// the hub (hub.go: sessions and their messages; dispatch.go: dispatch
// rounds; leases.go: heartbeat batches and the cancel relay); bulk
// operations, explain, submit rates, watch limits and read-your-writes
// indexes. The node's HTTP side (package web) calls these services in the
// same process (inprocess.go).
package rpc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/wire"
	"github.com/baristahq/barista/raftnode"
)

// ForwardWait is how long a follower holds a write while no leader is
// known (an election in progress) before failing it.
const ForwardWait = 7 * time.Second

// leaderConns dials and caches connections to the current leader.
type leaderConns struct {
	node  *raftnode.Node
	creds credentials.TransportCredentials
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

func newLeaderConns(node *raftnode.Node, creds credentials.TransportCredentials) *leaderConns {
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	return &leaderConns{node: node, creds: creds, conns: map[string]*grpc.ClientConn{}}
}

// errIsLeader tells the caller to handle the request locally.
var errIsLeader = errors.New("this node is the leader")

// leader waits until the deadline (or the context's end) for a leader
// other than this node whose gRPC address is known and whose connection is
// ready, and returns that connection; errIsLeader if this node leads.
// While the known leader cannot be reached (it died and the election has
// not ended yet), it keeps waiting: nothing has been sent.
func (lc *leaderConns) leader(ctx context.Context, deadline time.Time) (*grpc.ClientConn, string, error) {
	why := "no leader elected"
	for {
		if lc.node.IsLeader() {
			return nil, "", errIsLeader
		}
		id, _ := lc.node.Leader()
		if id != "" && id != lc.node.ID() {
			why = "no leader known"
			if m, ok := lc.node.FSM.Member(id); ok && m.GRPCAddr != "" {
				cc, err := lc.dial(m.GRPCAddr)
				if err != nil {
					return nil, "", err
				}
				switch cc.GetState() {
				case connectivity.Ready:
					return cc, m.GRPCAddr, nil
				case connectivity.Idle:
					cc.Connect()
				}
				why = fmt.Sprintf("the leader %s at %s cannot be reached", id, m.GRPCAddr)
			}
		}
		if time.Now().After(deadline) {
			return nil, "", status.Errorf(codes.Unavailable, "%s (waited %s)", why, ForwardWait)
		}
		select {
		case <-ctx.Done():
			return nil, "", status.FromContextError(ctx.Err()).Err()
		case <-time.After(25 * time.Millisecond):
		}
	}
}

func (lc *leaderConns) dial(addr string) (*grpc.ClientConn, error) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if cc, ok := lc.conns[addr]; ok {
		return cc, nil
	}
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(lc.creds), ClientKeepalive, MessageLimits,
		grpc.WithConnectParams(forwardConnect), grpc.WithChainUnaryInterceptor(relayIndex)}, wire.StaticWindows...)
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "dialing leader at %s: %v", addr, err)
	}
	lc.conns[addr] = cc
	cc.Connect()
	return cc, nil
}

// forwardConnect retries a refused connection to a member quickly: a
// member that restarts is reachable again within a fraction of a second.
var forwardConnect = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
	MinConnectTimeout: 2 * time.Second,
}

// ClientKeepalive pings a silent connection every 10 s and drops it when
// a ping goes unanswered for 5 s, so that a call or stream to a server
// that vanished (or was cut off) fails instead of hanging. The servers
// accept pings every 5 s or slower.
var ClientKeepalive = grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true})

// MessageLimits sizes a connection's calls to the largest message a node
// sends or receives (fsm.MaxMessageBytes), so that whatever a leader
// answers, a follower forwarding the call can carry back.
var MessageLimits = grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(fsm.MaxMessageBytes), grpc.MaxCallSendMsgSize(fsm.MaxMessageBytes))

// Close closes every cached connection.
func (lc *leaderConns) Close() {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	for _, cc := range lc.conns {
		cc.Close()
	}
	lc.conns = map[string]*grpc.ClientConn{}
}

// proposeErr maps a proposal error to a gRPC status.
func proposeErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raftnode.ErrNotLeader):
		// Nothing was proposed: a forwarding follower sends it again to
		// the next leader.
		return notLeader("leadership changed; retry: " + err.Error())
	case errors.Is(err, raftnode.ErrMaybeCommitted):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, raftnode.ErrNotMember), errors.Is(err, raftnode.ErrLevel):
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Internal, err.Error())
}
