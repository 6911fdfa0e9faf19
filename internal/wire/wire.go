// Package wire holds what barista's programs outside a server (the Go
// client, the worker) share with the servers without importing them:
// the fixed flow-control windows of every gRPC connection, the rules a
// worker's ID and its pool's name follow, and the bound of the output tails a worker
// reports. The servers apply the same rules (package sfq); the tests of
// this package check that both agree on every input.
package wire

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc"
)

// Flow-control windows of every barista connection, fixed (StaticWindows):
// gRPC's default estimates the link's bandwidth-delay product with a PING
// after each message received while none is outstanding, which on a
// worker's stream (a message or two a job) doubled the writes of both
// ends; a connection with fixed windows sends none. One stream moves at
// most StreamWindowBytes per round trip: 1 GB/s on a LAN, 20 MB/s at
// 50 ms.
const (
	StreamWindowBytes = 1 << 20
	ConnWindowBytes   = 4 << 20
)

// StaticWindows fixes a connection's flow-control windows (see
// StreamWindowBytes).
var StaticWindows = []grpc.DialOption{grpc.WithStaticStreamWindowSize(StreamWindowBytes), grpc.WithStaticConnWindowSize(ConnWindowBytes)}

// ErrInvalid is what a refused name wraps; its text is the servers'
// (sfq.ErrInvalid), so that a worker refuses an ID in the words the
// leader would.
var ErrInvalid = errors.New("invalid argument")

// MaxNameLen bounds a worker's ID (sfq.MaxNameLen).
const MaxNameLen = 256

// ValidateName checks a name the way the leader does (sfq.ValidateName):
// 1..MaxNameLen bytes of UTF-8 without spaces, control characters,
// bidirectional formatting characters or line and paragraph separators.
// The error names field, the character and its byte offset.
func ValidateName(field, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: %s is empty", ErrInvalid, field)
	case len(s) > MaxNameLen:
		return fmt.Errorf("%w: %s is %d bytes (max %d)", ErrInvalid, field, len(s), MaxNameLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, field)
	}
	for i, r := range s {
		if r == ' ' {
			return fmt.Errorf("%w: %s %q has a space at byte %d", ErrInvalid, field, s, i)
		}
		if why := refused(r); why != "" {
			return fmt.Errorf("%w: %s %q has U+%04X (%s) at byte %d", ErrInvalid, field, s, r, why, i)
		}
	}
	return nil
}

// refused says why a character may not be in a name, or "".
func refused(r rune) string {
	if r < 0x20 || r == 0x7f || (0x80 <= r && r <= 0x9f) {
		return "a control character"
	}
	if r == 0x061c || r == 0x200e || r == 0x200f || (0x202a <= r && r <= 0x202e) || (0x2066 <= r && r <= 0x2069) {
		return "a bidirectional formatting character"
	}
	if r == 0x2028 || r == 0x2029 {
		return "a line or paragraph separator"
	}
	return ""
}

// ValidatePoolName checks a pool's name the way the leader does
// (sfq.ValidatePoolName): 1 to 63 of a-z, 0-9 and -, not starting with -.
// The error names the byte refused and its offset.
func ValidatePoolName(s string) error {
	if s == "" || len(s) > 63 {
		return fmt.Errorf("%w: pool name %q (want 1 to 63 of a-z, 0-9 and -, not starting with -)", ErrInvalid, s)
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-' && i > 0) {
			return fmt.Errorf("%w: pool name %q has %q at byte %d (want a-z, 0-9 and -, not starting with -)", ErrInvalid, s, b, i)
		}
	}
	return nil
}

// MaxOutputTail bounds each of the stderr and stdout tails a job keeps
// (sfq.MaxOutputTail).
const MaxOutputTail = 4096

// OutputTail returns the end of a run's stderr or stdout as a job keeps
// it (sfq.OutputTail): valid UTF-8, each invalid sequence becoming
// U+FFFD, at most MaxOutputTail bytes, cut at a character boundary.
func OutputTail(s string) string {
	if len(s) > 4*MaxOutputTail {
		s = s[len(s)-4*MaxOutputTail:] // only the end matters: bound the work first
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxOutputTail {
		return s
	}
	s = s[len(s)-MaxOutputTail:]
	for s != "" && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}
