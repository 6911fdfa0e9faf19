// Command burn uses a given amount of CPU time, then writes the CPU time
// it measured itself (getrusage, user+system) to a file, for tests that
// compare it with what barista charged.
package main

import (
	"flag"
	"fmt"
	"os"
	"syscall"
	"time"
)

func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	ms := flag.Int("ms", 500, "CPU milliseconds to burn")
	out := flag.String("out", "", "file to write the measured CPU milliseconds to")
	sleep := flag.Duration("sleep", 0, "sleep this long after burning")
	exit := flag.Int("exit", 0, "exit code")
	flag.Parse()
	x := 0
	for cpu() < time.Duration(*ms)*time.Millisecond {
		for i := 0; i < 100000; i++ {
			x += i
		}
	}
	time.Sleep(*sleep)
	if *out != "" {
		os.WriteFile(*out, []byte(fmt.Sprint(cpu().Milliseconds())), 0o644)
	}
	fmt.Fprintf(os.Stderr, "burned %d ms (%d)\n", cpu().Milliseconds(), x%7)
	os.Exit(*exit)
}
