package raftnode

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// Health is this node's own view of whether it can serve: it has a
// leader, it can write its log, and it is not far behind the commit index
// the leader last told it.
type Health struct {
	Ready  bool
	Reason string // why not ready ("" when ready)

	Leader string // leader ID ("" if none known)
	// Applied is the index of the last entry this node applied.
	Applied uint64
	// LeaderCommit is the highest commit index a leader has announced to
	// this node (on the leader: its own commit index).
	LeaderCommit uint64
	// BehindEntries is LeaderCommit - Applied (0 when caught up).
	BehindEntries uint64
	// Behind is how long ago the leader had already committed an entry
	// this node has still not applied: an upper bound on how stale a read
	// of this node is, as far as it knows.
	Behind time.Duration
	// LastContact is how long ago this follower last heard from the
	// leader (0 on the leader).
	LastContact time.Duration
	// PersistErr is the last failed write of the Raft log or stable store,
	// cleared by the next successful one.
	PersistErr error
}

// lagTracker records the commit indexes leaders announce in their
// AppendEntries, with the time each was first seen, so that a follower
// knows how far behind it is even when it cannot store what it is sent
// (a full disk): Raft's own commit index on a follower never runs ahead of
// its log.
type lagTracker struct {
	mu      sync.Mutex
	commit  uint64
	samples []lagSample // ascending commit, one per sampleEvery at most
}

type lagSample struct {
	commit uint64
	at     time.Time
}

const (
	lagSampleEvery = 50 * time.Millisecond
	lagMaxSamples  = 4096
)

// saw records a leader commit index announced at now.
func (l *lagTracker) saw(commit uint64, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if commit <= l.commit {
		return
	}
	l.commit = commit
	if n := len(l.samples); n > 0 && now.Sub(l.samples[n-1].at) < lagSampleEvery {
		l.samples[n-1].commit = commit // keep the older time: the bound stays safe
		return
	}
	if len(l.samples) == lagMaxSamples {
		// Merge the two oldest: the older time stays, a safe bound.
		l.samples[1].at = l.samples[0].at
		l.samples = l.samples[1:]
	}
	l.samples = append(l.samples, lagSample{commit: commit, at: now})
}

// behind reports the newest announced commit and how long ago the oldest
// announced commit above applied was first seen.
func (l *lagTracker) behind(applied uint64, now time.Time) (commit uint64, age time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := 0
	for i < len(l.samples) && l.samples[i].commit <= applied {
		i++
	}
	l.samples = l.samples[i:]
	if len(l.samples) > 0 {
		age = now.Sub(l.samples[0].at)
	}
	return l.commit, age
}

// observedTransport passes Raft's RPCs through, noting the commit index
// of every AppendEntries a leader sends (heartbeats carry none and take
// the transport's fast path).
type observedTransport struct {
	serialTransport
	rpcs  chan raft.RPC
	peers peerTracker
}

// Consumer returns the channel Raft reads its RPCs from.
func (t *observedTransport) Consumer() <-chan raft.RPC { return t.rpcs }

// relay forwards RPCs from the network transport to Raft until done.
func (t *observedTransport) relay(lag *lagTracker, done <-chan struct{}) {
	in := t.NetworkTransport.Consumer()
	for {
		select {
		case rpc := <-in:
			if ae, ok := rpc.Command.(*raft.AppendEntriesRequest); ok && ae.LeaderCommitIndex > 0 {
				lag.saw(ae.LeaderCommitIndex, time.Now())
			}
			select {
			case t.rpcs <- rpc:
			case <-done:
				return
			}
		case <-done:
			return
		}
	}
}

// watchedStore is the BoltDB store with its last write error remembered:
// a follower that cannot persist (a full disk) answers the leader with a
// failure but otherwise looks healthy.
type watchedStore struct {
	*raftboltdb.BoltStore
	mu  sync.Mutex
	err error
}

func (s *watchedStore) note(err error) error {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
	return err
}

// StoreLog stores one entry.
func (s *watchedStore) StoreLog(l *raft.Log) error { return s.note(s.BoltStore.StoreLog(l)) }

// StoreLogs stores entries.
func (s *watchedStore) StoreLogs(ls []*raft.Log) error { return s.note(s.BoltStore.StoreLogs(ls)) }

// Set stores a stable value.
func (s *watchedStore) Set(k, v []byte) error { return s.note(s.BoltStore.Set(k, v)) }

// SetUint64 stores a stable number.
func (s *watchedStore) SetUint64(k []byte, v uint64) error {
	return s.note(s.BoltStore.SetUint64(k, v))
}

