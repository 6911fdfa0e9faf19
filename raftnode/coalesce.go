package raftnode

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/pbcodec"
	"github.com/baristahq/barista/proto/clusterpb"
)

// Command coalescing: concurrent proposals are packed into shared log
// entries. One goroutine takes every proposal queued when an entry slot is
// free and sends them as one envelope, applied in order with one result
// per command. At most EntriesInFlight entries are outstanding; while they
// are, new proposals queue up and ride the next entry together, so the
// batch size follows the load and a lone proposal waits for nothing. A
// coalesced entry is an ordinary entry: it replays to the same state as
// the same commands applied one by one. The same goroutine hands every
// entry to Raft, so proposals apply in the order they were queued: one
// queued (Enqueue) before another is applied before it.
//
// One entry in flight by default: every entry costs each replica a log
// write (two fsyncs of bbolt) and a round of replication whatever it
// carries, and hashicorp/raft's leader loop writes the next entry before
// it processes the commit of the one before, so a second entry in flight
// delays the first. With one, entries are fuller and commit sooner on
// replicas that share a machine (bench dispatch --quick, two runs each,
// one against two in flight: 76 and 94 against 95 and 85 µs of cluster
// CPU per zero-length dispatch; at 40 % load Ready→Assign p99 67 and 66
// against 108 and 61 ms; at 20 %, 33 and 27 against 72 and 43 ms; bench
// submit at 64 clients earlier: 26 commands an entry and 11,000 submits/s
// against 16 and 9,800). Replicas on machines and disks of their own may
// gain from overlapping the leader's write of the next entry with the
// replication of the one before: [raft] entries_in_flight sets it.
const (
	DefaultEntriesInFlight = 1
	MaxEntriesInFlight     = 16
	maxEntryCommands       = 4096
	maxEntryBytes          = 4 << 20
)

type proposal struct {
	cmds  []*clusterpb.Command
	bytes int
	done  chan proposalResult
}

type proposalResult struct {
	index   uint64
	results []fsm.Result
	err     error
}

func (n *Node) coalesce() {
	defer n.wg.Done()
	inflight := n.cfg.EntriesInFlight
	if inflight == 0 {
		inflight = DefaultEntriesInFlight
	}
	slots := make(chan struct{}, inflight)
	var carry *proposal
	for {
		p := carry
		carry = nil
		if p == nil {
			select {
			case p = <-n.proposals:
			case <-n.done:
				return
			}
		}
		select {
		case slots <- struct{}{}:
		case <-n.done:
			p.done <- proposalResult{err: ErrNotLeader}
			return
		}
		batch, count, size := []*proposal{p}, len(p.cmds), p.bytes
	drain:
		for count < maxEntryCommands {
			select {
			case q := <-n.proposals:
				if count+len(q.cmds) > maxEntryCommands || size+q.bytes > maxEntryBytes {
					carry = q
					break drain
				}
				batch = append(batch, q)
				count += len(q.cmds)
				size += q.bytes
			default:
				break drain
			}
		}
		cmds := make([]*clusterpb.Command, 0, count)
		for _, p := range batch {
			cmds = append(cmds, p.cmds...)
		}
		e := n.send(fsm.Version, cmds, 30*time.Second)
		go func() {
			n.deliver(batch, e)
			<-slots
		}()
	}
}

// deliver waits for one entry of several proposals and hands each its
// results.
func (n *Node) deliver(batch []*proposal, e entry) {
	index, results, err := n.wait(e)
	n.Metrics.EntryCommands.Observe(float64(len(e.cmds)))
	off := 0
	for _, p := range batch {
		r := proposalResult{index: index, err: err}
		if err == nil {
			r.results = results[off : off+len(p.cmds)]
		}
		off += len(p.cmds)
		p.done <- r
	}
}

// entry is one envelope handed to Raft.
type entry struct {
	cmds  []*clusterpb.Command
	f     raft.ApplyFuture
	start time.Time
	err   error // it could not be sent
}

