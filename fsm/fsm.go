// Package fsm is barista's replicated state machine: the commands of the
// Raft log, their Apply, the job table (through the scheduling core), the
// event log, idempotency keys, workers and members, and the state hash.
//
// Apply is deterministic: it reads only the command and the replicated
// state — never a clock, a random source, the environment, or a map's
// iteration order — so every node that applies the same log holds
// byte-identical state and reports the same Hash. Time comes from the
// leader's stamp on each entry: the FSM clock is max(previous, stamp).
//
// An entry that cannot be decoded, carries an unknown version, or makes
// Apply panic (a defect) latches a fatal state: no command is applied after it, snapshots fail from then
// on (so the entry is never compacted away), and Fatal reports it so the
// node can stop loudly.
package fsm

import (
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/baristahq/barista/fsm/fairness"
	"github.com/baristahq/barista/internal/pbcodec"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// Version is the command encoding version this build proposes and
// understands.
const Version = 1

// FSM is the replicated state machine. Its methods are safe for
// concurrent use: Apply takes the write lock, readers take the read lock.
type FSM struct {
	mu sync.RWMutex

	sched      *sfq.Scheduler
	cfg        Config
	configured bool   // a SetConfig has been applied (the seed is in)
	level      uint32 // the cluster's feature level (level.go)
	clock      sfq.Time
	lastIndex  uint64 // index of the last applied entry
	lastWall   int64  // the leader's wall clock on that entry (display; 0 = none)

	members []Member           // sorted by ID
	workers map[string]*Worker // copied (sorted) into snapshots

	events    eventLog // by Seq
	nextEvent uint64
	// kept holds, by tenant index, the events the count pruned from the
	// log that their tenant keeps (eventkeep.go; feature level 8); keptN
	// counts them.
	kept     map[uint32]*keptLog
	keptN    int
	keys     sfq.Vector[keyEntry] // idempotency keys by insertion seq
	nextKey  uint64
	keyIndex keyIndex // derived: (tenant, key) -> seq of its entry

	// Beside the core, for the metrics exposition (metrics.go).
	exported  []uint32 // sorted live tenant indexes; replaced, never written
	tierCarry [sfq.NumTiers]Counters

	// Webhook endpoints (webhook.go), sorted by tenant index; replaced,
	// never written in place. whSerial is the next secret version or
	// epoch (0: never used).
	webhooks []Webhook
	whSerial uint64
	// policies are the retry policies of kinds (kinds.go; feature level
	// 8), sorted by tenant then kind; replaced, never written in place.
	policies []KindPolicy
	// schedules are the tenants' schedules (schedule.go; feature level
	// 8) by serial, the order they were made in; schedSerial is the next
	// serial. schedIndex (tenant, name) -> serial and schedCount (the
	// schedules of each tenant) are derived from them, rebuilt on
	// restore. schedLog lists the serials of the schedules changed since
	// the change numbered schedLogBase (this node's, for its leader's
	// loop: ScheduleChanges).
	schedules    sfq.Vector[Schedule]
	schedSerial  uint64
	schedIndex   map[schedRef]uint64
	schedCount   map[uint32]uint32
	schedLog     []uint64
	schedLogBase uint64
	// fair is the fairness report's ledger (fairness.go): derived from
	// the entries applied since the state was created or loaded, in no
	// snapshot and no hash.
	fairs     []*fairness.Ledger // by pool
	fairSince sfq.Time

	fatal   error
	fatalCh chan struct{}
	// changed is closed and replaced after every applied entry (and when
	// the state is replaced), waking event watchers and the dispatcher.
	changed chan struct{}
	// replaced counts the replacements of the whole state (Adopt: a
	// snapshot installed, a backup restored). It is this node's, not the
	// replicated state's: readers that keep positions in the event log
	// compare it to know that the log they read may have gone back.
	replaced uint64

	hashIndex uint64
	hashValid bool
	hash      [32]byte
}

// Member is a node's addresses, replicated so that any node can reach the
// leader's gRPC service.
type Member struct {
	ID, RaftAddr, GRPCAddr, HTTPAddr string
}

// Worker is what the state machine remembers of a worker: its last
// dispatch (so that a retried Dispatch returns the same assignment) and
// whether it is drained.
type Worker struct {
	ID       string
	Pool     string // "" = default
	Size     sfq.Size
	Credit   uint64
	Job      sfq.JobID
	Attempt  uint32
	Drained  bool
	LastSeen sfq.Time
	// Runs is what the worker runs (nil: every job), as its last Hello
	// said, less what it said it does not run since (kinds.go; feature
	// level 8). It is replaced, never written in place.
	Runs *sfq.Runs
}

// New returns an empty state machine with the default configuration.
func New() *FSM {
	s, err := sfq.New(DefaultConfig().Sched)
	if err != nil {
		panic(err) // the defaults are valid; a test guards it
	}
	s.SetVersion1(true) // Level1
	cfg := DefaultConfig()
	cfg.DefaultMaxQueued, cfg.MaxQueuedBytes = 0, 0          // none below Level6
	cfg.MaxTotalQueuedBytes = 0                              // none below Level7
	cfg.EventRetentionPerTenant, cfg.MaxWorkerRecords = 0, 0 // none below Level8
	return &FSM{
		sched:      s,
		level:      Level1,
		cfg:        cfg,
		workers:    map[string]*Worker{},
		schedIndex: map[schedRef]uint64{},
		schedCount: map[uint32]uint32{},
		keyIndex:   newKeyIndex(),
		nextEvent:  1,
		nextKey:    1,
		fatalCh:    make(chan struct{}),
		changed:    make(chan struct{}),
	}
}

// FatalError reports a log entry the state machine could not apply.
type FatalError struct {
	Index uint64
	Err   error
}

func (e *FatalError) Error() string {
	return fmt.Sprintf("fatal: log entry %d cannot be applied: %v; the node stops rather than skip it", e.Index, e.Err)
}

func (e *FatalError) Unwrap() error { return e.Err }

// ErrUnknownVersion marks an entry of a command version this build does
// not understand.
var ErrUnknownVersion = errors.New("unknown command version")

// ErrApplyPanic marks an entry whose Apply panicked: a defect, latched
// like an undecodable entry rather than crashing the node mid-entry.
var ErrApplyPanic = errors.New("applying the entry panicked")

// Fatal returns a channel closed when a fatal entry is applied.
func (f *FSM) Fatal() <-chan struct{} { return f.fatalCh }

// FatalErr returns the fatal error, if any.
func (f *FSM) FatalErr() error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.fatal
}

