package rpc

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/auth"
	"github.com/baristahq/barista/internal/nodetest"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/sfq"
)

// Secrets of the pool tests' tokens.
const (
	poolAdminSecret = "pool-admin-secret-0123"
	poolAcmeSecret  = "pool-acme-secret-01234"
)

// poolNode is a one-node cluster with an admin token and a client token
// pinned to acme, and the clients of both.
type poolNode struct {
	node  *raftnode.Node
	srv   *Server
	admin pb.AdminClient
	cl    pb.ClientClient // the admin's
	acme  pb.ClientClient // acme's client token
}

// startPoolNode starts it with a build that understands feature levels up
// to level (0: this build's) and waits for that level.
func startPoolNode(t *testing.T, level uint32) *poolNode {
	t.Helper()
	node, srv, addr := serveNodeAt(t, level, func(*raftnode.Node) Options {
		auth, err := NewAuth([]auth.Token{{Secret: poolAdminSecret, Role: auth.RoleAdmin}, {Secret: poolAcmeSecret, Role: auth.RoleClient, Tenant: "acme"}}, false)
		if err != nil {
			t.Fatal(err)
		}
		return Options{Auth: auth}
	})
	dial := func(secret string) *grpc.ClientConn {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer{token: secret}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return cc
	}
	adminCC, acmeCC := dial(poolAdminSecret), dial(poolAcmeSecret)
	want := level
	if want == 0 {
		want = fsm.MaxFeatureLevel
	}
	nodetest.WaitFor(t, 20*time.Second, fmt.Sprintf("feature level %d", want), func() bool { return node.FSM.Level() == want })
	return &poolNode{node: node, srv: srv, admin: pb.NewAdminClient(adminCC), cl: pb.NewClientClient(adminCC), acme: pb.NewClientClient(acmeCC)}
}

func (n *poolNode) tenant(t *testing.T, name string, tier pb.Tier) {
	t.Helper()
	if _, err := n.admin.UpsertTenant(context.Background(), &pb.UpsertTenantRequest{Name: name, Tier: tier.Enum()}); err != nil {
		t.Fatal(err)
	}
}

func (n *poolNode) submit(t *testing.T, c pb.ClientClient, tenant, pool string) uint64 {
	t.Helper()
	resp, err := c.Submit(context.Background(), &pb.SubmitRequest{Tenant: tenant, Size: pb.Size_SM, EstCostMs: 1000, Pool: pool})
	if err != nil {
		t.Fatalf("submit of %s to pool %q: %v", tenant, pool, err)
	}
	return resp.JobId
}

// listed is the IDs and pools of a ListJobs page: "1:gpu 2:default".
func listed(resp *pb.ListJobsResponse) string {
	var b strings.Builder
	for i, j := range resp.Jobs {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:%s", j.JobId, j.Pool)
	}
	return b.String()
}

func u32(v uint32) *uint32 { return &v }
func str(v string) *string { return &v }
func boolean(v bool) *bool { return &v }
func poolText(p *pb.Pool) string {
	return fmt.Sprintf("%s weights=%s required=%v paused=%v scheduled=%d queued=%d running=%d tenants=%d workers=%d created=%v",
		p.Name, p.Weights, p.SubscriptionsRequired, p.Paused, p.Scheduled, p.Queued, p.Running, p.Tenants, p.Workers, p.Created)
}

