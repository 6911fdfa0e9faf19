package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"barista/snapshot/scenario"
)

type replayOpts struct {
	script string
	json   bool
}

func init() {
	register("replay", &command{
		synopsis: "Replay a scheduling scenario script and print its dispatch table",
		usage:    "--script FILE [--json]",
		help: `Runs a scenario script (see docs/replay.md) through the replicated
state machine's Apply (each line is one command, stamped with the script's
time) and prints one line per dispatch request:

  dispatch N tenant=NAME job=ID size=S start=TAG_MS
  dispatch N none

then the final state hash as "hash=HEX". A line the scheduler refuses prints
"error LINE: reason" and the command exits 1 after the run. With --json each
line is a JSON object (keys n, tenant, job, size, start_ms, none; error,
line; hash). "-" reads the script from standard input.`,
		flags: func(fs *flag.FlagSet) any {
			o := &replayOpts{}
			fs.StringVar(&o.script, "script", "", "scenario script to run (`FILE`, - for stdin)")
			fs.BoolVar(&o.json, "json", false, "print JSON lines")
			return o
		},
		run: runReplay,
	})
}

func runReplay(env *cmdEnv, o any, args []string) error {
	opts := o.(*replayOpts)
	if len(args) > 0 {
		return usageError("unexpected argument %q", args[0])
	}
	if opts.script == "" {
		return usageError("replay needs --script FILE")
	}
	in := os.Stdin
	if opts.script != "-" {
		f, err := os.Open(opts.script)
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		defer f.Close()
		in = f
	}
	_, err := scenario.Run(in, scenario.NewMachine(), env.stdout, scenario.Options{JSON: opts.json})
	if errors.Is(err, scenario.ErrScript) {
		return &silentError{code: 1}
	}
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	return nil
}
