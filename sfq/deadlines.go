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

// deadlineHeap is a min-heap of deadlines by time, then job.
type deadlineHeap struct {
	items []deadline
}

func (h *deadlineHeap) less(i, j int) bool {
	a, b := &h.items[i], &h.items[j]
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
	i := len(h.items) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h.items[i], h.items[p] = h.items[p], h.items[i]
		i = p
	}
}

func (h *deadlineHeap) pop() {
	n := len(h.items) - 1
	h.items[0] = h.items[n]
	h.items = h.items[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h.items[i], h.items[m] = h.items[m], h.items[i]
		i = m
	}
}

// walk calls fn for every entry whose time is <= now (in heap order, not
// sorted), skipping subtrees that start later, until fn returns false.
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
	visit(0)
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

func (q *endedQueue) less(i, j int) bool {
	a, b := q.items[i], q.items[j]
	return a.at < b.at || (a.at == b.at && a.id < b.id)
}

func (q *endedQueue) push(at Time, id JobID) {
	q.items = append(q.items, endedEntry{at, id})
	i := len(q.items) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q.items[i], q.items[p] = q.items[p], q.items[i]
		i = p
	}
}

func (q *endedQueue) front() (endedEntry, bool) {
	if len(q.items) == 0 {
		return endedEntry{}, false
	}
	return q.items[0], true
}

func (q *endedQueue) pop() {
	n := len(q.items) - 1
	q.items[0] = q.items[n]
	q.items = q.items[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && q.less(r, l) {
			m = r
		}
		if !q.less(m, i) {
			return
		}
		q.items[i], q.items[m] = q.items[m], q.items[i]
		i = m
	}
}
