//go:build linux

package runner

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baristahq/barista/internal/cgrouptest"
)

func TestParseMountinfo(t *testing.T) {
	mi := `30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
41 30 0:37 /kubepods/pod1 /mnt/my\040cg rw shared:9 - cgroup2 cgroup2 rw,nsdelegate
`
	got := parseMountinfo([]byte(mi))
	want := [][2]string{{"/sys/fs/cgroup/unified", "/"}, {"/mnt/my cg", "/kubepods/pod1"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("parseMountinfo = %q, want %q", got, want)
	}
	if p := parseProcCgroup([]byte("4:memory:/x\n0::/system.slice/w.service\n")); p != "/system.slice/w.service" {
		t.Errorf("parseProcCgroup = %q", p)
	}
	if p := parseProcCgroup([]byte("4:memory:/x\n")); p != "" {
		t.Errorf("parseProcCgroup of a v1-only host = %q, want none", p)
	}
	for _, c := range []struct {
		mount, root, path, want string
		ok                      bool
	}{
		{"/sys/fs/cgroup", "/", "/", "/sys/fs/cgroup", true},
		{"/sys/fs/cgroup", "/", "/a/b", "/sys/fs/cgroup/a/b", true},
		{"/mnt/cg", "/kubepods/pod1", "/kubepods/pod1/c", "/mnt/cg/c", true},
		{"/mnt/cg", "/kubepods/pod1", "/kubepods/pod10", "", false},
		{"/mnt/cg", "/kubepods/pod1", "/other", "", false},
	} {
		if got, ok := cgroupDir(c.mount, c.root, c.path); got != c.want || ok != c.ok {
			t.Errorf("cgroupDir(%q, %q, %q) = %q, %v; want %q, %v", c.mount, c.root, c.path, got, ok, c.want, c.ok)
		}
	}
	for rel, want := range map[string]bool{"6.18.44-fc-v1272": false, "5.7.0": false, "5.6.19-arch1": true, "4.19.0-26-amd64": true, "5.10": false, "x": false, "5.6rc1.0": true} {
		if got := releaseBefore(rel, 5, 7); got != want {
			t.Errorf("releaseBefore(%q, 5, 7) = %v", rel, got)
		}
	}
	if n, ok := parseKeyed([]byte("usage_usec 2000123\nuser_usec 10\n"), "usage_usec"); n != 2000123 || !ok {
		t.Errorf("parseKeyed = %d, %v", n, ok)
	}
}

func TestLimitsFiles(t *testing.T) {
	l := Limits{MemoryMax: 64 << 20, MemorySwapMax: 0, PidsMax: 100, CPUMax: 1500}
	all := func(string) bool { return true }
	got := fmt.Sprint(l.files(all))
	want := "[[memory.max 67108864] [memory.swap.max 0] [memory.oom.group 1] [pids.max 100] [cpu.max 150000 100000]]"
	if got != want {
		t.Errorf("files = %s, want %s", got, want)
	}
	if got := l.files(func(c string) bool { return c == ctrlPids }); fmt.Sprint(got) != "[[pids.max 100]]" {
		t.Errorf("files with pids alone = %v", got)
	}
	if c := (Limits{MemorySwapMax: -1}).Controllers(); len(c) != 0 {
		t.Errorf("no limit needs %v", c)
	}
	if c := l.Controllers(); fmt.Sprint(c) != "[memory pids cpu]" {
		t.Errorf("Controllers = %v", c)
	}
}

// testCgroups opens a parent cgroup of the test's own under this
// process's cgroup, or skips the test (saying why) where the host gives
// no writable cgroup v2 hierarchy. The parent and everything in it are
// removed at the end.
func testCgroups(t *testing.T, controllers ...string) *Cgroups {
	t.Helper()
	c, err := OpenCgroups(CgroupConfig{Parent: fmt.Sprintf("barista-test-%d-%s", os.Getpid(), t.Name()), Controllers: controllers})
	if errors.Is(err, ErrNoCgroup) {
		t.Skipf("no cgroup v2 here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := (&Cgroup{dir: c.dir, fd: -1, kill: c.kill}).destroy(5 * time.Second); err != nil {
			t.Errorf("remove the test's cgroup: %v", err)
		}
	})
	return c
}

