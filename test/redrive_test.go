package test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baristahq/barista/client"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/test/cluster"
)

// TestRedriveAcrossLeaderKill: 500 jobs fail (max_attempts 1); a client
// that knows only a follower redrives them by IDs, 25 a call with a
// request key each, while the leader is killed after the eighth call.
// The follower holds the calls through the election and the client
// retries a call whose answer was lost: every job is queued again exactly
// once (one redriven event, state queued, attempt kept, failures 0), and
// dispatched once more each one runs as attempt 2 with nothing queued
// twice (the 501st dispatch finds nothing). The nodes converge.
func TestRedriveAcrossLeaderKill(t *testing.T) {
	c := cluster.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	apply := func(cmds ...*clusterpb.Command) []*clusterpb.CommandResult {
		t.Helper()
		return applyOK(t, ctx, c, cmds...).Results
	}
	apply(tenantCmd("acme", pb.Tier_GOLD, 0))
	const jobs, chunk = 500, 100
	var ids []uint64
	for range jobs / chunk {
		var cmds []*clusterpb.Command
		for range chunk {
			cmds = append(cmds, &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1000, MaxAttempts: 1}}})
		}
		for _, r := range apply(cmds...) {
			ids = append(ids, r.Job)
		}
	}
	// dispatchAll assigns every queued job to its own worker and returns
	// job -> attempt, and job -> worker in workers.
	credit := uint64(0)
	workers := map[uint64]string{}
	dispatchAll := func(n int) map[uint64]uint32 {
		got := map[uint64]uint32{}
		for start := 0; start < n; start += chunk {
			var cmds []*clusterpb.Command
			for i := start; i < min(start+chunk, n); i++ {
				credit++
				cmds = append(cmds, &clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: fmt.Sprintf("w%03d", i), Size: pb.Size_SM, Credit: credit}}})
			}
			for i, r := range apply(cmds...) {
				workers[r.Job] = cmds[i].GetDispatch().WorkerId
				if !r.Assigned {
					t.Fatalf("a dispatch found nothing after %d", len(got))
				}
				if _, twice := got[r.Job]; twice {
					t.Fatalf("job %d dispatched twice", r.Job)
				}
				got[r.Job] = r.Attempt
			}
		}
		return got
	}
	first := dispatchAll(jobs)
	// Fail every run: the worker of each dispatch reports exit 1.
	for start := 0; start < jobs; start += chunk {
		var fails []*clusterpb.Command
		for _, id := range ids[start : start+chunk] {
			fails = append(fails, &clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: id, Attempt: first[id], WorkerId: workers[id], Outcome: pb.Outcome_FAILED, ExitCode: 1}}})
		}
		apply(fails...)
	}

	leader := c.WaitLeader(10 * time.Second)
	follower := c.Followers(leader)[0]
	cl, err := client.New([]string{follower.GRPCAddr}, client.Options{CallTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const per, parallel = 25, 4
	calls := make(chan int, jobs/per)
	for call := range jobs / per {
		calls <- call
	}
	close(calls)
	var mu sync.Mutex
	var done, duplicates, answered uint64
	eight := make(chan struct{})
	var wg sync.WaitGroup
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for call := range calls {
				resp, err := cl.Redrive(ctx, &pb.BulkJobsRequest{Tenant: "acme", JobIds: ids[call*per : (call+1)*per], RequestKey: fmt.Sprintf("redrive-%02d", call)})
				if err != nil {
					t.Errorf("call %d: %v", call, err)
					continue
				}
				mu.Lock()
				if answered++; answered == 8 {
					close(eight)
				}
				if resp.Duplicate {
					duplicates++
				}
				done += resp.Done
				mu.Unlock()
				for _, it := range resp.Items {
					if !it.Done {
						t.Errorf("call %d: job %d skipped: %s", call, it.JobId, it.Reason)
					}
				}
			}
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-eight:
		leader.Kill()
		t.Logf("killed the leader %s after 8 answered calls, with calls in flight", leader.ID)
	case <-finished:
	}
	<-finished
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d jobs redriven in answered calls, %d calls answered as retries of applied ones", done, duplicates)

	// Every job once: the event log has exactly one redriven event per
	// job, then its queued event, on attempt 1.
	events := readEvents(t, ctx, cl, jobs*5)
	perJob := map[uint64][]string{}
	for _, ev := range events {
		perJob[ev.JobId] = append(perJob[ev.JobId], fmt.Sprintf("%s@%d", ev.Kind, ev.Attempt))
	}
	for _, id := range ids {
		if got := strings.Join(perJob[id], " "); got != "queued@0 assigned@1 failed@1 redriven@1 queued@1" {
			t.Errorf("job %d events: %s", id, got)
		}
	}
	for _, id := range ids {
		j, err := cl.GetJob(ctx, &pb.GetJobRequest{Tenant: "acme", JobId: id})
		if err != nil {
			t.Fatal(err)
		}
		if j.State != "queued" || j.Attempt != 1 || j.Failures != 0 {
			t.Fatalf("job %d after the redrive: %s attempt %d failures %d", id, j.State, j.Attempt, j.Failures)
		}
	}
	// Each runs again once, on a higher attempt; nothing is left queued.
	second := dispatchAll(jobs)
	for _, id := range ids {
		if second[id] != 2 {
			t.Errorf("job %d dispatched again as attempt %d, want 2", id, second[id])
		}
	}
	credit++
	resp, err := c.Apply(ctx, &clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: "extra", Size: pb.Size_SM, Credit: credit}}})
	if err != nil || resp.Results[0].Assigned {
		t.Fatalf("a dispatch beyond the %d redriven jobs: %v %v", jobs, resp, err)
	}
	if _, hash := c.WaitConverged(time.Minute); hash == "" {
		t.Fatal("the nodes did not converge")
	}
}

// readEvents reads the tenant's events from the oldest until n arrived.
func readEvents(t *testing.T, ctx context.Context, cl *client.Client, n int) []*pb.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var mu sync.Mutex
	var got []*pb.Event
	errEnough := errors.New("enough")
	err := cl.Watch(ctx, &pb.WatchEventsRequest{Tenant: "acme", FromOldest: true}, func(ev *pb.Event) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, ev)
		if len(got) == n {
			return errEnough
		}
		return nil
	})
	if !errors.Is(err, errEnough) && !errors.Is(err, io.EOF) {
		t.Fatalf("watch: %v after %d events", err, len(got))
	}
	return got
}
