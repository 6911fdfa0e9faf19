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
// class, its row in the TypeScript SDK's table (and its value in the
// TypeScript enum generated from the .proto) and its row in docs/api.md's
// table of reasons — and none of them has one the enum lacks. The
// TypeScript table's code and class name of each reason are the ones
// docs/api.md gives.
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
		"docs/api.md's table of reasons":                                     namesIn(t, "../docs/api.md", regexp.MustCompile("(?m)^\\| `([A-Z_]+)` \\| `[A-Z_]+` \\|")),
		"the TypeScript SDK's table (sdk/typescript/src/reasons.ts REASONS)": namesIn(t, tsReasons, tsReasonRow),
		"the TypeScript enum (sdk/typescript/src/gen/types_pb.ts Reason)":    tsEnumReasons(t),
	}
	for what, got := range lists {
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: %s\nthe enum pb.Reason: %s", what, strings.Join(got, " "), strings.Join(want, " "))
		}
	}
}

const tsReasons = "../sdk/typescript/src/reasons.ts"

// tsReasonRow is a row of the TypeScript SDK's table of reasons: its
// name, its code and its class's name.
var tsReasonRow = regexp.MustCompile(`(?m)^  ([A-Z_]+): \{\n    code: "([A-Z_]+)",\n    className: "(\w+)",$`)

// tsEnumReasons are the value names of the enum Reason that protoc-gen-es
// made for the TypeScript SDK, REASON_UNSPECIFIED aside.
func tsEnumReasons(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../sdk/typescript/src/gen/types_pb.ts")
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(b), "\nexport enum Reason {\n")
	body, _, ok2 := strings.Cut(body, "\n}\n")
	if !ok || !ok2 {
		t.Fatal("types_pb.ts has no enum Reason")
	}
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^  ([A-Z_]+) = \d+,$`).FindAllStringSubmatch(body, -1) {
		if m[1] != "REASON_UNSPECIFIED" {
			out = append(out, m[1])
		}
	}
	return out
}

// TestTypeScriptReasonsAsDocumented: the TypeScript SDK sends each reason
// to the class docs/api.md names, under the code it gives.
func TestTypeScriptReasonsAsDocumented(t *testing.T) {
	rows := func(path string, re *regexp.Regexp, code, class int) map[string]string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = m[code] + " " + m[class]
		}
		return out
	}
	ts := rows(tsReasons, tsReasonRow, 2, 3)
	docs := rows("../docs/api.md", regexp.MustCompile("(?m)^\\| `([A-Z_]+)` \\| `([A-Z_]+)` \\| .* \\| `(\\w+)` \\| `(\\w+)` \\| `(\\w+)` \\|$"), 2, 5)
	if len(ts) != len(pb.Reason_name)-1 {
		t.Errorf("reasons.ts: %d rows read, the enum has %d reasons", len(ts), len(pb.Reason_name)-1)
	}
	for _, r := range enumReasons() {
		if ts[r] != docs[r] {
			t.Errorf("%s: reasons.ts has code and class %q, docs/api.md %q", r, ts[r], docs[r])
		}
	}
}
