package fsm

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/baristahq/barista/sfq"
)

// encodeWithEvent writes an empty state whose event table holds one event
// at seq, with nextEvent next: what no Apply produces for huge values.
func encodeWithEvent(next, seq uint64) []byte {
	f := New()
	var buf bytes.Buffer
	e := sfq.NewEncoder(&buf)
	e.Uvarint(stateVersionQuotas)
	(&View{}).encodeMetrics(e)
	(&View{}).encodeWebhooks(e)
	e.Varint(0)
	e.Bool(false)
	encodeConfig(e, &f.cfg, coreConfigVersion(stateVersionQuotas))
	encodeConfigQuotas(e, &f.cfg)
	e.Uvarint(0) // members
	e.Uvarint(0) // workers
	e.Uvarint(1) // next key
	e.Uvarint(0) // keys
	e.Uvarint(next)
	e.Uvarint(1)
	encodeEvent(e, seq, &eventRecord{Job: 1, Kind: EvQueued}, stateVersionQuotas)
	f.sched.Peek().Encode(e)
	e.Flush()
	return buf.Bytes()
}

// TestDecodeRefusesHugeSeqs: an event (or key) sequence number past
// sfq.MaxID is refused before the table is sized for it; Raft used to
// panic (makeslice: len out of range) or run out of memory.
func TestDecodeRefusesHugeSeqs(t *testing.T) {
	if _, err := DecodeState(sfq.NewDecoder(bytes.NewReader(encodeWithEvent(6, 5))), 1); err != nil {
		t.Fatalf("a small event seq: %v", err)
	}
	// The log is contiguous up to the next seq: Apply never leaves a gap.
	if _, err := DecodeState(sfq.NewDecoder(bytes.NewReader(encodeWithEvent(7, 5))), 1); !errors.Is(err, sfq.ErrCorrupt) || !strings.Contains(err.Error(), "the last event is 5") {
		t.Fatalf("a gap before the next event seq: %v", err)
	}
	for _, seq := range []uint64{1 << 62, sfq.MaxID} {
		_, err := DecodeState(sfq.NewDecoder(bytes.NewReader(encodeWithEvent(seq+1, seq))), 1)
		if !errors.Is(err, sfq.ErrCorrupt) || !strings.Contains(err.Error(), "is past") {
			t.Fatalf("event seq %d: %v", seq, err)
		}
	}
}
