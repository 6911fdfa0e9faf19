//go:build linux

package runner

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The test binary doubles as the helper program run by the jobs under test:
// started with helperEnv set, TestMain runs the helper mode instead of the
// tests. That avoids building a separate program.
const helperEnv = "BARISTA_RUNNER_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode, os.Args[1:]))
	}
	if err := EnableSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Every goroutine started by the package must be gone; the os/signal
	// dispatcher runs for the life of a process once signal.Notify is used.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("os/signal.signal_recv"), goleak.IgnoreTopFunction("os/signal.loop"))
}

// helperSpec returns a Spec that runs this test binary in the given helper
// mode.
func helperSpec(t *testing.T, mode string, args ...string) Spec {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// GORACE: a race-enabled helper would otherwise sleep 1s at exit.
	return Spec{Argv: append([]string{exe}, args...), Env: map[string]string{helperEnv: mode, "GORACE": "atexit_sleep_ms=0"}}
}

func runHelper(mode string, args []string) int {
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	dur := func(s string) time.Duration {
		d, err := time.ParseDuration(s)
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(100)
		}
		return d
	}
	num := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(100)
		}
		return n
	}
	switch mode {
	case "burn": // burn D [fd3]: burn D of CPU, report own CPU on stdout or fd 3
		burn(dur(arg(0)))
		out := io.Writer(os.Stdout)
		if arg(1) == "fd3" {
			out = os.NewFile(3, "report")
		}
		fmt.Fprintf(out, "self %d\n", int64(rusage(syscall.RUSAGE_SELF)))
	case "fork": // fork D: a child burns D/2 while this process burns D/2
		d := dur(arg(0))
		child := helperCommand("burn", (d / 2).String())
		if err := child.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 100
		}
		burn(d / 2)
		if err := child.Wait(); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 100
		}
		fmt.Printf("total %d\n", int64(rusage(syscall.RUSAGE_SELF)+rusage(syscall.RUSAGE_CHILDREN)))
	case "orphan": // orphan D: a middle process starts a grandchild burning D and exits
		r, w, err := os.Pipe()
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 100
		}
		middle := helperCommand("middle", arg(0))
		middle.ExtraFiles = []*os.File{w}
		if err := middle.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 100
		}
		w.Close()
		report, _ := io.ReadAll(r) // EOF when the grandchild has exited
		gc, _ := strings.CutPrefix(strings.TrimSpace(string(report)), "self ")
		fmt.Printf("grandchild %s\ntotal %d\n", gc, int64(rusage(syscall.RUSAGE_SELF)+rusage(syscall.RUSAGE_CHILDREN)))
	case "middle":
		gc := helperCommand("burn", arg(0), "fd3")
		gc.ExtraFiles = []*os.File{os.NewFile(3, "report")}
		if err := gc.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 100
		}
		// Exit without waiting: the grandchild is orphaned.
	case "tree3": // tree3 D: D of CPU in three processes, one a daemon (setsid, double fork)
		d := dur(arg(0)) / 3
		child := helperCommand("burn", d.String())
		if err := child.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 100
		}
		done, err := startDaemon("burn", d.String(), "fd3")
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 100
		}
		burn(d)
		if err := child.Wait(); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 100
		}
		io.ReadAll(done) // EOF once the daemon has exited
		fmt.Println("done")
	case "daemonize": // daemonize MODE ARGS...: a new session, a child running MODE, exit
		gc := helperCommand(arg(0), args[1:]...)
		gc.ExtraFiles = []*os.File{os.NewFile(3, "report")}
		if err := gc.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 100
		}
		fmt.Println(gc.Process.Pid)
	case "leave": // leave D: a daemon burns, this process exits once it has used D
		done, err := startDaemon("burnreport", arg(0))
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 100
		}
		line, _ := bufio.NewReader(done).ReadString('\n')
		fmt.Print(line)
	case "burnreport": // burnreport D: burn D, say so on fd 3, burn on
		burn(dur(arg(0)))
		fmt.Fprintf(os.NewFile(3, "report"), "burnt %d\n", int64(rusage(syscall.RUSAGE_SELF)))
		burn(time.Hour)
	case "autoreap": // autoreap D: SIGCHLD ignored, a child burns D and is reaped by the kernel
		signal.Ignore(syscall.SIGCHLD)
		r, w, err := os.Pipe()
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 100
		}
		exe, _ := os.Executable()
		env := []string{helperEnv + "=burn"} // the first of a name wins
		pid, err := syscall.ForkExec(exe, []string{exe, arg(0), "fd3"}, &syscall.ProcAttr{
			Env: append(env, os.Environ()...), Files: []uintptr{0, 1, 2, w.Fd()}})
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 100
		}
		w.Close()
		io.ReadAll(r)
		// Exit only once the kernel has reaped it: an orphan would go to
		// the agent, which reaps it and counts it.
		for syscall.Kill(pid, 0) == nil {
			time.Sleep(time.Millisecond)
		}
	case "daemonterm": // a daemon (setsid, double fork) that ignores SIGTERM; this process too
		signal.Ignore(syscall.SIGTERM)
		done, pid, err := startDaemonPid("ignoreterm")
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 100
		}
		defer done.Close()
		for !ignoresTerm(pid) {
			time.Sleep(time.Millisecond)
		}
		fmt.Println("ready")
		time.Sleep(time.Hour)
	case "alloc": // alloc MIB: touch MIB MiB of memory, a MiB at a time
		var keep [][]byte
		for range num(arg(0)) {
			b := make([]byte, 1<<20)
			for i := range b {
				b[i] = 1
			}
			keep = append(keep, b)
		}
		fmt.Println("allocated", len(keep))
	case "trapterm": // exit 0 on SIGTERM
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		fmt.Println("ready")
		<-c
		fmt.Println("got TERM")
	case "ignoreterm":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		time.Sleep(time.Hour)
	case "stderr": // stderr N: a line on stdout, N pattern bytes on stderr
		fmt.Print("to stdout\n")
		p := pattern(num(arg(0)))
		for len(p) > 0 {
			n := min(len(p), 1000)
			os.Stderr.Write(p[:n])
			p = p[n:]
		}
	case "flood": // flood N: N numbered lines on stdout, then END
		os.Stdout.Write(floodOutput(num(arg(0))))
	case "agent": // agent undumpable|dumpable: an agent whose job tries to read its environment
		if arg(0) == "undumpable" {
			if err := MakeUndumpable(); err != nil {
				fmt.Fprintln(os.Stderr, "helper:", err)
				return 100
			}
		}
		p, err := Start(Spec{Argv: []string{"/bin/sh", "-c", `cat /proc/$PPID/environ >/dev/null && echo read || echo refused`}}, Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 100
		}
		<-p.Done()
		fmt.Print(p.Result().StdoutTail)
	default:
		fmt.Fprintln(os.Stderr, "helper: unknown mode", mode)
		return 100
	}
	return 0
}

