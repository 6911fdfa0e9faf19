//go:build linux

package runner

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// pathEnv is the environment of the tests' jobs that set none: the test's
// PATH, to find sh and sleep.
func pathEnv() []string { return []string{"PATH=" + os.Getenv("PATH")} }

// start starts spec and makes sure, at the end of the test, that its tree is
// gone and that the supervisor goroutine has stopped. Without opt.Env the
// job gets pathEnv.
func start(t *testing.T, spec Spec, opt Options) *Process {
	t.Helper()
	if opt.Env == nil {
		opt.Env = pathEnv()
	}
	p, err := Start(spec, opt)
	if err != nil {
		t.Fatalf("Start(%q): %v", spec.Argv, err)
	}
	t.Cleanup(func() {
		p.Kill()
		select {
		case <-p.Done():
		case <-time.After(10 * time.Second):
			t.Errorf("pid %d: Done not closed 10s after Kill", p.PID())
		}
		waitSupervisorStopped(t)
	})
	return p
}

// waitSupervisorStopped checks that the supervisor goroutine stops once no
// Process is running.
func waitSupervisorStopped(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		reg.mu.Lock()
		running, active := reg.running, len(reg.active)
		reg.mu.Unlock()
		if !running && active == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("supervisor still running (%d active Processes) 2s after the last job", active)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitDone(t *testing.T, p *Process, timeout time.Duration) Result {
	t.Helper()
	select {
	case <-p.Done():
		return p.Result()
	case <-time.After(timeout):
		t.Fatalf("pid %d: Done not closed after %v", p.PID(), timeout)
		return Result{}
	}
}

// pollCPUUntilDone calls CPU every 10ms until p is done and returns the
// values seen.
func pollCPUUntilDone(t *testing.T, p *Process, timeout time.Duration) []time.Duration {
	t.Helper()
	var samples []time.Duration
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	for {
		select {
		case <-p.Done():
			return samples
		case <-deadline:
			t.Fatalf("pid %d: Done not closed after %v", p.PID(), timeout)
		case <-tick.C:
			c, err := p.CPU()
			if err != nil {
				t.Fatalf("CPU: %v", err)
			}
			samples = append(samples, c)
		}
	}
}

func checkSamples(t *testing.T, samples []time.Duration, final time.Duration) {
	t.Helper()
	if len(samples) < 10 {
		t.Fatalf("only %d CPU samples", len(samples))
	}
	for i := 1; i < len(samples); i++ {
		if samples[i] < samples[i-1] {
			t.Fatalf("CPU decreased: sample %d = %v, sample %d = %v", i-1, samples[i-1], i, samples[i])
		}
	}
	last := samples[len(samples)-1]
	if last > final {
		t.Errorf("last CPU() = %v > Result.CPU = %v", last, final)
	}
	if last < final/2 {
		t.Errorf("last CPU() = %v < half of Result.CPU = %v: live descendants not counted", last, final)
	}
}

// assertCPUClose checks got against the CPU the helper measured itself:
// within 5% and within 50ms.
func assertCPUClose(t *testing.T, got, want time.Duration) {
	t.Helper()
	tol := min(50*time.Millisecond, want/20)
	if d := got - want; d > tol || d < -tol {
		t.Errorf("Result.CPU = %v, helper measured %v: off by %v (tolerance %v)", got, want, d, tol)
	} else {
		t.Logf("Result.CPU = %v, helper measured %v (off by %v)", got, want, d)
	}
}

// reportedDuration extracts "key NANOSECONDS" from a helper's output.
func reportedDuration(t *testing.T, out, key string) time.Duration {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + key + ` (\d+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %q report in output %q", key, out)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(n)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitForLog waits until the file at path contains s.
func waitForLog(t *testing.T, path, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, _ := os.ReadFile(path); bytes.Contains(b, []byte(s)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not contain %q after 10s", path, s)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// treeOf returns the processes of pid's tree (pid included) as found in
// /proc now.
func treeOf(t *testing.T, pid int) map[int]procStat {
	t.Helper()
	snap, err := scanProcs()
	if err != nil {
		t.Fatal(err)
	}
	tree := map[int]procStat{}
	if s, ok := snap[pid]; ok {
		tree[pid] = s
	}
	for grew := true; grew; {
		grew = false
		for q, s := range snap {
			if _, in := tree[s.ppid]; in {
				if _, done := tree[q]; !done {
					tree[q] = s
					grew = true
				}
			}
		}
	}
	return tree
}

// waitTree waits until pid's tree has n processes, in exactly newSessions
// sessions other than pid's, and returns it.
func waitTree(t *testing.T, pid, n, newSessions int) map[int]procStat {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		tree := treeOf(t, pid)
		sessions := map[int]bool{}
		for _, s := range tree {
			if s.sid != tree[pid].sid {
				sessions[s.sid] = true
			}
		}
		if len(tree) == n && len(sessions) == newSessions {
			return tree
		}
		if time.Now().After(deadline) {
			t.Fatalf("tree of %d after 10s: %+v; want %d processes, %d in new sessions", pid, tree, n, newSessions)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// assertGone checks that none of the processes exists any more.
func assertGone(t *testing.T, procs map[int]procStat) {
	t.Helper()
	buf := make([]byte, statBufSize)
	for pid, old := range procs {
		s, err := readStat(pid, buf)
		if errors.Is(err, errGone) {
			continue
		}
		if err != nil {
			t.Errorf("pid %d: %v", pid, err)
		} else if s.start == old.start {
			t.Errorf("pid %d (state %c, ppid %d) still exists", pid, s.state, s.ppid)
		}
	}
}

func TestSubreaperEnabled(t *testing.T) {
	on, err := isSubreaper()
	if err != nil || !on {
		t.Fatalf("isSubreaper() = %v, %v after EnableSubreaper; want true", on, err)
	}
}

// cpuRun runs the helper in mode for d, polling its CPU until it is done,
// and fails unless it exits with status 0; it returns the process, its
// result, the samples and its log.
func cpuRun(t *testing.T, mode, d string) (*Process, Result, []time.Duration, string) {
	t.Helper()
	log := filepath.Join(t.TempDir(), "log")
	p := start(t, helperSpec(t, mode, d), Options{LogPath: log})
	samples := pollCPUUntilDone(t, p, 30*time.Second)
	res := p.Result()
	if res.ExitCode != 0 || res.Err != nil {
		t.Fatalf("Result = %+v, want a clean exit", res)
	}
	return p, res, samples, readFile(t, log)
}

func TestCPUSingleProcess(t *testing.T) {
	p, res, samples, out := cpuRun(t, "burn", "1s")
	if res.Signal != "" {
		t.Fatalf("Result = %+v, want a clean exit", res)
	}
	assertCPUClose(t, res.CPU, reportedDuration(t, out, "self"))
	checkSamples(t, samples, res.CPU)
	if c, err := p.CPU(); err != nil || c != res.CPU {
		t.Errorf("CPU() after Done = %v, %v; want %v", c, err, res.CPU)
	}
}

func TestCPUForkedChild(t *testing.T) {
	_, res, samples, out := cpuRun(t, "fork", "1s")
	assertCPUClose(t, res.CPU, reportedDuration(t, out, "total"))
	checkSamples(t, samples, res.CPU)
}

func TestCPUOrphanedGrandchild(t *testing.T) {
	_, res, samples, out := cpuRun(t, "orphan", "600ms")
	gc := reportedDuration(t, out, "grandchild")
	if gc < 600*time.Millisecond {
		t.Fatalf("grandchild reported %v, want >= 600ms", gc)
	}
	assertCPUClose(t, res.CPU, reportedDuration(t, out, "total")+gc)
	checkSamples(t, samples, res.CPU)
}

// Two jobs with orphans at once: each orphan is charged to its own job.
func TestCPUConcurrentProcesses(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	for i := range 2 {
		log := filepath.Join(dir, "log"+strconv.Itoa(i))
		p := start(t, helperSpec(t, "orphan", "400ms"), Options{LogPath: log})
		wg.Go(func() {
			select {
			case <-p.Done():
			case <-time.After(30 * time.Second):
				t.Errorf("job %d not done after 30s", i)
				return
			}
			out := readFile(t, log)
			res := p.Result()
			if res.ExitCode != 0 {
				t.Errorf("job %d: Result = %+v", i, res)
			}
			assertCPUClose(t, res.CPU, reportedDuration(t, out, "total")+reportedDuration(t, out, "grandchild"))
		})
	}
	wg.Wait()
}

// A descendant that is never waited for is counted while it runs, and its
// CPU is in the result once it has been killed and reaped.
func TestCPULiveDescendant(t *testing.T) {
	p := start(t, Spec{Argv: []string{"sh", "-c", "while :; do :; done & sleep 1000"}}, Options{})
	deadline := time.Now().Add(20 * time.Second)
	var last time.Duration
	for last < 300*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("CPU() = %v after 20s of a busy loop", last)
		}
		time.Sleep(10 * time.Millisecond)
		c, err := p.CPU()
		if err != nil {
			t.Fatal(err)
		}
		if c < last {
			t.Fatalf("CPU decreased from %v to %v", last, c)
		}
		last = c
	}
	tree := treeOf(t, p.PID())
	p.Kill()
	res := waitDone(t, p, 5*time.Second)
	if res.ExitCode != -1 || res.Signal != "killed" {
		t.Errorf("ExitCode, Signal = %d, %q; want -1, \"killed\"", res.ExitCode, res.Signal)
	}
	if res.CPU < last || res.CPU > last+time.Second {
		t.Errorf("Result.CPU = %v, want in [%v, %v]", res.CPU, last, last+time.Second)
	}
	assertGone(t, tree)
}

func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		script   string
		code     int
		signal   string
		tailWant string
	}{
		{"exit 0", 0, "", ""},
		{"exit 3", 3, "", ""},
		{"echo oops >&2; exit 255", 255, "", "oops\n"},
		{"kill -KILL $$", -1, "killed", ""},
		{"kill -TERM $$", -1, "terminated", ""},
	} {
		t.Run(tc.script, func(t *testing.T) {
			p := start(t, Spec{Argv: []string{"sh", "-c", tc.script}}, Options{})
			res := waitDone(t, p, 10*time.Second)
			if res.ExitCode != tc.code || res.Signal != tc.signal || res.StderrTail != tc.tailWant || res.Err != nil {
				t.Errorf("Result = %+v; want ExitCode %d, Signal %q, StderrTail %q", res, tc.code, tc.signal, tc.tailWant)
			}
			if res.Started.IsZero() || res.Ended.Before(res.Started) {
				t.Errorf("Started, Ended = %v, %v", res.Started, res.Ended)
			}
		})
	}
}

func TestStderrTailAndLog(t *testing.T) {
	const n = 10 << 10
	want := pattern(n)
	for _, tc := range []struct {
		tailBytes, wantTail int
	}{{0, 4096}, {100, 100}, {20000, n}} {
		t.Run(strconv.Itoa(tc.tailBytes), func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "log")
			p := start(t, helperSpec(t, "stderr", strconv.Itoa(n)), Options{LogPath: log, TailBytes: tc.tailBytes})
			res := waitDone(t, p, 10*time.Second)
			if res.ExitCode != 0 {
				t.Fatalf("Result = %+v", res)
			}
			if got := res.StderrTail; got != string(want[n-tc.wantTail:]) {
				t.Errorf("StderrTail has %d bytes %q..., want the last %d bytes of stderr", len(got), got[:min(len(got), 20)], tc.wantTail)
			}
			if got, wantOut := res.StdoutTail, "to stdout\n"; got != wantOut[max(0, len(wantOut)-tc.wantTail):] {
				t.Errorf("StdoutTail %q, want the stdout line", got)
			}
			// Both streams are in the log; the stdout line was written in
			// one piece, somewhere among the stderr bytes.
			out := readFile(t, log)
			if len(out) != len("to stdout\n")+n || strings.Replace(out, "to stdout\n", "", 1) != string(want) {
				t.Errorf("log has %d bytes, want %d: the stdout line and all of stderr", len(out), len("to stdout\n")+n)
			}
		})
	}
}

func TestLogBounded(t *testing.T) {
	const maxLog = 64 << 10
	const lines = 100000 // 1.2 MB
	want := string(floodOutput(lines))
	log := filepath.Join(t.TempDir(), "log")
	p := start(t, helperSpec(t, "flood", strconv.Itoa(lines)), Options{LogPath: log, MaxLogBytes: maxLog})
	res := waitDone(t, p, 20*time.Second)
	if res.ExitCode != 0 || res.Err != nil {
		t.Fatalf("Result = %+v", res)
	}
	got := readFile(t, log)
	if len(got) > maxLog || len(got) < maxLog/2 {
		t.Errorf("log has %d bytes, want between %d and %d", len(got), maxLog/2, maxLog)
	}
	if !strings.HasSuffix(want, got) {
		t.Errorf("log is not the end of the output: starts %q, ends %q", got[:min(len(got), 30)], got[max(0, len(got)-30):])
	}
	if !strings.HasSuffix(got, "line 0099999\nEND\n") {
		t.Errorf("log does not end with the final output: %q", got[max(0, len(got)-30):])
	}
	if res.StdoutTail != want[len(want)-DefaultTailBytes:] || res.StderrTail != "" {
		t.Errorf("StdoutTail has %d bytes, ends %q; StderrTail %q", len(res.StdoutTail), res.StdoutTail[max(0, len(res.StdoutTail)-30):], res.StderrTail)
	}
}

func TestLogAppendsAndDiscard(t *testing.T) {
	log := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(log, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, Spec{Argv: []string{"sh", "-c", "echo new; echo err >&2"}}, Options{LogPath: log})
	if res := waitDone(t, p, 10*time.Second); res.ExitCode != 0 || res.StderrTail != "err\n" {
		t.Fatalf("Result = %+v", res)
	}
	if got := readFile(t, log); got != "old\nnew\nerr\n" && got != "old\nerr\nnew\n" {
		t.Errorf("log = %q, want the old content then both lines", got)
	}

	p = start(t, Spec{Argv: []string{"sh", "-c", "echo new; echo err >&2; exit 7"}}, Options{})
	if res := waitDone(t, p, 10*time.Second); res.ExitCode != 7 || res.StderrTail != "err\n" || res.Err != nil {
		t.Fatalf("without a log: Result = %+v", res)
	}
}

// startReady starts spec with a log and waits until it has logged "ready";
// it returns the process and the log's path.
func startReady(t *testing.T, spec Spec) (*Process, string) {
	t.Helper()
	log := filepath.Join(t.TempDir(), "log")
	p := start(t, spec, Options{LogPath: log})
	waitForLog(t, log, "ready\n")
	return p, log
}

func TestTerminateTrapped(t *testing.T) {
	p, log := startReady(t, helperSpec(t, "trapterm"))
	t0 := time.Now()
	const grace = 5 * time.Second
	p.Terminate(grace)
	p.Terminate(grace) // safe to repeat
	res := waitDone(t, p, grace+5*time.Second)
	if el := time.Since(t0); el >= grace {
		t.Errorf("done %v after Terminate, want well within the %v grace", el, grace)
	}
	if res.ExitCode != 0 || res.Signal != "" {
		t.Errorf("ExitCode, Signal = %d, %q; want 0, \"\"", res.ExitCode, res.Signal)
	}
	if got := readFile(t, log); got != "ready\ngot TERM\n" {
		t.Errorf("log = %q", got)
	}
	p.Terminate(grace) // and after Done
	p.Kill()
}

func TestTerminateIgnored(t *testing.T) {
	p, _ := startReady(t, helperSpec(t, "ignoreterm"))
	t0 := time.Now()
	const grace = 300 * time.Millisecond
	p.Terminate(grace)
	p.Terminate(10 * time.Second) // a later, longer grace does not extend the first
	res := waitDone(t, p, 10*time.Second)
	el := time.Since(t0)
	if el < grace || el > grace+2*time.Second {
		t.Errorf("done %v after Terminate(%v), want just after the grace", el, grace)
	}
	if res.ExitCode != -1 || res.Signal != "killed" {
		t.Errorf("ExitCode, Signal = %d, %q; want -1, \"killed\"", res.ExitCode, res.Signal)
	}
}

// A job whose main process exits on SIGTERM at once while a descendant
// ignores it: the descendant gets until the end of the grace, then SIGKILL.
func TestTerminateGraceForDescendants(t *testing.T) {
	p, _ := startReady(t, Spec{Argv: []string{"sh", "-c", "(trap '' TERM; echo ready; exec sleep 1000) & wait"}})
	tree := waitTree(t, p.PID(), 2, 0)
	t0 := time.Now()
	const grace = 400 * time.Millisecond
	p.Terminate(grace)
	res := waitDone(t, p, 10*time.Second)
	if el := time.Since(t0); el < grace || el > grace+2*time.Second {
		t.Errorf("done %v after Terminate(%v), want just after the grace", el, grace)
	}
	if res.ExitCode != -1 || res.Signal != "terminated" {
		t.Errorf("ExitCode, Signal = %d, %q; want -1, \"terminated\"", res.ExitCode, res.Signal)
	}
	assertGone(t, tree)
}

func TestKillSetsidGrandchild(t *testing.T) {
	p := start(t, Spec{Argv: []string{"sh", "-c", "setsid sleep 1000 & sleep 1000"}}, Options{})
	tree := waitTree(t, p.PID(), 3, 1)
	t0 := time.Now()
	p.Kill()
	p.Kill() // safe to repeat
	res := waitDone(t, p, 5*time.Second)
	if el := time.Since(t0); el > 2*time.Second {
		t.Errorf("done %v after Kill", el)
	}
	if res.ExitCode != -1 || res.Signal != "killed" {
		t.Errorf("ExitCode, Signal = %d, %q; want -1, \"killed\"", res.ExitCode, res.Signal)
	}
	assertGone(t, tree)
}

// When the main process exits, its remaining descendants are killed before
// Done is closed, whether or not they left the process group.
func TestMainExitKillsDescendants(t *testing.T) {
	for _, tc := range []struct{ name, script string }{
		{"background", "sleep 1000 & echo $!"},
		{"setsid", "setsid sleep 1000 & echo $!"},
		{"deep", "sh -c 'sleep 1000 & sleep 1000' & sleep 0.2; echo $!"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "log")
			t0 := time.Now()
			p := start(t, Spec{Argv: []string{"sh", "-c", tc.script}}, Options{LogPath: log})
			res := waitDone(t, p, 10*time.Second)
			if el := time.Since(t0); el > 3*time.Second {
				t.Errorf("done after %v: descendants were waited for rather than killed", el)
			}
			if res.ExitCode != 0 || res.Signal != "" {
				t.Errorf("ExitCode, Signal = %d, %q; want 0, \"\"", res.ExitCode, res.Signal)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, log)))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("descendant %d still exists after Done (stat: %v)", pid, err)
			}
		})
	}
}

func TestEnvAndDir(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(t.TempDir(), "log")
	spec := Spec{
		Argv: []string{"sh", "-c", `printf '%s|%s\n' "$FOO" "$HOME"; pwd -P`},
		Env:  map[string]string{"FOO": "bar baz", "HOME": "/nowhere"},
		Dir:  dir,
	}
	p := start(t, spec, Options{LogPath: log})
	if res := waitDone(t, p, 10*time.Second); res.ExitCode != 0 {
		t.Fatalf("Result = %+v", res)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := readFile(t, log), "bar baz|/nowhere\n"+real+"\n"; got != want {
		t.Errorf("output = %q, want %q", got, want)
	}
}

// TestEnvIsOnlyWhatIsGiven: a job's environment is Options.Env with the
// payload's laid over it, and nothing of the agent's own: a variable of
// the test process does not reach it.
func TestEnvIsOnlyWhatIsGiven(t *testing.T) {
	t.Setenv("BARISTA_TOKEN", "agent-secret-never-in-a-job")
	log := filepath.Join(t.TempDir(), "log")
	spec := Spec{Argv: []string{"/usr/bin/env"}, Env: map[string]string{"A": "payload", "B": "b=c"}}
	p := start(t, spec, Options{LogPath: log, Env: []string{"PATH=/usr/bin:/bin", "A=base", "HOME=/job"}})
	if res := waitDone(t, p, 10*time.Second); res.ExitCode != 0 {
		t.Fatalf("Result = %+v", res)
	}
	if got, want := readFile(t, log), "PATH=/usr/bin:/bin\nA=payload\nHOME=/job\nB=b=c\n"; got != want {
		t.Errorf("environment = %q, want %q", got, want)
	}
}

// TestRunAsUser: with Options.User the job runs with that user's IDs and
// groups only (here nobody, 65534), is measured and killed like any
// other, and cannot enter a directory of the agent's that is closed to
// it. It needs root.
func TestRunAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running a job as another user needs root")
	}
	nobody := &Identity{UID: 65534, GID: 65534}
	log := filepath.Join(t.TempDir(), "log")
	p := start(t, Spec{Argv: []string{"sh", "-c", "id -u; id -g; id -G"}}, Options{LogPath: log, User: nobody})
	if res := waitDone(t, p, 10*time.Second); res.ExitCode != 0 {
		t.Fatalf("Result = %+v", res)
	}
	if got := readFile(t, log); got != "65534\n65534\n65534\n" {
		t.Errorf("uid, gid, groups = %q, want 65534 for each and no other group", got)
	}
	// Supplementary groups are set as given.
	log2 := filepath.Join(t.TempDir(), "log")
	p = start(t, Spec{Argv: []string{"id", "-G"}}, Options{LogPath: log2, User: &Identity{UID: 65534, GID: 65534, Groups: []uint32{65534, 4242}}})
	if res := waitDone(t, p, 10*time.Second); res.ExitCode != 0 {
		t.Fatalf("Result = %+v", res)
	}
	if got := readFile(t, log2); got != "65534 4242\n" {
		t.Errorf("groups = %q, want \"65534 4242\"", got)
	}
	// Killed as a tree like any job.
	p = start(t, Spec{Argv: []string{"sh", "-c", "sleep 1000 & sleep 1000"}}, Options{User: nobody})
	waitTree(t, p.PID(), 3, 0)
	p.Kill()
	if res := waitDone(t, p, 10*time.Second); res.Signal != "killed" {
		t.Errorf("after Kill: %+v", res)
	}
	// The chdir happens as the user: a root-only directory is refused.
	closed := t.TempDir()
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(Spec{Argv: []string{"true"}, Dir: closed}, Options{Env: pathEnv(), User: nobody}); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("Dir closed to the user: err = %v, want a permission error", err)
	}
	waitSupervisorStopped(t)
}

// TestUndumpableAgent: a job of the agent's own user (not root) reads
// the agent's environment through /proc, unless the agent made itself
// undumpable. As root the agent runs as nobody, from a copy of this test
// binary that nobody may run.
func TestUndumpableAgent(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		dir, err := os.MkdirTemp("", "runner-agent-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		b, err := os.ReadFile(exe)
		if err != nil {
			t.Fatal(err)
		}
		exe = filepath.Join(dir, "agent")
		if err := os.WriteFile(exe, b, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
	}
	for mode, want := range map[string]string{"dumpable": "read\n", "undumpable": "refused\n"} {
		cmd := exec.Command(exe, mode)
		cmd.Env = []string{helperEnv + "=agent", "GORACE=atexit_sleep_ms=0", "AGENT_SECRET=s3cret"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := cmd.Output()
		if err != nil || string(out) != want {
			t.Errorf("%s agent: its job says %q (%v), want %q", mode, out, err, want)
		}
	}
}

func TestStartErrors(t *testing.T) {
	var fe *FieldError
	if _, err := Start(Spec{}, Options{}); !errors.As(err, &fe) || fe.Field != "argv" {
		t.Errorf("empty argv: err = %v, want a FieldError for argv", err)
	}
	if _, err := Start(Spec{Argv: []string{"sh"}, Env: map[string]string{"PATH": "/nonexistent"}}, Options{}); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("sh with PATH=/nonexistent: err = %v, want exec.ErrNotFound", err)
	}
	if _, err := Start(Spec{Argv: []string{"no-such-program-barista"}}, Options{Env: pathEnv()}); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("unknown program: err = %v, want exec.ErrNotFound", err)
	}
	// No PATH at all: nothing of the agent's environment is used.
	if _, err := Start(Spec{Argv: []string{"true"}}, Options{}); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("true without a PATH: err = %v, want exec.ErrNotFound", err)
	}
	if _, err := Start(Spec{Argv: []string{"true"}, Dir: "/nonexistent/dir"}, Options{Env: pathEnv()}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing dir: err = %v, want fs.ErrNotExist", err)
	}
	if _, err := Start(Spec{Argv: []string{"true"}}, Options{LogPath: "/nonexistent/dir/log", Env: pathEnv()}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("bad log path: err = %v, want fs.ErrNotExist", err)
	}
	waitSupervisorStopped(t)
}

func TestResultBeforeDone(t *testing.T) {
	p := start(t, Spec{Argv: []string{"sleep", "1000"}}, Options{})
	if res := p.Result(); res != (Result{}) {
		t.Errorf("Result before Done = %+v, want the zero Result", res)
	}
	select {
	case <-p.Done():
		t.Fatal("Done closed while the job runs")
	default:
	}
}
