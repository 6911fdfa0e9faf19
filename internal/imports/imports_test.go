package imports

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/baristahq/barista/"

// ladder is the import graph's rungs, top first: a package (and the
// packages below its path) may import its own rung and those below.
var ladder = [][]string{
	{"cmd"},
	{"web"},
	{"rpc"},
	{"leader", "webhook", "schedule"},
	{"raftnode"},
	{"snapshot"},
	{"fsm"},
	{"sfq"},
}

// leaves are the packages a program outside the servers imports, with
// what they may import of barista besides themselves. "proto" is the wire
// alone (package pb): not the replicated commands (proto/clusterpb) nor
// the HTTP gateway (proto/gateway), which are the servers'.
var leaves = map[string][]string{
	"client": {"proto", "internal"},
	"worker": {"proto", "internal", "client"}, // client is a leaf too: the SDK's job arguments
}

// exact are the packages a leaf may import without the packages below
// their path.
var exact = map[string]bool{"proto": true}

// sdks are the leaves no server package imports: what the servers share
// with them lives in a package below both (internal/wire).
var sdks = []string{"client", "worker"}

// under reports whether package path p is root or below it.
func under(p, root string) bool { return p == root || strings.HasPrefix(p, root+"/") }

// allDeps lists every package pattern's packages import, directly or
// not, by import path.
func allDeps(t *testing.T, pattern string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", module+pattern).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pattern, err)
	}
	return strings.Fields(string(out))
}

// deps lists the barista packages pattern's packages import, directly or
// not, by their path in the module, each with the package that brings it
// in first (go list -deps lists a package after its imports).
func deps(t *testing.T, pattern string) []string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command, to list the imports: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}", module+pattern).Output()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		t.Fatalf("go list -deps %s: %v\n%s", pattern, err, ee.Stderr)
	} else if err != nil {
		t.Fatalf("go list -deps %s: %v", pattern, err)
	}
	var list []string
	for _, p := range strings.Fields(string(out)) {
		if rest, ok := strings.CutPrefix(p, module); ok {
			list = append(list, rest)
		}
	}
	return list
}

// rung is the index in the ladder of package p, or -1 when p is on none
// (proto, internal helpers, the client and the worker).
func rung(p string) int {
	for i, r := range ladder {
		if slices.ContainsFunc(r, func(root string) bool { return under(p, root) }) {
			return i
		}
	}
	return -1
}

// upward lists, of the packages deps of a package on rung i, those
// above it.
func upward(i int, deps []string) []string {
	var bad []string
	for _, d := range deps {
		if r := rung(d); r >= 0 && r < i {
			bad = append(bad, d)
		}
	}
	return bad
}

// outside lists the deps of leaf that are neither leaf itself nor what
// it may import.
func outside(leaf string, deps []string) []string {
	var bad []string
	for _, d := range deps {
		allowed := under(d, leaf)
		for _, ok := range leaves[leaf] {
			allowed = allowed || d == ok || !exact[ok] && under(d, ok)
		}
		if !allowed {
			bad = append(bad, d)
		}
	}
	return bad
}

// TestClientAndWorkerImportNoServerPackage: everything the client and
// the worker import, directly or not, is the protocol, an internal
// helper or their own.
func TestClientAndWorkerImportNoServerPackage(t *testing.T) {
	for leaf := range leaves {
		if bad := outside(leaf, deps(t, leaf+"/...")); len(bad) > 0 {
			t.Errorf("%s imports %s: a program that uses it would carry the server (its imports must be %s)",
				leaf, strings.Join(bad, ", "), strings.Join(leaves[leaf], ", "))
		}
	}
}

// TestLeavesCarryNoGateway: a program that imports the client or the
// worker carries neither the HTTP gateway's runtime nor the replicated
// commands' schema (go list -deps, every package, not only barista's).
func TestLeavesCarryNoGateway(t *testing.T) {
	for leaf := range leaves {
		for _, p := range allDeps(t, leaf+"/...") {
			if strings.Contains(p, "grpc-gateway") || p == module+"proto/clusterpb" || p == module+"proto/gateway" {
				t.Errorf("%s imports %s", leaf, p)
			}
		}
	}
}

// TestServersImportNoSDK: no server package (every rung but the command
// line's) imports the client or the worker.
func TestServersImportNoSDK(t *testing.T) {
	for _, r := range ladder[1:] {
		for _, root := range r {
			for _, d := range deps(t, root+"/...") {
				for _, sdk := range sdks {
					if under(d, sdk) {
						t.Errorf("%s imports %s (what both need belongs in a package below both)", root, d)
					}
				}
			}
		}
	}
}

// TestImportLadder: no package imports one of a rung above its own.
func TestImportLadder(t *testing.T) {
	for i, r := range ladder {
		for _, root := range r {
			if bad := upward(i, deps(t, root+"/...")); len(bad) > 0 {
				t.Errorf("%s imports %s, above it on the ladder", root, strings.Join(bad, ", "))
			}
		}
	}
}

// TestTheChecksRefuse: the checks name a server package a leaf imports
// and a package that imports one above it (what the tests above would
// report if it happened).
func TestTheChecksRefuse(t *testing.T) {
	got := fmt.Sprint(outside("worker", []string{"worker", "worker/runner", "internal/wire", "proto", "fsm", "sfq", "client", "rpc", "proto/gateway"}))
	if want := "[fsm sfq rpc proto/gateway]"; got != want {
		t.Errorf("outside(worker) = %s, want %s", got, want)
	}
	got = fmt.Sprint(upward(rung("fsm"), []string{"fsm", "sfq", "proto", "snapshot", "web"}))
	if want := "[snapshot web]"; got != want {
		t.Errorf("upward(fsm) = %s, want %s", got, want)
	}
}
