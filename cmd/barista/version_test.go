package main

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/baristahq/barista/internal/version"
)

// TestVersionCommand: barista version (and --version) prints the release
// first, then the commit, Go release and platform; --json the same as
// keys.
func TestVersionCommand(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out, errb strings.Builder
		if code := Run(args, &out, &errb); code != 0 || errb.Len() > 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		want := "barista " + version.Version + " (commit "
		if !strings.HasPrefix(out.String(), want) || !strings.HasSuffix(out.String(), ", "+runtime.Version()+", "+runtime.GOOS+"/"+runtime.GOARCH+")\n") {
			t.Errorf("%v: %q, want %q...", args, out.String(), want)
		}
	}
	var out, errb strings.Builder
	if code := Run([]string{"version", "--json"}, &out, &errb); code != 0 {
		t.Fatalf("version --json: exit %d: %s", code, errb.String())
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(out.String()), &got); err != nil {
		t.Fatal(err)
	}
	if got["version"] != version.Version || got["go"] != runtime.Version() || got["os"] != runtime.GOOS || got["arch"] != runtime.GOARCH {
		t.Errorf("version --json: %v", got)
	}
}