// startDaemon starts a helper in mode as a daemon: a middle process in a
// session of its own starts it and exits, so it is orphaned and out of
// the job's process group. The daemon's fd 3 is the write end of the
// pipe returned: it reads EOF once the daemon has exited.
func startDaemon(mode string, args ...string) (*os.File, error) {
	r, _, err := startDaemonPid(mode, args...)
	return r, err
}

// startDaemonPid is startDaemon, and returns the daemon's pid.
func startDaemonPid(mode string, args ...string) (*os.File, int, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, 0, err
	}
	middle := helperCommand("daemonize", append([]string{mode}, args...)...)
	middle.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	middle.ExtraFiles = []*os.File{w}
	out, err := middle.Output()
	w.Close()
	if err != nil {
		r.Close()
		return nil, 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		r.Close()
		return nil, 0, err
	}
	return r, pid, nil
}

// ignoresTerm reports whether process pid ignores SIGTERM (SigIgn in
// /proc/PID/status).
func ignoresTerm(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && mask&(1<<(uint(syscall.SIGTERM)-1)) != 0
		}
	}
	return false
}

func helperCommand(mode string, args ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		panic(err) // only in the helper process
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	cmd.Stderr = os.Stderr
	return cmd
}

var sink uint64

// burn uses CPU until the calling process has used d in all, as measured by
// getrusage.
func burn(d time.Duration) {
	x := uint64(1)
	for rusage(syscall.RUSAGE_SELF) < d {
		for range 100000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	sink = x
}

func rusage(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		panic(err) // only in the helper process
	}
	return rusageCPU(&ru)
}

func floodOutput(lines int) []byte {
	var b []byte
	for i := range lines {
		b = fmt.Appendf(b, "line %07d\n", i)
	}
	return append(b, "END\n"...)
}
