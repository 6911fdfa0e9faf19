package rpc

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"google.golang.org/protobuf/proto"

	"github.com/baristahq/barista/internal/statemetrics"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
)

// addTenants creates tenants t-000000 .. t-(n-1), tiers in turn, each with
// one queued md job, in batches of commands per log entry.
func (n *testNode) addTenants(count int) {
	n.t.Helper()
	const batch = 500
	for lo := 0; lo < count; lo += batch {
		var cmds []*clusterpb.Command
		for i := lo; i < min(lo+batch, count); i++ {
			cmds = append(cmds, &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: fmt.Sprintf("t-%06d", i), Tier: pb.Tier(1 + i%5)}}})
		}
		n.propose(cmds...)
		cmds = cmds[:0]
		for i := lo; i < min(lo+batch, count); i++ {
			cmds = append(cmds, &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: fmt.Sprintf("t-%06d", i), Size: pb.Size_MD, EstCostMs: 1000}}})
		}
		n.propose(cmds...)
	}
}

// scrape returns one /metrics response body.
func scrape(tb testing.TB, h http.Handler, gzip bool) []byte {
	tb.Helper()
	req := httptest.NewRequest("GET", "/metrics", nil)
	if gzip {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		tb.Fatalf("/metrics: %d %s", rec.Code, rec.Body.String())
	}
	body, _ := io.ReadAll(rec.Body)
	return body
}

// samples counts the sample lines of a text exposition.
func samples(body []byte) int {
	n := 0
	for _, line := range bytes.Split(body, []byte("\n")) {
		if len(line) > 0 && line[0] != '#' {
			n++
		}
	}
	return n
}

// BenchmarkMetricsScrape10kTenants measures one /metrics scrape of a node
// holding 10,000 tenants: its time, and its size plain and gzipped. bound:
// the node's whole page with the default metrics.max_tenants (no tenant
// marked); all: the replicated state's series alone with a bound above
// 10,000, so that every tenant has its own series.
func BenchmarkMetricsScrape10kTenants(b *testing.B) {
	n := startTestNode(b, nil, nil)
	n.addTenants(10_000)
	all := prometheus.NewRegistry()
	all.MustRegister(statemetrics.New(n.node, 10_000))
	for _, c := range []struct {
		name string
		h    http.Handler
	}{
		{"bound", promhttp.HandlerFor(n.node.Metrics.Registry, promhttp.HandlerOpts{})},
		{"all", promhttp.HandlerFor(all, promhttp.HandlerOpts{})},
	} {
		for _, gz := range []bool{false, true} {
			b.Run(c.name+map[bool]string{false: "/plain", true: "/gzip"}[gz], func(b *testing.B) {
				var body []byte
				for b.Loop() {
					body = scrape(b, c.h, gz)
				}
				b.ReportMetric(float64(len(body)), "bytes/scrape")
				if !gz {
					b.ReportMetric(float64(samples(body)), "samples/scrape")
				}
			})
		}
	}
}

// families lists the barista families of a text exposition (its TYPE
// lines), sorted.
func families(body []byte) []string {
	var out []string
	for _, line := range strings.Split(string(body), "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[1] == "TYPE" && strings.HasPrefix(f[2], "barista_") {
			out = append(out, f[2])
		}
	}
	slices.Sort(out)
	return out
}

