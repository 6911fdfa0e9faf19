package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/internal/wire"
	pb "github.com/baristahq/barista/proto"
)

// syncBuffer is a log output read while the agent writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAgentRefused: the agent names its pool in every Hello; a refusal
// no retry can change — an unknown pool (NOT_FOUND), a token the cluster
// does not know (UNAUTHENTICATED) or that may not be this worker
// (PERMISSION_DENIED), a Hello it does not take (INVALID_ARGUMENT) — ends
// Run with that error, in the leader's words, for the caller to say (the
// agent used to retry an unknown pool, logging nothing without a logger,
// and return nil when its context ended).
func TestAgentRefused(t *testing.T) {
	for _, c := range []struct {
		code codes.Code
		msg  string
	}{
		{codes.NotFound, `hello.pool: unknown pool "gpu" (an admin creates it: barista pool set gpu)`},
		{codes.Unauthenticated, "missing bearer token"},
		{codes.PermissionDenied, `hello.worker_id: "w1" is outside this token's binding (worker_id "x")`},
		{codes.InvalidArgument, "hello.size: SIZE_UNSPECIFIED"},
	} {
		f := &fakeLeader{notify: make(chan struct{}, 1), welcome: &pb.Welcome{HeartbeatIntervalMs: 1000, SelfKillAfterMs: 25_000, LeaderId: "n1", FinishReady: true}}
		f.refuse = func(stream int, h *pb.Hello) error { return status.Error(c.code, c.msg) }
		var logs syncBuffer
		addr := serve(t, f)
		a, err := New(Config{ID: "w1", Size: SizeMD, Pool: "gpu", Servers: []string{addr}, Runner: instant{},
			Dial:   []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: dropTime}))})
		if err != nil {
			t.Fatal(err)
		}
		err = a.Run(context.Background())
		want := fmt.Sprintf("worker \"w1\": %s refuses it: %s (%s)", addr, c.msg, code.Code(c.code))
		if !errors.Is(err, ErrRefused) || status.Code(err) != c.code || err.Error() != want {
			t.Errorf("%s: Run returned %v\nwant %s", c.code, err, want)
		}
		if got := logs.String(); got != "" {
			t.Errorf("%s: the refusal was logged besides: %s", c.code, got)
		}
		if got := strings.Join(f.messages(), "\n"); got != "1 hello w1 MD running=[] pool=gpu" {
			t.Errorf("%s: messages %s", c.code, got)
		}
	}
}

// TestAgentLogsToSlogDefault: an agent without a Logger logs through
// slog.Default() (stderr unless the program says otherwise).
func TestAgentLogsToSlogDefault(t *testing.T) {
	var logs syncBuffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: dropTime})))
	defer slog.SetDefault(old)
	f := &fakeLeader{notify: make(chan struct{}, 1), welcome: &pb.Welcome{HeartbeatIntervalMs: 1000, SelfKillAfterMs: 25_000, LeaderId: "n1", FinishReady: true}}
	a, err := New(Config{ID: "w1", Servers: []string{serve(t, f)}, Runner: instant{},
		Dial: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx) }()
	f.waitFor(t, "a Ready", func(m []string) bool { return strings.Contains(strings.Join(m, "\n"), "1 ready") })
	cancel()
	<-done
	if !strings.Contains(logs.String(), `level=INFO msg=connected`) {
		t.Fatalf("slog.Default() got:\n%s", logs.String())
	}
}

// dropTime leaves the time out of a test's log lines.
func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// TestAgentPoolName: a pool name the leader would refuse is refused at
// New, in the leader's words; "default" is the pool default.
func TestAgentPoolName(t *testing.T) {
	for _, c := range []struct{ pool, want string }{
		{"GPU", `pool name "GPU" has 'G' at byte 0 (want a-z, 0-9 and -, not starting with -)`},
		{"-gpu", `pool name "-gpu" has '-' at byte 0 (want a-z, 0-9 and -, not starting with -)`},
		{"default", ""},
		{"gpu-eu-1", ""},
	} {
		_, err := New(Config{ID: "w1", Pool: c.pool, Servers: []string{"127.0.0.1:1"}, Runner: instant{}})
		if got := errText(err); got != c.want {
			t.Errorf("pool %q: %q, want %q", c.pool, got, c.want)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestAgentLeaderChangeIsInfo: a stream the leader ends because its
// leadership ended (a graceful transfer: UNAVAILABLE with the NOT_LEADER
// reason) is logged at INFO, and the agent reconnects; any other broken
// stream is a WARN.
func TestAgentLeaderChangeIsInfo(t *testing.T) {
	f := &fakeLeader{notify: make(chan struct{}, 1), welcome: &pb.Welcome{HeartbeatIntervalMs: 1000, SelfKillAfterMs: 25_000, LeaderId: "n1", FinishReady: true}}
	f.refuse = func(stream int, h *pb.Hello) error {
		if stream == 1 {
			st, _ := status.New(codes.Unavailable, "session closed: this node no longer leads; reconnect to the new leader").
				WithDetails(&errdetails.ErrorInfo{Reason: wire.ReasonNotLeader, Domain: wire.ErrorDomain})
			return st.Err()
		}
		return nil
	}
	var logs syncBuffer
	a, err := New(Config{ID: "w1", Size: SizeMD, Servers: []string{serve(t, f)}, Runner: instant{},
		Dial:   []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: dropTime}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	f.waitFor(t, "a Ready on the second stream", func(m []string) bool { return strings.Contains(strings.Join(m, "\n"), "2 ready") })
	if l := logs.String(); !strings.Contains(l, `level=INFO msg="the leader changed; reconnecting"`) || strings.Contains(l, "level=WARN") {
		t.Fatalf("the log:\n%s", l)
	}
}
