package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
)

// TestDriveCountsFailures: a bench variant whose calls are refused is
// failed with the refusal, not reported as a figure of the calls that
// got through (the 256-client submit once measured nothing, silently,
// when its tenant reached default_max_queued).
func TestDriveCountsFailures(t *testing.T) {
	refused := errors.New("RESOURCE_EXHAUSTED: tenant \"tenant-00000\" has 100000 queued jobs")
	r, lat := drive([]*grpc.ClientConn{nil}, 2, 20*time.Millisecond, func(_ *grpc.ClientConn, w, _ int) error {
		time.Sleep(time.Millisecond)
		if w == 1 {
			return refused
		}
		return nil
	})
	if r.calls == 0 || r.failed == 0 || len(lat.d) != int(r.calls) {
		t.Fatalf("calls %d failed %d latencies %d", r.calls, r.failed, len(lat.d))
	}
	err := r.check("submit from 2 clients")
	if err == nil || !strings.Contains(err.Error(), "submit from 2 clients: ") || !strings.Contains(err.Error(), "calls failed, the first with: "+refused.Error()) {
		t.Fatalf("check: %v", err)
	}
	ok, _ := drive([]*grpc.ClientConn{nil}, 1, 5*time.Millisecond, func(*grpc.ClientConn, int, int) error { return nil })
	if err := ok.check("read"); err != nil || ok.calls == 0 {
		t.Fatalf("a run without failures: %v (%d calls)", err, ok.calls)
	}
}
