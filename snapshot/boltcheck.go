package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
)

// verifyBolt checks the page structure of a bbolt file (format version 2,
// as go.etcd.io/bbolt writes it on little-endian machines) holding a Raft
// log store, reading it through r alone. bbolt trusts its file: on a
// damaged one it panics, faults on a page past the end of the file, loops
// on a cycle of pages, or does so inside its own consistency check's
// goroutine, where no recover reaches. This walk runs first, so that
// bbolt only ever opens a file whose structure holds together. It never
// panics and reads every page at most once; what it allocates is bounded
// by the file's size.
//
// It checks: a valid meta page (magic, version, checksum) that the file is
// long enough for; every page of the tree within the file, of the right
// type, self-identified, reached once; every element inside its page;
// keys in order; only the buckets raft-boltdb creates; log keys that are
// increasing 8-byte indexes with non-empty values (the runs of missing
// indexes are listed in LogInfo.Gaps); and a freelist that lists only
// pages no bucket uses.
func verifyBolt(r io.ReaderAt, size int64) (LogInfo, error) {
	v := &boltVerifier{r: r, size: size}
	return v.run()
}

const (
	boltMagic          = 0xED0CDAED
	boltVersion        = 2
	boltPageHeader     = 16
	boltElement        = 16
	boltBranchFlag     = 0x01
	boltLeafFlag       = 0x02
	boltMetaFlag       = 0x04
	boltFreelistFlag   = 0x10
	boltBucketLeafFlag = 0x01
	boltNoFreelist     = ^uint64(0)
	boltMaxDepth       = 64 // a B+tree of 2^64 keys is shallower
)

type boltVerifier struct {
	r        io.ReaderAt
	size     int64
	pageSize uint64
	hwm      uint64 // pages in use: 0 .. hwm-1
	seen     []byte // bitmap of pages reached
	info     LogInfo
	logs     bool // inside the log bucket
}

type boltMeta struct {
	pageSize, flags      uint32
	root, freelist, pgid uint64
	txid                 uint64
}

func (v *boltVerifier) run() (LogInfo, error) {
	m, err := v.meta()
	if err != nil {
		return v.info, err
	}
	v.pageSize, v.hwm = uint64(m.pageSize), m.pgid
	if v.hwm < 2 || v.hwm > uint64(v.size)/v.pageSize {
		return v.info, fmt.Errorf("the file is %d bytes, but its pages reach %d bytes: it was truncated", v.size, v.hwm*v.pageSize)
	}
	v.seen = make([]byte, (v.hwm+7)/8)
	v.mark(0)
	v.mark(1)
	// The root bucket: its leaves hold the buckets conf and logs.
	var logs, conf bool
	err = v.tree(m.root, 0, nil, nil, nil, func(k, val []byte, flags uint32) error {
		if flags&boltBucketLeafFlag == 0 {
			return fmt.Errorf("a key %q outside any bucket", k)
		}
		switch string(k) {
		case string(logsBucket):
			logs = true
		case string(confBucket):
			conf = true
		default:
			return fmt.Errorf("an unknown bucket %q", k)
		}
		return v.bucket(k, val)
	})
	if err != nil {
		return v.info, err
	}
	if logs != conf {
		return v.info, fmt.Errorf("only one of the buckets %q and %q exists", logsBucket, confBucket)
	}
	v.info.New = !logs
	if m.freelist == boltNoFreelist {
		return v.info, nil // not persisted: bbolt rebuilds it by scanning
	}
	free, err := v.freelist(m.freelist)
	if err != nil {
		return v.info, err
	}
	for id := uint64(2); id < v.hwm; id++ {
		if !v.marked(id) && !free[id] {
			return v.info, fmt.Errorf("page %d is neither in use nor free", id)
		}
	}
	return v.info, nil
}

// meta picks the valid meta page with the higher transaction ID, as bbolt
// does.
func (v *boltVerifier) meta() (boltMeta, error) {
	var best boltMeta
	var firstErr error
	found := false
	pageSize := uint64(4096)
	for i := range uint64(2) {
		m, err := v.readMeta(i * pageSize)
		if err == nil && i == 0 {
			pageSize = uint64(m.pageSize)
		}
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("meta page %d: %w", i, err)
			}
			continue
		}
		if !found || m.txid > best.txid {
			best, found = m, true
		}
	}
	if !found {
		return best, firstErr
	}
	return best, nil
}

