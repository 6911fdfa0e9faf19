package web

import (
	"strings"
	"testing"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
)

// TestConsoleResources: the admin's overview lists every resource with
// its capacity, tenant_max, units held, queued jobs, users and
// reservation, and what each tenant holds of them with its limit (the
// tenant's name escaped); /api/top says the same; a client token sees
// neither the resources nor another tenant's holdings.
func TestConsoleResources(t *testing.T) {
	n, ts := consoleNode(t) // acme's 1, 3, 5 and beta's 2, 4 in the pool default
	u := func(v uint32) *uint32 { return &v }
	tenant := "a<b&c"
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_PoolSet{PoolSet: &clusterpb.PoolSet{Name: "lic"}}},
		&clusterpb.Command{Cmd: &clusterpb.Command_ResourceSet{ResourceSet: &clusterpb.ResourceSet{Name: "api", Capacity: u(4), TenantMax: u(3)}}},
		&clusterpb.Command{Cmd: &clusterpb.Command_ResourceSet{ResourceSet: &clusterpb.ResourceSet{Name: "seat", Capacity: u(1)}}})
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: tenant, Tier: pb.Tier_FREE}}},
		&clusterpb.Command{Cmd: &clusterpb.Command_ResourceSet{ResourceSet: &clusterpb.ResourceSet{Name: "api", Tenant: tenant, Max: u(2)}}})
	job := func(units uint32) *clusterpb.Command {
		return &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: tenant, Size: pb.Size_SM, EstCostMs: 100, Pool: "lic",
			Uses: []*pb.ResourceUse{{Resource: "api", Units: units}}}}}
	}
	n.propose(job(2), job(1)) // jobs 6 and 7
	if r := n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: "w1", Size: pb.Size_SM, Credit: 1, Pool: "lic"}}}); len(r) != 1 || r[0].Job != 6 {
		t.Fatalf("dispatch: %+v", r)
	}

	r := cdo(t, ts, "GET", "/", gwAdmin, "")
	for _, s := range []string{
		`<table id="resources"><tr><th class="l">resource</th><th>capacity</th><th>tenant max</th><th>held</th><th>queued</th><th>blocked</th><th>users</th><th>reserved</th></tr>`,
		`<tr><td class="l">api</td><td>4</td><td>3</td><td>2</td><td>1</td><td>0</td><td>2</td><td>-</td></tr>`,
		`<tr><td class="l">seat</td><td>1</td><td>-</td><td>0</td><td>0</td><td>0</td><td>0</td><td>-</td></tr>`,
		`<tr><td class="l"><a href="/tenants/a%3Cb&amp;c">a&lt;b&amp;c</a></td><td class="l">api</td><td>2</td><td>2</td></tr>`,
	} {
		if r.status != 200 || !strings.Contains(r.body, s) {
			t.Errorf("the admin's overview has no %s:\n%s", s, r.body)
		}
	}
	if strings.Contains(r.body, "a<b") {
		t.Error("the tenant's name is not escaped")
	}
	top := gwDo(t, ts, "GET", "/api/top", gwAdmin, "")
	for _, s := range []string{`"resources":[{"name":"api","capacity":4,"tenant_max":3,"held":2,"users":2,"queued":1,"blocked":0,"reserved_job_id":0},` +
		`{"name":"seat","capacity":1,"tenant_max":null,"held":0,"users":0,"queued":0,"blocked":0,"reserved_job_id":0}]`,
		`"resources":[{"resource":"api","held":2,"max":2}]`} {
		if top.status != 200 || !strings.Contains(top.body, s) {
			t.Errorf("/api/top has no %s:\n%s", s, top.body)
		}
	}

	r = cdo(t, ts, "GET", "/", gwAcme, "")
	if r.status != 200 || strings.Contains(r.body, `id="resources"`) || strings.Contains(r.body, `id="holdings"`) || strings.Contains(r.body, "<h2>Resources</h2>") {
		t.Errorf("acme's overview shows resources:\n%s", r.body)
	}
	top = gwDo(t, ts, "GET", "/api/top", gwAcme, "")
	if top.status != 200 || !strings.Contains(top.body, `"resources":[]`) || strings.Contains(top.body, `"resource":`) {
		t.Errorf("acme's /api/top: %d %s", top.status, top.body)
	}
}
