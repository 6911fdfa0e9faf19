package web

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/webhook"
)

// jsonField reads one top-level field of a JSON answer, re-encoded.
func jsonField(t *testing.T, body, field string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("not a JSON object: %v: %s", err, body)
	}
	return canonical(t, string(m[field]))
}

// TestUpsertsKeepWhatTheyLeaveOut: one rule for every admin upsert over
// HTTP/JSON — a field left out of the body keeps its value, one given
// sets it (0, false, "" and "none" included) — per resource: tenant (the
// case first reported: a PUT of tier and max_class kept the cap, the rate
// and the deadline permit), pool, subscription (its one field, burst, is
// required: DELETE removes it), group and webhook endpoint.
func TestUpsertsKeepWhatTheyLeaveOut(t *testing.T) {
	key := webhook.Key("0123456789abcdef0123456789abcdef")
	n := startNode(t, nodeOptions{webhooks: func(node *raftnode.Node) *webhook.Deliverer {
		return webhook.OnNode(node, webhook.Options{Key: key, Guard: webhook.NewGuard([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}),
			MinBackoff: 20 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, CommitInterval: 20 * time.Millisecond})
	}})
	ts := n.serve()
	do := func(what, method, path, body string, status int) string {
		t.Helper()
		r := gwDo(t, ts, method, path, "", body)
		if r.status != status {
			t.Fatalf("%s: %d %s, want %d", what, r.status, r.body, status)
		}
		return r.body
	}
	check := func(what, body string, want map[string]string) {
		t.Helper()
		for field, v := range want {
			if got := jsonField(t, body, field); got != canonical(t, v) {
				t.Errorf("%s: %s is %s, want %s", what, field, got, v)
			}
		}
	}

	// Tenant.
	tenant := "/v1/admin/tenants/case2"
	do("create case2", "PUT", tenant, `{"tier":"SILVER","caps":{"max_running":3},"rate":"10/1m","rate_burst":4,"allow_deadlines":true}`, 200)
	body := do("PUT tier and max_class", "PUT", tenant, `{"tier":"GOLD","max_class":"HIGH"}`, 200)
	check("after PUT tier and max_class", body, map[string]string{"tier": `"GOLD"`, "max_class": `"HIGH"`,
		"caps": `{"max_running":3,"max_running_sm":0,"max_running_md":0,"max_running_lg":0,"max_inflight_cpu_ms":"0","max_queued":0,"max_running_critical":0,"max_running_high":0,"max_running_deadline":0}`,
		"rate": `"10/1m0s"`, "rate_burst": "4", "allow_deadlines": "true"})
	body = do("PUT clears", "PUT", tenant, `{"caps":{"max_running":0},"allow_deadlines":false,"rate":"none"}`, 200)
	check("after clearing", body, map[string]string{"tier": `"GOLD"`, "max_class": `"HIGH"`, "rate": `""`, "rate_burst": "0", "allow_deadlines": "false",
		"caps": `{"max_running":0,"max_running_sm":0,"max_running_md":0,"max_running_lg":0,"max_inflight_cpu_ms":"0","max_queued":0,"max_running_critical":0,"max_running_high":0,"max_running_deadline":0}`})
	body = do("PUT nothing", "PUT", tenant, `{}`, 200)
	check("after an empty PUT", body, map[string]string{"tier": `"GOLD"`, "max_class": `"HIGH"`, "created": "false"})
	body = do("create without tier", "PUT", "/v1/admin/tenants/newbie", `{"multiplier":2}`, 400)
	check("create without tier", body, map[string]string{"message": `"tier: required to create tenant \"newbie\" (free, bronze, silver, gold or diamond)"`})

	// Pool.
	do("create gpu", "PUT", "/v1/admin/pools/gpu", `{"weights":"equal","subscriptions_required":true}`, 200)
	body = do("PUT weights", "PUT", "/v1/admin/pools/gpu", `{"weights":"default"}`, 200)
	check("pool after PUT weights", body, map[string]string{"weights": `"default"`, "subscriptions_required": "true"})
	body = do("PUT subscriptions_required", "PUT", "/v1/admin/pools/gpu", `{"subscriptions_required":false}`, 200)
	check("pool after PUT subscriptions_required", body, map[string]string{"weights": `"default"`, "subscriptions_required": "false"})

	// Subscription.
	sub := "/v1/admin/pools/gpu/subscriptions/case2"
	do("PUT subscription", "PUT", sub, `{"burst":2}`, 200)
	body = do("PUT subscription without burst", "PUT", sub, `{}`, 400)
	check("PUT subscription without burst", body, map[string]string{"message": `"burst: required (0 holds the tenant's jobs in the pool); to remove the subscription, DELETE it (barista subscription set --burst none)"`})
	body = do("GET subscriptions", "GET", "/v1/admin/subscriptions?pool=gpu", "", 200)
	check("subscription kept", body, map[string]string{"subscriptions": `[{"tenant":"case2","pool":"gpu","burst":2,"running":0}]`})
	body = do("DELETE subscription", "DELETE", sub, "", 200)
	check("DELETE subscription", body, map[string]string{"changed": "true"})

	// Group.
	group := "/v1/groups/eu?tenant=case2"
	do("PUT group", "PUT", "/v1/groups/eu", `{"tenant":"case2","cap":"2","rate":"10/1s"}`, 200)
	body = do("PUT group rate", "PUT", "/v1/groups/eu", `{"tenant":"case2","rate":"5/1s"}`, 200)
	check("group after PUT rate", body, map[string]string{"cap": `"2"`, "rate": `"5/1s"`})
	body = do("PUT group cap", "PUT", "/v1/groups/eu", `{"tenant":"case2","cap":"3"}`, 200)
	check("group after PUT cap", body, map[string]string{"cap": `"3"`, "rate": `"5/1s"`})
	do("GET group", "GET", group, "", 200)

	// Webhook endpoint.
	hook := "/v1/admin/tenants/case2/webhook"
	do("PUT webhook", "PUT", hook, `{"url":"https://hooks.example.com/a","kinds":["completed"]}`, 200)
	body = do("PUT webhook url", "PUT", hook, `{"url":"https://hooks.example.com/b"}`, 200)
	check("webhook after PUT url", jsonField(t, body, "webhook"), map[string]string{"url": `"https://hooks.example.com/b"`, "kinds": `["completed"]`})
	body = do("PUT webhook kinds", "PUT", hook, `{"kinds":["failed"]}`, 200)
	check("webhook after PUT kinds", jsonField(t, body, "webhook"), map[string]string{"url": `"https://hooks.example.com/b"`, "kinds": `["failed"]`})
	body = do("PUT webhook all kinds", "PUT", hook, `{"kinds":["all"]}`, 200)
	check("webhook after PUT all kinds", jsonField(t, body, "webhook"), map[string]string{"url": `"https://hooks.example.com/b"`, "kinds": `[]`})
}

