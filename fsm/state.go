package fsm

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"

	"github.com/baristahq/barista/sfq"
)

// stateVersion is the version of the FSM state encoding (the body of a
// snapshot) this build writes. Version 4: events carry their wall-clock
// time, the metrics section (marked tenants, tier carries) is always
// written after the version, and the core's state is its version 3 (jobs
// with wall-clock times, stdout tails and their last worker). Versions 1
// to 3 are still read: their events show their cluster time as their wall
// time. Version 5 (feature level 3) is version 4 with the webhook section
// (webhook.go) after the metrics section. Version 6 (feature level 4) is
// version 5 with the core's state of version 4 (groups). Version 7
// (feature level 5) is version 6 with the core's state of version 5 (the
// levers: delays, expiry, backoff, pauses, rate limits) and the lever
// settings of the configuration. The version says the level: 1 is level
// 1, 2 to 4 level 2, 5 level 3, 6 level 4, 7 level 5, 8 and 9 level 6,
// 10 level 7.
//
// Version 10 (feature level 7) is version 9 with clock_tick after the
// pool settings (clocktick.go), the core's state of version 7 (runs' CPU
// sources, failures and snoozes; the setting max_snoozes) and the event
// reasons oom_killed, snoozed and snoozed_too_often; it is what a cluster
// at level 7 writes, whatever it holds, so that the level is read back
// from it (at levels 6 and below the encoding is as before, byte for
// byte).
//
// Version 11 (feature level 8) is version 10 with the settings of level
// 8 and the events tenants keep (level8.go); version 12 (feature level 8,
// a state that uses schedules) is version 11 with the schedules
// (schedule_state.go); version 13 (feature level 8, a state that uses
// resources) is version 12 with the core's configuration and state of
// version 9 (resources.go).
const stateVersion = stateVersionResources

// stateVersionLevers is the version whose core state is of version 5.
const stateVersionLevers = 7

// stateVersionQuotas (feature level 6) is version 7 with the quotas by
// default after the configuration (quotas.go).
const stateVersionQuotas = 8

// stateVersionPools (feature level 6, a state that uses pools) is version
// 8 with the pool settings after the quotas, each worker's pool, and the
// core's state of version 6 (pools.go). A state at level 6 that uses
// nothing of pools is written as version 8, byte for byte as before pools.
const stateVersionPools = 9

// stateVersionLevel2 is the version a cluster at feature level 2 writes.
const stateVersionLevel2 = 4

// stateVersionWebhooks is the version that added the webhook section,
// what a cluster at feature level 3 writes, exactly as the build before
// groups.
const stateVersionWebhooks = 5

// stateVersionGroups is the version whose core state is of version 4
// (groups).
const stateVersionGroups = 6

// stateVersionMetrics is the version that added the metrics section:
// version 2 with that section after the version, written only when the
// section held something (a state without it stayed version 2).
const stateVersionMetrics = 3

// coreConfigVersion is the core's encoding version of the configuration
// in an FSM state of version v.
func coreConfigVersion(v int) int {
	if v >= stateVersionResources {
		return 9
	}
	if v >= stateVersionLevel7 {
		return 7
	}
	if v >= stateVersionLevers {
		return 5
	}
	if v >= 2 {
		return 2
	}
	return 1
}

// View is an immutable picture of the whole state at one applied index.
// Freeze makes one in time proportional to the number of table chunks;
// Encode may then run on another goroutine while Apply goes on.
type View struct {
	Index       uint64
	configured  bool
	level       uint32
	clock       sfq.Time
	cfg         Config
	members     []Member
	workers     []Worker
	nextKey     uint64
	keys        sfq.VectorView[keyEntry]
	nextEvent   uint64
	events      eventView
	kept        keptViews
	sched       *sfq.View
	exported    []uint32
	tierCarry   [sfq.NumTiers]Counters
	webhooks    []Webhook
	whSerial    uint64
	policies    []KindPolicy
	schedules   sfq.VectorView[Schedule]
	schedSerial uint64
}

