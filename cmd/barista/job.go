package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/baristahq/barista/internal/termtext"

	"github.com/baristahq/barista/client"
	pb "github.com/baristahq/barista/proto"
)

func init() {
	register("job", typed(&spec[tenantFlags]{
		synopsis: "Show one job",
		usage:    "ID [--tenant NAME] [--json]",
		help: `Shows a job: its state, attempts, cost, times, the worker that runs it
(or ran its last attempt), and once it ended its exit code and the last
4 KiB of its stdout and stderr. The whole output is on that worker's disk:
job-ID-attempt-N.log in its --log-dir.

Times are the leader's wall clock (UTC). Every deadline runs on cluster
time, which pauses while no leader runs: when the two differ by a second
or more, the cluster time is shown beside. A time to come (due,
expires, a deadline) is shown from now and as wall time: "in 5.5s
(2026-12-03T12:31:04Z)". --json has both: "submitted_at", "ended_at",
"deadline_at", "due_at", "expire_at" (wall clock, RFC 3339) and
"cluster_submitted_at_ms", "cluster_ended_at_ms",
"cluster_deadline_at_ms", "cluster_due_at_ms", "cluster_expire_at_ms".`,
		run: func(env *cmdEnv, opts *tenantFlags, args []string) error {
			_, j, err := withJob(&opts.clientFlags, args, "job needs one ID", func(cl *client.Client, id uint64) (*pb.Job, error) {
				return cl.GetJob(context.Background(), &pb.GetJobRequest{Tenant: opts.tenant, JobId: id, Read: &pb.ReadOptions{Stale: opts.stale}})
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
				{"cpu", cpuUsed(j)},
				{"submitted", wallRow(j.SubmittedWallMs, j.SubmittedAtMs)},
			}
			if j.Pool != "" { // a server of a build before pools names none
				rows = slices.Insert(rows, 2, [2]string{"pool", j.Pool})
			}
			if j.DeadlineAtMs != 0 {
				d := clusterWhen(j.Now, j.DeadlineAtMs)
				if j.DeadlineMissed {
					d += " (missed: still queued)"
				}
				rows = append(rows, [2]string{"deadline", d})
			}
			if j.DueAtMs != 0 {
				rows = append(rows, [2]string{"due", clusterWhen(j.Now, j.DueAtMs) + "; barista job run-now releases it now"})
			}
			if j.ExpireAtMs != 0 {
				rows = append(rows, [2]string{"expires", clusterWhen(j.Now, j.ExpireAtMs) + " if not dispatched by then"})
			}
			if j.Group != "" {
				rows = append(rows, [2]string{"group", j.Group})
			}
			if j.JobType != "" {
				rows = append(rows, [2]string{"type", termtext.Safe(j.JobType, false)})
			}
			if j.IdempotencyKey != "" {
				rows = append(rows, [2]string{"key", termtext.Safe(j.IdempotencyKey, false)})
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
			if j.Failure == "oom_killed" {
				rows = append(rows, [2]string{"failure", "oom_killed: the kernel killed the last run for the memory limit of its size (memory.max)"})
			} else if j.Failure != "" {
				rows = append(rows, [2]string{"failure", j.Failure})
			}
			if j.Snoozes != 0 {
				rows = append(rows, [2]string{"snoozes", fmt.Sprintf("%d in a row (the run asked to be tried again later)", j.Snoozes)})
			}
			if pl := j.Place; pl != nil {
				rows = append(rows, [2]string{"place", placeRow(pl, j.Now)})
			}
			if j.WorkerId != "" && j.Attempt > 0 {
				rows = append(rows, [2]string{"output", fmt.Sprintf("job-%d-attempt-%d.log in the --log-dir of worker %s", j.JobId, j.Attempt, j.WorkerId)})
			}
			printTable(env.stdout, rows)
			for _, t := range [][2]string{{"stdout", j.StdoutTail}, {"stderr", j.StderrTail}} {
				if t[1] != "" {
					fmt.Fprintf(env.stdout, "%s (tail):\n%s", t[0], termtext.Safe(t[1], true))
					if !strings.HasSuffix(t[1], "\n") {
						fmt.Fprintln(env.stdout)
					}
				}
			}
			return nil
		},
	}))
}

// cpuUsed shows a job's CPU and, once a run has ended, where its worker
// measured it (cgroup or proc), when the worker said.
func cpuUsed(j *pb.Job) string {
	cpu := (time.Duration(j.CpuMs) * time.Millisecond).String()
	if j.HasResult && j.CpuSource != "" {
		cpu += " (from " + j.CpuSource + ")"
	}
	return cpu
}