// latch records a fatal error; callers hold the write lock.
func (f *FSM) latch(err error) {
	if f.fatal == nil {
		f.fatal = &FatalError{Index: f.lastIndex, Err: err}
		close(f.fatalCh)
	}
}

// Encode marshals an envelope: protobuf's deterministic bytes, written by
// the generated code (pbcodec).
func Encode(env *clusterpb.Envelope) ([]byte, error) {
	return pbcodec.Marshal(env)
}

// Decode unmarshals an envelope and checks its version. It accepts and
// refuses what protobuf's decoder does (pbcodec). The commands share
// allocations (pbcodec.UnmarshalEnvelope): Apply keeps none of them.
func Decode(data []byte) (*clusterpb.Envelope, error) {
	env := &clusterpb.Envelope{}
	if err := pbcodec.UnmarshalEnvelope(data, env); err != nil {
		return nil, fmt.Errorf("undecodable entry (%d bytes): %w", len(data), err)
	}
	if env.Version != Version {
		return nil, fmt.Errorf("%w %d (this build understands %d)", ErrUnknownVersion, env.Version, Version)
	}
	return env, nil
}

// Apply implements raft.FSM. It returns []Result, one per command, or a
// *FatalError.
func (f *FSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applyLog(l)
}

// ApplyBatch implements raft.BatchingFSM: one lock for a batch of entries.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]any, len(logs))
	for i, l := range logs {
		if l.Type == raft.LogCommand {
			out[i] = f.applyLog(l)
		}
	}
	return out
}

func (f *FSM) applyLog(l *raft.Log) any {
	if f.fatal != nil {
		return f.fatal
	}
	env, err := Decode(l.Data)
	if err != nil {
		f.fatal = &FatalError{Index: l.Index, Err: err}
		close(f.fatalCh)
		return f.fatal
	}
	if res := f.applyEnvelope(l.Index, env); f.fatal == nil {
		return res
	}
	return f.fatal
}

// ApplyEnvelope applies a decoded envelope as the entry at index, without
// Raft (the replay and scenario tools use it).
func (f *FSM) ApplyEnvelope(index uint64, env *clusterpb.Envelope) ([]Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fatal != nil {
		return nil, f.fatal
	}
	if env.Version != Version {
		f.fatal = &FatalError{Index: index, Err: fmt.Errorf("%w %d", ErrUnknownVersion, env.Version)}
		close(f.fatalCh)
		return nil, f.fatal
	}
	res := f.applyEnvelope(index, env)
	if f.fatal != nil {
		return nil, f.fatal
	}
	return res, nil
}

// applyEnvelope applies a decoded entry; callers hold the write lock. A
// panic inside it latches the fatal state (every node applying the entry
// panics alike): the partly applied entry is never snapshotted, and the
// node stops naming the entry.
func (f *FSM) applyEnvelope(index uint64, env *clusterpb.Envelope) (results []Result) {
	defer func() {
		if r := recover(); r != nil {
			f.fatal = &FatalError{Index: index, Err: fmt.Errorf("%w: %v", ErrApplyPanic, r)}
			close(f.fatalCh)
			results = nil
		}
	}()
	if sfq.Time(env.StampMs) > f.clock {
		f.clock = sfq.Time(env.StampMs)
	}
	f.lastIndex = index
	f.lastWall = env.WallMs
	f.sched.SetWall(sfq.Time(env.WallMs))
	f.sched.SetClock(f.clock)
	f.hashValid = false
	results = make([]Result, len(env.Commands))
	for i, c := range env.Commands {
		results[i] = f.applyCommand(c)
	}
	f.wake()
	return results
}