// TestMetricsLintClean: a node's metrics (its registry, which /metrics
// serves with the HTTP side's own: web's TestMetricsPage), with a tenant
// that ran a job and a resource, pass promlint, and hold exactly these barista families.
func TestMetricsLintClean(t *testing.T) {
	n := startTestNode(t, nil, nil)
	n.submit()
	w, _, err := n.connect("", hello("w1"))
	if err != nil {
		t.Fatal(err)
	}
	a := w.ready(1)
	w.send(&pb.WorkerMessage{Msg: &pb.WorkerMessage_Started{Started: &pb.JobStarted{Job: a.Job, Attempt: a.Attempt}}})
	w.send(finished(a.Job, a.Attempt, 1500, ""))
	for w.next().GetFinishedAck() == nil {
	}
	// A second job waits: acme has eligible work until cluster time
	// moves on (each entry is stamped with it), so that the fairness
	// ratio is defined.
	n.submit()
	capacity := uint32(4)
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_ResourceSet{ResourceSet: &clusterpb.ResourceSet{Name: "api", Capacity: &capacity}}})
	n.clockMoves()
	body := scrape(t, promhttp.HandlerFor(n.node.Metrics.Registry, promhttp.HandlerOpts{}), false)

	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	want := []string{
		"barista_applied_index", "barista_build_info", "barista_clock_ticks_total", "barista_cpu_billed_seconds_total", "barista_dispatch_latency_seconds", "barista_dispatch_stage_seconds",
		"barista_dispatched_cost_seconds_total", "barista_dispatches_total", "barista_entry_commands", "barista_evidence_refused_total", "barista_expiries_total",
		"barista_exported_tenants", "barista_fairness_error", "barista_fairness_lag_seconds", "barista_fairness_ratio", "barista_fenced_writes_total", "barista_fsm_apply_batch_seconds",
		"barista_grpc_calls_in_progress", "barista_grpc_calls_in_progress_refused_total", "barista_grpc_request_inflight_bytes", "barista_grpc_request_inflight_refused_total",
		"barista_grpc_unauthenticated_request_inflight_bytes", "barista_grpc_unauthenticated_request_inflight_refused_total",
		"barista_held_reads", "barista_held_reads_refused_total", "barista_is_leader",
		"barista_jobs_ended_total", "barista_leader_changes_total", "barista_pool_paused", "barista_pool_queued_jobs", "barista_pool_running_jobs",
		"barista_pool_scheduled_jobs", "barista_pool_workers", "barista_queued_jobs", "barista_raft_propose_seconds",
		"barista_resource_blocked_jobs", "barista_resource_capacity", "barista_resource_queued_jobs", "barista_resource_units_held",
		"barista_run_failures_total", "barista_running_jobs", "barista_schedule_fire_lateness_seconds", "barista_schedule_slots_proposed_total", "barista_snapshot_freeze_seconds", "barista_snapshot_persist_seconds", "barista_submit_forward_calls_total", "barista_submits_forwarded_total", "barista_submits_rate_limited_total",
		"barista_tenant_weight", "barista_tier_cpu_billed_seconds_total", "barista_tier_dispatched_cost_seconds_total",
		"barista_tier_dispatches_total", "barista_tier_jobs_ended_total", "barista_tier_queued_jobs", "barista_tier_run_failures_total",
		"barista_tier_running_jobs", "barista_tier_tenants", "barista_virtual_now_seconds",
		"barista_watch_connections_closed_total", "barista_watch_streams", "barista_watch_streams_behind_total", "barista_watch_streams_refused_total",
		"barista_watch_streams_stuck",
		"barista_worker_reports_unproposed_total", "barista_worker_sessions_refused_total", "barista_worker_starts_with_finished_total",
	}
	if got := families(body); !slices.Equal(got, want) {
		t.Errorf("families:\n got %q\nwant %q", got, want)
	}
	for _, line := range []string{
		`barista_cpu_billed_seconds_total{tenant="acme"} 1.5`,
		`barista_dispatched_cost_seconds_total{tenant="acme"} 1`,
		`barista_tier_cpu_billed_seconds_total{tier="gold"} 1.5`,
		`barista_tier_jobs_ended_total{state="completed",tier="gold"} 1`,
		`barista_exported_tenants 1`,
		// acme alone, charged 1 s estimated + 0.5 s corrected, and entitled to
		// all of it: exactly 1 (its weight 8 divides the integral exactly).
		`barista_fairness_ratio{class="normal",pool="default",tenant="acme",window="1m"} 1`,
		`barista_fairness_ratio{class="normal",pool="default",tenant="acme",window="10m"} 1`,
		`barista_fairness_ratio{class="normal",pool="default",tenant="acme",window="1h"} 1`,
		// Idle after its first run, its second submit reactivated it at
		// virtual_now (the activation clamp; virtual_now 1.5 s / 8): no
		// lag while it waits.
		`barista_fairness_lag_seconds{class="normal",pool="default",tenant="acme"} 0`,
		`barista_virtual_now_seconds 0.1875`,
		// The pool's fairness error: its one tenant got all it was due.
		`barista_fairness_error{pool="default"} 0`,
		`barista_evidence_refused_total{limit="node"} 0`,
	} {
		if !bytes.Contains(body, []byte("\n"+line+"\n")) {
			t.Errorf("no line %s", line)
		}
	}
}

