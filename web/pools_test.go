package web

import (
	"strings"
	"testing"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
)

// TestGatewayPoolRoutes: the pool and subscription calls over HTTP/JSON:
// a pool set, read and listed, a job submitted to it and listed with the
// pool filter, a subscription set by PUT and removed by DELETE, a busy
// pool's delete refused with its HTTP status, one paused alone.
func TestGatewayPoolRoutes(t *testing.T) {
	_, ts := gatewayNode(t)
	want := func(what string, r gwResult, status int, body string) {
		t.Helper()
		if r.status != status || canonical(t, r.body) != canonical(t, body) {
			t.Errorf("%s: %d %s\nwant %d %s", what, r.status, r.body, status, body)
		}
	}
	vnow := `"virtual_now_ms":["0","0","0","0"]`
	want("PUT pool", gwDo(t, ts, "PUT", "/v1/admin/pools/gpu", gwAdmin, `{"weights":"equal","subscriptions_required":false}`), 200,
		`{"name":"gpu","weights":"equal","subscriptions_required":false,"paused":false,"scheduled":"0","queued":"0","running":"0","tenants":0,"workers":0,`+vnow+`,"created":true}`)
	want("a bad pool name", gwDo(t, ts, "PUT", "/v1/admin/pools/Gpu", gwAdmin, `{}`), 400,
		`{"code":"INVALID_ARGUMENT","message":"pool name \"Gpu\" has 'G' at byte 0 (want a-z, 0-9 and -, not starting with -)","reason":"","field":"","retry_after_ms":0}`)
	want("submit to gpu", gwDo(t, ts, "POST", "/v1/jobs", gwAcme, `{"size":"SM","est_cost_ms":"1000","pool":"gpu"}`), 200, `{"job_id":"1","created":true}`)
	want("submit to cpu", gwDo(t, ts, "POST", "/v1/jobs", gwAcme, `{"size":"SM","est_cost_ms":"1000","pool":"cpu"}`), 404,
		`{"code":"NOT_FOUND","message":"unknown pool \"cpu\"","reason":"POOL_UNKNOWN","field":"","retry_after_ms":0}`)
	want("submit to default", gwDo(t, ts, "POST", "/v1/jobs", gwAcme, `{"size":"SM","est_cost_ms":"1000"}`), 200, `{"job_id":"2","created":true}`)
	r := gwDo(t, ts, "GET", "/v1/jobs?pool=gpu", gwAcme, "")
	if r.status != 200 || !strings.Contains(r.body, `"job_id":"1"`) || strings.Contains(r.body, `"job_id":"2"`) || !strings.Contains(r.body, `"pool":"gpu"`) {
		t.Errorf("jobs of gpu: %d %s", r.status, r.body)
	}
	want("GET pool", gwDo(t, ts, "GET", "/v1/admin/pools/gpu", gwAdmin, ""), 200,
		`{"name":"gpu","weights":"equal","subscriptions_required":false,"paused":false,"scheduled":"0","queued":"1","running":"0","tenants":1,"workers":0,`+vnow+`,"created":false}`)
	r = gwDo(t, ts, "GET", "/v1/admin/pools", gwAdmin, "")
	if r.status != 200 || canonical(t, r.body) != canonical(t, `{"pools":[`+
		`{"name":"default","weights":"default","subscriptions_required":false,"paused":false,"scheduled":"0","queued":"1","running":"0","tenants":2,"workers":0,`+vnow+`,"created":false},`+
		`{"name":"gpu","weights":"equal","subscriptions_required":false,"paused":false,"scheduled":"0","queued":"1","running":"0","tenants":1,"workers":0,`+vnow+`,"created":false}]}`) {
		t.Errorf("GET pools: %d %s", r.status, r.body)
	}
	want("PUT subscription", gwDo(t, ts, "PUT", "/v1/admin/pools/gpu/subscriptions/beta", gwAdmin, `{"burst":2}`), 200,
		`{"subscription":{"tenant":"beta","pool":"gpu","burst":2,"running":0},"changed":true}`)
	want("GET subscriptions", gwDo(t, ts, "GET", "/v1/admin/subscriptions?pool=gpu", gwAdmin, ""), 200,
		`{"subscriptions":[{"tenant":"beta","pool":"gpu","burst":2,"running":0}],"next_page_token":""}`)
	want("DELETE subscription", gwDo(t, ts, "DELETE", "/v1/admin/pools/gpu/subscriptions/beta", gwAdmin, ""), 200, `{"changed":true}`)
	want("GET subscriptions after", gwDo(t, ts, "GET", "/v1/admin/subscriptions", gwAdmin, ""), 200, `{"subscriptions":[],"next_page_token":""}`)
	want("a client token", gwDo(t, ts, "GET", "/v1/admin/pools", gwAcme, ""), 403,
		`{"code":"PERMISSION_DENIED","message":"a client token may not call /barista.v1.Admin/PoolList","reason":"","field":"","retry_after_ms":0}`)
	want("DELETE busy pool", gwDo(t, ts, "DELETE", "/v1/admin/pools/gpu", gwAdmin, ""), 412,
		`{"code":"FAILED_PRECONDITION","message":"pool gpu has 0 scheduled, 1 queued and 0 running jobs","reason":"","field":"","retry_after_ms":0}`)
	want("pause gpu", gwDo(t, ts, "POST", "/v1/admin/dispatch/pause", gwAdmin, `{"pool":"gpu"}`), 200, `{"paused":true,"changed":true}`)
	want("cancel gpu's jobs", gwDo(t, ts, "POST", "/v1/jobs:cancel", gwAcme, `{"filter":{"pool":"gpu"}}`), 200,
		`{"items":[{"job_id":"1","done":true,"state":"cancelled","reason":""}],"next_page_token":"","done":"1","skipped":"0","duplicate":false,"stopped":"","submitted_from_ms":"0"}`)
	want("DELETE pool", gwDo(t, ts, "DELETE", "/v1/admin/pools/gpu", gwAdmin, ""), 200, `{}`)
	want("GET deleted pool", gwDo(t, ts, "GET", "/v1/admin/pools/gpu", gwAdmin, ""), 404,
		`{"code":"NOT_FOUND","message":"name: unknown pool \"gpu\"","reason":"POOL_UNKNOWN","field":"name","retry_after_ms":0}`)
}

