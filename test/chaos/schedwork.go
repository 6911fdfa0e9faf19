package chaos

import (
	"context"
	"fmt"
	"time"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
)

// The run's schedules (SPEC §3 "Schedules", §8 rule 14): Config.Schedules
// schedules of tenant sched-silver, of every 1 s to every 10 s, with the
// three overlap policies in turn and a jitter on every fourth, whose
// short sm command jobs run on the pool default's workers beside the
// rest of the load. The leader fires them through every fault; before
// the cluster settles they are paused (rule 14 is then checked up to
// each pause: no slot left behind its catch-up window).

// schedTenant is the tenant of the run's schedules.
const schedTenant = "sched-silver"

// scheduleCommands are the commands that set the run's schedules.
func (r *Run) scheduleCommands() []*clusterpb.Command {
	overlaps := []pb.Overlap{pb.Overlap_OVERLAP_SKIP, pb.Overlap_OVERLAP_BUFFER_ONE, pb.Overlap_OVERLAP_ALLOW}
	var cmds []*clusterpb.Command
	for i := range r.cfg.Schedules {
		c := &clusterpb.ScheduleSet{Tenant: schedTenant, Name: fmt.Sprintf("s%02d", i), Spec: fmt.Sprintf("@every %ds", i%10+1),
			Overlap: overlaps[i%3], Job: &clusterpb.SubmitJob{Size: pb.Size_SM, EstCostMs: 200, Payload: r.payload(100 * time.Millisecond),
				Form: pb.JobForm_COMMAND, JobType: "tick"}}
		if i%4 == 3 {
			c.JitterMs = 700
		}
		if r.cfg.Resources && i%5 == 4 {
			c.Job.Uses = []*pb.ResourceUse{{Resource: "r-four", Units: 1}}
		}
		cmds = append(cmds, &clusterpb.Command{Cmd: &clusterpb.Command_ScheduleSet{ScheduleSet: c}})
	}
	return cmds
}

// pauseSchedules are the commands that pause the run's schedules.
func (r *Run) pauseSchedules() []*clusterpb.Command {
	var cmds []*clusterpb.Command
	for i := range r.cfg.Schedules {
		cmds = append(cmds, &clusterpb.Command{Cmd: &clusterpb.Command_SchedulePause{SchedulePause: &clusterpb.SchedulePause{Tenant: schedTenant, Name: fmt.Sprintf("s%02d", i)}}})
	}
	return cmds
}

// applyAll applies cmds (through any node) until each is accepted or
// found done already, or ctx ends.
func (r *Run) applyAll(ctx context.Context, what string, cmds []*clusterpb.Command) {
	if len(cmds) == 0 {
		return
	}
	for {
		resp, err := r.c.Apply(ctx, cmds...)
		ok := err == nil
		for i := 0; ok && i < len(resp.Results); i++ {
			ok = resp.Results[i].Code == clusterpb.Code_CODE_OK
		}
		if ok {
			return
		}
		if ctx.Err() != nil {
			r.t.Fatalf("%s: %v %v", what, resp, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// schedulesLine counts what the run's schedules did: slots fired,
// skipped, refused and missed, and the schedules' commands.
func schedulesLine(h *History) string {
	n := map[string]int{}
	for _, f := range h.Audit {
		if f.Kind != "schedule" || f.Schedule == nil {
			continue
		}
		switch x := f.Schedule; x.Op {
		case "fire":
			n[x.Outcome]++
		case "miss":
			n["missed"] += int(x.Count)
			n["misses"]++
		default:
			n[x.Op]++
		}
	}
	return countLine(n)
}
