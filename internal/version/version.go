// Package version is the release a build is: one version for the
// server, the command line and the SDKs (docs/releasing.md).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release this source is, in semantic versioning: X.Y.Z
// at a release's tag (vX.Y.Z), X.Y.Z-dev between releases. The Python
// and TypeScript packages carry the same version (sdk/python's
// barista/_version.py, sdk/typescript's package.json; a test checks that
// they agree, and scripts/set-version.sh changes all three).
const Version = "0.9.0"

// commit is the commit a build was made from, set by make build and make
// dist (-ldflags "-X github.com/baristahq/barista/internal/version.commit=...");
// a build without it reads the revision the go command stamped, if any.
var commit = ""

// Commit returns the commit the build was made from ("" when unknown),
// with "+dirty" when the go command stamped a work tree with changes.
func Commit() string {
	if commit != "" {
		return commit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" && modified == "true" {
		rev += "+dirty"
	}
	return rev
}

// String is the version as barista version prints it: the release, the
// commit, the Go release that built it and the platform.
func String() string {
	c := Commit()
	if c == "" {
		c = "unknown"
	}
	return fmt.Sprintf("%s (commit %s, %s, %s/%s)", Version, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
