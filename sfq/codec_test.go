package sfq

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"
)

// TestStringLengthAllocatesWhatArrives: a string whose length prefix
// claims 60 MiB, followed by 3 bytes, fails without allocating the 60 MiB.
func TestStringLengthAllocatesWhatArrives(t *testing.T) {
	in := append(binary.AppendUvarint(nil, 60<<20), "abc"...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	d := NewDecoder(bytes.NewReader(in))
	s := d.String()
	runtime.ReadMemStats(&after)
	if s != "" || !errors.Is(d.Err(), ErrCorrupt) || !strings.Contains(d.Err().Error(), "unexpected EOF") {
		t.Fatalf("got %q, %v", s, d.Err())
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("decoding 3 bytes of a string allocated %d bytes", grew)
	}
	// A long string that is all there still decodes.
	long := strings.Repeat("x", 300<<10)
	d = NewDecoder(bytes.NewReader(append(binary.AppendUvarint(nil, uint64(len(long))), long...)))
	if got := d.String(); got != long || d.Err() != nil {
		t.Fatalf("a %d-byte string: %d bytes, %v", len(long), len(got), d.Err())
	}
}

// TestDecodeRefusesHugeJobIDs: a state whose next job ID is past MaxID
// is refused (its job table would need a directory of that size).
func TestDecodeRefusesHugeJobIDs(t *testing.T) {
	s, _ := New(DefaultConfig())
	var buf bytes.Buffer
	e := NewEncoder(&buf)
	v := s.view()
	v.nextJob = MaxID + 1
	v.Encode(e)
	e.Flush()
	if _, err := Decode(NewDecoder(bytes.NewReader(buf.Bytes()))); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "next job ID 1099511627777 is past") {
		t.Fatalf("next job ID past the limit: %v", err)
	}
}
