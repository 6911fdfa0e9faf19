package sfq

import "math/bits"

// A Vector is a vector of T indexed by a dense uint64, stored in fixed
// chunks so that a frozen view can be read by another goroutine while the
// table keeps changing. Freezing bumps the table's generation; a write to a
// chunk (or to the chunk directory) of an older generation first copies it.
// Between freezes writes are in place and allocate nothing; after a freeze
// the first write to each chunk copies chunkSize items once.
type Vector[T any] struct {
	dir    []*chunk[T]
	dirGen uint64
	gen    uint64
	n      int
}

const (
	chunkBits = 8
	chunkSize = 1 << chunkBits
	chunkMask = chunkSize - 1
)

// A chunk's items are an allocation of their own, apart from its header:
// 256 jobs of 160 bytes then fill five 8 KiB pages exactly (an object
// over 32 KiB is rounded up to whole pages and carries no allocation
// header), where the header would push them into a sixth.
type chunk[T any] struct {
	gen     uint64
	live    int
	present [chunkSize / 64]uint64
	items   *[chunkSize]T
}

// VectorView is an immutable view of a Vector at one generation.
type VectorView[T any] struct {
	dir []*chunk[T]
	n   int
}

func (t *Vector[T]) Len() int { return t.n }

// get returns the item at i, or nil if absent. The pointer must not be
// written through; use mut.
func (t *Vector[T]) Get(i uint64) *T {
	return t.View().Get(i)
}

func (v VectorView[T]) Get(i uint64) *T {
	c := i >> chunkBits
	if c >= uint64(len(v.dir)) {
		return nil
	}
	ch := v.dir[c]
	if ch == nil {
		return nil
	}
	o := i & chunkMask
	if ch.present[o/64]&(1<<(o%64)) == 0 {
		return nil
	}
	return &ch.items[o]
}

// ownDir makes the directory writable at the current generation and at
// least minLen long.
func (t *Vector[T]) ownDir(minLen uint64) {
	n := max(uint64(len(t.dir)), minLen)
	if t.dirGen == t.gen && n <= uint64(cap(t.dir)) {
		t.dir = t.dir[:n]
		return
	}
	capacity := max(n, 4)
	if n > uint64(len(t.dir)) {
		capacity = max(capacity, 2*uint64(len(t.dir)))
	}
	d := make([]*chunk[T], n, capacity)
	copy(d, t.dir)
	t.dir = d
	t.dirGen = t.gen
}

// ownChunk returns a writable chunk c, copying or creating it as needed.
func (t *Vector[T]) ownChunk(c uint64) *chunk[T] {
	if c < uint64(len(t.dir)) {
		if ch := t.dir[c]; ch != nil && ch.gen == t.gen {
			return ch
		}
	}
	t.ownDir(c + 1)
	old := t.dir[c]
	ch := new(chunk[T])
	items := new([chunkSize]T)
	if old != nil {
		*ch = *old
		*items = *old.items
	}
	ch.items = items
	ch.gen = t.gen
	t.dir[c] = ch
	return ch
}

// mut returns a writable pointer to the present item at i, or nil.
func (t *Vector[T]) Mut(i uint64) *T {
	if t.Get(i) == nil {
		return nil
	}
	ch := t.ownChunk(i >> chunkBits)
	return &ch.items[i&chunkMask]
}

// put stores v at i, adding it if absent, and returns a writable pointer.
func (t *Vector[T]) Put(i uint64, v T) *T {
	ch := t.ownChunk(i >> chunkBits)
	o := i & chunkMask
	if ch.present[o/64]&(1<<(o%64)) == 0 {
		ch.present[o/64] |= 1 << (o % 64)
		ch.live++
		t.n++
	}
	ch.items[o] = v
	return &ch.items[o]
}

// del removes the item at i; a chunk left empty is released.
func (t *Vector[T]) Del(i uint64) {
	if t.Get(i) == nil {
		return
	}
	c := i >> chunkBits
	ch := t.ownChunk(c)
	o := i & chunkMask
	ch.present[o/64] &^= 1 << (o % 64)
	var zero T
	ch.items[o] = zero
	ch.live--
	t.n--
	if ch.live == 0 {
		t.dir[c] = nil
	}
}

// view returns a view for reading on the writer's goroutine. It stays valid
// only until the next write.
func (t *Vector[T]) View() VectorView[T] { return VectorView[T]{dir: t.dir, n: t.n} }

// freeze returns an immutable view and starts a new generation, so that
// every later write copies what it touches first. O(1).
func (t *Vector[T]) Freeze() VectorView[T] {
	v := t.View()
	t.gen++
	return v
}

func (v VectorView[T]) Len() int { return v.n }

// each calls fn for every present item in index order until fn returns
// false.
func (v VectorView[T]) Each(fn func(i uint64, item *T) bool) {
	for c, ch := range v.dir {
		if ch == nil {
			continue
		}
		for w, word := range ch.present {
			for word != 0 {
				b := bits.TrailingZeros64(word)
				word &= word - 1
				o := w*64 + b
				if !fn(uint64(c)<<chunkBits|uint64(o), &ch.items[o]) {
					return
				}
			}
		}
	}
}