func (s *watchedStore) lastErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Health reports whether this node can serve reads and requests, and why
// not: no known leader, a failed write of its log, silence from the
// leader past the limit, or more than the configured number of entries
// (or seconds) behind the leader's commit index.
func (n *Node) Health() Health {
	now := time.Now()
	h := Health{Applied: n.raft.AppliedIndex(), PersistErr: n.store.lastErr()}
	h.Leader, _ = n.Leader()
	if n.raft.State() == raft.Leader {
		h.LeaderCommit = n.raft.CommitIndex()
	} else {
		h.LeaderCommit, h.Behind = n.lag.behind(h.Applied, now)
		if last := n.raft.LastContact(); !last.IsZero() {
			h.LastContact = now.Sub(last)
		}
	}
	if h.LeaderCommit > h.Applied {
		h.BehindEntries = h.LeaderCommit - h.Applied
	}
	switch {
	case h.PersistErr != nil:
		h.Reason = fmt.Sprintf("cannot write the Raft log: %v", h.PersistErr)
	case h.Leader == "":
		h.Reason = "no leader"
	case n.raft.State() != raft.Leader && h.LastContact > n.cfg.MaxLag:
		h.Reason = fmt.Sprintf("no contact with the leader for %s (limit %s)", h.LastContact.Round(time.Millisecond), n.cfg.MaxLag)
	case h.BehindEntries > n.cfg.MaxLagEntries:
		h.Reason = fmt.Sprintf("applied index %d is %d entries behind the leader's commit index %d (limit %d)", h.Applied, h.BehindEntries, h.LeaderCommit, n.cfg.MaxLagEntries)
	case h.Behind > n.cfg.MaxLag:
		h.Reason = fmt.Sprintf("applied index %d is behind the leader by %s (limit %s)", h.Applied, h.Behind.Round(time.Millisecond), n.cfg.MaxLag)
	default:
		h.Ready = true
	}
	return h
}

// peerTracker records, on the leader, the last successful AppendEntries
// (heartbeats included) or InstallSnapshot answer of each peer and the
// last log index it reported: the leader's view of who is alive and how
// far each follower's log trails its own.
type peerTracker struct {
	mu    sync.Mutex
	peers map[raft.ServerID]PeerContact
}

// PeerContact is what the leader last heard from a peer.
type PeerContact struct {
	LastContact time.Time // zero: never, since this node started
	LastLog     uint64    // the peer's last log index in that answer
}

func (p *peerTracker) contact(id raft.ServerID, lastLog uint64, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.peers == nil {
		p.peers = map[raft.ServerID]PeerContact{}
	}
	c := p.peers[id]
	c.LastContact = now
	if lastLog > 0 {
		c.LastLog = lastLog
	}
	p.peers[id] = c
}

func (p *peerTracker) get(id raft.ServerID) PeerContact {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peers[id]
}

// AppendEntries sends entries or a heartbeat, noting the peer's answer.
func (t *observedTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	err := t.NetworkTransport.AppendEntries(id, target, args, resp)
	if err == nil {
		t.peers.contact(id, resp.LastLog, time.Now())
	}
	return err
}

// InstallSnapshot sends a snapshot, noting the peer's answer.
func (t *observedTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	err := t.NetworkTransport.InstallSnapshot(id, target, args, resp, data)
	if err == nil && resp.Success {
		t.peers.contact(id, args.LastLogIndex, time.Now())
	}
	return err
}

// Peer is one server of the Raft configuration as this node sees it.
type Peer struct {
	ID, Address string
	Voter       bool
	Leader      bool
	// Known is false when this node does not lead (only the leader hears
	// from every peer) or has not heard from the peer since it started.
	Known bool
	// LastContact is how long ago the leader last heard from the peer.
	LastContact time.Duration
	// Lag is how many entries the peer's log trails the leader's, known
	// (LagKnown) once the leader has heard from the peer since it leads.
	Lag      uint64
	LagKnown bool
	// Reachable: the leader itself, or a peer heard from within the
	// election timeout.
	Reachable bool
}

// Peers lists the Raft configuration with, on the leader, each peer's
// last contact and replication lag.
func (n *Node) Peers() ([]Peer, uint64, error) {
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return nil, 0, err
	}
	leaderID, _ := n.Leader()
	leading := n.raft.State() == raft.Leader
	last := n.raft.LastIndex()
	var since time.Time
	n.mu.Lock()
	if n.lead != nil {
		since = n.lead.since
	}
	n.mu.Unlock()
	now := time.Now()
	var out []Peer
	for _, s := range cf.Configuration().Servers {
		p := Peer{ID: string(s.ID), Address: string(s.Address), Voter: s.Suffrage == raft.Voter, Leader: string(s.ID) == leaderID}
		switch {
		case p.ID == n.cfg.ID && leading:
			p.Known, p.Reachable, p.LagKnown = true, true, true
		case leading:
			c := n.obs.peers.get(s.ID)
			heard := c.LastContact
			if heard.Before(since) {
				// Not heard from since this node leads: silent for at
				// least that long (unknown until an election timeout).
				heard = since
			}
			p.LastContact = now.Sub(heard)
			p.Known = !c.LastContact.IsZero() || p.LastContact > n.cfg.ElectionTimeout
			p.Reachable = p.LastContact <= n.cfg.ElectionTimeout
			if !c.LastContact.IsZero() && !c.LastContact.Before(since) {
				p.LagKnown = true
				if last > c.LastLog {
					p.Lag = last - c.LastLog
				}
			}
		}
		out = append(out, p)
	}
	return out, cf.Index(), nil
}

// LastLeaderContact is how long ago this follower last heard from the
// leader (0 on the leader or before any contact).
func (n *Node) LastLeaderContact() time.Duration {
	if n.raft.State() == raft.Leader {
		return 0
	}
	if last := n.raft.LastContact(); !last.IsZero() {
		return time.Since(last)
	}
	return 0
}
