package main

import (
	"flag"
	"fmt"
	"syscall"
	"time"
)

func init() {
	register("demo-burn", typed(&spec[int]{
		synopsis: "Use a given amount of CPU time (the demo load's job)",
		usage:    "--ms N",
		flags: func(fs *flag.FlagSet, o *int) {
			numFlag(fs, o, "ms", 300, 0, 24*3600*1000, "CPU `MILLISECONDS` to use")
		},
		run: func(env *cmdEnv, opts *int, _ []string) error {
			target := time.Duration(*opts) * time.Millisecond
			x := 0
			for cpuTime() < target {
				for i := 0; i < 50_000; i++ {
					x += i
				}
			}
			fmt.Fprintf(env.stderr, "used %s of CPU (%d)\n", cpuTime().Round(time.Millisecond), x%3)
			return nil
		},
	}))
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
