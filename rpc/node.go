package rpc

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/peertext"
	"github.com/baristahq/barista/internal/version"
	"github.com/baristahq/barista/proto/clusterpb"
)

// MaxCommandsPerApply bounds one Apply request.
const MaxCommandsPerApply = 1000

// NodeService implements pb.NodeServer.
type NodeService struct {
	clusterpb.UnimplementedNodeServer
	base
	unsafeDebug bool
	// client and auth take the submits a follower forwards in batches.
	client *ClientService
	auth   *Auth
}

// Status reports this node's view of the cluster.
func (s *NodeService) Status(ctx context.Context, req *clusterpb.StatusRequest) (*clusterpb.StatusResponse, error) {
	r := s.node.Raft()
	var hash [32]byte
	if !req.GetSkipHash() {
		hash, _ = s.node.FSM.Hash()
	}
	clock, _ := s.node.FSM.Clock()
	jobs, tenants := s.node.FSM.Counts()
	id, raftAddr := s.node.Leader()
	resp := &clusterpb.StatusResponse{
		NodeId:              s.node.ID(),
		State:               peertext.StateName(r.State()),
		LeaderId:            id,
		LeaderRaftAddr:      raftAddr,
		AppliedIndex:        r.AppliedIndex(),
		LastLogIndex:        r.LastIndex(),
		StateHash:           peertext.HashText(hash, req.GetSkipHash()),
		RaftAddr:            s.node.Config().RaftAddr,
		GrpcAddr:            s.node.Config().GRPCAddr,
		ClusterTimeMs:       int64(clock),
		Jobs:                uint64(jobs),
		Tenants:             uint64(tenants),
		LastLeaderContactMs: s.node.LastLeaderContact().Milliseconds(),
		FeatureLevel:        s.node.FeatureLevel(),
		ClusterFeatureLevel: s.node.FSM.Level(),
		Version:             version.Version,
	}
	if wall, cluster := s.node.FSM.WallClock(); wall != 0 {
		resp.ClusterBehindMs = int64(wall - cluster)
	}
	if m, ok := s.node.FSM.Member(id); ok {
		resp.LeaderAddr = m.GRPCAddr
	}
	stats := r.Stats()
	fmt.Sscan(stats["commit_index"], &resp.CommitIndex)
	fmt.Sscan(stats["term"], &resp.Term)
	return resp, nil
}

// Apply proposes commands through the leader.
func (s *NodeService) Apply(ctx context.Context, req *clusterpb.ApplyRequest) (*clusterpb.ApplyResponse, error) {
	if len(req.Commands) == 0 || len(req.Commands) > MaxCommandsPerApply {
		return nil, fieldErr(codes.InvalidArgument, "commands", "%d given (want 1..%d)", len(req.Commands), MaxCommandsPerApply)
	}
	version := uint32(fsm.Version)
	if req.UnsafeVersion != 0 {
		if !s.unsafeDebug {
			return nil, status.Error(codes.PermissionDenied, "unsafe_version needs a server started with --unsafe-debug")
		}
		version = req.UnsafeVersion
	}
	for i, c := range req.Commands {
		if c.GetSetFeatureLevel() != nil {
			return nil, status.Errorf(codes.InvalidArgument, "commands[%d]: set_feature_level is proposed by the leader alone, once every voter understands the level", i)
		}
		if err := levelErr(s.node.FSM, c); err != nil {
			return nil, status.Errorf(codes.FailedPrecondition, "commands[%d]: %s", i, status.Convert(err).Message())
		}
	}
	if resp, handled, err := forward(ctx, &s.base, func(ctx context.Context, cc *grpc.ClientConn) (*clusterpb.ApplyResponse, error) {
		return clusterpb.NewNodeClient(cc).Apply(ctx, req)
	}); handled {
		return resp, err
	}
	// A pool is not deleted while a worker of it is connected: checked
	// here, on the leader, which holds the sessions.
	for _, c := range req.Commands {
		if d := c.GetPoolDelete(); d != nil {
			release, err := s.client.workers.GuardPoolDelete(ctx, d.Name)
			if err != nil {
				return nil, err
			}
			defer release()
		}
	}
	index, results, err := s.node.ProposeVersion(ctx, version, req.Commands)
	if err != nil {
		return nil, proposeErr(err)
	}
	resp := &clusterpb.ApplyResponse{Index: index}
	for _, r := range results {
		resp.Results = append(resp.Results, fsm.ResultToPB(r))
	}
	return resp, nil
}

