package sfq

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Encoder writes the canonical binary encoding of barista's state: unsigned
// and signed varints, length-prefixed strings, and single bytes, buffered
// and flushed to w in blocks. The first write error sticks and is returned
// by Flush.
type Encoder struct {
	w   io.Writer
	buf []byte
	err error
}

// NewEncoder returns an Encoder writing to w.
func NewEncoder(w io.Writer) *Encoder { return &Encoder{w: w, buf: make([]byte, 0, 64<<10)} }

func (e *Encoder) maybeFlush() {
	if len(e.buf) >= 60<<10 {
		e.Flush()
	}
}

// Flush writes out the buffer and returns the first error seen.
func (e *Encoder) Flush() error {
	if e.err == nil && len(e.buf) > 0 {
		_, e.err = e.w.Write(e.buf)
	}
	e.buf = e.buf[:0]
	return e.err
}

// Uvarint writes an unsigned varint.
func (e *Encoder) Uvarint(x uint64) {
	e.buf = binary.AppendUvarint(e.buf, x)
	e.maybeFlush()
}

// Varint writes a signed (zig-zag) varint.
func (e *Encoder) Varint(x int64) {
	e.buf = binary.AppendVarint(e.buf, x)
	e.maybeFlush()
}

// Byte writes one byte.
func (e *Encoder) Byte(b byte) {
	e.buf = append(e.buf, b)
	e.maybeFlush()
}

// Bool writes a bool as one byte.
func (e *Encoder) Bool(b bool) {
	if b {
		e.Byte(1)
	} else {
		e.Byte(0)
	}
}

// String writes a length-prefixed string.
func (e *Encoder) String(s string) {
	e.buf = binary.AppendUvarint(e.buf, uint64(len(s)))
	if len(s) > 32<<10 {
		e.Flush()
		if e.err == nil {
			_, e.err = io.WriteString(e.w, s)
		}
		return
	}
	e.buf = append(e.buf, s...)
	e.maybeFlush()
}

// ByteReader is what a Decoder reads from.
type ByteReader interface {
	io.Reader
	io.ByteReader
}

// Decoder reads what an Encoder wrote. The first error sticks; every read
// after it returns zero values, and Err reports it.
type Decoder struct {
	r   ByteReader
	err error
	// MaxString bounds any single string (default 64 MiB).
	MaxString int
}

// NewDecoder returns a Decoder reading from r.
func NewDecoder(r ByteReader) *Decoder { return &Decoder{r: r, MaxString: 64 << 20} }

// ErrCorrupt marks encoded state that cannot be decoded.
var ErrCorrupt = errors.New("corrupt state encoding")

// Err returns the first error seen.
func (d *Decoder) Err() error { return d.err }

// Fail records an error (the first one wins).
func (d *Decoder) Fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
	}
}

func (d *Decoder) fail(err error) {
	if d.err == nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		d.err = fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
}

// Uvarint reads an unsigned varint.
func (d *Decoder) Uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	x, err := binary.ReadUvarint(d.r)
	if err != nil {
		d.fail(err)
	}
	return x
}

// Varint reads a signed varint.
func (d *Decoder) Varint() int64 {
	if d.err != nil {
		return 0
	}
	x, err := binary.ReadVarint(d.r)
	if err != nil {
		d.fail(err)
	}
	return x
}

// Byte reads one byte.
func (d *Decoder) Byte() byte {
	if d.err != nil {
		return 0
	}
	b, err := d.r.ReadByte()
	if err != nil {
		d.fail(err)
	}
	return b
}

// Bool reads a bool.
func (d *Decoder) Bool() bool {
	switch d.Byte() {
	case 0:
		return false
	case 1:
		return true
	}
	d.Fail("bad bool")
	return false
}

// String reads a length-prefixed string.
func (d *Decoder) String() string {
	n := d.Uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(d.MaxString) {
		d.Fail("string of %d bytes exceeds %d", n, d.MaxString)
		return ""
	}
	if n == 0 {
		return ""
	}
	// Allocate as the bytes arrive, not as the prefix claims: a damaged
	// prefix must not cost 64 MiB.
	const chunk = 64 << 10
	if n <= chunk {
		b := make([]byte, n)
		if _, err := io.ReadFull(d.r, b); err != nil {
			d.fail(err)
			return ""
		}
		return string(b)
	}
	var sb strings.Builder
	var buf [chunk]byte
	for rest := n; rest > 0; {
		m, err := io.ReadFull(d.r, buf[:min(rest, chunk)])
		sb.Write(buf[:m])
		if err != nil {
			d.fail(err)
			return ""
		}
		rest -= uint64(m)
	}
	return sb.String()
}

// Uint32 reads an unsigned varint that must fit in 32 bits.
func (d *Decoder) Uint32() uint32 {
	x := d.Uvarint()
	if x > 1<<32-1 {
		d.Fail("value %d exceeds 32 bits", x)
		return 0
	}
	return uint32(x)
}

// Uint16 reads an unsigned varint that must fit in 16 bits.
func (d *Decoder) Uint16() uint16 {
	x := d.Uvarint()
	if x > 1<<16-1 {
		d.Fail("value %d exceeds 16 bits", x)
		return 0
	}
	return uint16(x)
}

// Enum reads one byte that must be below limit.
func (d *Decoder) Enum(what string, limit byte) byte {
	b := d.Byte()
	if d.err == nil && b >= limit {
		d.Fail("%s %d out of range", what, b)
		return 0
	}
	return b
}

// MaxID bounds every dense ID a decoded state may hold (job IDs, and the
// state machine's event and key sequence numbers): their tables are
// sized by their highest ID, so a decoder must not trust a larger one.
// At 2^40 (about 10^12 jobs) a live node's job table would already need
// a 32 GiB directory; no cluster gets near it.
const MaxID = 1 << 40
