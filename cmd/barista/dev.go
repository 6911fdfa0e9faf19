package main

import "fmt"

func init() {
	register("dev", &command{
		synopsis: "Run a local cluster with workers and demo load (not yet available)",
		usage:    "",
		run: func(env *cmdEnv, _ any, _ []string) error {
			fmt.Fprintln(env.stdout, "barista dev: not yet available. Start a cluster by hand as the README shows,")
			fmt.Fprintln(env.stdout, "or try: barista replay --script testdata/scenarios/worked-example.txt")
			return nil
		},
	})
}
