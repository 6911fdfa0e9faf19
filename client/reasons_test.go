package client

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/baristahq/barista/internal/wire"
	pb "github.com/baristahq/barista/proto"
)

// enumReasons are the names of pb.Reason: the one list of reasons.
func enumReasons() []string {
	var out []string
	for i := 1; ; i++ {
		name, ok := pb.Reason_name[int32(i)]
		if !ok {
			break
		}
		out = append(out, name)
	}
	return out
}

// namesIn lists the first group of every match of re in the file at path.
func namesIn(t *testing.T, path string, re *regexp.Regexp) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestReasonsAreOneList: every reason of pb.Reason has its Go sentinel,
// its name among the servers' (internal/text), its Python exception
// class and its row in docs/api.md's table of reasons — and none of them
// has one the enum lacks.
func TestReasonsAreOneList(t *testing.T) {
	want := enumReasons()
	slices.Sort(want)
	if len(pb.Reason_name) != len(want)+1 {
		t.Fatalf("pb.Reason numbers its values with a gap: %v", pb.Reason_name)
	}
	var goNames []string
	for r, sentinel := range reasonSentinels {
		goNames = append(goNames, r.String())
		e := &Error{Reason: r.String()}
		if !e.Is(sentinel) {
			t.Errorf("an *Error of reason %s does not match its sentinel", r)
		}
	}
	slices.Sort(goNames)
	lists := map[string][]string{
		"the Go sentinels (client.reasonSentinels)": goNames,
		"the servers' names (internal/text/refusal.go, and wire.ReasonNotLeader)": append(
			namesIn(t, "../internal/text/refusal.go", regexp.MustCompile(`(?m)^\s*Reason\w+\s*=\s*"([A-Z_]+)"`)), wire.ReasonNotLeader),
		"the Python SDK's classes (errors.BY_REASON)": namesIn(t, "../sdk/python/src/barista/errors.py",
			regexp.MustCompile(`(?m)^    "([A-Z_]+)": [A-Z]\w+,$`)),
		"docs/api.md's table of reasons": namesIn(t, "../docs/api.md", regexp.MustCompile("(?m)^\\| `([A-Z_]+)` \\| `[A-Z_]+` \\|")),
	}
	for what, got := range lists {
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: %s\nthe enum pb.Reason: %s", what, strings.Join(got, " "), strings.Join(want, " "))
		}
	}
}
