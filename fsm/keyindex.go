package fsm

import (
	"fmt"
	"hash/maphash"

	"github.com/baristahq/barista/sfq"
)

// keyIndex finds the newest idempotency-key record of a (tenant, key): the
// derived index over the key records, rebuilt on restore and never
// encoded. It maps a 64-bit hash of the pair to the record's seq, which a
// map of uint64 does with one hash of the key and half the memory of a
// map keyed by the pair; the record itself confirms the pair. A pair whose
// hash another pair's record holds goes to clash instead, so the answer
// never depends on the hash, which is seeded per process.
type keyIndex struct {
	seed  maphash.Seed
	mask  uint64 // all ones; a test narrows it to make pairs clash
	bySum map[uint64]uint64
	clash map[keyRef]uint64
}

func newKeyIndex() keyIndex {
	return keyIndex{seed: maphash.MakeSeed(), mask: ^uint64(0), bySum: map[uint64]uint64{}, clash: map[keyRef]uint64{}}
}

func (x *keyIndex) sum(ref keyRef) uint64 {
	return (maphash.String(x.seed, ref.key) ^ (uint64(ref.tenant)+1)*0x9e3779b97f4a7c15) & x.mask
}

// holds reports whether record seq is present and is ref's.
func holds(keys *sfq.Vector[keyEntry], seq uint64, ref keyRef) bool {
	e := keys.Get(seq)
	return e != nil && e.Tenant == ref.tenant && e.Key == ref.key
}

// get returns the seq of ref's newest record.
func (x *keyIndex) get(keys *sfq.Vector[keyEntry], ref keyRef) (uint64, bool) {
	if seq, ok := x.bySum[x.sum(ref)]; ok && holds(keys, seq, ref) {
		return seq, true
	}
	if len(x.clash) == 0 {
		return 0, false
	}
	seq, ok := x.clash[ref]
	return seq, ok
}

// put makes seq, a record of ref just stored, ref's newest.
func (x *keyIndex) put(keys *sfq.Vector[keyEntry], ref keyRef, seq uint64) {
	h := x.sum(ref)
	if old, ok := x.bySum[h]; ok && !holds(keys, old, ref) {
		x.clash[ref] = seq
		return
	}
	x.bySum[h] = seq
	if len(x.clash) > 0 {
		delete(x.clash, ref)
	}
}

// drop forgets record seq of ref, about to be removed, if it is ref's
// newest.
func (x *keyIndex) drop(ref keyRef, seq uint64) {
	if h := x.sum(ref); x.bySum[h] == seq {
		delete(x.bySum, h)
	} else if len(x.clash) > 0 && x.clash[ref] == seq {
		delete(x.clash, ref)
	}
}

// verify checks that every entry points to a present record of its pair.
func (x *keyIndex) verify(keys *sfq.Vector[keyEntry]) error {
	for h, seq := range x.bySum {
		if e := keys.Get(seq); e == nil || x.sum(keyRef{e.Tenant, e.Key}) != h {
			return fmt.Errorf("%w: idempotency index entry %d points to a missing record", sfq.ErrVerify, seq)
		}
	}
	for ref, seq := range x.clash {
		if !holds(keys, seq, ref) {
			return fmt.Errorf("%w: idempotency index entry %q points to a missing record", sfq.ErrVerify, ref.key)
		}
	}
	return nil
}
