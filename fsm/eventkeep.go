package fsm

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/baristahq/barista/sfq"
)

// Each tenant's recent history (feature level 8, the setting
// event_retention_per_tenant, N). The event log keeps at most
// event_retention_count events of every tenant together, so one tenant's
// volume (a redrive of 100,000 jobs, say) would push every other
// tenant's recent events out of it. With N set, an event the count
// prunes while it is younger than event_retention is not dropped but
// kept for its tenant, in a log of the tenant's own, of which the tenant
// keeps its newest N (its own volume pushes out only its own history);
// the kept events of all tenants together are at most
// event_retention_count, past which the tenant keeping the most loses
// its oldest. So: a tenant that wrote fewer than N events within
// event_retention can watch from any of them, as long as at most
// event_retention_count / N tenants (200 at the defaults) have events
// kept. A tenant's watch and its webhook read its kept events before the
// log's (TenantEvents); an admin's watch of every tenant reads the log
// alone. Kept events are aged out by event_retention like the log's.

// DefaultEventRetentionPerTenant is the setting on a new cluster.
const DefaultEventRetentionPerTenant = 10_000

// keptBlockBytes is a kept log's block size: smaller than the event
// log's, since many tenants may keep a few events each.
const keptBlockBytes = 1024

// keptLog is one tenant's kept events, oldest first: each a record of
// the event log's encoding (appendEvent) after the uvarint difference of
// its seq from the one before it in its block (0 for a block's first,
// whose seq is the block's). Its blocks are written once, in order, and
// only sliced off the front, as the event log's are, so that a view
// (keptView) stays valid while the log changes.
type keptLog struct {
	blocks []*keptBlock
	head   keptCursor
	n      int
}

type keptBlock struct {
	eventBlock
	last uint64 // seq of the last record written
}

// keptCursor is the oldest record in the first block: its offset, index
// and seq.
type keptCursor struct {
	off, index int
	seq        uint64
}

// Append adds event seq, which must follow the last kept one; false
// (nothing added) if it does not.
func (l *keptLog) Append(seq uint64, ev *eventRecord) bool {
	var last *keptBlock
	if len(l.blocks) > 0 {
		last = l.blocks[len(l.blocks)-1]
		if l.n > 0 && seq <= last.last {
			return false
		}
	}
	need := binary.MaxVarintLen64 + eventMaxBytes(ev)
	if last == nil || l.n == 0 || last.used+need > len(last.data) {
		last = &keptBlock{eventBlock: eventBlock{seq: seq, job: ev.Job, at: ev.At, data: make([]byte, max(keptBlockBytes, need))}, last: seq}
		if l.n == 0 {
			l.blocks, l.head = nil, keptCursor{seq: seq}
		}
		l.blocks = append(l.blocks, last)
	}
	b := binary.AppendUvarint(last.data[last.used:last.used], seq-last.last)
	b = appendEvent(b, &last.eventBlock, ev)
	last.used += len(b)
	last.count++
	last.last = seq
	l.n++
	return true
}

// Head returns the oldest kept event and its seq.
func (l *keptLog) Head() (uint64, eventRecord, bool) {
	if l.n == 0 {
		return 0, eventRecord{}, false
	}
	blk := l.blocks[0]
	_, w := binary.Uvarint(blk.data[l.head.off:])
	ev, _ := readEvent(blk.data[l.head.off+w:], &blk.eventBlock)
	return l.head.seq, ev, true
}

// PopHead removes the oldest kept event.
func (l *keptLog) PopHead() {
	if l.n == 0 {
		return
	}
	blk := l.blocks[0]
	_, w := binary.Uvarint(blk.data[l.head.off:])
	l.head.off += w + eventSize(blk.data[l.head.off+w:])
	l.head.index++
	l.n--
	switch {
	case l.head.index == blk.count:
		l.blocks = l.blocks[1:]
		l.head = keptCursor{}
		if len(l.blocks) > 0 {
			l.head.seq = l.blocks[0].seq
		}
	default:
		d, _ := binary.Uvarint(blk.data[l.head.off:])
		l.head.seq += d
	}
}

// View returns an immutable view of the log as it is now.
func (l *keptLog) View() keptView {
	v := keptView{blocks: l.blocks, head: l.head, n: l.n}
	if len(l.blocks) > 0 {
		last := l.blocks[len(l.blocks)-1]
		v.lastCount, v.lastUsed = last.count, last.used
	}
	return v
}

// keptView is an immutable view of a keptLog.
type keptView struct {
	blocks              []*keptBlock
	head                keptCursor
	n                   int
	lastCount, lastUsed int
}

