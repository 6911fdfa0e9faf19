package sfq

import "sort"

// heapOrder selects how a tenantHeap compares its entries.
type heapOrder uint8

const (
	// byTag: lowest tag first, then higher tier, then lower head seq.
	byTag heapOrder = iota
	// byTierSeq: higher tier first, then lower head seq (the tenants that
	// tie at virtual_now under the dispatch clamp).
	byTierSeq
	// byTagDesc: highest tag first (the idle rule's maximum finish tag).
	byTagDesc
	// byDeadline: earliest deadline first, then lower job ID (the tenants
	// whose deadline head of one class and size is eligible; tag holds
	// the head's deadline_at).
	byDeadline
)

// hentry is one tenant's key in a heap. The keys are copied in so that
// comparisons never chase a pointer.
type hentry struct {
	tag    VirtualTime
	seq    JobID
	tenant uint32
	tier   Tier
}

// tenantHeap is a 4-ary heap of tenants with O(log n) update and removal
// of any tenant by index. Four children per node halve the depth of a
// binary heap and keep siblings in adjacent cache lines, which matters at
// 100,000 tenants. It allocates only when it grows.
type tenantHeap struct {
	order heapOrder
	items []hentry
	pos   []int32 // pos[tenant] = index in items + 1; 0 = absent
}

func (h *tenantHeap) less(a, b *hentry) bool {
	switch h.order {
	case byTag:
		if a.tag != b.tag {
			return a.tag < b.tag
		}
	case byTagDesc:
		if a.tag != b.tag {
			return a.tag > b.tag
		}
		return a.tenant < b.tenant
	case byDeadline:
		if a.tag != b.tag {
			return a.tag < b.tag
		}
		if a.seq != b.seq {
			return a.seq < b.seq
		}
		return a.tenant < b.tenant
	}
	if a.tier != b.tier {
		return a.tier > b.tier
	}
	if a.seq != b.seq {
		return a.seq < b.seq
	}
	return a.tenant < b.tenant
}

func (h *tenantHeap) Len() int { return len(h.items) }

func (h *tenantHeap) top() *hentry {
	if len(h.items) == 0 {
		return nil
	}
	return &h.items[0]
}

func (h *tenantHeap) has(t uint32) bool {
	return int(t) < len(h.pos) && h.pos[t] != 0
}

// get returns tenant t's entry, or nil.
func (h *tenantHeap) get(t uint32) *hentry {
	if !h.has(t) {
		return nil
	}
	return &h.items[h.pos[t]-1]
}

// reserve makes room for index t, so that setting it later allocates
// nothing.
func (h *tenantHeap) reserve(t uint32) {
	for int(t) >= len(h.pos) {
		h.pos = append(h.pos, 0)
	}
	if cap(h.items) < len(h.pos) {
		h.items = append(make([]hentry, 0, cap(h.pos)), h.items...)
	}
}

// set inserts tenant e.tenant with key e, or updates its key.
func (h *tenantHeap) set(e hentry) {
	for int(e.tenant) >= len(h.pos) {
		h.pos = append(h.pos, 0)
	}
	if p := h.pos[e.tenant]; p != 0 {
		i := int(p - 1)
		if h.items[i] == e {
			return
		}
		h.items[i] = e
		if !h.up(i) {
			h.down(i)
		}
		return
	}
	h.items = append(h.items, e)
	i := len(h.items) - 1
	h.pos[e.tenant] = int32(i + 1)
	h.up(i)
}

// remove takes tenant t out of the heap if present.
func (h *tenantHeap) remove(t uint32) {
	if !h.has(t) {
		return
	}
	i := int(h.pos[t] - 1)
	last := len(h.items) - 1
	if i != last {
		h.swap(i, last)
	}
	h.items = h.items[:last]
	h.pos[t] = 0
	if i != last {
		if !h.up(i) {
			h.down(i)
		}
	}
}

// pop removes and returns the top entry.
func (h *tenantHeap) pop() hentry {
	e := h.items[0]
	h.remove(e.tenant)
	return e
}

func (h *tenantHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.pos[h.items[i].tenant] = int32(i + 1)
	h.pos[h.items[j].tenant] = int32(j + 1)
}

func (h *tenantHeap) up(i int) bool {
	moved := false
	for i > 0 {
		p := (i - 1) / 4
		if !h.less(&h.items[i], &h.items[p]) {
			break
		}
		h.swap(i, p)
		i = p
		moved = true
	}
	return moved
}

