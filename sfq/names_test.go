package sfq

import (
	"errors"
	"testing"
)

// TestNamesRefuseControlAndBidi: tenant names, worker IDs and job types
// hold no control character (C0, DEL, C1) and no character that
// reorders or breaks the text around them when shown (the bidirectional
// formatting characters, the line and paragraph separators); each
// refusal names the field, the character and where it is. Letters of
// any script pass, and a job type may hold spaces.
func TestNamesRefuseControlAndBidi(t *testing.T) {
	for _, c := range []struct {
		what, s, want string
	}{
		{"name", "acme", ""},
		{"name", "café-日本", ""},
		{"name", "team/a?b#c%d", ""},
		{"name", "a\x00b", `tenant name "a\x00b" has U+0000 (a control character) at byte 1`},
		{"name", "a\tb", `tenant name "a\tb" has U+0009 (a control character) at byte 1`},
		{"name", "ab\x7f", `tenant name "ab\x7f" has U+007F (a control character) at byte 2`},
		{"name", "a\u0085", `tenant name "a\u0085" has U+0085 (a control character) at byte 1`},
		{"name", "a b", `tenant name "a b" has a space at byte 1`},
		{"name", "evil\u202etxt.exe", `tenant name "evil\u202etxt.exe" has U+202E (a bidirectional formatting character) at byte 4`},
		{"name", "\u2066x", `tenant name "\u2066x" has U+2066 (a bidirectional formatting character) at byte 0`},
		{"name", "x\u200f", `tenant name "x\u200f" has U+200F (a bidirectional formatting character) at byte 1`},
		{"name", "x\u061c", `tenant name "x\u061c" has U+061C (a bidirectional formatting character) at byte 1`},
		{"name", "x\u2028y", `tenant name "x\u2028y" has U+2028 (a line or paragraph separator) at byte 1`},
		{"type", "", ""},
		{"type", "nightly report", ""},
		{"type", "render·4k", ""},
		{"type", "render\x00", `job_type "render\x00" has U+0000 (a control character) at byte 6`},
		{"type", "render\u202e", `job_type "render\u202e" has U+202E (a bidirectional formatting character) at byte 6`},
		{"type", "a\nb", `job_type "a\nb" has U+000A (a control character) at byte 1`},
	} {
		var err error
		switch c.what {
		case "name":
			err = ValidateName("tenant name", c.s)
		case "type":
			sub := Submission{Type: c.s, Size: SM, EstCostMs: 1}
			err = sub.Validate()
		}
		got := ""
		if err != nil {
			got = err.Error()
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%q: %v is not ErrInvalid", c.s, err)
			}
		}
		if got != c.want {
			t.Errorf("%s %q: %q, want %q", c.what, c.s, got, c.want)
		}
	}
	for _, g := range []string{"a\x00b", "a\u202eb"} {
		if err := ValidateGroupName(g); err == nil {
			t.Errorf("group %q accepted", g)
		}
	}
}
