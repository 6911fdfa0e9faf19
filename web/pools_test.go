package web

import (
	"strings"
	"testing"
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
		`{"code":"INVALID_ARGUMENT","message":"name: pool name \"Gpu\" has 'G' at byte 0 (want a-z, 0-9 and -, not starting with -)"}`)
	want("submit to gpu", gwDo(t, ts, "POST", "/v1/jobs", gwAcme, `{"size":"SM","est_cost_ms":"1000","pool":"gpu"}`), 200, `{"job_id":"1","created":true}`)
	want("submit to cpu", gwDo(t, ts, "POST", "/v1/jobs", gwAcme, `{"size":"SM","est_cost_ms":"1000","pool":"cpu"}`), 404,
		`{"code":"NOT_FOUND","message":"pool: unknown pool \"cpu\""}`)
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
		`{"code":"PERMISSION_DENIED","message":"a client token may not call /barista.v1.Admin/PoolList"}`)
	want("DELETE busy pool", gwDo(t, ts, "DELETE", "/v1/admin/pools/gpu", gwAdmin, ""), 412,
		`{"code":"FAILED_PRECONDITION","message":"pool gpu has 0 scheduled, 1 queued and 0 running jobs"}`)
	want("pause gpu", gwDo(t, ts, "POST", "/v1/admin/dispatch/pause", gwAdmin, `{"pool":"gpu"}`), 200, `{"paused":true,"changed":true}`)
	want("cancel gpu's jobs", gwDo(t, ts, "POST", "/v1/jobs:cancel", gwAcme, `{"filter":{"pool":"gpu"}}`), 200,
		`{"items":[{"job_id":"1","done":true,"state":"cancelled","reason":""}],"next_page_token":"","done":"1","skipped":"0","duplicate":false,"stopped":"","submitted_from_ms":"0"}`)
	want("DELETE pool", gwDo(t, ts, "DELETE", "/v1/admin/pools/gpu", gwAdmin, ""), 200, `{}`)
	want("GET deleted pool", gwDo(t, ts, "GET", "/v1/admin/pools/gpu", gwAdmin, ""), 404,
		`{"code":"NOT_FOUND","message":"name: unknown pool \"gpu\""}`)
}