// Join adds a voter through the leader.
func (s *NodeService) Join(ctx context.Context, req *clusterpb.JoinRequest) (*clusterpb.JoinResponse, error) {
	if req.Id == "" || req.RaftAddr == "" {
		return nil, status.Error(codes.InvalidArgument, "join needs id and raft_addr")
	}
	if id, _ := s.node.Leader(); id == "" && len(s.node.Raft().GetConfiguration().Configuration().Servers) == 0 {
		// This node belongs to no cluster yet: no leader will appear here
		// to forward to (a node that is itself waiting to join or to
		// bootstrap answers at once).
		return nil, status.Error(codes.Unavailable, "this node is not a member of a cluster yet")
	}
	if resp, handled, err := forward(ctx, &s.base, func(ctx context.Context, cc *grpc.ClientConn) (*clusterpb.JoinResponse, error) {
		return clusterpb.NewNodeClient(cc).Join(ctx, req)
	}); handled {
		return resp, err
	}
	if err := s.node.Join(ctx, req.Id, req.RaftAddr, req.GrpcAddr, req.HttpAddr); err != nil {
		return nil, proposeErr(err)
	}
	_, index := s.node.FSM.Clock()
	return &clusterpb.JoinResponse{LeaderId: s.node.ID(), Index: index}, nil
}

// RemovePeer removes a server through the leader.
func (s *NodeService) RemovePeer(ctx context.Context, req *clusterpb.RemovePeerRequest) (*clusterpb.RemovePeerResponse, error) {
	if req.Id == "" {
		return nil, status.Error(codes.InvalidArgument, "remove-peer needs an id")
	}
	if resp, handled, err := forward(ctx, &s.base, func(ctx context.Context, cc *grpc.ClientConn) (*clusterpb.RemovePeerResponse, error) {
		return clusterpb.NewNodeClient(cc).RemovePeer(ctx, req)
	}); handled {
		return resp, err
	}
	if !s.hasServer(req.Id) {
		return nil, status.Errorf(codes.NotFound, "no server %q in the Raft configuration", req.Id)
	}
	if err := s.node.RemovePeer(ctx, req.Id); err != nil {
		return nil, proposeErr(err)
	}
	return &clusterpb.RemovePeerResponse{}, nil
}

func (s *NodeService) hasServer(id string) bool {
	for _, srv := range s.node.Raft().GetConfiguration().Configuration().Servers {
		if string(srv.ID) == id {
			return true
		}
	}
	return false
}

// ListPeers lists the Raft configuration, with each member's last
// contact and replication lag as the leader sees them (a follower
// forwards the call; it answers itself, without those, only when no
// leader is known).
func (s *NodeService) ListPeers(ctx context.Context, req *clusterpb.ListPeersRequest) (*clusterpb.ListPeersResponse, error) {
	if resp, handled, err := forward(ctx, &s.base, func(ctx context.Context, cc *grpc.ClientConn) (*clusterpb.ListPeersResponse, error) {
		return clusterpb.NewNodeClient(cc).ListPeers(ctx, req)
	}); handled && (err == nil || status.Code(err) != codes.Unavailable) {
		return resp, err
	}
	return peersView(ctx, &s.base)
}

