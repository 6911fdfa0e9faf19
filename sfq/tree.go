package sfq

import "math"

// The heads of one tenant's groups in one class and size (a "slot") are
// kept in three AVL trees over a shared pool of nodes, one node per head:
//
//   - treeID: every head, fifo and deadline, blocked by its group or not,
//     by job ID. It finds the oldest head the candidate rule looks at and
//     the oldest eligible fifo head (group_order=fifo).
//   - treeOrder: the heads not blocked by their group, by (group tag, ID)
//     for fifo heads under group_order=fair, by (deadline_at, ID) for
//     deadline heads. A slot has one such tree of each kind.
//   - treeCost: fifo heads not blocked by their group under
//     group_order=fair, by (cost, ID): the groups a rise of the tenant's
//     in-flight room makes eligible, for the activation clamp.
//
// Every tree keeps, per subtree, what the queries need (minimum and maximum
// costs of kinds of heads), so that "the leftmost head whose cost fits"
// costs O(log G). Nodes are addressed by int32 index (0 = none); a node's
// key must not change while it is in a tree (remove, change, insert).
const (
	treeID = iota
	treeOrder
	treeCost
	numTrees
)

// noCost is the "none" of a subtree's minimum cost; unlimitedRoom, the
// in-flight room of a tenant without an in-flight cap (or with nothing in
// flight), is below it and above every cost.
const (
	noCost        = math.MaxInt64
	unlimitedRoom = math.MaxInt64 - 1
)

// hnode is one group head of a slot.
type hnode struct {
	id    JobID
	key   VirtualTime // treeOrder: group tag (fifo heads) or deadline_at (deadline heads)
	cost  int64
	group uint32 // group slot
	dl    bool   // a deadline head
	gb    bool   // blocked by a group-level limit
	inOrd bool   // in its treeOrder
	inCst bool   // in treeCost
	l, r  [numTrees]int32
	ht    [numTrees]int8
	// treeID aggregates over the subtree: the minimum cost of fifo heads
	// not blocked by their group, the maximum costs of blocked fifo and
	// deadline heads (-1: none), and whether any head is not blocked.
	openF      int64
	gbF, gbD   int64
	open       bool
	anyOpenDL  bool
	minCostOrd int64 // treeOrder: minimum cost in the subtree
}

// nodePool holds the nodes; index 0 is never used.
type nodePool struct {
	n    []hnode
	free []int32
}

func (p *nodePool) init() {
	p.n = make([]hnode, 1, 64)
	p.free = nil
}

// alloc returns a fresh node (it may grow the pool: never on the dispatch
// path, which only reuses or frees nodes).
func (p *nodePool) alloc() int32 {
	if k := len(p.free); k > 0 {
		x := p.free[k-1]
		p.free = p.free[:k-1]
		return x
	}
	p.n = append(p.n, hnode{})
	return int32(len(p.n) - 1)
}

func (p *nodePool) release(x int32) {
	p.n[x] = hnode{}
	p.free = append(p.free, x)
}

// less orders nodes a and b in tree t.
func (p *nodePool) less(t int, a, b int32) bool {
	x, y := &p.n[a], &p.n[b]
	switch t {
	case treeOrder:
		if x.key != y.key {
			return x.key < y.key
		}
	case treeCost:
		if x.cost != y.cost {
			return x.cost < y.cost
		}
	}
	return x.id < y.id
}

func (p *nodePool) height(t int, x int32) int8 {
	if x == 0 {
		return 0
	}
	return p.n[x].ht[t]
}

// update recomputes x's height and aggregates in tree t from its children.
func (p *nodePool) update(t int, x int32) { p.recompute(t, &p.n[x]) }

// recompute sets n's height and aggregates in tree t from its children.
func (p *nodePool) recompute(t int, n *hnode) {
	l, r := n.l[t], n.r[t]
	n.ht[t] = 1 + max(p.height(t, l), p.height(t, r))
	switch t {
	case treeID:
		n.openF, n.gbF, n.gbD, n.open, n.anyOpenDL = noCost, -1, -1, !n.gb, !n.gb && n.dl
		switch {
		case !n.gb && !n.dl:
			n.openF = n.cost
		case n.gb && !n.dl:
			n.gbF = n.cost
		case n.gb && n.dl:
			n.gbD = n.cost
		}
		for _, c := range [2]int32{l, r} {
			if c == 0 {
				continue
			}
			k := &p.n[c]
			n.openF = min(n.openF, k.openF)
			n.gbF = max(n.gbF, k.gbF)
			n.gbD = max(n.gbD, k.gbD)
			n.open = n.open || k.open
			n.anyOpenDL = n.anyOpenDL || k.anyOpenDL
		}
	case treeOrder:
		n.minCostOrd = n.cost
		if l != 0 {
			n.minCostOrd = min(n.minCostOrd, p.n[l].minCostOrd)
		}
		if r != 0 {
			n.minCostOrd = min(n.minCostOrd, p.n[r].minCostOrd)
		}
	}
}

func (p *nodePool) rotRight(t int, x int32) int32 {
	l := p.n[x].l[t]
	p.n[x].l[t] = p.n[l].r[t]
	p.n[l].r[t] = x
	p.update(t, x)
	p.update(t, l)
	return l
}

