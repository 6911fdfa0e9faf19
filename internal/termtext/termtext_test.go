package termtext

import "testing"

func TestSafe(t *testing.T) {
	for _, c := range []struct {
		in    string
		lines bool
		want  string
	}{
		{"acme", false, "acme"},
		{"a\x1b[2Jb", false, `a\x1b[2Jb`},
		{"c\u009b31m", false, `c\u009b31m`},
		{"x\ty\nz\x7f", false, `x` + "\t" + `y\nz\x7f`},
		{"x\ny\r", true, "x\ny\\r"},
		{"héllo ☕", false, "héllo ☕"},
	} {
		if got := Safe(c.in, c.lines); got != c.want {
			t.Errorf("Safe(%q, %t) = %q, want %q", c.in, c.lines, got, c.want)
		}
	}
}
