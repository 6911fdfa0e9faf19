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
		group := rapid.StringMatching(`[A-Za-z0-9._:@-]{0,128}`).Draw(t, "group")
		j.setText(at, group, key, typ, payload)
		if j.Key() != key || j.Type() != typ || j.Payload() != payload || j.DeadlineAt() != at || !j.HasDeadline() || j.Group() != group {
			t.Fatalf("with deadline %d and group %q: got %q %q %q %d %q", at, group, j.Key(), j.Type(), j.Payload(), j.DeadlineAt(), j.Group())
		}
		j.SetText(payload, key, typ) // keeps the deadline and group
		if j.Key() != payload || j.Type() != key || j.Payload() != typ || j.DeadlineAt() != at || j.Group() != group {
			t.Fatalf("SetText lost the deadline or group: %q %q %q %d %q", j.Key(), j.Type(), j.Payload(), j.DeadlineAt(), j.Group())
		}
		j.setText(0, group, key, typ, payload)
		if j.Key() != key || j.Type() != typ || j.Payload() != payload || j.DeadlineAt() != 0 || j.HasDeadline() || j.Group() != group {
			t.Fatalf("with group %q: got %q %q %q %d %q", group, j.Key(), j.Type(), j.Payload(), j.DeadlineAt(), j.Group())
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
