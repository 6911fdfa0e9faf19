// Package proc runs barista's own processes — servers and workers — as
// children of the current one, for barista dev, barista bench and the
// multi-process tests: each appends its output to a log file that names
// every start, dies with its parent, and is known by its PID until it
// exits.
package proc

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is one child process, started any number of times (one at a
// time).
type Process struct {
	// LogPath is the file its output is appended to.
	LogPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// Start runs cmd with its output appended to LogPath, after a line naming
// the start. The child is killed if this process dies (a panic skips
// every cleanup); with ownGroup it gets a process group of its own, so a
// terminal's Ctrl-C reaches only this process, which then stops its
// children in order. set, if not nil, knows the child's PID while it
// runs.
func (p *Process) Start(cmd *exec.Cmd, ownGroup bool, set *Set) error {
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "==== start %s %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(cmd.Args, " "))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: ownGroup}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	exited := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.exited, p.err = cmd, exited, nil
	p.mu.Unlock()
	set.add(cmd)
	go func() {
		err := cmd.Wait()
		logf.Close()
		set.remove(cmd)
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(exited)
	}()
	return nil
}

// PID returns the last started process's PID (0 if none).
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Running reports whether the process is alive.
func (p *Process) Running() bool {
	p.mu.Lock()
	ch := p.exited
	p.mu.Unlock()
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return false
	default:
		return true
	}
}

// Signal sends sig to the process if it runs.
func (p *Process) Signal(sig syscall.Signal) {
	if pid := p.PID(); pid != 0 && p.Running() {
		syscall.Kill(pid, sig)
	}
}

// Wait waits up to timeout for the process to exit; true if it has (or
// never started).
func (p *Process) Wait(timeout time.Duration) bool {
	p.mu.Lock()
	ch := p.exited
	p.mu.Unlock()
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	case <-time.After(timeout):
		return false
	}
}

// Stop sends SIGTERM and waits up to grace, then kills; it reports
// whether the process stopped within grace.
func (p *Process) Stop(grace time.Duration) bool {
	p.Signal(syscall.SIGTERM)
	if p.Wait(grace) {
		return true
	}
	p.Signal(syscall.SIGKILL)
	p.Wait(10 * time.Second)
	return false
}

// ExitErr returns the last process's exit error.
func (p *Process) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Log returns the whole log file.
func (p *Process) Log() string {
	b, _ := os.ReadFile(p.LogPath)
	return string(b)
}

// Set knows the PIDs of the running children started with it, so that
// whoever started them can kill every one, by PID, whatever happened.
type Set struct {
	mu    sync.Mutex
	procs map[int]*exec.Cmd
}

func (s *Set) add(cmd *exec.Cmd) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.procs == nil {
		s.procs = map[int]*exec.Cmd{}
	}
	s.procs[cmd.Process.Pid] = cmd
}

func (s *Set) remove(cmd *exec.Cmd) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.procs, cmd.Process.Pid)
}

// KillAll sends SIGKILL to every running child of the set (after SIGCONT,
// so a stopped one dies too).
func (s *Set) KillAll() {
	s.mu.Lock()
	procs := s.procs
	s.procs = nil
	s.mu.Unlock()
	for pid := range procs {
		syscall.Kill(pid, syscall.SIGCONT)
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// Tail returns the last lines of a file (or the error reading it).
func Tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// FreeAddrs returns n distinct 127.0.0.1 addresses that were free a
// moment ago: every listener stays open until all are picked, so the
// kernel cannot hand out one port twice.
func FreeAddrs(n int) ([]string, error) {
	addrs := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}
