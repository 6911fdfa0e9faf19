package main

import (
	"bytes"
	"strings"
	"testing"

	pb "github.com/baristahq/barista/proto"
)

// TestRenderTop: barista top prints, per tenant and class, share and
// entitlement of the minute, the ratio over each window ("-" when
// undefined) and the lag ("-" without eligible work).
func TestRenderTop(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	top := &pb.TopResponse{LeaderId: "n1", AppliedIndex: 42, WindowMs: 60_000, Tenants: []*pb.TenantShare{
		{Name: "gold", Tier: pb.Tier_GOLD, Weight: 8, Queued: 3, Running: 1, Dispatches: 7, Share: 6.0 / 7, EntitledShare: 8.0 / 9,
			JobClass: pb.Class_NORMAL, Eligible: true, LagCpuMs: -3000, Windows: []*pb.FairWindow{
				{Window: "1m", Share: f(6.0 / 7), Entitled: f(8.0 / 9), Ratio: f(27.0 / 28)},
				{Window: "10m", Share: f(0.5), Entitled: f(0.5), Ratio: f(1)},
				{Window: "1h", Share: f(0.5)},
			}},
		{Name: "idle", Tier: pb.Tier_FREE, Weight: 1, JobClass: pb.Class_NORMAL},
	}, FairnessErrors: []*pb.FairnessError{{Pool: "default", Window: "10m", Defined: true, Error: 0.0123, Tenant: "gold", Class: pb.Class_NORMAL, Share: 0.5, Entitled: 0.5123}}}
	var b bytes.Buffer
	renderTop(&b, top)
	lines := strings.Split(b.String(), "\n")
	want := []string{
		"TENANT               TIER     CLASS     WEIGHT  QUEUED RUNNING   DISP   SHARE ENTITLED   R/1M  R/10M   R/1H      LAG  share (#) vs entitled (|)",
		"gold                 gold     normal         8       3       1      7   85.7%    88.9%   0.96   1.00      -    -3.0s  [##########################|   ]",
		"idle                 free     normal         1       0       0      0    0.0%        -      -      -      -        -  [                              ]",
	}
	if len(lines) != 8 || !strings.HasPrefix(lines[0], "barista · leader n1 · applied index 42 · ") {
		t.Fatalf("top:\n%s", b.String())
	}
	if w := "fairness error (largest |SHARE - ENTITLED|, 10 min): default 1.23% (gold, normal)"; lines[2] != w {
		t.Errorf("line 2:\n got %q\nwant %q", lines[2], w)
	}
	for i, w := range want {
		if lines[4+i] != w {
			t.Errorf("line %d:\n got %q\nwant %q", 4+i, lines[4+i], w)
		}
	}
}

// TestRenderTopPools: with a pool besides default, each line names its
// pool and the pools follow with their jobs and connected workers.
func TestRenderTopPools(t *testing.T) {
	top := &pb.TopResponse{LeaderId: "n1", AppliedIndex: 9, WindowMs: 60_000, Tenants: []*pb.TenantShare{
		{Name: "acme", Pool: "default", Tier: pb.Tier_GOLD, Weight: 8, Queued: 2, JobClass: pb.Class_NORMAL},
		{Name: "acme", Pool: "gpu", Tier: pb.Tier_GOLD, Weight: 1, Queued: 2, JobClass: pb.Class_NORMAL},
	}, Pools: []*pb.Pool{
		{Name: "default", Weights: "default", Queued: 1},
		{Name: "gpu", Weights: "equal", SubscriptionsRequired: true, Paused: true, Queued: 1, Running: 1, Workers: 2},
	}}
	var b bytes.Buffer
	renderTop(&b, top)
	lines := strings.Split(b.String(), "\n")
	want := []string{
		"TENANT               POOL         TIER     CLASS     WEIGHT  QUEUED RUNNING   DISP   SHARE ENTITLED   R/1M  R/10M   R/1H      LAG  share (#) vs entitled (|)",
		"acme                 default      gold     normal         8       2       0      0    0.0%        -      -      -      -        -  [                              ]",
		"acme                 gpu          gold     normal         1       2       0      0    0.0%        -      -      -      -        -  [                              ]",
		"",
		"POOL                 SUBSCRIPTIONS PAUSED SCHEDULED  QUEUED RUNNING WORKERS  WEIGHTS",
		"default              optional      no             0       1       0       0  default",
		"gpu                  required      yes            0       1       1       2  equal",
	}
	if len(lines) != 4+len(want)+1 {
		t.Fatalf("top:\n%s", b.String())
	}
	for i, w := range want {
		if lines[4+i] != w {
			t.Errorf("line %d:\n got %q\nwant %q", 4+i, lines[4+i], w)
		}
	}
}

// TestRenderTopResources: a tenant's first line is followed by what it
// holds of each resource (with its limit, when it has one), and the
// resources follow with capacity, tenant_max, held, queued, users and
// reservation; held may exceed capacity after a decrease.
func TestRenderTopResources(t *testing.T) {
	u := func(v uint32) *uint32 { return &v }
	top := &pb.TopResponse{LeaderId: "n1", AppliedIndex: 9, WindowMs: 60_000, Tenants: []*pb.TenantShare{
		{Name: "acme", Pool: "default", Tier: pb.Tier_GOLD, Weight: 8, Queued: 4, Running: 3, JobClass: pb.Class_NORMAL,
			Resources: []*pb.TenantResource{{Resource: "api", Held: 2, Max: u(3)}, {Resource: "licence", Held: 1}}},
	}, Pools: []*pb.Pool{{Name: "default", Weights: "default", Queued: 4, Running: 3}},
		Resources: []*pb.Resource{
			{Name: "api", Capacity: 4, TenantMax: u(3), Held: 2, Users: 5, Queued: 3, Blocked: 2, ReservedJobId: 17},
			{Name: "licence", Capacity: 0, Held: 1, Users: 1},
		}}
	var b bytes.Buffer
	renderTop(&b, top)
	lines := strings.Split(b.String(), "\n")
	want := []string{
		"TENANT               TIER     CLASS     WEIGHT  QUEUED RUNNING   DISP   SHARE ENTITLED   R/1M  R/10M   R/1H      LAG  share (#) vs entitled (|)",
		"acme                 gold     normal         8       4       3      0    0.0%        -      -      -      -        -  [                              ]",
		"  holds api 2/3 · licence 1",
		"",
		"RESOURCE             CAPACITY TENANT_MAX     HELD  QUEUED BLOCKED   USERS  RESERVED",
		"api                         4          3        2       3       2       5  17",
		"licence                     0          -        1       0       0       1  -",
		"",
	}
	if len(lines) != 4+len(want) {
		t.Fatalf("top:\n%s", b.String())
	}
	for i, w := range want {
		if lines[4+i] != w {
			t.Errorf("line %d:\n got %q\nwant %q", 4+i, lines[4+i], w)
		}
	}
}
