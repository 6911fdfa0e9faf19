package webhook

import (
	"context"
	"time"

	"barista/fsm"
	pb "barista/proto"
	"barista/raftnode"
)

// raftNode is a server's Raft member as delivery sees it.
type raftNode struct{ *raftnode.Node }

func (n raftNode) Propose(ctx context.Context, cmds []*pb.Command) ([]fsm.Result, error) {
	_, res, err := n.Node.Propose(ctx, cmds)
	return res, err
}

func (n raftNode) State() *fsm.FSM { return n.FSM }

// Start builds a server's deliverer and registers its loop to run while
// node leads. Signatures carry the node's wall clock.
func Start(node *raftnode.Node, opt Options) *Deliverer {
	if opt.Wall == nil {
		off := node.Config().ClockOffset
		opt.Wall = func() time.Time { return time.Now().Add(off) }
	}
	if opt.Registerer == nil {
		opt.Registerer = node.Metrics.Registry
	}
	d := New(raftNode{node}, opt)
	node.OnLeader("webhooks", d.Run)
	return d
}