// TestMetricsTenantBound: beyond the bound, only the tenants an admin
// marked export_metrics keep their own series; the tiers always report.
// The mark is set through the admin API and read back by GetTenant.
func TestMetricsTenantBound(t *testing.T) {
	n := startTestNode(t, nil, nil)
	admin := pb.NewAdminClient(n.dial(""))
	ctx := context.Background()
	for _, r := range []*pb.UpsertTenantRequest{
		{Name: "a", Tier: pb.Tier_GOLD.Enum()},
		{Name: "b", Tier: pb.Tier_GOLD.Enum()},
		{Name: "c", Tier: pb.Tier_FREE.Enum(), ExportMetrics: proto.Bool(true)},
	} {
		out, err := admin.UpsertTenant(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if out.ExportMetrics != r.GetExportMetrics() {
			t.Fatalf("upsert %s: export_metrics %v, want %v", r.Name, out.ExportMetrics, r.GetExportMetrics())
		}
	}
	if got, err := admin.GetTenant(ctx, &pb.GetTenantRequest{Name: "c"}); err != nil || !got.ExportMetrics {
		t.Fatalf("get c: %v, %v; want export_metrics", got, err)
	}
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "a", Size: pb.Size_SM, EstCostMs: 10}}})
	// a and c each get a job dispatched and keep one queued: both have a
	// fairness ratio (the series count below).
	for _, name := range []string{"a", "c", "c"} {
		n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: name, Size: pb.Size_SM, EstCostMs: 10}}})
	}
	for i := range 2 {
		n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: fmt.Sprintf("w%d", i), Size: pb.Size_SM, Credit: 1}}})
	}
	n.clockMoves()

	check := func(max int, want string, ratios int) {
		t.Helper()
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(statemetrics.New(n.node, max))
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "barista_running_jobs", "barista_exported_tenants",
			"barista_tier_tenants", "barista_tier_queued_jobs"); err != nil {
			t.Errorf("max_tenants %d: %v", max, err)
		}
		// Three windows of each tenant with its own series and a ratio.
		if n, err := testutil.GatherAndCount(reg, "barista_fairness_ratio"); err != nil || n != ratios {
			t.Errorf("max_tenants %d: %d fairness ratio series (%v)", max, n, err)
		}
	}
	const tiers = `# HELP barista_tier_queued_jobs Queued jobs by tier and size.
# TYPE barista_tier_queued_jobs gauge
barista_tier_queued_jobs{size="lg",tier="bronze"} 0
barista_tier_queued_jobs{size="lg",tier="diamond"} 0
barista_tier_queued_jobs{size="lg",tier="free"} 0
barista_tier_queued_jobs{size="lg",tier="gold"} 0
barista_tier_queued_jobs{size="lg",tier="silver"} 0
barista_tier_queued_jobs{size="md",tier="bronze"} 0
barista_tier_queued_jobs{size="md",tier="diamond"} 0
barista_tier_queued_jobs{size="md",tier="free"} 0
barista_tier_queued_jobs{size="md",tier="gold"} 0
barista_tier_queued_jobs{size="md",tier="silver"} 0
barista_tier_queued_jobs{size="sm",tier="bronze"} 0
barista_tier_queued_jobs{size="sm",tier="diamond"} 0
barista_tier_queued_jobs{size="sm",tier="free"} 1
barista_tier_queued_jobs{size="sm",tier="gold"} 1
barista_tier_queued_jobs{size="sm",tier="silver"} 0
# HELP barista_tier_tenants Live tenants by tier.
# TYPE barista_tier_tenants gauge
barista_tier_tenants{tier="bronze"} 0
barista_tier_tenants{tier="diamond"} 0
barista_tier_tenants{tier="free"} 1
barista_tier_tenants{tier="gold"} 2
barista_tier_tenants{tier="silver"} 0
`
	check(3, `# HELP barista_exported_tenants Tenants with their own series on this node: every live tenant while there are at most metrics.max_tenants, otherwise those marked export_metrics.
# TYPE barista_exported_tenants gauge
barista_exported_tenants 3
# HELP barista_running_jobs Assigned and running jobs by tenant (tenants with their own series only).
# TYPE barista_running_jobs gauge
barista_running_jobs{tenant="a"} 1
barista_running_jobs{tenant="b"} 0
barista_running_jobs{tenant="c"} 1
`+tiers, 6) // a and c, three windows each; b has none
	check(2, `# HELP barista_exported_tenants Tenants with their own series on this node: every live tenant while there are at most metrics.max_tenants, otherwise those marked export_metrics.
# TYPE barista_exported_tenants gauge
barista_exported_tenants 1
# HELP barista_running_jobs Assigned and running jobs by tenant (tenants with their own series only).
# TYPE barista_running_jobs gauge
barista_running_jobs{tenant="c"} 1
`+tiers, 3)
}

