package test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/baristahq/barista/client"
	pb "github.com/baristahq/barista/proto"
)

// TestClientPackageAcrossLeaderKill: a program using the client package
// with every node's address, the leader first, submits keyed jobs one by
// one and in a batch while the leader is killed, and watches the tenant's
// events from the start. Every submit succeeds on its first call, each
// key makes exactly one job, two workers complete them all, and the
// watch — cut by the kill — resumes on another node: it delivers exactly
// the tenant's events of the log, in order, with no gap and no duplicate.
func TestClientPackageAcrossLeaderKill(t *testing.T) {
	c, ctx := startWithAcme(t, 3, 4*time.Minute)
	leader := c.WaitLeader(10 * time.Second)
	addrs := []string{leader.GRPCAddr}
	for _, f := range c.Followers(leader) {
		addrs = append(addrs, f.GRPCAddr)
	}
	for _, id := range []string{"w1", "w2"} {
		c.AddWorker(id, "sm").Start("")
	}
	var mu sync.Mutex
	var retries []string
	cl, err := client.New(addrs, client.Options{OnWatchRetry: func(err error, from uint64, wait time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		retries = append(retries, fmt.Sprintf("%v (from %d)", err, from))
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	const single, batch = 60, 40
	const jobs = single + batch
	var got []*pb.Event
	watchErr := make(chan error, 1)
	go func() {
		completed := 0
		watchErr <- cl.Watch(ctx, &pb.WatchEventsRequest{Tenant: "acme", FromOldest: true}, func(ev *pb.Event) error {
			mu.Lock()
			got = append(got, ev)
			mu.Unlock()
			if ev.Kind == "completed" {
				completed++
			}
			if completed == jobs {
				return errDone
			}
			return nil
		})
	}()

	job := func(i int) *pb.SubmitRequest {
		key := fmt.Sprintf("order-%03d", i)
		return &pb.SubmitRequest{Tenant: "acme", IdempotencyKey: &key, JobType: "pkg", Size: pb.Size_SM, EstCostMs: 100,
			Payload: []byte(`{"argv": ["true"]}`)}
	}
	ids := map[uint64]string{}
	for i := range single {
		if i == 20 {
			leader.Kill()
			t.Logf("killed the leader %s before submit %d", leader.ID, i)
		}
		resp, err := cl.Submit(ctx, job(i))
		if err != nil || !resp.Created {
			t.Fatalf("submit %d: %v %v", i, resp, err)
		}
		if prev, dup := ids[resp.JobId]; dup {
			t.Fatalf("submits %s and %d made the same job %d", prev, i, resp.JobId)
		}
		ids[resp.JobId] = fmt.Sprint(i)
	}
	var reqs []*pb.SubmitRequest
	for i := single; i < jobs; i++ {
		reqs = append(reqs, job(i))
	}
	results, err := cl.SubmitBatch(ctx, reqs)
	if err != nil || len(results) != batch {
		t.Fatalf("batch: %d results, %v", len(results), err)
	}
	for i, r := range results {
		if r.Error != "" || !r.Created || ids[r.JobId] != "" {
			t.Fatalf("batch job %d: %v", i, r)
		}
		ids[r.JobId] = fmt.Sprint(single + i)
	}
	// The same keys again: the same jobs, none created.
	again, err := cl.SubmitBatch(ctx, append([]*pb.SubmitRequest{job(0)}, reqs...))
	if err != nil || len(again) != batch+1 || again[0].Created || ids[again[0].JobId] != "0" {
		t.Fatalf("resubmit: %v %v", again, err)
	}

	select {
	case err := <-watchErr:
		if !errors.Is(err, errDone) {
			t.Fatalf("watch: %v", err)
		}
	case <-ctx.Done():
		t.Fatalf("the watch did not see %d jobs complete", jobs)
	}
	var listed int
	for j, err := range cl.Jobs(ctx, &pb.ListJobsRequest{Tenant: "acme", PageSize: 30}) {
		if err != nil {
			t.Fatal(err)
		}
		if j.State != "completed" || ids[j.JobId] == "" {
			t.Fatalf("job %v", j)
		}
		listed++
	}
	if listed != jobs {
		t.Fatalf("the tenant holds %d jobs, want %d", listed, jobs)
	}

	// The reference: the tenant's events as a fresh watch reads them.
	var want []*pb.Event
	if err := cl.Watch(ctx, &pb.WatchEventsRequest{Tenant: "acme", FromOldest: true, UntilIdle: true}, func(ev *pb.Event) error {
		want = append(want, ev)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != len(want) {
		t.Fatalf("the watch delivered %d events, the log holds %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Seq != want[i].Seq || got[i].Kind != want[i].Kind || got[i].JobId != want[i].JobId || got[i].Attempt != want[i].Attempt {
			t.Fatalf("event %d: watch %v, log %v", i, got[i], want[i])
		}
	}
	kinds := map[string]int{}
	for _, ev := range got {
		kinds[ev.Kind]++
	}
	if kinds["queued"] != jobs || kinds["completed"] != jobs {
		t.Errorf("events by kind %v", kinds)
	}
	if len(retries) == 0 {
		t.Errorf("the watch never reconnected: it was not cut by the kill")
	}
	t.Logf("%d events delivered once each, in order; the watch reconnected %d times: %v", len(got), len(retries), retries)
	if !slices.IsSortedFunc(got, func(a, b *pb.Event) int { return int(a.Seq) - int(b.Seq) }) {
		t.Error("events out of order")
	}
}

var errDone = errors.New("every job completed")
