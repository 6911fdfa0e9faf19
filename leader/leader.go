// Package leader holds what runs only while a node leads: Establish lists
// every leader-only loop of a server in one place, and the loops that need
// no worker session (the expiry of passed deadlines, the pruner) live
// here. A loop sees the node only through Node — propose, read the state
// machine, cluster time — so Memory, an in-process Node without Raft, can
// drive any loop deterministically in a unit test.
package leader

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/sfq"
)

// Node is what a leader-only loop needs of the node it runs on.
type Node interface {
	// Propose replicates commands and returns Apply's results, one per
	// command (leader only; raftnode.ErrNotLeader otherwise).
	Propose(ctx context.Context, cmds []*clusterpb.Command) ([]fsm.Result, error)
	// State is the replicated state machine, read only.
	State() *fsm.FSM
	// ClusterNow is the cluster time the next proposal would carry; false
	// while this node does not lead.
	ClusterNow() (sfq.Time, bool)
	// Stamped is the newest cluster time an entry carries that this node
	// has applied or, leading, handed to Raft: the clock ticks measure
	// from it.
	Stamped() sfq.Time
	// Enqueue queues commands for replication without waiting for them:
	// proposals apply in the order they were queued.
	Enqueue(ctx context.Context, cmds []*clusterpb.Command) (Pending, error)
}

// Pending is a queued proposal; Wait returns Apply's results, one per
// command.
type Pending interface {
	Wait(ctx context.Context) ([]fsm.Result, error)
}

// OnRaft adapts a raftnode.Node to Node.
func OnRaft(n *raftnode.Node) Node { return raftNode{n} }

type raftNode struct{ n *raftnode.Node }

func (r raftNode) Propose(ctx context.Context, cmds []*clusterpb.Command) ([]fsm.Result, error) {
	_, res, err := r.n.Propose(ctx, cmds)
	return res, err
}
func (r raftNode) Enqueue(ctx context.Context, cmds []*clusterpb.Command) (Pending, error) {
	q, err := r.n.Enqueue(ctx, cmds)
	if err != nil {
		return nil, err
	}
	return raftPending{q}, nil
}

type raftPending struct{ q *raftnode.Pending }

func (p raftPending) Wait(ctx context.Context) ([]fsm.Result, error) {
	_, res, err := p.q.Wait(ctx)
	return res, err
}

func (r raftNode) State() *fsm.FSM              { return r.n.FSM }
func (r raftNode) ClusterNow() (sfq.Time, bool) { return r.n.ClusterNow() }
func (r raftNode) Stamped() sfq.Time            { return r.n.Stamped() }

// Loops are the parts of a server that bring their own leader-only loops.
type Loops struct {
	// Workers runs the worker sessions' loops (dispatcher, heartbeat
	// batcher, cancel relay) for as long as its context lives.
	Workers raftnode.LeaderLoop
	// Webhooks, if set, delivers the tenants' events.
	Webhooks raftnode.LeaderLoop
	// Schedules, if set, fires the tenants' schedules (package schedule).
	Schedules raftnode.LeaderLoop
}

// Establish names every loop that runs only while node leads, in start
// order, under one context that ends with the leadership: the clock
// ticks, the feature level, the pruner, the deadlines, the releases and expiries of delays,
// the schedules' fires, the worker sessions' loops, webhook delivery. A new leader-only loop is added here and nowhere else.
func Establish(node *raftnode.Node, parts Loops, log hclog.Logger, reg prometheus.Registerer) {
	n := OnRaft(node)
	loops := []raftnode.Loop{
		{Name: "clock", Run: ClockTicks(n, log.Named("clock"), NewClockMetrics(reg))},
		{Name: "feature-level", Run: node.FeatureLevelLoop},
		{Name: "prune", Run: Pruner(n, node.Config().PruneInterval, log.Named("prune"))},
		{Name: "deadlines", Run: Deadlines(n, log.Named("deadlines"), NewDeadlineMetrics(reg))},
		{Name: "delays", Run: Delays(n, log.Named("delays"))},
	}
	if parts.Schedules != nil {
		loops = append(loops, raftnode.Loop{Name: "schedules", Run: parts.Schedules})
	}
	if parts.Workers != nil {
		loops = append(loops, raftnode.Loop{Name: "workers", Run: parts.Workers})
	}
	if parts.Webhooks != nil {
		loops = append(loops, raftnode.Loop{Name: "webhooks", Run: parts.Webhooks})
	}
	node.SetLeaderLoops(loops...)
}

// proposeTimeout bounds one proposal of a loop.
const proposeTimeout = 30 * time.Second

// Pruner proposes a Prune whenever the state machine says one is due,
// checking every interval.
func Pruner(n Node, interval time.Duration, log hclog.Logger) raftnode.LeaderLoop {
	return func(ctx context.Context) {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := PruneOnce(ctx, n); err != nil {
					log.Warn("prune failed", "error", err)
				}
			}
		}
	}
}

// PruneOnce proposes a Prune if one is due at the applied clock.
func PruneOnce(ctx context.Context, n Node) error {
	f := n.State()
	clock, _ := f.Clock()
	if !f.PruneDue(clock) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, proposeTimeout)
	defer cancel()
	_, err := n.Propose(ctx, []*clusterpb.Command{{Cmd: &clusterpb.Command_Prune{Prune: &clusterpb.Prune{}}}})
	return err
}
