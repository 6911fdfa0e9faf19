package schedule

import (
	"container/heap"
	"context"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/leader"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/sfq"
)

// The leader's loop of schedules. It keeps, for each schedule of the
// state, its next slot and when that slot is fired (the slot plus its
// jitter), in a heap by that time; it sleeps until the first is due (or
// the state changes), and then proposes, in one entry, every fire due at
// that moment: the fires of many schedules due together share entries
// (at most MaxBatch commands each, queued one after the other without
// waiting), and between slots it proposes nothing. It keeps nothing the state does not say: a new leader builds
// the heap from the replicated schedules, and a fire proposed twice (by
// an old leader and a new one) is spent once, by Apply.
//
// Slots older than the catch-up window (a cluster that had no leader) are
// spent by one ScheduleMiss, counted and never fired; those within it
// fire oldest first.

// MaxBatch bounds the commands of one proposal of the loop.
const MaxBatch = 4096

// maxMissCount bounds the missed slots one pass counts for one schedule
// (a longer gap is counted over several passes).
const maxMissCount = 100_000

// maxFiresPerPass bounds the slots of one schedule one pass fires (a
// catch-up of a schedule of every second fires its window over several).
const maxFiresPerPass = 64

// maxSleep bounds the loop's sleep.
const maxSleep = time.Second

// proposeTimeout bounds one proposal.
const proposeTimeout = 30 * time.Second

// Loop fires a node's schedules while it leads. Its methods are for one
// goroutine (Run's, or a test's).
type Loop struct {
	n     leader.Node
	log   hclog.Logger
	m     *Metrics
	items map[uint64]*item
	queue dueQueue
	seen  uint64
	fresh bool // seen is a number of the state's changes
	specs map[specKey]specEntry
}

type specKey struct{ spec, zone string }

type specEntry struct {
	s   *Spec
	err error
}

// item is what the loop knows of one schedule.
type item struct {
	serial          uint64
	tenant, name    string
	version         uint64
	paused          bool
	since, last     sfq.Time
	catchup, jitter int64
	key             specKey
	spec            *Spec // nil: the spec cannot be read here
	next            sfq.Time
	at              sfq.Time // next plus its jitter
	index           int      // in the queue; -1: not queued
}

// NewLoop returns a loop over node n's schedules.
func NewLoop(n leader.Node, log hclog.Logger, m *Metrics) *Loop {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Loop{n: n, log: log, m: m, items: map[uint64]*item{}, specs: map[specKey]specEntry{}}
}

// Run is the loop as a leader loop: a new Loop each time the node gains
// leadership.
func Run(n leader.Node, log hclog.Logger, m *Metrics) raftnode.LeaderLoop {
	return func(ctx context.Context) { NewLoop(n, log, m).Run(ctx) }
}

// Run fires the schedules until ctx ends.
func (l *Loop) Run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		changed := l.n.State().Changed()
		l.Sync()
		wait := maxSleep
		if now, ok := l.n.ClusterNow(); ok {
			more, err := l.FireDue(ctx, now)
			switch {
			case err != nil && ctx.Err() == nil:
				l.log.Warn("schedule fires failed", "error", err)
				l.fresh = false // read the state again
			case more:
				wait = 0
			}
			if at, ok := l.NextFire(); ok && wait > 0 {
				wait = min(wait, max(time.Duration(at-now)*time.Millisecond, 0))
			}
		}
		if wait == 0 {
			if ctx.Err() != nil {
				return
			}
			continue
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-changed:
			if !timer.Stop() {
				<-timer.C
			}
		case <-timer.C:
		}
	}
}

