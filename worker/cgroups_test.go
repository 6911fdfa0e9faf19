//go:build linux

package worker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/baristahq/barista/internal/cgrouptest"
	pb "github.com/baristahq/barista/proto"
)

func TestSizeLimits(t *testing.T) {
	l := DefaultSizeLimits()
	for flag, want := range map[string]string{
		"memory-max":      "sm=1GiB,md=4GiB,lg=8GiB",
		"memory-swap-max": "sm=0,md=0,lg=0",
		"pids-max":        "sm=1024,md=4096,lg=16384",
		"cpu-max":         "sm=max,md=max,lg=max",
	} {
		if got := l.String(flag); got != want {
			t.Errorf("default %s = %s, want %s", flag, got, want)
		}
	}
	for _, set := range [][2]string{{"memory-max", "lg=16GiB,sm=512M"}, {"memory-swap-max", "md=max"}, {"pids-max", "sm=max"}, {"cpu-max", "sm=0.5,lg=4"}} {
		if err := l.SetLimit(set[0], set[1]); err != nil {
			t.Fatalf("SetLimit(%q, %q): %v", set[0], set[1], err)
		}
	}
	want := SizeLimits{
		{MemoryMax: 512 << 20, MemorySwapMax: 0, PidsMax: 0, CPUMax: 500},
		{MemoryMax: 4 << 30, MemorySwapMax: -1, PidsMax: 4096},
		{MemoryMax: 16 << 30, MemorySwapMax: 0, PidsMax: 16384, CPUMax: 4000},
	}
	if l != want {
		t.Errorf("limits %+v, want %+v", l, want)
	}
	if l.For(pb.Size_LG) != want[2] || l.For(pb.Size_SIZE_UNSPECIFIED) != want[0] {
		t.Error("For picks the wrong size")
	}
	if got := fmt.Sprint(l.Controllers()); got != "[memory pids cpu]" {
		t.Errorf("Controllers = %s", got)
	}
	for _, bad := range [][2]string{{"memory-max", "xl=1GiB"}, {"memory-max", "sm"}, {"memory-max", "sm=0"}, {"memory-max", "sm=1PB"}, {"pids-max", "sm=0"}, {"cpu-max", "sm=none"}, {"disk-max", "sm=1"}} {
		if err := l.SetLimit(bad[0], bad[1]); err == nil {
			t.Errorf("SetLimit(%q, %q) accepted", bad[0], bad[1])
		}
	}
}

// testCgroupSetup is a setup whose parent is the test's own (removed at
// the end), or skips the test where the host gives no cgroup v2.
func testCgroupSetup(t *testing.T, l SizeLimits) CgroupSetup {
	t.Helper()
	s := CgroupSetup{Parent: fmt.Sprintf("barista-test-%d-%s", os.Getpid(), t.Name()), Limits: l}
	c, rep, err := OpenCgroups(s)
	if err != nil {
		t.Fatal(err)
	}
	if c == nil {
		t.Skipf("no cgroup v2 here: %s", rep.None)
	}
	t.Cleanup(func() {
		if err := syscall.Rmdir(c.Dir()); err != nil {
			t.Errorf("remove the test's cgroup %s: %v (a run's cgroup left in it?)", c.Dir(), err)
		}
	})
	return s
}

// TestProcessRunnerCgroup: a job runs in a cgroup of its own, named as its
// run, under the parent; its CPU comes from the cgroup, and the cgroup is
// gone once the run is.
func TestProcessRunnerCgroup(t *testing.T) {
	s := testCgroupSetup(t, SizeLimits{})
	c, _, err := OpenCgroups(s)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	r, err := NewProcessRunner(ProcessConfig{WorkDir: filepath.Join(root, "work"), WorkerID: "w1", Env: []string{"PATH=/usr/bin:/bin"}, Cgroups: c})
	if err != nil {
		t.Fatal(err)
	}
	res := runJob(t, r, shellJob(t, 7, `i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; cat /proc/self/cgroup`, nil))
	if res.ExitCode != 0 || res.CPUSource != pb.CpuSource_CPU_SOURCE_CGROUP || res.CPU <= 0 {
		t.Fatalf("Result = %+v, want a clean exit with CPU from the cgroup", res)
	}
	if !strings.Contains(res.StdoutTail, "/job-7-attempt-2\n") {
		t.Errorf("the job's /proc/self/cgroup: %q, want its run's cgroup job-7-attempt-2", res.StdoutTail)
	}
	if _, err := os.Stat(filepath.Join(c.Dir(), "job-7-attempt-2")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the run's cgroup after the run: %v, want it gone", err)
	}
}

// TestCgroupFallback: on a host whose cgroup v2 hierarchy the worker
// cannot write (a read-only mount here), it runs jobs as before (CPU from
// /proc) and says why; with Require it refuses to start.
func TestCgroupFallback(t *testing.T) {
	mountinfo, procCgroup := cgrouptest.ReadOnly(t)
	dir := t.TempDir()
	s := CgroupSetup{Limits: DefaultSizeLimits(), Mountinfo: mountinfo, ProcCgroup: procCgroup}
	c, rep, err := OpenCgroups(s)
	if err != nil || c != nil || !strings.Contains(rep.None, "read-only file system") {
		t.Fatalf("OpenCgroups on a read-only hierarchy: %v, %+v, %v; want none, saying why", c, rep, err)
	}
	r, err := NewProcessRunner(ProcessConfig{WorkDir: filepath.Join(dir, "work"), WorkerID: "w1", Env: []string{"PATH=/usr/bin:/bin"}, Cgroups: c})
	if err != nil {
		t.Fatal(err)
	}
	if res := runJob(t, r, shellJob(t, 8, "true", nil)); res.ExitCode != 0 || res.CPUSource != pb.CpuSource_CPU_SOURCE_PROC {
		t.Errorf("Result = %+v, want a clean exit with CPU from /proc", res)
	}
	s.Require = true
	if _, _, err := OpenCgroups(s); err == nil || !strings.Contains(err.Error(), "cgroups are required: no writable cgroup v2 hierarchy") {
		t.Errorf("OpenCgroups with Require: %v", err)
	}
}

// TestCgroupRequireLimits: with Require, a limit whose controller the
// hierarchy lacks is an error naming it; without, it is reported missing.
// Only on a host whose cgroup v2 has no memory controller.
func TestCgroupRequireLimits(t *testing.T) {
	s := testCgroupSetup(t, DefaultSizeLimits())
	c, rep, err := OpenCgroups(s)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.Controller("memory"); ok {
		t.Skip("this host's cgroup v2 has the memory controller")
	}
	if len(rep.Missing) != 2 || !strings.HasPrefix(rep.Missing[0].String(), "memory.max sm=1GiB,md=4GiB,lg=8GiB, memory.swap.max sm=0,md=0,lg=0 (the hierarchy gives ") || rep.Missing[1].Controller != "pids" {
		t.Errorf("report %+v, want memory.max missing", rep)
	}
	s.Require = true
	if _, _, err := OpenCgroups(s); err == nil || !strings.Contains(err.Error(), "these limits cannot be enforced: memory.max") {
		t.Errorf("OpenCgroups with Require: %v", err)
	}
	s.Limits = SizeLimits{{MemorySwapMax: -1}, {MemorySwapMax: -1}, {MemorySwapMax: -1}}
	if c, _, err := OpenCgroups(s); err != nil || c == nil {
		t.Errorf("OpenCgroups with Require and no limit: %v", err)
	}
}
