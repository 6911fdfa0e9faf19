package test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/baristahq/barista/test/cluster"
)

// TestMetricsTenantBoundCLI: a server started with --metrics-max-tenants
// 1 gives its one tenant its own series; a second tenant takes both away;
// "tenant set --export-metrics" brings back the marked one's, "tenant get"
// shows the mark, --export-metrics=false removes it. Every page passes
// promlint.
func TestMetricsTenantBoundCLI(t *testing.T) {
	c := cluster.Start(t, 1, "--metrics-max-tenants", "1")
	n := c.Nodes[0]
	url := "http://" + n.HTTPAddr + "/metrics"
	cli := func(args ...string) string {
		t.Helper()
		out, errOut, err := c.Run(append(args, "--server", n.GRPCAddr)...)
		if err != nil {
			t.Fatalf("barista %s: %v\n%s", strings.Join(args, " "), err, errOut)
		}
		return out
	}
	// series returns the tenants with a barista_running_jobs series and
	// barista_exported_tenants, after linting the page.
	series := func() ([]string, float64) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		problems, err := promlint.New(resp.Body).Lint()
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
		m, err := cluster.Scrape(url)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for k := range m {
			if name, ok := strings.CutPrefix(k, `barista_running_jobs{tenant="`); ok {
				names = append(names, strings.TrimSuffix(name, `"}`))
			}
		}
		slices.Sort(names)
		return names, m["barista_exported_tenants"]
	}
	check := func(what string, want ...string) {
		t.Helper()
		got, count := series()
		if !slices.Equal(got, want) || count != float64(len(want)) {
			t.Fatalf("%s: series for %v (barista_exported_tenants %v), want %v", what, got, count, want)
		}
	}

	cli("tenant", "set", "a", "--tier", "gold")
	check("one tenant", "a")
	cli("tenant", "set", "b", "--tier", "free")
	check("two tenants, none marked")
	cli("tenant", "set", "b", "--export-metrics")
	check("b marked", "b")
	var got map[string]any
	if err := json.Unmarshal([]byte(cli("tenant", "get", "b", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	if got["export_metrics"] != true || got["tier"] != "free" {
		t.Fatalf("tenant get b --json: %v, want export_metrics true and tier free kept", got)
	}
	if out := cli("tenant", "get", "b"); !strings.Contains(out, "export_metrics  true") {
		t.Fatalf("tenant get b:\n%s", out)
	}
	cli("tenant", "set", "b", "--multiplier", "2")
	check("b updated without the flag keeps its mark", "b")
	cli("tenant", "set", "b", "--export-metrics=false")
	check("b unmarked")
	cli("tenant", "delete", "a")
	check("a deleted: one tenant again", "b")
}
