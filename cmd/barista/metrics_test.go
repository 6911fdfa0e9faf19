package main

import (
	"strings"
	"testing"

	"github.com/baristahq/barista/rpc"
)

// TestMetricsMaxTenantsSetting: metrics.max_tenants in the file, the flag
// over it, the default, and a negative value refused naming the flag.
func TestMetricsMaxTenantsSetting(t *testing.T) {
	p := writeConfig(t, "[metrics]\nmax_tenants = 0\n")
	base := []string{"--node-id", "n1", "--data-dir", t.TempDir(), "--config", p}
	if o := serverFlags(t, base...); o.MetricsMaxTenants != 0 || metricsMaxTenants(o.MetricsMaxTenants) != rpc.MetricsOnlyMarked {
		t.Fatalf("from the file: %d", o.MetricsMaxTenants)
	}
	if o := serverFlags(t, append(base, "--metrics-max-tenants", "20")...); o.MetricsMaxTenants != 20 || metricsMaxTenants(o.MetricsMaxTenants) != 20 {
		t.Fatalf("flag over the file: %d", o.MetricsMaxTenants)
	}
	if o := serverFlags(t, "--node-id", "n1", "--data-dir", t.TempDir()); o.MetricsMaxTenants != rpc.DefaultMetricsMaxTenants {
		t.Fatalf("default: %d", o.MetricsMaxTenants)
	}
	var out, errb strings.Builder
	code := Run([]string{"server", "--node-id", "n1", "--data-dir", t.TempDir(), "--metrics-max-tenants", "-3"}, &out, &errb)
	if want := "--metrics-max-tenants: -3 is out of range (0..10000000)"; code == 0 || !strings.Contains(errb.String(), want) {
		t.Fatalf("exit %d, stderr %q; want an error containing %q", code, errb.String(), want)
	}
}
