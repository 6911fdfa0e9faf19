package cluster

import (
	"cmp"
	"os"
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
	// WorkDir holds the worker's runs' own directories (--work-dir).
	WorkDir string
	Args    []string
	// Token, if set, is the worker's token instead of the cluster's.
	Token string
	// TokenFile, if set, is the file the worker reads its token from
	// (--token-file), instead of --token.
	TokenFile string
	// TokenEnv passes the token in $BARISTA_TOKEN instead of --token.
	TokenEnv bool
	// Bin, if set, is the binary the worker runs instead of the
	// cluster's (another build's); a binary other than this module's
	// build is given none of this build's newer flags (--cgroup-parent).
	Bin string
	// Process is the worker's process (LogPath is its log).
	proc.Process
}

// AddWorker creates a worker (not started) that connects to every node.
func (c *Cluster) AddWorker(id, size string) *Worker {
	w := &Worker{c: c, ID: id, Size: size, LogDir: filepath.Join(c.Dir, id+"-jobs"), WorkDir: filepath.Join(c.Dir, id+"-work")}
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
	args := []string{"worker", "--id", w.ID, "--size", w.Size, "--server", servers, "--log-dir", w.LogDir, "--work-dir", w.WorkDir, "--log-level", "debug"}
	bin := cmp.Or(w.Bin, w.c.Bin)
	if p := w.c.cgroupParent(w.ID); p != "" && bin == Binary(w.c.T) {
		args = append(args, "--cgroup-parent", p)
	}
	args = append(args, w.Args...)
	token := cmp.Or(w.Token, w.c.Token)
	switch {
	case w.TokenFile != "":
		args = append(args, "--token-file", w.TokenFile)
	case token != "" && !w.TokenEnv:
		args = append(args, "--token", token)
	}
	cmd := w.c.commandOf(bin, w.ID, args)
	if w.TokenEnv {
		cmd.Env = append(os.Environ(), "BARISTA_TOKEN="+token)
	}
	if err := w.Process.Start(cmd, false, &w.c.procs); err != nil {
		w.c.T.Fatalf("starting worker %s: %v", w.ID, err)
	}
}

// Kill sends SIGKILL and waits for the exit.
func (w *Worker) Kill() {
	w.Signal(syscall.SIGKILL)
	w.Wait(10 * time.Second)
}
