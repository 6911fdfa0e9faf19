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
	kind    EventKind
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

// endedQueue lists terminal jobs in the order they ended, for pruning.
type endedQueue struct {
	ids  []JobID
	head int
}

func (q *endedQueue) push(id JobID) { q.ids = append(q.ids, id) }

func (q *endedQueue) front() (JobID, bool) {
	if q.head >= len(q.ids) {
		return 0, false
	}
	return q.ids[q.head], true
}

func (q *endedQueue) pop() {
	q.ids[q.head] = 0
	q.head++
	if q.head >= 1024 && q.head*2 >= len(q.ids) {
		q.ids = append([]JobID(nil), q.ids[q.head:]...)
		q.head = 0
	}
}
