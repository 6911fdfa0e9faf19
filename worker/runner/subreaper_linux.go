//go:build linux

package runner

import (
	"fmt"
	"syscall"
	"unsafe"
)

const (
	prSetChildSubreaper = 36 // PR_SET_CHILD_SUBREAPER, <linux/prctl.h>
	prGetChildSubreaper = 37 // PR_GET_CHILD_SUBREAPER
)

// EnableSubreaper marks the calling process a child subreaper (prctl
// PR_SET_CHILD_SUBREAPER), so orphaned grandchildren of a job are reparented
// to it and can be counted and killed. Call it once at agent start, before
// the first [Start]. The attribute is process-wide and is not inherited by
// children. It returns an error on non-Linux systems or if prctl fails.
func EnableSubreaper() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return fmt.Errorf("runner: prctl(PR_SET_CHILD_SUBREAPER): %w", errno)
	}
	return nil
}

// isSubreaper reports whether the calling process is a child subreaper.
func isSubreaper() (bool, error) {
	var v int32
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prGetChildSubreaper, uintptr(unsafe.Pointer(&v)), 0); errno != 0 {
		return false, fmt.Errorf("runner: prctl(PR_GET_CHILD_SUBREAPER): %w", errno)
	}
	return v != 0, nil
}

const prSetDumpable = 4 // PR_SET_DUMPABLE, <linux/prctl.h>

// MakeUndumpable clears the calling process's dumpable flag (prctl
// PR_SET_DUMPABLE 0): its /proc/PID files become root's, so processes of
// its own user without CAP_SYS_PTRACE (its jobs, when they run as the
// agent's user) can no longer read its environment, memory or open files
// there, nor ptrace it; it also writes no core dump. Its command line
// stays readable by everyone. Jobs are not affected: an exec makes a
// process dumpable again.
func MakeUndumpable() error {
	clockTicks() // from /proc/self/auxv, which becomes root's
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0); errno != 0 {
		return fmt.Errorf("runner: prctl(PR_SET_DUMPABLE): %w", errno)
	}
	return nil
}
