package fsm

import (
	"testing"

	"github.com/baristahq/barista/sfq"
	"pgregory.net/rapid"
)

// TestKeyIndexProperty: records added and pruned oldest first in any
// order, the index answers every pair with its newest present record, as
// a map keyed by the pair does, also when hashes clash (a mask of 0 makes
// every pair clash, 1 half of them).
func TestKeyIndexProperty(t *testing.T) {
	for _, mask := range []uint64{^uint64(0), 1, 0} {
		rapid.Check(t, func(t *rapid.T) {
			var keys sfq.Vector[keyEntry]
			x := newKeyIndex()
			x.mask = mask
			want := map[keyRef]uint64{}
			refs := []keyRef{{1, "a"}, {2, "a"}, {1, "b"}, {1, ""}, {1 | bulkKeyBit, "a"}, {7, "zz"}}
			first, next := uint64(1), uint64(1)
			for i, n := 0, rapid.IntRange(1, 300).Draw(t, "ops"); i < n; i++ {
				if next == first || rapid.IntRange(0, 2).Draw(t, "op") > 0 {
					ref := rapid.SampledFrom(refs).Draw(t, "ref")
					keys.Put(next, keyEntry{Seq: next, Tenant: ref.tenant, Key: ref.key})
					x.put(&keys, ref, next)
					want[ref] = next
					next++
				} else {
					e := keys.Get(first)
					ref := keyRef{e.Tenant, e.Key}
					x.drop(ref, first)
					if want[ref] == first {
						delete(want, ref)
					}
					keys.Del(first)
					first++
				}
				for _, ref := range refs {
					seq, ok := x.get(&keys, ref)
					if w, wok := want[ref]; seq != w || ok != wok {
						t.Fatalf("mask %d: %v gives %d %v, want %d %v", mask, ref, seq, ok, w, wok)
					}
				}
				if err := x.verify(&keys); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
