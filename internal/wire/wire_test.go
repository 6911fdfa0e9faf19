package wire

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/baristahq/barista/sfq"
)

// errText is an error's message, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// next is the character after r that the name test checks.
func next(r rune) rune {
	if r < 0xFFFF {
		return r + 1
	}
	return r + 257
}

// TestValidateNameAgreesWithTheLeader: a worker refuses exactly the IDs
// the leader refuses, in the same words, for the characters next walks
// and at the length bounds.
func TestValidateNameAgreesWithTheLeader(t *testing.T) {
	check := func(s string) {
		t.Helper()
		if got, want := errText(ValidateName("worker id", s)), errText(sfq.ValidateName("worker id", s)); got != want {
			t.Fatalf("ValidateName(%q) = %q, the leader's %q", s, got, want)
		}
	}
	refusedRunes := 0
	// Every character of the Basic Multilingual Plane (where every
	// refused one is), and one in 257 of the planes above.
	for r := rune(0); r <= 0x10FFFF; r = next(r) {
		s := "w" + string(r) + "1"
		check(s)
		if ValidateName("worker id", s) != nil {
			refusedRunes++
		}
	}
	// C0 (32), DEL, C1 (32), 12 bidirectional formatting characters, 2
	// separators and the space (a surrogate is written as U+FFFD).
	if refusedRunes != 32+1+32+12+2+1 {
		t.Errorf("%d characters refused, want 80", refusedRunes)
	}
	for _, s := range []string{"", "w", strings.Repeat("a", MaxNameLen), strings.Repeat("a", MaxNameLen+1), "a\xffb", "\xc3", "gpu-1"} {
		check(s)
	}
}

// TestOutputTailAgreesWithTheLeader: a worker cuts its tails exactly as
// the leader does.
func TestOutputTailAgreesWithTheLeader(t *testing.T) {
	if MaxOutputTail != sfq.MaxOutputTail {
		t.Fatalf("MaxOutputTail %d, the leader's %d", MaxOutputTail, sfq.MaxOutputTail)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "é", "☕", "😀", "\xff", "\xe2\x98", "\n", "\x00"}
	for i := range 300 {
		var b strings.Builder
		for n := rng.IntN(6 * MaxOutputTail); b.Len() < n; {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		if got, want := OutputTail(b.String()), sfq.OutputTail(b.String()); got != want {
			t.Fatalf("input %d (%d bytes): OutputTail %d bytes, the leader's %d", i, b.Len(), len(got), len(want))
		}
	}
}

// TestValidatePoolNameAgreesWithTheLeader: a worker refuses exactly the
// pool names the leader refuses, in the same words: every byte at the
// start and inside a name, and the length bounds.
func TestValidatePoolNameAgreesWithTheLeader(t *testing.T) {
	check := func(s string) {
		t.Helper()
		if got, want := errText(ValidatePoolName(s)), errText(sfq.ValidatePoolName(s)); got != want {
			t.Fatalf("ValidatePoolName(%q) = %q, the leader's %q", s, got, want)
		}
	}
	accepted := 0
	for b := 0; b < 256; b++ {
		check(string([]byte{byte(b)}))
		check("a" + string([]byte{byte(b)}) + "1")
		if ValidatePoolName("a"+string([]byte{byte(b)})+"1") == nil {
			accepted++
		}
	}
	if accepted != 26+10+1 {
		t.Errorf("%d bytes accepted inside a name, want 37", accepted)
	}
	for _, s := range []string{"", "default", "gpu", "-gpu", "gpu-", strings.Repeat("a", 63), strings.Repeat("a", 64), "GPU", "gpu pool", "é"} {
		check(s)
	}
}
