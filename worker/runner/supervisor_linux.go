//go:build linux

package runner

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

const (
	// While every job simply runs, the supervisor needs no polling: exits of
	// the agent's children (main processes and orphans) wake it at once
	// through SIGCHLD, and Kill and Terminate walk /proc themselves. It
	// still walks /proc every trackInterval while several Processes run,
	// to keep the descendant sets used to attribute orphans to them, and
	// every idleInterval otherwise, as a safety net. A walk reads the
	// agent's tree only (scanTree), a few reads per process in it; where
	// the kernel cannot list children it reads every process of the
	// host, about 10 µs each.
	trackInterval = 200 * time.Millisecond
	idleInterval  = 2 * time.Second
	// fastInterval is the polling period while a job is being killed or its
	// main process has exited and its descendants are going away (their
	// exits need not signal the agent).
	fastInterval = 10 * time.Millisecond
	// maxScanFailures is how many consecutive failed /proc walks make the
	// supervisor give up on a job whose main process has exited.
	maxScanFailures = 100
)

// registry is the process-wide reaper and tracker of jobs. One supervisor
// goroutine (loop) runs while at least one Process is not done.
type registry struct {
	mu           sync.Mutex
	self         int                   // this process's pid
	active       map[*Process]struct{} // Processes not done yet
	mains        map[int]*Process      // main pids not reaped yet
	tracked      map[int]trackedPid    // tree members at the last /proc walk
	seq          uint64                // start order of Processes
	running      bool                  // the supervisor goroutine runs
	kick         chan struct{}         // wakes the supervisor
	scanFailures int
}

type trackedPid struct {
	owner *Process
	start uint64
}

var reg = &registry{
	self:    os.Getpid(),
	active:  make(map[*Process]struct{}),
	mains:   make(map[int]*Process),
	tracked: make(map[int]trackedPid),
	kick:    make(chan struct{}, 1),
}

// ensureRunningLocked starts the supervisor if it is not running. It
// subscribes to SIGCHLD before returning, so no exit of a child started
// afterwards is missed.
func (r *registry) ensureRunningLocked() {
	if r.running {
		return
	}
	r.running = true
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	go r.loop(sigs)
}

func (r *registry) kickLocked() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// loop is the supervisor: it polls on SIGCHLD, on kicks and on a timer, and
// returns as soon as no Process is active.
func (r *registry) loop(sigs chan os.Signal) {
	timer := time.NewTimer(idleInterval)
	defer timer.Stop()
	for {
		select {
		case <-sigs:
		case <-r.kick:
		case <-timer.C:
		}
		r.mu.Lock()
		now := time.Now()
		r.pollLocked(now) // errors are retried at the next poll
		if len(r.active) == 0 {
			r.running = false
			signal.Stop(sigs)
			r.mu.Unlock()
			return
		}
		d := r.intervalLocked(now)
		r.mu.Unlock()
		timer.Reset(d)
	}
}

func (r *registry) intervalLocked(now time.Time) time.Duration {
	d := idleInterval
	if len(r.active) > 1 {
		d = trackInterval
	}
	for p := range r.active {
		if p.killAll || p.mainReaped {
			return fastInterval
		}
		if !p.deadline.IsZero() {
			d = min(d, max(p.deadline.Sub(now), fastInterval))
		}
	}
	return d
}

