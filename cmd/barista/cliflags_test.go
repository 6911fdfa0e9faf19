package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/baristahq/barista/proto"
)

// TestCLINumbersRangeChecked: a number out of its field's range is a
// usage error naming the flag and the range, before anything is sent
// (--server points nowhere). These used to wrap: --cap 4294967297
// stored 1, and --timeout 1ns meant no timeout.
func TestCLINumbersRangeChecked(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"tenant", "set", "acme", "--cap", "4294967297"}, "barista tenant set: --cap: 4294967297 is out of range (0..4294967295)"},
		{[]string{"tenant", "set", "acme", "--cap-md", "-1"}, "barista tenant set: --cap-md: -1 is out of range (0..4294967295)"},
		{[]string{"tenant", "set", "acme", "--multiplier", "99999999999"}, "barista tenant set: --multiplier: 99999999999 is out of range (1..65536)"},
		{[]string{"tenant", "set", "acme", "--multiplier", "0"}, "barista tenant set: --multiplier: 0 is out of range (1..65536)"},
		{[]string{"tenant", "set", "acme", "--max-queued", "1e3"}, `barista tenant set: --max-queued: "1e3" is not a whole number`},
		{[]string{"tenant", "set", "acme", "--inflight-cpu", "1ns"},
			"barista tenant set: --inflight-cpu: 1ns is out of range (0 for none, or 1ms..2562047h in whole milliseconds)"},
		{[]string{"submit", "--size", "sm", "--cost", "1s", "--max-attempts", "4294967297", "--", "true"}, "barista submit: --max-attempts: 4294967297 is out of range (0..1000)"},
		{[]string{"submit", "--size", "sm", "--cost", "1s", "--timeout", "1ns", "--", "true"},
			"barista submit: --timeout: 1ns is out of range (0 for no timeout, or 1ms..8760h in whole milliseconds)"},
		{[]string{"submit", "--size", "sm", "--cost", "1s", "--timeout", "1500us", "--", "true"}, "barista submit: --timeout: 1500us is not a whole number of milliseconds"},
		{[]string{"submit", "--size", "sm", "--cost", "0s", "--", "true"}, "barista submit: --cost: 0s is out of range (1ms..8760h in whole milliseconds)"},
		{[]string{"submit", "--size", "sm", "--cost", "1s", "--deadline", "500ms", "--", "true"}, "barista submit: --deadline: 500ms is out of range (1s..8760h in whole milliseconds)"},
		{[]string{"submit", "--size", "sm", "--cost", "1s", "--class", "urgent", "--", "true"}, `barista submit: --class: "urgent" is not a class (critical, high, normal or low)`},
		{[]string{"tenant", "set", "acme", "--max-class", "top"}, `barista tenant set: --max-class: "top" is not a class (critical, high, normal or low)`},
		{[]string{"tenant", "set", "acme", "--deadlines", "maybe"}, `barista tenant set: --deadlines: "maybe" is not on or off`},
		{[]string{"tenant", "set", "acme", "--cap-high", "-1"}, "barista tenant set: --cap-high: -1 is out of range (0..4294967295)"},
		{[]string{"explain", "0"}, `bad job id "0"`},
		{[]string{"jobs", "--limit", "4294967297"}, "barista jobs: --limit: 4294967297 is out of range (1..1000)"},
		{[]string{"watch", "--from", "-1"}, "barista watch: --from: -1 is out of range (0..18446744073709551615)"},
		{[]string{"debug", "apply", "--unsafe-version", "4294967297", "{}"}, "barista debug apply: --unsafe-version: 4294967297 is out of range (0..4294967295)"},
		{[]string{"top", "--window", "25h"}, "barista top: --window: 25h is out of range (1ms..24h in whole milliseconds)"},
		{[]string{"status", "--rpc-timeout", "0s"}, "barista status: --rpc-timeout: 0s is out of range (1ms..24h)"},
		{[]string{"tls", "init", "--days", "0"}, "barista tls init: --days: 0 is out of range (1..36500)"},
		{[]string{"worker", "--size", "sm", "--max-log-bytes", "10"}, "barista worker: --max-log-bytes: 10 is out of range (4096..1099511627776)"},
		{[]string{"dev", "--nodes", "8"}, "barista dev: --nodes: 8 is out of range (1..7)"},
	}
	for _, c := range cases {
		var out, errb strings.Builder
		// Flags go before a job's "--"; --server points nowhere.
		args := append([]string{}, c.args...)
		switch c.args[0] {
		case "tls", "dev", "status":
		default:
			at := slices.Index(args, "--")
			if at < 0 {
				at = len(args)
			}
			args = slices.Insert(args, at, "--server", "127.0.0.1:1", "--rpc-timeout", "1s")
		}
		code := Run(args, &out, &errb)
		first, _, _ := strings.Cut(errb.String(), "\n")
		if code != 2 || first != c.want {
			t.Errorf("%v: exit %d, stderr:\n%s\nwant exit 2 and %q", c.args, code, errb.String(), c.want)
		}
	}
}

