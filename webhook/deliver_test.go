package webhook

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/leader"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// receiver is an endpoint for tests: it answers as mode says and keeps
// every request.
type receiver struct {
	t   *testing.T
	srv *httptest.Server

	mu      sync.Mutex
	mode    string // "ok", "500", "hang" (until the request ends)
	reqs    []received
	release chan struct{}
}

type received struct {
	at     time.Time
	header string
	body   []byte
	events []Event
	status int
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{t: t, mode: "ok", release: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var p Payload
		if err := json.Unmarshal(body, &p); err != nil {
			t.Errorf("undecodable body %q: %v", body, err)
		}
		r.mu.Lock()
		mode := r.mode
		rec := received{at: time.Now(), header: req.Header.Get(SignatureHeader), body: body, events: p.Events, status: 200}
		switch mode {
		case "500":
			rec.status = 500
		case "hang":
			rec.status = 0
		}
		r.reqs = append(r.reqs, rec)
		r.mu.Unlock()
		switch mode {
		case "500":
			w.WriteHeader(500)
			io.WriteString(w, "internal details the server must never show")
		case "hang":
			select {
			case <-req.Context().Done():
			case <-r.release:
			}
		}
	}))
	t.Cleanup(func() { close(r.release); r.srv.Close() })
	return r
}

func (r *receiver) setMode(m string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mode = m
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs)
}

// delivered returns the seqs of the events answered 2xx, in order.
func (r *receiver) delivered() []uint64 {
	var out []uint64
	for _, q := range r.requests() {
		if q.status == 200 {
			for _, e := range q.events {
				out = append(out, e.Seq)
			}
		}
	}
	return out
}

func loopback() *Guard { return NewGuard([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}) }

// world is a state machine with tenants a and b, a's endpoint at url.
func world(t *testing.T, url string, kinds ...string) *leader.Memory {
	t.Helper()
	n := leader.NewMemory(1000)
	key := Key(testKey)
	if _, err := n.Apply(
		&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "a", Tier: pb.Tier_GOLD}}},
		&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "b", Tier: pb.Tier_GOLD}}},
		&clusterpb.Command{Cmd: &clusterpb.Command_WebhookSet{WebhookSet: &clusterpb.WebhookSet{Tenant: "a", Url: url, Kinds: kinds, KeyId: key.ID()}}},
	); err != nil {
		t.Fatal(err)
	}
	return n
}

// submit queues a job of tenant; its queued event's seq is returned.
func submit(t *testing.T, n *leader.Memory, tenant string) uint64 {
	t.Helper()
	if _, err := n.Apply(&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: tenant, Size: pb.Size_MD, EstCostMs: 1000}}}); err != nil {
		t.Fatal(err)
	}
	_, next := n.State().Events(^uint64(0), func(*fsm.Event) bool { return false })
	return next - 1
}