// pollLocked reaps what can be reaped, walks /proc to refresh every active
// Process's tree, sends the SIGKILLs due, and finishes the Processes whose
// tree is gone.
func (r *registry) pollLocked(now time.Time) error {
	for _, p := range r.mains {
		r.reapMainLocked(p)
	}
	snap, err := r.scan()
	if err != nil {
		r.scanFailures++
		for p := range r.active {
			if p.killAll && !p.mainReaped {
				syscall.Kill(-p.pid, syscall.SIGKILL)
			}
			if p.killAll && p.cg != nil {
				p.cg.killAll()
			}
			if p.mainReaped && r.scanFailures >= maxScanFailures {
				if p.lost == nil {
					p.lost = fmt.Errorf("runner: descendants of pid %d may survive: %w", p.pid, err)
				}
				p.members = nil
				r.finishLocked(p, now)
			}
		}
		return err
	}
	r.scanFailures = 0

	selfPgid := syscall.Getpgrp()
	children := make(map[int][]int, len(snap))
	for pid, s := range snap {
		children[s.ppid] = append(children[s.ppid], pid)
	}

	// Children of this process that are not unreaped main processes are
	// orphans of a job (or foreign children, left alone). Reap those that
	// exited and charge their rusage to their job.
	roots := make(map[*Process][]int)
	for p := range r.active {
		if !p.mainReaped {
			roots[p] = append(roots[p], p.pid)
		}
	}
	for _, pid := range children[r.self] {
		if _, ok := r.mains[pid]; ok {
			continue
		}
		owner := r.ownerLocked(pid, snap[pid], selfPgid)
		if owner == nil {
			continue
		}
		if r.reapOrphanLocked(pid, owner) {
			delete(snap, pid)
			continue
		}
		roots[owner] = append(roots[owner], pid)
	}

	// Walk every tree, parents first.
	tracked := make(map[int]trackedPid, len(r.tracked))
	for p := range r.active {
		p.members = p.members[:0]
		p.pgidInUse = false
		queue := roots[p]
		for i := 0; i < len(queue); i++ {
			pid := queue[i]
			s, ok := snap[pid]
			if _, seen := tracked[pid]; !ok || seen {
				continue
			}
			tracked[pid] = trackedPid{owner: p, start: s.start}
			p.members = append(p.members, member{pid: pid, start: s.start})
			if s.pgid == p.pid {
				p.pgidInUse = true
			}
			queue = append(queue, children[pid]...)
		}
	}
	r.tracked = tracked

	for p := range r.active {
		if p.mainReaped && len(p.members) == 0 {
			if p.cg != nil && r.cgroupLiveLocked(p) {
				// A process the walk does not see still lives in the
				// run's cgroup: the run is not over until it is empty.
				p.killAll = true
				p.cg.killAll()
				continue
			}
			r.finishLocked(p, now)
			continue
		}
		deadlinePassed := !p.deadline.IsZero() && !now.Before(p.deadline)
		if p.killAll || deadlinePassed || (p.mainReaped && p.deadline.IsZero()) {
			p.killAll = true
			r.signalLocked(p, syscall.SIGKILL)
		}
	}
	return nil
}

// scan reads the processes of the agent's tree, where the jobs and their
// orphans are (the agent is their subreaper): through the children files
// where the kernel has them, else by walking all of /proc.
func (r *registry) scan() (map[int]procStat, error) {
	if childrenFiles() {
		return scanTree(r.self)
	}
	return scanProcs()
}

// ownerLocked decides which active Process the child pid of this process
// (not a main process) belongs to, or nil if it is a foreign child.
func (r *registry) ownerLocked(pid int, s procStat, selfPgid int) *Process {
	if t, ok := r.tracked[pid]; ok && t.start == s.start && !t.owner.finished {
		return t.owner // seen in the job's tree before it was orphaned
	}
	if s.pgid == selfPgid {
		return nil // e.g. started by os/exec elsewhere in the agent
	}
	var latest *Process
	for p := range r.active {
		if p.pid == s.pgid {
			return p // still in the job's process group
		}
		if latest == nil || p.seq > latest.seq {
			latest = p
		}
	}
	return latest
}

// reapMainLocked collects p's main process if it has exited.
func (r *registry) reapMainLocked(p *Process) {
	var ws syscall.WaitStatus
	var ru syscall.Rusage
	for {
		wpid, err := syscall.Wait4(p.pid, &ws, syscall.WNOHANG, &ru)
		if err == syscall.EINTR {
			continue
		}
		switch {
		case err != nil: // ECHILD: reaped by someone else
			p.lost = errStatusLost
		case wpid != p.pid || ws.Stopped() || ws.Continued():
			return // still running
		default:
			p.status = ws
			p.mainCPU = rusageCPU(&ru)
		}
		p.mainReaped = true
		delete(r.mains, p.pid)
		return
	}
}

