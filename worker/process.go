package worker

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/worker/runner"
)

// ProcessConfig configures a ProcessRunner.
type ProcessConfig struct {
	// LogDir holds the runs' output, LogDir/job-ID-attempt-N.log (mode
	// 0600, bounded by MaxLogBytes, never deleted). It is made mode 0700
	// if missing, and refused if other users may enter it. "" keeps no
	// log (the tails are still reported).
	LogDir      string
	MaxLogBytes int64
	// WorkDir holds each run's own directory, WorkDir/job-ID-attempt-N
	// (mode 0700, owned by the user the job runs as), removed once the
	// run's whole tree is gone, or when the next runner of WorkDir starts
	// if the agent died. It is made if missing: mode 0700, or 0711 with a
	// User (who must be able to reach its own directory and may list
	// none). Required, and the worker's alone.
	WorkDir  string
	WorkerID string
	// User, if set, is the user every job runs as (LookupUser); the agent
	// must run as root. nil: jobs run as the agent's user.
	User *JobUser
	// Env is what the jobs get of the agent's environment (BaseEnv).
	Env []string
	// Cgroups, if set, gives each run a cgroup of its own there
	// (runner.OpenCgroups), named as its directory, with the Limits of
	// the job's size: the job starts inside it, its CPU is the cgroup's,
	// a kill reaches every process in it, and it is removed after the
	// run. nil: each run is a process tree, measured from /proc.
	Cgroups *runner.Cgroups
	Limits  SizeLimits
}

// ProcessRunner runs each job as a child process tree (see package
// runner), in a cgroup of its own where ProcessConfig.Cgroups gives one:
// the payload is a JSON command line, the output goes to the log
// directory (the last 4 KiB of stderr and of stdout are reported with the
// result), and the CPU is measured from the operating system (the
// cgroup's, or the tree's in /proc).
//
// A job gets nothing of the agent but what is listed here: its
// environment is the configured Env, then HOME and TMPDIR (its own
// directory), USER and LOGNAME (the user it runs as), then its payload's
// env, then BARISTA_JOB_ID, BARISTA_ATTEMPT, BARISTA_TENANT and
// BARISTA_WORKER_ID, which nothing overrides. Its working directory is its
// own directory unless the payload names one. It holds no descriptor of
// the agent's but stdin (/dev/null), stdout and stderr.
type ProcessRunner struct {
	cfg  ProcessConfig
	user string // USER and LOGNAME of the jobs ("" if the user has no name)
}

// ConfigError is a refusal of a ProcessConfig: Field names the field
// ("User", "LogDir", "WorkDir"), so that a caller can name the setting.
type ConfigError struct {
	Field string
	Err   error
}

func (e *ConfigError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// NewProcessRunner checks cfg and makes its directories.
func NewProcessRunner(cfg ProcessConfig) (*ProcessRunner, error) {
	if cfg.WorkDir == "" {
		return nil, &ConfigError{"WorkDir", errors.New("required")}
	}
	r := &ProcessRunner{cfg: cfg}
	workMode := os.FileMode(0o700)
	if u := cfg.User; u != nil {
		if os.Geteuid() != 0 {
			return nil, &ConfigError{"User", fmt.Errorf("running jobs as %s needs the worker to run as root (it runs as uid %d)", u, os.Geteuid())}
		}
		if u.UID == 0 {
			return nil, &ConfigError{"User", fmt.Errorf("%s is root: name an unprivileged user for the jobs", u)}
		}
		workMode, r.user = 0o711, u.Name
	} else {
		r.user = currentUserName()
	}
	if cfg.LogDir != "" {
		if err := privateDir(cfg.LogDir, 0o700); err != nil {
			return nil, &ConfigError{"LogDir", err}
		}
	}
	if err := privateDir(cfg.WorkDir, workMode); err != nil {
		return nil, &ConfigError{"WorkDir", err}
	}
	if cfg.User != nil {
		if err := reachable(cfg.WorkDir, cfg.User); err != nil {
			return nil, &ConfigError{"WorkDir", err}
		}
	}
	// Runs of an agent that died left their directories: no run of this
	// worker is alive now.
	left, err := filepath.Glob(filepath.Join(cfg.WorkDir, "job-*-attempt-*"))
	if err != nil {
		return nil, &ConfigError{"WorkDir", err}
	}
	for _, dir := range left {
		if err := os.RemoveAll(dir); err != nil {
			return nil, &ConfigError{"WorkDir", fmt.Errorf("a run's directory left behind: %w", err)}
		}
	}
	return r, nil
}

// runName names a run's log file and directory.
func runName(a *pb.Assign) string { return fmt.Sprintf("job-%d-attempt-%d", a.Job, a.Attempt) }

// Declares implements Declarer: command jobs.
func (r *ProcessRunner) Declares() (commands bool, kinds []string) { return true, nil }

// Start implements Runner.
func (r *ProcessRunner) Start(a *pb.Assign) (Run, error) {
	if a.Form == pb.JobForm_FUNCTION {
		return nil, fmt.Errorf("job %d is a function job of kind %q, which a command worker does not run (%w)", a.Job, a.JobType, ErrUnknownKind)
	}
	spec, err := runner.ParsePayload(a.Payload)
	if err != nil {
		return nil, fmt.Errorf("job %d: %w (%w)", a.Job, err, ErrUnrunnable)
	}
	dir, err := r.makeRunDir(runName(a))
	if err != nil {
		return nil, fmt.Errorf("job %d: %w", a.Job, err)
	}
	env := append(append([]string{}, r.cfg.Env...), "HOME="+dir, "TMPDIR="+dir)
	if r.user != "" {
		env = append(env, "USER="+r.user, "LOGNAME="+r.user)
	}
	if spec.Env == nil {
		spec.Env = map[string]string{}
	}
	spec.Env["BARISTA_JOB_ID"] = fmt.Sprint(a.Job)
	spec.Env["BARISTA_ATTEMPT"] = fmt.Sprint(a.Attempt)
	spec.Env["BARISTA_TENANT"] = a.Tenant
	spec.Env["BARISTA_WORKER_ID"] = r.cfg.WorkerID
	if spec.Dir == "" {
		spec.Dir = dir
	}
	opt := runner.Options{MaxLogBytes: r.cfg.MaxLogBytes, Env: env}
	if r.cfg.User != nil {
		opt.User = &r.cfg.User.Identity
	}
	if r.cfg.LogDir != "" {
		opt.LogPath = filepath.Join(r.cfg.LogDir, runName(a)+".log")
	}
	if r.cfg.Cgroups != nil {
		if opt.Cgroup, err = r.cfg.Cgroups.NewRun(runName(a), r.cfg.Limits.For(a.Size)); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("job %d: %w", a.Job, err)
		}
	}
	p, err := runner.Start(spec, opt)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("job %d: %w", a.Job, err)
	}
	run := processRun{p: p, done: make(chan struct{})}
	go func() {
		<-p.Done()
		// Nothing of the job runs any more: what it left goes with it.
		os.RemoveAll(dir)
		close(run.done)
	}()
	return run, nil
}

