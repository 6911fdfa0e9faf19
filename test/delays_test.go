package test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
)

// TestDelayedJobsAcrossLeaderKill submits 1,000 delayed jobs due 4 to 8
// s later, kills the leader (kill -9) while about half are due, and
// audits the event log once every job is queued: each job was released
// exactly once, never before its due time, and within one second of it
// in cluster time (which pauses while no leader runs, so the new
// leader's first second is the second after the due time).
func TestDelayedJobsAcrossLeaderKill(t *testing.T) {
	c, ctx := startWithAcme(t, 3, 4*time.Minute)
	const jobs = 1000
	delay := map[uint64]int64{}
	start := time.Now()
	for b := 0; b < jobs/100; b++ {
		var cmds []*clusterpb.Command
		var delays []int64
		for i := range 100 {
			d := int64(4000 + ((b*100+i)*37)%4000)
			delays = append(delays, d)
			cmds = append(cmds, &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1000, DelayMs: d}}})
		}
		resp, err := c.Apply(ctx, cmds...)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range resp.Results {
			if r.Code != clusterpb.Code_CODE_OK {
				t.Fatalf("submit refused: %s", r.Message)
			}
			delay[r.Job] = delays[i]
		}
	}
	t.Logf("%d delayed jobs submitted in %v", len(delay), time.Since(start).Round(time.Millisecond))
	// Kill the leader about six seconds in: about half the jobs are due.
	time.Sleep(time.Until(start.Add(6 * time.Second)))
	leader := c.WaitLeader(20 * time.Second)
	t.Logf("kill -9 leader %s", leader.ID)
	leader.Kill()
	next := c.WaitLeader(30 * time.Second)
	t.Logf("new leader %s", next.ID)
	leader.Start()

	cl := pb.NewClientClient(next.Conn())
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := cl.ListJobs(ctx, &pb.ListJobsRequest{Tenant: "acme", State: "scheduled", PageSize: 1000})
		if err == nil && len(resp.Jobs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs still scheduled after 90 s: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The audit: every event of the tenant, from the oldest.
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	stream, err := cl.WatchEvents(wctx, &pb.WatchEventsRequest{Tenant: "acme", FromOldest: true})
	if err != nil {
		t.Fatal(err)
	}
	scheduledAt := map[uint64]int64{}
	released := map[uint64][]int64{}
	count := 0
	for count < jobs {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("after %d releases: %v", count, err)
		}
		switch ev.Kind {
		case "scheduled":
			scheduledAt[ev.JobId] = ev.AtMs
		case "released":
			released[ev.JobId] = append(released[ev.JobId], ev.AtMs)
			count++
		}
	}
	// Anything after the 1,000th release would be a double: read on for
	// a while.
	tail, tcancel := context.WithTimeout(ctx, 3*time.Second)
	defer tcancel()
	if s2, err := cl.WatchEvents(tail, &pb.WatchEventsRequest{Tenant: "acme", FromOldest: true}); err == nil {
		n := 0
		for {
			ev, err := s2.Recv()
			if err != nil {
				if !errors.Is(err, io.EOF) && status.Code(err) != codes.DeadlineExceeded {
					t.Fatal(err)
				}
				break
			}
			if ev.Kind == "released" {
				n++
			}
		}
		if n != jobs {
			t.Errorf("%d released events, want %d", n, jobs)
		}
	}
	worst := int64(0)
	for id, d := range delay {
		at := released[id]
		sub, ok := scheduledAt[id]
		switch {
		case !ok:
			t.Errorf("job %d has no scheduled event", id)
			continue
		case len(at) != 1:
			t.Errorf("job %d released %d times", id, len(at))
			continue
		}
		due := sub + d
		late := at[0] - due
		if late < 0 {
			t.Errorf("job %d released %d ms before its due time", id, -late)
		}
		if late > 1000 {
			t.Errorf("job %d released %d ms after its due time", id, late)
		}
		worst = max(worst, late)
	}
	t.Logf("all %d released once; worst lateness %d ms of cluster time", jobs, worst)
	if idx, hash := c.WaitConverged(60 * time.Second); hash == "" {
		t.Fatalf("not converged at %d", idx)
	}
}
