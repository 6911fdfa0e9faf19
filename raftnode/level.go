package raftnode

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/proto/clusterpb"
)

// The cluster's feature level (fsm/level.go; docs/operations.md
// "Upgrades"). Every node reports the highest level its build understands
// (Config.FeatureLevel, through the Node service's Status). The leader
// asks each voter and raises the replicated level to the lowest answer
// once that is above the level in force; a new voter that does not
// understand the level in force is refused.

// LevelProber asks a member which feature level its build understands.
// The gRPC layer implements it (the Node service's Status); a build before
// feature levels answers 0, read as fsm.Level1.
type LevelProber interface {
	MemberLevel(ctx context.Context, m fsm.Member) (uint32, error)
}

// ErrLevel refuses a voter whose build does not understand the cluster's
// feature level.
var ErrLevel = errors.New("below the cluster's feature level")

// levelCheckEvery is how often the leader asks the voters while the level
// in force is below its own.
const levelCheckEvery = time.Second

// levelProbeTimeout bounds one question to one voter.
const levelProbeTimeout = 2 * time.Second

// SetLevelProber installs the prober the leader asks the voters with.
// Without one, the leader raises the level only while it is the only
// voter.
func (n *Node) SetLevelProber(p LevelProber) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.prober = p
}

// FeatureLevel is the highest feature level this node reports that it
// understands.
func (n *Node) FeatureLevel() uint32 { return n.cfg.featureLevel() }

func (c Config) featureLevel() uint32 {
	if c.FeatureLevel == 0 {
		return fsm.MaxFeatureLevel
	}
	return c.FeatureLevel
}

// clusterLevel is the lowest feature level the voters understand: own for
// this node, probe's answer for the others (0 read as 1). An error of any
// voter is returned: a voter that cannot be asked holds the level back.
func clusterLevel(self string, own uint32, voters []string, probe func(id string) (uint32, error)) (uint32, error) {
	lowest := own
	for _, id := range voters {
		l := own
		if id != self {
			var err error
			if l, err = probe(id); err != nil {
				return 0, fmt.Errorf("voter %s: %w", id, err)
			}
			l = max(l, fsm.Level1)
		}
		lowest = min(lowest, l)
	}
	return lowest, nil
}

// voters returns the IDs of the voters of the Raft configuration.
func (n *Node) voters() ([]string, error) {
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return nil, err
	}
	var out []string
	for _, s := range cf.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			out = append(out, string(s.ID))
		}
	}
	return out, nil
}

// probe asks member id (by its recorded gRPC address) for its level.
func (n *Node) probe(ctx context.Context, id string) (uint32, error) {
	n.mu.Lock()
	p := n.prober
	n.mu.Unlock()
	m, ok := n.FSM.Member(id)
	switch {
	case p == nil:
		return 0, errors.New("no way to ask it (no prober)")
	case !ok || m.GRPCAddr == "":
		return 0, errors.New("its gRPC address is not recorded")
	}
	pctx, cancel := context.WithTimeout(ctx, levelProbeTimeout)
	defer cancel()
	return p.MemberLevel(pctx, m)
}

// levelTarget returns the level every voter understands, when it is above
// the level in force (0 otherwise).
func (n *Node) levelTarget(ctx context.Context) (uint32, error) {
	own, cur := n.FeatureLevel(), n.FSM.Level()
	if own <= cur {
		return 0, nil
	}
	voters, err := n.voters()
	if err != nil {
		return 0, err
	}
	l, err := clusterLevel(n.cfg.ID, own, voters, func(id string) (uint32, error) { return n.probe(ctx, id) })
	if err != nil || l <= cur {
		return 0, err
	}
	return l, nil
}

// raiseLevel proposes SetFeatureLevel when every voter understands a level
// above the one in force.
func (n *Node) raiseLevel(ctx context.Context) {
	target, err := n.levelTarget(ctx)
	if err != nil {
		n.log.Debug("the feature level stays", "level", n.FSM.Level(), "reason", err)
		return
	}
	if target == 0 {
		return
	}
	_, res, err := n.Propose(ctx, []*clusterpb.Command{{Cmd: &clusterpb.Command_SetFeatureLevel{SetFeatureLevel: &clusterpb.SetFeatureLevel{Level: target}}}})
	if err == nil {
		err = res[0].Err()
	}
	if err != nil {
		n.log.Warn("raising the feature level failed", "level", target, "error", err)
		return
	}
	n.log.Info("raised the cluster's feature level: every voter understands it", "level", target)
}

// FeatureLevelLoop raises the level whenever every voter understands a
// higher one (after a rolling upgrade). It asks only while the level in
// force is below this build's.
func (n *Node) FeatureLevelLoop(ctx context.Context) {
	t := time.NewTicker(levelCheckEvery)
	defer t.Stop()
	for {
		n.raiseLevel(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// checkJoinLevel refuses a new voter whose build does not understand the
// level in force (asked at its gRPC address).
func (n *Node) checkJoinLevel(ctx context.Context, id, grpcAddr string) error {
	cur := n.FSM.Level()
	if cur <= fsm.Level1 {
		return nil // every build understands level 1
	}
	n.mu.Lock()
	p := n.prober
	n.mu.Unlock()
	if p == nil {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, levelProbeTimeout)
	defer cancel()
	l, err := p.MemberLevel(pctx, fsm.Member{ID: id, GRPCAddr: grpcAddr})
	if err != nil {
		return fmt.Errorf("%w: cannot ask %s at %s which feature level it understands: %v", ErrLevel, id, grpcAddr, err)
	}
	if l = max(l, fsm.Level1); l < cur {
		return fmt.Errorf("%w: %s understands feature level %d, the cluster is at %d: upgrade it before it joins", ErrLevel, id, l, cur)
	}
	return nil
}

// seedCommand is the SetConfig that seeds a never-configured cluster at
// feature level level. Settings the level does not allow (a seed of
// estimate=auto while a voter runs an older build) are left at their
// defaults, and said so: set them once the level is raised.
func (n *Node) seedCommand(level uint32) *clusterpb.Command {
	seed := fsm.ConfigToPB(n.cfg.Seed)
	if level < fsm.Level5 && (seed.RetryBackoffMs != 0 || seed.RetryBackoffMaxMs != 0) {
		// A cluster below level 5 keeps no retry backoff: a failed run is
		// requeued at once, as the builds before it do.
		n.log.Info("seeding the configuration without a retry backoff below feature level 5; set retry_backoff with barista config set once the level is raised")
		seed.RetryBackoffMs, seed.RetryBackoffMaxMs = 0, 0
	}
	cmd := &clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: seed}}}
	if err := fsm.CheckLevel(cmd, level); err != nil {
		n.log.Warn("seeding the configuration without the settings its feature level does not allow; set them with barista config set once the level is raised", "reason", err)
		fsm.ConfigAtLevel(seed, level)
	}
	return cmd
}