// reapOrphanLocked collects the orphan pid if it has exited, charging its
// rusage to owner, and reports whether it is gone.
func (r *registry) reapOrphanLocked(pid int, owner *Process) bool {
	var ws syscall.WaitStatus
	var ru syscall.Rusage
	for {
		wpid, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, &ru)
		if err == syscall.EINTR {
			continue
		}
		switch {
		case err != nil: // ECHILD: no longer our child
			return true
		case wpid != pid || ws.Stopped() || ws.Continued():
			return false
		default:
			owner.orphanCPU += rusageCPU(&ru)
			return true
		}
	}
}

// signalLocked sends sig to p's process group (while it is sure to be p's)
// and to every member of p's tree found at the last walk.
// With a cgroup, every process in it gets sig too (SIGKILL through
// cgroup.kill), whatever tree or group it is in.
func (r *registry) signalLocked(p *Process, sig syscall.Signal) {
	if !p.mainReaped || p.pgidInUse {
		syscall.Kill(-p.pid, sig)
	}
	for _, m := range p.members {
		syscall.Kill(m.pid, sig)
	}
	if p.cg != nil {
		if sig == syscall.SIGKILL {
			p.cg.killAll()
		} else {
			p.cg.signal(sig)
		}
	}
}

// cgroupLiveLocked reports whether a process still lives in p's cgroup.
// A cgroup that cannot be read is taken for empty (the tree walk found
// nothing), and the run's result says why it may be incomplete.
func (r *registry) cgroupLiveLocked(p *Process) bool {
	live, err := p.cg.populated()
	if err != nil {
		if p.lost == nil {
			p.lost = fmt.Errorf("runner: the run's cgroup: %w", err)
		}
		return false
	}
	return live
}

// sampleCPULocked measures p's CPU now (see Process.CPU). Members are read
// in the order of the walk, parents before children: a child reaped by its
// parent between the two reads is then missed once (and the result clamped)
// rather than counted twice.
func (r *registry) sampleCPULocked(p *Process) time.Duration {
	if p.cg != nil {
		if cpu, err := p.cg.usage(); err == nil {
			p.cpuMax = max(p.cpuMax, cpu)
			return p.cpuMax
		}
	}
	var ticks uint64
	buf := make([]byte, statBufSize)
	for _, m := range p.members {
		s, err := readStat(m.pid, buf)
		if err != nil || s.start != m.start {
			continue
		}
		ticks += s.cpuTicks()
	}
	total := p.mainCPU + p.orphanCPU + ticksToDuration(ticks)
	p.cpuMax = max(p.cpuMax, total)
	return p.cpuMax
}

// finishLocked marks p done once its tree is gone and hands the rest over to
// finalize.
func (r *registry) finishLocked(p *Process, now time.Time) {
	p.finished = true
	delete(r.active, p)
	delete(r.mains, p.pid)
	res := Result{
		Started: p.started,
		Ended:   now,
		CPU:     p.mainCPU + p.orphanCPU,
		Err:     p.lost,
	}
	switch {
	case p.lost == errStatusLost:
		res.ExitCode = -1
	case p.status.Signaled():
		res.ExitCode = -1
		res.Signal = p.status.Signal().String()
	default:
		res.ExitCode = p.status.ExitStatus()
	}
	res.CPUSource = CPUFromProc
	if p.cg != nil {
		// Every process that ever ran in the cgroup, those the tree
		// walk never saw or could not reap included.
		if cpu, err := p.cg.usage(); err == nil {
			res.CPU, res.CPUSource = cpu, CPUFromCgroup
		} else if res.Err == nil {
			res.Err = fmt.Errorf("runner: the run's CPU from its cgroup: %w", err)
		}
		res.OOMKilled = p.cg.oomKills() > 0
	}
	p.finalCPU = res.CPU
	go p.finalize(res)
}
