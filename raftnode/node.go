// Package raftnode wires barista's state machine into hashicorp/raft: the
// BoltDB log and stable store, the file snapshot store, the TCP (or TLS)
// transport, bootstrap, join and removal, cluster-time stamping, and the
// leader-only loops, which start after a barrier when this node gains
// leadership and stop, waited for, when it loses it.
package raftnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
	"github.com/baristahq/barista/snapshot"
)

// Config configures a node. DefaultConfig fills every field but the
// node's identity and addresses.
type Config struct {
	ID       string
	DataDir  string
	RaftAddr string // bind address of the Raft transport
	GRPCAddr string // bind address of the gRPC services
	// RaftAdvertise and GRPCAdvertise are the addresses other members and
	// clients use to reach this node, when they differ from the bind
	// addresses (a container binds 0.0.0.0 and is reached by its stable
	// name). Empty: the bind address.
	RaftAdvertise string
	GRPCAdvertise string
	HTTPAddr      string

	// Bootstrap makes this node a one-voter cluster if it has no state.
	Bootstrap bool
	// Seed is the configuration the first leader of a never-configured
	// cluster proposes. A node never applies it on its own.
	Seed fsm.Config

	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration // at most HeartbeatTimeout; 0: DefaultLeaderLease, or HeartbeatTimeout if shorter
	CommitTimeout      time.Duration
	// EntriesInFlight is how many log entries of coalesced proposals the
	// leader has outstanding at once (0: DefaultEntriesInFlight).
	EntriesInFlight   uint64
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
	// PruneInterval is how often the leader checks for prunable jobs,
	// events and keys.
	PruneInterval time.Duration
	// MaxLagEntries and MaxLag bound how far behind the leader's commit
	// index (in entries, or in time since the leader committed the oldest
	// entry not applied here) and how long without contact a follower may
	// be and still report itself ready (/readyz, gRPC health).
	MaxLagEntries uint64
	MaxLag        time.Duration

	// StreamLayer replaces the plain TCP transport (mutual TLS).
	StreamLayer raft.StreamLayer
	// RaftListener, if set (and StreamLayer is not), is the plain TCP
	// Raft listener, already bound to RaftAddr; the node closes it.
	RaftListener net.Listener
	Logger       hclog.Logger
	// ClockOffset shifts this node's wall clock, for tests that show a
	// skewed clock cannot move cluster time.
	ClockOffset time.Duration
	// FeatureLevel is the highest cluster feature level this node reports
	// that it understands (0: fsm.MaxFeatureLevel). Tests of upgrades set
	// a lower one to play an older build.
	FeatureLevel uint32
}

// DefaultConfig returns LAN defaults: heartbeat and election timeouts of
// 500 ms (a leader failure is detected in about a second), a 250 ms
// leader lease, a snapshot every 8192 entries or 2 minutes, and 10240
// trailing log entries. Validate lists every field's limits.
func DefaultConfig() Config {
	return Config{
		Seed:               fsm.SeedConfig(),
		HeartbeatTimeout:   500 * time.Millisecond,
		ElectionTimeout:    500 * time.Millisecond,
		LeaderLeaseTimeout: 0, // DefaultLeaderLease, at most HeartbeatTimeout
		CommitTimeout:      20 * time.Millisecond,
		EntriesInFlight:    DefaultEntriesInFlight,
		SnapshotThreshold:  8192,
		SnapshotInterval:   2 * time.Minute,
		TrailingLogs:       10240,
		PruneInterval:      10 * time.Second,
		MaxLagEntries:      1000,
		MaxLag:             5 * time.Second,
	}
}

// Errors callers branch on.
var (
	// ErrNotLeader: this node is not the leader (or not ready yet).
	ErrNotLeader = errors.New("not the leader")
	// ErrMaybeCommitted: leadership was lost while the entry was in
	// flight; it may or may not have been committed. Retrying is safe:
	// every command is idempotent or fenced.
	ErrMaybeCommitted = errors.New("leadership lost; the command may or may not have been applied")
	// ErrNotMember: a joining node's Raft address did not answer as a
	// member (over TLS: its certificate lacks the member name).
	ErrNotMember = errors.New("cannot speak Raft with the joining node")
)