func newRun(t *testing.T, c *Cgroups, l Limits) *Cgroup {
	t.Helper()
	cg, err := c.NewRun("job-1-attempt-1", l)
	if err != nil {
		t.Fatal(err)
	}
	return cg
}

// assertCgroupGone checks that the run's cgroup was removed.
func assertCgroupGone(t *testing.T, cg *Cgroup) {
	t.Helper()
	if _, err := os.Stat(cg.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the run's cgroup %s is still there after the run (stat: %v)", cg.dir, err)
	}
}

// A job that burns 2 s of CPU in three processes, one of them a daemon
// (setsid and a double fork) is billed 2 s ± 10 % from its cgroup, in
// the heartbeats' samples and in the result, and its cgroup is removed.
func TestCgroupCPUOfThreeProcesses(t *testing.T) {
	c := testCgroups(t)
	cg := newRun(t, c, Limits{})
	p := start(t, helperSpec(t, "tree3", "2s"), Options{Cgroup: cg})
	samples := pollCPUUntilDone(t, p, 60*time.Second)
	res := p.Result()
	if res.ExitCode != 0 || res.Err != nil || !strings.Contains(res.StdoutTail, "done") {
		t.Fatalf("Result = %+v, want a clean exit", res)
	}
	if res.CPUSource != CPUFromCgroup {
		t.Errorf("CPUSource = %v, want cgroup", res.CPUSource)
	}
	if res.CPU < 1800*time.Millisecond || res.CPU > 2200*time.Millisecond {
		t.Errorf("CPU = %v, want 2s ± 10%%", res.CPU)
	}
	t.Logf("billed %v from the cgroup", res.CPU)
	checkSamples(t, samples, res.CPU)
	assertCgroupGone(t, cg)
}

// The main process exits while the daemon it left keeps burning: the
// daemon is killed with the run and what it burnt is billed.
func TestCgroupBillsTheDaemonLeftBehind(t *testing.T) {
	c := testCgroups(t)
	cg := newRun(t, c, Limits{})
	p := start(t, helperSpec(t, "leave", "800ms"), Options{Cgroup: cg})
	res := waitDone(t, p, 60*time.Second)
	burnt := reportedDuration(t, res.StdoutTail, "burnt")
	if res.ExitCode != 0 || res.CPUSource != CPUFromCgroup {
		t.Fatalf("Result = %+v, want a clean exit billed from the cgroup", res)
	}
	if res.CPU < burnt {
		t.Errorf("CPU = %v, less than the %v the daemon burnt before the main process exited", res.CPU, burnt)
	}
	assertCgroupGone(t, cg)
}

// A child reaped by the kernel (its parent ignores SIGCHLD) is in no
// rusage the agent can collect: the tree's accounting misses it, the
// cgroup's does not.
func TestCgroupBillsAChildReapedByTheKernel(t *testing.T) {
	c := testCgroups(t)
	p := start(t, helperSpec(t, "autoreap", "600ms"), Options{Cgroup: newRun(t, c, Limits{})})
	res := waitDone(t, p, 60*time.Second)
	if res.ExitCode != 0 || res.CPUSource != CPUFromCgroup || res.CPU < 600*time.Millisecond {
		t.Errorf("with a cgroup: Result = %+v, want a clean exit and CPU >= 600ms from the cgroup", res)
	}
	p = start(t, helperSpec(t, "autoreap", "600ms"), Options{})
	res = waitDone(t, p, 60*time.Second)
	if res.ExitCode != 0 || res.CPUSource != CPUFromProc || res.CPU >= 600*time.Millisecond {
		t.Errorf("without: Result = %+v, want a clean exit, CPU from /proc missing the child's 600ms", res)
	}
}