// fakeClient is a Client service that records batches and plays a
// scripted watch.
type fakeClient struct {
	pb.UnimplementedClientServer
	mu      sync.Mutex
	batches [][]*pb.SubmitRequest
	watches []*pb.WatchEventsRequest
	watch   func(call int, req *pb.WatchEventsRequest, s grpc.ServerStreamingServer[pb.Event]) error
}

func (f *fakeClient) SubmitBatch(_ context.Context, req *pb.SubmitBatchRequest) (*pb.SubmitBatchResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batches = append(f.batches, req.Jobs)
	out := &pb.SubmitBatchResponse{}
	for i := range req.Jobs {
		out.Results = append(out.Results, &pb.SubmitResult{JobId: uint64(i + 1), Created: true})
	}
	return out, nil
}

func (f *fakeClient) WatchEvents(req *pb.WatchEventsRequest, s grpc.ServerStreamingServer[pb.Event]) error {
	f.mu.Lock()
	f.watches = append(f.watches, req)
	call := len(f.watches)
	f.mu.Unlock()
	return f.watch(call, req, s)
}

// serveFake serves f on a loopback port until the test ends.
func serveFake(t *testing.T, f *fakeClient) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterClientServer(srv, f)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// TestSubmitFromFileLines: each line of a --from-file submit is checked
// with the flags' ranges; a line with data after its object is refused
// (it used to submit the first object and drop the rest); the other
// lines go on.
func TestSubmitFromFileLines(t *testing.T) {
	f := &fakeClient{}
	addr := serveFake(t, f)
	lines := []string{
		`{"tenant": "acme", "size": "sm", "cost": "1s", "argv": ["true"]}`,
		`{"tenant": "acme", "size": "sm", "cost": "1s", "argv": ["true"]} {"tenant": "acme", "size": "sm", "cost": "2s", "argv": ["x"]}`,
		`{"size": "sm", "cost": "1s", "timeout": "1ns", "argv": ["true"]}`,
		`{"size": "sm", "cost": "1s", "max_attempts": 4294967297, "argv": ["true"]}`,
		`{"size": "sm", "est_cost_ms": -5, "argv": ["true"]}`,
		`{"size": "sm", "cost": "1s", "timeout": "90s", "max_attempts": 4, "argv": ["true"]}`,
		`{"size": "sm", "cost": "1s", "est_cost_ms": 5, "argv": ["true"]}`,
		`{"size": "sm", "argv": ["true"]}`,
		`{"size": "sm", "cost": "1s", "argv": ["true"]} x`,
		`{"size": "sm", "cost": "1.5ms", "argv": ["true"]}`,
		`{"size": "sm", "est_cost_ms": 2.5, "argv": ["true"]}`,
		`{"size": "sm", "cost": "1s", "class": "high", "deadline": "10m", "argv": ["true"]}`,
		`{"size": "sm", "cost": "1s", "class": "urgent", "argv": ["true"]}`,
		`{"size": "sm", "cost": "1s", "deadline": "10ms", "argv": ["true"]}`,
	}
	path := filepath.Join(t.TempDir(), "jobs.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	code := Run([]string{"submit", "--from-file", path, "--tenant", "beta", "--server", addr}, &out, &errb)
	if code != 1 || out.String() != "4 submitted, 0 already existed, 10 refused\n" {
		t.Errorf("exit %d, stdout %q", code, out.String())
	}
	wantErr := strings.Join([]string{
		"line 2: INVALID_ARGUMENT: data after the job's JSON object (one object per line)",
		"line 3: INVALID_ARGUMENT: timeout: 1ns is out of range (0 for no timeout, or 1ms..8760h in whole milliseconds)",
		"line 4: INVALID_ARGUMENT: max_attempts: 4294967297 is out of range (0..1000)",
		"line 5: INVALID_ARGUMENT: est_cost_ms: -5 is out of range (1..31536000000)",
		"line 7: INVALID_ARGUMENT: give cost or est_cost_ms, not both",
		"line 9: INVALID_ARGUMENT: data after the job's JSON object (one object per line)",
		"line 10: INVALID_ARGUMENT: cost: 1.5ms is not a whole number of milliseconds",
		`line 11: INVALID_ARGUMENT: est_cost_ms: "2.5" is not a whole number`,
		`line 13: INVALID_ARGUMENT: class: "urgent" is not a class (critical, high, normal or low)`,
		"line 14: INVALID_ARGUMENT: deadline: 10ms is out of range (1s..8760h in whole milliseconds)",
	}, "\n") + "\n"
	if errb.String() != wantErr {
		t.Errorf("stderr:\n%s\nwant:\n%s", errb.String(), wantErr)
	}
	if len(f.batches) != 1 || len(f.batches[0]) != 4 {
		t.Fatalf("batches %v", f.batches)
	}
	a, b := f.batches[0][0], f.batches[0][1]
	// Without a cost the server decides (estimate=auto takes it).
	if c := f.batches[0][2]; c.EstCostMs != 0 || c.Class != pb.Class_CLASS_UNSPECIFIED || c.DeadlineMs != 0 {
		t.Errorf("line 8: %v", c)
	}
	if d := f.batches[0][3]; d.EstCostMs != 1000 || d.Class != pb.Class_HIGH || d.DeadlineMs != 600_000 {
		t.Errorf("line 12: %v", d)
	}
	if a.Tenant != "acme" || a.EstCostMs != 1000 || a.TimeoutMs != 0 || a.MaxAttempts != 0 || a.Size != pb.Size_SM {
		t.Errorf("line 1: %v", a)
	}
	if b.Tenant != "beta" || b.EstCostMs != 1000 || b.TimeoutMs != 90_000 || b.MaxAttempts != 4 {
		t.Errorf("line 6: %v", b)
	}
}

// runWatch runs "barista watch" against addr and waits at most limit.
func runWatch(t *testing.T, addr string, limit time.Duration) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb strings.Builder
	done := make(chan int, 1)
	go func() { done <- Run([]string{"watch", "--server", addr, "--tenant", "acme"}, &out, &errb) }()
	select {
	case code = <-done:
	case <-time.After(limit):
		t.Fatalf("watch still running after %s; stderr so far:\n%s", limit, errb.String())
	}
	return code, out.String(), errb.String()
}

