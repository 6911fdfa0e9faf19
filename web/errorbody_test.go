package web

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
)

// TestErrorBodyPerCode: every refusal the HTTP/JSON API answers carries,
// beside its code and message, the reason a client branches on, the
// request field at fault and the retry delay, as data — one case for
// each code the API answers with a reason or a field.
func TestErrorBodyPerCode(t *testing.T) {
	n, ts := gatewayNode(t)
	n.propose(
		&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD, Caps: &pb.Caps{MaxQueued: 1}}}},
		&clusterpb.Command{Cmd: &clusterpb.Command_PoolSet{PoolSet: &clusterpb.PoolSet{Name: "gpu", SubscriptionsRequired: new(true)}}},
	)
	if r := gwDo(t, ts, "POST", "/v1/jobs", gwAcme, `{"size":"SM","est_cost_ms":"5","idempotency_key":"k"}`); r.status != 200 {
		t.Fatalf("the first submit: %d %s", r.status, r.body)
	}
	for _, c := range []struct {
		name, method, path, token, body string
		status                          int
		want                            string
	}{
		{"INVALID_ARGUMENT with a field", "POST", "/v1/jobs", gwBeta, `{"size":"SM","est_cost_ms":"0"}`, 400,
			`{"code":"INVALID_ARGUMENT","message":"est_cost_ms: must be positive (got 0); it may be left out only while the cluster's estimate is auto","reason":"","field":"est_cost_ms","retry_after_ms":0}`},
		{"INVALID_ARGUMENT with a reason", "POST", "/v1/jobs", gwBeta, `{"size":"SM","est_cost_ms":"5","payload":"` + strings.Repeat("QUFB", 350_000) + `"}`, 413,
			`{"code":"INVALID_ARGUMENT","message":"payload: 1050000 bytes, over the cluster's limit of 1048576 (max_payload_bytes)","reason":"TOO_LARGE","field":"payload","retry_after_ms":0}`},
		{"NOT_FOUND", "POST", "/v1/jobs", gwAdmin, `{"tenant":"nobody","size":"SM","est_cost_ms":"5"}`, 404,
			`{"code":"NOT_FOUND","message":"unknown tenant \"nobody\"","reason":"TENANT_UNKNOWN","field":"","retry_after_ms":0}`},
		{"ALREADY_EXISTS", "POST", "/v1/jobs", gwAcme, `{"size":"MD","est_cost_ms":"5","idempotency_key":"k"}`, 409,
			`{"code":"ALREADY_EXISTS","message":"idempotency key \"k\" of tenant \"acme\" was used for job 1 with different content","reason":"KEY_CONFLICT","field":"","retry_after_ms":0}`},
		{"PERMISSION_DENIED", "POST", "/v1/jobs", gwBeta, `{"size":"SM","est_cost_ms":"5","class":"HIGH"}`, 403,
			`{"code":"PERMISSION_DENIED","message":"class high is above tenant beta's max_class normal","reason":"MAX_CLASS","field":"","retry_after_ms":0}`},
		{"RESOURCE_EXHAUSTED", "POST", "/v1/jobs", gwAcme, `{"size":"SM","est_cost_ms":"5"}`, 429,
			`{"code":"RESOURCE_EXHAUSTED","message":"tenant \"acme\" has 1 queued jobs, its max_queued quota","reason":"QUOTA_EXCEEDED","field":"","retry_after_ms":0}`},
		{"FAILED_PRECONDITION", "POST", "/v1/jobs", gwBeta, `{"size":"SM","est_cost_ms":"5","pool":"gpu"}`, 412,
			`{"code":"FAILED_PRECONDITION","message":"tenant beta has no subscription in pool gpu, which requires one","reason":"SUBSCRIPTION_REQUIRED","field":"","retry_after_ms":0}`},
	} {
		r := gwDo(t, ts, c.method, c.path, c.token, c.body)
		if r.status != c.status || canonical(t, r.body) != canonical(t, c.want) {
			t.Errorf("%s: %s %s: %d %s\nwant %d %s", c.name, c.method, c.path, r.status, r.body, c.status, c.want)
		}
	}

	// A rate limit's refusal says when to try again, in the body and in
	// Retry-After.
	cfg := fsm.ConfigToPB(n.node.FSM.Config())
	cfg.SubmitRateN, cfg.SubmitRatePeriodMs, cfg.SubmitBurst = 1, 60_000, 1
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: cfg}}})
	var body errorBody
	for range 2 {
		r := gwDo(t, ts, "POST", "/v1/jobs", gwBeta, `{"size":"SM","est_cost_ms":"5"}`)
		if r.status == 200 {
			continue
		}
		if err := json.Unmarshal([]byte(r.body), &body); err != nil || r.status != 429 || r.header.Get("Retry-After") == "" {
			t.Fatalf("the second submit: %d %s %v", r.status, r.body, r.header)
		}
	}
	if body.Code != "RESOURCE_EXHAUSTED" || body.Reason != "RATE_LIMITED" || body.RetryAfterMs <= 0 || body.RetryAfterMs > 60_000 {
		t.Errorf("the rate limit's body: %+v", body)
	}
}