// Cancel (SIGTERM, the grace, then the kill) leaves nothing of a job
// whose processes ignore SIGTERM, a daemon among them: its cgroup was
// empty before the run was done, and /proc holds none of them.
func TestCgroupCancelKillsEverything(t *testing.T) {
	c := testCgroups(t)
	cg := newRun(t, c, Limits{})
	mark := fmt.Sprintf("BARISTA_TEST_MARK=%d-%d", os.Getpid(), time.Now().UnixNano())
	spec := helperSpec(t, "daemonterm")
	k, v, _ := strings.Cut(mark, "=")
	spec.Env[k] = v
	log := filepath.Join(t.TempDir(), "log")
	p := start(t, spec, Options{Cgroup: cg, LogPath: log})
	// Ready: the daemon ignores SIGTERM, the middle process is gone.
	waitForLog(t, log, "ready")
	pids := procsOf(t, cg)
	if len(pids) != 2 || len(marked(t, mark)) != 2 {
		t.Fatalf("cgroup.procs %v, marked processes %v; want the main process and the daemon", pids, marked(t, mark))
	}
	p.Terminate(100 * time.Millisecond)
	res := waitDone(t, p, 10*time.Second)
	if res.Signal != "killed" {
		t.Errorf("Result = %+v, want killed after the grace", res)
	}
	if left := marked(t, mark); len(left) != 0 {
		t.Errorf("processes of the job still alive after the cancel: %v", left)
	}
	for _, pid := range pids {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			t.Errorf("pid %d of the job's cgroup still exists", pid)
		}
	}
	assertCgroupGone(t, cg)
}

// procsOf lists the processes of a run's cgroup.
func procsOf(t *testing.T, cg *Cgroup) []int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cg.dir, "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		n, _ := strconv.Atoi(f)
		pids = append(pids, n)
	}
	return pids
}

// marked lists the live processes (zombies left out) whose environment
// holds mark.
func marked(t *testing.T, mark string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	buf := make([]byte, statBufSize)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !strings.Contains("\x00"+string(env)+"\x00", "\x00"+mark+"\x00") {
			continue
		}
		if s, err := readStat(pid, buf); err == nil && s.state != 'Z' {
			out = append(out, pid)
		}
	}
	return out
}

// Kill (Reject, self-kill) reaches a daemon at once.
func TestCgroupKill(t *testing.T) {
	c := testCgroups(t)
	cg := newRun(t, c, Limits{})
	log := filepath.Join(t.TempDir(), "log")
	p := start(t, helperSpec(t, "daemonterm"), Options{Cgroup: cg, LogPath: log})
	waitForLog(t, log, "ready")
	if pids := procsOf(t, cg); len(pids) != 2 {
		t.Fatalf("cgroup.procs %v, want the main process and the daemon", pids)
	}
	p.Kill()
	if res := waitDone(t, p, 10*time.Second); res.Signal != "killed" || res.CPUSource != CPUFromCgroup {
		t.Errorf("Result = %+v, want killed, CPU from the cgroup", res)
	}
	assertCgroupGone(t, cg)
}

// A job running as another user cannot write its cgroup's files: not
// its limits, not cgroup.procs (to leave it), not cgroup.kill.
func TestCgroupJobCannotWriteItsCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a job as nobody")
	}
	c := testCgroups(t)
	cg := newRun(t, c, Limits{})
	script := `for f in cgroup.procs cgroup.kill cgroup.subtree_control; do echo 1 2>/dev/null >"$CG/$f" && echo "$f written" || echo "$f refused"; done
echo $$ 2>/dev/null >"$CG/../cgroup.procs" && echo "moved out" || echo "move refused"`
	p := start(t, Spec{Argv: []string{"sh", "-c", script}, Env: map[string]string{"CG": cg.dir}},
		Options{User: &Identity{UID: 65534, GID: 65534}, Cgroup: cg})
	res := waitDone(t, p, 10*time.Second)
	want := "cgroup.procs refused\ncgroup.kill refused\ncgroup.subtree_control refused\nmove refused\n"
	if res.StdoutTail != want {
		t.Errorf("the job as nobody printed %q, want %q", res.StdoutTail, want)
	}
}

