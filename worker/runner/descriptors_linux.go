package runner

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// A job inherits only its stdin, stdout and stderr. Go opens every file
// of its own close-on-exec, but a descriptor the process was started
// with (a shell's fd 10, a supervisor's socket) is not, and a job would
// hold it: every descriptor above 2 that the process holds when this
// package is loaded is marked close-on-exec.
func init() { closeInheritedOnExec() }

// closeInheritedOnExec marks every open descriptor above 2 close-on-exec.
func closeInheritedOnExec() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return // no /proc: nothing to mark by name
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}