// LeaderLoop is a function that runs only while this node leads. It must
// return soon after ctx is done.
type LeaderLoop func(ctx context.Context)

// Node is one barista server's Raft member.
type Node struct {
	cfg     Config
	log     hclog.Logger
	FSM     *fsm.FSM
	Metrics *Metrics
	raft    *raft.Raft
	trans   *raft.NetworkTransport
	obs     *observedTransport // trans as Raft uses it
	store   *watchedStore
	lag     lagTracker
	snaps   *raft.FileSnapshotStore

	notify    chan bool
	done      chan struct{}
	wg        sync.WaitGroup
	proposals chan *proposal

	mu        sync.Mutex
	prober    LevelProber
	loops     []Loop
	lead      *leadership
	stampBase sfq.Time
	stampMono time.Time
	stampOK   bool
	// sentStamp is the stamp of the newest envelope this leader handed
	// to Raft (Stamped).
	sentStamp sfq.Time
	shutdown  bool
}

type leadership struct {
	since   time.Time // when this node learned it leads
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	started bool // the leader loops run (guarded by Node.mu)
}

// New opens (or creates) the node's data directory and starts Raft. It
// refuses a configuration that Validate refuses, refuses to start if the
// newest snapshot is unusable, or if the log store is damaged or does not
// hold everything the node applied since that snapshot (a *RefusedError).
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: cfg.Logger, notify: make(chan bool, 1), done: make(chan struct{}), Metrics: newMetrics(), proposals: make(chan *proposal, 8192)}
	var err error
	if n.snaps, err = raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, 2, cfg.Logger.Named("snapshot")); err != nil {
		return nil, err
	}
	meta, restored, err := snapshot.LoadNewest(n.snaps, cfg.DataDir)
	if err != nil {
		return nil, err
	}
	n.FSM = fsm.New()
	if restored != nil {
		n.FSM.Adopt(restored)
		n.log.Info("restored state from snapshot", "id", meta.ID, "index", meta.Index)
	}
	bs, err := n.openLog(meta)
	if err != nil {
		return nil, err
	}
	n.store = &watchedStore{BoltStore: bs}
	if err := n.openTransport(); err != nil {
		n.store.Close()
		return nil, err
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.leaderLease()
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	rc.NotifyCh = n.notify
	rc.BatchApplyCh = true
	rc.NoSnapshotRestoreOnStart = true // LoadNewest restored it, checked
	rc.Logger = newRaftLogger(cfg.Logger.Named("raft"), n.FSM.Members)
	if err := raft.ValidateConfig(rc); err != nil {
		n.closeStores()
		return nil, fmt.Errorf("raft config: %w", err)
	}
	hasState, err := raft.HasExistingState(n.store, n.store, n.snaps)
	if err != nil {
		n.closeStores()
		return nil, err
	}
	trans := &observedTransport{serialTransport: serialTransport{n.trans}, rpcs: make(chan raft.RPC)}
	n.obs = trans
	if n.raft, err = newRaft(rc, &machine{FSM: n.FSM, node: n}, n.store, n.snaps, trans); err != nil {
		n.closeStores()
		return nil, &RefusedError{NodeID: cfg.ID, DataDir: cfg.DataDir, Err: err}
	}
	if cfg.Bootstrap && !hasState {
		boot := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: rc.LocalID, Address: n.trans.LocalAddr()}}}
		if err := n.raft.BootstrapCluster(boot).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			n.Shutdown()
			return nil, fmt.Errorf("bootstrap: %w", err)
		}
		n.log.Info("bootstrapped a new cluster", "id", cfg.ID, "raft_addr", n.trans.LocalAddr())
	}
	n.wg.Add(4)
	go func() { defer n.wg.Done(); trans.relay(&n.lag, n.done) }()
	go n.coalesce()
	go n.watchLeadership()
	go func() { defer n.wg.Done(); n.observeLeaders(n.done) }()
	return n, nil
}

// serialTransport is the Raft transport without pipelined replication:
// hashicorp/raft's pipeline can wedge replication to a follower whose
// answers stop (the send loop parks on a full in-flight queue that nothing
// drains, and only a leader restart clears it; hashicorp/raft#612). Each
// follower then gets one AppendEntries at a time, each carrying up to
// MaxAppendEntries entries, which the command coalescing fills.
type serialTransport struct{ *raft.NetworkTransport }

