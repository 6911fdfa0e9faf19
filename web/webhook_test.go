package web

import (
	"context"
	"encoding/json"
	"net/netip"
	"testing"
	"time"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/webhook"
)

// TestGatewayWebhookRoutes: the webhook calls over HTTP/JSON, a tenant
// name with "/" and "?" escaped in the path: PUT shows the secret once,
// GET never; the status comes from the leader; refusals are the gRPC
// ones with their HTTP status.
func TestGatewayWebhookRoutes(t *testing.T) {
	ctx := context.Background()
	key := webhook.Key("0123456789abcdef0123456789abcdef")
	n := startNode(t, nodeOptions{webhooks: func(node *raftnode.Node) *webhook.Deliverer {
		return webhook.OnNode(node, webhook.Options{Key: key, Guard: webhook.NewGuard([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}),
			MinBackoff: 20 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, CommitInterval: 20 * time.Millisecond})
	}})
	admin, ts := pb.NewAdminClient(n.dial("")), n.serve()
	const name = "team/a?b"
	if _, err := admin.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: name, Tier: pb.Tier_GOLD.Enum()}); err != nil {
		t.Fatal(err)
	}
	path := "/v1/admin/tenants/" + pathEscape(name) + "/webhook"
	want := func(what string, r gwResult, status int, body string) {
		t.Helper()
		if r.status != status || canonical(t, r.body) != canonical(t, body) {
			t.Errorf("%s: %d %s\nwant %d %s", what, r.status, r.body, status, body)
		}
	}
	hook := `{"tenant":"team/a?b","url":"https://hooks.example.com/b","kinds":["completed","failed"],"secret_version":"1",` +
		`"previous_secret_version":"0","previous_secret_until_ms":"0","cursor":"0","acked_at_ms":"0","gap_from_seq":"0","gap_to_seq":"0"}`
	want("PUT", gwDo(t, ts, "PUT", path, "", `{"url":"https://hooks.example.com/b","kinds":["completed","failed"]}`), 200,
		`{"webhook":`+hook+`,"created":true,"secret":"`+key.Secret(0, name, 1)+`","previous_secret_kept":false}`)
	want("PUT again", gwDo(t, ts, "PUT", path, "", `{"url":"https://hooks.example.com/b","kinds":["completed","failed"]}`), 200,
		`{"webhook":`+hook+`,"created":false,"secret":"","previous_secret_kept":false}`)
	want("GET", gwDo(t, ts, "GET", path, "", ""), 200, hook)
	want("GET stale", gwDo(t, ts, "GET", path+"?stale=true", "", ""), 200, hook)
	r := gwDo(t, ts, "GET", path+":status", "", "")
	var st struct {
		Webhook  struct{ Tenant string } `json:"webhook"`
		LeaderID string                  `json:"leader_id"`
		Backlog  string                  `json:"backlog"`
	}
	if r.status != 200 || json.Unmarshal([]byte(r.body), &st) != nil || st.Webhook.Tenant != name || st.LeaderID != "n1" || st.Backlog != "0" {
		t.Errorf("GET :status: %d %s", r.status, r.body)
	}
	want("replay", gwDo(t, ts, "POST", path+":replay", "", `{"from_seq":"1"}`), 200, hook)
	want("replay from 0", gwDo(t, ts, "POST", path+":replay", "", `{"from_seq":"0"}`), 400,
		`{"code":"INVALID_ARGUMENT","message":"from_seq: must be at least 1","reason":"","field":"from_seq","retry_after_ms":0}`)
	want("a bad url", gwDo(t, ts, "PUT", path, "", `{"url":"ftp://hooks.example.com/"}`), 400,
		`{"code":"INVALID_ARGUMENT","message":"url: scheme \"ftp\", want http or https","reason":"","field":"","retry_after_ms":0}`)
	want("an unknown tenant", gwDo(t, ts, "GET", "/v1/admin/tenants/nobody/webhook", "", ""), 404,
		`{"code":"NOT_FOUND","message":"tenant: \"nobody\" not found","reason":"TENANT_UNKNOWN","field":"tenant","retry_after_ms":0}`)
	want("DELETE", gwDo(t, ts, "DELETE", path, "", ""), 200, `{}`)
	want("GET after DELETE", gwDo(t, ts, "GET", path, "", ""), 404,
		`{"code":"NOT_FOUND","message":"tenant \"team/a?b\" has no webhook","reason":"","field":"","retry_after_ms":0}`)
}
