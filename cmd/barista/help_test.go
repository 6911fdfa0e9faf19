package main

import (
	"regexp"
	"strings"
	"testing"
)

// TestHelpIsTruthful: no command's --help shows a zero default as if it
// were a value ("(default 0s)" beside a required flag), and every value
// name is one upper-case word (DURATION, N, FILE), not "duration".
func TestHelpIsTruthful(t *testing.T) {
	flagLine := regexp.MustCompile(`^  --[a-z0-9-]+(?: ([^ ]+))?  `)
	for path := range commands {
		var out, errb strings.Builder
		if code := Run(append(strings.Fields(path), "--help"), &out, &errb); code != 0 {
			t.Errorf("%s --help: exit %d: %s", path, code, errb.String())
			continue
		}
		help := out.String() + errb.String()
		if strings.Contains(help, "(default 0s)") || strings.Contains(help, "(default 0)") {
			t.Errorf("%s --help shows a zero default:\n%s", path, help)
		}
		for _, line := range strings.Split(help, "\n") {
			m := flagLine.FindStringSubmatch(line)
			if m == nil || m[1] == "" {
				continue
			}
			if m[1] != strings.ToUpper(m[1]) {
				t.Errorf("%s --help: value name %q is not upper case: %q", path, m[1], line)
			}
		}
	}
}