func (v *boltVerifier) readMeta(off uint64) (boltMeta, error) {
	var m boltMeta
	buf := make([]byte, boltPageHeader+64)
	if _, err := v.r.ReadAt(buf, int64(off)); err != nil {
		return m, fmt.Errorf("unreadable: %w", err)
	}
	le := binary.LittleEndian
	if le.Uint16(buf[8:])&boltMetaFlag == 0 {
		return m, errors.New("not a meta page")
	}
	d := buf[boltPageHeader:]
	if le.Uint32(d[0:]) != boltMagic {
		return m, errors.New("invalid database (bad magic number)")
	}
	if le.Uint32(d[4:]) != boltVersion {
		return m, fmt.Errorf("unsupported bbolt format version %d", le.Uint32(d[4:]))
	}
	h := fnv.New64a()
	h.Write(d[:56])
	if sum := le.Uint64(d[56:]); sum != 0 && sum != h.Sum64() {
		return m, errors.New("checksum mismatch")
	}
	m.pageSize, m.flags = le.Uint32(d[8:]), le.Uint32(d[12:])
	m.root, m.freelist, m.pgid, m.txid = le.Uint64(d[16:]), le.Uint64(d[32:]), le.Uint64(d[40:]), le.Uint64(d[48:])
	if m.pageSize < 1024 || m.pageSize > 1<<16 || m.pageSize&(m.pageSize-1) != 0 {
		return m, fmt.Errorf("page size %d", m.pageSize)
	}
	return m, nil
}

func (v *boltVerifier) mark(id uint64)        { v.seen[id/8] |= 1 << (id % 8) }
func (v *boltVerifier) marked(id uint64) bool { return v.seen[id/8]&(1<<(id%8)) != 0 }

// page reads page id and its overflow pages, marking them reached.
func (v *boltVerifier) page(id uint64) ([]byte, error) {
	if id < 2 || id >= v.hwm {
		return nil, fmt.Errorf("a reference to page %d, outside 2..%d", id, v.hwm-1)
	}
	buf := make([]byte, v.pageSize)
	if _, err := v.r.ReadAt(buf, int64(id*v.pageSize)); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	le := binary.LittleEndian
	if got := le.Uint64(buf); got != id {
		return nil, fmt.Errorf("page %d identifies itself as page %d", id, got)
	}
	overflow := uint64(le.Uint32(buf[12:]))
	if overflow >= v.hwm-id {
		return nil, fmt.Errorf("page %d overflows past page %d", id, v.hwm-1)
	}
	for i := id; i <= id+overflow; i++ {
		if v.marked(i) {
			return nil, fmt.Errorf("page %d is reached twice", i)
		}
		v.mark(i)
	}
	if overflow > 0 {
		buf = append(buf, make([]byte, overflow*v.pageSize)...)
		if _, err := v.r.ReadAt(buf[v.pageSize:], int64((id+1)*v.pageSize)); err != nil {
			return nil, fmt.Errorf("page %d: %w", id, err)
		}
	}
	return buf, nil
}

// tree walks the B+tree rooted at page id (or the inline page, when id is
// 0), calling leaf for every leaf element in key order. Every key lies in
// [lo, hi) (nil: unbounded), the range bbolt's search leads to that page
// from its parent's keys: a key outside it is one bbolt would not find.
func (v *boltVerifier) tree(id uint64, depth int, inline []byte, lo, hi []byte, leaf func(k, val []byte, flags uint32) error) error {
	if depth > boltMaxDepth {
		return fmt.Errorf("the tree at page %d is deeper than %d", id, boltMaxDepth)
	}
	p := inline
	if p == nil {
		var err error
		if p, err = v.page(id); err != nil {
			return err
		}
	}
	if len(p) < boltPageHeader {
		return errors.New("an inline bucket shorter than a page header")
	}
	le := binary.LittleEndian
	flags, count := le.Uint16(p[8:]), int(le.Uint16(p[10:]))
	// bbolt takes any page without the leaf flag for a branch.
	isBranch, isLeaf := flags&boltBranchFlag != 0, flags&boltLeafFlag != 0
	switch {
	case isBranch == isLeaf || flags&^(boltBranchFlag|boltLeafFlag) != 0:
		return fmt.Errorf("page %d has type %#x where a tree page belongs", id, flags)
	case isBranch && inline != nil:
		return errors.New("an inline bucket holds a branch page")
	case isBranch && count == 0:
		return fmt.Errorf("page %d is an empty branch", id)
	case boltPageHeader+count*boltElement > len(p):
		return fmt.Errorf("page %d: %d elements do not fit", id, count)
	}
	keys := make([][]byte, count)
	for i := range count {
		e := uint64(boltPageHeader + i*boltElement)
		var pos, ksize, vsize uint64
		if isBranch {
			pos, ksize = uint64(le.Uint32(p[e:])), uint64(le.Uint32(p[e+4:]))
		} else {
			pos, ksize, vsize = uint64(le.Uint32(p[e+4:])), uint64(le.Uint32(p[e+8:])), uint64(le.Uint32(p[e+12:]))
		}
		if e+pos+ksize+vsize > uint64(len(p)) {
			return fmt.Errorf("page %d: element %d lies outside it", id, i)
		}
		k := p[e+pos : e+pos+ksize]
		switch {
		case len(k) == 0:
			return fmt.Errorf("page %d: element %d has an empty key", id, i)
		case i > 0 && bytes.Compare(keys[i-1], k) >= 0:
			return fmt.Errorf("page %d: keys out of order", id)
		case hi != nil && bytes.Compare(k, hi) >= 0, !isBranch && lo != nil && bytes.Compare(k, lo) < 0:
			return fmt.Errorf("page %d: key %x is outside the range its parent leads to", id, k)
		}
		keys[i] = k
	}
	for i := range count {
		e := uint64(boltPageHeader + i*boltElement)
		if isBranch {
			clo, chi := keys[i], hi
			if i == 0 {
				clo = lo // bbolt's search sends keys below the first to the first child
			}
			if i+1 < count {
				chi = keys[i+1]
			}
			if err := v.tree(le.Uint64(p[e+8:]), depth+1, nil, clo, chi, leaf); err != nil {
				return err
			}
			continue
		}
		pos, ksize, vsize := uint64(le.Uint32(p[e+4:])), uint64(le.Uint32(p[e+8:])), uint64(le.Uint32(p[e+12:]))
		if err := leaf(keys[i], p[e+pos+ksize:e+pos+ksize+vsize], le.Uint32(p[e:])); err != nil {
			return fmt.Errorf("page %d: %w", id, err)
		}
	}
	return nil
}