// start runs a deliverer on n until the test ends or stop is called.
func start(t *testing.T, n Node, opt Options) (*Deliverer, func()) {
	t.Helper()
	if opt.Key == nil {
		opt.Key = Key(testKey)
	}
	if opt.Guard == nil {
		opt.Guard = loopback()
	}
	if opt.MinBackoff == 0 {
		opt.MinBackoff, opt.MaxBackoff = 5*time.Millisecond, 40*time.Millisecond
	}
	if opt.CommitInterval == 0 {
		opt.CommitInterval = 10 * time.Millisecond
	}
	if opt.Timeout == 0 {
		opt.Timeout = 300 * time.Millisecond
	}
	opt.Jitter = func(d time.Duration) time.Duration { return d }
	d := New(n, opt)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return d, stop
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func cursor(t *testing.T, n *leader.Memory, tenant string) uint64 {
	t.Helper()
	w, ok := n.State().WebhookOf(tenant)
	if !ok {
		t.Fatalf("no webhook for %s", tenant)
	}
	return w.Cursor
}

// firstSeen is the seqs in the order they first arrived, and the number
// of repeats.
func firstSeen(seqs []uint64) ([]uint64, int) {
	seen := map[uint64]bool{}
	var out []uint64
	dups := 0
	for _, s := range seqs {
		if seen[s] {
			dups++
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	return out, dups
}

// TestDeliverAcrossFailures: an endpoint that answers 500, then times
// out, then recovers gets every event of its tenant, in order, each
// request signed; the waits between failures double from MinBackoff to
// MaxBackoff; its status names each failure without the response body;
// another tenant's events are not sent; the cursor is committed.
func TestDeliverAcrossFailures(t *testing.T) {
	r := newReceiver(t)
	n := world(t, r.srv.URL)
	var want []uint64
	for i := range 6 {
		want = append(want, submit(t, n, "a"))
		if i%2 == 0 {
			submit(t, n, "b")
		}
	}
	r.setMode("500")
	d, _ := start(t, n, Options{})
	waitFor(t, "five failures", func() bool { return len(r.requests()) >= 6 })
	st, ok := d.Status(0)
	if !ok || !strings.HasPrefix(st.LastError, "HTTP 500") || st.Failures < 5 || st.NextRetry.IsZero() || st.Delivered != 0 {
		t.Fatalf("status while failing: %+v", st)
	}
	if strings.Contains(st.LastError, "internal details") {
		t.Fatal("the status shows the response body")
	}
	reqs := r.requests()
	for i := 1; i < 6; i++ {
		wantGap := 5 * time.Millisecond << min(i-1, 3)
		if gap := reqs[i].at.Sub(reqs[i-1].at); gap < wantGap {
			t.Errorf("retry %d came %v after the last, want at least %v", i, gap, wantGap)
		}
	}
	r.setMode("hang")
	waitFor(t, "a timeout", func() bool {
		st, _ := d.Status(0)
		return st.LastError == "timed out after 300ms"
	})
	for range 4 {
		want = append(want, submit(t, n, "a"))
		submit(t, n, "b")
	}
	r.setMode("ok")
	waitFor(t, "every event", func() bool { got, _ := firstSeen(r.delivered()); return len(got) == len(want) })
	got, _ := firstSeen(r.delivered())
	if !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
	key := Key(testKey)
	for i, q := range r.requests() {
		if err := Verify(q.header, q.body, key.Secret(0, "a", 1), q.at, DefaultTolerance); err != nil {
			t.Errorf("request %d: %v", i, err)
		}
		for _, e := range q.events {
			if e.Tenant != "a" || e.Kind != "queued" {
				t.Errorf("request %d carries %+v", i, e)
			}
		}
	}
	last := want[len(want)-1]
	waitFor(t, "the cursor", func() bool { return cursor(t, n, "a") >= last })
	st, _ = d.Status(0)
	if st.Failures != 0 || !st.NextRetry.IsZero() || st.Delivered < last || st.LastError != "timed out after 300ms" {
		t.Fatalf("status after recovery: %+v", st)
	}
}

// TestGapEvent: events pruned before delivery arrive as one gap event in
// their place, naming the lost range; the retained ones follow.
func TestGapEvent(t *testing.T) {
	r := newReceiver(t)
	n := world(t, r.srv.URL)
	cfg := fsm.DefaultConfig()
	cfg.EventRetentionCount = 3
	cfg.EventRetentionPerTenant = 0 // no tenant keeps its events (TestKeptEventsDelivered)
	if _, err := n.Apply(&clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: fsm.ConfigToPB(cfg)}}}); err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for i := range 6 {
		seqs = append(seqs, submit(t, n, "a"))
		if i == 3 {
			submit(t, n, "b")
		}
	}
	// 1..4 a, 5 b, 6..7 a: a prune keeps 5..7.
	if !slices.Equal(seqs, []uint64{1, 2, 3, 4, 6, 7}) {
		t.Fatalf("seqs %v", seqs)
	}
	if _, err := n.Apply(&clusterpb.Command{Cmd: &clusterpb.Command_Prune{Prune: &clusterpb.Prune{}}}); err != nil {
		t.Fatal(err)
	}
	start(t, n, Options{})
	waitFor(t, "delivery", func() bool { return len(r.delivered()) >= 3 })
	var got []string
	for _, q := range r.requests() {
		for _, e := range q.events {
			got = append(got, fmt.Sprintf("%d:%s:%d-%d", e.Seq, e.Kind, e.FromSeq, e.ToSeq))
		}
	}
	if want := "[4:gap:1-4 6:queued:0-0 7:queued:0-0]"; fmt.Sprint(got) != want {
		t.Fatalf("delivered %v, want %s", got, want)
	}
	waitFor(t, "the cursor past the gap", func() bool { w, _ := n.State().WebhookOf("a"); return w.Cursor == 7 && w.GapTo == 0 })
}