// leaderPeers asks the leader for the peers view with this server's own
// credentials (the web page shows it on every node).
func (b *base) leaderPeers(ctx context.Context) (*clusterpb.ListPeersResponse, error) {
	if b.node.IsLeader() {
		return peersView(ctx, b)
	}
	cc, _, err := b.leader.leader(ctx, time.Now().Add(ForwardWait))
	if err != nil {
		return nil, err
	}
	md := metadata.Pairs(forwardedKey, "1")
	if b.selfToken != "" {
		md.Append("authorization", "Bearer "+b.selfToken)
	}
	return clusterpb.NewNodeClient(cc).ListPeers(metadata.NewOutgoingContext(ctx, md), &clusterpb.ListPeersRequest{})
}

// peersView is the one view of the members that every surface shows
// (list-peers, GET /v1/admin/members, the console): the Raft
// configuration, each member's last contact and lag as this node (the
// leader) sees them, and each member's applied index, asked of it
// (applied_known false where it does not answer within a second).
func peersView(ctx context.Context, b *base) (*clusterpb.ListPeersResponse, error) {
	peers, index, err := b.node.Peers()
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	resp := &clusterpb.ListPeersResponse{Index: index}
	var wg sync.WaitGroup
	for _, p := range peers {
		out := &clusterpb.Peer{Id: p.ID, RaftAddr: p.Address, Voter: p.Voter, Leader: p.Leader, Known: p.Known,
			LastContactMs: p.LastContact.Milliseconds(), Lag: p.Lag, LagKnown: p.LagKnown, Reachable: p.Reachable}
		if m, ok := b.node.FSM.Member(p.ID); ok {
			out.GrpcAddr, out.HttpAddr = m.GRPCAddr, m.HTTPAddr
		}
		resp.Peers = append(resp.Peers, out)
		switch {
		case p.ID == b.node.ID():
			out.AppliedIndex, out.AppliedKnown = b.node.Raft().AppliedIndex(), true
		case out.GrpcAddr != "":
			wg.Add(1)
			go func() {
				defer wg.Done()
				if st, err := b.memberStatus(ctx, out.GrpcAddr); err == nil {
					out.AppliedIndex, out.AppliedKnown = st.AppliedIndex, true
				}
			}()
		}
	}
	wg.Wait()
	return resp, nil
}

// memberStatus asks one member for its status (without its state hash),
// with this server's own credentials, for at most a second.
func (b *base) memberStatus(ctx context.Context, addr string) (*clusterpb.StatusResponse, error) {
	cc, err := b.leader.dial(addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if b.selfToken != "" {
		ctx = metadata.NewOutgoingContext(ctx, metadata.Pairs("authorization", "Bearer "+b.selfToken))
	}
	return clusterpb.NewNodeClient(cc).Status(ctx, &clusterpb.StatusRequest{SkipHash: true})
}

// TransferLeadership hands leadership over.
func (s *NodeService) TransferLeadership(ctx context.Context, req *clusterpb.TransferLeadershipRequest) (*clusterpb.TransferLeadershipResponse, error) {
	if resp, handled, err := forward(ctx, &s.base, func(ctx context.Context, cc *grpc.ClientConn) (*clusterpb.TransferLeadershipResponse, error) {
		return clusterpb.NewNodeClient(cc).TransferLeadership(ctx, req)
	}); handled {
		return resp, err
	}
	if req.Id != "" && !s.hasServer(req.Id) {
		return nil, status.Errorf(codes.NotFound, "no server %q in the Raft configuration", req.Id)
	}
	// The answer names the new leader: wait for it to be known here
	// (within a few election timeouts; past them the transfer is done
	// and the caller can ask status).
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	id, err := s.node.TransferLeadership(wctx, req.Id)
	switch {
	case err != nil && wctx.Err() != nil:
		return nil, status.Errorf(codes.DeadlineExceeded, "leadership was handed over, but no new leader was known within 10s: see barista status")
	case err != nil:
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	return &clusterpb.TransferLeadershipResponse{LeaderId: id}, nil
}
