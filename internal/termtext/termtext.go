// Package termtext makes text written by tenants (names, job types,
// output tails) safe to print on a terminal.
package termtext

import (
	"strconv"
	"strings"
	"unicode"
)

// Safe returns s with every control character (C0, DEL and C1, which a
// terminal may read as the start of an escape sequence) written as its Go
// escape (\x1b, \u009b); tabs stay, and newlines too when lines is set.
func Safe(s string, lines bool) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\t' || (lines && r == '\n'):
			b.WriteRune(r)
		case unicode.IsControl(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