func (serialTransport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

func (n *Node) openTransport() error {
	layer := n.cfg.StreamLayer
	if layer == nil {
		ln := n.cfg.RaftListener
		if ln == nil {
			var err error
			if ln, err = net.Listen("tcp", n.cfg.RaftAddr); err != nil {
				return fmt.Errorf("raft transport on %s: %w", n.cfg.RaftAddr, err)
			}
		}
		if tcp, ok := ln.Addr().(*net.TCPAddr); (!ok || tcp.IP.IsUnspecified()) && n.cfg.RaftAdvertise == "" {
			ln.Close()
			return fmt.Errorf("--raft-addr %s: not an address other members can reach; set --raft-advertise to the address they use", n.cfg.RaftAddr)
		}
		layer = tcpLayer{ln}
	}
	if n.cfg.RaftAdvertise != "" {
		layer = advertisedLayer{StreamLayer: layer, addr: advertiseAddr(n.cfg.RaftAdvertise)}
	}
	n.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: layer, MaxPool: 5, Timeout: 10 * time.Second, Logger: n.log.Named("transport"),
	})
	return nil
}

// advertisedLayer is a stream layer that tells Raft another address than
// the one it listens on.
type advertisedLayer struct {
	raft.StreamLayer
	addr net.Addr
}

func (l advertisedLayer) Addr() net.Addr { return l.addr }

// advertiseAddr is a HOST:PORT given by the operator (a name or an IP).
type advertiseAddr string

func (a advertiseAddr) Network() string { return "tcp" }
func (a advertiseAddr) String() string  { return string(a) }

// AdvertisedGRPC is the gRPC address recorded in the member table.
func (c Config) AdvertisedGRPC() string {
	if c.GRPCAdvertise != "" {
		return c.GRPCAdvertise
	}
	return c.GRPCAddr
}

// AdvertisedRaft is the Raft address other members use.
func (c Config) AdvertisedRaft() string {
	if c.RaftAdvertise != "" {
		return c.RaftAdvertise
	}
	return c.RaftAddr
}

// tcpLayer is the plain TCP Raft stream layer over a bound listener.
type tcpLayer struct{ net.Listener }

func (l tcpLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(address), timeout)
}

func (n *Node) closeStores() {
	if n.trans != nil {
		n.trans.Close()
	}
	if n.store != nil {
		n.store.Close()
	}
}

// Loop is a leader-only loop: Run returns when its context (the
// leadership) ends.
type Loop struct {
	Name string
	Run  LeaderLoop
}

// SetLeaderLoops names every loop that runs only while this node leads
// (package leader lists them); they start in this order after the
// leadership's barrier and setup, under one context that ends with the
// leadership. Call it once, before the node can matter as a leader; if
// it already leads, the loops start at once.
func (n *Node) SetLeaderLoops(loops ...Loop) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.loops = append(n.loops[:0:0], loops...)
	if l := n.lead; l != nil && l.started {
		for _, loop := range loops {
			n.startLoop(l, loop.Name, loop.Run)
		}
	}
}

// startLoop runs a loop under a leadership; callers hold n.mu.
func (n *Node) startLoop(l *leadership, name string, loop LeaderLoop) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		loop(l.ctx)
		n.log.Debug("leader loop stopped", "loop", name)
	}()
}

// Raft exposes the Raft instance (status, configuration).
func (n *Node) Raft() *raft.Raft { return n.raft }

// ID returns the node's ID.
func (n *Node) ID() string { return n.cfg.ID }

// Config returns the node's configuration.
func (n *Node) Config() Config { return n.cfg }

// IsLeader reports whether this node leads and is ready to propose.
func (n *Node) IsLeader() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stampOK && n.raft.State() == raft.Leader
}

// Leader returns the current leader's ID and Raft address, if known.
func (n *Node) Leader() (id, raftAddr string) {
	addr, lid := n.raft.LeaderWithID()
	return string(lid), string(addr)
}