func (h *tenantHeap) down(i int) {
	n := len(h.items)
	for {
		first := 4*i + 1
		if first >= n {
			return
		}
		m := first
		for c := first + 1; c < first+4 && c < n; c++ {
			if h.less(&h.items[c], &h.items[m]) {
				m = c
			}
		}
		if !h.less(&h.items[m], &h.items[i]) {
			return
		}
		h.swap(i, m)
		i = m
	}
}

// jobQueue holds the IDs of one group's queued jobs of one class and
// size, oldest first. Fresh submits append to a ring in ID order; a
// requeued job (older than every job still waiting that was never
// dispatched) goes to a small sorted side list. The head is the smaller of
// the two fronts.
//
// It holds each queued job exactly once (Verify checks it against the job
// table). A job that leaves its queue other than by its dispatch (a
// cancel, an expiry, a lapse) is found by binary search and marked dead in
// place, which keeps both lists sorted; dead entries are dropped when they
// reach a front, so neither front is ever dead. A job that comes back (a
// redrive) gets a new entry: a dead one never counts again.
type jobQueue struct {
	ring     []JobID // power-of-two capacity, ascending
	head, n  int32
	requeued []JobID // sorted descending; the smallest is last
	// cachedHead and cachedCost remember the front job once it has been
	// checked to be queued; 0 = unknown. popFront and pushRequeued clear
	// it, and the scheduler clears it when that job leaves the queue by
	// any other way, so a set cachedHead is the front without reading
	// the ring.
	cachedHead JobID
	cachedCost int64
}

// deadEntry marks an entry whose job has left the queue; the ID stays in
// the low bits, so the lists stay sorted by it.
const deadEntry JobID = 1 << 63

func (q *jobQueue) empty() bool { return q.n == 0 && len(q.requeued) == 0 }

// ringAt returns the i-th entry of the ring from its head.
func (q *jobQueue) ringAt(i int) JobID { return q.ring[(int(q.head)+i)&(len(q.ring)-1)] }

// front returns the smallest ID in the queue.
func (q *jobQueue) front() (JobID, bool) {
	var best JobID
	ok := false
	if q.n > 0 {
		best, ok = q.ring[q.head], true
	}
	if k := len(q.requeued); k > 0 && (!ok || q.requeued[k-1] < best) {
		best, ok = q.requeued[k-1], true
	}
	return best, ok
}

// popFront removes the smallest ID.
func (q *jobQueue) popFront() {
	q.cachedHead = 0
	if k := len(q.requeued); k > 0 && (q.n == 0 || q.requeued[k-1] < q.ring[q.head]) {
		q.requeued = q.requeued[:k-1]
	} else if q.n > 0 {
		q.popRing()
	}
	q.trim()
}

func (q *jobQueue) popRing() {
	q.ring[q.head] = 0
	q.head = (q.head + 1) & int32(len(q.ring)-1)
	q.n--
}

// trim drops dead entries from both fronts, and gives back a large buffer
// once the queue is empty.
func (q *jobQueue) trim() {
	for q.n > 0 && q.ring[q.head]&deadEntry != 0 {
		q.popRing()
	}
	for k := len(q.requeued); k > 0 && q.requeued[k-1]&deadEntry != 0; k-- {
		q.requeued = q.requeued[:k-1]
	}
	if q.empty() {
		if cap(q.ring) > 64 {
			q.ring, q.head = nil, 0
		}
		if cap(q.requeued) > 64 {
			q.requeued = nil
		}
	}
}

// remove marks job id dead where it stands (O(log n)); it reports whether
// the queue held it.
func (q *jobQueue) remove(id JobID) bool {
	if q.cachedHead == id {
		q.cachedHead = 0
	}
	if i := sort.Search(int(q.n), func(k int) bool { return q.ringAt(k)&^deadEntry >= id }); i < int(q.n) && q.ringAt(i) == id {
		q.ring[(int(q.head)+i)&(len(q.ring)-1)] |= deadEntry
		q.trim()
		return true
	}
	if i := sort.Search(len(q.requeued), func(k int) bool { return q.requeued[k]&^deadEntry <= id }); i < len(q.requeued) && q.requeued[i] == id {
		q.requeued[i] |= deadEntry
		q.trim()
		return true
	}
	return false
}

// each calls fn for every live entry, the side list first.
func (q *jobQueue) each(fn func(JobID)) {
	for _, id := range q.requeued {
		if id&deadEntry == 0 {
			fn(id)
		}
	}
	for i := range int(q.n) {
		if id := q.ringAt(i); id&deadEntry == 0 {
			fn(id)
		}
	}
}