// With the memory controller: a job that allocates past memory.max is
// killed by the kernel, and the result says so.
func TestCgroupMemoryLimit(t *testing.T) {
	c := testCgroups(t, ctrlMemory)
	if ok, why := c.Controller(ctrlMemory); !ok {
		t.Skipf("the memory limit cannot be tested here: %s", why)
	}
	cg := newRun(t, c, Limits{MemoryMax: 64 << 20, MemorySwapMax: 0})
	p := start(t, helperSpec(t, "alloc", "512"), Options{Cgroup: cg})
	res := waitDone(t, p, 60*time.Second)
	if !res.OOMKilled || res.Signal != "killed" {
		t.Errorf("Result = %+v, want OOM-killed", res)
	}
	assertCgroupGone(t, cg)
}

// With the pids controller: a fork bomb runs into pids.max, not into the
// host's limit.
func TestCgroupPidsLimit(t *testing.T) {
	c := testCgroups(t, ctrlPids)
	if ok, why := c.Controller(ctrlPids); !ok {
		t.Skipf("the process limit cannot be tested here: %s", why)
	}
	cg := newRun(t, c, Limits{PidsMax: 16})
	p := start(t, Spec{Argv: []string{"sh", "-c", `for i in $(seq 64); do sleep 30 & done 2>/dev/null; n=$(jobs -p | wc -l); echo "$n started"; [ "$n" -lt 64 ]`}}, Options{Cgroup: cg})
	res := waitDone(t, p, 60*time.Second)
	if res.ExitCode != 0 {
		t.Errorf("Result = %+v: the job started all 64 processes past pids.max 16", res)
	}
	assertCgroupGone(t, cg)
}

// A hierarchy the worker cannot write (mounted read-only here) is no
// cgroup for it: OpenCgroups says so, wrapping ErrNoCgroup.
func TestOpenCgroupsReadOnly(t *testing.T) {
	mountinfo, procCgroup := cgrouptest.ReadOnly(t)
	_, err := OpenCgroups(CgroupConfig{Mountinfo: mountinfo, ProcCgroup: procCgroup})
	if !errors.Is(err, ErrNoCgroup) || !strings.Contains(err.Error(), "read-only file system") {
		t.Fatalf("OpenCgroups on a read-only hierarchy: %v; want ErrNoCgroup naming the read-only file system", err)
	}
	none := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(none, []byte("30 22 0:27 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenCgroups(CgroupConfig{Mountinfo: none, ProcCgroup: procCgroup}); !errors.Is(err, ErrNoCgroup) || !strings.Contains(err.Error(), "no cgroup2 file system is mounted") {
		t.Fatalf("OpenCgroups on a host without cgroup2: %v", err)
	}
}

// A run's cgroup left in the parent (its agent died; a daemon lives on
// in it) survives OpenCgroups, which cannot know that no live agent owns
// it, and is killed and removed by RemoveLeftovers.
func TestCgroupLeftovers(t *testing.T) {
	c := testCgroups(t)
	dir := filepath.Join(c.Dir(), "job-9-attempt-1")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "1000")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd, Setpgid: true}
	err = cmd.Start()
	syscall.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	again, err := OpenCgroups(CgroupConfig{Parent: c.Dir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(cmd.Process.Pid, 0); err != nil {
		t.Fatalf("OpenCgroups killed a process of a run's cgroup: %v", err)
	}
	if err := again.RemoveLeftovers(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the leftover's process: %v, want killed", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the leftover cgroup: %v, want it removed", err)
	}
}
