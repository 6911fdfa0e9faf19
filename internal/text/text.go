// Package text holds the rules on names and output every barista program
// applies alike: the servers (package sfq, which refuses a command by
// them), the Go client and the worker (through internal/wire), which must
// not import the servers. The rules are fixed here, not taken from the
// unicode package's tables, so that every build, of any Go release,
// refuses exactly the same input.
package text

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// ErrInvalid is what a refused name wraps (sfq.ErrInvalid is this error).
var ErrInvalid = errors.New("invalid argument")

// MaxNameLen bounds tenant names, worker IDs, idempotency keys and job
// types.
const MaxNameLen = 256

// ValidateName checks a name (a tenant's, a worker's ID): 1..MaxNameLen
// bytes of UTF-8 without spaces and without the characters Refused names.
// The error names field, the character and its byte offset.
func ValidateName(field, s string) error {
	if s == "" {
		return invalidName(field, "%s is empty", field)
	}
	if len(s) > MaxNameLen {
		return invalidName(field, "%s is %d bytes (max %d)", field, len(s), MaxNameLen)
	}
	return Check(field, s, false)
}

// MaxPoolNameLen bounds a pool's name.
const MaxPoolNameLen = 63

// ValidatePoolName checks a pool's name: 1 to MaxPoolNameLen of a-z, 0-9
// and -, not starting with -. The error names the byte refused and its
// offset.
func ValidatePoolName(s string) error {
	if s == "" || len(s) > MaxPoolNameLen {
		return Invalidf("", "pool name %q (want 1 to 63 of a-z, 0-9 and -, not starting with -)", s)
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-' && i > 0) {
			return Invalidf("", "pool name %q has %q at byte %d (want a-z, 0-9 and -, not starting with -)", s, b, i)
		}
	}
	return nil
}

// Check refuses text that is not UTF-8, or holds a character Refused
// names, or (unless spaces) a space, naming the field, the character and
// its byte offset. The text is quoted with %q, which escapes every
// character it refuses: the message is safe to show.
func Check(field, s string, spaces bool) error {
	if !utf8.ValidString(s) {
		return invalidName(field, "%s is not valid UTF-8", field)
	}
	for i, r := range s {
		if r == ' ' && !spaces {
			return invalidName(field, "%s %q has a space at byte %d", field, s, i)
		}
		if why := Refused(r); why != "" {
			return invalidName(field, "%s %q has U+%04X (%s) at byte %d", field, s, r, why, i)
		}
	}
	return nil
}

// Refused says why a character may not be in a name or a job type, or "":
// a control character (C0, DEL, C1), a bidirectional formatting character
// (it reorders the text around it wherever the name is shown:
// "evil\u202Etxt.exe" reads "evilexe.txt"), or a line or paragraph
// separator.
func Refused(r rune) string {
	switch {
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
		return "a control character"
	case r == 0x061c || r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
		return "a bidirectional formatting character"
	case r == 0x2028 || r == 0x2029:
		return "a line or paragraph separator"
	}
	return ""
}

// MaxOutputTail bounds each of the stderr and stdout tails a job keeps.
const MaxOutputTail = 4096

// OutputTail returns the end of a run's stderr or stdout as a job keeps
// it: valid UTF-8, each invalid sequence becoming U+FFFD, at most
// MaxOutputTail bytes, cut at a character boundary.
func OutputTail(s string) string {
	// Only the end matters; bound the work on a huge input first.
	if len(s) > 4*MaxOutputTail {
		s = s[len(s)-4*MaxOutputTail:]
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) <= MaxOutputTail {
		return s
	}
	s = s[len(s)-MaxOutputTail:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}
