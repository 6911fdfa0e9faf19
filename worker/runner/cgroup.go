package runner

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrNoCgroup marks a host that gives the worker no cgroup v2 hierarchy
// it can write: no cgroup2 file system mounted (a host whose controllers
// are all on cgroup v1), this process outside the mounted hierarchy, a
// hierarchy mounted read-only or not delegated to this process's user;
// and every host but Linux.
var ErrNoCgroup = errors.New("no writable cgroup v2 hierarchy")

// CgroupConfig says where a worker makes its runs' cgroups.
type CgroupConfig struct {
	// Parent is the cgroup the runs' cgroups are made in: an absolute
	// path in a mounted cgroup v2 file system (/sys/fs/cgroup/barista),
	// or a path relative to this process's own cgroup (the cgroup that
	// systemd delegates to a unit with Delegate=yes, or a container's
	// cgroup namespace). It is made if missing.
	Parent string
	// Controllers are those the runs' limits need (memory, pids, cpu):
	// OpenCgroups enables what it can of them for the runs' cgroups and
	// says why it cannot enable the others.
	Controllers []string
	// Mountinfo and ProcCgroup replace /proc/self/mountinfo and
	// /proc/self/cgroup (tests point the worker at another hierarchy).
	Mountinfo, ProcCgroup string
}

// CPUSource says where a run's CPU time was measured.
type CPUSource uint8

const (
	// CPUFromProc: the process tree's times in /proc while it runs and the
	// rusage of the reaped processes at the end (see the package doc).
	CPUFromProc CPUSource = iota + 1
	// CPUFromCgroup: usage_usec of the run's cgroup (cpu.stat), which
	// counts every process that ever ran in it.
	CPUFromCgroup
)

func (s CPUSource) String() string {
	switch s {
	case CPUFromProc:
		return "proc"
	case CPUFromCgroup:
		return "cgroup"
	}
	return ""
}

// Limits are what a run's cgroup is limited to. A zero field sets no
// limit ("max"), but for MemorySwapMax, where 0 means no swap at all and
// a negative value no limit.
type Limits struct {
	MemoryMax     int64 // memory.max, bytes
	MemorySwapMax int64 // memory.swap.max, bytes (< 0: max)
	PidsMax       int64 // pids.max, tasks (processes and threads)
	CPUMax        int64 // cpu.max, in thousandths of a CPU (1000: one CPU)
}

// The controllers the limits need.
const (
	ctrlMemory = "memory"
	ctrlPids   = "pids"
	ctrlCPU    = "cpu"
)

// Controllers returns the controllers l needs, in a fixed order.
func (l Limits) Controllers() []string {
	var c []string
	if l.MemoryMax > 0 || l.MemorySwapMax >= 0 {
		c = append(c, ctrlMemory)
	}
	if l.PidsMax > 0 {
		c = append(c, ctrlPids)
	}
	if l.CPUMax > 0 {
		c = append(c, ctrlCPU)
	}
	return c
}

// cpuPeriod is the period of cpu.max, µs: the kernel's default.
const cpuPeriod = 100000

// files are the interface files to write and their values, in order:
// memory.swap.max after memory.max (some kernels check one against the
// other), and memory.oom.group so that the memory limit ends the whole
// run rather than one process of it. Only the files of the controllers
// in have are listed.
func (l Limits) files(have func(string) bool) [][2]string {
	var out [][2]string
	if have(ctrlMemory) {
		if l.MemoryMax > 0 {
			out = append(out, [2]string{"memory.max", strconv.FormatInt(l.MemoryMax, 10)})
		}
		if l.MemorySwapMax >= 0 {
			out = append(out, [2]string{"memory.swap.max", strconv.FormatInt(l.MemorySwapMax, 10)})
		}
		out = append(out, [2]string{"memory.oom.group", "1"})
	}
	if have(ctrlPids) && l.PidsMax > 0 {
		out = append(out, [2]string{"pids.max", strconv.FormatInt(l.PidsMax, 10)})
	}
	if have(ctrlCPU) && l.CPUMax > 0 {
		out = append(out, [2]string{"cpu.max", fmt.Sprintf("%d %d", l.CPUMax*cpuPeriod/1000, cpuPeriod)})
	}
	return out
}

// parseMountinfo returns the mount points of the cgroup v2 file systems
// in a /proc/PID/mountinfo, each with the path of the hierarchy it shows
// (its root field, "/" but for a bind mount of a sub-tree).
func parseMountinfo(b []byte) (mounts [][2]string) {
	for line := range strings.SplitSeq(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		after := strings.Fields(post)
		f := strings.Fields(pre)
		if len(after) < 1 || after[0] != "cgroup2" || len(f) < 5 {
			continue
		}
		mounts = append(mounts, [2]string{unescapeMount(f[4]), unescapeMount(f[3])})
	}
	return mounts
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parseProcCgroup returns the cgroup v2 path ("0::PATH") of a
// /proc/PID/cgroup, "" if it has none.
func parseProcCgroup(b []byte) string {
	for line := range strings.SplitSeq(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p
		}
	}
	return ""
}

// cgroupDir is the directory of cgroup path (as /proc/PID/cgroup names
// it) under a mount of the hierarchy's root path root at mountPoint, or
// false if the mount does not show it.
func cgroupDir(mountPoint, root, path string) (string, bool) {
	if root == "/" {
		return filepath.Clean(mountPoint + "/" + path), true
	}
	rel, ok := strings.CutPrefix(path, root)
	if !ok || (rel != "" && rel[0] != '/') {
		return "", false
	}
	return filepath.Clean(mountPoint + "/" + rel), true
}

// parseKeyed reads the value of key in a flat keyed file ("key value"
// lines: cpu.stat, cgroup.events, memory.events).
func parseKeyed(b []byte, key string) (int64, bool) {
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// releaseBefore reports whether a kernel release ("6.8.0-45-generic") is
// older than major.minor; false when it cannot be read.
func releaseBefore(rel string, major, minor int) bool {
	parts := strings.SplitN(rel, ".", 3)
	if len(parts) < 2 {
		return false
	}
	maj, err1 := strconv.Atoi(parts[0])
	num := parts[1]
	for i, c := range num {
		if c < '0' || c > '9' {
			num = num[:i]
			break
		}
	}
	mnr, err2 := strconv.Atoi(num)
	if err1 != nil || err2 != nil {
		return false
	}
	return maj < major || (maj == major && mnr < minor)
}