// Sync brings the loop's schedules up to the state: those changed since
// it last looked, or every one when the state no longer says which.
func (l *Loop) Sync() {
	f := l.n.State()
	if l.fresh {
		serials, last, ok := f.ScheduleChanges(l.seen)
		if ok {
			if len(serials) > 0 {
				slices.Sort(serials)
				f.SchedulesAt(slices.Compact(serials), func(serial uint64, s *fsm.ScheduleInfo, ok bool) {
					if ok {
						l.update(s)
					} else {
						l.remove(serial)
					}
				})
			}
			l.seen = last
			return
		}
	}
	seen := map[uint64]bool{}
	l.seen = f.EachSchedule(func(s *fsm.ScheduleInfo) bool {
		seen[s.Serial] = true
		l.update(s)
		return true
	})
	for serial := range l.items {
		if !seen[serial] {
			l.remove(serial)
		}
	}
	l.fresh = true
}

// update brings schedule s's item up to the state.
func (l *Loop) update(s *fsm.ScheduleInfo) {
	it := l.items[s.Serial]
	key := specKey{s.Spec, s.Zone}
	if it == nil {
		it = &item{serial: s.Serial, index: -1}
		l.items[s.Serial] = it
	} else if it.version == s.Version && it.paused == s.Paused && it.since == s.Since && it.key == key &&
		it.catchup == s.CatchupMs && it.jitter == s.JitterMs && s.LastSlot <= it.last {
		return // what the loop knows is as new (a fire of it just applied)
	}
	it.tenant, it.name, it.version, it.paused = s.TenantName, s.Name, s.Version, s.Paused
	it.since, it.last, it.catchup, it.jitter = s.Since, s.LastSlot, s.CatchupMs, s.JitterMs
	if it.key != key || it.spec == nil {
		it.key, it.spec = key, l.parse(key, s)
	}
	l.schedule(it, it.spec != nil && !it.paused)
}

// parse reads a spec, once for every schedule that has it.
func (l *Loop) parse(key specKey, s *fsm.ScheduleInfo) *Spec {
	e, ok := l.specs[key]
	if !ok {
		sp, err := Parse(key.spec, key.zone)
		e = specEntry{sp, err}
		l.specs[key] = e
		if err != nil {
			l.log.Error("a schedule's spec cannot be read by this build: it does not fire while this node leads", "tenant", s.TenantName, "schedule", s.Name, "error", err)
		}
	}
	return e.s
}

// schedule sets item it's next slot after what it spent, and queues it
// (if on).
func (l *Loop) schedule(it *item, on bool) {
	it.next, it.at = 0, 0
	if on {
		if it.next = sfq.Time(it.spec.Next(int64(max(it.last, it.since)))); it.next != 0 {
			it.at = it.next + sfq.Time(fsm.ScheduleJitter(it.tenant, it.name, it.next, it.jitter))
		}
	}
	switch {
	case it.next == 0 && it.index >= 0:
		heap.Remove(&l.queue, it.index)
	case it.next != 0 && it.index >= 0:
		heap.Fix(&l.queue, it.index)
	case it.next != 0:
		heap.Push(&l.queue, it)
	}
}

// remove forgets a schedule that no longer exists.
func (l *Loop) remove(serial uint64) {
	if it := l.items[serial]; it != nil {
		if it.index >= 0 {
			heap.Remove(&l.queue, it.index)
		}
		delete(l.items, serial)
	}
}

// NextFire returns when the first queued slot is fired.
func (l *Loop) NextFire() (sfq.Time, bool) {
	if len(l.queue) == 0 {
		return 0, false
	}
	return l.queue[0].at, true
}

// pending is a command of a proposal with what it is for.
type pending struct {
	it   *item
	slot sfq.Time
	at   sfq.Time
}

