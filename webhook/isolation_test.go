package webhook

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/baristahq/barista/leader"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
)

// slowEndpoint answers every request after delay (or when the test
// ends), counting them.
func slowEndpoint(t *testing.T, delay time.Duration) (*httptest.Server, func() int) {
	var mu sync.Mutex
	n := 0
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
		select {
		case <-time.After(delay):
		case <-done:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	return srv, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// TestSlowEndpointsDelayOnlyThemselves: 40 tenants' endpoints answer
// after 2 s, and keep getting events; acme's endpoint answers at once.
// With 16 requests in flight at most (the old default, fewer than the
// slow endpoints), once every endpoint has had a request, each of 60
// events of acme submitted every 30 ms reaches it within a second: the
// 99th percentile of the delays is under 1 s, every event arrives once,
// in order. (Before, the 16
// requests went to the slow endpoints and acme's waited its turn among
// them: 2 s and more.)
func TestSlowEndpointsDelayOnlyThemselves(t *testing.T) {
	n := leader.NewMemory(1000)
	key := Key(testKey)
	var slowTenants []string
	var counts []func() int
	for i := range 40 {
		name := fmt.Sprintf("slow%02d", i)
		srv, count := slowEndpoint(t, 2*time.Second)
		slowTenants = append(slowTenants, name)
		counts = append(counts, count)
		if _, err := n.Apply(
			&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: name, Tier: pb.Tier_GOLD}}},
			&clusterpb.Command{Cmd: &clusterpb.Command_WebhookSet{WebhookSet: &clusterpb.WebhookSet{Tenant: name, Url: srv.URL, KeyId: key.ID()}}},
		); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	arrived := map[uint64]time.Time{}
	var order []uint64
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p Payload
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			t.Errorf("acme's endpoint: %v", err)
			return
		}
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		for _, e := range p.Events {
			if _, ok := arrived[e.Seq]; !ok {
				arrived[e.Seq] = now
				order = append(order, e.Seq)
			}
		}
	}))
	defer fast.Close()
	if _, err := n.Apply(
		&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD}}},
		&clusterpb.Command{Cmd: &clusterpb.Command_WebhookSet{WebhookSet: &clusterpb.WebhookSet{Tenant: "acme", Url: fast.URL, KeyId: key.ID()}}},
	); err != nil {
		t.Fatal(err)
	}
	start(t, n, Options{Workers: 16, Timeout: 5 * time.Second})
	// Every endpoint has had a request, and the slow ones have more to
	// come.
	for _, name := range slowTenants {
		submit(t, n, name)
	}
	first := submit(t, n, "acme")
	waitFor(t, "a request to every endpoint", func() bool {
		mu.Lock()
		_, ok := arrived[first]
		mu.Unlock()
		return ok && !slices.ContainsFunc(counts, func(c func() int) bool { return c() == 0 })
	})
	mu.Lock()
	order = nil
	mu.Unlock()
	submitted := map[uint64]time.Time{}
	var want []uint64
	for range 60 {
		for _, name := range slowTenants {
			submit(t, n, name)
		}
		seq := submit(t, n, "acme")
		submitted[seq] = time.Now()
		want = append(want, seq)
		time.Sleep(30 * time.Millisecond) // the pace of the load, not a wait for anything
	}
	waitFor(t, "acme's 60 events", func() bool { mu.Lock(); defer mu.Unlock(); return len(order) >= len(want) })
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(order, want) {
		t.Fatalf("acme's endpoint got %v, want %v", order, want)
	}
	var delays []time.Duration
	for _, seq := range want {
		delays = append(delays, arrived[seq].Sub(submitted[seq]))
	}
	slices.Sort(delays)
	p50, p99 := delays[len(delays)/2], delays[(len(delays)*99+99)/100-1]
	t.Logf("acme's delivery delays: p50 %v, p99 %v, max %v", p50, p99, delays[len(delays)-1])
	if p99 >= time.Second {
		t.Errorf("acme's delivery p99 %v (p50 %v): want under 1s while slow endpoints hold their requests", p99, p50)
	}
}