// Fatal returns a channel closed when the state machine hits an entry it
// cannot apply.
func (n *Node) Fatal() <-chan struct{} { return n.FSM.Fatal() }

func (n *Node) watchLeadership() {
	defer n.wg.Done()
	for {
		select {
		case leader := <-n.notify:
			if leader {
				n.gainLeadership()
			} else {
				n.loseLeadership()
			}
		case <-n.done:
			n.loseLeadership()
			return
		}
	}
}

// gainLeadership runs a barrier, then (in order) stamps cluster time from
// the applied clock, seeds the configuration of a never-configured
// cluster, records this node's addresses, grants every live lease a fresh
// lease_timeout, and starts the leader loops.
func (n *Node) gainLeadership() {
	n.mu.Lock()
	if n.lead != nil {
		n.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &leadership{ctx: ctx, cancel: cancel, since: time.Now()}
	n.lead = l
	n.mu.Unlock()

	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		start := time.Now()
		if err := n.raft.Barrier(30 * time.Second).Error(); err != nil {
			n.log.Warn("barrier after gaining leadership failed", "error", err)
			return
		}
		clock, index := n.FSM.Clock()
		if clock == 0 {
			// A brand-new cluster: cluster time starts at this wall clock,
			// once. From here on only monotonic durations move it.
			clock = sfq.Time(n.wallNow().UnixMilli())
		}
		n.mu.Lock()
		if ctx.Err() != nil {
			n.mu.Unlock()
			return
		}
		n.stampBase, n.stampMono, n.stampOK, n.sentStamp = clock, time.Now(), true, 0
		n.mu.Unlock()
		n.log.Info("leadership gained", "applied_index", index, "cluster_time_ms", int64(clock), "barrier", time.Since(start).Round(time.Millisecond))

		var setup []*clusterpb.Command
		level := n.FSM.Level()
		if own := n.FeatureLevel(); level < own {
			// The only voter (a new cluster) needs to ask nobody.
			if voters, err := n.voters(); err == nil && len(voters) == 1 && voters[0] == n.cfg.ID {
				setup = append(setup, &clusterpb.Command{Cmd: &clusterpb.Command_SetFeatureLevel{SetFeatureLevel: &clusterpb.SetFeatureLevel{Level: own}}})
				level = own
			}
		}
		if !n.FSM.Configured() {
			setup = append(setup, n.seedCommand(level))
		}
		if m, ok := n.FSM.Member(n.cfg.ID); !ok || m.RaftAddr != string(n.trans.LocalAddr()) || m.GRPCAddr != n.cfg.AdvertisedGRPC() || m.HTTPAddr != n.cfg.HTTPAddr {
			setup = append(setup, &clusterpb.Command{Cmd: &clusterpb.Command_MemberUpsert{MemberUpsert: &clusterpb.MemberUpsert{
				Id: n.cfg.ID, RaftAddr: string(n.trans.LocalAddr()), GrpcAddr: n.cfg.AdvertisedGRPC(), HttpAddr: n.cfg.HTTPAddr}}})
		}
		setup = append(setup, &clusterpb.Command{Cmd: &clusterpb.Command_GrantLeases{GrantLeases: &clusterpb.GrantLeases{}}})
		_, results, err := n.Propose(ctx, setup)
		if err != nil {
			n.log.Warn("leader setup failed", "error", err)
			return
		}
		for i, r := range results {
			if r.Code != fsm.OK {
				n.log.Error("leader setup command refused", "command", i, "error", r.Msg)
			}
		}
		n.mu.Lock()
		if ctx.Err() == nil {
			l.started = true
			for _, loop := range n.loops {
				n.startLoop(l, loop.Name, loop.Run)
			}
		}
		n.mu.Unlock()
	}()
}

func (n *Node) loseLeadership() {
	n.mu.Lock()
	l := n.lead
	n.lead = nil
	n.stampOK = false
	n.mu.Unlock()
	if l == nil {
		return
	}
	l.cancel()
	l.wg.Wait()
	n.log.Info("leadership lost; leader loops stopped")
}

func (n *Node) wallNow() time.Time { return time.Now().Add(n.cfg.ClockOffset) }

// stamp returns the current cluster time: the FSM clock at the barrier
// plus the monotonic time elapsed since. It never reads the wall clock.
func (n *Node) stamp() (int64, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stampLocked()
}