// Freeze returns an immutable View of the current state. Writes after it
// copy what they touch.
func (f *FSM) Freeze() (*View, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fatal != nil {
		return nil, f.fatal
	}
	v := f.view()
	v.keys = f.keys.Freeze()
	v.events = f.events.Freeze()
	v.kept = f.keptFreeze()
	v.sched = f.sched.Freeze()
	v.schedules = f.schedules.Freeze()
	return v, nil
}

// view copies the small tables and scalars; the caller fills the big ones.
func (f *FSM) view() *View {
	v := &View{
		Index:       f.lastIndex,
		configured:  f.configured,
		level:       f.level,
		clock:       f.clock,
		cfg:         f.cfg,
		members:     slices.Clone(f.members),
		nextKey:     f.nextKey,
		nextEvent:   f.nextEvent,
		exported:    f.exported,
		tierCarry:   f.tierCarry,
		webhooks:    f.webhooks,
		whSerial:    f.whSerial,
		policies:    f.policies,
		schedSerial: f.schedSerial,
	}
	v.workers = make([]Worker, 0, len(f.workers))
	for _, w := range f.workers {
		v.workers = append(v.workers, *w)
	}
	slices.SortFunc(v.workers, func(a, b Worker) int { return strings.Compare(a.ID, b.ID) })
	return v
}

// Level returns the cluster's feature level of the view.
func (v *View) Level() uint32 { return v.level }

// StateVersion is the version of the state encoding Encode writes: 1 at
// feature level 1 (what older builds read and hash), 4 at level 2 (what
// builds up to level 2 read and hash), 5 at level 3 (what builds up to
// level 3 read and hash), 6 at level 4 (likewise), 7 at level 5, 8 or 9
// at level 6 (8 while the state holds nothing of pools), else
// stateVersion. The level is read back from it.
func (v *View) StateVersion() int {
	switch {
	case v.level < Level2:
		return 1
	case v.level < Level3:
		return stateVersionLevel2
	case v.level < Level4:
		return stateVersionWebhooks
	case v.level < Level5:
		return stateVersionGroups
	case v.level < Level6:
		return stateVersionLevers
	case v.level >= Level8 && v.usesResources():
		return stateVersionResources
	case v.level >= Level8 && v.usesSchedules():
		return stateVersionSchedules
	case v.level >= Level8:
		return stateVersionLevel8
	case v.level >= Level7:
		// The version says the level: a node restored from this state
		// applies what follows as a level-7 node does.
		return stateVersionLevel7
	case !v.usesPools():
		return stateVersionQuotas
	case v.level < Level7:
		return stateVersionPools
	}
	return stateVersionPools
}

// coreStateVersion is the core's state encoding version in an FSM state
// of version v.
func coreStateVersion(v int) int {
	switch {
	case v >= stateVersionLevers:
		return 5
	case v >= stateVersionGroups:
		return 4
	case v >= 4:
		return 3
	case v >= 2:
		return 2
	}
	return 1
}

// encodeWorkers writes the worker registry (every state version alike,
// but for the pool of each from version 9 on).
func encodeWorkers(e *sfq.Encoder, workers []Worker, version int) {
	e.Uvarint(uint64(len(workers)))
	for _, w := range workers {
		e.String(w.ID)
		if version >= stateVersionPools {
			e.String(w.Pool)
		}
		e.Byte(byte(w.Size))
		e.Uvarint(w.Credit)
		e.Uvarint(uint64(w.Job))
		e.Uvarint(uint64(w.Attempt))
		e.Bool(w.Drained)
		e.Varint(int64(w.LastSeen))
		if version >= stateVersionLevel8 {
			encodeRuns(e, w.Runs)
		}
	}
}

