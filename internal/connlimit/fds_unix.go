//go:build unix

package connlimit

import "syscall"

// DescriptorLimit returns the process's limit of open files (0: unknown).
func DescriptorLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return r.Cur
}
