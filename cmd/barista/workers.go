package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
)

func init() {
	register("workers", typed(&spec[clientFlags]{
		synopsis: "List workers: id, size, pool, state, job, last heartbeat, what each runs",
		usage:    "[--json]",
		run:      runWorkers,
	}))
}

func runWorkers(env *cmdEnv, opts *clientFlags, args []string) error {
	resp, err := ask(opts.call, pb.NewWorkerClient, pb.WorkerClient.ListWorkers, &pb.ListWorkersRequest{})
	if err != nil {
		return err
	}
	sizeOf := func(s pb.Size) string {
		if sz, err := fsm.SizeFromPB(s); err == nil {
			return sz.String()
		}
		return "?"
	}
	if opts.json {
		for _, w := range resp.Workers {
			m := map[string]any{"worker_id": w.WorkerId, "size": sizeOf(w.Size), "pool": w.Pool, "state": w.State, "job": w.Job,
				"attempt": w.Attempt, "connected": w.Connected, "drained": w.Drained, "last_heartbeat": msTime(w.LastHeartbeatMs),
				"commands": w.Commands, "all_kinds": w.AllKinds, "kinds": nonNil(w.Kinds), "not_kinds": nonNil(w.NotKinds)}
			if err := printJSON(env.stdout, m); err != nil {
				return err
			}
		}
		return nil
	}
	fmt.Fprintf(env.stdout, "%-28s %-4s %-12s %-9s %-10s %-14s %s\n", "WORKER", "SIZE", "POOL", "STATE", "JOB", "LAST HEARTBEAT", "RUNS")
	for _, w := range resp.Workers {
		job := "-"
		if w.Job != 0 {
			job = fmt.Sprintf("%d/%d", w.Job, w.Attempt)
		}
		hb := "-"
		if w.LastHeartbeatMs != 0 {
			hb = time.Since(time.UnixMilli(w.LastHeartbeatMs)).Round(time.Second).String() + " ago"
		}
		fmt.Fprintf(env.stdout, "%-28s %-4s %-12s %-9s %-10s %-14s %s\n", w.WorkerId, sizeOf(w.Size), w.Pool, w.State, job, hb, runsText(w))
	}
	return nil
}

// runsText says what a worker runs (SPEC §3 "Kinds"): "all" (every
// job: a worker that says nothing of it), "commands", the kinds it
// registered ("kinds: a, b"), or every kind but some ("all kinds but:
// a"), at most three kinds named.
func runsText(w *pb.WorkerInfo) string {
	if w.Commands && w.AllKinds && len(w.NotKinds) == 0 {
		return "all"
	}
	var parts []string
	if w.Commands {
		parts = append(parts, "commands")
	}
	switch {
	case w.AllKinds && len(w.NotKinds) == 0:
		parts = append(parts, "all kinds")
	case w.AllKinds:
		parts = append(parts, "all kinds but: "+someOf(w.NotKinds))
	case len(w.Kinds) > 0:
		parts = append(parts, "kinds: "+someOf(w.Kinds))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, "; ")
}

// someOf names at most three of names, and how many more there are.
func someOf(names []string) string {
	if len(names) <= 3 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s (+%d)", strings.Join(names[:3], ", "), len(names)-3)
}

// nonNil is s, or an empty list for JSON.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
