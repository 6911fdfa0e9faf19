package main

import (
	"strings"
	"testing"

	"barista/rpc"
)

// TestMetricsMaxTenantsSetting: metrics.max_tenants in the file, the flag
// over it, the default, and a negative value refused naming the flag.
func TestMetricsMaxTenantsSetting(t *testing.T) {
	p := writeConfig(t, "[metrics]\nmax_tenants = 0\n")
	base := []string{"--node-id", "n1", "--data-dir", t.TempDir(), "--config", p}
	if o := serverFlags(t, base...); o.maxTenants != 0 || metricsMaxTenants(o.maxTenants) != rpc.MetricsOnlyMarked {
		t.Fatalf("from the file: %d", o.maxTenants)
	}
	if o := serverFlags(t, append(base, "--metrics-max-tenants", "20")...); o.maxTenants != 20 || metricsMaxTenants(o.maxTenants) != 20 {
		t.Fatalf("flag over the file: %d", o.maxTenants)
	}
	if o := serverFlags(t, "--node-id", "n1", "--data-dir", t.TempDir()); o.maxTenants != rpc.DefaultMetricsMaxTenants {
		t.Fatalf("default: %d", o.maxTenants)
	}
	var out, errb strings.Builder
	code := Run([]string{"server", "--node-id", "n1", "--data-dir", t.TempDir(), "--metrics-max-tenants", "-3"}, &out, &errb)
	if want := "--metrics-max-tenants: -3 is negative (want 0 or more; 0: only tenants marked --export-metrics)"; code == 0 || !strings.Contains(errb.String(), want) {
		t.Fatalf("exit %d, stderr %q; want an error containing %q", code, errb.String(), want)
	}
}