func (n *Node) stampLocked() (int64, bool) {
	if !n.stampOK {
		return 0, false
	}
	return int64(n.stampBase) + time.Since(n.stampMono).Milliseconds(), true
}

// stampEntry is stamp for an envelope about to be handed to Raft: it
// records the stamp for Stamped.
func (n *Node) stampEntry() (int64, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	t, ok := n.stampLocked()
	if ok {
		n.sentStamp = max(n.sentStamp, sfq.Time(t))
	}
	return t, ok
}

// Stamped returns the newest cluster time an entry carries that this
// node has applied or, leading, handed to Raft: a leader need commit no
// clock tick before Stamped + clock_tick (leader.ClockTicks).
func (n *Node) Stamped() sfq.Time {
	clock, _ := n.FSM.Clock()
	n.mu.Lock()
	defer n.mu.Unlock()
	return max(clock, n.sentStamp)
}

// ClusterNow returns the current cluster time on the leader (the clock
// the next proposal would be stamped with).
func (n *Node) ClusterNow() (sfq.Time, bool) {
	t, ok := n.stamp()
	return sfq.Time(t), ok
}

// Join adds a voter, or fixes its address, and records its member
// addresses. Joining a member already present with the same address is a
// no-op. Leader only.
func (n *Node) Join(ctx context.Context, id, raftAddr, grpcAddr, httpAddr string) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return err
	}
	present := false
	for _, s := range cf.Configuration().Servers {
		if string(s.ID) == id && string(s.Address) == raftAddr && s.Suffrage == raft.Voter {
			present = true
		}
	}
	if !present {
		// Before the configuration changes (a stale entry of the same ID
		// is removed below): a voter this leader cannot speak Raft with
		// only costs the quorum, and one that does not understand the
		// cluster's feature level would apply its entries wrongly.
		if err := n.checkMember(raftAddr); err != nil {
			return err
		}
		if err := n.checkJoinLevel(ctx, id, grpcAddr); err != nil {
			return err
		}
	}
	for _, s := range cf.Configuration().Servers {
		switch {
		case string(s.ID) == id && string(s.Address) == raftAddr && s.Suffrage == raft.Voter:
		case string(s.ID) == id || string(s.Address) == raftAddr:
			if err := n.raft.RemoveServer(s.ID, 0, 30*time.Second).Error(); err != nil {
				return fmt.Errorf("removing stale entry %s@%s: %w", s.ID, s.Address, err)
			}
		}
	}
	if !present {
		if err := n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, 30*time.Second).Error(); err != nil {
			return fmt.Errorf("adding voter %s@%s: %w", id, raftAddr, err)
		}
		n.log.Info("added voter", "id", id, "raft_addr", raftAddr)
	}
	if m, ok := n.FSM.Member(id); !ok || m.RaftAddr != raftAddr || m.GRPCAddr != grpcAddr || m.HTTPAddr != httpAddr {
		_, res, err := n.Propose(ctx, []*clusterpb.Command{{Cmd: &clusterpb.Command_MemberUpsert{MemberUpsert: &clusterpb.MemberUpsert{Id: id, RaftAddr: raftAddr, GrpcAddr: grpcAddr, HttpAddr: httpAddr}}}})
		if err != nil {
			return err
		}
		return res[0].Err()
	}
	return nil
}

// checkMember dials a joining node's Raft address through the stream
// layer: over TLS the handshake proves that its certificate carries the
// member name. Without TLS there is nothing to prove.
func (n *Node) checkMember(raftAddr string) error {
	if n.cfg.StreamLayer == nil {
		return nil
	}
	c, err := n.cfg.StreamLayer.Dial(raft.ServerAddress(raftAddr), 5*time.Second)
	if err != nil {
		return fmt.Errorf("%w at %s: %v", ErrNotMember, raftAddr, err)
	}
	return c.Close()
}

