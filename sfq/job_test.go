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
		if j.Key() != key || j.Type() != typ || j.Payload() != payload {
			t.Fatalf("got %q %q %q, want %q %q %q", j.Key(), j.Type(), j.Payload(), key, typ, payload)
		}
	})
	var j Job
	if j.Key() != "" || j.Type() != "" || j.Payload() != "" {
		t.Fatal("a zero job has text")
	}
	// 152 bytes before deadlines; class and estimate source fit in the
	// padding after Size, deadline_at costs 8 bytes.
	if got := unsafe.Sizeof(Job{}); got != 160 {
		t.Fatalf("Job is %d bytes; every byte is paid a million times: keep it at 160 or less", got)
	}
}
