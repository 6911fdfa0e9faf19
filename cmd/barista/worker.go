package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/baristahq/barista/client"
	"github.com/baristahq/barista/internal/workercompat"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
	"github.com/baristahq/barista/worker"
	"github.com/baristahq/barista/worker/runner"
)

type workerOpts struct {
	clientFlags
	size      string
	pool      string
	id        string
	logDir    string
	workDir   string
	maxLog    int64
	logLevel  string
	logJSON   bool
	sepReady  bool
	startNow  bool
	tokenFile string
	tokenFlag bool // --token was given on the command line
	runAs     string
	jobEnv    multiFlag
	cgroup    cgroupOpts
	slots     int
}

func init() {
	register("worker", typed(&spec[workerOpts]{
		synopsis: "Run a worker agent: one job at a time (or --slots N at once) as child processes",
		usage:    "--size sm|md|lg [--slots N] [--pool NAME] [--server ADDRS] [--id ID] [--token-file FILE] [--run-as USER] [--log-dir DIR] [--work-dir DIR] [--cgroup-parent DIR] [--require-cgroup] [--memory-max SIZE=BYTES,...]",
		help: `Connects to the cluster (any node; a follower redirects it to the leader)
and runs one job at a time, of its pool only (--pool, default the pool
default; docs/workers.md, "Pools"). --slots N runs up to N jobs at once
(1..1,024): slots ID-1 .. ID-N, each a worker of its own to the cluster
(a token's worker_id binding must cover them: "ID-*"), all on one
connection and one stream to the leader (a leader of an earlier build
gets a stream per slot). A job's payload is a JSON command line:

  {"argv": ["python3", "train.py", "--epochs", "3"], "env": {"SEED": "7"}, "dir": "/srv/jobs"}

(barista submit -- COMMAND ARGS... writes it). The job runs in its own
process group; the worker is a child subreaper, so orphaned grandchildren
are still counted and killed. CPU time is measured from the OS (the run's
cgroup, or else /proc while it runs and rusage at the end), never taken
from the job; the result says which (cpu_source). stdout and stderr go to
LOG_DIR/job-ID-attempt-N.log (bounded, mode 0600, LOG_DIR mode 0700); the
last 4 KiB of stderr are reported with the result.

` + cgroupHelp + `

A job gets nothing of the worker's own: not its environment (only PATH,
LANG and TZ, the --job-env variables, HOME and TMPDIR set to its own
directory, USER and LOGNAME, its payload's env, and BARISTA_JOB_ID,
BARISTA_ATTEMPT, BARISTA_TENANT, BARISTA_WORKER_ID), not its open files.
Each run has its own directory WORK_DIR/job-ID-attempt-N (mode 0700),
its working directory unless the payload names one, removed when the run
ends. --run-as runs the jobs as another user (the worker must run as
root), so that they cannot read the token file, the logs or the worker's
memory: see docs/workers.md, "What a job can see".

Cancel: SIGTERM to the job's whole tree, SIGKILL after the cancel grace.
Reject, or no acknowledged heartbeat for self_kill_after: SIGKILL at once,
and the result is dropped. The worker follows the leader across failovers
and resumes its job's lease on reconnect. The leader ends a stream with
more than 100 refused reports within 10 s (RESOURCE_EXHAUSTED, naming the
worker: docs/workers.md, "Limits"); the worker reconnects with backoff.

SIGINT or SIGTERM drains the worker: it finishes its current job, takes no
new one, and exits; a second signal kills the job and exits at once.

The worker token: --token-file FILE in production (a file only its
owner may read, mode 0600 or 0400; a file that others may read is
refused). --token and $BARISTA_TOKEN work too, with a warning when a
server is not on loopback: a command line is public on the machine, an
environment is easily handed on. If the servers bind the token to worker
IDs (worker_id in [[auth.tokens]]), --id must be one of them, or the
worker exits with PERMISSION_DENIED. While another session of the same ID
is live, the worker is refused (ABORTED) and retries with backoff. A
--pool the cluster does not have is refused (NOT_FOUND): the worker logs
it and retries with backoff until an admin creates the pool.`,
		flags: func(fs *flag.FlagSet, o *workerOpts) {
			o.register(fs)
			fs.StringVar(&o.size, "size", "", "container `SIZE`: sm, md or lg (required)")
			fs.StringVar(&o.pool, "pool", "default", "the pool `NAME` this worker serves: it runs jobs of that pool only")
			host, _ := os.Hostname()
			fs.StringVar(&o.id, "id", fmt.Sprintf("%s-%d", host, os.Getpid()), "unique worker `ID`")
			numFlag(fs, &o.slots, "slots", 1, 1, 1024, "run up to `N` jobs at once: slots ID-1..ID-N, on one connection to the leader")
			if f := fs.Lookup("token"); f != nil {
				f.Value = &givenVal{Value: f.Value, given: &o.tokenFlag}
			}
			fs.StringVar(&o.tokenFile, "token-file", "", "read the worker token from `FILE` (mode 0600 or 0400; the production way)")
			fs.StringVar(&o.runAs, "run-as", "", "run jobs as `USER` (a name, UID or UID:GID); the worker must run as root")
			fs.Var(&o.jobEnv, "job-env", "pass `NAME` (the worker's value) or NAME=VALUE to every job's environment (repeatable)")
			fs.StringVar(&o.logDir, "log-dir", filepath.Join(os.TempDir(), "barista-worker"), "`DIR` for job output logs: job-ID-attempt-N.log, stdout and stderr, never deleted (mode 0700)")
			fs.StringVar(&o.workDir, "work-dir", "", "`DIR` for each run's own directory, job-ID-attempt-N, removed when the run ends (default $TMPDIR/barista-jobs-ID)")
			numFlag(fs, &o.maxLog, "max-log-bytes", runner.DefaultMaxLogBytes, 4096, 1<<40, "bound of each job's log file, in `BYTES`")
			fs.StringVar(&o.logLevel, "log-level", "info", "log `LEVEL`")
			fs.BoolVar(&o.logJSON, "log-json", false, "log JSON lines")
			o.cgroup.register(fs)
			fs.BoolVar(&o.sepReady, "test-separate-ready", false, "send each Ready apart from the Finished before it, as workers of older builds do (compatibility tests only)")
			fs.BoolVar(&o.startNow, "test-started-at-once", false, "send each run's Started as soon as it starts, as workers of older builds do (compatibility tests only)")
		},
		run: runWorker,
	}))
	register("worker drain", typed(&spec[drainOpts]{
		synopsis: "Stop new assignments to a worker (an admin's or the worker's own token)",
		usage:    "ID [--undo] [--create]",
		help: `Drains a worker: it finishes its job and gets no new one, until
"worker drain ID --undo". An unknown worker ID is NOT_FOUND; --create
drains a worker that has not connected yet, so that it gets no job when
it does.`,
		flags: func(fs *flag.FlagSet, o *drainOpts) {
			o.register(fs)
			fs.BoolVar(&o.undo, "undo", false, "resume assignments")
			fs.BoolVar(&o.create, "create", false, "drain a worker that has not connected yet")
		},
		run: func(env *cmdEnv, opts *drainOpts, args []string) error {
			if len(args) != 1 {
				return usageError("worker drain needs one worker ID")
			}
			if _, err := ask(opts.call, pb.NewWorkerClient, pb.WorkerClient.Drain, &pb.DrainRequest{WorkerId: args[0], Undrain: opts.undo, Create: opts.create}); err != nil {
				return err
			}
			verb := "drained"
			if opts.undo {
				verb = "undrained"
			}
			fmt.Fprintf(env.stdout, "worker %s %s\n", args[0], verb)
			return nil
		},
	}))
}

