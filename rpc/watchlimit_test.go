package rpc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/client"
	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/auth"
	"github.com/baristahq/barista/internal/connlimit"
	"github.com/baristahq/barista/internal/nodetest"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
)

// watchSeries reads the node's series name (with the label limit when
// one is given) as /metrics shows it: the watch limits' instruments.
func watchSeries(t testing.TB, n *testNode, name string, limit ...string) float64 {
	t.Helper()
	fams, err := n.node.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if len(limit) > 0 && !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == "limit" && l.GetValue() == limit[0] }) {
				continue
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no series %s %v", name, limit)
	return 0
}

// watchNode is a node with tenants acme and beta, tokens for them and
// the admin, and limits.
func watchNode(t *testing.T, limits Limits) *testNode {
	t.Helper()
	n := startTestNodeWith(t, []auth.Token{{Secret: gwAdmin, Role: auth.RoleAdmin}, {Secret: gwAcme, Role: auth.RoleClient, Tenant: "acme"},
		{Secret: gwBeta, Role: auth.RoleClient, Tenant: "beta"}}, nil, Options{Limits: limits})
	for _, name := range []string{"acme", "beta"} {
		n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: name, Tier: pb.Tier_GOLD}}})
	}
	return n
}

// narrowConn connects with a token and the smallest flow-control
// windows gRPC allows (64 KiB): a client that reads nothing holds up its
// streams soon.
func narrowConn(t *testing.T, n *testNode, token string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(n.addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer{token: token}),
		grpc.WithStaticStreamWindowSize(64<<10), grpc.WithStaticConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// openWatch opens a watch and waits until the node accepted it (its
// header), or returns the refusal.
func openWatch(ctx context.Context, cc *grpc.ClientConn, req *pb.WatchEventsRequest) (grpc.ServerStreamingClient[pb.Event], error) {
	s, err := pb.NewClientClient(cc).WatchEvents(ctx, req)
	if err != nil {
		return nil, err
	}
	if _, err := s.Header(); err != nil {
		return nil, err
	}
	// A refused watch has no header: its error comes with the first Recv.
	if md := s.Trailer(); len(md) > 0 {
		_, err := s.Recv()
		return nil, err
	}
	return s, nil
}

// submitMany queues count jobs of tenant (nodetest.SubmitMany).
func submitMany(n *testNode, tenant string, count int) {
	nodetest.SubmitMany(n.t, n.node, tenant, count)
}

// TestWatchStreamLimits: with at most 3 watch streams on the node and 2
// per identity, acme's third is refused naming the identity's limit, and
// once the node serves 3 a fourth (beta's) is refused naming the node's
// (over HTTP too: web's TestWatchLimitsOverHTTP); a stream that ends
// frees its place.
func TestWatchStreamLimits(t *testing.T) {
	n := watchNode(t, Limits{WatchStreams: 3, WatchStreamsPerIdentity: 2})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	acme, beta := n.dial(gwAcme), n.dial(gwBeta)
	acmeCtx, endAcme := context.WithCancel(ctx)
	for i := range 2 {
		if _, err := openWatch(acmeCtx, acme, &pb.WatchEventsRequest{}); err != nil {
			t.Fatalf("acme's watch %d: %v", i+1, err)
		}
	}
	_, err := openWatch(ctx, acme, &pb.WatchEventsRequest{})
	want := "this token has 2 watch streams open on this node, the most it may (limits.watch_streams_per_identity): end one, or watch a tenant's events in one stream rather than a stream per job"
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || st.Message() != want {
		t.Errorf("acme's third watch: %v\nwant RESOURCE_EXHAUSTED: %s", err, want)
	}
	if _, err := openWatch(ctx, beta, &pb.WatchEventsRequest{}); err != nil {
		t.Fatalf("beta's first watch: %v", err)
	}
	_, err = openWatch(ctx, beta, &pb.WatchEventsRequest{})
	want = "this node serves 3 watch streams, the most it may (limits.watch_streams): try again later or on another node"
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || st.Message() != want {
		t.Errorf("beta's watch with the node full: %v\nwant RESOURCE_EXHAUSTED: %s", err, want)
	}
	endAcme()
	waitFor(t, 10*time.Second, "acme's watches to end", func() bool { return watchSeries(t, n, "barista_watch_streams") == 1 })
	if _, err := openWatch(ctx, beta, &pb.WatchEventsRequest{}); err != nil {
		t.Errorf("beta's watch once acme's ended: %v", err)
	}
	for limit, want := range map[string]float64{"identity": 1, "node": 1} {
		if got := watchSeries(t, n, "barista_watch_streams_refused_total", limit); got != want {
			t.Errorf("barista_watch_streams_refused_total{limit=%q} = %v, want %v", limit, got, want)
		}
	}
}

// TestWatchFallsBehind: a watch whose client reads nothing, with 64 KiB
// of flow-control window, while 5,000 events wait for it is ended
// within its stall time and its place freed; the client then reads
// what had been sent, in order, and the status that says where to
// resume: the seq after the last event it received.
func TestWatchFallsBehind(t *testing.T) {
	n := watchNode(t, Limits{WatchStall: 300 * time.Millisecond})
	cc := narrowConn(t, n, gwAcme)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := openWatch(ctx, cc, &pb.WatchEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	submitMany(n, "acme", 5000)
	waitFor(t, 20*time.Second, "the watch to be ended", func() bool {
		return watchSeries(t, n, "barista_watch_streams_behind_total") == 1 && watchSeries(t, n, "barista_watch_streams") == 0
	})
	var seqs []uint64
	for {
		ev, err := s.Recv()
		if err != nil {
			st := status.Convert(err)
			prefix := "this watch fell behind: its client took no event for 300ms while more waited (limits.watch_stall_timeout); watch again with from_seq = the seq after the last event received"
			if st.Code() != codes.ResourceExhausted || !strings.HasPrefix(st.Message(), prefix) {
				t.Fatalf("the watch ended with %v\nwant RESOURCE_EXHAUSTED: %s ...", err, prefix)
			}
			if len(seqs) == 0 || !strings.HasSuffix(st.Message(), fmt.Sprintf("(this node had sent up to %d)", seqs[len(seqs)-1]+1)) {
				t.Errorf("after %d events ending at %v: %s", len(seqs), seqs[len(seqs)-1:], st.Message())
			}
			break
		}
		seqs = append(seqs, ev.Seq)
	}
	if len(seqs) >= 5000 || !slices.IsSorted(seqs) || seqs[len(seqs)-1]-seqs[0] != uint64(len(seqs)-1) {
		t.Errorf("the events before the end: %d, from %d to %d; want fewer than 5,000, consecutive", len(seqs), seqs[0], seqs[len(seqs)-1])
	}
}

// TestWatchResumesAfterFallingBehind: the Go client's watch, whose
// callback holds the first event while 60,000 events wait (more than its 1 MiB window), is ended for
// falling behind; it then resumes from its cursor and sees every event
// once, in order.
func TestWatchResumesAfterFallingBehind(t *testing.T) {
	n := watchNode(t, Limits{WatchStall: 300 * time.Millisecond})
	var mu sync.Mutex
	var retries []string
	c, err := client.New([]string{n.addr}, client.Options{Token: gwAcme, WatchBackoff: client.Backoff{First: time.Millisecond, Max: 10 * time.Millisecond},
		OnWatchRetry: func(err error, from uint64, _ time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			retries = append(retries, fmt.Sprintf("%v", err))
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const count = 60_000
	_, next := n.node.FSM.Events(^uint64(0), func(*fsm.Event) bool { return false })
	release := make(chan struct{})
	var seen []uint64
	done := make(chan error, 1)
	errSeen := errors.New("seen every event")
	go func() {
		done <- c.Watch(context.Background(), &pb.WatchEventsRequest{FromSeq: next}, func(ev *pb.Event) error {
			if len(seen) == 0 {
				<-release
			}
			seen = append(seen, ev.Seq)
			if len(seen) == count {
				return errSeen
			}
			return nil
		})
	}()
	submitMany(n, "acme", count)
	waitFor(t, 30*time.Second, "the watch to be ended", func() bool { return watchSeries(t, n, "barista_watch_streams_behind_total") >= 1 })
	close(release)
	if err := <-done; err != errSeen {
		t.Fatalf("Watch: %v", err)
	}
	for i, seq := range seen {
		if seq != next+uint64(i) {
			t.Fatalf("event %d is seq %d, want %d: every event once, in order", i, seq, next+uint64(i))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(retries) == 0 || !strings.HasPrefix(retries[0], "RESOURCE_EXHAUSTED: this watch fell behind") {
		t.Errorf("retries %q, want the first for falling behind", retries)
	}
}

// TestStuckWatchesFreedByClosingTheirConnection: two watches of acme
// that fell behind on a connection whose client reads nothing stay
// counted against acme's limit of 2 (what they sent may wait there); a
// new watch of acme closes that connection, which frees both, and is
// served.
func TestStuckWatchesFreedByClosingTheirConnection(t *testing.T) {
	conns := connlimit.New(connlimit.Config{Max: 100, PerAddress: 100, Reserve: 1, FirstRequest: time.Minute, Registerer: prometheus.NewRegistry()})
	n := startTestNodeWith(t, []auth.Token{{Secret: gwAdmin, Role: auth.RoleAdmin}, {Secret: gwAcme, Role: auth.RoleClient, Tenant: "acme"}}, nil,
		Options{Conns: conns, Limits: Limits{WatchStreamsPerIdentity: 2, WatchStall: 300 * time.Millisecond}})
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD}}})
	silent := narrowConn(t, n, gwAcme)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var streams []grpc.ServerStreamingClient[pb.Event]
	for range 2 {
		s, err := openWatch(ctx, silent, &pb.WatchEventsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	submitMany(n, "acme", 5000)
	waitFor(t, 20*time.Second, "both watches ended and stuck", func() bool {
		return watchSeries(t, n, "barista_watch_streams_behind_total") == 2 && watchSeries(t, n, "barista_watch_streams_stuck") == 2 && watchSeries(t, n, "barista_watch_streams") == 0
	})
	if _, err := openWatch(ctx, n.dial(gwAcme), &pb.WatchEventsRequest{}); err != nil {
		t.Fatalf("a new watch of acme with its places held by stuck ones: %v", err)
	}
	if got := [3]float64{watchSeries(t, n, "barista_watch_connections_closed_total"), watchSeries(t, n, "barista_watch_streams_stuck"), watchSeries(t, n, "barista_watch_streams")}; got != [3]float64{1, 0, 1} {
		t.Errorf("connections closed, stuck, served: %v, want [1 0 1]", got)
	}
	for i, s := range streams {
		for {
			if _, err := s.Recv(); err != nil {
				if c := status.Code(err); c != codes.Unavailable && c != codes.ResourceExhausted {
					t.Errorf("stuck watch %d after its connection was closed: %v", i, err)
				}
				break
			}
		}
	}
}