// Encode writes the canonical encoding of the state.
func (v *View) Encode(e *sfq.Encoder) {
	version := v.StateVersion()
	e.Uvarint(uint64(version))
	if version >= stateVersionMetrics {
		v.encodeMetrics(e)
	}
	if version >= stateVersionWebhooks {
		v.encodeWebhooks(e)
	}
	e.Varint(int64(v.clock))
	e.Bool(v.configured)
	encodeConfig(e, &v.cfg, coreConfigVersion(version))
	if version >= stateVersionQuotas {
		encodeConfigQuotas(e, &v.cfg)
	}
	if version >= stateVersionPools {
		encodeConfigPools(e, &v.cfg.Pools)
	}
	if version >= stateVersionLevel7 {
		encodeConfigClockTick(e, &v.cfg)
	}
	if version >= stateVersionLevel8 {
		encodeConfigLevel8(e, &v.cfg)
	}
	if version >= stateVersionSchedules {
		encodeConfigSchedules(e, &v.cfg)
	}
	e.Uvarint(uint64(len(v.members)))
	for _, m := range v.members {
		e.String(m.ID)
		e.String(m.RaftAddr)
		e.String(m.GRPCAddr)
		e.String(m.HTTPAddr)
	}
	encodeWorkers(e, v.workers, version)
	e.Uvarint(v.nextKey)
	e.Uvarint(uint64(v.keys.Len()))
	v.keys.Each(func(_ uint64, k *keyEntry) bool {
		e.Uvarint(k.Seq)
		e.Uvarint(uint64(k.Tenant))
		e.String(k.Key)
		e.Uvarint(uint64(k.Job))
		e.Varint(int64(k.Expires))
		e.String(string(k.Digest[:]))
		return true
	})
	e.Uvarint(v.nextEvent)
	e.Uvarint(uint64(v.events.Len()))
	v.events.Each(0, func(seq uint64, ev *eventRecord) bool {
		encodeEvent(e, seq, ev, version)
		return true
	})
	if version >= stateVersionLevel8 {
		encodeKept(e, v.kept, version)
		encodePolicies(e, v.policies)
	}
	if version >= stateVersionSchedules {
		encodeSchedules(e, v.schedSerial, v.schedules)
	}
	switch {
	case version >= stateVersionResources:
		v.sched.EncodeVersion(e, 9) // resources
	case version >= stateVersionLevel8:
		v.sched.EncodeVersion(e, 8) // the forms of jobs (kinds)
	case version >= stateVersionLevel7:
		v.sched.EncodeVersion(e, 7)
	case version >= stateVersionPools:
		v.sched.EncodeVersion(e, 6)
	default:
		v.sched.EncodeVersion(e, coreStateVersion(version))
	}
}

// Restore reads a state written by View.Encode and replaces this FSM's
// state with it. The decoded state must pass Verify; on any error the FSM
// is left unchanged.
func (f *FSM) Restore(d *sfq.Decoder, index uint64) error {
	n, err := DecodeState(d, index)
	if err != nil {
		return err
	}
	f.Adopt(n)
	return nil
}

// DecodeState reads a state written by View.Encode into a new FSM whose
// last applied index is index. The core's counters are verified.
func DecodeState(d *sfq.Decoder, index uint64) (*FSM, error) {
	n, err := decodeState(d)
	if err != nil {
		return nil, err
	}
	n.lastIndex = index
	// The core verified itself as it was decoded (sfq.Decode).
	if err := n.verifyAboveCore(); err != nil {
		return nil, err
	}
	return n, nil
}

// Adopt replaces f's state with n's. n must not be used afterwards.
func (f *FSM) Adopt(n *FSM) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sched, f.cfg, f.clock = n.sched, n.cfg, n.clock
	f.members, f.workers = n.members, n.workers
	f.keys, f.nextKey, f.keyIndex = n.keys, n.nextKey, n.keyIndex
	f.events, f.nextEvent = n.events, n.nextEvent
	f.kept, f.keptN = n.kept, n.keptN
	f.lastIndex, f.lastWall = n.lastIndex, n.lastWall
	f.configured, f.level = n.configured, n.level
	f.exported, f.tierCarry = n.exported, n.tierCarry
	f.webhooks, f.whSerial = n.webhooks, n.whSerial
	f.policies = n.policies
	f.schedules, f.schedSerial, f.schedIndex, f.schedCount = n.schedules, n.schedSerial, n.schedIndex, n.schedCount
	// A reader of the changes reads every schedule again.
	f.schedLogBase, f.schedLog = f.schedLogBase+uint64(len(f.schedLog))+1, nil
	f.fairs, f.fairSince = n.fairs, n.fairSince
	f.hashValid = false
	f.replaced++
	f.wake()
}