// TestRotationGrace: after a rotation, requests carry a signature under
// the new secret and one under the previous until the grace ends, then
// only the new one.
func TestRotationGrace(t *testing.T) {
	r := newReceiver(t)
	n := world(t, r.srv.URL)
	key := Key(testKey)
	n.SetNow(5_000)
	if _, err := n.Apply(&clusterpb.Command{Cmd: &clusterpb.Command_WebhookSet{WebhookSet: &clusterpb.WebhookSet{Tenant: "a", Url: r.srv.URL, Rotate: true, GraceMs: 60_000, KeyId: key.ID()}}}); err != nil {
		t.Fatal(err)
	}
	w, _ := n.State().WebhookOf("a")
	if w.Version != 2 || w.PrevVersion != 1 || w.PrevUntil != 65_000 {
		t.Fatalf("rotated: %+v", w)
	}
	old, cur := key.Secret(0, "a", 1), key.Secret(0, "a", 2)
	submit(t, n, "a")
	start(t, n, Options{})
	waitFor(t, "the first request", func() bool { return len(r.delivered()) == 1 })
	n.SetNow(65_000)
	submit(t, n, "a")
	waitFor(t, "the second request", func() bool { return len(r.delivered()) == 2 })
	reqs := r.requests()
	for i, c := range []struct {
		secret string
		ok     bool
	}{{cur, true}, {old, true}, {key.Secret(0, "a", 3), false}} {
		if err := Verify(reqs[0].header, reqs[0].body, c.secret, reqs[0].at, DefaultTolerance); (err == nil) != c.ok {
			t.Errorf("within the grace, secret %d: %v", i, err)
		}
	}
	if strings.Count(reqs[0].header, "v1=") != 2 || strings.Count(reqs[1].header, "v1=") != 1 {
		t.Fatalf("headers %q, %q", reqs[0].header, reqs[1].header)
	}
	if err := Verify(reqs[1].header, reqs[1].body, old, reqs[1].at, DefaultTolerance); err != ErrNoSignature {
		t.Fatalf("the previous secret after the grace: %v", err)
	}
	if err := Verify(reqs[1].header, reqs[1].body, cur, reqs[1].at, DefaultTolerance); err != nil {
		t.Fatalf("the new secret after the grace: %v", err)
	}
}

// TestSlowEndpointDoesNotBlockOthers: while one endpoint holds its
// request (no answer), another tenant's endpoint gets every event and
// its cursor commits.
func TestSlowEndpointDoesNotBlockOthers(t *testing.T) {
	slow, fast := newReceiver(t), newReceiver(t)
	slow.setMode("hang")
	n := world(t, slow.srv.URL)
	key := Key(testKey)
	if _, err := n.Apply(&clusterpb.Command{Cmd: &clusterpb.Command_WebhookSet{WebhookSet: &clusterpb.WebhookSet{Tenant: "b", Url: fast.srv.URL, KeyId: key.ID()}}}); err != nil {
		t.Fatal(err)
	}
	submit(t, n, "a")
	start(t, n, Options{Timeout: time.Hour, Workers: 2})
	waitFor(t, "the slow request", func() bool { return len(slow.requests()) == 1 })
	var want []uint64
	for range 50 {
		submit(t, n, "a")
		want = append(want, submit(t, n, "b"))
	}
	waitFor(t, "the fast endpoint", func() bool { return len(fast.delivered()) >= len(want) })
	if got, dups := firstSeen(fast.delivered()); !slices.Equal(got, want) || dups != 0 {
		t.Fatalf("fast endpoint got %v (%d repeats), want %v", got, dups, want)
	}
	waitFor(t, "the fast cursor", func() bool { return cursor(t, n, "b") == want[len(want)-1] })
	if len(slow.requests()) != 1 || cursor(t, n, "a") != 0 {
		t.Fatalf("slow endpoint: %d requests, cursor %d", len(slow.requests()), cursor(t, n, "a"))
	}
}