// RemovePeer removes a server from the configuration and its member
// record. Leader only.
func (n *Node) RemovePeer(ctx context.Context, id string) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	if err := n.raft.RemoveServer(raft.ServerID(id), 0, 30*time.Second).Error(); err != nil {
		return err
	}
	n.log.Info("removed peer", "id", id)
	_, res, err := n.Propose(ctx, []*clusterpb.Command{{Cmd: &clusterpb.Command_MemberRemove{MemberRemove: &clusterpb.MemberRemove{Id: id}}}})
	if err != nil {
		return err
	}
	return res[0].Err()
}

// TransferLeadership hands leadership to id (any voter if empty).
//
// It returns the new leader's ID once this node has heard of it (Raft's
// transfer ends when this node steps down, before the new leader is
// known here), or the error of ctx if it ends first: the transfer itself
// was done.
func (n *Node) TransferLeadership(ctx context.Context, id string) (string, error) {
	var target raft.ServerAddress
	if id != "" {
		for _, s := range n.raft.GetConfiguration().Configuration().Servers {
			if string(s.ID) == id {
				target = s.Address
			}
		}
		if target == "" {
			return "", fmt.Errorf("no server %q in the configuration", id)
		}
	}
	ch := make(chan raft.Observation, 4)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(obs)
	defer n.raft.DeregisterObserver(obs)
	var f raft.Future
	if id == "" {
		f = n.raft.LeadershipTransfer()
	} else {
		f = n.raft.LeadershipTransferToServer(raft.ServerID(id), target)
	}
	if err := f.Error(); err != nil {
		return "", err
	}
	for {
		if lid, _ := n.Leader(); lid != "" && lid != n.cfg.ID {
			return lid, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// InCluster reports whether this node's Raft configuration holds any
// server: false until it bootstraps, is joined, or installs a snapshot.
func (n *Node) InCluster() bool {
	f := n.raft.GetConfiguration()
	return f.Error() == nil && len(f.Configuration().Servers) > 0
}

// BootstrapIfNew makes this node a one-voter cluster if it has no Raft
// state at all (never bootstrapped, never joined, nothing installed); it
// reports whether it did.
func (n *Node) BootstrapIfNew() (bool, error) {
	has, err := raft.HasExistingState(n.store, n.store, n.snaps)
	if err != nil || has {
		return false, err
	}
	boot := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(n.cfg.ID), Address: n.trans.LocalAddr()}}}
	if err := n.raft.BootstrapCluster(boot).Error(); err != nil {
		if errors.Is(err, raft.ErrCantBootstrap) {
			return false, nil
		}
		return false, err
	}
	n.log.Info("bootstrapped a new cluster", "id", n.cfg.ID, "raft_addr", n.trans.LocalAddr())
	return true, nil
}

// Shutdown stops the node. A leader of a multi-voter cluster first hands
// leadership over. The applied index and state hash are recorded in the
// data directory for barista replay.
func (n *Node) Shutdown() error {
	n.mu.Lock()
	if n.shutdown {
		n.mu.Unlock()
		return nil
	}
	n.shutdown = true
	n.mu.Unlock()
	n.StepDown()
	close(n.done)
	n.wg.Wait()
	// Closing the transport before waiting for Raft's goroutines releases
	// a replication goroutine blocked on a peer that does not answer (cut
	// off one way); the stores close only after they have all ended.
	shut := n.raft.Shutdown()
	n.trans.Close()
	err := shut.Error()
	if n.FSM.FatalErr() == nil {
		hash, _ := n.FSM.Hash()
		index := n.raft.AppliedIndex()
		if werr := snapshot.WriteApplied(n.cfg.DataDir, index, hash, "shutdown"); werr != nil {
			n.log.Error("recording the applied index failed", "error", werr)
		} else {
			n.log.Info("recorded applied index at shutdown", "index", index, "hash", fmt.Sprintf("%x", hash))
		}
	}
	n.closeStores()
	return err
}

// StepDown hands leadership to another voter if this node leads (the
// first step of a clean shutdown: the cluster keeps serving while this
// node closes its streams).
func (n *Node) StepDown() {
	if n.raft.State() != raft.Leader || len(n.raft.GetConfiguration().Configuration().Servers) < 2 {
		return
	}
	if err := n.raft.LeadershipTransfer().Error(); err != nil {
		n.log.Warn("leadership transfer before shutdown failed", "error", err)
	}
}

