// Command attempt is the job of the chaos tests: it records its own run in
// a shared journal, one line per event, appended with O_APPEND (each line
// is written whole): "S" at start, "T" every tick while it runs, "E" at
// its end (normal or SIGTERM), each with the job, attempt, worker and the
// wall time in Unix nanoseconds. A run killed by SIGKILL has no "E": its
// last "T" bounds its end to within one tick. --exit makes a run that
// ends by itself fail with that code.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	journal := flag.String("journal", "", "journal file to append to (required)")
	run := flag.Duration("run", time.Second, "how long to run")
	tick := flag.Duration("tick", 100*time.Millisecond, "tick interval")
	exit := flag.Int("exit", 0, "exit code at the normal end (a failed run when not 0)")
	flag.Parse()
	if *journal == "" {
		fmt.Fprintln(os.Stderr, "attempt: --journal is required")
		os.Exit(2)
	}
	f, err := os.OpenFile(*journal, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "attempt:", err)
		os.Exit(2)
	}
	id := fmt.Sprintf("%s %s %s", os.Getenv("BARISTA_JOB_ID"), os.Getenv("BARISTA_ATTEMPT"), os.Getenv("BARISTA_WORKER_ID"))
	note := func(kind string) {
		fmt.Fprintf(f, "%s %s %d\n", kind, id, time.Now().UnixNano())
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
	note("S")
	t := time.NewTicker(*tick)
	end := time.After(*run)
	for {
		select {
		case <-t.C:
			note("T")
		case <-end:
			note("E")
			os.Exit(*exit)
		case <-term:
			note("E")
			os.Exit(143)
		}
	}
}
