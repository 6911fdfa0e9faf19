package test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/test/cluster"
)

// The edge's shared resources, shared per identity (docs/security.md,
// "Shared at the edge"): each test here pushes one of them as one tenant
// (or a caller without a token) while another tenant's calls must keep
// being served. The floods at full size are behind make noisy-neighbour
// (test/noisy).

// healthWatchHeld connects to addr from src, opens a health watch
// without a token and holds it (answering the server's pings) until the
// server closes the connection or stop is closed; closed is closed once
// the server has closed it.
func healthWatchHeld(t *testing.T, src, addr string, stop <-chan struct{}) (closed <-chan struct{}) {
	t.Helper()
	cc, done, err := dialNoticing(src, addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := healthpb.NewHealthClient(cc).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil {
		t.Fatalf("the health watch's first status: %v", err)
	}
	go func() {
		select {
		case <-stop:
		case <-done:
		}
		cancel()
		cc.Close()
	}()
	return done
}

// TestHealthWatchConnectionsClosed (finding 1): connections that made no
// call with a token are closed limits.unauthenticated_idle after their
// last call began, whatever streams they hold: 12 connections each
// holding a health watch without a token are all closed within a few
// seconds at unauthenticated_idle = 1s. (Before, a connection holding a
// watch was never idle, so never closed: a few thousand of them filled a
// node's connections for good.)
func TestHealthWatchConnectionsClosed(t *testing.T) {
	c := startWithTokens(t, 1, "[limits]\nunauthenticated_idle = \"1s\"\n")
	n := c.Nodes[0]
	stop := make(chan struct{})
	defer close(stop)
	var closed []<-chan struct{}
	for i := range 12 {
		closed = append(closed, healthWatchHeld(t, fmt.Sprintf("127.0.9.%d", i+1), n.GRPCAddr, stop))
	}
	start := time.Now()
	deadline := time.After(8 * time.Second)
	for i, ch := range closed {
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("connection %d of 12 holding a health watch without a token still open %s after its watch began (unauthenticated_idle = 1s)", i, time.Since(start).Round(time.Millisecond))
		}
	}
	t.Logf("12 connections holding a health watch closed within %s", time.Since(start).Round(time.Millisecond))
	m, err := cluster.Scrape("http://" + n.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if got := m[`barista_connections_closed_idle_total{listener="grpc"}`]; got < 12 {
		t.Errorf("barista_connections_closed_idle_total{listener=\"grpc\"} = %v, want at least 12", got)
	}
}

// TestForwardedSubmitsChargedToTheirCaller (finding 2): with tenant
// acme's request budget on the leader held by 16 stalled calls, beta's
// submits through a follower, gathered into the same batches as acme's,
// all succeed: the follower's batch is its own call, charged to it, not
// to the caller whose submit came first. (Before, a batch led by acme's
// submit was charged to acme's budget, and beta's submits in it were
// refused RESOURCE_EXHAUSTED naming acme's bytes.)
func TestForwardedSubmitsChargedToTheirCaller(t *testing.T) {
	c := startWithTokens(t, 3, "")
	c.WaitConverged(30 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	leader := c.WaitLeader(20 * time.Second)
	follower := c.Followers(leader)[0]
	goldTenants(t, ctx, pb.NewAdminClient(cluster.Dial(t, leader.GRPCAddr, adminToken, nil)), "acme", "beta")
	s, err := stallCalls(leader.GRPCAddr, "/barista.v1.Client/GetJob", "Bearer "+acmeToken, 20, 4_000_000)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	waitFor(t, 20*time.Second, "acme's budget on the leader held", func() (bool, string) {
		m, err := cluster.Scrape("http://" + leader.HTTPAddr + "/metrics")
		if err != nil {
			return false, err.Error()
		}
		held := m["barista_grpc_request_inflight_bytes"]
		return held >= 64<<20, fmt.Sprintf("%v bytes held", held)
	})
	acme := pb.NewClientClient(cluster.Dial(t, follower.GRPCAddr, acmeToken, nil))
	beta := pb.NewClientClient(cluster.Dial(t, follower.GRPCAddr, betaToken, nil))
	const callers, each = 24, 6
	var mu sync.Mutex
	betaErrs := map[string]int{}
	betaOK := 0
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 2 * callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for range each {
				if i%2 == 0 {
					acme.Submit(ctx, &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1000})
					continue
				}
				_, err := beta.Submit(ctx, &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1000})
				mu.Lock()
				if err != nil {
					betaErrs[status.Convert(err).Message()]++
				} else {
					betaOK++
				}
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	if betaOK != callers*each {
		t.Errorf("beta's submits through the follower beside acme's, with acme's budget held on the leader: %d of %d succeeded; refused: %v",
			betaOK, callers*each, betaErrs)
	}
}

// heldReadFlood opens n HTTP/JSON reads as token at once, each on a
// connection of its own from one of the 127.0.x.0/24 networks from
// first on, each naming a log index the node will not reach
// (X-Barista-Min-Index), so that the node holds it up to its read wait;
// it returns a channel that gets each answer's status (0: no answer).
func heldReadFlood(httpAddr, token string, n, first int) <-chan int {
	out := make(chan int, n)
	for i := range n {
		go func() {
			src := &net.TCPAddr{IP: net.IPv4(127, 0, byte(first+i/250), byte(2+i%250))}
			c := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
				DialContext: (&net.Dialer{LocalAddr: src, Timeout: 5 * time.Second}).DialContext}}
			req, _ := http.NewRequest("GET", "http://"+httpAddr+"/v1/jobs?stale=true", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("X-Barista-Min-Index", "1000000000")
			resp, err := c.Do(req)
			if err != nil {
				out <- 0
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			out <- resp.StatusCode
		}()
	}
	return out
}

// TestHTTPReadsSharedPerIdentity (finding 3): while tenant acme holds
// 1,150 HTTP/JSON reads on a node (each naming an index the node will
// not reach), tenant beta's reads over HTTP keep their latency: each
// answered 200 within a second. acme's reads past its bounds are
// answered 429 at once. (Before, acme's reads held the streams of the
// gateway's one connection, and beta's waited seconds for one.)
func TestHTTPReadsSharedPerIdentity(t *testing.T) {
	c := startWithTokens(t, 1, "[limits]\nconnections_per_address = 2048\n")
	n := c.Nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	goldTenants(t, ctx, pb.NewAdminClient(cluster.Dial(t, n.GRPCAddr, adminToken, nil)), "acme", "beta")
	const flood = 1150
	answers := heldReadFlood(n.HTTPAddr, acmeToken, flood, 20)
	waitFor(t, 20*time.Second, "acme's reads in", func() (bool, string) {
		m, err := cluster.Scrape("http://" + n.HTTPAddr + "/metrics")
		if err != nil {
			return false, err.Error()
		}
		got := m[`barista_connections{listener="http"}`] + float64(len(answers))
		return got >= flood, fmt.Sprintf("%v connections open or answered", got)
	})
	var took []time.Duration
	for range 10 {
		start := time.Now()
		r := httpDo(t, nil, "GET", "http://"+n.HTTPAddr+"/v1/jobs?stale=true", betaToken, nil, nil)
		took = append(took, time.Since(start))
		if r.code != 200 {
			t.Errorf("beta's read during acme's flood: %d %s", r.code, r.body)
		}
	}
	slowest := slices.Max(took)
	t.Logf("beta's 10 reads during acme's flood of %d held reads: slowest %s", flood, slowest.Round(time.Millisecond))
	if slowest > time.Second {
		t.Errorf("beta's slowest read during acme's flood took %s; want under 1s (its own share of the gateway)", slowest.Round(time.Millisecond))
	}
	// Those within acme's bounds are held for the node's read wait (7 s);
	// the rest are answered at once.
	statuses := map[int]int{}
	for wait := time.After(2 * time.Second); ; {
		select {
		case code := <-answers:
			statuses[code]++
			continue
		case <-wait:
		}
		break
	}
	t.Logf("acme's reads answered within 2s of the last of beta's: %v", statuses)
	if statuses[http.StatusTooManyRequests] < flood-2*64 {
		t.Errorf("acme's reads answered %v: want all but its bounds' worth 429", statuses)
	}

	// Over gRPC: acme's reads past limits.held_reads_per_identity (64)
	// are refused at once; beta's are served.
	acme := pb.NewClientClient(cluster.Dial(t, n.GRPCAddr, acmeToken, nil))
	beta := pb.NewClientClient(cluster.Dial(t, n.GRPCAddr, betaToken, nil))
	held := metadata.AppendToOutgoingContext(ctx, "x-barista-min-index", "1000000000")
	refused := make(chan codes.Code, 80)
	for range 80 {
		go func() {
			_, err := acme.ListJobs(held, &pb.ListJobsRequest{Read: &pb.ReadOptions{Stale: true}})
			refused <- status.Code(err)
		}()
	}
	got := map[codes.Code]int{}
	for wait := time.After(2 * time.Second); ; {
		select {
		case code := <-refused:
			got[code]++
			continue
		case <-wait:
		}
		break
	}
	// Its reads held through the gateway count too (the same caller).
	if got[codes.ResourceExhausted] < 16 || len(got) != 1 {
		t.Errorf("acme's 80 held reads over gRPC, answered within 2s: %v; want 16 or more RESOURCE_EXHAUSTED and the rest held (64 with those over HTTP)", got)
	}
	start := time.Now()
	if _, err := beta.ListJobs(ctx, &pb.ListJobsRequest{Read: &pb.ReadOptions{Stale: true}}); err != nil || time.Since(start) > time.Second {
		t.Errorf("beta's read over gRPC beside acme's held ones: %v after %s", err, time.Since(start))
	}
}

// TestTokensNotSentInClear (finding 6): the CLI and the worker refuse to
// send a token without TLS to a server that is not on this machine,
// naming --insecure-grpc, before they connect; with --insecure-grpc they
// do connect. (Before, both sent "Bearer TOKEN" in clear without a
// word.)
func TestTokensNotSentInClear(t *testing.T) {
	ip := nonLoopbackIP(t)
	if ip == "" {
		t.Skip("this machine has no non-loopback IPv4 address")
	}
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	conns := 0
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns++
			mu.Unlock()
			c.Close()
		}
	}()
	accepted := func() int {
		mu.Lock()
		defer mu.Unlock()
		return conns
	}
	bin := cluster.Binary(t)
	const token = "s3cr3t-in-clear-0001"
	run := func(args ...string) (int, string) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "BARISTA_TOKEN=")
		out, err := cmd.CombinedOutput()
		return exitCode(err), string(out)
	}
	addr := ln.Addr().String()
	for _, args := range [][]string{
		{"jobs", "--server", addr, "--token", token, "--tenant", "acme", "--rpc-timeout", "2s"},
		{"worker", "--server", addr, "--token", token, "--size", "sm", "--id", "w1", "--log-dir", t.TempDir(), "--work-dir", t.TempDir()},
	} {
		code, out := run(args...)
		if code != 2 || !strings.Contains(out, "--insecure-grpc") || strings.Contains(out, token) {
			t.Errorf("barista %s: exit %d: %s\nwant exit 2, a refusal naming --insecure-grpc, and no token", args[0], code, out)
		}
	}
	if n := accepted(); n != 0 {
		t.Errorf("the non-loopback server got %d connections; want none before --insecure-grpc", n)
	}
	code, out := run("jobs", "--server", addr, "--token", token, "--tenant", "acme", "--rpc-timeout", "1s", "--insecure-grpc")
	if code == 0 || accepted() == 0 {
		t.Errorf("with --insecure-grpc: exit %d, %d connections: %s; want a connection (and a failure: nothing serves gRPC there)", code, accepted(), out)
	}
}

