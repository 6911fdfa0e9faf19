// Package runner starts, measures and stops a job's process tree on Linux.
//
// The barista worker agent runs one job at a time as a child process. A job
// is described by a [Spec] (decoded from the job payload with
// [ParsePayload]) and started with [Start], which returns a [*Process].
//
// # Contract
//
//   - The job's main process runs in its own process group (Setpgid), with
//     stdin from /dev/null and stdout+stderr appended to a size-bounded log
//     file (see [Options]). The last bytes of stderr and of stdout are kept
//     in memory.
//   - The job is "done" ([Process.Done]) only when its main process has
//     exited AND every descendant is gone. When the main process exits while
//     descendants remain (for example a backgrounded "sleep 100 &"), the
//     remaining descendants are killed with SIGKILL and reaped.
//   - [Process.CPU] and [Result.CPU] account for the CPU time of the whole
//     tree, measured from the operating system only (never from anything the
//     job prints).
//   - [Process.Terminate] and [Process.Kill] signal the whole tree: the
//     process group and, individually, every known descendant (descendants
//     may have called setsid and left the group).
//   - The job inherits nothing of the calling process but what it is given:
//     its environment is [Options.Env] with [Spec.Env] laid over it, its
//     only open files are stdin, stdout and stderr, and with [Options.User]
//     it runs as another user.
//
// # Linux specifics
//
// The agent calls [EnableSubreaper] once at start, which marks it a child
// subreaper (prctl PR_SET_CHILD_SUBREAPER): orphaned descendants of a job are
// reparented to the agent instead of init, so they can still be found,
// killed, reaped and charged to the job. Without it, a descendant whose
// parent exits escapes to init: it is then neither killed (unless it is still
// in the job's process group) nor counted.
//
// Descendants are found by walking /proc: every /proc/PID/stat is read and
// the parent links are followed from the job's main process and from the
// job's orphans (children of the agent that are not a job's main process).
//
// Reaping is done by one process-wide supervisor goroutine, running only while
// at least one Process is not done (it ends with the last one). It wakes on
// SIGCHLD (os/signal), on Start, Kill and Terminate, and on a timer (fast
// only while a tree is being killed or is going away after its main process
// exited), walks /proc, and reaps with wait4(pid, WNOHANG) each child of the
// agent that it attributes to a job, routing by pid. It deliberately does not
// call wait4(-1), which would also reap children that other code in the
// agent waits for:
//
//   - the main pid of a Process: that Process's exit status and rusage;
//   - any other child (an orphan): its rusage is added to the CPU of the
//     Process it belongs to. Ownership is decided, in order, by the
//     descendant sets recorded at the previous /proc walk, by process group
//     (orphans usually keep the job's group), and finally by attributing the
//     child to the most recently started running Process.
//
// Children of the agent that run in the agent's own process group and are not
// a job's main process (for example ones started with os/exec without
// Setpgid) are never reaped, signalled or counted: other code in the agent may
// start and wait for such children freely. The limitation: while a Process is
// running, any other child of the agent that runs in a process group of its
// own is presumed to be an orphan of a job, and will be reaped and killed
// with it. With several concurrent Processes, an orphan that was created and
// orphaned between two /proc walks and that left its job's process group is
// charged to the most recently started Process. Orphans of the agent's own
// other children (in the agent's process group) are not reaped by this
// package either.
//
// Signals go to the job's process group while it is sure to be the job's (the
// main process is not reaped yet, or a live member of the tree is still in
// it), and to each member pid of the tree found by a /proc walk made just
// before, under the same lock as reaping. Members that are children of the
// agent cannot be reused pids (they are reaped only under that lock); for the
// others there is the usual, tiny, window between reading /proc and kill(2).
//
// CPU accounting: while the job runs, [Process.CPU] is the sum of
// utime+stime+cutime+cstime (fields 14 to 17 of /proc/PID/stat, converted
// with the clock tick rate read from the auxiliary vector, AT_CLKTCK) of every
// live process of the tree, read parents first, plus the rusage of the tree's
// orphans already reaped by the agent. cutime and cstime hold the CPU of the
// children a process has waited for, so nothing is counted twice and nothing
// that was waited for is lost. The value returned is clamped so that it never
// decreases. [Result.CPU] is exact (rusage from wait4, microseconds): the
// rusage of the reaped main process (which includes its waited-for children)
// plus the rusage of every orphan reaped. Not counted: processes that escaped
// the tree (see EnableSubreaper) and children of a job process that were
// reaped automatically because it ignored SIGCHLD (the kernel then does not
// add them to cutime).
//
// # A cgroup per run
//
// Where the host gives a writable cgroup v2 hierarchy ([OpenCgroups]),
// each run gets a cgroup of its own ([Cgroups.NewRun], passed in
// [Options.Cgroup]) and the contract above is kept, with more:
//
//   - The job starts inside its cgroup (clone3 with CLONE_INTO_CGROUP,
//     SysProcAttr.UseCgroupFD): no instant of it runs outside.
//   - CPU is the cgroup's usage_usec (cpu.stat), while it runs and at the
//     end: every process that ever ran in it is counted, those the /proc
//     walk cannot see or whose rusage nobody collects (a child its parent
//     let the kernel reap) included. [Result.CPUSource] says which
//     accounting a result comes from.
//   - SIGTERM goes to every process cgroup.procs lists as well as to the
//     tree; SIGKILL is cgroup.kill (Linux 5.14), which no fork outruns, or
//     on older kernels a SIGKILL to each listed process until it is empty.
//   - The run is done only once cgroup.events says "populated 0"; then its
//     final CPU and memory.events (oom_kill: [Result.OOMKilled]) are read
//     and the cgroup is removed.
//   - The cgroup's limits (memory.max, memory.swap.max, pids.max, cpu.max:
//     [Limits]) are set before the job starts, as far as the parent's
//     controllers allow; its files are the agent's user's, so a job
//     running as another user can neither change them nor move out.
//
// The tree walk, the subreaper and the reaping go on as before: the agent
// still reaps the job's orphans and kills its tree, the cgroup makes sure
// nothing is missed.
package runner