// makeRunDir makes a run's own directory afresh (one left by an agent
// that died is removed first), owned by the user the job runs as.
func (r *ProcessRunner) makeRunDir(name string) (string, error) {
	dir := filepath.Join(r.cfg.WorkDir, name)
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("its directory: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", fmt.Errorf("its directory: %w", err)
	}
	if u := r.cfg.User; u != nil {
		if err := os.Lchown(dir, int(u.UID), int(u.GID)); err != nil {
			os.Remove(dir)
			return "", fmt.Errorf("its directory: %w", err)
		}
	}
	return dir, nil
}

// FirstWelcome implements FirstWelcome: the cgroups of runs that an agent
// of this worker ID left (it died; a daemon of its job may live on in
// one) are killed and removed, once this agent holds the ID's session.
func (r *ProcessRunner) FirstWelcome() error {
	if r.cfg.Cgroups == nil {
		return nil
	}
	return r.cfg.Cgroups.RemoveLeftovers()
}

type processRun struct {
	p    *runner.Process
	done chan struct{} // closed once the tree is gone and its directory removed
}

func (r processRun) CPU() time.Duration {
	cpu, _ := r.p.CPU()
	return cpu
}

func (r processRun) Terminate(grace time.Duration) { r.p.Terminate(grace) }
func (r processRun) Kill()                         { r.p.Kill() }
func (r processRun) Done() <-chan struct{}         { return r.done }

func (r processRun) Result() Result {
	res := r.p.Result()
	src := pb.CpuSource_CPU_SOURCE_PROC
	if res.CPUSource == runner.CPUFromCgroup {
		src = pb.CpuSource_CPU_SOURCE_CGROUP
	}
	return Result{ExitCode: res.ExitCode, Signaled: res.Signal != "", CPU: res.CPU, StderrTail: res.StderrTail, StdoutTail: res.StdoutTail,
		CPUSource: src, OOMKilled: res.OOMKilled}
}

// DefaultPath is a job's PATH when the agent has none.
const DefaultPath = "/usr/local/bin:/usr/bin:/bin"

// BaseEnv is what jobs get of the agent's environment (getenv): PATH
// (DefaultPath if unset), LANG and TZ when set, and each entry of pass,
// NAME (the agent's value, when set) or NAME=VALUE. Nothing else of the
// agent's environment, where its own settings and credentials may be,
// reaches a job. Names of barista's own variables (BARISTA_...) are
// refused in pass.
func BaseEnv(getenv func(string) string, pass []string) ([]string, error) {
	var env []string
	set := func(name, value string) {
		for i, kv := range env {
			if k, _, _ := strings.Cut(kv, "="); k == name {
				env[i] = name + "=" + value
				return
			}
		}
		env = append(env, name+"="+value)
	}
	set("PATH", cmp.Or(getenv("PATH"), DefaultPath))
	for _, k := range []string{"LANG", "TZ"} {
		if v := getenv(k); v != "" {
			set(k, v)
		}
	}
	for _, p := range pass {
		name, value, fixed := strings.Cut(p, "=")
		switch {
		case name == "" || strings.ContainsAny(name, "\x00 \t\n") || strings.ContainsRune(value, 0):
			return nil, fmt.Errorf("%q is not NAME or NAME=VALUE", p)
		case strings.HasPrefix(strings.ToUpper(name), "BARISTA_"):
			return nil, fmt.Errorf("%s: barista's own variables are never passed to jobs (the worker sets BARISTA_JOB_ID and the like itself)", name)
		case !fixed:
			value = getenv(name)
			if value == "" {
				continue
			}
		}
		set(name, value)
	}
	return env, nil
}