// Snapshot forces a snapshot now.
func (n *Node) Snapshot() error { return n.raft.Snapshot().Error() }

// machine adapts the FSM to raft.FSM: Apply and ApplyBatch come from the
// FSM; snapshots use the snapshot package's format.
type machine struct {
	*fsm.FSM
	node *Node
}

// ApplyBatch applies a batch, timing it.
func (m *machine) ApplyBatch(logs []*raft.Log) []any {
	start := time.Now()
	out := m.FSM.ApplyBatch(logs)
	m.node.Metrics.ApplyBatch.Observe(time.Since(start).Seconds())
	return out
}

// Snapshot freezes the state (O(table chunks)); Persist writes it while
// Apply goes on.
func (m *machine) Snapshot() (raft.FSMSnapshot, error) {
	start := time.Now()
	v, err := m.FSM.Freeze()
	if err != nil {
		return nil, err
	}
	m.node.Metrics.SnapshotFreeze.Observe(time.Since(start).Seconds())
	m.node.log.Debug("snapshot frozen", "index", v.Index, "pause", time.Since(start))
	return &persister{view: v, node: m.node}, nil
}

// Restore replaces the state with an installed snapshot.
func (m *machine) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	index, err := snapshot.Read(rc, m.FSM)
	if err != nil {
		m.node.log.Error("restoring an installed snapshot failed", "error", err)
		return err
	}
	m.node.log.Info("installed snapshot restored", "index", index)
	return nil
}

type persister struct {
	view *fsm.View
	node *Node
}

func (p *persister) Persist(sink raft.SnapshotSink) error {
	start := time.Now()
	hash, err := snapshot.Write(sink, p.view)
	if err != nil {
		sink.Cancel()
		return err
	}
	if err := sink.Close(); err != nil {
		return err
	}
	p.node.Metrics.SnapshotPersist.Observe(time.Since(start).Seconds())
	p.node.log.Info("snapshot written", "id", sink.ID(), "index", p.view.Index, "took", time.Since(start).Round(time.Millisecond))
	// After a restored backup, raft's index for the snapshot is ahead of the
	// state's own (the log has a hole); record the larger.
	index := p.view.Index
	var term, sinkIndex uint64
	var ms int64
	if _, err := fmt.Sscanf(sink.ID(), "%d-%d-%d", &term, &sinkIndex, &ms); err == nil && sinkIndex > index {
		index = sinkIndex
	}
	if err := snapshot.WriteApplied(p.node.cfg.DataDir, index, hash, "snapshot"); err != nil {
		p.node.log.Error("recording the applied index failed", "error", err)
	}
	return nil
}

func (p *persister) Release() {}

// ConsistentRead returns nil when a read of the local state machine is
// linearizable: this node leads, its barrier has run (every entry
// committed by earlier leaders is applied), and a quorum still follows it
// (VerifyLeader). Every write this leader acknowledged was applied before
// its acknowledgement, so the local state includes it.
func (n *Node) ConsistentRead(ctx context.Context) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	done := make(chan error, 1)
	go func() { done <- n.raft.VerifyLeader().Error() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%w: %v", ErrNotLeader, err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// RestoreBackup replaces the cluster's state with a snapshot file (leader
// only): Raft installs it with an index past its log, so followers and new
// members get it by InstallSnapshot. The state installed is the file's,
// with the numbers it hands out raised above those this cluster handed
// out (fsm.FSM.RaiseNumbers, read after a barrier, so every entry
// committed before the restore counts): a job ID or an event seq a client
// holds never names something else after the restore.
func (n *Node) RestoreBackup(r io.Reader, size int64) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	restored := fsm.New()
	if _, err := snapshot.Read(r, restored); err != nil {
		return err
	}
	if err := n.raft.Barrier(30 * time.Second).Error(); err != nil {
		return err
	}
	if err := restored.RaiseNumbers(n.FSM.HandedOut()); err != nil {
		return err
	}
	v, err := restored.Freeze()
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(n.cfg.DataDir, "restore-raised-*.bin")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if _, err := snapshot.Write(tmp, v); err != nil {
		return err
	}
	end, err := tmp.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	return n.raft.Restore(&raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: end}, tmp, 5*time.Minute)
}
