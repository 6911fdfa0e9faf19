package test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/test/cluster"
	"google.golang.org/protobuf/proto"
)

// rateTestDuration is how long TestRateLimitRealWorkers measures:
// $BARISTA_RATE_TEST_DURATION (a Go duration; make ratelimit sets 5m),
// else 12 s.
func rateTestDuration(t *testing.T) time.Duration {
	if v := os.Getenv("BARISTA_RATE_TEST_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Second {
			t.Fatalf("BARISTA_RATE_TEST_DURATION=%q: want a duration of at least 10s", v)
		}
		return d
	}
	return 12 * time.Second
}

// TestRateLimitRealWorkers: a tenant at rate=60/1m burst=5 on a
// three-node cluster with four real sm workers, beside a tenant without a
// limit that keeps every worker busy with short jobs. Over D of cluster
// time from the limited tenant's first dispatch (the cluster times of its
// assigned events), every window W between two of its dispatches holds at
// most 5 + floor(W / 1 s) of them, and D holds at least 5 + D/1s -
// max(2, D/30s) (295 over 5 minutes); the other tenant gets the rest of
// the workers (more dispatches than the limited one).
func TestRateLimitRealWorkers(t *testing.T) {
	d := rateTestDuration(t)
	c := cluster.Start(t, 3, "--config", configFile(t, workerTimeouts))
	ctx, cancel := context.WithTimeout(context.Background(), d+4*time.Minute)
	defer cancel()
	leader := c.WaitLeader(20 * time.Second)
	admin := pb.NewAdminClient(leader.Conn())
	client := pb.NewClientClient(leader.Conn())
	if _, err := admin.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "limited", Tier: pb.Tier_DIAMOND.Enum(), Rate: proto.String("60/1m"), RateBurst: proto.Uint32(5)}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "other", Tier: pb.Tier_FREE.Enum()}); err != nil {
		t.Fatal(err)
	}
	secs := int(d / time.Second)
	submit := func(tenant string, n int, argv ...string) {
		t.Helper()
		body := payload(t, argv...)
		for n > 0 {
			k := min(n, 1000)
			jobs := make([]*pb.SubmitRequest, k)
			for i := range jobs {
				jobs[i] = &pb.SubmitRequest{Tenant: tenant, Size: pb.Size_SM, EstCostMs: 100, Payload: body}
			}
			if _, err := client.SubmitBatch(ctx, &pb.SubmitBatchRequest{Jobs: jobs}); err != nil {
				t.Fatal(err)
			}
			n -= k
		}
	}
	// More than the limit lets through, and more than the workers can run.
	submit("limited", secs+60, "true")
	submit("other", 40*secs, "sleep", "0.1")

	// Every assigned event of both tenants, by cluster time.
	var mu sync.Mutex
	at := map[string][]int64{}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	var wg sync.WaitGroup
	for _, tenant := range []string{"limited", "other"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := client.WatchEvents(watchCtx, &pb.WatchEventsRequest{Tenant: tenant, FromOldest: true})
			if err != nil {
				return
			}
			for {
				ev, err := s.Recv()
				if err != nil {
					return
				}
				if ev.Kind == "assigned" {
					mu.Lock()
					at[tenant] = append(at[tenant], ev.AtMs)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range 4 {
		c.AddWorker(fmt.Sprintf("w%d", i+1), "sm").Start("")
	}
	// Wait until the other tenant's dispatches pass the end of the window.
	var t0 int64
	for {
		mu.Lock()
		lim, oth := at["limited"], at["other"]
		if len(lim) > 0 {
			t0 = lim[0]
		}
		done := t0 != 0 && len(oth) > 0 && oth[len(oth)-1] >= t0+d.Milliseconds()
		mu.Unlock()
		if done {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the window did not pass: limited %d, other %d dispatches", len(lim), len(oth))
		case <-time.After(200 * time.Millisecond):
		}
	}
	stopWatch()
	wg.Wait()
	end := t0 + d.Milliseconds()
	in := func(ts []int64) []int64 {
		var out []int64
		for _, x := range ts {
			if x >= t0 && x < end {
				out = append(out, x)
			}
		}
		slices.Sort(out)
		return out
	}
	lim, oth := in(at["limited"]), in(at["other"])
	// Every window between two dispatches: at most burst + floor(W / I).
	slack := 5 + secs
	for i := range lim {
		for j := i; j < len(lim); j++ {
			n := j - i + 1
			allowed := 5 + int((lim[j]-lim[i])/1000)
			if n > allowed {
				t.Fatalf("%d dispatches in the %d ms from %d to %d, over 5 + floor(W/1s) = %d", n, lim[j]-lim[i], lim[i], lim[j], allowed)
			}
			slack = min(slack, allowed-n)
		}
	}
	lower := 5 + secs - max(2, secs/30)
	t.Logf("over %v: limited %d dispatches (at most %d, at least %d), other %d; the fullest window was %d under 5 + floor(W/1s)",
		d, len(lim), 5+secs, lower, len(oth), slack)
	if len(lim) < lower {
		t.Errorf("limited got %d dispatches in %v, want at least %d", len(lim), d, lower)
	}
	if len(oth) <= len(lim) {
		t.Errorf("other got %d dispatches, the limited tenant %d: the limit held the workers back", len(oth), len(lim))
	}
}