// TestMetricsResources: every declared resource has its units held, its
// capacity (below the units held after a decrease), its queued jobs and
// those it blocks (both api jobs need 2 units of 1), a resource no job
// uses has zeros, and the page passes promlint.
func TestMetricsResources(t *testing.T) {
	n := startTestNode(t, nil, nil)
	capacity := func(c uint32) *uint32 { return &c }
	set := func(name string, c uint32) *clusterpb.Command {
		return &clusterpb.Command{Cmd: &clusterpb.Command_ResourceSet{ResourceSet: &clusterpb.ResourceSet{Name: name, Capacity: capacity(c)}}}
	}
	job := func(uses ...*pb.ResourceUse) *clusterpb.Command {
		return &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1000, Uses: uses}}}
	}
	api := &pb.ResourceUse{Resource: "api", Units: 2}
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD}}},
		set("api", 4), set("licence", 2))
	n.propose(job(api), job(api), job(api), job())
	// The first api job goes (2 units held, two api jobs queued), then
	// the capacity goes down to 1 under it.
	if r := n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: "w1", Size: pb.Size_SM, Credit: 1}}}); len(r) != 1 || r[0].Err() != nil || r[0].Job == 0 {
		t.Fatalf("dispatch: %+v", r)
	}
	n.propose(set("api", 1))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(statemetrics.New(n.node, 10))
	want := `# HELP barista_resource_blocked_jobs Queued jobs a resource holds back now (their units do not fit in its free units, or another job's reservation of it stands), by resource.
# TYPE barista_resource_blocked_jobs gauge
barista_resource_blocked_jobs{resource="api"} 2
barista_resource_blocked_jobs{resource="licence"} 0
# HELP barista_resource_capacity Capacity of a resource in units, by resource (below units_held after a decrease, which preempts nothing).
# TYPE barista_resource_capacity gauge
barista_resource_capacity{resource="api"} 1
barista_resource_capacity{resource="licence"} 2
# HELP barista_resource_queued_jobs Queued jobs that use a resource (waiting for its units, or for a worker), by resource.
# TYPE barista_resource_queued_jobs gauge
barista_resource_queued_jobs{resource="api"} 2
barista_resource_queued_jobs{resource="licence"} 0
# HELP barista_resource_units_held Units of a resource that live (assigned or running) jobs hold, by resource.
# TYPE barista_resource_units_held gauge
barista_resource_units_held{resource="api"} 2
barista_resource_units_held{resource="licence"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "barista_resource_blocked_jobs", "barista_resource_capacity", "barista_resource_queued_jobs", "barista_resource_units_held"); err != nil {
		t.Error(err)
	}
	problems, err := promlint.New(bytes.NewReader(scrape(t, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), false))).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// TestMetricsPools: a tenant active in two pools has a fairness ratio and
// lag in each, told apart by their pool label (one series each, never the
// same labels twice), and every pool has its jobs, its pause and (on the
// leader) its connected workers; the page passes promlint.
func TestMetricsPools(t *testing.T) {
	n := startTestNode(t, nil, nil)
	job := func(pool string) *clusterpb.Command {
		return &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1000, Pool: pool}}}
	}
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD}}},
		&clusterpb.Command{Cmd: &clusterpb.Command_PoolSet{PoolSet: &clusterpb.PoolSet{Name: "gpu"}}})
	n.propose(job(""), job(""), job("gpu"), job("gpu"), job("gpu"))
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: "w1", Size: pb.Size_SM, Credit: 1}}},
		&clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: "w2", Size: pb.Size_SM, Credit: 1, Pool: "gpu"}}},
		&clusterpb.Command{Cmd: &clusterpb.Command_Pause{Pause: &clusterpb.Pause{Pool: "gpu"}}})
	n.clockMoves()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(statemetrics.New(n.node, 10),
		statemetrics.NewPoolWorkers(n.node, func(pool string) int { return map[string]int{"gpu": 3}[pool] }))
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`# HELP barista_pool_paused 1 if dispatch in the pool is paused (barista pool pause), by pool.
# TYPE barista_pool_paused gauge
barista_pool_paused{pool="default"} 0
barista_pool_paused{pool="gpu"} 1
# HELP barista_pool_queued_jobs Queued jobs by pool.
# TYPE barista_pool_queued_jobs gauge
barista_pool_queued_jobs{pool="default"} 1
barista_pool_queued_jobs{pool="gpu"} 2
# HELP barista_pool_running_jobs Assigned and running jobs by pool.
# TYPE barista_pool_running_jobs gauge
barista_pool_running_jobs{pool="default"} 1
barista_pool_running_jobs{pool="gpu"} 1
# HELP barista_pool_scheduled_jobs Jobs delayed or backing off, by pool.
# TYPE barista_pool_scheduled_jobs gauge
barista_pool_scheduled_jobs{pool="default"} 0
barista_pool_scheduled_jobs{pool="gpu"} 0
# HELP barista_pool_workers Connected workers by pool, on the leader (which holds the worker sessions; a follower reports none).
# TYPE barista_pool_workers gauge
barista_pool_workers{pool="default"} 0
barista_pool_workers{pool="gpu"} 3
`), "barista_pool_paused", "barista_pool_queued_jobs", "barista_pool_running_jobs", "barista_pool_scheduled_jobs", "barista_pool_workers"); err != nil {
		t.Error(err)
	}
	// acme, alone in each pool: ratio exactly 1 in both, three windows
	// each; its lag in each pool, where it has eligible work: one job of
	// 1 s dispatched at weight 8 puts its tag 125 virtual ms ahead, 1 CPU s.
	body := scrape(t, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), false)
	for _, line := range []string{
		`barista_fairness_ratio{class="normal",pool="default",tenant="acme",window="1m"} 1`,
		`barista_fairness_ratio{class="normal",pool="gpu",tenant="acme",window="1h"} 1`,
		`barista_fairness_lag_seconds{class="normal",pool="default",tenant="acme"} -1`,
		`barista_fairness_lag_seconds{class="normal",pool="gpu",tenant="acme"} -1`,
	} {
		if !bytes.Contains(body, []byte("\n"+line+"\n")) {
			t.Errorf("no line %s in\n%s", line, body)
		}
	}
	if c, err := testutil.GatherAndCount(reg, "barista_fairness_ratio"); err != nil || c != 6 {
		t.Errorf("%d fairness ratio series (%v), want 6", c, err)
	}
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}