// TestConsolePools: with a pool besides default, the overview's tenant
// lines name their pool and an admin sees the pools with their jobs and
// connected workers (a client token does not, nor in /api/top); the jobs
// search filters by pool; a job's page names its pool.
func TestConsolePools(t *testing.T) {
	n, ts := consoleNode(t) // acme's 1, 3, 5 and beta's 2, 4 in the pool default
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_PoolSet{PoolSet: &clusterpb.PoolSet{Name: "gpu"}}})
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 100, Pool: "gpu"}}})

	r := cdo(t, ts, "GET", "/", gwAdmin, "")
	for _, s := range []string{`<th class="l">tenant</th><th class="l">pool</th>`,
		`<td class="l"><a href="/tenants/acme">acme</a></td><td class="l">gpu</td>`,
		`<td class="l"><a href="/tenants/acme">acme</a></td><td class="l">default</td>`,
		`<tr><td class="l"><a href="/jobs?pool=gpu">gpu</a></td><td class="l">default</td><td class="l">optional</td><td class="l">no</td><td>0</td><td>1</td><td>0</td><td>0</td></tr>`,
		`<tr><td class="l"><a href="/jobs?pool=default">default</a></td><td class="l">default</td><td class="l">optional</td><td class="l">no</td><td>0</td><td>5</td><td>0</td><td>0</td></tr>`} {
		if r.status != 200 || !strings.Contains(r.body, s) {
			t.Errorf("the admin's overview has no %s:\n%s", s, r.body)
		}
	}
	r = cdo(t, ts, "GET", "/", gwAcme, "")
	if r.status != 200 || strings.Contains(r.body, `id="pools"`) || !strings.Contains(r.body, `<td class="l">gpu</td>`) {
		t.Errorf("acme's overview:\n%s", r.body)
	}
	r = gwDo(t, ts, "GET", "/api/top", gwAcme, "")
	if r.status != 200 || !strings.Contains(r.body, `"pools":[]`) || !strings.Contains(r.body, `"pool":"gpu"`) {
		t.Errorf("acme's /api/top: %d %s", r.status, r.body)
	}
	for _, c := range []struct{ path, token, want string }{
		{"/jobs?pool=gpu", gwAdmin, "6"},
		{"/jobs?pool=default", gwAdmin, "5 4 3 2 1"},
		{"/jobs?pool=gpu", gwAcme, "6"},
		{"/jobs?pool=default&state=queued", gwBeta, "4 2"},
	} {
		r := cdo(t, ts, "GET", c.path, c.token, "")
		if r.status != 200 || jobIDs(r.body) != c.want {
			t.Errorf("GET %s: %d jobs %q, want %q", c.path, r.status, jobIDs(r.body), c.want)
		}
	}
	r = cdo(t, ts, "GET", "/jobs?pool=GPU", gwAdmin, "")
	if want := `pool: pool name &#34;GPU&#34; has &#39;G&#39; at byte 0 (want a-z, 0-9 and -, not starting with -)`; r.status != 400 || errorText(r.body) != want {
		t.Errorf("a bad pool: %d %q", r.status, errorText(r.body))
	}
	r = cdo(t, ts, "GET", "/jobs?pool=cpu", gwAdmin, "")
	if want := `NOT_FOUND: pool: unknown pool &#34;cpu&#34;`; r.status != 404 || errorText(r.body) != want {
		t.Errorf("an unknown pool: %d %q", r.status, errorText(r.body))
	}
	r = cdo(t, ts, "GET", "/jobs/6", gwAcme, "")
	if !strings.Contains(r.body, `<td class="l" colspan="3" id="job-pool"><a href="/jobs?tenant=acme&amp;pool=gpu">gpu</a></td>`) {
		t.Errorf("job 6's page:\n%s", r.body)
	}
}
