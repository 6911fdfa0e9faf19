package rpc

import (
	"context"
	"errors"

	"google.golang.org/grpc/metadata"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/proto/clusterpb"
)

// levelProber asks a member's Node service which feature level its build
// understands (raftnode.LevelProber), over the connections and with the
// credentials this server uses to reach other members.
type levelProber struct{ b *base }

func (p levelProber) MemberLevel(ctx context.Context, m fsm.Member) (uint32, error) {
	if m.GRPCAddr == "" {
		return 0, errors.New("no gRPC address recorded")
	}
	cc, err := p.b.leader.dial(m.GRPCAddr)
	if err != nil {
		return 0, err
	}
	if p.b.selfToken != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+p.b.selfToken)
	}
	st, err := clusterpb.NewNodeClient(cc).Status(ctx, &clusterpb.StatusRequest{})
	if err != nil {
		return 0, err
	}
	return st.FeatureLevel, nil // 0 from a build before feature levels
}