// Each calls fn for every kept event with seq >= from, in order, until
// fn returns false; it reports whether fn did.
func (v keptView) Each(from uint64, fn func(seq uint64, ev *eventRecord) bool) bool {
	for b, blk := range v.blocks {
		count, used := blk.count, blk.used
		if b == len(v.blocks)-1 {
			count, used = v.lastCount, v.lastUsed
		} else if blk.last < from {
			continue
		}
		off, index, seq := 0, 0, blk.seq
		if b == 0 {
			off, index, seq = v.head.off, v.head.index, v.head.seq
		}
		for first := true; index < count && off < used; first = false {
			d, w := binary.Uvarint(blk.data[off:used])
			if !first {
				seq += d
			}
			off += w
			if seq < from {
				off += eventSize(blk.data[off:used])
				index++
				continue
			}
			ev, size := readEvent(blk.data[off:used], &blk.eventBlock)
			off += size
			index++
			if !fn(seq, &ev) {
				return false
			}
		}
	}
	return true
}

// keptViews is the kept logs of every tenant as a snapshot sees them,
// by tenant index.
type keptViews struct {
	tenants []uint32
	views   []keptView
}

// keptFreeze returns a view of every tenant's kept log.
func (f *FSM) keptFreeze() keptViews {
	var out keptViews
	for _, ti := range f.keptTenants() {
		out.tenants = append(out.tenants, ti)
		out.views = append(out.views, f.kept[ti].View())
	}
	return out
}

// keptTenants returns the tenants that keep events, in order.
func (f *FSM) keptTenants() []uint32 {
	out := make([]uint32, 0, len(f.kept))
	for ti := range f.kept {
		out = append(out, ti)
	}
	slices.Sort(out)
	return out
}

// pruneEventsKeeping is Prune's pass over the events with
// event_retention_per_tenant set: kept events past the age go first (they
// are older than any in the log), then the log's events beyond the count
// or the age; one younger than the age is kept for its tenant instead of
// dropped. lost is told of every event dropped. It returns how many were
// removed from the log or dropped from the kept ones, at most limit of
// each.
func (f *FSM) pruneEventsKeeping(limit int, lost func(seq uint64, ev *eventRecord)) int {
	cutoff := f.clock - sfq.Time(f.cfg.EventRetentionMs)
	n := 0
	for _, ti := range f.keptTenants() {
		l := f.kept[ti]
		for n < limit {
			seq, ev, ok := l.Head()
			if !ok || ev.At >= cutoff {
				break
			}
			lost(seq, &ev)
			f.popKept(ti, l)
			n++
		}
	}
	for i := 0; i < limit; i++ {
		seq, ev, ok := f.events.Head()
		young := ok && ev.At >= cutoff
		if !ok || (uint64(f.events.Len()) <= f.cfg.EventRetentionCount && young) {
			break
		}
		f.events.PopHead()
		n++
		if young {
			f.keep(seq, &ev, lost)
		} else {
			lost(seq, &ev)
		}
	}
	return n
}

// keep keeps event seq for its tenant, which then keeps at most its
// newest event_retention_per_tenant, and every tenant together at most
// event_retention_count: past it the tenant keeping the most (the
// lowest index among equals) drops its oldest.
func (f *FSM) keep(seq uint64, ev *eventRecord, lost func(seq uint64, ev *eventRecord)) {
	ti := f.sched.Owner(ev.Tenant)
	l := f.kept[ti]
	if l == nil {
		if f.kept == nil {
			f.kept = map[uint32]*keptLog{}
		}
		l = &keptLog{}
		f.kept[ti] = l
	}
	if !l.Append(seq, ev) {
		return // below a kept one: never, the log is pruned in order
	}
	f.keptN++
	drop := func(ti uint32, l *keptLog) {
		s, old, _ := l.Head()
		lost(s, &old)
		f.popKept(ti, l)
	}
	for uint64(l.n) > f.cfg.EventRetentionPerTenant {
		drop(ti, l)
	}
	for f.keptN > 0 && uint64(f.keptN) > f.cfg.EventRetentionCount {
		most, mostTi := -1, uint32(0)
		for _, t := range f.keptTenants() {
			if f.kept[t].n > most {
				most, mostTi = f.kept[t].n, t
			}
		}
		drop(mostTi, f.kept[mostTi])
	}
}

// popKept drops tenant ti's oldest kept event (l is its log).
func (f *FSM) popKept(ti uint32, l *keptLog) {
	l.PopHead()
	f.keptN--
	if l.n == 0 {
		delete(f.kept, ti)
	}
}

