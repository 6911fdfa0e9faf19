package sfq

// deadline is one pending expiry: the ack deadline of an assigned job, or
// the lease or timeout of a running one. Entries are lazy: when a deadline
// moves later (a heartbeat, GrantLeases) the entry stays put and is moved
// when it reaches the top; when the job leaves the state the deadline
// belongs to, the entry is dropped when it reaches the top.
type deadline struct {
	at      Time
	job     JobID
	attempt uint32
	kind    InputKind
}

// deadlineHeap is a min-heap of deadlines by time, then job, behind a
// short list of the newest (fresh, in the order they were added). A
// deadline is added to fresh; once fresh holds freshDeadlines, those that
// still apply move into the heap (settle). A short job
// starts and ends within that window, so its ack deadline and its lease
// never enter the heap, and are never popped from it.
type deadlineHeap struct {
	items []deadline
	fresh []deadline
}

// freshDeadlines is how many deadlines wait in fresh before the heap
// takes them: at 10,000 dispatches a second, about the last tenth of a
// second's. Tests lower it to settle often; nothing else changes it.
var freshDeadlines = 2048

// deadlineBefore orders deadlines by time, then job, then kind.
func deadlineBefore(a, b *deadline) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	if a.job != b.job {
		return a.job < b.job
	}
	return a.kind < b.kind
}

func (h *deadlineHeap) top() *deadline {
	if len(h.items) == 0 {
		return nil
	}
	return &h.items[0]
}

func (h *deadlineHeap) push(d deadline) {
	h.items = append(h.items, d)
	heapUp(h.items, deadlineBefore)
}

func (h *deadlineHeap) pop() { h.items = heapPop(h.items, deadlineBefore) }

// heapUp restores the order of the binary min-heap items (by before)
// after an element was appended.
func heapUp[T any](items []T, before func(a, b *T) bool) {
	i := len(items) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !before(&items[i], &items[p]) {
			break
		}
		items[i], items[p] = items[p], items[i]
		i = p
	}
}

// heapPop removes the front of the binary min-heap items (by before) and
// returns the heap one shorter.
func heapPop[T any](items []T, before func(a, b *T) bool) []T {
	n := len(items) - 1
	items[0] = items[n]
	items = items[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			return items
		}
		m := l
		if r := l + 1; r < n && before(&items[r], &items[l]) {
			m = r
		}
		if !before(&items[m], &items[i]) {
			return items
		}
		items[i], items[m] = items[m], items[i]
		i = m
	}
}

// add records d in fresh and reports whether fresh is full (settle it).
func (h *deadlineHeap) add(d deadline) bool {
	h.fresh = append(h.fresh, d)
	return len(h.fresh) >= freshDeadlines
}

// settle moves the fresh entries that still apply into the heap, each at
// the time current gives, and drops those it reports gone.
func (h *deadlineHeap) settle(current func(*deadline) (Time, bool)) {
	for i := range h.fresh {
		at, ok := current(&h.fresh[i])
		if !ok {
			continue
		}
		d := h.fresh[i]
		d.at = max(d.at, at)
		h.push(d)
	}
	h.fresh = h.fresh[:0]
}

// walk calls fn for every entry whose time is <= now, the heap's first
// (in heap order, not sorted, skipping subtrees that start later), then
// the fresh ones, until fn returns false.
func (h *deadlineHeap) walk(now Time, fn func(*deadline) bool) {
	var visit func(i int) bool
	visit = func(i int) bool {
		if i >= len(h.items) || h.items[i].at > now {
			return true
		}
		if !fn(&h.items[i]) {
			return false
		}
		return visit(2*i+1) && visit(2*i+2)
	}
	if !visit(0) {
		return
	}
	for i := range h.fresh {
		if h.fresh[i].at <= now && !fn(&h.fresh[i]) {
			return
		}
	}
}

// each calls fn for every entry, in the heap and fresh.
func (h *deadlineHeap) each(fn func(*deadline)) {
	for i := range h.items {
		fn(&h.items[i])
	}
	for i := range h.fresh {
		fn(&h.fresh[i])
	}
}

// endedQueue orders terminal jobs by (ended_at, id) for pruning, so that
// which jobs a limited prune removes depends only on the state, never on
// the order in which jobs ended or the state was restored.
type endedQueue struct {
	items []endedEntry
}

type endedEntry struct {
	at Time
	id JobID
}

func endedBefore(a, b *endedEntry) bool { return a.at < b.at || (a.at == b.at && a.id < b.id) }

func (q *endedQueue) push(at Time, id JobID) {
	q.items = append(q.items, endedEntry{at, id})
	heapUp(q.items, endedBefore)
}

func (q *endedQueue) front() (endedEntry, bool) {
	if len(q.items) == 0 {
		return endedEntry{}, false
	}
	return q.items[0], true
}

func (q *endedQueue) pop() { q.items = heapPop(q.items, endedBefore) }