// TestNoKeyNoDelivery: a leader without the key, or with another key
// than the endpoint's, sends nothing and says why.
func TestNoKeyNoDelivery(t *testing.T) {
	r := newReceiver(t)
	n := world(t, r.srv.URL)
	submit(t, n, "a")
	other := Key(strings.Repeat("k", 32))
	for _, c := range []struct {
		key  Key
		want string
	}{
		{nil, "this leader has no webhook key ([webhooks] key or $BARISTA_WEBHOOK_KEY; every server needs the same)"},
		{other, "this leader's webhook key (id " + fmt.Sprintf("%016x", other.ID()) +
			") is not the one the endpoint's secret was derived from (id e87651b686e9d5d3): give every server the same key, or rotate the secret"},
	} {
		d := New(n, Options{Key: c.key, Guard: loopback()})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); d.Run(ctx) }()
		waitFor(t, "the status", func() bool { st, _ := d.Status(0); return st.LastError != "" })
		st, _ := d.Status(0)
		cancel()
		<-done
		if st.LastError != c.want || st.Failures != 1 {
			t.Errorf("status %+v, want %q", st, c.want)
		}
	}
	if len(r.requests()) != 0 {
		t.Fatalf("%d requests without the key", len(r.requests()))
	}
}

// TestResumeAfterLeaderChange: a new leader starts at the replicated
// cursor: what the old one delivered but never committed is delivered
// again (at least once), nothing committed is.
func TestResumeAfterLeaderChange(t *testing.T) {
	r := newReceiver(t)
	n := world(t, r.srv.URL)
	var want []uint64
	for range 5 {
		want = append(want, submit(t, n, "a"))
	}
	// The first leader commits nothing (its interval never comes).
	_, stop := start(t, n, Options{CommitInterval: time.Hour})
	waitFor(t, "the first delivery", func() bool { return len(r.delivered()) == 5 })
	stop()
	if c := cursor(t, n, "a"); c != 0 {
		t.Fatalf("cursor %d", c)
	}
	// The second commits; a third resumes after its cursor.
	for range 3 {
		want = append(want, submit(t, n, "a"))
	}
	_, stop = start(t, n, Options{})
	waitFor(t, "the second cursor", func() bool { return cursor(t, n, "a") == want[len(want)-1] })
	stop()
	want = append(want, submit(t, n, "a"))
	start(t, n, Options{})
	waitFor(t, "the third delivery", func() bool { got, _ := firstSeen(r.delivered()); return len(got) == len(want) })
	got, dups := firstSeen(r.delivered())
	if !slices.Equal(got, want) || dups != 5 {
		t.Fatalf("delivered %v with %d repeats, want %v with 5", r.delivered(), dups, want)
	}
	waitFor(t, "the third cursor", func() bool { return cursor(t, n, "a") == want[len(want)-1] })
	if acks := ackCommands(n); acks != 2 {
		t.Fatalf("%d ack commands, want 2 (one per leader that delivered and committed)", acks)
	}
}