// jobIDsOf lists the job IDs of a ListJobs answer, in order.
func jobIDsOf(t *testing.T, body string) string {
	t.Helper()
	var resp struct {
		Jobs []struct {
			ID string `json:"job_id"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatalf("not a job list: %v: %s", err, body)
	}
	var ids []string
	for _, j := range resp.Jobs {
		ids = append(ids, j.ID)
	}
	return strings.Join(ids, " ")
}

// TestListOrder: GET /v1/jobs lists newest first, as the CLI and the
// console do; oldest_first=true reverses it, pages included; both
// orders at once are refused.
func TestListOrder(t *testing.T) {
	_, ts := gatewayNode(t)
	for range 3 {
		if r := gwDo(t, ts, "POST", "/v1/jobs", gwAcme, `{"size":"SM","est_cost_ms":"1000"}`); r.status != 200 {
			t.Fatalf("submit: %d %s", r.status, r.body)
		}
	}
	for _, c := range []struct{ path, want string }{
		{"/v1/jobs", "3 2 1"},
		{"/v1/jobs?page_size=2", "3 2"},
		{"/v1/jobs?page_size=2&page_token=d1", "1"},
		{"/v1/jobs?oldest_first=true", "1 2 3"},
		{"/v1/jobs?oldest_first=true&page_size=2&page_token=p3", "3"},
		{"/v1/jobs?newest_first=true", "3 2 1"},
	} {
		r := gwDo(t, ts, "GET", c.path, gwAcme, "")
		if r.status != 200 || jobIDsOf(t, r.body) != c.want {
			t.Errorf("GET %s: %d %s, want jobs %s", c.path, r.status, r.body, c.want)
		}
	}
	r := gwDo(t, ts, "GET", "/v1/jobs?oldest_first=true&newest_first=true", gwAcme, "")
	if want := `{"code":"INVALID_ARGUMENT","message":"oldest_first: true with newest_first: true; give one of them (newest first is the default)","reason":"","field":"oldest_first","retry_after_ms":0}`; r.status != 400 || canonical(t, r.body) != canonical(t, want) {
		t.Errorf("both orders: %d %s", r.status, r.body)
	}
}
