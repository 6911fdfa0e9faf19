package sfq

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestTreesAgainstBruteForce drives the three trees of one slot with random
// inserts, removals, re-keys and block flips over up to a few hundred
// heads, and compares every query with a scan of the heads: the leftmost
// fitting head of an order tree, the oldest fitting fifo head, the oldest
// head the candidate rule looks at, and the heads in a cost range. After
// every step each tree is checked for order, balance and exact aggregates.
func TestTreesAgainstBruteForce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var p nodePool
		p.init()
		var byID, ord, cost int32
		live := map[int32]bool{}
		nextID := JobID(1)
		inOrd := func(n *hnode) bool { return !n.gb }
		inCost := func(n *hnode) bool { return !n.gb && !n.dl }
		add := func(x int32) {
			byID = p.insert(treeID, byID, x)
			if inOrd(&p.n[x]) {
				ord = p.insert(treeOrder, ord, x)
			}
			if inCost(&p.n[x]) {
				cost = p.insert(treeCost, cost, x)
			}
		}
		del := func(x int32) {
			byID = p.remove(treeID, byID, x)
			if inOrd(&p.n[x]) {
				ord = p.remove(treeOrder, ord, x)
			}
			if inCost(&p.n[x]) {
				cost = p.remove(treeCost, cost, x)
			}
		}
		check := func() {
			for _, tr := range []struct {
				root int32
				t    int
				want func(n *hnode) bool
			}{{byID, treeID, func(*hnode) bool { return true }}, {ord, treeOrder, inOrd}, {cost, treeCost, inCost}} {
				var got []int32
				var walk func(x int32) int8
				walk = func(x int32) int8 {
					if x == 0 {
						return 0
					}
					hl := walk(p.n[x].l[tr.t])
					got = append(got, x)
					hr := walk(p.n[x].r[tr.t])
					if d := hl - hr; d > 1 || d < -1 {
						t.Fatalf("tree %d unbalanced at %d", tr.t, x)
					}
					cp := p.n[x]
					p.recompute(tr.t, &cp)
					if cp != p.n[x] {
						t.Fatalf("tree %d node %d aggregates %+v, recomputed %+v", tr.t, x, p.n[x], cp)
					}
					return p.n[x].ht[tr.t]
				}
				walk(tr.root)
				for i := 1; i < len(got); i++ {
					if !p.less(tr.t, got[i-1], got[i]) {
						t.Fatalf("tree %d out of order", tr.t)
					}
				}
				n := 0
				for x := range live {
					if tr.want(&p.n[x]) {
						n++
					}
				}
				if n != len(got) {
					t.Fatalf("tree %d holds %d nodes, want %d", tr.t, len(got), n)
				}
			}
		}
		steps := rapid.IntRange(1, 600).Draw(t, "steps")
		for range steps {
			keys := make([]int32, 0, len(live))
			for x := range live {
				keys = append(keys, x)
			}
			slices.Sort(keys)
			op := rapid.IntRange(0, 9).Draw(t, "op")
			switch {
			case op < 5 || len(keys) == 0: // a new head
				x := p.alloc()
				n := &p.n[x]
				n.id = nextID
				nextID += JobID(rapid.IntRange(1, 3).Draw(t, "gap"))
				n.cost = rapid.Int64Range(1, 50).Draw(t, "cost")
				n.key = VirtualTime(rapid.Int64Range(0, 30).Draw(t, "key"))
				n.dl = rapid.IntRange(0, 3).Draw(t, "dl") == 0
				n.gb = rapid.IntRange(0, 3).Draw(t, "gb") == 0
				live[x] = true
				add(x)
			case op < 7: // a head leaves
				x := rapid.SampledFrom(keys).Draw(t, "leave")
				del(x)
				delete(live, x)
				p.release(x)
			case op < 8: // a group blocks or unblocks
				x := rapid.SampledFrom(keys).Draw(t, "flip")
				del(x)
				p.n[x].gb = !p.n[x].gb
				add(x)
			default: // a group's tag changes
				x := rapid.SampledFrom(keys).Draw(t, "rekey")
				del(x)
				p.n[x].key = VirtualTime(rapid.Int64Range(0, 30).Draw(t, "key"))
				add(x)
			}
			check()

			room := rapid.Int64Range(-1, 60).Draw(t, "room")
			if rapid.IntRange(0, 4).Draw(t, "unlimited") == 0 {
				room = unlimitedRoom
			}
			uf := rapid.IntRange(0, 4).Draw(t, "uf") == 0
			ud := uf || rapid.IntRange(0, 4).Draw(t, "ud") == 0
			var wantOrd, wantFIFO, wantOldest int32
			var wantRange []int32
			lo := rapid.Int64Range(-1, 50).Draw(t, "lo")
			for x := range live {
				n := &p.n[x]
				if inOrd(n) && n.cost <= room && (wantOrd == 0 || p.less(treeOrder, x, wantOrd)) {
					wantOrd = x
				}
				if !n.dl && !n.gb && n.cost <= room && (wantFIFO == 0 || n.id < p.n[wantFIFO].id) {
					wantFIFO = x
				}
				if (!n.gb || tenantBlocks(n, uf, ud, room)) && (wantOldest == 0 || n.id < p.n[wantOldest].id) {
					wantOldest = x
				}
				if inCost(n) && n.cost > lo && n.cost <= room {
					wantRange = append(wantRange, x)
				}
			}
			slices.SortFunc(wantRange, func(a, b int32) int {
				if p.less(treeCost, a, b) {
					return -1
				}
				return 1
			})
			if got := p.fitOrder(ord, room); got != wantOrd {
				t.Fatalf("fitOrder(%d) = %d, want %d", room, got, wantOrd)
			}
			if got := p.fitFIFO(byID, room); got != wantFIFO {
				t.Fatalf("fitFIFO(%d) = %d, want %d", room, got, wantFIFO)
			}
			if got := p.oldest(byID, uf, ud, room); got != wantOldest {
				t.Fatalf("oldest(%v, %v, %d) = %d, want %d", uf, ud, room, got, wantOldest)
			}
			var gotRange []int32
			p.costRange(cost, lo, room, func(x int32) { gotRange = append(gotRange, x) })
			if !slices.Equal(gotRange, wantRange) {
				t.Fatalf("costRange(%d, %d) = %v, want %v", lo, room, gotRange, wantRange)
			}
		}
	})
}
