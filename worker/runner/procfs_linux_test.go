//go:build linux

package runner

import (
	"maps"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	const tail = " 1 2 3 4 5 6 7 8 9 10 11 12 13 -1 15 16 17 18 19 20 21 22 23"
	for _, tc := range []struct {
		line string
		want procStat
	}{
		{
			"42 (sh) S 7 42 40 0 -1 4194304 10 0 0 0 150 25 300 45 20 0 1 0 98765 1000 100\n",
			procStat{pid: 42, ppid: 7, pgid: 42, sid: 40, state: 'S', utime: 150, stime: 25, cutime: 300, cstime: 45, start: 98765},
		},
		{
			// comm with spaces, parentheses and a ") R 1 2" look-alike.
			"7 (a) R 1 2 (x y)) Z 3 4 5 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 55 0 0",
			procStat{pid: 7, ppid: 3, pgid: 4, sid: 5, state: 'Z', utime: 1, stime: 2, start: 55},
		},
		{
			"9 ()) D 1 1 1" + tail,
			procStat{pid: 9, ppid: 1, pgid: 1, sid: 1, state: 'D', utime: 8, stime: 9, cutime: 10, cstime: 11, start: 16},
		},
	} {
		got, err := parseStat([]byte(tc.line))
		if err != nil || got != tc.want {
			t.Errorf("parseStat(%q) = %+v, %v; want %+v", tc.line, got, err, tc.want)
		}
	}
	for _, bad := range []string{
		"",
		"42",
		"(sh) S 1 1 1" + tail,
		"x (sh) S 1 1 1" + tail,
		"42 (sh S 1 1 1" + tail,
		"42 (sh) S 1 1",
		"42 (sh) SS 1 1 1" + tail,
		"42 (sh) S x 1 1" + tail,
		"42 (sh) S 1 1 1 1 2 3 4 5 6 7 8 9 -10 11 12",
	} {
		if got, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) = %+v, want an error", bad, got)
		}
	}
}

func TestReadStatSelf(t *testing.T) {
	s, err := readStat(os.Getpid(), make([]byte, statBufSize))
	if err != nil {
		t.Fatal(err)
	}
	if s.pid != os.Getpid() || s.ppid != os.Getppid() || s.pgid != syscall.Getpgrp() || s.start == 0 {
		t.Errorf("readStat(self) = %+v", s)
	}
	if _, err := readStat(1<<30, make([]byte, statBufSize)); err != errGone {
		t.Errorf("readStat(nonexistent) error = %v, want errGone", err)
	}
}

func TestClockTicks(t *testing.T) {
	// USER_HZ is 100 on every Linux architecture Go supports.
	if got := clockTicks(); got != 100 {
		t.Errorf("clockTicks() = %d, want 100", got)
	}
	if got := ticksToDuration(12345); got != 123450*time.Millisecond {
		t.Errorf("ticksToDuration(12345) = %v", got)
	}
}

// TestScanTree: the walk of a tree by its children files finds exactly
// the processes a walk of all /proc finds below the same root, with the
// same stats: here a shell of this test with two children of its own.
func TestScanTree(t *testing.T) {
	if !childrenFiles() {
		t.Skip("the kernel has no /proc/PID/task/TID/children")
	}
	cmd := sleepers()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer stop(cmd)
	self := os.Getpid()
	want := waitTree(t, cmd.Process.Pid, 3, 0)
	got, err := scanTree(self)
	if err != nil {
		t.Fatal(err)
	}
	all := treeOf(t, self)
	delete(all, self)
	if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(all))) {
		t.Fatalf("scanTree: %v, /proc: %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(all)))
	}
	for pid, s := range want {
		g := got[pid]
		if g.pid != s.pid || g.ppid != s.ppid || g.pgid != s.pgid || g.start != s.start {
			t.Errorf("pid %d: scanTree %+v, /proc %+v", pid, g, s)
		}
	}
	if len(want) != 3 {
		t.Fatalf("tree of the shell: %v", want)
	}
	// A root that is gone has no tree.
	if got, err := scanTree(1 << 30); err != nil || len(got) != 0 {
		t.Fatalf("scanTree(gone) = %v, %v", got, err)
	}
}

// sleepers is a shell with two children, in a process group of its own.
func sleepers() *exec.Cmd {
	cmd := exec.Command("sh", "-c", "sleep 30 & sleep 30 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

func stop(cmd *exec.Cmd) {
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()
}

// BenchmarkScanTree walks this process's tree (a shell and two children);
// BenchmarkScanProcs walks all of /proc, as where the kernel has no
// children files.
func BenchmarkScanTree(b *testing.B) {
	cmd := sleepers()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer stop(cmd)
	time.Sleep(100 * time.Millisecond)
	for b.Loop() {
		if _, err := scanTree(os.Getpid()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkScanProcs(b *testing.B) {
	for b.Loop() {
		if _, err := scanProcs(); err != nil {
			b.Fatal(err)
		}
	}
}