// dropKept forgets a deleted tenant's kept events.
func (f *FSM) dropKept(ti uint32) {
	if l := f.kept[ti]; l != nil {
		f.keptN -= l.n
		delete(f.kept, ti)
	}
}

// keptPruneDue reports whether a kept event is past the age at now.
func (f *FSM) keptPruneDue(now sfq.Time) bool {
	for _, l := range f.kept {
		if _, ev, ok := l.Head(); ok && ev.At < now-sfq.Time(f.cfg.EventRetentionMs) {
			return true
		}
	}
	return false
}

// TenantEvents is Events for a reader of one tenant's events (a watch of
// its jobs, its webhook): first its kept events with seq >= from (those
// the cluster's count pruned from the log), then every event of the log
// from max(from, the log's first) on, as Events gives them. first is the
// oldest of the tenant's retained events: its oldest kept one, else the
// log's first.
func (f *FSM) TenantEvents(tenant uint32, from uint64, fn func(ev *Event) bool) (first, next uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	logFirst := f.nextEvent - uint64(f.events.Len())
	l := f.kept[tenant]
	if l == nil || l.n == 0 {
		return f.eventsLocked(max(from, logFirst), fn)
	}
	first = l.head.seq
	if from < logFirst {
		var ev Event
		if !l.View().Each(from, func(seq uint64, r *eventRecord) bool {
			ev.Seq, ev.eventRecord = seq, *r
			f.readerView(&ev, r)
			return fn(&ev)
		}) {
			return first, f.nextEvent
		}
	}
	_, next = f.eventsLocked(max(from, logFirst), fn)
	return first, next
}

// encodeKept writes the kept events (state version 11): the tenants that
// keep some, in order, each with its events.
func encodeKept(e *sfq.Encoder, k keptViews, version int) {
	e.Uvarint(uint64(len(k.tenants)))
	for i, ti := range k.tenants {
		e.Uvarint(uint64(ti))
		e.Uvarint(uint64(k.views[i].n))
		k.views[i].Each(0, func(seq uint64, ev *eventRecord) bool {
			encodeEvent(e, seq, ev, version)
			return true
		})
	}
}

// decodeKept reads what encodeKept wrote; every kept event precedes the
// log's first.
func (f *FSM) decodeKept(d *sfq.Decoder, version int) {
	nt := d.Uvarint()
	prev := -1
	for i := uint64(0); i < nt && d.Err() == nil; i++ {
		ti := d.Uint32()
		if int(ti) <= prev {
			d.Fail("kept events: tenant %d out of order", ti)
			return
		}
		prev = int(ti)
		ne := d.Uvarint()
		if ne == 0 {
			d.Fail("kept events: tenant %d keeps none", ti)
			return
		}
		l := &keptLog{}
		for j := uint64(0); j < ne && d.Err() == nil; j++ {
			seq, ev := decodeEvent(d, version)
			if d.Err() != nil {
				return
			}
			if !l.Append(seq, &ev) {
				d.Fail("kept events of tenant %d: seq %d out of order", ti, seq)
				return
			}
		}
		if f.kept == nil {
			f.kept = map[uint32]*keptLog{}
		}
		f.kept[ti] = l
		f.keptN += l.n
	}
}

// verifyKept checks the kept events against the log: each before the
// log's first, within the bounds.
func (f *FSM) verifyKept() error {
	if len(f.kept) == 0 {
		return nil
	}
	first := f.nextEvent - uint64(f.events.Len())
	n := 0
	for ti, l := range f.kept {
		if l.n == 0 {
			return fmt.Errorf("%w: tenant %d keeps an empty log of events", sfq.ErrVerify, ti)
		}
		if p := f.cfg.EventRetentionPerTenant; uint64(l.n) > p {
			return fmt.Errorf("%w: tenant %d keeps %d events, over event_retention_per_tenant %d", sfq.ErrVerify, ti, l.n, p)
		}
		var last uint64
		l.View().Each(0, func(seq uint64, _ *eventRecord) bool { last = seq; return true })
		if last >= first {
			return fmt.Errorf("%w: tenant %d keeps event %d, which the log holds (from %d)", sfq.ErrVerify, ti, last, first)
		}
		n += l.n
	}
	if n != f.keptN || uint64(n) > f.cfg.EventRetentionCount {
		return fmt.Errorf("%w: %d events kept (counted %d; at most event_retention_count %d)", sfq.ErrVerify, n, f.keptN, f.cfg.EventRetentionCount)
	}
	return nil
}