// send stamps one envelope and hands it to Raft without waiting for it:
// entries are logged in the order send is called.
func (n *Node) send(version uint32, cmds []*clusterpb.Command, timeout time.Duration) entry {
	stamp, ok := n.stampEntry()
	if !ok {
		return entry{cmds: cmds, err: ErrNotLeader}
	}
	data, err := fsm.Encode(&clusterpb.Envelope{Version: version, StampMs: stamp, WallMs: n.wallNow().UnixMilli(), Commands: cmds})
	if err != nil {
		return entry{cmds: cmds, err: err}
	}
	return entry{cmds: cmds, f: n.raft.Apply(data, timeout), start: time.Now()}
}

// apply replicates one envelope and waits for its results.
func (n *Node) apply(version uint32, cmds []*clusterpb.Command, timeout time.Duration) (uint64, []fsm.Result, error) {
	return n.wait(n.send(version, cmds, timeout))
}

// wait waits for an entry's results.
func (n *Node) wait(e entry) (uint64, []fsm.Result, error) {
	if e.err != nil {
		return 0, nil, e.err
	}
	cmds, f := e.cmds, e.f
	err := f.Error()
	n.Metrics.Propose.Observe(time.Since(e.start).Seconds())
	if err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader):
			return 0, nil, ErrNotLeader
		case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrRaftShutdown):
			// A shutdown may come after the entry left: it may be committed.
			return 0, nil, fmt.Errorf("%w: %v", ErrMaybeCommitted, err)
		}
		return 0, nil, err
	}
	switch r := f.Response().(type) {
	case []fsm.Result:
		if len(r) != len(cmds) {
			return f.Index(), nil, fmt.Errorf("entry %d: %d results for %d commands", f.Index(), len(r), len(cmds))
		}
		return f.Index(), r, nil
	case error:
		return f.Index(), nil, r
	}
	return f.Index(), nil, fmt.Errorf("unexpected apply response %T", f.Response())
}

// Propose replicates commands, sharing a log entry with concurrent
// proposals, and returns the entry's index and one result per command.
// Only the leader may propose. A context that ends first returns its
// error; the commands may still be applied (every command is idempotent or
// fenced, so a retry is safe).
func (n *Node) Propose(ctx context.Context, cmds []*clusterpb.Command) (uint64, []fsm.Result, error) {
	q, err := n.Enqueue(ctx, cmds)
	if err != nil {
		return 0, nil, err
	}
	return q.Wait(ctx)
}

// Pending is a proposal queued for a log entry.
type Pending struct {
	n *Node
	p *proposal
}

// Enqueue queues commands for the next log entry and returns without
// waiting for them. Proposals apply in the order they were queued: a
// caller that enqueues one proposal and then another knows the first is
// applied before the second, and may go on before either is.
func (n *Node) Enqueue(ctx context.Context, cmds []*clusterpb.Command) (*Pending, error) {
	if !n.IsLeader() {
		return nil, ErrNotLeader
	}
	size := 0
	for _, c := range cmds {
		size += pbcodec.Size(c)
	}
	p := &proposal{cmds: cmds, bytes: size, done: make(chan proposalResult, 1)}
	select {
	case n.proposals <- p:
		return &Pending{n: n, p: p}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-n.done:
		return nil, ErrNotLeader
	}
}

// Wait waits for a queued proposal's entry and returns its index and one
// result per command. A context that ends first returns its error; the
// commands may still be applied.
func (q *Pending) Wait(ctx context.Context) (uint64, []fsm.Result, error) {
	select {
	case r := <-q.p.done:
		return r.index, r.results, r.err
	case <-ctx.Done():
		return 0, nil, fmt.Errorf("%w: %v", ErrMaybeCommitted, ctx.Err())
	case <-q.n.done:
		return 0, nil, fmt.Errorf("%w: the node is shutting down", ErrMaybeCommitted)
	}
}

// ProposeVersion proposes one envelope of an explicit version on its own
// (tests of the fatal-entry path).
func (n *Node) ProposeVersion(ctx context.Context, version uint32, cmds []*clusterpb.Command) (uint64, []fsm.Result, error) {
	if version == fsm.Version {
		return n.Propose(ctx, cmds)
	}
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	return n.apply(version, cmds, timeout)
}
