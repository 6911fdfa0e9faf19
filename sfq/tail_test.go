package sfq

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestOutputTail: the last 4 KiB, cut at a character boundary, always
// valid UTF-8.
func TestOutputTail(t *testing.T) {
	ascii := strings.Repeat("a", 5000) + "END"
	threeByte := strings.Repeat("€", 2000) // 6000 bytes; 4096 is not a multiple of 3
	cases := []struct {
		name, in, want string
	}{
		{"short", "boom\n", "boom\n"},
		{"empty", "", ""},
		{"exactly the limit", strings.Repeat("b", MaxOutputTail), strings.Repeat("b", MaxOutputTail)},
		{"ascii", ascii, ascii[len(ascii)-MaxOutputTail:]},
		{"cut inside a character", threeByte, strings.Repeat("€", MaxOutputTail/3)},
		{"invalid bytes", "ok\xff\xfe done", "ok\uFFFD done"},
		{"invalid and long", strings.Repeat("\xff", 3*MaxOutputTail) + "tail", "\uFFFDtail"},
		{"huge", strings.Repeat("z", 4_000_000) + "!", strings.Repeat("z", MaxOutputTail-1) + "!"},
	}
	for _, c := range cases {
		got := OutputTail(c.in)
		if got != c.want {
			t.Errorf("%s: got %d bytes %.20q..., want %d bytes %.20q...", c.name, len(got), got, len(c.want), c.want)
		}
		if len(got) > MaxOutputTail || !utf8.ValidString(got) {
			t.Errorf("%s: %d bytes, valid %v", c.name, len(got), utf8.ValidString(got))
		}
	}
}
