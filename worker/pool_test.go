package worker

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

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

// TestAgentPool: the agent names its pool in every Hello; a leader that
// refuses it (NOT_FOUND: no such pool) is retried, each refusal logged
// with the pool and the leader's words, until the pool exists and the
// agent connects.
func TestAgentPool(t *testing.T) {
	f := &fakeLeader{notify: make(chan struct{}, 1), welcome: &pb.Welcome{HeartbeatIntervalMs: 1000, SelfKillAfterMs: 25_000, LeaderId: "n1", FinishReady: true}}
	f.refuse = func(stream int, h *pb.Hello) error {
		if stream <= 2 {
			return status.Errorf(codes.NotFound, "hello.pool: unknown pool %q (an admin creates it: barista pool set %s)", h.Pool, h.Pool)
		}
		return nil
	}
	var logs syncBuffer
	a, err := New(Config{ID: "w1", Size: pb.Size_MD, Pool: "gpu", Servers: []string{serve(t, f)}, Runner: instant{},
		Dial:   []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
		Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	got := f.waitFor(t, "a Ready on the third stream", func(m []string) bool {
		return strings.Contains(strings.Join(m, "\n"), "3 ready")
	})
	want := "1 hello w1 MD running=[] pool=gpu\n2 hello w1 MD running=[] pool=gpu\n3 hello w1 MD running=[] pool=gpu\n3 ready"
	if strings.Join(got, "\n") != want {
		t.Fatalf("messages:\n%s\nwant:\n%s", strings.Join(got, "\n"), want)
	}
	refusal := `[ERROR] the cluster refuses this worker: it has no pool of this name (an admin creates it: barista pool set NAME); retrying: pool=gpu`
	if n := strings.Count(logs.String(), refusal); n != 2 {
		t.Fatalf("the refusal is logged %d times, want 2; log:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), `error="hello.pool: unknown pool \"gpu\" (an admin creates it: barista pool set gpu)"`) {
		t.Fatalf("the log does not carry the leader's words:\n%s", logs.String())
	}
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
