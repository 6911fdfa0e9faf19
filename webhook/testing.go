package webhook

import (
	"context"
	"sync"

	"barista/fsm"
	pb "barista/proto"
	"barista/sfq"
)

// MemNode is an in-memory Node: a state machine to which proposals apply
// at once, stamped with a cluster time the test sets. It lets delivery
// run in one process, in milliseconds.
type MemNode struct {
	F *fsm.FSM

	mu    sync.Mutex
	index uint64
	now   sfq.Time
	fail  error
	acks  int
}

// NewMemNode returns an empty state machine at cluster time now, at this
// build's feature level.
func NewMemNode(now sfq.Time) *MemNode {
	return &MemNode{F: fsm.NewLatest(), now: now}
}

// SetFail makes proposals fail with err (nil: succeed again), as after a
// lost leadership.
func (m *MemNode) SetFail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fail = err
}

// Acks returns the number of WebhookAck commands proposed.
func (m *MemNode) Acks() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.acks
}

// SetNow sets the cluster time of the next proposals.
func (m *MemNode) SetNow(t sfq.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = t
}

// Propose implements Node.
func (m *MemNode) Propose(_ context.Context, cmds []*pb.Command) ([]fsm.Result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return nil, m.fail
	}
	m.index++
	for _, c := range cmds {
		if c.GetWebhookAck() != nil {
			m.acks++
		}
	}
	return m.F.ApplyEnvelope(m.index, &pb.Envelope{Version: fsm.Version, StampMs: int64(m.now), Commands: cmds})
}

// Apply proposes commands and returns their results; a refusal or an
// error is returned as an error.
func (m *MemNode) Apply(cmds ...*pb.Command) ([]fsm.Result, error) {
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

// State implements Node.
func (m *MemNode) State() *fsm.FSM { return m.F }

// ClusterNow implements Node.
func (m *MemNode) ClusterNow() (sfq.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now, true
}
