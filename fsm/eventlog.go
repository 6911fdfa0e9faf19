package fsm

import (
	"encoding/binary"
	"sort"
	"unsafe"

	"github.com/baristahq/barista/sfq"
)

// eventLog is the replicated event log: events numbered by a contiguous
// seq, appended at the end and pruned from the front. It keeps each event
// as a compact byte record instead of a struct: a queued event takes about
// ten bytes instead of 56, and every queued job has one.
//
// Records live in blocks of eventBlockBytes. A block's bytes are written
// once, in order, and never rewritten, and a pruned block is only sliced
// off the front of the directory, so a view is a copy of the directory
// header and the length of its last block: the writer can go on appending
// and pruning while another goroutine reads the view (a snapshot), with
// nothing copied.
type eventLog struct {
	blocks []*eventBlock // blocks[0] holds the oldest retained event
	head   eventCursor   // the oldest retained event in blocks[0]
	n      int           // retained events
}

// eventBlockBytes is a block's size: 4 KiB, about 400 queued events.
const eventBlockBytes = 4096

// eventBlock is a run of encoded events. first, job, at and data are set
// when the block is made and never change; count and used grow while it is
// the last block, and a view reads its own copy of them for that block.
type eventBlock struct {
	seq   uint64    // seq of the block's first event
	job   sfq.JobID // the first event's job: the base of the others'
	at    sfq.Time  // the first event's time: the base of the others'
	count int       // events written
	used  int       // bytes written
	data  []byte
}

// eventCursor is a position in the first block of the log: an event's
// byte offset there and its index in the block.
type eventCursor struct {
	off, index int
}

// Event record layout, after the block's base: kind, reason, flags, then
// zigzag(job - base job), zigzag(at - base at), tenant and, as flags say,
// attempt, wall delta, CPU ms, exit code and worker (length, bytes).
const (
	evHasAttempt = 1 << iota
	evHasWall
	evHasCPU
	evHasExit
	evHasWorker
)

// eventMaxBytes bounds the encoded size of ev.
func eventMaxBytes(ev *eventRecord) int {
	return 3 + 5*binary.MaxVarintLen64 + len(ev.Worker) + binary.MaxVarintLen64
}

func appendEvent(b []byte, blk *eventBlock, ev *eventRecord) []byte {
	var flags byte
	if ev.Attempt != 0 {
		flags |= evHasAttempt
	}
	if ev.wall != 0 {
		flags |= evHasWall
	}
	if ev.CPUMs != 0 {
		flags |= evHasCPU
	}
	if ev.ExitCode != 0 {
		flags |= evHasExit
	}
	if ev.Worker != "" {
		flags |= evHasWorker
	}
	b = append(b, byte(ev.Kind), byte(ev.Reason), flags)
	// Differences in uint64 wrap around and come back exactly.
	b = binary.AppendVarint(b, int64(uint64(ev.Job)-uint64(blk.job)))
	b = binary.AppendVarint(b, int64(uint64(ev.At)-uint64(blk.at)))
	b = binary.AppendUvarint(b, uint64(ev.Tenant))
	if flags&evHasAttempt != 0 {
		b = binary.AppendUvarint(b, uint64(ev.Attempt))
	}
	if flags&evHasWall != 0 {
		b = binary.AppendVarint(b, int64(ev.wall))
	}
	if flags&evHasCPU != 0 {
		b = binary.AppendVarint(b, ev.CPUMs)
	}
	if flags&evHasExit != 0 {
		b = binary.AppendVarint(b, int64(ev.ExitCode))
	}
	if flags&evHasWorker != 0 {
		b = binary.AppendUvarint(b, uint64(len(ev.Worker)))
		b = append(b, ev.Worker...)
	}
	return b
}

