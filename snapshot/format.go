// Package snapshot is barista's snapshot format (versioned, streaming,
// checksummed), the startup check that refuses a corrupt newest snapshot
// instead of falling back to an older one, and the replay harness that
// rebuilds a node's state from its data directory without starting Raft.
//
// A snapshot file is:
//
//	"BARISTA-SNAPSHOT"        16 bytes of magic
//	format version            uvarint (this build writes 1, 3, 4, 5, 6 or 7, reads 1 to 7)
//	index                     uvarint: the last log index the state includes
//	state                     the FSM's canonical state encoding
//	checksum                  32 bytes: SHA-256 of every byte before it
//
// The state hash a node reports is the SHA-256 of the state part alone.
//
// Format 2 carries state encoding version 2 (priority classes, deadlines,
// learned cost estimates). Format 3 carries FSM state version 4 and the
// core's version 3: the wall-clock times of jobs and events, stdout tails,
// and the worker an ended job ran on. Format 4 carries FSM state version
// 5: webhook endpoints and their cursors. Format 5 carries FSM state
// version 6 and the core's version 4: groups. Format 6 carries FSM state
// version 7 and the core's version 5: delays, expiry, retry backoff,
// pauses, rate limits and their settings. Format 7 carries FSM state
// version 8 (the tenant quotas by default) or, once the state holds
// anything of pools, version 9 (the core's version 6), or at feature
// level 7 version 10 (version 9 with clock_tick). Older files are still read: a
// format 1 state loads as jobs of class normal without deadlines, with no
// estimates learned, and schedules exactly as it did; the jobs and events
// of formats 1 and 2 show their cluster times as wall times, their results
// no stdout tail and their ended jobs no worker.
//
// Which format is written follows the cluster's feature level (the state
// says it): a cluster at level 1, whose voters may still run a build that
// reads only format 1, writes format 1, which such a build reads and
// hashes alike; at level 2, format 3, which builds of level 2 read and
// hash alike; at level 3, format 4, byte for byte as the build before
// groups writes it; at level 4, format 5, byte for byte as the build
// before level 5 writes it; at level 5, format 6, byte for byte as the
// build before level 6 writes it; from level 6 on, format 7.
package snapshot

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/sfq"
)

const (
	magic = "BARISTA-SNAPSHOT"
	// FormatVersion is the newest snapshot format this build writes (at
	// feature level 6 and above).
	FormatVersion = 7
	// formatLevel2 to formatLevel5 are the formats a cluster at feature
	// level 2 to 5 writes.
	formatLevel2, formatLevel3, formatLevel4, formatLevel5 = 3, 4, 5, 6
	// MinFormatVersion is the oldest snapshot format this build reads.
	MinFormatVersion = 1
)

// Errors a damaged snapshot is reported with.
var (
	ErrNotSnapshot = errors.New("not a barista snapshot")
	ErrVersion     = errors.New("unsupported snapshot format version")
	ErrChecksum    = errors.New("snapshot checksum mismatch")
)

// Write streams a frozen view as a snapshot and returns the state hash.
// It may run while the state machine keeps applying entries.
func Write(w io.Writer, v *fsm.View) ([32]byte, error) {
	sum := sha256.New()
	bw := bufio.NewWriterSize(w, 256<<10)
	all := io.MultiWriter(bw, sum)
	head := append([]byte(magic), binary.AppendUvarint(nil, uint64(Format(v)))...)
	head = binary.AppendUvarint(head, v.Index)
	if _, err := all.Write(head); err != nil {
		return [32]byte{}, err
	}
	state := sha256.New()
	e := sfq.NewEncoder(io.MultiWriter(all, state))
	v.Encode(e)
	if err := e.Flush(); err != nil {
		return [32]byte{}, err
	}
	if _, err := bw.Write(sum.Sum(nil)); err != nil {
		return [32]byte{}, err
	}
	if err := bw.Flush(); err != nil {
		return [32]byte{}, err
	}
	var h [32]byte
	state.Sum(h[:0])
	return h, nil
}

// Format is the snapshot format Write uses for v: 1 while the cluster is
// at feature level 1, 3 at level 2, 4 at level 3, 5 at level 4, 6 at
// level 5, else FormatVersion.
func Format(v *fsm.View) int {
	switch v.Level() {
	case fsm.Level1:
		return 1
	case fsm.Level2:
		return formatLevel2
	case fsm.Level3:
		return formatLevel3
	case fsm.Level4:
		return formatLevel4
	case fsm.Level5:
		return formatLevel5
	}
	return FormatVersion
}

