package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/baristahq/barista/client"
	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/termtext"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/schedule"
)

const scheduleHelp = `A schedule is a tenant's periodic job (SPEC §3 "Schedules";
docs/schedules.md): at each slot of its spec the cluster's leader submits
the schedule's job, under the tenant's quotas and fair share, with the key
schedule/NAME/SLOT, exactly once per slot across any failover. The spec is
five cron fields (minute hour day-of-month month day-of-week, e.g.
"30 2 * * *" or "*/15 9-17 * * MON-FRI") read in --zone (an IANA name,
default UTC), a macro (@yearly, @monthly, @weekly, @daily, @hourly), or
"@every D" (slots at the multiples of D since the Unix epoch, D >= 1s).
A tenant's client token manages its own schedules. Schedules need cluster
feature level 8.`

type scheduleSetOpts struct {
	tenantFlags
	jobFlags
	spec, zone, overlap string
	catchup, jitter     time.Duration
	paused              bool
}

type scheduleGetOpts struct {
	tenantFlags
	next uint
}

type scheduleRunOpts struct {
	tenantFlags
	key string
}

func init() {
	register("schedule set", typed(&spec[scheduleSetOpts]{
		synopsis: "Create or replace a schedule of a tenant",
		usage: "NAME --spec SPEC [--zone ZONE] [--overlap skip|buffer_one|allow] [--catchup DUR] [--jitter DUR] [--paused] [--tenant NAME]\n" +
			"       --size sm|md|lg [--cost DUR] [job flags as submit's] (-- COMMAND [ARGS...] | --payload TEXT) [--json]",
		help: scheduleHelp + `

--overlap says what a slot does while the schedule's previous job has not
ended: skip (the default: no fire while a job of the schedule is waiting
or running; counted skipped), buffer_one (no fire while one waits to
start; one may wait while another runs) or allow (every slot fires).
--catchup DUR (default 60s) is how far behind cluster time a slot still
fires after a time without a leader; older slots are counted missed,
never fired. --jitter DUR fires slot T at T plus a share of DUR fixed
for that slot (the key still says T). --paused makes it paused.

The job is given as to "barista submit": --size, --cost, --type,
--class, --group, --pool, --deadline (from each fire), --delay,
--expire, --max-attempts, --timeout, --retry-backoff, and the command
after -- (or --payload). A change of a schedule takes effect for the
slots after it. Prints the schedule (as "schedule get").`,
		flags: func(fs *flag.FlagSet, o *scheduleSetOpts) {
			*o = scheduleSetOpts{}
			o.tenantFlags.register(fs)
			o.jobFlags.register(fs)
			fs.StringVar(&o.spec, "spec", "", "the schedule's `SPEC`: five cron fields, a macro, or @every D (required)")
			fs.StringVar(&o.zone, "zone", "", "the IANA time `ZONE` of the cron fields (default UTC)")
			fs.StringVar(&o.overlap, "overlap", "skip", "`POLICY` while its previous job lives: skip, buffer_one or allow")
			defineFlag(fs, "catchup", "fire a slot up to this `DURATION` late after a time without a leader (default 60s)",
				durationVal(&o.catchup, fsm.MinCatchupMs*time.Millisecond, fsm.MaxCatchupMs*time.Millisecond).wholeMs())
			defineFlag(fs, "jitter", "spread the fires over this `DURATION` after each slot",
				durationVal(&o.jitter, 0, fsm.MaxJitterMs*time.Millisecond).orZero("none").wholeMs())
			fs.BoolVar(&o.paused, "paused", false, "make the schedule paused")
		},
		run: func(env *cmdEnv, opts *scheduleSetOpts, args []string) error {
			if len(args) < 1 {
				return usageError("schedule set needs NAME")
			}
			if err := fsm.ValidateScheduleName("NAME", args[0]); err != nil {
				return usageError("%v", err)
			}
			if opts.spec == "" {
				return usageError("--spec: required (e.g. \"30 2 * * *\", @daily, \"@every 10m\")")
			}
			overlap, ok := fsm.ParseOverlap(strings.ReplaceAll(opts.overlap, "-", "_"))
			if !ok {
				return usageError("--overlap: %q (want skip, buffer_one or allow)", opts.overlap)
			}
			if _, err := schedule.Parse(opts.spec, opts.zone); err != nil {
				return usageError("%v", err)
			}
			job, err := opts.request("", args[1:])
			if err != nil {
				return err
			}
			req := &pb.SetScheduleRequest{Tenant: opts.tenant, Name: args[0], Spec: opts.spec, Zone: opts.zone, Overlap: fsm.OverlapToPB(overlap),
				JitterMs: opts.jitter.Milliseconds(), Paused: opts.paused, Job: job}
			if opts.catchup != 0 {
				req.CatchupMs = new(opts.catchup.Milliseconds())
			}
			s, err := withCall(opts.with, raw(client.Raw.SetSchedule), req)
			if err != nil {
				return err
			}
			return printSchedule(env, s, opts.json)
		},
	}))
	register("schedule get", typed(&spec[scheduleGetOpts]{
		synopsis: "Show a schedule: its spec, next slots, last slot, counts and jobs",
		usage:    "NAME [--next N] [--tenant NAME] [--json]",
		help:     scheduleHelp + "\n\nSlots are shown in the schedule's zone, with how far from now they are.",
		flags: func(fs *flag.FlagSet, o *scheduleGetOpts) {
			o.tenantFlags.register(fs)
			numFlag(fs, &o.next, "next", 5, 1, 100, "how many next slots to show (`N`)")
		},
		run: func(env *cmdEnv, opts *scheduleGetOpts, args []string) error {
			if len(args) != 1 {
				return usageError("schedule get needs NAME")
			}
			s, err := withCall(opts.with, raw(client.Raw.GetSchedule), &pb.GetScheduleRequest{Tenant: opts.tenant, Name: args[0], Next: uint32(opts.next),
				Read: &pb.ReadOptions{Stale: opts.stale}})
			if err != nil {
				return err
			}
			return printSchedule(env, s, opts.json)
		},
	}))
	register("schedule list", typed(&spec[tenantFlags]{
		synopsis: "List a tenant's schedules by name, each with its next fire",
		usage:    "[--tenant NAME] [--json]",
		help:     scheduleHelp + "\n\nWith --json prints one object per schedule.",
		run: func(env *cmdEnv, opts *tenantFlags, args []string) error {
			if len(args) > 0 {
				return usageError("unexpected argument %q", args[0])
			}
			var list []*pb.Schedule
			err := opts.with(func(cl *client.Client) error {
				for s, err := range cl.Raw().Schedules(context.Background(), &pb.ListSchedulesRequest{Tenant: opts.tenant, PageSize: 1000,
					Read: &pb.ReadOptions{Stale: opts.stale}}) {
					if err != nil {
						return err
					}
					list = append(list, s)
				}
				return nil
			})
			if err != nil {
				return err
			}
			if opts.json {
				for _, s := range list {
					if err := printJSON(env.stdout, scheduleJSON(s)); err != nil {
						return err
					}
				}
				return nil
			}
			fmt.Fprintf(env.stdout, "%-24s %-20s %-16s %-10s %-7s %-26s %6s %7s %6s %7s\n", "NAME", "SPEC", "ZONE", "OVERLAP", "STATE", "NEXT FIRE", "FIRED", "SKIPPED", "MISSED", "REFUSED")
			for _, s := range list {
				fmt.Fprintf(env.stdout, "%-24s %-20s %-16s %-10s %-7s %-26s %6d %7d %6d %7d\n", s.Name, termtext.Safe(s.Spec, false), s.Zone, overlapName(s.Overlap),
					scheduleState(s), slotText(s, s.NextFireMs), s.Fired, s.Skipped, s.Missed, s.Refused)
			}
			return nil
		},
	}))
	for _, c := range []struct {
		name, synopsis string
		resume         bool
	}{{"pause", "Pause a schedule: no slot fires (none is counted missed) until it is resumed", false},
		{"resume", "Resume a paused schedule: the slots after the resume fire", true}} {
		register("schedule "+c.name, typed(&spec[tenantFlags]{
			synopsis: c.synopsis,
			usage:    "NAME [--tenant NAME] [--json]",
			help:     scheduleHelp,
			run: func(env *cmdEnv, opts *tenantFlags, args []string) error {
				if len(args) != 1 {
					return usageError("schedule %s needs NAME", c.name)
				}
				s, err := withCall(opts.with, raw(client.Raw.PauseSchedule), &pb.PauseScheduleRequest{Tenant: opts.tenant, Name: args[0], Resume: c.resume})
				if err != nil {
					return err
				}
				return printSchedule(env, s, opts.json)
			},
		}))
	}
	register("schedule run-now", typed(&spec[scheduleRunOpts]{
		synopsis: "Fire a schedule once, now, whatever its spec, pause and overlap",
		usage:    "NAME [--key KEY] [--tenant NAME] [--json]",
		help: scheduleHelp + `

The job's key is schedule/NAME/run/KEY: with --key a resend fires once
(the same job is answered). Without it the server makes a key. With
--json prints {"job_id", "created", "key"}.`,
		flags: func(fs *flag.FlagSet, o *scheduleRunOpts) {
			o.tenantFlags.register(fs)
			fs.StringVar(&o.key, "key", "", "the run's `KEY`, 1..64 of A-Z a-z 0-9 . _ : @ - (a resend with it fires once)")
		},
		run: func(env *cmdEnv, opts *scheduleRunOpts, args []string) error {
			if len(args) != 1 {
				return usageError("schedule run-now needs NAME")
			}
			r, err := withCall(opts.with, raw(client.Raw.RunScheduleNow), &pb.RunScheduleNowRequest{Tenant: opts.tenant, Name: args[0], Key: opts.key})
			if err != nil {
				return err
			}
			if opts.json {
				return printJSON(env.stdout, map[string]any{"job_id": r.JobId, "created": r.Created, "key": r.Key})
			}
			if r.Created {
				fmt.Fprintf(env.stdout, "schedule %s fired job %d (key %s)\n", args[0], r.JobId, r.Key)
			} else {
				fmt.Fprintf(env.stdout, "schedule %s had fired job %d for key %s already\n", args[0], r.JobId, r.Key)
			}
			return nil
		},
	}))
	register("schedule delete", typed(&spec[tenantFlags]{
		synopsis: "Delete a schedule (the jobs it fired stay)",
		usage:    "NAME [--tenant NAME] [--json]",
		help:     scheduleHelp,
		run: func(env *cmdEnv, opts *tenantFlags, args []string) error {
			if len(args) != 1 {
				return usageError("schedule delete needs NAME")
			}
			if _, err := withCall(opts.with, raw(client.Raw.DeleteSchedule), &pb.DeleteScheduleRequest{Tenant: opts.tenant, Name: args[0]}); err != nil {
				return err
			}
			if opts.json {
				return printJSON(env.stdout, map[string]any{"deleted": true, "name": args[0]})
			}
			fmt.Fprintf(env.stdout, "schedule %s deleted\n", args[0])
			return nil
		},
	}))
}