func (p *nodePool) rotLeft(t int, x int32) int32 {
	r := p.n[x].r[t]
	p.n[x].r[t] = p.n[r].l[t]
	p.n[r].l[t] = x
	p.update(t, x)
	p.update(t, r)
	return r
}

func (p *nodePool) balance(t int, x int32) int32 {
	p.update(t, x)
	n := &p.n[x]
	switch bf := p.height(t, n.l[t]) - p.height(t, n.r[t]); {
	case bf > 1:
		l := n.l[t]
		if p.height(t, p.n[l].l[t]) < p.height(t, p.n[l].r[t]) {
			p.n[x].l[t] = p.rotLeft(t, l)
		}
		return p.rotRight(t, x)
	case bf < -1:
		r := n.r[t]
		if p.height(t, p.n[r].r[t]) < p.height(t, p.n[r].l[t]) {
			p.n[x].r[t] = p.rotRight(t, r)
		}
		return p.rotLeft(t, x)
	}
	return x
}

// insert adds node x to the tree t rooted at root and returns the new root.
func (p *nodePool) insert(t int, root, x int32) int32 {
	if root == 0 {
		n := &p.n[x]
		n.l[t], n.r[t] = 0, 0
		p.update(t, x)
		return x
	}
	if p.less(t, x, root) {
		p.n[root].l[t] = p.insert(t, p.n[root].l[t], x)
	} else {
		p.n[root].r[t] = p.insert(t, p.n[root].r[t], x)
	}
	return p.balance(t, root)
}

// remove takes node x (which must be in it) out of tree t rooted at root
// and returns the new root.
func (p *nodePool) remove(t int, root, x int32) int32 {
	if root == x {
		l, r := p.n[x].l[t], p.n[x].r[t]
		p.n[x].l[t], p.n[x].r[t], p.n[x].ht[t] = 0, 0, 0
		if l == 0 {
			return r
		}
		if r == 0 {
			return l
		}
		var m int32
		r = p.removeMin(t, r, &m)
		p.n[m].l[t], p.n[m].r[t] = l, r
		return p.balance(t, m)
	}
	if p.less(t, x, root) {
		p.n[root].l[t] = p.remove(t, p.n[root].l[t], x)
	} else {
		p.n[root].r[t] = p.remove(t, p.n[root].r[t], x)
	}
	return p.balance(t, root)
}

func (p *nodePool) removeMin(t int, x int32, m *int32) int32 {
	if l := p.n[x].l[t]; l != 0 {
		p.n[x].l[t] = p.removeMin(t, l, m)
		return p.balance(t, x)
	}
	*m = x
	r := p.n[x].r[t]
	p.n[x].r[t] = 0
	return r
}

// fitOrder returns the leftmost node of a treeOrder whose cost is <= room.
func (p *nodePool) fitOrder(x int32, room int64) int32 {
	if x == 0 || p.n[x].minCostOrd > room {
		return 0
	}
	for {
		n := &p.n[x]
		if l := n.l[treeOrder]; l != 0 && p.n[l].minCostOrd <= room {
			x = l
			continue
		}
		if n.cost <= room {
			return x
		}
		x = n.r[treeOrder] // holds the fit, by the subtree minimum
	}
}

// fitFIFO returns the leftmost fifo head of a treeID, not blocked by its
// group, whose cost is <= room.
func (p *nodePool) fitFIFO(x int32, room int64) int32 {
	if x == 0 || p.n[x].openF > room {
		return 0
	}
	for {
		n := &p.n[x]
		if l := n.l[treeID]; l != 0 && p.n[l].openF <= room {
			x = l
			continue
		}
		if !n.dl && !n.gb && n.cost <= room {
			return x
		}
		x = n.r[treeID]
	}
}

// oldest returns the leftmost node of a treeID that the candidate rule
// looks at: a head not blocked by its group, or one its tenant blocks (so
// that it holds the younger ones) — with uf and ud the tenant's blocks of
// every fifo and every deadline head of the slot, and room the in-flight
// room (a head costing more is blocked by the tenant).
func (p *nodePool) oldest(x int32, uf, ud bool, room int64) int32 {
	counts := func(x int32) bool {
		n := &p.n[x]
		return n.open || (uf && n.gbF >= 0) || (ud && n.gbD >= 0) || n.gbF > room || n.gbD > room
	}
	if x == 0 || !counts(x) {
		return 0
	}
	for {
		n := &p.n[x]
		if l := n.l[treeID]; l != 0 && counts(l) {
			x = l
			continue
		}
		if !n.gb || (n.dl && ud) || (!n.dl && uf) || n.cost > room {
			return x
		}
		x = n.r[treeID]
	}
}

// costRange calls fn for every node of a treeCost with lo < cost <= hi,
// in cost order.
func (p *nodePool) costRange(x int32, lo, hi int64, fn func(x int32)) {
	for x != 0 {
		n := &p.n[x]
		if n.cost <= lo {
			x = n.r[treeCost]
			continue
		}
		if n.cost > hi {
			x = n.l[treeCost]
			continue
		}
		p.costRange(n.l[treeCost], lo, hi, fn)
		fn(x)
		x = n.r[treeCost]
	}
}
