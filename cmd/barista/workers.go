package main

import (
	"fmt"
	"time"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
)

func init() {
	register("workers", typed(&spec[clientFlags]{
		synopsis: "List workers: id, size, pool, state, job, last heartbeat",
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
				"attempt": w.Attempt, "connected": w.Connected, "drained": w.Drained, "last_heartbeat": msTime(w.LastHeartbeatMs)}
			if err := printJSON(env.stdout, m); err != nil {
				return err
			}
		}
		return nil
	}
	fmt.Fprintf(env.stdout, "%-28s %-4s %-12s %-9s %-10s %s\n", "WORKER", "SIZE", "POOL", "STATE", "JOB", "LAST HEARTBEAT")
	for _, w := range resp.Workers {
		job := "-"
		if w.Job != 0 {
			job = fmt.Sprintf("%d/%d", w.Job, w.Attempt)
		}
		hb := "-"
		if w.LastHeartbeatMs != 0 {
			hb = time.Since(time.UnixMilli(w.LastHeartbeatMs)).Round(time.Second).String() + " ago"
		}
		fmt.Fprintf(env.stdout, "%-28s %-4s %-12s %-9s %-10s %s\n", w.WorkerId, sizeOf(w.Size), w.Pool, w.State, job, hb)
	}
	return nil
}