func overlapName(o pb.Overlap) string {
	ov, _ := fsm.OverlapFromPB(o)
	return ov.String()
}

func scheduleState(s *pb.Schedule) string {
	if s.Paused {
		return "paused"
	}
	return "active"
}

// slotText shows a slot (cluster ms) of schedule s in its zone, and how
// far from now: "2026-12-07 02:30 CET (in 19h)".
func slotText(s *pb.Schedule, ms int64) string {
	if ms == 0 {
		return "-"
	}
	w, ok := client.WallAt(s.Now, ms)
	if !ok {
		return clusterWhen(s.Now, ms)
	}
	if loc, err := schedule.LoadZone(s.Zone); err == nil {
		w = w.In(loc)
	}
	when := clusterWhen(s.Now, ms)
	if i := strings.Index(when, " ("); i > 0 {
		when = when[:i]
	}
	return w.Format("2006-01-02 15:04:05 MST") + " (" + when + ")"
}

func scheduleJSON(s *pb.Schedule) map[string]any {
	next := []string{}
	for _, t := range s.NextSlotsMs {
		next = append(next, clusterWall(s.Now, t))
	}
	m := map[string]any{"tenant": s.Tenant, "name": s.Name, "spec": s.Spec, "zone": s.Zone, "overlap": overlapName(s.Overlap),
		"catchup_ms": s.CatchupMs, "jitter_ms": s.JitterMs, "paused": s.Paused, "version": s.Version,
		"last_slot": clusterWall(s.Now, s.LastSlotMs), "cluster_last_slot_ms": s.LastSlotMs, "next_slots": next, "cluster_next_slots_ms": s.NextSlotsMs,
		"next_fire": clusterWall(s.Now, s.NextFireMs), "cluster_next_fire_ms": s.NextFireMs,
		"fired": s.Fired, "skipped": s.Skipped, "missed": s.Missed, "refused": s.Refused, "last_job_id": s.LastJobId, "live_job_ids": s.LiveJobIds,
		"job": map[string]any{"type": s.GetJob().GetJobType(), "size": strings.ToLower(s.GetJob().GetSize().String()), "cost_ms": s.GetJob().GetEstCostMs(),
			"class": strings.ToLower(s.GetJob().GetClass().String()), "group": s.GetJob().GetGroup(), "pool": s.GetJob().GetPool()}}
	if s.SpecError != "" {
		m["spec_error"] = s.SpecError
	}
	return m
}

