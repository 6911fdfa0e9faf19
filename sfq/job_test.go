package sfq

import (
	"testing"
	"unsafe"

	"pgregory.net/rapid"
)

func TestJobTextRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		key := rapid.StringN(0, 300, -1).Draw(t, "key")
		typ := rapid.StringN(0, 300, -1).Draw(t, "type")
		payload := string(rapid.SliceOfN(rapid.Byte(), 0, 400).Draw(t, "payload"))
		var j Job
		j.SetText(key, typ, payload)
		if j.Key() != key || j.Type() != typ || j.Payload() != payload || j.DeadlineAt() != 0 || j.HasDeadline() {
			t.Fatalf("got %q %q %q, want %q %q %q", j.Key(), j.Type(), j.Payload(), key, typ, payload)
		}
		at := Time(rapid.Int64Range(1, 1<<50).Draw(t, "deadline_at"))
		j.setText(at, key, typ, payload)
		if j.Key() != key || j.Type() != typ || j.Payload() != payload || j.DeadlineAt() != at || !j.HasDeadline() {
			t.Fatalf("with deadline %d: got %q %q %q %d", at, j.Key(), j.Type(), j.Payload(), j.DeadlineAt())
		}
		j.SetText(payload, key, typ) // keeps the deadline
		if j.Key() != payload || j.Type() != key || j.Payload() != typ || j.DeadlineAt() != at {
			t.Fatalf("SetText lost the deadline: %q %q %q %d", j.Key(), j.Type(), j.Payload(), j.DeadlineAt())
		}
	})
	var j Job
	if j.Key() != "" || j.Type() != "" || j.Payload() != "" {
		t.Fatal("a zero job has text")
	}
	// Class, estimate source and the deadline flag fit in the padding
	// after Size; a deadline rides in text; the two wall-clock times take
	// 4 bytes each. The 256 jobs of a chunk, an allocation apart from the
	// chunk's header, fill five 8 KiB pages exactly at 160 bytes; at 168
	// they would take six.
	if got := unsafe.Sizeof(Job{}); got != 160 {
		t.Fatalf("Job is %d bytes; every byte is paid a million times: keep it at 160 or less", got)
	}
}
