package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"time"

	"github.com/baristahq/barista/client"
	pb "github.com/baristahq/barista/proto"
)

func init() {
	register("watch", typed(&spec[watchOpts]{
		synopsis: "Stream a tenant's job events",
		usage:    "[--tenant NAME] [--from SEQ | --job ID | --until-idle] [--json]",
		help: `Streams job events (queued, assigned, started, requeued, completed,
failed, cancel_requested, cancelled, timed_out) in order until interrupted.
--from SEQ starts at that event (one beyond the newest waits for events
from SEQ on, and says so on stderr); without it the stream starts with
the next new event. If the connection breaks or the node is unavailable,
watch reconnects and resumes after the last event it printed: no gap, no
event twice. It moves on to the next --server at once; once it has tried
every server it waits 300ms, doubling up to 10s, and starts again at
300ms once an event arrives. An error that retrying cannot clear
(PERMISSION_DENIED, NOT_FOUND, UNAUTHENTICATED, OUT_OF_RANGE, ...) ends
the watch with the error and exit code 1. With --json prints one JSON
object per event.

--job ID prints only that job's events, from the oldest retained one
(or --from), and exits when the job ends: at its current ending, not at
an earlier one it has left (a redriven job's history holds its first
ending; the watch goes on past it). Exit code 0 if it completed, 3 if
it failed, 4 if it timed out, 5 if it was cancelled (1 if it is not
found). --until-idle exits once the tenant has no queued or running
job, nor one scheduled to run again (a failed run backing off before its
retry, a snooze; exit code 0); a job that waits out the delay it was
submitted with does not hold it.

An event's time is the leader's wall clock when it happened ("at"; with
--json also "cluster_at_ms", its cluster time).`,
		flags: func(fs *flag.FlagSet, o *watchOpts) {
			o.tenantFlags.register(fs)
			numFlag(fs, &o.from, "from", 0, 0, math.MaxUint64, "first event `SEQ` to print (0: the next new one)")
			numFlag(fs, &o.job, "job", 0, 1, math.MaxUint64, "only the events of job `ID`; exit when it ends")
			fs.BoolVar(&o.untilIdle, "until-idle", false, "exit once the tenant has no queued or running job, nor one backing off or snoozed")
		},
		run: func(env *cmdEnv, opts *watchOpts, args []string) error {
			if len(args) > 0 {
				return usageError("unexpected argument %q", args[0])
			}
			if opts.job != 0 && opts.untilIdle {
				return usageError("--job and --until-idle exclude each other")
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
			defer stop()
			req := &pb.WatchEventsRequest{FromSeq: opts.from, JobId: opts.job, UntilIdle: opts.untilIdle, FromOldest: opts.job != 0 && opts.from == 0}
			if err := watch(ctx, env, &opts.tenantFlags, req); err != nil || opts.job == 0 || ctx.Err() != nil {
				return err
			}
			return jobExit(&opts.tenantFlags, opts.job)
		},
	}))
}

type watchOpts struct {
	tenantFlags
	from      uint64
	job       uint64
	untilIdle bool
}

func eventJSON(ev *pb.Event) map[string]any {
	m := map[string]any{"seq": ev.Seq, "job_id": ev.JobId, "tenant": ev.Tenant, "attempt": ev.Attempt, "kind": ev.Kind,
		"at": msTime(wallMs(ev.WallMs, ev.AtMs)), "cluster_at_ms": ev.AtMs}
	if ev.WorkerId != "" {
		m["worker_id"] = ev.WorkerId
	}
	if ev.Pool != "" {
		m["pool"] = ev.Pool
	}
	switch ev.Kind {
	case "completed", "failed", "cancelled", "timed_out", "requeued":
		m["cpu_ms"], m["exit_code"] = ev.CpuMs, ev.ExitCode
	}
	if ev.Reason != "" {
		m["reason"] = ev.Reason
	}
	if ev.Group != "" {
		m["group"] = ev.Group
	}
	if ev.Schedule != "" {
		// A schedule's event: its slot (cluster time), and a miss's count.
		m["schedule"], m["cluster_slot_ms"] = ev.Schedule, ev.SlotMs
		if ev.Slots != 0 {
			m["slots"] = ev.Slots
		}
	}
	return m
}

// watchBackoff is how long watch waits before reconnecting: first, then
// doubled after each failure up to most, and back to first once an event
// arrives.
var watchBackoff = struct{ first, most time.Duration }{300 * time.Millisecond, 10 * time.Second}

// jobExit ends watch --job with the exit code of the job's final state.
func jobExit(opts *tenantFlags, id uint64) error {
	j, err := withCall(opts.with, (*client.Client).GetJob, &pb.GetJobRequest{Tenant: opts.tenant, JobId: id})
	if err != nil {
		return err
	}
	codes := map[string]int{"completed": 0, "failed": 3, "timed_out": 4, "cancelled": 5}
	code, ok := codes[j.State]
	if !ok {
		return fmt.Errorf("job %d is %s", id, j.State)
	}
	if code == 0 {
		return nil
	}
	return &exitError{code: code, err: fmt.Errorf("job %d %s", id, j.State)}
}

// watch streams events, reconnecting with the cursor after a failure
// that may clear, with exponential backoff (client.Watch); any other
// failure ends it.
func watch(ctx context.Context, env *cmdEnv, opts *tenantFlags, req *pb.WatchEventsRequest) error {
	o, err := opts.options()
	if err != nil {
		return err
	}
	o.OnWatchOpen = func(from, next uint64) {
		if from > next {
			newest := fmt.Sprintf("the newest so far is %d", next-1)
			if next <= 1 {
				newest = "there is none yet"
			}
			fmt.Fprintf(env.stderr, "watch: waiting for events from %d (%s)\n", from, newest)
		}
	}
	o.OnWatchRetry = func(err error, from uint64, wait time.Duration) {
		if err == nil {
			fmt.Fprintf(env.stderr, "watch: the stream ended; reconnecting from %d in %s\n", from, wait)
			return
		}
		fmt.Fprintf(env.stderr, "watch: %v; reconnecting from %d in %s\n", err, from, wait)
	}
	cl, err := opts.newClient(o)
	if err != nil {
		return err
	}
	defer cl.Close()
	err = cl.Watch(ctx, &pb.WatchEventsRequest{Tenant: opts.tenant, FromSeq: req.FromSeq, FromOldest: req.FromOldest,
		JobId: req.JobId, UntilIdle: req.UntilIdle}, func(ev *pb.Event) error {
		if opts.json {
			return printJSON(env.stdout, eventJSON(ev))
		}
		line := fmt.Sprintf("%-8d %s job=%d attempt=%d %s", ev.Seq, msTime(wallMs(ev.WallMs, ev.AtMs)), ev.JobId, ev.Attempt, ev.Kind)
		if ev.WorkerId != "" {
			line += " worker=" + ev.WorkerId
		}
		if ev.Reason != "" {
			line += " reason=" + ev.Reason
		}
		_, err := fmt.Fprintln(env.stdout, line)
		return err
	})
	if ctx.Err() != nil {
		return nil // interrupted
	}
	return err
}
