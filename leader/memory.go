package leader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/sfq"
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
	fail    error
	log     []*clusterpb.Envelope
}

// NewMemory returns a leading Memory at cluster time start whose state is
// empty, at this build's highest feature level.
func NewMemory(start sfq.Time) *Memory {
	return &Memory{f: fsm.NewLatest(), now: start, leading: true}
}

// NewConfigured returns NewMemory(start) with cfg applied as its first
// entry.
func NewConfigured(cfg fsm.Config, start sfq.Time) (*Memory, error) {
	m := NewMemory(start)
	if _, err := m.Apply(&clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: fsm.ConfigToPB(cfg)}}}); err != nil {
		return nil, fmt.Errorf("leader: configuring the state: %w", err)
	}
	return m, nil
}

// Apply proposes cmds as one entry; a refused command is an error.
func (m *Memory) Apply(cmds ...*clusterpb.Command) ([]fsm.Result, error) {
	res, err := m.Propose(context.Background(), cmds)
	if err != nil {
		return nil, err
	}
	for _, r := range res {
		if err := r.Err(); err != nil {
			return res, err
		}
	}
	return res, nil
}

// Propose applies cmds as one entry stamped with the current cluster time.
func (m *Memory) Propose(ctx context.Context, cmds []*clusterpb.Command) ([]fsm.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.leading {
		return nil, raftnode.ErrNotLeader
	}
	if m.fail != nil {
		return nil, m.fail
	}
	m.index++
	env := &clusterpb.Envelope{Version: fsm.Version, StampMs: int64(m.now), WallMs: int64(m.now), Commands: cmds}
	m.log = append(m.log, env)
	return m.f.ApplyEnvelope(m.index, env)
}

// Enqueue applies cmds at once (in the order of the calls, as a Raft
// node would) and returns their results to Wait.
func (m *Memory) Enqueue(ctx context.Context, cmds []*clusterpb.Command) (Pending, error) {
	res, err := m.Propose(ctx, cmds)
	if errors.Is(err, raftnode.ErrNotLeader) {
		return nil, err
	}
	return applied{res, err}, nil
}

type applied struct {
	res []fsm.Result
	err error
}

func (a applied) Wait(context.Context) ([]fsm.Result, error) { return a.res, a.err }

// State returns the state machine.
func (m *Memory) State() *fsm.FSM { return m.f }

// ClusterNow returns the cluster time while leading.
func (m *Memory) ClusterNow() (sfq.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now, m.leading
}

// Stamped returns the state machine's clock: a proposal applies at once.
func (m *Memory) Stamped() sfq.Time {
	clock, _ := m.f.Clock()
	return clock
}

// Advance moves cluster time on by d.
func (m *Memory) Advance(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now += sfq.Time(d.Milliseconds())
}

// SetNow sets the cluster time of the next proposals.
func (m *Memory) SetNow(t sfq.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = t
}

// SetFail makes proposals fail with err (nil: succeed again), as a lost
// leadership or a proposal that timed out does.
func (m *Memory) SetFail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fail = err
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
func (m *Memory) Entries() [][]*clusterpb.Command {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([][]*clusterpb.Command, len(m.log))
	for i, env := range m.log {
		out[i] = env.Commands
	}
	return out
}