// FireDue proposes the fires (and misses) due at cluster time now: in
// entries of at most MaxBatch commands, each queued without waiting for
// the one before (they apply in order), at most maxBatches of them; more
// reports that more are due.
func (l *Loop) FireDue(ctx context.Context, now sfq.Time) (more bool, err error) {
	type batch struct {
		p    leader.Pending
		plan []pending
	}
	var sent []batch
	// No check of the state before proposing, unlike a client's command:
	// whether a slot is due, or beyond the catch-up window, is a matter of
	// the entry's cluster time (now, or later), which the state's clock
	// (the last entry applied) is behind. Apply checks each against it;
	// what it refuses (a schedule changed meanwhile) the next Sync reads.
	pctx, cancel := context.WithTimeout(ctx, proposeTimeout)
	defer cancel()
	for len(sent) < maxBatches {
		cmds, plan := l.nextBatch(now)
		if len(cmds) == 0 {
			break
		}
		p, qerr := l.n.Enqueue(pctx, cmds)
		if qerr != nil {
			err = qerr
			break
		}
		sent = append(sent, batch{p, plan})
	}
	more = len(l.queue) > 0 && l.queue[0].at <= now
	for _, b := range sent {
		res, werr := b.p.Wait(pctx)
		if werr != nil {
			err = werr
			continue
		}
		done, _ := l.n.ClusterNow()
		for i, r := range res {
			l.m.observe(r, b.plan[i].at, done)
			if r.Refused() {
				l.log.Info("a fire was refused (its schedule changed)", "tenant", b.plan[i].it.tenant, "schedule", b.plan[i].it.name, "slot", b.plan[i].slot, "error", r.Msg)
				l.fresh = false
			}
		}
	}
	return more, err
}

// maxBatches bounds the entries one FireDue queues at once: two keep
// the log busy while the next is built, and let another tenant's write
// in after at most two of them (bench schedules: 100,000 fires of one
// second, a bystander's submits wait at most 63-81 ms, against 299 ms
// with 64 queued at once; the last fire 808-837 ms after the slot,
// against 726 ms).
const maxBatches = 2

// nextBatch takes from the queue the fires (and misses) due at now, at
// most MaxBatch commands, and moves each schedule on to its next slot.
func (l *Loop) nextBatch(now sfq.Time) ([]*clusterpb.Command, []pending) {
	var cmds []*clusterpb.Command
	var plan []pending
	for len(l.queue) > 0 && len(cmds) < MaxBatch && l.queue[0].at <= now {
		it := l.queue[0]
		slot, from := it.next, max(it.last, it.since)
		j := func(t sfq.Time) sfq.Time { return sfq.Time(fsm.ScheduleJitter(it.tenant, it.name, t, it.jitter)) }
		late := func(t sfq.Time) bool { return t+j(t)+sfq.Time(it.catchup) < now }
		if late(slot) {
			var count uint64
			var through sfq.Time
			for slot != 0 && late(slot) && count < maxMissCount {
				count, through = count+1, slot
				slot = sfq.Time(it.spec.Next(int64(slot)))
			}
			cmds = append(cmds, &clusterpb.Command{Cmd: &clusterpb.Command_ScheduleMiss{ScheduleMiss: &clusterpb.ScheduleMiss{
				Tenant: it.tenant, Name: it.name, Version: it.version, ThroughMs: int64(through), Count: count}}})
			plan = append(plan, pending{it, through, 0})
			from = through
		}
		for fires := 0; slot != 0 && !late(slot) && slot+j(slot) <= now && fires < maxFiresPerPass && len(cmds) < MaxBatch; fires++ {
			cmds = append(cmds, &clusterpb.Command{Cmd: &clusterpb.Command_ScheduleFire{ScheduleFire: &clusterpb.ScheduleFire{
				Tenant: it.tenant, Name: it.name, Version: it.version, SlotMs: int64(slot)}}})
			plan = append(plan, pending{it, slot, slot + j(slot)})
			from = slot
			slot = sfq.Time(it.spec.Next(int64(slot)))
		}
		it.last = from
		l.schedule(it, true)
	}
	return cmds, plan
}

// dueQueue is a heap of items by when their next slot is fired, then by
// serial.
type dueQueue []*item

func (q dueQueue) Len() int { return len(q) }
func (q dueQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].serial < q[j].serial
}
func (q dueQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *dueQueue) Push(x any) {
	it := x.(*item)
	it.index = len(*q)
	*q = append(*q, it)
}
func (q *dueQueue) Pop() any {
	old := *q
	it := old[len(old)-1]
	old[len(old)-1] = nil
	it.index = -1
	*q = old[:len(old)-1]
	return it
}