// TestPoolsAtTheEdge: a pool created, submitted to, listed with the
// filter, its subscriptions required and set, its jobs cancelled by the
// pool filter, deleted; every bad input refused with its code and the
// field named.
func TestPoolsAtTheEdge(t *testing.T) {
	ctx := context.Background()
	n := startPoolNode(t, 0)
	n.tenant(t, "acme", pb.Tier_GOLD)
	n.tenant(t, "beta", pb.Tier_SILVER)

	_, err := n.admin.PoolSet(ctx, &pb.PoolSetRequest{Name: "GPU"})
	wantStatus(t, err, codes.InvalidArgument, `pool name "GPU" has 'G' at byte 0 (want a-z, 0-9 and -, not starting with -)`)
	_, err = n.admin.PoolSet(ctx, &pb.PoolSetRequest{Name: "gpu", Weights: str("acme:0")})
	wantStatus(t, err, codes.InvalidArgument, `weights: weight "0" of tenant "acme" (want 1..1000000)`)
	_, err = n.admin.PoolSet(ctx, &pb.PoolSetRequest{Name: "gpu", Weights: str("acme")})
	wantStatus(t, err, codes.InvalidArgument, `weights: weights entry "acme" (want TENANT:W)`)
	p, err := n.admin.PoolSet(ctx, &pb.PoolSetRequest{Name: "gpu", Weights: str("acme:3,nobody-yet:2")})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := poolText(p), "gpu weights=acme:3,nobody-yet:2 required=false paused=false scheduled=0 queued=0 running=0 tenants=0 workers=0 created=true"; got != want {
		t.Errorf("PoolSet: %s, want %s", got, want)
	}

	// Submits: to the pool, to the default pool, to no pool; refusals.
	if id := n.submit(t, n.cl, "acme", "gpu"); id != 1 {
		t.Errorf("first job %d", id)
	}
	n.submit(t, n.cl, "acme", "default")
	n.submit(t, n.cl, "acme", "")
	_, err = n.cl.Submit(ctx, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1000, Pool: "cpu"})
	wantStatus(t, err, codes.NotFound, `unknown pool "cpu"`)
	_, err = n.cl.Submit(ctx, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1000, Pool: "-x"})
	wantStatus(t, err, codes.InvalidArgument, `pool: pool name "-x" has '-' at byte 0 (want a-z, 0-9 and -, not starting with -)`)
	batch, err := n.cl.SubmitBatch(ctx, &pb.SubmitBatchRequest{Jobs: []*pb.SubmitRequest{
		{Tenant: "beta", Size: pb.Size_SM, EstCostMs: 1000, Pool: "gpu"},
		{Tenant: "beta", Size: pb.Size_SM, EstCostMs: 1000, Pool: "cpu"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%d %q %d %q", batch.Results[0].JobId, batch.Results[0].Error, batch.Results[1].JobId, batch.Results[1].Error); got != `4 "" 0 "NOT_FOUND: unknown pool \"cpu\""` {
		t.Errorf("batch: %s", got)
	}

	// Lists: every pool, one pool, the default pool, an unknown pool.
	for _, c := range []struct{ pool, want string }{
		{"", "3:default 2:default 1:gpu"}, {"gpu", "1:gpu"}, {"default", "3:default 2:default"},
	} {
		resp, err := n.cl.ListJobs(ctx, &pb.ListJobsRequest{Tenant: "acme", Pool: c.pool})
		if err != nil {
			t.Fatal(err)
		}
		if got := listed(resp); got != c.want {
			t.Errorf("list of pool %q: %s, want %s", c.pool, got, c.want)
		}
	}
	_, err = n.cl.ListJobs(ctx, &pb.ListJobsRequest{Tenant: "acme", Pool: "cpu"})
	wantStatus(t, err, codes.NotFound, `pool: unknown pool "cpu"`)
	_, err = n.cl.ListJobs(ctx, &pb.ListJobsRequest{Tenant: "acme", Pool: "CPU"})
	wantStatus(t, err, codes.InvalidArgument, `pool: pool name "CPU" has 'C' at byte 0 (want a-z, 0-9 and -, not starting with -)`)
	if j, err := n.cl.GetJob(ctx, &pb.GetJobRequest{Tenant: "beta", JobId: 4}); err != nil || j.Pool != "gpu" || j.Tenant != "beta" {
		t.Errorf("job 4: %v %v", j, err)
	}

	// Required subscriptions fail closed; a subscription lets the tenant in.
	if p, err = n.admin.PoolSet(ctx, &pb.PoolSetRequest{Name: "gpu", SubscriptionsRequired: boolean(true)}); err != nil {
		t.Fatal(err)
	}
	if got, want := poolText(p), "gpu weights=acme:3,nobody-yet:2 required=true paused=false scheduled=0 queued=2 running=0 tenants=2 workers=0 created=false"; got != want {
		t.Errorf("PoolSet: %s, want %s", got, want)
	}
	_, err = n.cl.Submit(ctx, &pb.SubmitRequest{Tenant: "beta", Size: pb.Size_SM, EstCostMs: 1000, Pool: "gpu"})
	wantStatus(t, err, codes.FailedPrecondition, "tenant beta has no subscription in pool gpu, which requires one")
	sub, err := n.admin.SubscriptionSet(ctx, &pb.SubscriptionSetRequest{Tenant: "beta", Pool: "gpu", Burst: u32(0)})
	if err != nil || !sub.Changed || sub.Subscription.String() != (&pb.Subscription{Tenant: "beta", Pool: "gpu"}).String() {
		t.Fatalf("SubscriptionSet: %v %v", sub, err)
	}
	if sub, err = n.admin.SubscriptionSet(ctx, &pb.SubscriptionSetRequest{Tenant: "beta", Pool: "gpu", Burst: u32(0)}); err != nil || sub.Changed {
		t.Errorf("the same subscription again: %v %v", sub, err)
	}
	if id := n.submit(t, n.cl, "beta", "gpu"); id != 5 {
		t.Errorf("beta's job %d", id)
	}
	_, err = n.admin.SubscriptionSet(ctx, &pb.SubscriptionSetRequest{Tenant: "beta", Pool: "cpu", Burst: u32(1)})
	wantStatus(t, err, codes.NotFound, `unknown pool "cpu"`)
	_, err = n.admin.SubscriptionSet(ctx, &pb.SubscriptionSetRequest{Tenant: "beta", Burst: u32(1)})
	wantStatus(t, err, codes.InvalidArgument, "pool: required")
	_, err = n.admin.SubscriptionSet(ctx, &pb.SubscriptionSetRequest{Tenant: "beta", Pool: "gpu"})
	wantStatus(t, err, codes.InvalidArgument, "burst: required (0 holds the tenant's jobs in the pool); to remove the subscription, DELETE it (barista subscription set --burst none)")
	_, err = n.admin.SubscriptionDelete(ctx, &pb.SubscriptionDeleteRequest{Tenant: "", Pool: "gpu"})
	wantStatus(t, err, codes.NotFound, `unknown tenant ""`)
	if _, err := n.admin.SubscriptionSet(ctx, &pb.SubscriptionSetRequest{Tenant: "acme", Pool: "gpu", Burst: u32(2)}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ tenant, pool, want string }{
		{"", "", `[tenant:"acme" pool:"gpu" burst:2 tenant:"beta" pool:"gpu"]`},
		{"beta", "", `[tenant:"beta" pool:"gpu"]`},
		{"", "default", `[]`},
	} {
		resp, err := n.admin.SubscriptionList(ctx, &pb.SubscriptionListRequest{Tenant: c.tenant, Pool: c.pool})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(strings.Fields(fmt.Sprint(resp.Subscriptions)), " "); got != c.want {
			t.Errorf("subscriptions of %q in %q: %s, want %s", c.tenant, c.pool, got, c.want)
		}
	}
	page, err := n.admin.SubscriptionList(ctx, &pb.SubscriptionListRequest{PageSize: 1})
	if err != nil || len(page.Subscriptions) != 1 || page.Subscriptions[0].Tenant != "acme" || page.NextPageToken == "" {
		t.Fatalf("first page: %v %v", page, err)
	}
	page, err = n.admin.SubscriptionList(ctx, &pb.SubscriptionListRequest{PageSize: 1, PageToken: page.NextPageToken})
	if err != nil || len(page.Subscriptions) != 1 || page.Subscriptions[0].Tenant != "beta" || page.NextPageToken != "" {
		t.Fatalf("second page: %v %v", page, err)
	}
	_, err = n.admin.SubscriptionList(ctx, &pb.SubscriptionListRequest{Tenant: "nobody"})
	wantStatus(t, err, codes.NotFound, `tenant: "nobody" not found`)
	_, err = n.admin.SubscriptionList(ctx, &pb.SubscriptionListRequest{PageToken: "p7"})
	wantStatus(t, err, codes.InvalidArgument, `page_token: "p7" is not a token this server issued`)

	// The pool and the list of pools.
	p, err = n.admin.PoolGet(ctx, &pb.PoolGetRequest{Name: "gpu"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := poolText(p), "gpu weights=acme:3,nobody-yet:2 required=true paused=false scheduled=0 queued=3 running=0 tenants=2 workers=0 created=false"; got != want {
		t.Errorf("PoolGet: %s, want %s", got, want)
	}
	_, err = n.admin.PoolGet(ctx, &pb.PoolGetRequest{Name: "cpu"})
	wantStatus(t, err, codes.NotFound, `name: unknown pool "cpu"`)
	list, err := n.admin.PoolList(ctx, &pb.PoolListRequest{})
	if err != nil || len(list.Pools) != 2 {
		t.Fatalf("PoolList: %v %v", list, err)
	}
	if got, want := poolText(list.Pools[0]), "default weights=default required=false paused=false scheduled=0 queued=2 running=0 tenants=2 workers=0 created=false"; got != want {
		t.Errorf("PoolList[0]: %s, want %s", got, want)
	}

	// Pause of one pool.
	pr, err := n.admin.PauseDispatch(ctx, &pb.PauseDispatchRequest{Pool: "gpu"})
	if err != nil || !pr.Paused || !pr.Changed {
		t.Errorf("pause of gpu: %v %v", pr, err)
	}
	_, err = n.admin.PauseDispatch(ctx, &pb.PauseDispatchRequest{Pool: "cpu"})
	wantStatus(t, err, codes.NotFound, `unknown pool "cpu"`)
	if pr, err = n.admin.PauseDispatch(ctx, &pb.PauseDispatchRequest{Pool: "gpu", Resume: true}); err != nil || pr.Paused || !pr.Changed {
		t.Errorf("resume of gpu: %v %v", pr, err)
	}

	// Delete: refused while the pool has jobs, or connected workers.
	_, err = n.admin.PoolDelete(ctx, &pb.PoolDeleteRequest{Name: "gpu"})
	wantStatus(t, err, codes.FailedPrecondition, "pool gpu has 0 scheduled, 3 queued and 0 running jobs")
	_, err = n.admin.PoolDelete(ctx, &pb.PoolDeleteRequest{Name: "default"})
	wantStatus(t, err, codes.FailedPrecondition, "the pool default is never deleted")
	_, err = n.cl.CancelJobs(ctx, &pb.BulkJobsRequest{Tenant: "acme", Filter: &pb.JobFilter{Pool: "cpu"}, DryRun: true})
	wantStatus(t, err, codes.NotFound, `filter.pool: unknown pool "cpu"`)
	_, err = n.cl.CancelJobs(ctx, &pb.BulkJobsRequest{Tenant: "acme", Filter: &pb.JobFilter{Pool: "cpu"}})
	wantStatus(t, err, codes.NotFound, `unknown pool "cpu"`)
	_, err = n.cl.CancelJobs(ctx, &pb.BulkJobsRequest{Tenant: "acme", Filter: &pb.JobFilter{Pool: "Cpu"}})
	wantStatus(t, err, codes.InvalidArgument, `filter.pool: pool name "Cpu" has 'C' at byte 0 (want a-z, 0-9 and -, not starting with -)`)
	for _, tenant := range []string{"acme", "beta"} {
		resp, err := n.cl.CancelJobs(ctx, &pb.BulkJobsRequest{Tenant: tenant, Filter: &pb.JobFilter{Pool: "gpu"}})
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]uint64{"acme": 1, "beta": 2}[tenant]; resp.Done != want {
			t.Errorf("%s's jobs of gpu cancelled: %d, want %d", tenant, resp.Done, want)
		}
	}
	// (A pool with connected workers: TestGuardPoolDelete, TestPoolsOnANode.)
	_, err = n.admin.PoolDelete(ctx, &pb.PoolDeleteRequest{Name: "default"})
	wantStatus(t, err, codes.FailedPrecondition, "the pool default is never deleted")
	if _, err := n.admin.PoolDelete(ctx, &pb.PoolDeleteRequest{Name: "gpu"}); err != nil {
		t.Fatal(err)
	}
	_, err = n.admin.PoolGet(ctx, &pb.PoolGetRequest{Name: "gpu"})
	wantStatus(t, err, codes.NotFound, `name: unknown pool "gpu"`)
	// The cancelled jobs of the deleted pool still name it.
	if j, err := n.cl.GetJob(ctx, &pb.GetJobRequest{Tenant: "acme", JobId: 1}); err != nil || j.Pool != "gpu" || j.State != "cancelled" {
		t.Errorf("job 1: %v %v", j, err)
	}
}

// TestPoolTenantSettings: default_tenant is the tenant of an admin's
// submit that names none, never of a client token's; implicit_tenants
// makes an unknown tenant at its first submit; max_pools bounds the
// pools.
func TestPoolTenantSettings(t *testing.T) {
	ctx := context.Background()
	n := startPoolNode(t, 0)
	n.tenant(t, "acme", pb.Tier_GOLD)
	n.tenant(t, "house", pb.Tier_BRONZE)
	_, err := n.cl.Submit(ctx, &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1000})
	wantStatus(t, err, codes.InvalidArgument, "tenant: required")
	_, err = n.cl.Submit(ctx, &pb.SubmitRequest{Tenant: "newco", Size: pb.Size_SM, EstCostMs: 1000})
	wantStatus(t, err, codes.NotFound, `unknown tenant "newco"`)

	cfg, err := n.admin.GetConfig(ctx, &pb.GetConfigRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.DefaultTenant, cfg.ImplicitTenants, cfg.MaxPools = "house", pb.Tier_FREE, 2
	if cfg, err = n.admin.SetConfig(ctx, &pb.SetConfigRequest{Config: cfg}); err != nil {
		t.Fatal(err)
	}
	if cfg.DefaultTenant != "house" || cfg.ImplicitTenants != pb.Tier_FREE || cfg.MaxPools != 2 {
		t.Errorf("config: %v", cfg)
	}
	// An admin's submit without a tenant is the default tenant's; a
	// client token's is its own.
	for _, c := range []struct {
		cl   pb.ClientClient
		want string
	}{{n.cl, "house"}, {n.acme, "acme"}} {
		id := n.submit(t, c.cl, "", "")
		j, err := n.cl.GetJob(ctx, &pb.GetJobRequest{Tenant: c.want, JobId: id})
		if err != nil || j.Tenant != c.want {
			t.Errorf("job %d: %v %v, want tenant %s", id, j, err, c.want)
		}
	}
	batch, err := n.cl.SubmitBatch(ctx, &pb.SubmitBatchRequest{Jobs: []*pb.SubmitRequest{{Size: pb.Size_SM, EstCostMs: 1000}}})
	if err != nil || batch.Results[0].Error != "" {
		t.Fatalf("batch without a tenant: %v %v", batch, err)
	}
	if j, err := n.cl.GetJob(ctx, &pb.GetJobRequest{Tenant: "house", JobId: batch.Results[0].JobId}); err != nil || j.Tenant != "house" {
		t.Errorf("batch job: %v %v", j, err)
	}
	// A client token naming another tenant is still refused.
	_, err = n.acme.Submit(ctx, &pb.SubmitRequest{Tenant: "house", Size: pb.Size_SM, EstCostMs: 1000})
	wantStatus(t, err, codes.PermissionDenied, `tenant: this token is for tenant "acme", not "house"`)

	// Implicit tenants.
	id := n.submit(t, n.cl, "newco", "")
	tn, err := n.admin.GetTenant(ctx, &pb.GetTenantRequest{Name: "newco"})
	if err != nil || tn.Tier != pb.Tier_FREE {
		t.Errorf("implicit tenant: %v %v", tn, err)
	}
	if j, err := n.cl.GetJob(ctx, &pb.GetJobRequest{Tenant: "newco", JobId: id}); err != nil || j.Pool != "default" {
		t.Errorf("implicit tenant's job: %v %v", j, err)
	}
	_, err = n.cl.Submit(ctx, &pb.SubmitRequest{Tenant: "new co", Size: pb.Size_SM, EstCostMs: 1000})
	wantStatus(t, err, codes.InvalidArgument, `tenant "new co" has a space at byte 3`)

	// max_pools 2: default and one more.
	if _, err := n.admin.PoolSet(ctx, &pb.PoolSetRequest{Name: "gpu"}); err != nil {
		t.Fatal(err)
	}
	_, err = n.admin.PoolSet(ctx, &pb.PoolSetRequest{Name: "cpu"})
	wantStatus(t, err, codes.ResourceExhausted, `the cluster has 2 pools, its max_pools; pool "cpu" would exceed it`)
	cfg.MaxPools = sfq.MaxPoolSlots + 1
	_, err = n.admin.SetConfig(ctx, &pb.SetConfigRequest{Config: cfg})
	wantStatus(t, err, codes.InvalidArgument, "config: max_pools is 1025 (want 0 for the default 64, or 1..1024)")
}

// TestPoolsNeedLevel6: in a cluster whose voters understand only feature
// level 5, every pool call and field is refused at the edge naming the
// field and both levels; the pool default is there and may be named.
func TestPoolsNeedLevel6(t *testing.T) {
	ctx := context.Background()
	n := startPoolNode(t, fsm.Level5)
	n.tenant(t, "acme", pb.Tier_GOLD)
	msg := func(what string) string {
		return what + ` needs cluster feature level 6; the cluster is at level 5 until every voter runs a build that understands level 6 (docs/operations.md, "Upgrades")`
	}
	_, err := n.admin.PoolSet(ctx, &pb.PoolSetRequest{Name: "gpu"})
	wantStatus(t, err, codes.FailedPrecondition, msg("PoolSet"))
	_, err = n.admin.PoolDelete(ctx, &pb.PoolDeleteRequest{Name: "gpu"})
	wantStatus(t, err, codes.FailedPrecondition, msg("PoolDelete"))
	_, err = n.admin.SubscriptionSet(ctx, &pb.SubscriptionSetRequest{Tenant: "acme", Pool: "default", Burst: u32(1)})
	wantStatus(t, err, codes.FailedPrecondition, msg("SubscriptionSet"))
	_, err = n.admin.PauseDispatch(ctx, &pb.PauseDispatchRequest{Pool: "default"})
	wantStatus(t, err, codes.FailedPrecondition, msg("pause of pool default"))
	_, err = n.cl.Submit(ctx, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1000, Pool: "gpu"})
	wantStatus(t, err, codes.FailedPrecondition, msg("pool gpu"))
	_, err = n.cl.CancelJobs(ctx, &pb.BulkJobsRequest{Tenant: "acme", Filter: &pb.JobFilter{Pool: "gpu"}})
	wantStatus(t, err, codes.FailedPrecondition, msg("pool filter"))
	for _, set := range []struct {
		field string
		set   func(c *pb.SchedulerConfig)
	}{
		{"max_pools", func(c *pb.SchedulerConfig) { c.MaxPools = 8 }},
		{"implicit_tenants", func(c *pb.SchedulerConfig) { c.ImplicitTenants = pb.Tier_FREE }},
		{"default_tenant", func(c *pb.SchedulerConfig) { c.DefaultTenant = "acme" }},
	} {
		cfg, err := n.admin.GetConfig(ctx, &pb.GetConfigRequest{})
		if err != nil {
			t.Fatal(err)
		}
		set.set(cfg)
		_, err = n.admin.SetConfig(ctx, &pb.SetConfigRequest{Config: cfg})
		wantStatus(t, err, codes.FailedPrecondition, msg(set.field))
	}
	// The pool default may be named, and is listed.
	id := n.submit(t, n.cl, "acme", "default")
	if j, err := n.cl.GetJob(ctx, &pb.GetJobRequest{Tenant: "acme", JobId: id}); err != nil || j.Pool != "default" {
		t.Errorf("job: %v %v", j, err)
	}
	list, err := n.admin.PoolList(ctx, &pb.PoolListRequest{})
	if err != nil || len(list.Pools) != 1 || poolText(list.Pools[0]) != "default weights=default required=false paused=false scheduled=0 queued=1 running=0 tenants=1 workers=0 created=false" {
		t.Errorf("pools: %v %v", list, err)
	}
	if n.node.FSM.Level() != fsm.Level5 {
		t.Errorf("level %d", n.node.FSM.Level())
	}
}

// TestEventPool: a job's event names its pool ("default" for the pool
// default); a tenant-level event names none.
func TestEventPool(t *testing.T) {
	for _, c := range []struct {
		ev   fsm.Event
		want string
	}{
		{fsm.Event{PoolName: "gpu"}, "gpu"},
		{fsm.Event{}, "default"},
	} {
		c.ev.Job, c.ev.Kind = 7, fsm.EvQueued
		if got := EventToPB(&c.ev, "acme").Pool; got != c.want {
			t.Errorf("%+v: pool %q, want %q", c.ev, got, c.want)
		}
	}
	ev := fsm.Event{}
	ev.Kind = fsm.EvPaused
	if got := EventToPB(&ev, "acme").Pool; got != "" {
		t.Errorf("paused: pool %q", got)
	}
}

// TestPoolVirtualNowByClass: a pool's virtual_now_ms lists the classes in
// the documented order (critical, high, normal, low): a pool that only
// ever ran normal jobs shows its virtual time at normal, the third (it
// was shown at critical, the core's index order).
func TestPoolVirtualNowByClass(t *testing.T) {
	n := startPoolNode(t, 0)
	n.tenant(t, "acme", pb.Tier_GOLD)
	n.submit(t, n.cl, "acme", "")
	n.submit(t, n.cl, "acme", "")
	for _, w := range []string{"w1", "w2"} {
		nodetest.Propose(t, n.node, &clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: w, Size: pb.Size_SM, Credit: 1}}})
	}
	p, err := n.admin.PoolGet(context.Background(), &pb.PoolGetRequest{Name: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.VirtualNowMs, " "); got != "0 0 125 0" {
		t.Fatalf("virtual_now_ms (critical high normal low): %s, want 0 0 125 0", got)
	}
}

// TestExplainPausedSaysWhatResumes: a job held by a pause is told which
// pause and the command that lifts it: its pool's (naming the pool), all
// dispatch, its tenant's, its group's.
func TestExplainPausedSaysWhatResumes(t *testing.T) {
	n := startPoolNode(t, 0)
	ctx := context.Background()
	n.tenant(t, "acme", pb.Tier_GOLD)
	if _, err := n.admin.PoolSet(ctx, &pb.PoolSetRequest{Name: "gpu"}); err != nil {
		t.Fatal(err)
	}
	id := n.submit(t, n.cl, "acme", "gpu")
	explain := func() string {
		t.Helper()
		r, err := n.cl.ExplainJob(ctx, &pb.ExplainJobRequest{Tenant: "acme", JobId: id})
		if err != nil {
			t.Fatal(err)
		}
		return r.Text
	}
	for _, c := range []struct {
		pause, resume func() error
		want          string
	}{
		{func() error {
			_, err := n.admin.PauseDispatch(ctx, &pb.PauseDispatchRequest{Pool: "gpu"})
			return err
		}, func() error {
			_, err := n.admin.PauseDispatch(ctx, &pb.PauseDispatchRequest{Pool: "gpu", Resume: true})
			return err
		}, "waits: dispatch in pool gpu is paused (barista pool resume gpu lifts it)."},
		{func() error {
			_, err := n.admin.PauseDispatch(ctx, &pb.PauseDispatchRequest{})
			return err
		}, func() error {
			_, err := n.admin.PauseDispatch(ctx, &pb.PauseDispatchRequest{Resume: true})
			return err
		}, "waits: all dispatch is paused (barista operator dispatch resume lifts it)."},
		{func() error {
			_, err := n.cl.Pause(ctx, &pb.PauseRequest{Tenant: "acme"})
			return err
		}, func() error {
			_, err := n.cl.Pause(ctx, &pb.PauseRequest{Tenant: "acme", Resume: true})
			return err
		}, "waits: tenant acme is paused (barista tenant resume acme lifts it)."},
	} {
		if err := c.pause(); err != nil {
			t.Fatal(err)
		}
		if got := explain(); !strings.HasSuffix(got, c.want) {
			t.Errorf("explain: %q\nwant it to end %q", got, c.want)
		}
		if err := c.resume(); err != nil {
			t.Fatal(err)
		}
	}
}
