package webhook

import (
	"time"

	"github.com/baristahq/barista/leader"
	"github.com/baristahq/barista/raftnode"
)

// OnNode builds a server's deliverer on node. Its Run is the leader-only
// loop the server runs while node leads (leader.Loops.Webhooks).
// Signatures carry the node's wall clock.
func OnNode(node *raftnode.Node, opt Options) *Deliverer {
	if opt.Wall == nil {
		off := node.Config().ClockOffset
		opt.Wall = func() time.Time { return time.Now().Add(off) }
	}
	if opt.Registerer == nil {
		opt.Registerer = node.Metrics.Registry
	}
	return New(leader.OnRaft(node), opt)
}
