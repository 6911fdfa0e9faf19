//go:build linux

// Package cgrouptest gives tests a cgroup v2 hierarchy the worker cannot
// write: a read-only mount, and the mountinfo and /proc/self/cgroup that
// show only it.
package cgrouptest

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// ReadOnly mounts a cgroup2 file system read-only in a temporary
// directory (unmounted when the test ends) and returns the paths of a
// mountinfo and a /proc/self/cgroup that show only it. It skips the test
// where mounting is not allowed.
func ReadOnly(t testing.TB) (mountinfo, procCgroup string) {
	t.Helper()
	mnt := t.TempDir()
	if err := syscall.Mount("none", mnt, "cgroup2", syscall.MS_RDONLY, ""); err != nil {
		t.Skipf("cannot mount a read-only cgroup2 file system here: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	dir := t.TempDir()
	mountinfo, procCgroup = filepath.Join(dir, "mountinfo"), filepath.Join(dir, "cgroup")
	if err := os.WriteFile(mountinfo, fmt.Appendf(nil, "99 30 0:37 / %s ro,relatime - cgroup2 cgroup2 ro\n", mnt), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(procCgroup, []byte("0::/\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return mountinfo, procCgroup
}
