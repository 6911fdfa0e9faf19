package text

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestRefusedCharacters: over the Basic Multilingual Plane (where every
// refused character is) and one in 257 of the planes above, a name of
// one character between two letters is refused for exactly the 80
// characters of the rule: C0 (32), DEL, C1 (32), 12 bidirectional
// formatting characters, 2 separators, and the space.
func TestRefusedCharacters(t *testing.T) {
	refused := 0
	for r := rune(0); r <= 0x10FFFF; {
		if err := ValidateName("worker id", "w"+string(r)+"1"); err != nil {
			refused++
		}
		if r < 0xFFFF {
			r++
		} else {
			r += 257
		}
	}
	if refused != 80 {
		t.Fatalf("%d characters refused, want 80", refused)
	}
	for s, want := range map[string]string{
		"":                       "worker id is empty",
		strings.Repeat("a", 257): "worker id is 257 bytes (max 256)",
		"a\xffb":                 "worker id is not valid UTF-8",
		"gpu 1":                  `worker id "gpu 1" has a space at byte 3`,
		"evil\u202etxt":          `worker id "evil\u202etxt" has U+202E (a bidirectional formatting character) at byte 4`,
		strings.Repeat("a", 256): "",
		"gpu-1":                  "",
	} {
		got := ""
		if err := ValidateName("worker id", s); err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("ValidateName(%q) = %q, want %q", s, got, want)
		}
	}
}

// TestOutputTail: a tail is valid UTF-8, at most MaxOutputTail bytes, the
// end of the input with each invalid sequence made U+FFFD, cut at a
// character boundary (at most 3 bytes short of the bound).
func TestOutputTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "é", "☕", "😀", "\xff", "\xe2\x98", "\n", "\x00"}
	for i := range 300 {
		var b strings.Builder
		for n := rng.IntN(6 * MaxOutputTail); b.Len() < n; {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		in := b.String()
		got := OutputTail(in)
		whole := strings.ToValidUTF8(in, "\uFFFD")
		switch {
		case !utf8.ValidString(got), len(got) > MaxOutputTail:
			t.Fatalf("input %d: a tail of %d bytes, valid %v", i, len(got), utf8.ValidString(got))
		case len(whole) <= MaxOutputTail && got != whole:
			t.Fatalf("input %d: a short input is cut", i)
		case len(whole) > MaxOutputTail && (len(got) < MaxOutputTail-3 || !strings.HasSuffix(whole, got)):
			t.Fatalf("input %d: a tail of %d bytes that is not the input's end", i, len(got))
		}
	}
}

// TestValidatePoolName: every byte at the start and inside a name, and
// the length bounds; the error names the byte and its offset.
func TestValidatePoolName(t *testing.T) {
	accepted, first := 0, 0
	for b := 0; b < 256; b++ {
		if ValidatePoolName("a"+string([]byte{byte(b)})+"1") == nil {
			accepted++
		}
		if ValidatePoolName(string([]byte{byte(b)})) == nil {
			first++
		}
	}
	if accepted != 26+10+1 || first != 26+10 {
		t.Errorf("%d bytes accepted inside a name (want 37), %d first (want 36)", accepted, first)
	}
	for s, want := range map[string]string{
		"default":               "",
		"gpu-2":                 "",
		strings.Repeat("a", 63): "",
		strings.Repeat("a", 64): `pool name "` + strings.Repeat("a", 64) + `" (want 1 to 63 of a-z, 0-9 and -, not starting with -)`,
		"":                      `pool name "" (want 1 to 63 of a-z, 0-9 and -, not starting with -)`,
		"-gpu":                  `pool name "-gpu" has '-' at byte 0 (want a-z, 0-9 and -, not starting with -)`,
		"gpu pool":              `pool name "gpu pool" has ' ' at byte 3 (want a-z, 0-9 and -, not starting with -)`,
		"GPU":                   `pool name "GPU" has 'G' at byte 0 (want a-z, 0-9 and -, not starting with -)`,
	} {
		got := ""
		if err := ValidatePoolName(s); err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("ValidatePoolName(%q) = %q, want %q", s, got, want)
		}
	}
}
