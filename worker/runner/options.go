package runner

import "time"

const (
	// DefaultMaxLogBytes is the log file bound used when Options.MaxLogBytes <= 0.
	DefaultMaxLogBytes = 16 << 20
	// DefaultTailBytes is the size of the stderr and stdout tails used when
	// Options.TailBytes <= 0.
	DefaultTailBytes = 4096
)

// Options tune how a job's output is kept.
type Options struct {
	// LogPath is the file that the job's stdout and stderr are appended to
	// (created if needed, and made mode 0600). "" discards the output (the
	// tails are still kept).
	//
	// The file is bounded by MaxLogBytes (default [DefaultMaxLogBytes]). When a
	// write would make it larger, the file is cut in place: it is truncated
	// and rewritten with only its newest bytes, at least MaxLogBytes/2 of them
	// (or the whole new chunk if that is larger, up to MaxLogBytes), followed
	// by the new output. So the file never exceeds MaxLogBytes, always ends
	// with the job's newest output, and is a contiguous suffix of everything
	// written to it. Output that was already in the file before the job
	// counts toward the bound. There is no rotated copy and no marker line.
	LogPath     string
	MaxLogBytes int64

	// TailBytes is how many of the last bytes of stderr and of stdout
	// [Result.StderrTail] and [Result.StdoutTail] hold (default
	// [DefaultTailBytes]).
	TailBytes int

	// Env is the environment the job starts from, as NAME=VALUE strings;
	// [Spec.Env] is laid over it. Nothing of the calling process's own
	// environment reaches the job unless it is here: with nil the job has
	// Spec.Env alone (and Argv[0] needs a '/' unless Spec.Env sets PATH).
	Env []string

	// User, if set, is the user the job runs as: its groups and then its
	// user ID are set in the child before the exec. The calling process
	// needs the privilege to do so (root, or CAP_SETUID and CAP_SETGID).
	// nil: the job runs as the calling process's user.
	User *Identity

	// Cgroup, if set, is the run's own cgroup (Cgroups.NewRun): the job
	// starts inside it (CLONE_INTO_CGROUP: no instant of it runs
	// outside), its CPU is the cgroup's, a kill reaches every process in
	// it, the run is done only once it is empty, and it is removed then.
	// Start owns it from the call on, whether it succeeds or not.
	Cgroup *Cgroup
}

// Identity is a user to run a job as.
type Identity struct {
	UID    uint32
	GID    uint32   // primary group
	Groups []uint32 // supplementary groups (none if empty)
}

func (o Options) withDefaults() Options {
	if o.MaxLogBytes <= 0 {
		o.MaxLogBytes = DefaultMaxLogBytes
	}
	if o.TailBytes <= 0 {
		o.TailBytes = DefaultTailBytes
	}
	return o
}

// Result is the outcome of a job, valid once [Process.Done] is closed.
type Result struct {
	ExitCode int    // exit status; -1 if killed by a signal (or if the status was lost, see Err)
	Signal   string // the signal that killed the main process ("killed", "terminated", ...), else ""

	// CPU is the final CPU time (user+system) of the whole tree: the rusage
	// of the reaped main process (which includes its waited-for children)
	// plus the rusage of every orphan of the job reaped by the agent.
	CPU time.Duration
	// CPUSource says where CPU was measured: CPUFromCgroup when the run
	// had a cgroup and its cpu.stat could be read, else CPUFromProc.
	CPUSource CPUSource
	// OOMKilled: the kernel killed a process of the run for its cgroup's
	// memory limit (memory.events oom_kill).
	OOMKilled bool

	StderrTail string // last Options.TailBytes bytes of stderr (not necessarily valid UTF-8)
	StdoutTail string // last Options.TailBytes bytes of stdout (not necessarily valid UTF-8)

	Started time.Time // just before the main process was created
	Ended   time.Time // when the main process and every descendant were found gone

	// Err reports an incomplete outcome, else nil: the log file could not be
	// written or closed (the first such error), the main process's status
	// was lost because something else in the agent reaped it, or the run's
	// cgroup could not be read or removed.
	Err error
}