// TestWatchStopsOnPermanentErrors: an error that never clears ends the
// watch with the error and exit 1, after one attempt (it used to print
// "reconnecting" every 300 ms forever).
func TestWatchStopsOnPermanentErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{status.Error(codes.PermissionDenied, `tenant: this token is for tenant "beta", not "acme"`), `PERMISSION_DENIED: tenant: this token is for tenant "beta", not "acme"`},
		{status.Error(codes.NotFound, `tenant: "acme" not found`), `NOT_FOUND: tenant: "acme" not found`},
		{status.Error(codes.Unauthenticated, "unknown token"), "UNAUTHENTICATED: unknown token"},
		{status.Error(codes.OutOfRange, "from_seq: 1 is older than the oldest retained event (9)"), "OUT_OF_RANGE: from_seq: 1 is older than the oldest retained event (9)"},
	} {
		f := &fakeClient{watch: func(int, *pb.WatchEventsRequest, grpc.ServerStreamingServer[pb.Event]) error { return c.err }}
		code, _, stderr := runWatch(t, serveFake(t, f), 10*time.Second)
		if code != 1 || stderr != c.want+"\n" || len(f.watches) != 1 {
			t.Errorf("%v: exit %d after %d calls, stderr %q", c.err, code, len(f.watches), stderr)
		}
	}
}

// TestWatchRetriesWithBackoff: failures that may clear are retried with
// a doubling wait, reset once an event arrives, resuming after the last
// event printed.
func TestWatchRetriesWithBackoff(t *testing.T) {
	old := watchBackoff
	watchBackoff.first, watchBackoff.most = time.Millisecond, 4*time.Millisecond
	t.Cleanup(func() { watchBackoff = old })
	f := &fakeClient{watch: func(call int, req *pb.WatchEventsRequest, s grpc.ServerStreamingServer[pb.Event]) error {
		switch call {
		case 1, 2, 3, 4:
			return status.Error([]codes.Code{codes.Unavailable, codes.Aborted, codes.ResourceExhausted, codes.Unavailable}[call-1], "try again")
		case 5:
			for seq := uint64(5); seq <= 6; seq++ {
				if err := s.Send(&pb.Event{Seq: seq, JobId: 1, Kind: "queued", AtMs: 1000}); err != nil {
					return err
				}
			}
			return status.Error(codes.Unavailable, "node shutting down")
		}
		return status.Error(codes.PermissionDenied, "no more")
	}}
	code, stdout, stderr := runWatch(t, serveFake(t, f), 20*time.Second)
	wantErr := strings.Join([]string{
		"watch: UNAVAILABLE: try again; reconnecting from 0 in 1ms",
		"watch: ABORTED: try again; reconnecting from 0 in 2ms",
		"watch: RESOURCE_EXHAUSTED: try again; reconnecting from 0 in 4ms",
		"watch: UNAVAILABLE: try again; reconnecting from 0 in 4ms",
		"watch: UNAVAILABLE: node shutting down; reconnecting from 7 in 1ms",
		"PERMISSION_DENIED: no more",
	}, "\n") + "\n"
	if code != 1 || stderr != wantErr {
		t.Errorf("exit %d, stderr:\n%s\nwant:\n%s", code, stderr, wantErr)
	}
	if n := strings.Count(stdout, "\n"); n != 2 || !strings.HasPrefix(stdout, "5 ") {
		t.Errorf("stdout:\n%s", stdout)
	}
	var from []uint64
	for _, w := range f.watches {
		from = append(from, w.FromSeq)
	}
	if len(from) != 6 || from[4] != 0 || from[5] != 7 {
		t.Errorf("watch calls from %v", from)
	}
}
