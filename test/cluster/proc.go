package cluster

import (
	"cmp"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/baristahq/barista/internal/proc"
)

// Worker is a barista worker process.
type Worker struct {
	c      *Cluster
	ID     string
	Size   string
	LogDir string
	Args   []string
	// Token, if set, is the worker's token instead of the cluster's.
	Token string
	// Process is the worker's process (LogPath is its log).
	proc.Process
}

// AddWorker creates a worker (not started) that connects to every node.
func (c *Cluster) AddWorker(id, size string) *Worker {
	w := &Worker{c: c, ID: id, Size: size, LogDir: filepath.Join(c.Dir, id+"-jobs")}
	w.LogPath = filepath.Join(c.Dir, id+".log")
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
	if err := w.Process.Start(w.c.command(w.ID, args), false, &w.c.procs); err != nil {
		w.c.T.Fatalf("starting worker %s: %v", w.ID, err)
	}
}

// Kill sends SIGKILL and waits for the exit.
func (w *Worker) Kill() {
	w.Signal(syscall.SIGKILL)
	w.Wait(10 * time.Second)
}