// wake closes the changed channel; callers hold the write lock.
func (f *FSM) wake() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Changed returns a channel closed after the next applied entry (or
// replacement of the whole state).
func (f *FSM) Changed() <-chan struct{} {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.changed
}

func (f *FSM) applyCommand(c *clusterpb.Command) Result {
	if err := CheckLevel(c, f.level); err != nil {
		// The edge refuses it first; this holds for any other path.
		return refused(err.(*Refusal))
	}
	c = normalize(c, f.level)
	if r := frozenRefusal(c, f.level); r != nil {
		return refused(r)
	}
	if r, done := f.applyFrozen(c); done {
		return r
	}
	switch cmd := c.GetCmd().(type) {
	case *clusterpb.Command_Submit:
		return f.applySubmit(cmd.Submit)
	case *clusterpb.Command_Dispatch:
		return f.applyDispatch(cmd.Dispatch)
	case *clusterpb.Command_Started:
		return f.applyStarted(cmd.Started)
	case *clusterpb.Command_Heartbeats:
		return f.applyHeartbeats(cmd.Heartbeats)
	case *clusterpb.Command_Finished:
		return f.applyFinished(cmd.Finished)
	case *clusterpb.Command_Cancel:
		return f.applyCancel(cmd.Cancel)
	case *clusterpb.Command_Expire:
		return f.applyExpire(cmd.Expire)
	case *clusterpb.Command_GrantLeases:
		return Result{Count: uint64(f.sched.GrantLeases(f.clock))}
	case *clusterpb.Command_TenantUpsert:
		return f.applyTenantUpsert(cmd.TenantUpsert)
	case *clusterpb.Command_TenantDelete:
		return f.applyTenantDelete(cmd.TenantDelete)
	case *clusterpb.Command_SetConfig:
		return f.applySetConfig(cmd.SetConfig)
	case *clusterpb.Command_Prune:
		return f.applyPrune(cmd.Prune)
	case *clusterpb.Command_MemberUpsert:
		return f.applyMemberUpsert(cmd.MemberUpsert)
	case *clusterpb.Command_MemberRemove:
		return f.applyMemberRemove(cmd.MemberRemove)
	case *clusterpb.Command_WorkerDrain:
		return f.applyWorkerDrain(cmd.WorkerDrain)
	case *clusterpb.Command_SetFeatureLevel:
		return f.applySetFeatureLevel(cmd.SetFeatureLevel)
	case *clusterpb.Command_WebhookSet:
		return f.applyWebhookSet(cmd.WebhookSet)
	case *clusterpb.Command_WebhookDelete:
		return f.applyWebhookDelete(cmd.WebhookDelete)
	case *clusterpb.Command_WebhookAck:
		return f.applyWebhookAck(cmd.WebhookAck)
	case *clusterpb.Command_WebhookReplay:
		return f.applyWebhookReplay(cmd.WebhookReplay)
	case *clusterpb.Command_SetGroup:
		return f.applySetGroup(cmd.SetGroup)
	case *clusterpb.Command_Release:
		return f.applyRelease(cmd.Release)
	case *clusterpb.Command_Pause:
		return f.applyPause(cmd.Pause)
	case *clusterpb.Command_Redrive, *clusterpb.Command_CancelJobs, *clusterpb.Command_Purge:
		op, args, _ := BulkOf(c)
		return f.applyBulk(op, args)
	case *clusterpb.Command_PoolSet:
		return f.applyPoolSet(cmd.PoolSet)
	case *clusterpb.Command_PoolDelete:
		return f.applyPoolDelete(cmd.PoolDelete)
	case *clusterpb.Command_SubscriptionSet:
		return f.applySubscriptionSet(cmd.SubscriptionSet)
	case *clusterpb.Command_WorkerHello:
		return f.applyWorkerHello(cmd.WorkerHello)
	case *clusterpb.Command_KindPolicySet:
		return f.applyKindPolicySet(cmd.KindPolicySet)
	case *clusterpb.Command_ScheduleSet:
		return f.applyScheduleSet(cmd.ScheduleSet)
	case *clusterpb.Command_ResourceSet:
		return f.applyResourceSet(cmd.ResourceSet)
	case *clusterpb.Command_ResourceDelete:
		return f.applyResourceDelete(cmd.ResourceDelete)
	case *clusterpb.Command_ScheduleDelete:
		return f.applyScheduleDelete(cmd.ScheduleDelete)
	case *clusterpb.Command_SchedulePause:
		return f.applySchedulePause(cmd.SchedulePause)
	case *clusterpb.Command_ScheduleFire:
		return f.applyScheduleFire(cmd.ScheduleFire)
	case *clusterpb.Command_ScheduleMiss:
		return f.applyScheduleMiss(cmd.ScheduleMiss)
	case *clusterpb.Command_ScheduleRunNow:
		return f.applyScheduleRunNow(cmd.ScheduleRunNow)
	}
	return refusef(Invalid, "", "empty or unknown command")
}
