//go:build !unix

package connlimit

// DescriptorLimit returns the process's limit of open files (0: unknown).
func DescriptorLimit() uint64 { return 0 }
