//go:build linux

package runner

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// drainTimeout bounds how long output is still read after the whole tree is
// gone. Once every process of the tree has exited, the pipes reach EOF at
// once; the timeout only matters if a process outside the tree (one that
// escaped it, see EnableSubreaper) still holds them open.
const drainTimeout = time.Second

// Process is a started job: its main process and all of its descendants.
// Its methods are safe for concurrent use.
type Process struct {
	pid     int // main pid; also the job's process group id
	seq     uint64
	started time.Time
	done    chan struct{}

	// Output copying; set up by Start, torn down by finalize.
	stdout, stderr   *os.File // read ends of the pipes
	outDone, errDone chan struct{}
	log              *boundedLog
	errTail, outTail *tailBuffer
	cg               *Cgroup // the run's cgroup, nil without

	// Guarded by reg.mu.
	mainReaped bool
	status     syscall.WaitStatus
	lost       error // why the outcome is incomplete, if it is
	mainCPU    time.Duration
	orphanCPU  time.Duration
	members    []member // live tree at the last /proc walk, parents first
	pgidInUse  bool     // a member is still in the job's process group
	deadline   time.Time
	killAll    bool
	finished   bool
	cpuMax     time.Duration // largest value CPU has returned
	finalCPU   time.Duration

	result Result // written by finalize before done is closed
}

// member is a live process of a job's tree.
type member struct {
	pid   int
	start uint64 // starttime, to tell a reused pid apart
}

// Start runs spec as a child of the calling process, in a process group of
// its own (Setpgid), with stdin from /dev/null and stdout and stderr copied
// to opt.LogPath (bounded, see [Options]) and the tails of both kept in
// memory.
//
// The environment is exactly opt.Env with spec.Env laid over it (nothing of
// the calling process's own environment is inherited), and Argv[0], unless
// it contains a '/', is looked up in that environment's PATH (only absolute
// directories of it are searched). A relative Dir is relative to the
// agent's working directory; a relative Argv[0] that contains a '/' is
// relative to Dir (the chdir happens before the exec). With opt.User the
// child takes that user's groups and user ID before the exec.
//
// Start does not wait: use [Process.Done].
func Start(spec Spec, opt Options) (p *Process, err error) {
	if cg := opt.Cgroup; cg != nil {
		defer func() {
			if err != nil {
				cg.destroy(time.Second) // nothing started in it
			}
		}()
	}
	if err := validateSpec(spec); err != nil {
		return nil, err
	}
	opt = opt.withDefaults()
	env := mergeEnv(opt.Env, spec.Env)
	path, err := lookPath(spec.Argv[0], env)
	if err != nil {
		return nil, err
	}

	var closers []*os.File
	closeAll := func() {
		for _, f := range closers {
			f.Close()
		}
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, fmt.Errorf("runner: start: %w", err)
	}
	closers = append(closers, devnull)
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("runner: start: stdout pipe: %w", err)
	}
	closers = append(closers, outR, outW)
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("runner: start: stderr pipe: %w", err)
	}
	closers = append(closers, errR, errW)
	log, err := openBoundedLog(opt.LogPath, opt.MaxLogBytes)
	if err != nil {
		closeAll()
		return nil, err
	}

	p = &Process{
		cg:      opt.Cgroup,
		done:    make(chan struct{}),
		stdout:  outR,
		stderr:  errR,
		outDone: make(chan struct{}),
		errDone: make(chan struct{}),
		log:     log,
		errTail: &tailBuffer{n: opt.TailBytes},
		outTail: &tailBuffer{n: opt.TailBytes},
	}
	attr := &syscall.ProcAttr{
		Dir:   spec.Dir,
		Env:   env,
		Files: []uintptr{devnull.Fd(), outW.Fd(), errW.Fd()},
		// Pdeathsig: a job never outlives a worker agent that dies (even by
		// SIGKILL); the lease then expires and the job runs elsewhere.
		// Pdeathsig holds with a Credential: a change of credentials
		// clears it, and Go sets it after the change. The chdir to Dir
		// also comes after it: the user must be able to enter Dir.
		Sys: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: credential(opt.User)},
	}
	if p.cg != nil {
		// clone3 with CLONE_INTO_CGROUP: the child is in the run's
		// cgroup from its first instruction.
		attr.Sys.UseCgroupFD, attr.Sys.CgroupFD = true, p.cg.fd
	}

	// Fork under reg.mu: the supervisor must not see the new child (and
	// take it for an orphan) before it is registered.
	reg.mu.Lock()
	reg.ensureRunningLocked()
	p.started = time.Now()
	pid, err := syscall.ForkExec(path, spec.Argv, attr)
	if p.cg != nil {
		p.cg.closeFD()
	}
	if err != nil {
		reg.kickLocked() // lets an idle supervisor stop
		reg.mu.Unlock()
		closeAll()
		log.Close()
		return nil, fmt.Errorf("runner: start %q: %w", spec.Argv[0], err)
	}
	p.pid = pid
	reg.seq++
	p.seq = reg.seq
	reg.active[p] = struct{}{}
	reg.mains[pid] = p
	reg.kickLocked() // the polling interval depends on the number of jobs
	reg.mu.Unlock()

	devnull.Close()
	outW.Close()
	errW.Close()
	go copyOutput(outR, p.outDone, p.log, p.outTail)
	go copyOutput(errR, p.errDone, p.log, p.errTail)
	return p, nil
}

