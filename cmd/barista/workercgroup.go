package main

import (
	"flag"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/baristahq/barista/worker"
	"github.com/baristahq/barista/worker/runner"
)

// cgroupOpts are barista worker's flags of the runs' cgroups.
type cgroupOpts struct {
	parent  string
	off     bool
	require bool
	limits  worker.SizeLimits
}

const cgroupHelp = `Each run gets a cgroup v2 of its own where the host allows it (as
systemd, Slurm and container runtimes do), under --cgroup-parent (default
a sub-tree of the worker's own cgroup, barista-jobs-ID, ID the worker's):
the job starts inside it (CLONE_INTO_CGROUP), its CPU is the cgroup's
(cpu.stat: every process that ever ran in it, however it was started),
cancel, timeout, Reject and self-kill end it with cgroup.kill (after
SIGTERM and the grace, as for the tree), and the run is reported only once
the cgroup is empty; it is removed then. The limits of the job's size are
set on it: memory.max and memory.swap.max (--memory-max, --memory-swap-max,
defaults sm=1GiB,md=4GiB,lg=8GiB and no swap; a run the kernel kills for
it fails with the reason oom_killed), pids.max (--pids-max, default
sm=1024,md=4096,lg=16384: a fork bomb fails its run) and cpu.max
(--cpu-max in CPUs, default max: CPU is billed, not capped). Each takes
SIZE=VALUE,... for the sizes it changes, or max for none. The job's user
(--run-as) cannot write its cgroup's files.

Where the host gives no writable cgroup v2 (a host whose controllers are
on cgroup v1, a container without a cgroup namespace of its own) the
worker runs each job as a process tree, CPU from /proc, and says so at
start; a limit whose controller the hierarchy lacks is skipped, with the
reason, in the same log. --require-cgroup makes either an error
(production); --no-cgroup turns cgroups off. See docs/workers.md,
"Cgroups".`

func (o *cgroupOpts) register(fs *flag.FlagSet) {
	o.limits = worker.DefaultSizeLimits()
	fs.StringVar(&o.parent, "cgroup-parent", "", "the cgroup `DIR` each run's cgroup is made in: a path in the cgroup2 file system, or relative to the worker's own cgroup (default barista-jobs-ID there)")
	fs.BoolVar(&o.require, "require-cgroup", false, "refuse to start unless every run gets a cgroup with every limit set (production)")
	fs.BoolVar(&o.off, "no-cgroup", false, "run jobs without a cgroup of their own (process tree, CPU from /proc, no limits)")
	for _, l := range []struct{ name, usage string }{
		{"memory-max", "memory.max of each job size, as `SIZE=BYTES,...` (max: none)"},
		{"memory-swap-max", "memory.swap.max of each job size, as `SIZE=BYTES,...` (max: none)"},
		{"pids-max", "pids.max (processes and threads) of each job size, as `SIZE=N,...` (max: none)"},
		{"cpu-max", "cpu.max of each job size, as `SIZE=CPUS,...` (max: none)"},
	} {
		fs.Var(&limitFlag{&o.limits, l.name}, l.name, l.usage)
	}
}

// limitFlag is one limit of every size, as --memory-max and its kin set it.
type limitFlag struct {
	l    *worker.SizeLimits
	name string
}

func (f *limitFlag) String() string {
	if f.l == nil {
		return ""
	}
	return f.l.String(f.name)
}

func (f *limitFlag) Set(v string) error { return f.l.SetLimit(f.name, v) }

// open opens the runs' cgroups of worker id and says at start what they
// enforce and what not; nil where runs get none.
func (o *cgroupOpts) open(id string, log hclog.Logger) (*runner.Cgroups, error) {
	parent := o.parent
	if parent == "" {
		parent = "barista-jobs-" + filepath.Base(defaultWorkDir(id))[len("barista-jobs-"):]
	}
	c, rep, err := worker.OpenCgroups(worker.CgroupSetup{Parent: parent, Off: o.off, Require: o.require, Limits: o.limits})
	if err != nil {
		return nil, err
	}
	if c == nil {
		log.Warn("no cgroup per run: each job runs as a process tree, its CPU read from /proc, killed by signals to the tree, with no memory, process or CPU limit of its size (--require-cgroup makes this an error)",
			"reason", rep.None)
		return nil, nil
	}
	kill := "cgroup.kill"
	if !c.CanKill() {
		kill = "SIGKILL to each process of cgroup.procs (no cgroup.kill: Linux before 5.14)"
	}
	log.Info("a cgroup per run", "parent", c.Dir(), "cpu", "cgroup cpu.stat", "kill", kill, "limits", strings.Join(rep.Enforced, "; "))
	for _, m := range rep.Missing {
		log.Warn("limits not enforced on this host", "limits", strings.Join(m.Limits, ", "), "reason", m.Why)
	}
	return c, nil
}