// readEvent decodes the record at data and returns it with its length.
// The bytes are the log's own, written by appendEvent.
func readEvent(data []byte, blk *eventBlock) (eventRecord, int) {
	var ev eventRecord
	ev.Kind, ev.Reason = EventKind(data[0]), Reason(data[1])
	flags := data[2]
	i := 3
	varint := func() int64 {
		v, n := binary.Varint(data[i:])
		i += n
		return v
	}
	uvarint := func() uint64 {
		v, n := binary.Uvarint(data[i:])
		i += n
		return v
	}
	ev.Job = sfq.JobID(uint64(blk.job) + uint64(varint()))
	ev.At = sfq.Time(uint64(blk.at) + uint64(varint()))
	ev.Tenant = uint32(uvarint())
	if flags&evHasAttempt != 0 {
		ev.Attempt = uint32(uvarint())
	}
	if flags&evHasWall != 0 {
		ev.wall = sfq.WallDelta(varint())
	}
	if flags&evHasCPU != 0 {
		ev.CPUMs = varint()
	}
	if flags&evHasExit != 0 {
		ev.ExitCode = int16(varint())
	}
	if flags&evHasWorker != 0 {
		n := int(uvarint())
		// The block's bytes are never written again: the string shares
		// them (and keeps the block alive while it is referenced).
		ev.Worker = unsafe.String(&data[i], n)
		i += n
	}
	return ev, i
}

// eventSize returns the length of the record at data without decoding it.
func eventSize(data []byte) int {
	flags := data[2]
	i := 3
	skip := func() {
		for data[i] >= 0x80 {
			i++
		}
		i++
	}
	skip() // job
	skip() // at
	skip() // tenant
	for _, f := range [...]byte{evHasAttempt, evHasWall, evHasCPU, evHasExit} {
		if flags&f != 0 {
			skip()
		}
	}
	if flags&evHasWorker != 0 {
		n, w := binary.Uvarint(data[i:])
		i += w + int(n)
	}
	return i
}

// Len is the number of retained events.
func (l *eventLog) Len() int { return l.n }

// Append adds ev as event seq, which must follow the last retained event
// (any seq when the log is empty). It reports false, adding nothing, when
// it does not.
func (l *eventLog) Append(seq uint64, ev *eventRecord) bool {
	var last *eventBlock
	if len(l.blocks) > 0 {
		last = l.blocks[len(l.blocks)-1]
		if l.n > 0 && seq != last.seq+uint64(last.count) {
			return false
		}
	}
	if last == nil || l.n == 0 || last.used+eventMaxBytes(ev) > len(last.data) {
		size := max(eventBlockBytes, eventMaxBytes(ev))
		last = &eventBlock{seq: seq, job: ev.Job, at: ev.At, data: make([]byte, size)}
		if l.n == 0 {
			// A view may still read the old directory: start a new one.
			l.blocks, l.head = nil, eventCursor{}
		}
		l.blocks = append(l.blocks, last)
	}
	used := len(appendEvent(last.data[last.used:last.used], last, ev))
	last.used += used
	last.count++
	l.n++
	return true
}

// Head returns the oldest retained event and its seq.
func (l *eventLog) Head() (uint64, eventRecord, bool) {
	if l.n == 0 {
		return 0, eventRecord{}, false
	}
	blk := l.blocks[0]
	ev, _ := readEvent(blk.data[l.head.off:], blk)
	return blk.seq + uint64(l.head.index), ev, true
}

// PopHead removes the oldest retained event.
func (l *eventLog) PopHead() {
	if l.n == 0 {
		return
	}
	blk := l.blocks[0]
	l.head.off += eventSize(blk.data[l.head.off:])
	l.head.index++
	l.n--
	if l.head.index == blk.count {
		// Slicing leaves the block to any view still reading it; the
		// directory's next growth drops the reference.
		l.blocks = l.blocks[1:]
		l.head = eventCursor{}
	}
}

