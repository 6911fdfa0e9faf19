package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/baristahq/barista/internal/termtext"

	"github.com/baristahq/barista/client"
	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
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

// clusterWall is the wall-clock time (RFC 3339) at which a cluster time
// of an answer happens, by the answer's ClockNow ("" for 0; the cluster
// time itself from a server that sends no ClockNow).
func clusterWall(now *pb.ClockNow, ms int64) string {
	if ms == 0 {
		return ""
	}
	if w, ok := client.WallAt(now, ms); ok {
		return msTime(w.UnixMilli())
	}
	return msTime(ms)
}

// clusterWhen says a cluster time of an answer to a person: "in 5.5s
// (2026-12-03T12:31:04Z)" (client.When).
func clusterWhen(now *pb.ClockNow, ms int64) string { return client.When(now, ms) }

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
		"job_id": j.JobId, "tenant": j.Tenant, "pool": j.Pool, "state": j.State, "attempt": j.Attempt, "failures": j.Failures,
		"max_attempts": j.MaxAttempts, "size": sizeName(j.Size), "est_cost_ms": j.EstCostMs, "cpu_ms": j.CpuMs,
		"job_type": j.JobType, "idempotency_key": j.IdempotencyKey,
		"submitted_at": msTime(wallMs(j.SubmittedWallMs, j.SubmittedAtMs)), "cluster_submitted_at_ms": j.SubmittedAtMs,
		"ended_at": msTime(wallMs(j.EndedWallMs, j.EndedAtMs)), "cluster_ended_at_ms": j.EndedAtMs,
		"worker_id": j.WorkerId, "cancel": j.Cancel, "timeout_ms": j.TimeoutMs, "start_tag_ms": j.StartTagMs,
		"class": className(j.Class), "est_source": j.EstSource,
		"deadline_at": clusterWall(j.Now, j.DeadlineAtMs), "deadline_missed": j.DeadlineMissed, "group": j.Group,
		"due_at": clusterWall(j.Now, j.DueAtMs), "expire_at": clusterWall(j.Now, j.ExpireAtMs),
		"cluster_deadline_at_ms": j.DeadlineAtMs, "cluster_due_at_ms": j.DueAtMs, "cluster_expire_at_ms": j.ExpireAtMs,
	}
	if payload {
		m["payload"] = string(j.Payload)
	}
	if j.HasResult {
		m["exit_code"], m["stderr_tail"], m["stdout_tail"] = j.ExitCode, j.StderrTail, j.StdoutTail
		m["cpu_source"], m["failure"] = j.CpuSource, j.Failure
	}
	if j.Snoozes != 0 {
		m["snoozes"] = j.Snoozes
	}
	if j.Place != nil {
		m["place"] = placeJSON(j.Place)
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
	register("jobs", typed(&spec[jobsOpts]{
		synopsis: "List a tenant's jobs",
		usage:    "[--tenant NAME] [--state STATE] [--pool POOL] [--limit N] [--page-token TOKEN] [--oldest-first] [--stale] [--payload] [--json]",
		help: `Lists jobs newest first, as every listing does (--oldest-first: in ID
order from the oldest; HTTP: ?oldest_first=true),
optionally of one state (queued, assigned,
running, completed, failed, cancelled, timed_out, scheduled, expired)
and of one pool (--pool NAME, --pool default for the pool default;
without it, every pool's).
A POOL column shows each job's pool when one of them is of a pool other
than default. With --json prints one JSON object per job; with --payload too, each object has the job's
"payload" (without --json, --payload changes nothing). A page holds at most
--limit jobs and about 3 MiB: with payloads it may hold fewer. When more
jobs remain, the token for the next page is printed on stderr
("--page-token TOKEN").`,
		flags: func(fs *flag.FlagSet, o *jobsOpts) {
			o.tenantFlags.register(fs)
			fs.StringVar(&o.state, "state", "", "only jobs in this `STATE`")
			fs.StringVar(&o.pool, "pool", "", "only jobs of this `POOL`")
			numFlag(fs, &o.limit, "limit", 100, 1, 1000, "at most `N` jobs")
			fs.StringVar(&o.page, "page-token", "", "continue from this `TOKEN`")
			fs.BoolVar(&o.payload, "payload", false, "with --json, include each job's payload")
			fs.BoolVar(&o.oldestFirst, "oldest-first", false, "list from the oldest job up (the default is newest first)")
		},
		run: func(env *cmdEnv, opts *jobsOpts, args []string) error {
			if len(args) > 0 {
				return usageError("unexpected argument %q", args[0])
			}
			if opts.pool != "" {
				if err := sfq.ValidatePoolName(opts.pool); err != nil {
					return usageError("--pool: %v", err)
				}
			}
			resp, err := withCall(opts.with, (*client.Client).ListJobs, &pb.ListJobsRequest{Tenant: opts.tenant, State: opts.state, Pool: opts.pool,
				PageSize: opts.limit, PageToken: opts.page, Read: &pb.ReadOptions{Stale: opts.stale},
				IncludePayload: opts.payload && opts.json, OldestFirst: opts.oldestFirst})
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
				// A POOL column when a job of the page is of another pool
				// than default.
				pools := slices.ContainsFunc(resp.Jobs, func(j *pb.Job) bool { return j.Pool != "" && j.Pool != "default" })
				pool := func(name string) string {
					if !pools {
						return ""
					}
					return fmt.Sprintf("%-12s ", name)
				}
				fmt.Fprintf(env.stdout, "%-8s %-10s %s%-4s %7s %10s %10s %-24s %s\n", "ID", "STATE", pool("POOL"), "SIZE", "ATTEMPT", "EST", "CPU", "SUBMITTED", "TYPE")
				for _, j := range resp.Jobs {
					fmt.Fprintf(env.stdout, "%-8d %-10s %s%-4s %7d %10s %10s %-24s %s\n", j.JobId, j.State, pool(j.Pool), sizeName(j.Size), j.Attempt,
						time.Duration(j.EstCostMs)*time.Millisecond, time.Duration(j.CpuMs)*time.Millisecond,
						msTime(wallMs(j.SubmittedWallMs, j.SubmittedAtMs)), termtext.Safe(j.JobType, false))
				}
			}
			if resp.NextPageToken != "" {
				fmt.Fprintf(env.stderr, "more: --page-token %s\n", resp.NextPageToken)
			}
			return nil
		},
	}))
}

type jobsOpts struct {
	tenantFlags
	state       string
	limit       uint32
	page        string
	payload     bool
	oldestFirst bool
	pool        string
}