// boundWorkerToken is a worker token bound to the IDs "w-*".
const boundWorkerToken = "bound-worker-s3cr3t-0001"

const boundWorkerConfig = `
[[auth.tokens]]
role = "worker"
worker_id = "w-*"
token = "` + boundWorkerToken + `"
`

// workerSession opens a worker session of id on addr with token and
// holds it until the test ends; it returns the error of its Hello (nil
// once welcomed).
func workerSession(t *testing.T, addr, token, id string) error {
	t.Helper()
	cc := cluster.Dial(t, addr, token, nil)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := pb.NewWorkerClient(cc).Connect(ctx)
	if err != nil {
		return err
	}
	if err := stream.Send(&pb.WorkerMessage{Msg: &pb.WorkerMessage_Hello{Hello: &pb.Hello{WorkerId: id, Size: pb.Size_SM}}}); err != nil {
		return err
	}
	m, err := stream.Recv()
	if err != nil {
		return err
	}
	if m.GetWelcome() == nil {
		return fmt.Errorf("the answer to Hello: %v", m)
	}
	return nil
}

// TestDrainTakesTheWritePath (finding 5): a worker token's drains take
// the write path of every write: 100 drains of a drained worker make no
// log entry, and a loop of drains and undrains is held to the write rate
// (bursts of 200, then RESOURCE_EXHAUSTED). (Before, each drain was an
// entry: 44,208 of them in 20 s.)
func TestDrainTakesTheWritePath(t *testing.T) {
	c := startWithTokens(t, 1, boundWorkerConfig)
	n := c.Nodes[0]
	if err := workerSession(t, n.GRPCAddr, boundWorkerToken, "w-1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wk := pb.NewWorkerClient(cluster.Dial(t, n.GRPCAddr, boundWorkerToken, nil))
	node := clusterpb.NewNodeClient(cluster.Dial(t, n.GRPCAddr, adminToken, nil))
	lastIndex := func() uint64 {
		st, err := node.Status(ctx, &clusterpb.StatusRequest{SkipHash: true})
		if err != nil {
			t.Fatal(err)
		}
		return st.LastLogIndex
	}
	if _, err := wk.Drain(ctx, &pb.DrainRequest{WorkerId: "w-1"}); err != nil {
		t.Fatal(err)
	}
	before := lastIndex()
	for range 100 {
		if _, err := wk.Drain(ctx, &pb.DrainRequest{WorkerId: "w-1"}); err != nil {
			t.Fatalf("a drain of a drained worker: %v", err)
		}
	}
	// Clock ticks (one a second without other entries) may add a few.
	if grew := lastIndex() - before; grew > 3 {
		t.Errorf("100 drains of a drained worker added %d log entries; want none (but clock ticks)", grew)
	}
	refused := 0
	for i := range 300 {
		_, err := wk.Drain(ctx, &pb.DrainRequest{WorkerId: "w-1", Undrain: i%2 == 0})
		switch status.Code(err) {
		case codes.OK:
		case codes.ResourceExhausted:
			refused++
		default:
			t.Fatalf("drain %d: %v", i, err)
		}
	}
	if refused < 50 {
		t.Errorf("%d of 300 drains and undrains in a row refused; want those past the write rate's burst of 200 (and its 100/s)", refused)
	}
}

// TestWorkerRecordsPerBinding (finding 5): a worker token bound to "w-*"
// makes at most limits.worker_records_per_binding records: with 3 made
// (a session and a drain each), a session of a fourth new ID is refused
// RESOURCE_EXHAUSTED, while an ID with a record still connects.
func TestWorkerRecordsPerBinding(t *testing.T) {
	c := startWithTokens(t, 1, boundWorkerConfig+"\n[limits]\nworker_records_per_binding = 3\n")
	n := c.Nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wk := pb.NewWorkerClient(cluster.Dial(t, n.GRPCAddr, boundWorkerToken, nil))
	for i := range 3 {
		id := fmt.Sprintf("w-%d", i+1)
		if err := workerSession(t, n.GRPCAddr, boundWorkerToken, id); err != nil {
			t.Fatal(err)
		}
		if _, err := wk.Drain(ctx, &pb.DrainRequest{WorkerId: id}); err != nil {
			t.Fatal(err)
		}
	}
	err := workerSession(t, n.GRPCAddr, boundWorkerToken, "w-4")
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), "limits.worker_records_per_binding") {
		t.Errorf("a fourth new worker ID of the binding: %v; want RESOURCE_EXHAUSTED naming limits.worker_records_per_binding", err)
	}
	if _, err := pb.NewWorkerClient(cluster.Dial(t, n.GRPCAddr, adminToken, nil)).Drain(ctx, &pb.DrainRequest{WorkerId: "other", Create: true}); err != nil {
		t.Errorf("the admin's drain of another worker: %v", err)
	}
}

