package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"
	"unicode"

	"barista/fsm"
	pb "barista/proto"
	"barista/rpc/client"
)

// tenantFlags adds --tenant to the client flags.
type tenantFlags struct {
	clientFlags
	tenant string
	stale  bool
}

func (t *tenantFlags) register(fs *flag.FlagSet) {
	t.clientFlags.register(fs)
	fs.StringVar(&t.tenant, "tenant", os.Getenv("BARISTA_TENANT"), "`TENANT` (may be omitted with a client token; $BARISTA_TENANT)")
	fs.BoolVar(&t.stale, "stale", false, "read this node's state without asking the leader (faster, maybe behind)")
}

func msTime(ms int64) string {
	if ms == 0 {
		return ""
	}
	// Always three decimals: columns of times line up.
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// termSafe makes text a tenant's job wrote (or named) safe to print on a
// terminal: every control character (escape sequences could move the
// cursor, rewrite what is shown or set the window title) is shown as a Go
// escape, \x1b; tabs and, with lines, newlines stay.
func termSafe(s string, lines bool) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\t' || (lines && r == '\n'):
			b.WriteRune(r)
		case unicode.IsControl(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// wallMs is the wall-clock time to show for a moment the API gives both
// ways: its wall time, or its cluster time from a server that sent none
// (a build before wall times, or a job that has not ended: both 0).
func wallMs(wall, cluster int64) int64 {
	if wall != 0 {
		return wall
	}
	return cluster
}

// wallRow shows a wall time, and the cluster time beside it when they are
// a second or more apart (cluster time pauses while no leader runs; every
// deadline runs on it).
func wallRow(wall, cluster int64) string {
	w := wallMs(wall, cluster)
	s := msTime(w)
	if d := w - cluster; d <= -1000 || d >= 1000 {
		s += " (cluster time " + msTime(cluster) + ")"
	}
	return s
}

func sizeName(s pb.Size) string {
	if sz, err := fsm.SizeFromPB(s); err == nil {
		return sz.String()
	}
	return ""
}

// jobJSON is the JSON form of a job (the CLI contract's keys); "payload"
// only when the job was read with it.
func jobJSON(j *pb.Job, payload bool) map[string]any {
	m := map[string]any{
		"job_id": j.JobId, "tenant": j.Tenant, "state": j.State, "attempt": j.Attempt, "failures": j.Failures,
		"max_attempts": j.MaxAttempts, "size": sizeName(j.Size), "est_cost_ms": j.EstCostMs, "cpu_ms": j.CpuMs,
		"job_type": j.JobType, "idempotency_key": j.IdempotencyKey,
		"submitted_at": msTime(wallMs(j.SubmittedWallMs, j.SubmittedAtMs)), "cluster_submitted_at_ms": j.SubmittedAtMs,
		"ended_at": msTime(wallMs(j.EndedWallMs, j.EndedAtMs)), "cluster_ended_at_ms": j.EndedAtMs,
		"worker_id": j.WorkerId, "cancel": j.Cancel, "timeout_ms": j.TimeoutMs, "start_tag_ms": j.StartTagMs,
		"class": className(j.Class), "est_source": j.EstSource,
		"deadline_at": msTime(j.DeadlineAtMs), "deadline_missed": j.DeadlineMissed, "group": j.Group,
	}
	if payload {
		m["payload"] = string(j.Payload)
	}
	if j.HasResult {
		m["exit_code"], m["stderr_tail"], m["stdout_tail"] = j.ExitCode, j.StderrTail, j.StdoutTail
	}
	return m
}

// estimated shows a job's estimate and where it came from (submitted,
// ema or default), when the server says.
func estimated(j *pb.Job) string {
	s := (time.Duration(j.EstCostMs) * time.Millisecond).String()
	if j.EstSource != "" {
		s += " (" + j.EstSource + ")"
	}
	return s
}

func parseJobID(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, usageError("bad job id %q", s)
	}
	return id, nil
}

func init() {
	register("job", &command{
		synopsis: "Show one job",
		usage:    "ID [--tenant NAME] [--json]",
		help: `Shows a job: its state, attempts, cost, times, the worker that runs it
(or ran its last attempt), and once it ended its exit code and the last
4 KiB of its stdout and stderr. The whole output is on that worker's disk:
job-ID-attempt-N.log in its --log-dir.

Times are the leader's wall clock (UTC). Every deadline runs on cluster
time, which pauses while no leader runs: when the two differ by a second
or more, the cluster time is shown beside. --json has both:
"submitted_at" and "ended_at" (wall clock, RFC 3339) and
"cluster_submitted_at_ms" and "cluster_ended_at_ms".`,
		flags: func(fs *flag.FlagSet) any { o := &tenantFlags{}; o.register(fs); return o },
		run: func(env *cmdEnv, o any, args []string) error {
			opts := o.(*tenantFlags)
			if len(args) != 1 {
				return usageError("job needs one ID")
			}
			id, err := parseJobID(args[0])
			if err != nil {
				return err
			}
			var j *pb.Job
			err = opts.with(func(cl *client.Client) (err error) {
				j, err = cl.GetJob(context.Background(), &pb.GetJobRequest{Tenant: opts.tenant, JobId: id, Read: &pb.ReadOptions{Stale: opts.stale}})
				return err
			})
			if err != nil {
				return err
			}
			if opts.json {
				return printJSON(env.stdout, jobJSON(j, true))
			}
			rows := [][2]string{
				{"job", fmt.Sprint(j.JobId)}, {"tenant", j.Tenant}, {"state", j.State},
				{"size", sizeName(j.Size)}, {"class", className(j.Class)},
				{"attempt", fmt.Sprintf("%d (failures %d of max %d)", j.Attempt, j.Failures, j.MaxAttempts)},
				{"estimated", estimated(j)},
				{"cpu", (time.Duration(j.CpuMs) * time.Millisecond).String()},
				{"submitted", wallRow(j.SubmittedWallMs, j.SubmittedAtMs)},
			}
			if j.DeadlineAtMs != 0 {
				d := msTime(j.DeadlineAtMs)
				if j.DeadlineMissed {
					d += " (missed: still queued)"
				}
				rows = append(rows, [2]string{"deadline", d})
			}
			if j.Group != "" {
				rows = append(rows, [2]string{"group", j.Group})
			}
			if j.JobType != "" {
				rows = append(rows, [2]string{"type", termSafe(j.JobType, false)})
			}
			if j.IdempotencyKey != "" {
				rows = append(rows, [2]string{"key", termSafe(j.IdempotencyKey, false)})
			}
			if j.WorkerId != "" {
				rows = append(rows, [2]string{"worker", j.WorkerId})
			}
			if j.Cancel != "none" {
				rows = append(rows, [2]string{"cancel", j.Cancel})
			}
			if j.EndedAtMs != 0 {
				rows = append(rows, [2]string{"ended", wallRow(j.EndedWallMs, j.EndedAtMs)})
			}
			if j.HasResult {
				rows = append(rows, [2]string{"exit code", fmt.Sprint(j.ExitCode)})
			}
			if j.WorkerId != "" && j.Attempt > 0 {
				rows = append(rows, [2]string{"output", fmt.Sprintf("job-%d-attempt-%d.log in the --log-dir of worker %s", j.JobId, j.Attempt, j.WorkerId)})
			}
			printTable(env.stdout, rows)
			for _, t := range [][2]string{{"stdout", j.StdoutTail}, {"stderr", j.StderrTail}} {
				if t[1] != "" {
					fmt.Fprintf(env.stdout, "%s (tail):\n%s", t[0], termSafe(t[1], true))
					if !strings.HasSuffix(t[1], "\n") {
						fmt.Fprintln(env.stdout)
					}
				}
			}
			return nil
		},
	})
	type jobsOpts struct {
		tenantFlags
		state   string
		limit   uint32
		page    string
		payload bool
	}
	register("jobs", &command{
		synopsis: "List a tenant's jobs",
		usage:    "[--tenant NAME] [--state STATE] [--limit N] [--page-token TOKEN] [--payload] [--json]",
		help: `Lists jobs in ID order, optionally of one state (queued, assigned,
running, completed, failed, cancelled, timed_out). With --json prints one
JSON object per job; with --payload too, each object has the job's
"payload" (without --json, --payload changes nothing). A page holds at most
--limit jobs and about 3 MiB: with payloads it may hold fewer. When more
jobs remain, the token for the next page is printed on stderr
("--page-token TOKEN").`,
		flags: func(fs *flag.FlagSet) any {
			o := &jobsOpts{}
			o.tenantFlags.register(fs)
			fs.StringVar(&o.state, "state", "", "only jobs in this `STATE`")
			numFlag(fs, &o.limit, "limit", 100, 1, 1000, "at most `N` jobs")
			fs.StringVar(&o.page, "page-token", "", "continue from this `TOKEN`")
			fs.BoolVar(&o.payload, "payload", false, "with --json, include each job's payload")
			return o
		},
		run: func(env *cmdEnv, o any, args []string) error {
			opts := o.(*jobsOpts)
			if len(args) > 0 {
				return usageError("unexpected argument %q", args[0])
			}
			var resp *pb.ListJobsResponse
			err := opts.with(func(cl *client.Client) (err error) {
				resp, err = cl.ListJobs(context.Background(), &pb.ListJobsRequest{Tenant: opts.tenant, State: opts.state,
					PageSize: opts.limit, PageToken: opts.page, Read: &pb.ReadOptions{Stale: opts.stale},
					IncludePayload: opts.payload && opts.json})
				return err
			})
			if err != nil {
				return err
			}
			if opts.json {
				for _, j := range resp.Jobs {
					if err := printJSON(env.stdout, jobJSON(j, opts.payload)); err != nil {
						return err
					}
				}
			} else {
				fmt.Fprintf(env.stdout, "%-8s %-10s %-4s %7s %10s %10s %-24s %s\n", "ID", "STATE", "SIZE", "ATTEMPT", "EST", "CPU", "SUBMITTED", "TYPE")
				for _, j := range resp.Jobs {
					fmt.Fprintf(env.stdout, "%-8d %-10s %-4s %7d %10s %10s %-24s %s\n", j.JobId, j.State, sizeName(j.Size), j.Attempt,
						time.Duration(j.EstCostMs)*time.Millisecond, time.Duration(j.CpuMs)*time.Millisecond,
						msTime(wallMs(j.SubmittedWallMs, j.SubmittedAtMs)), termSafe(j.JobType, false))
				}
			}
			if resp.NextPageToken != "" {
				fmt.Fprintf(env.stderr, "more: --page-token %s\n", resp.NextPageToken)
			}
			return nil
		},
	})
	register("cancel", &command{
		synopsis: "Cancel a job",
		usage:    "ID [--tenant NAME]",
		help: `A queued job is cancelled at once. An assigned or running job is marked
cancel-requested; its worker is told to stop (SIGTERM, then SIGKILL after
the grace) and the job ends cancelled when the worker confirms or its lease
expires.`,
		flags: func(fs *flag.FlagSet) any { o := &tenantFlags{}; o.register(fs); return o },
		run: func(env *cmdEnv, o any, args []string) error {
			opts := o.(*tenantFlags)
			if len(args) != 1 {
				return usageError("cancel needs one ID")
			}
			id, err := parseJobID(args[0])
			if err != nil {
				return err
			}
			var resp *pb.CancelJobResponse
			if err := opts.with(func(cl *client.Client) (err error) {
				resp, err = cl.CancelJob(context.Background(), &pb.CancelJobRequest{Tenant: opts.tenant, JobId: id})
				return err
			}); err != nil {
				return err
			}
			if opts.json {
				return printJSON(env.stdout, map[string]any{"job_id": id, "state": resp.State, "cancel_requested": resp.CancelRequested})
			}
			if resp.CancelRequested {
				fmt.Fprintf(env.stdout, "job %d: cancel requested (it is %s; the worker is being told to stop)\n", id, resp.State)
			} else {
				fmt.Fprintf(env.stdout, "job %d: %s\n", id, resp.State)
			}
			return nil
		},
	})
	type watchOpts struct {
		tenantFlags
		from      uint64
		job       uint64
		untilIdle bool
	}
	register("watch", &command{
		synopsis: "Stream a tenant's job events",
		usage:    "[--tenant NAME] [--from SEQ | --job ID | --until-idle] [--json]",
		help: `Streams job events (queued, assigned, started, requeued, completed,
failed, cancel_requested, cancelled, timed_out) in order until interrupted.
--from SEQ starts at that event; without it the stream starts with the
next new event. If the connection breaks or the node is unavailable,
watch reconnects and resumes after the last event it printed: no gap, no
event twice. It moves on to the next --server at once; once it has tried
every server it waits 300ms, doubling up to 10s, and starts again at
300ms once an event arrives. An error that retrying cannot clear
(PERMISSION_DENIED, NOT_FOUND, UNAUTHENTICATED, OUT_OF_RANGE, ...) ends
the watch with the error and exit code 1. With --json prints one JSON
object per event.

--job ID prints only that job's events, from the oldest retained one
(or --from), and exits when the job ends: exit code 0 if it completed,
3 if it failed, 4 if it timed out, 5 if it was cancelled (1 if it is
not found). --until-idle exits once the tenant has no queued or running
job (exit code 0).

An event's time is the leader's wall clock when it happened ("at"; with
--json also "cluster_at_ms", its cluster time).`,
		flags: func(fs *flag.FlagSet) any {
			o := &watchOpts{}
			o.tenantFlags.register(fs)
			numFlag(fs, &o.from, "from", 0, 0, math.MaxUint64, "first event `SEQ` to print (0: the next new one)")
			numFlag(fs, &o.job, "job", 0, 1, math.MaxUint64, "only the events of job `ID`; exit when it ends")
			fs.BoolVar(&o.untilIdle, "until-idle", false, "exit once the tenant has no queued or running job")
			return o
		},
		run: func(env *cmdEnv, o any, args []string) error {
			opts := o.(*watchOpts)
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
	})
	register("usage", &command{
		synopsis: "Show a tenant's running and queued jobs, billed CPU, weight and tag",
		usage:    "[--tenant NAME] [--groups N] [--json]",
		help: `Shows a tenant's running and queued jobs (by size), its billed CPU, weight,
finish tag and counters, and its groups with the most queued jobs (then
the most running, then by name; at most --groups), each with its running
and queued jobs and the cap in force.`,
		flags: func(fs *flag.FlagSet) any {
			o := &usageOpts{}
			o.register(fs)
			numFlag(fs, &o.groups, "groups", 10, 1, 1000, "list at most `N` groups")
			return o
		},
		run: func(env *cmdEnv, o any, args []string) error {
			opts := o.(*usageOpts)
			if len(args) > 0 {
				return usageError("unexpected argument %q", args[0])
			}
			var u *pb.TenantUsageResponse
			if err := opts.with(func(cl *client.Client) (err error) {
				u, err = cl.TenantUsage(context.Background(), &pb.TenantUsageRequest{Tenant: opts.tenant, TopGroups: opts.groups,
					Read: &pb.ReadOptions{Stale: opts.stale}})
				return err
			}); err != nil {
				return err
			}
			groups := make([]map[string]any, 0, len(u.Groups))
			for _, g := range u.Groups {
				groups = append(groups, map[string]any{"name": g.Name, "running": g.Running, "queued": g.Queued, "limit": g.Limit})
			}
			tier, _ := fsm.TierFromPB(u.Tier)
			m := map[string]any{
				"tenant": u.Tenant, "tier": tier.String(), "running": u.Running, "queued": u.Queued,
				"running_by_size": u.RunningBySize, "queued_by_size": u.QueuedBySize, "inflight_cpu_ms": u.InflightCpuMs,
				"cpu_billed_ms": u.CpuBilledMs, "zombie_cpu_ms": u.ZombieCpuMs, "weight": u.Weight,
				"finish_tag_ms": u.FinishTagMs, "virtual_now_ms": u.VirtualNowMs, "usage_ms": u.UsageMs,
				"submitted": u.Submitted, "dispatches": u.Dispatches, "completed": u.Completed, "failed": u.Failed,
				"cancelled": u.Cancelled, "timed_out": u.TimedOut, "failures": u.Failures, "requeues": u.Requeues,
				"groups": groups, "group_count": u.GroupCount,
			}
			if opts.json {
				return printJSON(env.stdout, m)
			}
			printTable(env.stdout, [][2]string{
				{"tenant", u.Tenant + " (" + tier.String() + ")"},
				{"weight", strconv.FormatFloat(u.Weight, 'f', -1, 64)},
				{"running", fmt.Sprintf("%d (sm/md/lg %v)", u.Running, u.RunningBySize)},
				{"queued", fmt.Sprintf("%d (sm/md/lg %v)", u.Queued, u.QueuedBySize)},
				{"cpu billed", (time.Duration(u.CpuBilledMs) * time.Millisecond).String()},
				{"finish tag", u.FinishTagMs + " virtual ms (virtual now " + u.VirtualNowMs + ")"},
				{"jobs", fmt.Sprintf("%d submitted, %d completed, %d failed, %d cancelled, %d timed out", u.Submitted, u.Completed, u.Failed, u.Cancelled, u.TimedOut)},
				{"runs", fmt.Sprintf("%d dispatches, %d failed runs or lost leases, %d requeues", u.Dispatches, u.Failures, u.Requeues)},
				{"groups", fmt.Sprint(u.GroupCount)},
			})
			if len(u.Groups) > 0 {
				fmt.Fprintf(env.stdout, "\n%-32s %7s %7s %6s\n", "GROUP", "RUNNING", "QUEUED", "LIMIT")
				for _, g := range u.Groups {
					fmt.Fprintf(env.stdout, "%-32s %7d %7d %6s\n", groupName(g.Name), g.Running, g.Queued, capText(g.Limit))
				}
			}
			return nil
		},
	})
}

// usageOpts are the flags of "barista usage".
type usageOpts struct {
	tenantFlags
	groups uint32
}

func eventJSON(ev *pb.Event) map[string]any {
	m := map[string]any{"seq": ev.Seq, "job_id": ev.JobId, "tenant": ev.Tenant, "attempt": ev.Attempt, "kind": ev.Kind,
		"at": msTime(wallMs(ev.WallMs, ev.AtMs)), "cluster_at_ms": ev.AtMs}
	if ev.WorkerId != "" {
		m["worker_id"] = ev.WorkerId
	}
	switch ev.Kind {
	case "completed", "failed", "cancelled", "timed_out", "requeued":
		m["cpu_ms"], m["exit_code"] = ev.CpuMs, ev.ExitCode
	}
	if ev.Reason != "" {
		m["reason"] = ev.Reason
	}
	return m
}

// watchBackoff is how long watch waits before reconnecting: first, then
// doubled after each failure up to most, and back to first once an event
// arrives.
var watchBackoff = struct{ first, most time.Duration }{300 * time.Millisecond, 10 * time.Second}

// jobExit ends watch --job with the exit code of the job's final state.
func jobExit(opts *tenantFlags, id uint64) error {
	var j *pb.Job
	if err := opts.with(func(cl *client.Client) (err error) {
		j, err = cl.GetJob(context.Background(), &pb.GetJobRequest{Tenant: opts.tenant, JobId: id})
		return err
	}); err != nil {
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