func printSchedule(env *cmdEnv, s *pb.Schedule, asJSON bool) error {
	if asJSON {
		return printJSON(env.stdout, scheduleJSON(s))
	}
	var next []string
	for _, t := range s.NextSlotsMs {
		next = append(next, slotText(s, t))
	}
	nextText := strings.Join(next, "\n"+strings.Repeat(" ", len("next_slots")+2))
	if s.Paused {
		nextText = "none (paused)"
	}
	job := s.GetJob()
	jobText := fmt.Sprintf("size %s, cost %s", strings.ToLower(job.GetSize().String()), time.Duration(job.GetEstCostMs())*time.Millisecond)
	if job.GetJobType() != "" {
		jobText = "type " + termtext.Safe(job.GetJobType(), false) + ", " + jobText
	}
	live := make([]string, len(s.LiveJobIds))
	for i, id := range s.LiveJobIds {
		live[i] = fmt.Sprint(id)
	}
	rows := [][2]string{{"tenant", s.Tenant}, {"schedule", s.Name}, {"spec", termtext.Safe(s.Spec, false)}, {"zone", s.Zone},
		{"overlap", overlapName(s.Overlap)}, {"catchup", (time.Duration(s.CatchupMs) * time.Millisecond).String()},
		{"jitter", (time.Duration(s.JitterMs) * time.Millisecond).String()}, {"state", scheduleState(s)}, {"version", fmt.Sprint(s.Version)},
		{"job", jobText}, {"last_slot", slotText(s, s.LastSlotMs)}, {"next_slots", nextText}, {"next_fire", slotText(s, s.NextFireMs)},
		{"fired", fmt.Sprint(s.Fired)}, {"skipped", fmt.Sprint(s.Skipped)}, {"missed", fmt.Sprint(s.Missed)}, {"refused", fmt.Sprint(s.Refused)},
		{"last_job", fmt.Sprint(s.LastJobId)}, {"live_jobs", strings.Join(live, ", ")}}
	if s.SpecError != "" {
		rows = append(rows, [2]string{"spec_error", termtext.Safe(s.SpecError, false)})
	}
	printTable(env.stdout, rows)
	return nil
}