// Replaced returns the number of times the whole state was replaced
// (Adopt) on this node. A position in the event log read before a
// replacement may not name the same event after it.
func (f *FSM) Replaced() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.replaced
}

func decodeState(d *sfq.Decoder) (*FSM, error) {
	version := int(d.Uvarint())
	if d.Err() == nil && (version < 1 || version > stateVersion) {
		return nil, fmt.Errorf("%w: state version %d (this build reads 1 to %d)", sfq.ErrCorrupt, version, stateVersion)
	}
	f := New()
	if version >= stateVersionMetrics {
		f.decodeMetrics(d)
	}
	if version >= stateVersionWebhooks {
		f.decodeWebhooks(d)
	}
	f.clock = sfq.Time(d.Varint())
	f.configured = d.Bool()
	f.cfg = decodeConfig(d, coreConfigVersion(version))
	if version >= stateVersionQuotas {
		decodeConfigQuotas(d, &f.cfg)
	}
	if version >= stateVersionPools {
		decodeConfigPools(d, &f.cfg.Pools)
	}
	if version >= stateVersionLevel7 {
		decodeConfigClockTick(d, &f.cfg)
	}
	if version >= stateVersionLevel8 {
		decodeConfigLevel8(d, &f.cfg)
	}
	if version >= stateVersionSchedules {
		decodeConfigSchedules(d, &f.cfg)
	} else {
		f.cfg.MaxSchedules = DefaultMaxSchedules
	}
	nm := d.Uvarint()
	for i := uint64(0); i < nm && d.Err() == nil; i++ {
		f.members = append(f.members, Member{ID: d.String(), RaftAddr: d.String(), GRPCAddr: d.String(), HTTPAddr: d.String()})
	}
	nw := d.Uvarint()
	for i := uint64(0); i < nw && d.Err() == nil; i++ {
		w := &Worker{ID: d.String()}
		if version >= stateVersionPools {
			w.Pool = d.String()
		}
		w.Size, w.Credit = sfq.Size(d.Enum("worker size", sfq.NumSizes)), d.Uvarint()
		w.Job, w.Attempt, w.Drained, w.LastSeen = sfq.JobID(d.Uvarint()), d.Uint32(), d.Bool(), sfq.Time(d.Varint())
		if version >= stateVersionLevel8 {
			w.Runs = decodeRuns(d)
		}
		f.workers[w.ID] = w
	}
	f.nextKey = d.Uvarint()
	if f.nextKey > sfq.MaxID {
		d.Fail("next idempotency key seq %d is past %d", f.nextKey, uint64(sfq.MaxID))
	}
	nk := d.Uvarint()
	for i := uint64(0); i < nk && d.Err() == nil; i++ {
		k := keyEntry{Seq: d.Uvarint(), Tenant: d.Uint32(), Key: d.String(), Job: sfq.JobID(d.Uvarint()), Expires: sfq.Time(d.Varint())}
		digest := d.String()
		if d.Err() != nil {
			break
		}
		if len(digest) != len(k.Digest) || k.Seq >= f.nextKey || f.keys.Get(k.Seq) != nil {
			d.Fail("idempotency key record %d is malformed", i)
			break
		}
		copy(k.Digest[:], digest)
		f.keys.Put(k.Seq, k)
		f.keyIndex.put(&f.keys, keyRef{k.Tenant, k.Key}, k.Seq)
	}
	f.nextEvent = d.Uvarint()
	if f.nextEvent > sfq.MaxID {
		d.Fail("next event seq %d is past %d", f.nextEvent, uint64(sfq.MaxID))
	}
	ne := d.Uvarint()
	for i := uint64(0); i < ne && d.Err() == nil; i++ {
		seq, ev := decodeEvent(d, version)
		if d.Err() != nil {
			break
		}
		if seq >= f.nextEvent || !f.events.Append(seq, &ev) {
			d.Fail("event record %d (seq %d) is out of order", i, seq)
			break
		}
	}
	if f.events.Len() > 0 && d.Err() == nil {
		if last := f.events.View().last(); last != f.nextEvent-1 {
			d.Fail("the last event is %d, not the one before next seq %d", last, f.nextEvent)
		}
	}
	if version >= stateVersionLevel8 && d.Err() == nil {
		f.decodeKept(d, version)
		f.decodePolicies(d)
	}
	if version >= stateVersionSchedules && d.Err() == nil {
		f.decodeSchedules(d)
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	if err := f.cfg.validateStored(); err != nil {
		return nil, fmt.Errorf("%w: %w", sfq.ErrCorrupt, err)
	}
	s, err := sfq.Decode(d)
	if err != nil {
		return nil, err
	}
	f.sched = s
	if version < stateVersionResources && s.Peek().UsesResources() {
		return nil, fmt.Errorf("%w: a state of version %d holds resources", sfq.ErrCorrupt, version)
	}
	if version < stateVersionLevel8 && s.Peek().UsesRunDetails() != (version >= stateVersionLevel7) {
		return nil, fmt.Errorf("%w: a state of version %d holds a core state of another version", sfq.ErrCorrupt, version)
	}
	// The encoding says the level: version 1 is what a cluster at level
	// 1 writes (and all older builds); versions 2 to 4 are level 2; the
	// webhook section's version is level 3, and the groups' level 4.
	switch {
	case version >= stateVersionLevel8:
		f.setLevel(Level8)
	case version >= stateVersionLevel7:
		f.setLevel(Level7)
	case version >= stateVersionQuotas:
		f.setLevel(Level6)
	case version >= stateVersionLevers:
		f.setLevel(Level5)
	case version >= stateVersionGroups:
		f.setLevel(Level4)
	case version >= stateVersionWebhooks:
		f.setLevel(Level3)
	case version >= 2:
		f.setLevel(Level2)
	default:
		f.setLevel(Level1)
	}
	f.startFairness()
	return f, nil
}

// Hash returns the SHA-256 of the canonical encoding of the state and the
// index it was taken at. It is cached until the next Apply.
func (f *FSM) Hash() ([32]byte, uint64) {
	f.mu.RLock()
	if f.hashValid {
		defer f.mu.RUnlock()
		return f.hash, f.hashIndex
	}
	f.mu.RUnlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.hashValid {
		v := f.view()
		v.keys, v.events, v.sched = f.keys.View(), f.events.View(), f.sched.Peek()
		v.kept = f.keptFreeze()
		v.schedules = f.schedules.View()
		f.hash, f.hashIndex, f.hashValid = HashView(v), f.lastIndex, true
	}
	return f.hash, f.hashIndex
}

// HashView hashes a view's canonical encoding.
func HashView(v *View) [32]byte {
	h := sha256.New()
	e := sfq.NewEncoder(h)
	v.Encode(e)
	_ = e.Flush()
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// Verify checks the core's counters and the FSM's own tables.
func (f *FSM) Verify() error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if err := f.sched.Verify(); err != nil {
		return err
	}
	return f.verifyAboveCore()
}

// verifyAboveCore is Verify without the core's own checks.
func (f *FSM) verifyAboveCore() error {
	if err := f.fitsLevel(); err != nil {
		return err
	}
	if err := f.keyIndex.verify(&f.keys); err != nil {
		return err
	}
	if uint64(f.events.Len()) > f.nextEvent-1 {
		return fmt.Errorf("%w: %d events but next seq %d", sfq.ErrVerify, f.events.Len(), f.nextEvent)
	}
	if err := f.verifyWebhooks(); err != nil {
		return err
	}
	if err := f.verifyKept(); err != nil {
		return err
	}
	if err := f.verifySchedules(); err != nil {
		return err
	}
	return f.verifyMetrics()
}
