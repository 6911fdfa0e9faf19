package main

import (
	"flag"
	"fmt"
	"runtime"

	"github.com/baristahq/barista/internal/version"
)

type versionOpts struct{ json bool }

func init() {
	register("version", typed(&spec[versionOpts]{
		synopsis: "Print this build's version: the release, its commit, the Go release and the platform",
		usage:    "[--json]",
		help: `Prints "barista VERSION (commit C, GO, OS/ARCH)": the release (semantic
versioning; one version for the server, the command line and the SDKs,
docs/releasing.md) and the commit it was built from. --json prints one
object with the keys version, commit, go, os and arch. A server's version
is in barista status, the metric barista_build_info and the console.`,
		flags: func(fs *flag.FlagSet, o *versionOpts) {
			fs.BoolVar(&o.json, "json", false, "print one JSON object")
		},
		run: func(env *cmdEnv, opts *versionOpts, args []string) error {
			if len(args) > 0 {
				return usageError("unexpected argument %q", args[0])
			}
			if opts.json {
				return printJSON(env.stdout, map[string]any{"version": version.Version, "commit": version.Commit(),
					"go": runtime.Version(), "os": runtime.GOOS, "arch": runtime.GOARCH})
			}
			fmt.Fprintln(env.stdout, "barista", version.String())
			return nil
		},
	}))
}