// TestReplayRedelivers: a replay starts delivery again at its seq, and a
// kinds filter skips the other kinds.
func TestReplayRedelivers(t *testing.T) {
	r := newReceiver(t)
	n := world(t, r.srv.URL, "queued", "cancelled")
	s1 := submit(t, n, "a")
	if _, err := n.Apply(&clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Tenant: "a", Job: 1}}}); err != nil {
		t.Fatal(err)
	}
	s2 := submit(t, n, "a")
	start(t, n, Options{})
	waitFor(t, "delivery", func() bool { return cursor(t, n, "a") == s2 })
	if _, err := n.Apply(&clusterpb.Command{Cmd: &clusterpb.Command_WebhookReplay{WebhookReplay: &clusterpb.WebhookReplay{Tenant: "a", FromSeq: s1 + 1}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the replay", func() bool { return len(r.delivered()) == 5 })
	var got []string
	for _, q := range r.requests() {
		for _, e := range q.events {
			got = append(got, fmt.Sprintf("%d %s", e.Seq, e.Kind))
		}
	}
	if want := "[1 queued 2 cancelled 3 queued 2 cancelled 3 queued]"; fmt.Sprint(got) != want {
		t.Fatalf("delivered %v, want %s", got, want)
	}
}

// TestMetrics: requests by result, events delivered, and the endpoints
// failing or that the leader cannot sign for, on a registry.
func TestMetrics(t *testing.T) {
	r := newReceiver(t)
	n := world(t, r.srv.URL)
	reg := prometheus.NewRegistry()
	r.setMode("500")
	submit(t, n, "a")
	submit(t, n, "a")
	d, stop := start(t, n, Options{Registerer: reg})
	waitFor(t, "a failure", func() bool { st, _ := d.Status(0); return st.Failures >= 1 })
	r.setMode("ok")
	waitFor(t, "delivery", func() bool { return len(r.delivered()) == 2 })
	waitFor(t, "the gauge", func() bool { return testutil.ToFloat64(d.metrics.failing) == 0 })
	stop()
	if got := testutil.ToFloat64(d.metrics.requests.WithLabelValues("delivered")); got != 1 {
		t.Errorf("delivered requests %v", got)
	}
	if got := testutil.ToFloat64(d.metrics.events); got != 2 {
		t.Errorf("events %v", got)
	}
	if got := testutil.ToFloat64(d.metrics.requests.WithLabelValues("failed")); got < 1 {
		t.Errorf("failed requests %v", got)
	}
	// Without a key: one endpoint the leader cannot sign for.
	d2 := New(n, Options{Guard: loopback(), Registerer: prometheus.NewRegistry()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d2.Run(ctx) }()
	waitFor(t, "the unsignable gauge", func() bool { return testutil.ToFloat64(d2.metrics.unsignable) == 1 })
	cancel()
	<-done
	if got := testutil.ToFloat64(d2.metrics.unsignable); got != 0 {
		t.Errorf("unsignable after leadership ended: %v", got)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) != 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
}

// TestLargeBacklogInOrder: a backlog far larger than what a target keeps
// in memory, interleaved with another tenant's events and growing while
// it is delivered, arrives whole, in order, once, in batches of at most
// MaxBatch.
func TestLargeBacklogInOrder(t *testing.T) {
	r := newReceiver(t)
	n := world(t, r.srv.URL)
	var want []uint64
	for range 700 {
		want = append(want, submit(t, n, "a"))
		submit(t, n, "b")
	}
	start(t, n, Options{MaxBatch: 10})
	for range 300 {
		want = append(want, submit(t, n, "a"))
		submit(t, n, "b")
	}
	waitFor(t, "every event", func() bool { return len(r.delivered()) >= len(want) })
	got, dups := firstSeen(r.delivered())
	if !slices.Equal(got, want) || dups != 0 {
		t.Fatalf("delivered %d events (%d repeats), want %d in order", len(got), dups, len(want))
	}
	for i, q := range r.requests() {
		if len(q.events) > 10 {
			t.Fatalf("request %d carries %d events", i, len(q.events))
		}
	}
	// The cursor passes the other tenant's events after the last: all
	// were examined.
	waitFor(t, "the cursor", func() bool { return cursor(t, n, "a") == want[len(want)-1]+1 })
}

// restoreState replaces n's whole state with src's, as a backup restore
// does on a running leader.
func restoreState(t *testing.T, n *leader.Memory, src *fsm.FSM) {
	t.Helper()
	v, err := src.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	e := sfq.NewEncoder(&buf)
	v.Encode(e)
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := n.State().Restore(sfq.NewDecoder(bufio.NewReader(&buf)), v.Index+1000); err != nil {
		t.Fatal(err)
	}
}

// TestRestoredStateStartsOver: when the whole state is replaced under a
// running leader (a backup restored), delivery starts again from the
// restored cursor — whether the restored log is shorter than the one
// delivered from or longer — so that every event of the restored log
// after its cursor arrives, then the events that follow, in order. What
// the leader had delivered or was committing for the replaced state
// moves no cursor of the restored one.
func TestRestoredStateStartsOver(t *testing.T) {
	for _, c := range []struct {
		name         string
		live, backup int // events of a before the restore
	}{
		{"shorter", 6, 2},
		{"longer", 3, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newReceiver(t)
			n := world(t, r.srv.URL)
			b := world(t, r.srv.URL)
			var want []uint64
			for range c.backup {
				want = append(want, submit(t, b, "a"))
				submit(t, b, "b")
			}
			var live []uint64
			for range c.live {
				live = append(live, submit(t, n, "a"))
			}
			start(t, n, Options{})
			waitFor(t, "the live events", func() bool { return cursor(t, n, "a") == live[len(live)-1] })
			before := len(r.requests())

			restoreState(t, n, b.State())
			if got := cursor(t, n, "a"); got != 0 {
				t.Fatalf("restored cursor %d", got)
			}
			for range 2 {
				want = append(want, submit(t, n, "a"))
			}
			last := want[len(want)-1]
			delivered := func() []uint64 {
				var got []uint64
				for _, q := range r.requests()[before:] {
					if q.status == 200 {
						for _, e := range q.events {
							got = append(got, e.Seq)
						}
					}
				}
				return got
			}
			deadline := time.Now().Add(10 * time.Second)
			for (len(delivered()) < len(want) || cursor(t, n, "a") != last) && time.Now().Before(deadline) {
				time.Sleep(2 * time.Millisecond)
			}
			if got, dups := firstSeen(delivered()); !slices.Equal(got, want) || dups != 0 || cursor(t, n, "a") != last {
				t.Fatalf("after the restore delivered %v (%d repeats), cursor %d; want %v, cursor %d", got, dups, cursor(t, n, "a"), want, last)
			}
		})
	}
}

// ackCommands counts the WebhookAck commands proposed so far.
func ackCommands(n *leader.Memory) int {
	acks := 0
	for _, entry := range n.Entries() {
		for _, c := range entry {
			if c.GetWebhookAck() != nil {
				acks++
			}
		}
	}
	return acks
}

// TestKeptEventsDelivered: events the cluster's count pruned from the log
// that their tenant keeps (event_retention_per_tenant) are delivered in
// order, with no gap, before the log's.
func TestKeptEventsDelivered(t *testing.T) {
	r := newReceiver(t)
	n := world(t, r.srv.URL)
	cfg := fsm.DefaultConfig()
	cfg.EventRetentionCount = 4
	cfg.EventRetentionPerTenant = 10
	if _, err := n.Apply(&clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: fsm.ConfigToPB(cfg)}}}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		submit(t, n, "a") // 1, 2
	}
	for range 5 {
		submit(t, n, "b") // 3..7
	}
	if _, err := n.Apply(&clusterpb.Command{Cmd: &clusterpb.Command_Prune{Prune: &clusterpb.Prune{}}}); err != nil {
		t.Fatal(err)
	}
	if first, _ := n.State().Events(^uint64(0), func(*fsm.Event) bool { return false }); first != 4 {
		t.Fatalf("the log's first event is %d, want 4 (1..3 pruned from it)", first)
	}
	start(t, n, Options{})
	waitFor(t, "delivery", func() bool { return len(r.delivered()) >= 2 })
	var got []string
	for _, q := range r.requests() {
		for _, e := range q.events {
			got = append(got, fmt.Sprintf("%d:%s", e.Seq, e.Kind))
		}
	}
	if want := "[1:queued 2:queued]"; fmt.Sprint(got) != want {
		t.Fatalf("delivered %v, want %s", got, want)
	}
	waitFor(t, "the cursor past the log", func() bool { w, _ := n.State().WebhookOf("a"); return w.Cursor == 7 && w.GapTo == 0 })
}
