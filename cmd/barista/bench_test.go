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

// TestBenchMedians: --repeat's summary is each variant's median, per
// figure, over its runs; a variant run once has none.
func TestBenchMedians(t *testing.T) {
	r := func(v string, ops, cpu float64) benchResult {
		return benchResult{Scenario: "dispatch", Variant: v, OpsPerS: ops, P50Ms: ops / 1000, Params: map[string]any{"tenants": 100}, Results: map[string]any{"cluster_cpu_us_per_dispatch": cpu, "note": "x"}}
	}
	got := benchMedians([]benchResult{r("a", 10, 5), r("b", 20, 7), r("a", 30, 6), r("b", 40, 9), r("a", 20, 1), r("c", 1, 1)})
	if len(got) != 2 {
		t.Fatalf("%d medians, want 2 (a and b): %+v", len(got), got)
	}
	a, b := got[0], got[1]
	if a.Scenario != "dispatch-median" || a.Variant != "a" || a.OpsPerS != 20 || a.P50Ms != 0.02 || a.Results["cluster_cpu_us_per_dispatch"] != 5.0 || a.Params["runs"] != 3 || a.Params["tenants"] != 100 {
		t.Fatalf("a: %+v", a)
	}
	if b.Variant != "b" || b.OpsPerS != 30 || b.Results["cluster_cpu_us_per_dispatch"] != 8.0 || b.Params["runs"] != 2 {
		t.Fatalf("b: %+v", b)
	}
	if _, ok := a.Results["note"]; ok {
		t.Fatalf("a text result has no median: %+v", a.Results)
	}
}

// TestDispatchVariantNames: --only takes each variant's name and refuses
// an unknown one.
func TestDispatchVariantNames(t *testing.T) {
	want := []string{"dispatch-100", "dispatch-100-resources-3", "dispatch-100-kinds-10", "dispatch-100-pools-4", "dispatch-10000",
		"dispatch-100-paced-250ms", "dispatch-100-paced-500ms", "dispatch-100-pools-4-paced-250ms"}
	if got := dispatchVariantNames(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("names %v, want %v", got, want)
	}
	if err := checkDispatchVariants("dispatch-100,dispatch-100-resources-3"); err != nil {
		t.Fatal(err)
	}
	if err := checkDispatchVariants("dispatch-100,dispatch-7"); err == nil || !strings.Contains(err.Error(), `no variant "dispatch-7"`) {
		t.Fatalf("unknown variant: %v", err)
	}
}