// pushBack appends a fresh job, which must be newer than every job in the
// ring.
func (q *jobQueue) pushBack(id JobID) {
	if int(q.n) == len(q.ring) {
		grown := make([]JobID, max(4, 2*len(q.ring)))
		for i := range int(q.n) {
			grown[i] = q.ringAt(i)
		}
		q.ring, q.head = grown, 0
	}
	q.ring[(int(q.head)+int(q.n))&(len(q.ring)-1)] = id
	q.n++
}

// pushAt puts a job that comes back (a requeue, a release, a redrive) at
// its ID's place: at the back of the ring when it is newer than every job
// there, else in the sorted side list.
func (q *jobQueue) pushAt(id JobID) {
	if q.n == 0 || q.ringAt(int(q.n)-1)&^deadEntry < id {
		q.cachedHead = 0
		q.pushBack(id)
		return
	}
	q.pushRequeued(id)
}

// pushRequeued puts a requeued job back in ID order.
func (q *jobQueue) pushRequeued(id JobID) {
	q.cachedHead = 0 // it may go before the front
	// Descending order: find the first position whose ID is below id,
	// then move the tail in one copy (a redrive of many jobs inserts each
	// above all the others; moving them one by one took 80 % of a
	// 10,000-job redrive).
	i := sort.Search(len(q.requeued), func(k int) bool { return q.requeued[k]&^deadEntry < id })
	if i > 0 && q.requeued[i-1] == id|deadEntry {
		q.requeued[i-1] = id // its own dead entry, in its place
		return
	}
	q.requeued = append(q.requeued, 0)
	copy(q.requeued[i+1:], q.requeued[i:])
	q.requeued[i] = id
}

// dlEntry is one queued deadline job.
type dlEntry struct {
	at Time
	id JobID
}

func dlBefore(a, b dlEntry) bool { return a.at < b.at || (a.at == b.at && a.id < b.id) }

// dlEntryBefore is dlBefore for the heap helpers.
func dlEntryBefore(a, b *dlEntry) bool { return dlBefore(*a, *b) }

// deadlineQueue holds the IDs of one group's queued jobs with a deadline
// of one class and size, as a binary min-heap by (deadline_at, job ID). As
// in jobQueue, every queued job is in it exactly once. A job that leaves
// it other than by its dispatch cannot be found in a heap cheaply, so its
// entry is listed in dead and dropped when it reaches the top (the top is
// never dead); a job that comes back with the same key takes its dead
// entry back instead of a second one. The head's cost is cached (as in
// jobQueue, a set cachedHead is the front).
type deadlineQueue struct {
	items      []dlEntry
	dead       map[dlEntry]struct{} // nil while none
	cachedHead JobID
	cachedCost int64
}

func (q *deadlineQueue) front() (dlEntry, bool) {
	if len(q.items) == 0 {
		return dlEntry{}, false
	}
	return q.items[0], true
}

func (q *deadlineQueue) push(e dlEntry) {
	q.cachedHead = 0 // it may go before the front
	if _, ok := q.dead[e]; ok {
		delete(q.dead, e)
		return
	}
	q.items = append(q.items, e)
	heapUp(q.items, dlEntryBefore)
}

func (q *deadlineQueue) popFront() {
	q.cachedHead = 0
	q.items = heapPop(q.items, dlEntryBefore)
	for len(q.items) > 0 && len(q.dead) > 0 {
		if _, ok := q.dead[q.items[0]]; !ok {
			break
		}
		delete(q.dead, q.items[0])
		q.items = heapPop(q.items, dlEntryBefore)
	}
	if len(q.items) == 0 && cap(q.items) > 64 {
		q.items = nil // give back a large buffer once the burst is over
	}
}

// remove takes entry e out: at once from the top, else by listing it
// dead (O(1)).
func (q *deadlineQueue) remove(e dlEntry) {
	if q.cachedHead == e.id {
		q.cachedHead = 0
	}
	if len(q.items) > 0 && q.items[0] == e {
		q.popFront()
		return
	}
	if q.dead == nil {
		q.dead = make(map[dlEntry]struct{})
	}
	q.dead[e] = struct{}{}
}

// live reports whether entry e stands for its job (it is not dead).
func (q *deadlineQueue) live(e dlEntry) bool {
	_, dead := q.dead[e]
	return !dead
}
