package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/rpc/agent"
	"github.com/baristahq/barista/rpc/agent/runner"
	"github.com/baristahq/barista/rpc/client"
	"github.com/baristahq/barista/sfq"
)

type workerOpts struct {
	clientFlags
	size     string
	id       string
	logDir   string
	maxLog   int64
	logLevel string
	logJSON  bool
	sepReady bool
	startNow bool
}

func init() {
	register("worker", typed(&spec[workerOpts]{
		synopsis: "Run a worker agent: one job at a time as a child process",
		usage:    "--size sm|md|lg [--server ADDRS] [--id ID] [--token T] [--log-dir DIR]",
		help: `Connects to the cluster (any node; a follower redirects it to the leader)
and runs one job at a time. A job's payload is a JSON command line:

  {"argv": ["python3", "train.py", "--epochs", "3"], "env": {"SEED": "7"}, "dir": "/srv/jobs"}

(barista submit -- COMMAND ARGS... writes it). The job runs in its own
process group; the worker is a child subreaper, so orphaned grandchildren
are still counted and killed. CPU time is measured from the OS (/proc
while it runs, rusage at the end), never taken from the job. stdout and
stderr go to DIR/job-ID-attempt-N.log (bounded); the last 4 KiB of stderr
are reported with the result.

Cancel: SIGTERM to the job's whole tree, SIGKILL after the cancel grace.
Reject, or no acknowledged heartbeat for self_kill_after: SIGKILL at once,
and the result is dropped. The worker follows the leader across failovers
and resumes its job's lease on reconnect. The leader ends a stream with
more than 100 refused reports within 10 s (RESOURCE_EXHAUSTED, naming the
worker: docs/workers.md, "Limits"); the worker reconnects with backoff.

SIGINT or SIGTERM drains the worker: it finishes its current job, takes no
new one, and exits; a second signal kills the job and exits at once.

--token is a worker token. If the servers bind it to worker IDs
(worker_id in [[auth.tokens]]), --id must be one of them, or the worker
exits with PERMISSION_DENIED. While another session of the same ID is
live, the worker is refused (ABORTED) and retries with backoff.`,
		flags: func(fs *flag.FlagSet, o *workerOpts) {
			o.register(fs)
			fs.StringVar(&o.size, "size", "", "container `SIZE`: sm, md or lg (required)")
			host, _ := os.Hostname()
			fs.StringVar(&o.id, "id", fmt.Sprintf("%s-%d", host, os.Getpid()), "unique worker `ID`")
			fs.StringVar(&o.logDir, "log-dir", filepath.Join(os.TempDir(), "barista-worker"), "`DIR` for job output logs: job-ID-attempt-N.log, stdout and stderr, never deleted")
			numFlag(fs, &o.maxLog, "max-log-bytes", runner.DefaultMaxLogBytes, 4096, 1<<40, "bound of each job's log file, in `BYTES`")
			fs.StringVar(&o.logLevel, "log-level", "info", "log `LEVEL`")
			fs.BoolVar(&o.logJSON, "log-json", false, "log JSON lines")
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
	copts, err := opts.options()
	if err != nil {
		return err
	}
	dial := client.DialOptions(copts.Token, copts.TLS)
	log := newLogger(opts.logLevel, opts.logJSON).Named("worker")
	if err := runner.EnableSubreaper(); err != nil {
		log.Warn("cannot become a child subreaper: orphaned grandchildren of a job escape measurement", "error", err)
	}
	a, err := agent.New(agent.Config{
		ID: opts.id, Size: size, Servers: strings.Split(opts.servers, ","), Dial: dial, Logger: log,
		Runner:        agent.ProcessRunner{LogDir: opts.logDir, MaxLogBytes: opts.maxLog, WorkerID: opts.id},
		SeparateReady: opts.sepReady, StartedAtOnce: opts.startNow,
	})
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
	log.Info("worker starting", "id", opts.id, "size", size, "servers", opts.servers, "log_dir", opts.logDir)
	return a.Run(ctx)
}

type drainOpts struct {
	clientFlags
	undo   bool
	create bool
}
