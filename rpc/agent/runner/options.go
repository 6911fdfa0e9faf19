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
	// (created with mode 0600 if needed). "" discards the output (the
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

	StderrTail string // last Options.TailBytes bytes of stderr (not necessarily valid UTF-8)
	StdoutTail string // last Options.TailBytes bytes of stdout (not necessarily valid UTF-8)

	Started time.Time // just before the main process was created
	Ended   time.Time // when the main process and every descendant were found gone

	// Err reports an incomplete outcome, else nil: the log file could not be
	// written or closed (the first such error), or the main process's status
	// was lost because something else in the agent reaped it.
	Err error
}
