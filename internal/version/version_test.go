package version

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// semver is a release (X.Y.Z) or a version between releases (X.Y.Z-dev).
var semver = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-dev)?$`)

// pythonVersion is v as a Python package writes it (PEP 440): X.Y.Z, or
// X.Y.Z.dev0 for X.Y.Z-dev.
func pythonVersion(v string) string {
	if base, ok := strings.CutSuffix(v, "-dev"); ok {
		return base + ".dev0"
	}
	return v
}

// TestOneVersion: the version is semantic, and the Python and
// TypeScript packages (and the lockfiles that name the TypeScript
// package) carry the same one; CHANGELOG.md has a section for it.
func TestOneVersion(t *testing.T) {
	if !semver.MatchString(Version) {
		t.Fatalf("Version %q is not X.Y.Z or X.Y.Z-dev", Version)
	}
	py, err := os.ReadFile("../../sdk/python/src/barista/_version.py")
	if err != nil {
		t.Fatal(err)
	}
	if want := `__version__ = "` + pythonVersion(Version) + `"`; !strings.Contains(string(py), want+"\n") {
		t.Errorf("sdk/python/src/barista/_version.py does not say %s:\n%s", want, py)
	}
	for _, c := range []struct{ file, path string }{
		{"../../sdk/typescript/package.json", ""},
		{"../../sdk/typescript/package-lock.json", ""},
		{"../../sdk/typescript/package-lock.json", "packages."},
		{"../../examples/typescript-worker/package-lock.json", "packages.../../sdk/typescript"},
	} {
		b, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if c.path != "" {
			pkgs, _ := doc["packages"].(map[string]any)
			doc, _ = pkgs[strings.TrimPrefix(c.path, "packages.")].(map[string]any)
		}
		if got, _ := doc["version"].(string); got != Version {
			t.Errorf("%s %s: version %q, want %q", c.file, c.path, got, Version)
		}
	}
	log, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^## ` + regexp.QuoteMeta(strings.TrimSuffix(Version, "-dev")) + `( |$)`).Match(log) {
		t.Errorf("CHANGELOG.md has no section \"## %s\"", strings.TrimSuffix(Version, "-dev"))
	}
}

func TestPythonVersion(t *testing.T) {
	for in, want := range map[string]string{"0.9.0": "0.9.0", "0.10.0-dev": "0.10.0.dev0", "1.2.3": "1.2.3"} {
		if got := pythonVersion(in); got != want {
			t.Errorf("pythonVersion(%q) = %q, want %q", in, got, want)
		}
	}
}
