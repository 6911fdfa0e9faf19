package test

import (
	"context"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestExampleTypedAPI: examples/typed-api, a program of the typed Go SDK
// alone — none of its files imports package proto or a protobuf package —
// does tenant admin, runs a worker, inserts, watches, explains and
// cancels (from a client and from a job's own function) on a three-node
// cluster with tokens, and prints what docs/sdk-go.md says each step
// does. Its first node is a follower: the insert is forwarded to the
// leader, and still takes its job from the submit's answer, one call.
func TestExampleTypedAPI(t *testing.T) {
	dir, err := filepath.Abs("../examples/typed-api")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	if len(files) == 0 {
		t.Fatalf("no Go file in %s", dir)
	}
	for _, f := range files {
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == "github.com/baristahq/barista/proto" || strings.HasPrefix(p, "google.golang.org/protobuf") || strings.HasPrefix(p, "github.com/baristahq/barista/proto/") {
				t.Errorf("%s imports %s: the typed API must not need it", filepath.Base(f), p)
			}
		}
	}
	bin := buildExample(t, "./typed-api")

	c := startWithTokens(t, 3, "")
	leader := c.WaitLeader(20 * time.Second)
	var servers []string
	for _, n := range c.Followers(leader) {
		servers = append(servers, n.GRPCAddr)
	}
	servers = append(servers, leader.GRPCAddr)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--server", strings.Join(servers, ","), "--tenant", "shop")
	cmd.Env = append(os.Environ(), "BARISTA_ADMIN_TOKEN="+adminToken, "BARISTA_WORKER_TOKEN="+workerToken)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("typed-api: %v\n%s\n%s", err, out, stderr.String())
	}
	want := `tenant shop: created=true tier=silver max_queued=1000 rate=600/1m0s
tenant shop: tier=gold max_queued=1000 (kept)
subscription shop/default: burst 4
worker tour-1, tour-2: runs cleanup, invoice
inserted job 1: kind invoice, form function, submitted 0s ago or less (calls: Submit 1, GetJob 0)
job 1 events: queued assigned started completed
job 1: completed on tour, attempt 1, output "billed c-17 4200 cents"
job 2 waits: no_worker (kind export)
job 2: cancelled
job 3 events: queued assigned started cancel_requested/requested cancelled/requested
job 3: cancelled, failures 0, stderr "the order was withdrawn"
jobs of shop: 2 cancelled, 1 completed
observed: cancelled cleanup of shop: cancelled
observed: finished invoice of shop: ok
worker stopped
`
	// The run's started event and the cancel's are the leader's and the
	// client's: either may come first (a worker lets its Started wait a
	// moment, Welcome.started_delay_ms).
	got := strings.Replace(string(out), "assigned cancel_requested/requested started cancelled", "assigned started cancel_requested/requested cancelled", 1)
	if got != want {
		t.Errorf("typed-api printed:\n%s\nwant:\n%s\nstderr:\n%s", out, want, stderr.String())
	}
}