// PID returns the pid of the job's main process (also its process group id).
func (p *Process) PID() int { return p.pid }

// Done is closed when the job's main process has exited AND every descendant
// is gone (exited or killed, and reaped), and its output has been copied.
func (p *Process) Done() <-chan struct{} { return p.done }

// Result returns the job's outcome. It is valid once Done is closed; before
// that it returns the zero Result.
func (p *Process) Result() Result {
	select {
	case <-p.done:
		return p.result
	default:
		return Result{}
	}
}

// CPU returns the CPU time (user+system) used so far by the job: with a
// cgroup, its cgroup's usage_usec (every process that ran in it);
// otherwise that of its whole process tree: every live descendant found by walking /proc (including
// orphans reparented to this subreaper), with the CPU of the children each
// has waited for, plus the rusage of the tree's processes already reaped by
// this package. It is measured from the OS only, has the granularity of the
// clock tick (10 ms usually) while the job runs, and never decreases from one
// call to the next. Once the job is done it returns Result.CPU (or a larger
// value already returned).
func (p *Process) CPU() (time.Duration, error) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if !p.finished {
		if err := reg.pollLocked(time.Now()); err != nil {
			return p.cpuMax, fmt.Errorf("runner: cpu of pid %d: %w", p.pid, err)
		}
	}
	if p.finished {
		return max(p.cpuMax, p.finalCPU), nil
	}
	return reg.sampleCPULocked(p), nil
}

// Terminate sends SIGTERM (followed by SIGCONT, so that stopped processes
// see it) to the whole tree: the job's process group, every descendant
// found in /proc and every process of its cgroup. Everything still alive
// when grace has passed gets SIGKILL (with a cgroup, cgroup.kill).
// If the main process exits within the grace, descendants that remain are
// also given until the end of the grace before SIGKILL. Terminate does not
// block; it is safe to call more than once (the earliest deadline wins) and
// after the job is done.
func (p *Process) Terminate(grace time.Duration) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if p.finished {
		return
	}
	now := time.Now()
	if d := now.Add(grace); p.deadline.IsZero() || d.Before(p.deadline) {
		p.deadline = d
	}
	reg.pollLocked(now) // refresh the tree; sends SIGKILL if grace <= 0
	if !p.finished && !p.killAll {
		reg.signalLocked(p, syscall.SIGTERM)
		reg.signalLocked(p, syscall.SIGCONT)
	}
	reg.kickLocked()
}

// Kill sends SIGKILL to the whole tree at once (the process group, every
// descendant found in /proc and, through cgroup.kill, every process of its
// cgroup), and keeps doing so until the tree is gone and the cgroup empty. It
// does not block; it is safe to call more than once.
func (p *Process) Kill() {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if p.finished {
		return
	}
	p.killAll = true
	reg.pollLocked(time.Now()) // refreshes the tree and sends SIGKILL
	reg.kickLocked()
}

// finalize runs once the tree is gone: it waits for the output copiers,
// closes the pipes and the log, and closes done.
func (p *Process) finalize(res Result) {
	timer := time.NewTimer(drainTimeout)
	defer timer.Stop()
	for _, ch := range []chan struct{}{p.outDone, p.errDone} {
		select {
		case <-ch:
		case <-timer.C:
			// Something outside the tree holds the pipes: stop reading.
			past := time.Unix(1, 0)
			p.stdout.SetReadDeadline(past)
			p.stderr.SetReadDeadline(past)
			<-ch
		}
	}
	p.stdout.Close()
	p.stderr.Close()
	if err := p.log.Close(); err != nil && res.Err == nil {
		res.Err = err
	}
	if p.cg != nil {
		// Empty (the supervisor saw it so): the kernel may still hold it
		// for a moment.
		if err := p.cg.remove(time.Second); err != nil && res.Err == nil {
			res.Err = fmt.Errorf("runner: %w", err)
		}
	}
	res.StderrTail, res.StdoutTail = p.errTail.String(), p.outTail.String()
	p.result = res
	close(p.done)
}

// credential is the child's credentials for u (nil: the caller's own).
func credential(u *Identity) *syscall.Credential {
	if u == nil {
		return nil
	}
	// An empty Groups clears the supplementary groups (setgroups with
	// none): the job keeps none of the agent's.
	return &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
}

// mergeEnv returns base with the variables of over replacing or added to it.
// Added variables come last, sorted by name.
func mergeEnv(base []string, over map[string]string) []string {
	out := make([]string, 0, len(base)+len(over))
	seen := make(map[string]bool, len(over))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		v, ok := over[k]
		if !ok {
			out = append(out, kv)
			continue
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, k+"="+v)
		}
	}
	keys := make([]string, 0, len(over))
	for k := range over {
		if !seen[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, k+"="+over[k])
	}
	return out
}

// lookPath finds file in the PATH of env, unless file contains a '/'.
func lookPath(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	var path string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, file)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("runner: start %q: not found in PATH: %w", file, exec.ErrNotFound)
}

var errStatusLost = errors.New("runner: the job's exit status was lost: its main process was reaped outside this package")