// TestTenantKeepsItsHistory (finding 4): with the cluster's event count
// at 300, tenant acme's 2,000 submits (its events push every older one
// out of the log) leave beta's 5 events watchable from seq 1: beta keeps
// them (event_retention_per_tenant, 10,000 on a new cluster). (Before,
// beta's watch from 1 was OUT_OF_RANGE: "older than the oldest retained
// event".)
func TestTenantKeepsItsHistory(t *testing.T) {
	c := startWithTokens(t, 1, "", "--prune-interval", "100ms")
	n := c.Nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := pb.NewAdminClient(cluster.Dial(t, n.GRPCAddr, adminToken, nil))
	goldTenants(t, ctx, admin, "acme", "beta")
	cfg, err := admin.GetConfig(ctx, &pb.GetConfigRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.EventRetentionCount = 300
	if _, err := admin.SetConfig(ctx, &pb.SetConfigRequest{Config: cfg}); err != nil {
		t.Fatal(err)
	}
	beta := pb.NewClientClient(cluster.Dial(t, n.GRPCAddr, betaToken, nil))
	acme := pb.NewClientClient(cluster.Dial(t, n.GRPCAddr, acmeToken, nil))
	var betaJobs []uint64
	for range 5 {
		r, err := beta.Submit(ctx, &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1000})
		if err != nil {
			t.Fatal(err)
		}
		betaJobs = append(betaJobs, r.JobId)
	}
	for range 4 {
		batch := &pb.SubmitBatchRequest{}
		for range 500 {
			batch.Jobs = append(batch.Jobs, &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1000})
		}
		if _, err := acme.SubmitBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	// The prune has run: the log holds 300 events, none of beta's.
	waitFor(t, 10*time.Second, "the log pruned to 300 events", func() (bool, string) {
		w, err := acme.WatchEvents(ctx, &pb.WatchEventsRequest{FromSeq: 1})
		if err != nil {
			return false, err.Error()
		}
		_, err = w.Recv()
		return status.Code(err) == codes.OutOfRange, fmt.Sprintf("acme's watch from 1: %v", err)
	})
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	w, err := beta.WatchEvents(wctx, &pb.WatchEventsRequest{FromSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for len(got) < 5 {
		ev, err := w.Recv()
		if err != nil {
			t.Fatalf("beta's watch from 1 after acme's flood, having read %v: %v", got, err)
		}
		got = append(got, ev.JobId)
	}
	if !slices.Equal(got, betaJobs) {
		t.Errorf("beta's watch from 1: jobs %v, want its own %v", got, betaJobs)
	}
}

// TestBulkChargedToWriteRate (finding 4, the storm's rate): a bulk
// command is charged to its caller's write rate by the jobs it looked at
// (100 a write): with write_rate 10/1s in bursts of 10, a cancel of
// 1,000 jobs takes the whole burst, and the tenant's next write is
// refused RATE_LIMITED, while another tenant's is not. (Before, a bulk
// command of 10,000 jobs cost one write, and a storm of them wrote a
// million events a second.)
func TestBulkChargedToWriteRate(t *testing.T) {
	c := startWithTokens(t, 1, "[limits]\nwrite_rate = \"10/1s\"\nwrite_burst = 10\n")
	n := c.Nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	goldTenants(t, ctx, pb.NewAdminClient(cluster.Dial(t, n.GRPCAddr, adminToken, nil)), "acme", "beta")
	acme := pb.NewClientClient(cluster.Dial(t, n.GRPCAddr, acmeToken, nil))
	beta := pb.NewClientClient(cluster.Dial(t, n.GRPCAddr, betaToken, nil))
	batch := &pb.SubmitBatchRequest{}
	for range 1000 {
		batch.Jobs = append(batch.Jobs, &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1000})
	}
	if _, err := acme.SubmitBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	r, err := acme.CancelJobs(ctx, &pb.BulkJobsRequest{Filter: &pb.JobFilter{}})
	if err != nil || r.Done != 1000 {
		t.Fatalf("cancel of acme's 1,000 jobs: %v, %v", r.GetDone(), err)
	}
	_, err = acme.Pause(ctx, &pb.PauseRequest{})
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), "write") {
		t.Errorf("acme's write after its cancel of 1,000 jobs: %v; want RESOURCE_EXHAUSTED for its write rate", err)
	}
	if _, err := beta.Pause(ctx, &pb.PauseRequest{}); err != nil {
		t.Errorf("beta's write beside it: %v", err)
	}
}