// hashingReader hashes exactly the bytes handed to its caller, so that the
// trailer, read past it, is not included. It buffers on its own and hashes
// what was taken of its buffer in one piece when it refills (a byte at a
// time, the hashing cost more than the decoding).
type hashingReader struct {
	r                io.Reader
	h                hash.Hash
	buf              []byte
	pos, end, hashed int // buf[hashed:pos] was taken and is not hashed yet
	err              error
}

func newHashingReader(r io.Reader) *hashingReader {
	return &hashingReader{r: r, h: sha256.New(), buf: make([]byte, 256<<10)}
}

// flush hashes what was taken of the buffer.
func (hr *hashingReader) flush() {
	hr.h.Write(hr.buf[hr.hashed:hr.pos])
	hr.hashed = hr.pos
}

// fill refills an empty buffer, hashing what was taken of it first.
func (hr *hashingReader) fill() error {
	hr.flush()
	hr.pos, hr.end, hr.hashed = 0, 0, 0
	for tries := 0; hr.end == 0; tries++ {
		if hr.err != nil {
			return hr.err
		}
		if tries == 100 {
			return io.ErrNoProgress
		}
		hr.end, hr.err = hr.r.Read(hr.buf)
	}
	return nil
}

func (hr *hashingReader) Read(p []byte) (int, error) {
	if hr.pos == hr.end {
		if err := hr.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, hr.buf[hr.pos:hr.end])
	hr.pos += n
	return n, nil
}

func (hr *hashingReader) ReadByte() (byte, error) {
	if hr.pos == hr.end {
		if err := hr.fill(); err != nil {
			return 0, err
		}
	}
	b := hr.buf[hr.pos]
	hr.pos++
	return b, nil
}

// sum returns the hash of every byte taken so far.
func (hr *hashingReader) sum() []byte {
	hr.flush()
	return hr.h.Sum(nil)
}

// rawReader reads on from a hashingReader without hashing (the trailer).
type rawReader struct{ hr *hashingReader }

func (r rawReader) Read(p []byte) (int, error) {
	n, err := r.hr.Read(p)
	r.hr.hashed = r.hr.pos
	return n, err
}

// Read decodes a snapshot stream into f in one pass, verifying the
// checksum at the end and the state's invariants (Verify). On any error f
// is left unchanged. It returns the snapshot's index.
func Read(r io.Reader, f *fsm.FSM) (uint64, error) {
	hr := newHashingReader(r)
	head := make([]byte, len(magic))
	if _, err := io.ReadFull(hr, head); err != nil || string(head) != magic {
		return 0, ErrNotSnapshot
	}
	d := sfq.NewDecoder(hr)
	if v := d.Uvarint(); d.Err() == nil && (v < MinFormatVersion || v > FormatVersion) {
		return 0, fmt.Errorf("%w %d (this build reads %d to %d)", ErrVersion, v, MinFormatVersion, FormatVersion)
	}
	index := d.Uvarint()
	if err := d.Err(); err != nil {
		return 0, err
	}
	// Decode into a scratch FSM: f changes only if everything checks out.
	scratch, err := fsm.DecodeState(d, index)
	if err != nil {
		return 0, err
	}
	want := hr.sum()
	got := make([]byte, sha256.Size)
	if _, err := io.ReadFull(rawReader{hr}, got); err != nil {
		return 0, fmt.Errorf("%w: trailer missing", ErrChecksum)
	}
	if !bytes.Equal(got, want) {
		return 0, ErrChecksum
	}
	if _, err := io.ReadFull(rawReader{hr}, make([]byte, 1)); err != io.EOF {
		return 0, fmt.Errorf("%w: data after the trailer", ErrChecksum)
	}
	f.Adopt(scratch)
	return index, nil
}

// VerifyFile checks a snapshot file's checksum without decoding it.
func VerifyFile(path string) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return err
	}
	if st.Size() < int64(len(magic)+sha256.Size) {
		return fmt.Errorf("%s: %w (%d bytes)", path, ErrNotSnapshot, st.Size())
	}
	body := st.Size() - sha256.Size
	head := make([]byte, len(magic))
	if _, err := io.ReadFull(fh, head); err != nil || string(head) != magic {
		return fmt.Errorf("%s: %w", path, ErrNotSnapshot)
	}
	sum := sha256.New()
	sum.Write(head)
	if _, err := io.CopyN(sum, fh, body-int64(len(magic))); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	got := make([]byte, sha256.Size)
	if _, err := io.ReadFull(fh, got); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if !bytes.Equal(got, sum.Sum(nil)) {
		return fmt.Errorf("%s: %w", path, ErrChecksum)
	}
	return nil
}
