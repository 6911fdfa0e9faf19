package main

import "fmt"

func init() {
	register("dev", &command{
		synopsis: "Run a local cluster with workers and demo load (not yet available)",
		usage:    "",
		run: func(env *cmdEnv, _ any, _ []string) error {
			fmt.Fprintln(env.stdout, "barista dev: not yet — the server arrives with the replicated state machine.")
			fmt.Fprintln(env.stdout, "Meanwhile, try: barista replay --script testdata/scenarios/worked-example.txt")
			return nil
		},
	})
}
