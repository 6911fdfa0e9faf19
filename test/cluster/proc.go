package cluster

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Worker is a barista worker process.
type Worker struct {
	c       *Cluster
	ID      string
	Size    string
	LogPath string
	LogDir  string
	Args    []string
	// Token, if set, is the worker's token instead of the cluster's.
	Token string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// AddWorker creates a worker (not started) that connects to every node.
func (c *Cluster) AddWorker(id, size string) *Worker {
	w := &Worker{c: c, ID: id, Size: size, LogPath: filepath.Join(c.Dir, id+".log"), LogDir: filepath.Join(c.Dir, id+"-jobs")}
	c.Workers = append(c.Workers, w)
	return w
}

// Servers returns every node's gRPC address, comma-separated.
func (c *Cluster) Servers() string {
	var addrs []string
	for _, n := range c.Nodes {
		addrs = append(addrs, n.GRPCAddr)
	}
	return strings.Join(addrs, ",")
}

// Start launches the worker against servers (all nodes if empty).
func (w *Worker) Start(servers string) {
	w.c.T.Helper()
	if servers == "" {
		servers = w.c.Servers()
	}
	args := append([]string{"worker", "--id", w.ID, "--size", w.Size, "--server", servers, "--log-dir", w.LogDir, "--log-level", "debug"}, w.Args...)
	if token := cmp.Or(w.Token, w.c.Token); token != "" {
		args = append(args, "--token", token)
	}
	logf, err := os.OpenFile(w.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		w.c.T.Fatal(err)
	}
	fmt.Fprintf(logf, "==== start %s %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(args, " "))
	cmd := w.c.command(w.ID, args)
	cmd.Stdout, cmd.Stderr = logf, logf
	// If the test process dies (a panic skips every cleanup), so do its
	// children.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		w.c.T.Fatalf("starting worker %s: %v", w.ID, err)
	}
	exited := make(chan struct{})
	w.mu.Lock()
	w.cmd, w.exited = cmd, exited
	w.mu.Unlock()
	w.c.track(cmd)
	go func() {
		err := cmd.Wait()
		logf.Close()
		w.c.untrack(cmd)
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
		close(exited)
	}()
}

// PID returns the process's PID.
func (w *Worker) PID() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd == nil || w.cmd.Process == nil {
		return 0
	}
	return w.cmd.Process.Pid
}

// Signal sends a signal to the worker process.
func (w *Worker) Signal(sig syscall.Signal) {
	if pid := w.PID(); pid != 0 {
		syscall.Kill(pid, sig)
	}
}

// Kill sends SIGKILL and waits for the exit.
func (w *Worker) Kill() {
	w.Signal(syscall.SIGKILL)
	w.Wait(10 * time.Second)
}

// Wait waits for the process to exit.
func (w *Worker) Wait(timeout time.Duration) bool {
	w.mu.Lock()
	ch := w.exited
	w.mu.Unlock()
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

// Log returns the worker's log.
func (w *Worker) Log() string {
	b, _ := os.ReadFile(w.LogPath)
	return string(b)
}

func (c *Cluster) track(cmd *exec.Cmd) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.procs[cmd.Process.Pid] = cmd
}

func (c *Cluster) untrack(cmd *exec.Cmd) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.procs, cmd.Process.Pid)
}
