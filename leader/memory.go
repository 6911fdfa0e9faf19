package leader

import (
	"context"
	"fmt"
	"sync"
	"time"

	"barista/fsm"
	pb "barista/proto"
	"barista/raftnode"
	"barista/sfq"
)

// Memory is a Node without Raft, for tests of leader loops in one
// process: a proposal is applied at once as the next log entry, stamped
// with a cluster time that moves only when Advance says so, and
// leadership is a switch. It applies exactly what a one-node cluster
// would, through fsm.ApplyEnvelope.
type Memory struct {
	mu      sync.Mutex
	f       *fsm.FSM
	index   uint64
	now     sfq.Time
	leading bool
	log     []*pb.Envelope
}

// NewMemory returns a leading Memory at cluster time start, its state
// configured with cfg at the highest feature level.
func NewMemory(cfg fsm.Config, start sfq.Time) (*Memory, error) {
	m := &Memory{f: fsm.New(), now: start, leading: true}
	res, err := m.Propose(context.Background(), []*pb.Command{
		{Cmd: &pb.Command_SetFeatureLevel{SetFeatureLevel: &pb.SetFeatureLevel{Level: fsm.MaxFeatureLevel}}},
		{Cmd: &pb.Command_SetConfig{SetConfig: &pb.SetConfig{Config: fsm.ConfigToPB(cfg)}}},
	})
	if err != nil {
		return nil, err
	}
	for i, r := range res {
		if r.Code != fsm.OK {
			return nil, fmt.Errorf("leader: setting up the state (command %d): %s", i, r.Msg)
		}
	}
	return m, nil
}

// Propose applies cmds as one entry stamped with the current cluster time.
func (m *Memory) Propose(ctx context.Context, cmds []*pb.Command) ([]fsm.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.leading {
		return nil, raftnode.ErrNotLeader
	}
	m.index++
	env := &pb.Envelope{Version: fsm.Version, StampMs: int64(m.now), WallMs: int64(m.now), Commands: cmds}
	m.log = append(m.log, env)
	return m.f.ApplyEnvelope(m.index, env)
}

// State returns the state machine.
func (m *Memory) State() *fsm.FSM { return m.f }

// ClusterNow returns the cluster time while leading.
func (m *Memory) ClusterNow() (sfq.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now, m.leading
}

// Advance moves cluster time on by d.
func (m *Memory) Advance(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now += sfq.Time(d.Milliseconds())
}

// SetLeading gains or loses leadership: a node that does not lead
// proposes nothing.
func (m *Memory) SetLeading(leading bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.leading = leading
}

// Entries returns the commands of every entry proposed so far, one slice
// per entry (the setup entry of NewMemory first).
func (m *Memory) Entries() [][]*pb.Command {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([][]*pb.Command, len(m.log))
	for i, env := range m.log {
		out[i] = env.Commands
	}
	return out
}
