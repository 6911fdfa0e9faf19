//go:build linux

package runner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// procStat is the part of /proc/PID/stat that runner uses.
type procStat struct {
	pid, ppid, pgid, sid int
	state                byte
	// CPU in clock ticks: own user and system time, and that of the
	// children this process has waited for.
	utime, stime, cutime, cstime uint64
	start                        uint64 // starttime: ticks after boot; tells a reused pid apart
}

// cpuTicks is the CPU of the process and of its waited-for children.
func (s procStat) cpuTicks() uint64 { return s.utime + s.stime + s.cutime + s.cstime }

var errBadStat = errors.New("malformed /proc/PID/stat")

// parseStat parses the contents of /proc/PID/stat. The second field, comm, is
// in parentheses and may itself contain spaces and ')', so the fields after
// it are parsed from the last ')'.
func parseStat(b []byte) (procStat, error) {
	var s procStat
	open := -1
	for i, c := range b {
		if c == '(' {
			open = i
			break
		}
	}
	end := -1
	for i := len(b) - 1; i > open; i-- {
		if b[i] == ')' {
			end = i
			break
		}
	}
	if open < 1 || end < 0 {
		return s, errBadStat
	}
	pid, err := strconv.Atoi(string(trimSpace(b[:open])))
	if err != nil {
		return s, errBadStat
	}
	s.pid = pid
	// Fields after comm, numbered as in proc(5): field 3 is rest[0].
	var rest [20][]byte
	n := 0
	for i := end + 1; i < len(b) && n < len(rest); {
		for i < len(b) && isSpace(b[i]) {
			i++
		}
		j := i
		for j < len(b) && !isSpace(b[j]) {
			j++
		}
		if j > i {
			rest[n] = b[i:j]
			n++
		}
		i = j
	}
	if n < len(rest) || len(rest[0]) != 1 {
		return s, errBadStat
	}
	s.state = rest[0][0]
	ints := []struct {
		dst   *int
		field int
	}{{&s.ppid, 4}, {&s.pgid, 5}, {&s.sid, 6}}
	for _, f := range ints {
		v, err := strconv.Atoi(string(rest[f.field-3]))
		if err != nil {
			return s, errBadStat
		}
		*f.dst = v
	}
	uints := []struct {
		dst   *uint64
		field int
	}{{&s.utime, 14}, {&s.stime, 15}, {&s.cutime, 16}, {&s.cstime, 17}, {&s.start, 22}}
	for _, f := range uints {
		field := rest[f.field-3]
		// cutime and cstime are printed as signed longs; never negative in
		// practice, but do not fail on it.
		if len(field) > 0 && field[0] == '-' {
			if _, err := strconv.ParseInt(string(field), 10, 64); err != nil {
				return s, errBadStat
			}
			*f.dst = 0
			continue
		}
		v, err := strconv.ParseUint(string(field), 10, 64)
		if err != nil {
			return s, errBadStat
		}
		*f.dst = v
	}
	return s, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' }

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// errGone means the process no longer exists (or has been reaped).
var errGone = errors.New("process gone")

// readStat reads and parses /proc/PID/stat into buf's storage. It returns
// errGone if the process does not exist.
func readStat(pid int, buf []byte) (procStat, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	b, err := readProc(path, buf, false)
	if err != nil {
		return procStat{}, err
	}
	s, err := parseStat(b)
	if err != nil {
		return procStat{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// readProc reads a /proc file into buf's storage: all of it if grow (buf
// grows as it must), else as much as fits in len(buf). It returns errGone
// if the file's process or thread does not exist.
func readProc(path string, buf []byte, grow bool) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		if err == syscall.ENOENT || err == syscall.ESRCH {
			return buf, errGone
		}
		return buf, fmt.Errorf("open %s: %w", path, err)
	}
	defer syscall.Close(fd)
	if !grow {
		buf = buf[:0:len(buf)]
	}
	b := buf[:0]
	for {
		if len(b) == cap(b) {
			if !grow {
				return b, nil
			}
			b = append(b, 0)[:len(b)]
		}
		m, err := syscall.Read(fd, b[len(b):cap(b)])
		if err == syscall.EINTR {
			continue
		}
		if err == syscall.ESRCH {
			return b, errGone
		}
		if err != nil {
			return b, fmt.Errorf("read %s: %w", path, err)
		}
		if m == 0 {
			return b, nil
		}
		b = b[:len(b)+m]
	}
}

// statBufSize bounds /proc/PID/stat: 52 numeric fields and a comm of at most
// 64 bytes fit easily.
const statBufSize = 2048

// scanProcs reads the stat of every process in /proc. Processes that vanish
// while it runs are skipped.
func scanProcs() (map[int]procStat, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("runner: scan /proc: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("runner: scan /proc: %w", err)
	}
	buf := make([]byte, statBufSize)
	procs := make(map[int]procStat, len(names))
	for _, name := range names {
		if name == "" || name[0] < '1' || name[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		s, err := readStat(pid, buf)
		if errors.Is(err, errGone) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("runner: scan /proc: %w", err)
		}
		procs[pid] = s
	}
	return procs, nil
}

// scanTree reads the stat of every descendant of root (root left out):
// the processes /proc/PID/task/TID/children lists for root and, in turn,
// for each process found. That is a few reads per process of the tree,
// where scanProcs reads every process of the host; the supervisor walks
// only the agent's tree, so it needs no more. Processes that vanish while
// it runs are left out, and like scanProcs it sees the tree as it is at
// each read. Only where childrenFiles holds.
func scanTree(root int) (map[int]procStat, error) {
	buf, list := make([]byte, statBufSize), make([]byte, 0, 512)
	queue, list, err := childrenOf(root, list, nil)
	if err != nil && !errors.Is(err, errGone) {
		return nil, fmt.Errorf("runner: scan the tree of %d: %w", root, err)
	}
	procs := make(map[int]procStat, len(queue))
	for i := 0; i < len(queue); i++ {
		pid := queue[i]
		if _, seen := procs[pid]; seen {
			continue
		}
		s, err := readStat(pid, buf)
		if errors.Is(err, errGone) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("runner: scan the tree of %d: %w", root, err)
		}
		procs[pid] = s
		if queue, list, err = childrenOf(pid, list, queue); err != nil && !errors.Is(err, errGone) {
			return nil, fmt.Errorf("runner: scan the tree of %d: %w", root, err)
		}
	}
	return procs, nil
}

// childrenFiles reports whether the kernel lists each task's children
// (/proc/PID/task/TID/children: CONFIG_PROC_CHILDREN, Linux 3.5 on).
var childrenFiles = sync.OnceValue(func() bool {
	pid := strconv.Itoa(os.Getpid())
	_, err := os.Stat("/proc/" + pid + "/task/" + pid + "/children")
	return err == nil
})

// childrenOf appends the children of every thread of pid to out, reading
// with buf (returned, grown if it had to be). errGone: pid went away.
func childrenOf(pid int, buf []byte, out []int) ([]int, []byte, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	d, err := os.Open(dir)
	if err != nil {
		return out, buf, errGone
	}
	tids, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return out, buf, errGone
	}
	for _, tid := range tids {
		b, err := readProc(dir+tid+"/children", buf, true)
		buf = b[:0]
		if errors.Is(err, errGone) {
			continue // the thread ended
		}
		if err != nil {
			return out, buf, err
		}
		for f := trimSpace(b); len(f) > 0; f = trimSpace(f) {
			end := 0
			for end < len(f) && !isSpace(f[end]) {
				end++
			}
			child, err := strconv.Atoi(string(f[:end]))
			if err != nil {
				return out, buf, fmt.Errorf("%s: %q is not a pid", dir+tid+"/children", f[:end])
			}
			out = append(out, child)
			f = f[end:]
		}
	}
	return out, buf, nil
}

// clockTicks is the unit of the CPU fields of /proc/PID/stat (sysconf
// _SC_CLK_TCK), read from the auxiliary vector (AT_CLKTCK); 100 if unknown.
var clockTicks = sync.OnceValue(func() uint64 {
	const atClkTck = 17
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return 100
	}
	word := int(unsafe.Sizeof(uintptr(0)))
	get := func(p []byte) uint64 {
		if word == 8 {
			return binary.NativeEndian.Uint64(p)
		}
		return uint64(binary.NativeEndian.Uint32(p))
	}
	for i := 0; i+2*word <= len(b); i += 2 * word {
		tag, val := get(b[i:]), get(b[i+word:])
		if tag == atClkTck && val > 0 {
			return val
		}
		if tag == 0 {
			break
		}
	}
	return 100
})

func ticksToDuration(t uint64) time.Duration {
	hz := clockTicks()
	return time.Duration(t/hz)*time.Second + time.Duration(t%hz)*time.Second/time.Duration(hz)
}

func rusageCPU(ru *syscall.Rusage) time.Duration {
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
