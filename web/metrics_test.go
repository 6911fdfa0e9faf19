package web

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// TestMetricsPage: /metrics serves the node's metrics (those of its gRPC
// server and its state: rpc's TestMetricsLintClean) and the HTTP side's
// own, and the whole page passes promlint.
func TestMetricsPage(t *testing.T) {
	n := startTestNode(t, nil, nil)
	n.submit()
	n.clockMoves()
	r := gwDo(t, n.serve(), "GET", "/metrics", "", "")
	if r.status != 200 {
		t.Fatalf("/metrics: %d %s", r.status, r.body)
	}
	problems, err := promlint.New(strings.NewReader(r.body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	var families []string
	for _, line := range strings.Split(r.body, "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[1] == "TYPE" {
			families = append(families, f[2])
		}
	}
	for _, want := range []string{
		// The HTTP side's.
		"barista_http_refused_total", "barista_http_unauthenticated_in_flight",
		"barista_web_logins_refused_total", "barista_web_sessions", "barista_web_sessions_evicted_total",
		// Some of the node's.
		"barista_is_leader", "barista_queued_jobs", "barista_watch_streams",
	} {
		if !slices.Contains(families, want) {
			t.Errorf("/metrics has no family %s", want)
		}
	}
}