// bucket walks a bucket of the root: conf (Raft's term and vote) or logs.
func (v *boltVerifier) bucket(name, val []byte) error {
	if len(val) < 16 {
		return fmt.Errorf("bucket %q has a %d-byte header", name, len(val))
	}
	root := binary.LittleEndian.Uint64(val)
	var inline []byte
	if root == 0 {
		inline = val[16:]
	}
	v.logs = string(name) == string(logsBucket)
	return v.tree(root, 1, inline, nil, nil, func(k, val []byte, flags uint32) error {
		if flags&boltBucketLeafFlag != 0 {
			return fmt.Errorf("a bucket %q inside %q", k, name)
		}
		if !v.logs {
			// Raft's uint64 keys: raft-boltdb panics on a short value.
			if (string(k) == "CurrentTerm" || string(k) == "LastVoteTerm") && len(val) != 8 {
				return fmt.Errorf("%s is %d bytes, not 8", k, len(val))
			}
			return nil
		}
		if len(k) != 8 {
			return fmt.Errorf("log key %x is not an index", k)
		}
		i := binary.BigEndian.Uint64(k)
		switch {
		case i == 0:
			return errors.New("a log entry at index 0")
		case v.info.Last == 0:
			v.info.First = i
		case i <= v.info.Last:
			return fmt.Errorf("log index %d follows index %d", i, v.info.Last)
		case i != v.info.Last+1:
			// Whether a gap is allowed depends on the snapshot the node
			// starts from (LogInfo.GapAfter).
			v.info.Gaps = append(v.info.Gaps, Gap{From: v.info.Last + 1, To: i - 1})
		}
		if len(val) == 0 {
			return fmt.Errorf("log entry %d is empty", i)
		}
		v.info.Last = i
		return nil
	})
}

// freelist reads the free page IDs: each inside the file, listed once,
// and used by no bucket.
func (v *boltVerifier) freelist(id uint64) (map[uint64]bool, error) {
	p, err := v.page(id)
	if err != nil {
		return nil, fmt.Errorf("freelist: %w", err)
	}
	le := binary.LittleEndian
	if le.Uint16(p[8:])&boltFreelistFlag == 0 {
		return nil, fmt.Errorf("freelist page %d has type %#x", id, le.Uint16(p[8:]))
	}
	data := p[boltPageHeader:]
	count := uint64(le.Uint16(p[10:]))
	if count == 0xFFFF {
		if len(data) < 8 {
			return nil, fmt.Errorf("freelist page %d is short", id)
		}
		count, data = le.Uint64(data), data[8:]
	}
	if count > uint64(len(data))/8 {
		return nil, fmt.Errorf("freelist page %d lists %d pages but holds %d", id, count, len(data)/8)
	}
	free := make(map[uint64]bool, count)
	for i := range count {
		f := le.Uint64(data[i*8:])
		switch {
		case f < 2 || f >= v.hwm:
			return nil, fmt.Errorf("freelist: page %d is outside 2..%d", f, v.hwm-1)
		case free[f]:
			return nil, fmt.Errorf("freelist: page %d is listed twice", f)
		case v.marked(f):
			return nil, fmt.Errorf("freelist: page %d is free and in use", f)
		}
		free[f] = true
	}
	return free, nil
}