// TestWorkerRecordsOfAnUnboundToken: a worker token bound to no ID makes a
// record with each session of a new worker ID (the leader records what
// it runs); with limits.worker_records_unbound = 3, its fourth new ID is
// refused RESOURCE_EXHAUSTED naming the limit, while an ID the state
// knows still connects. (Before, a leaked fleet token could make records
// without bound.)
func TestWorkerRecordsOfAnUnboundToken(t *testing.T) {
	c := startWithTokens(t, 1, "\n[limits]\nworker_records_unbound = 3\n")
	n := c.Nodes[0]
	// The sessions end with the subtest (their streams close).
	t.Run("three new IDs", func(t *testing.T) {
		for i := range 3 {
			if err := workerSession(t, n.GRPCAddr, workerToken, fmt.Sprintf("fleet-%d", i+1)); err != nil {
				t.Fatalf("new worker ID %d: %v", i+1, err)
			}
		}
	})
	err := workerSession(t, n.GRPCAddr, workerToken, "fleet-4")
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), "limits.worker_records_unbound") {
		t.Errorf("a fourth new worker ID: %v; want RESOURCE_EXHAUSTED naming limits.worker_records_unbound", err)
	}
	// A known ID connects again once the leader has seen its stream end.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := workerSession(t, n.GRPCAddr, workerToken, "fleet-2")
		if err == nil {
			break
		}
		if status.Code(err) != codes.Aborted || time.Now().After(deadline) {
			t.Fatalf("a known worker ID's new session: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