func runWorker(env *cmdEnv, opts *workerOpts, args []string) error {
	if len(args) > 0 {
		return usageError("unexpected argument %q", args[0])
	}
	size, err := sfq.ParseSize(opts.size)
	if err != nil {
		return usageError("--size: %v", err)
	}
	if err := sfq.ValidatePoolName(opts.pool); err != nil {
		return usageError("--pool: %v", err)
	}
	copts, err := opts.options()
	if err != nil {
		return err
	}
	log := newLogger(opts.logLevel, opts.logJSON).Named("worker")
	if copts.Token, err = opts.workerToken(log); err != nil {
		return err
	}
	// Jobs get a scrubbed environment; the worker's own children, if any,
	// should not find the token in theirs either.
	os.Unsetenv("BARISTA_TOKEN")
	if a := client.TokenInClear(strings.Split(opts.servers, ","), copts.Token, copts.TLS); a != "" && !opts.insecureGRPC {
		return tokenInClearError(a)
	}
	dial := client.DialOptions(copts.Token, copts.TLS)
	if copts.TLS == nil && opts.insecureGRPC {
		dial = client.InsecureDialOptions(copts.Token)
	}
	if err := runner.EnableSubreaper(); err != nil {
		log.Warn("cannot become a child subreaper: orphaned grandchildren of a job escape measurement", "error", err)
	}
	if err := runner.MakeUndumpable(); err != nil {
		log.Warn("cannot hide this process's memory and environment from processes of its user", "error", err)
	}
	if opts.workDir == "" {
		opts.workDir = defaultWorkDir(opts.id)
	}
	pcfg := worker.ProcessConfig{LogDir: opts.logDir, MaxLogBytes: opts.maxLog, WorkDir: opts.workDir, WorkerID: opts.id}
	if opts.runAs != "" {
		if pcfg.User, err = worker.LookupUser(opts.runAs); err != nil {
			return usageError("--run-as: %v", err)
		}
	} else if os.Geteuid() == 0 {
		log.Warn("the worker runs as root without --run-as: every job runs as root and can read the worker's token; give --run-as USER (docs/workers.md)")
	}
	if pcfg.Env, err = worker.BaseEnv(os.Getenv, opts.jobEnv); err != nil {
		return usageError("--job-env: %v", err)
	}
	if pcfg.Cgroups, err = opts.cgroup.open(opts.id, log); err != nil {
		return err
	}
	if pcfg.Cgroups != nil {
		defer pcfg.Cgroups.Close() // after a.Run: no run is live
	}
	pcfg.Limits = opts.cgroup.limits
	procs, err := worker.NewProcessRunner(pcfg)
	if ce := (*worker.ConfigError)(nil); errors.As(err, &ce) {
		name := map[string]string{"User": "--run-as", "LogDir": "--log-dir", "WorkDir": "--work-dir"}[ce.Field]
		return usageError("%s: %v", name, ce.Err)
	} else if err != nil {
		return err
	}
	wcfg := worker.Config{
		ID: opts.id, Size: worker.Size(size.String()), Pool: opts.pool, Servers: strings.Split(opts.servers, ","), Dial: dial, Logger: slogOf(log),
		Runner: procs,
	}
	workercompat.Set(&wcfg, workercompat.Options{SeparateReady: opts.sepReady, StartedAtOnce: opts.startNow})
	// One slot is an agent, as before; more are a Worker's slots (ID-1 ..
	// ID-N, one stream to the leader).
	var a interface {
		Run(context.Context) error
		Drain()
	}
	if opts.slots > 1 {
		wcfg.MaxConcurrent = opts.slots
		a, err = worker.NewWorker(wcfg)
	} else {
		a, err = worker.New(wcfg)
	}
	if err != nil {
		return usageError("%v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		<-sigs
		log.Info("draining: finishing the current job, then exiting (signal again to stop now)")
		a.Drain()
		<-sigs
		log.Warn("stopping now")
		cancel()
	}()
	runAs := "the worker's user"
	if pcfg.User != nil {
		runAs = pcfg.User.String()
	}
	log.Info("worker starting", "id", opts.id, "slots", opts.slots, "size", size, "pool", opts.pool, "servers", opts.servers, "log_dir", opts.logDir, "work_dir", opts.workDir, "jobs_run_as", runAs)
	return a.Run(ctx)
}

// defaultWorkDir is the --work-dir of worker id: one of its own, since a
// run's directory is named by its job and attempt alone, directly in the
// temporary directory, whose sticky bit keeps other users from replacing
// it.
func defaultWorkDir(id string) string {
	safe := []byte(id)
	for i, c := range safe {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			safe[i] = '_'
		}
	}
	return filepath.Join(os.TempDir(), "barista-jobs-"+string(safe))
}