// View returns a view of the log as it is now. It stays valid while the
// log changes, so it also serves as the frozen view of a snapshot.
func (l *eventLog) View() eventView {
	v := eventView{blocks: l.blocks, head: l.head, n: l.n}
	if len(l.blocks) > 0 {
		last := l.blocks[len(l.blocks)-1]
		v.lastCount, v.lastUsed = last.count, last.used
	}
	return v
}

// Freeze returns an immutable view (the same as View: the log never
// rewrites what a view can see).
func (l *eventLog) Freeze() eventView { return l.View() }

// Get returns event seq if it is retained.
func (l *eventLog) Get(seq uint64) (eventRecord, bool) {
	v := l.View()
	return v.Get(seq)
}

// eventView is an immutable view of an eventLog.
type eventView struct {
	blocks              []*eventBlock
	head                eventCursor
	n                   int
	lastCount, lastUsed int // of blocks[len-1], as they were
}

func (v eventView) Len() int { return v.n }

// blockLimits returns how many events and bytes of block i the view holds.
func (v eventView) blockLimits(i int) (count, used int) {
	if i == len(v.blocks)-1 {
		return v.lastCount, v.lastUsed
	}
	return v.blocks[i].count, v.blocks[i].used
}

// first returns the seq of the oldest event in the view (meaningful when
// it holds any).
func (v eventView) first() uint64 {
	if v.n == 0 {
		return 0
	}
	return v.blocks[0].seq + uint64(v.head.index)
}

// last returns the seq of the newest event in the view (meaningful when it
// holds any).
func (v eventView) last() uint64 {
	if v.n == 0 {
		return 0
	}
	return v.blocks[len(v.blocks)-1].seq + uint64(v.lastCount) - 1
}

// Get returns event seq if the view holds it.
func (v eventView) Get(seq uint64) (eventRecord, bool) {
	var out eventRecord
	found := false
	v.Each(seq, func(s uint64, ev *eventRecord) bool {
		if s == seq {
			out, found = *ev, true
		}
		return false
	})
	return out, found
}

// Each calls fn for every event with seq >= from, in order, until fn
// returns false. ev is reused between calls.
func (v eventView) Each(from uint64, fn func(seq uint64, ev *eventRecord) bool) {
	if v.n == 0 {
		return
	}
	// The first block that holds from, or the head block.
	b := sort.Search(len(v.blocks), func(i int) bool {
		count, _ := v.blockLimits(i)
		return v.blocks[i].seq+uint64(count) > from
	})
	for ; b < len(v.blocks); b++ {
		blk := v.blocks[b]
		count, used := v.blockLimits(b)
		off, index := 0, 0
		if b == 0 {
			off, index = v.head.off, v.head.index
		}
		for off < used && index < count {
			seq := blk.seq + uint64(index)
			if seq < from {
				off += eventSize(blk.data[off:used])
				index++
				continue
			}
			ev, size := readEvent(blk.data[off:used], blk)
			off += size
			index++
			if !fn(seq, &ev) {
				return
			}
		}
	}
}

// EachBack calls fn for every event from the newest back to the oldest
// until fn returns false.
func (v eventView) EachBack(fn func(seq uint64, ev *eventRecord) bool) {
	var buf []eventRecord
	for b := len(v.blocks) - 1; b >= 0; b-- {
		blk := v.blocks[b]
		count, used := v.blockLimits(b)
		off, index := 0, 0
		if b == 0 {
			off, index = v.head.off, v.head.index
		}
		first := blk.seq + uint64(index)
		buf = buf[:0]
		for off < used && index < count {
			ev, size := readEvent(blk.data[off:used], blk)
			buf = append(buf, ev)
			off += size
			index++
		}
		for i := len(buf) - 1; i >= 0; i-- {
			if !fn(first+uint64(i), &buf[i]) {
				return
			}
		}
	}
}

// shift numbers every retained event d higher (a restore of an older
// state, renumbered above every event the cluster numbered since). Only
// a log no view reads yet may be shifted.
func (l *eventLog) shift(d uint64) {
	for _, b := range l.blocks {
		b.seq += d
	}
}