// workerToken is the worker's token: from --token-file, or else from
// --token or $BARISTA_TOKEN, which are warned about when a server is not
// on loopback.
func (o *workerOpts) workerToken(log hclog.Logger) (string, error) {
	if o.tokenFile == "" {
		if o.token != "" && !allLoopback(o.servers) {
			if o.tokenFlag {
				log.Warn("the worker token is on the command line, which every user of this machine can read (ps, /proc/PID/cmdline): use --token-file with a file of mode 0600 (docs/workers.md)")
			} else {
				log.Warn("the worker token comes from $BARISTA_TOKEN: an environment is easily handed on (to child processes, to dumps, to whoever can read the unit or container spec); use --token-file with a file of mode 0600 (docs/workers.md)")
			}
		}
		return o.token, nil
	}
	if o.tokenFlag {
		return "", usageError("--token and --token-file exclude each other")
	}
	if os.Getenv("BARISTA_TOKEN") != "" {
		log.Warn("$BARISTA_TOKEN is set but --token-file wins: remove the token from the environment")
	}
	tok, err := readSecretFile(o.tokenFile, false)
	if err != nil {
		return "", usageError("--token-file: %v", err)
	}
	return tok, nil
}

// allLoopback reports whether every address of a --server list is on
// loopback (names resolved; an unresolvable one is not).
func allLoopback(servers string) bool {
	for _, addr := range strings.Split(servers, ",") {
		if addr = strings.TrimSpace(addr); addr == "" {
			continue
		}
		if loop, err := loopbackOnly(addr); err != nil || !loop {
			return false
		}
	}
	return true
}

// givenVal records whether a flag was set on the command line, as apart
// from its default (an environment variable's value).
type givenVal struct {
	flag.Value
	given *bool
}

func (v *givenVal) Set(s string) error { *v.given = true; return v.Value.Set(s) }

type drainOpts struct {
	clientFlags
	undo   bool
	create bool
}
