package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/auth"
	"github.com/baristahq/barista/internal/wire"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
)

// gatewayNode is a one-node cluster with tokens, tenants acme and beta,
// and its HTTP handler on a test server.
func gatewayNode(t *testing.T) (*testNode, *httptest.Server) {
	t.Helper()
	n := startTestNode(t, []auth.Token{{Secret: gwAdmin, Role: auth.RoleAdmin}, {Secret: gwAcme, Role: auth.RoleClient, Tenant: "acme"},
		{Secret: gwBeta, Role: auth.RoleClient, Tenant: "beta"}}, nil)
	for _, name := range []string{"acme", "beta"} {
		n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: name, Tier: pb.Tier_GOLD}}})
	}
	return n, n.serve()
}

type gwResult struct {
	status int
	header http.Header
	body   string
}

// gwDo sends one request ("" token: none) with extra headers.
func gwDo(t *testing.T, ts *httptest.Server, method, path, token, body string, hdr ...string) gwResult {
	t.Helper()
	return gwSend(t, ts.Client(), ts, method, path, token, body, hdr...)
}

// gwSend is gwDo through client.
func gwSend(t *testing.T, client *http.Client, ts *httptest.Server, method, path, token, body string, hdr ...string) gwResult {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return gwResult{resp.StatusCode, resp.Header, string(b)}
}

// canonical re-encodes a JSON value (protojson spaces its output at
// random per build).
func canonical(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %v: %q", err, s)
	}
	dropClockNow(v)
	b, _ := json.Marshal(v)
	return string(b)
}

// dropClockNow removes, at any depth, the answering node's clocks
// (ClockNow, key "now"), which differ from run to run.
func dropClockNow(v any) {
	switch x := v.(type) {
	case map[string]any:
		if now, ok := x["now"].(map[string]any); ok && now["cluster_ms"] != nil && now["wall_ms"] != nil {
			delete(x, "now")
		}
		for _, e := range x {
			dropClockNow(e)
		}
	case []any:
		for _, e := range x {
			dropClockNow(e)
		}
	}
}

// TestGatewayAnswers: statuses and exact bodies of the HTTP/JSON API on
// one node, for answers and for each class of error.
func TestGatewayAnswers(t *testing.T) {
	n, ts := gatewayNode(t)
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "beta", Size: pb.Size_SM, EstCostMs: 5}}}) // job 1
	const job = `{"job_type":"render","size":"LG","est_cost_ms":"1000","idempotency_key":"k1"}`
	for _, c := range []struct {
		name, method, path, token, body string
		hdr                             []string
		status                          int
		want                            string
	}{
		{"submit", "POST", "/v1/jobs", gwAcme, job, nil, 200, `{"created":true,"job_id":"2"}`},
		{"submit again: the same job", "POST", "/v1/jobs", gwAcme, job, nil, 200, `{"created":false,"job_id":"2"}`},
		{"an enum in lower case: the same job", "POST", "/v1/jobs", gwAcme, strings.Replace(job, `"LG"`, `"lg"`, 1), nil, 200, `{"created":false,"job_id":"2"}`},
		{"a bulk filter's state in upper case", "POST", "/v1/jobs:cancel", gwAcme, `{"filter":{"states":["QUEUED"]},"dry_run":true}`, nil, 200,
			`{"items":[{"job_id":"2","done":true,"state":"queued","reason":""}],"next_page_token":"","done":"1","skipped":"0","duplicate":false,"stopped":"","submitted_from_ms":"0"}`},
		{"a list's state in upper case", "GET", "/v1/jobs?state=QUEUED", gwAcme, "", nil, 200, ""},
		{"the key with other content", "POST", "/v1/jobs", gwAcme, `{"size":"SM","est_cost_ms":"1000","idempotency_key":"k1"}`, nil, 409,
			`{"code":"ALREADY_EXISTS","message":"idempotency key \"k1\" of tenant \"acme\" was used for job 2 with different content","reason":"KEY_CONFLICT","field":"","retry_after_ms":0}`},
		{"an unknown field", "POST", "/v1/jobs", gwAcme, `{"size":"SM","sise":"SM"}`, nil, 400,
			`{"code":"INVALID_ARGUMENT","message":"sise: not a field of this request (it takes tenant, idempotency_key, job_type, size, est_cost_ms, payload, max_attempts, timeout_ms, class, deadline_ms, group, delay_ms, expire_ms, retry_backoff_ms, pool, form, return_job, uses)","reason":"","field":"sise","retry_after_ms":0}`},
		{"a bad enum", "POST", "/v1/jobs", gwAcme, `{"size":"HUGE"}`, nil, 400,
			`{"code":"INVALID_ARGUMENT","message":"size: \"HUGE\" is not a size (want sm, md or lg)","reason":"","field":"size","retry_after_ms":0}`},
		{"a bad value", "POST", "/v1/jobs", gwAcme, `{"size":"SM","est_cost_ms":"-5"}`, nil, 400,
			`{"code":"INVALID_ARGUMENT","message":"est_cost_ms: must be positive (got -5)","reason":"","field":"est_cost_ms","retry_after_ms":0}`},
		{"not JSON", "POST", "/v1/jobs", gwAcme, `size=SM`, nil, 400,
			`{"code":"INVALID_ARGUMENT","message":"request body: syntax error (line 1:1): invalid value size","reason":"","field":"","retry_after_ms":0}`},
		{"get", "GET", "/v1/jobs/2?stale=true", gwAcme, "", nil, 200, ""},
		{"an unknown job", "GET", "/v1/jobs/99", gwAcme, "", nil, 404, `{"code":"NOT_FOUND","message":"job 99 not found","reason":"","field":"","retry_after_ms":0}`},
		{"another tenant's job", "GET", "/v1/jobs/1", gwAcme, "", nil, 404, `{"code":"NOT_FOUND","message":"job 1 not found","reason":"","field":"","retry_after_ms":0}`},
		{"another tenant by name", "GET", "/v1/jobs?tenant=beta", gwAcme, "", nil, 403,
			`{"code":"PERMISSION_DENIED","message":"tenant: this token is for tenant \"acme\", not \"beta\"","reason":"","field":"tenant","retry_after_ms":0}`},
		{"a bad id", "GET", "/v1/jobs/x", gwAcme, "", nil, 400,
			`{"code":"INVALID_ARGUMENT","message":"job_id: \"x\" is not a whole number","reason":"","field":"job_id","retry_after_ms":0}`},
		{"an unknown query parameter", "GET", "/v1/jobs?stat=queued", gwAcme, "", nil, 400,
			`{"code":"INVALID_ARGUMENT","message":"unknown query parameter \"stat\" (this route takes tenant, state, page_size, page_token, stale, include_payload, newest_first, oldest_first, pool)","reason":"","field":"","retry_after_ms":0}`},
		{"a parameter and its alias", "GET", "/v1/jobs?stale=true&read.stale=false", gwAcme, "", nil, 400, ""},
		{"no token", "GET", "/v1/jobs", "", "", nil, 401,
			`{"code":"UNAUTHENTICATED","message":"missing bearer token (authorization: Bearer TOKEN)","reason":"","field":"","retry_after_ms":0}`},
		{"an unknown token", "GET", "/v1/jobs", "not-a-token-0000000", "", nil, 401, `{"code":"UNAUTHENTICATED","message":"unknown token","reason":"","field":"","retry_after_ms":0}`},
		{"a token in another header", "GET", "/v1/jobs", "", "", []string{"Grpc-Metadata-Authorization", "Bearer " + gwAcme}, 401,
			`{"code":"UNAUTHENTICATED","message":"missing bearer token (authorization: Bearer TOKEN)","reason":"","field":"","retry_after_ms":0}`},
		{"a client token on an admin route", "GET", "/v1/admin/tenants", gwAcme, "", nil, 403,
			`{"code":"PERMISSION_DENIED","message":"a client token may not call /barista.v1.Admin/ListTenants","reason":"","field":"","retry_after_ms":0}`},
		{"explain", "GET", "/v1/jobs/2:explain", gwAcme, "", nil, 200, `{"job_id":"2","reason":"no_worker",` +
			`"text":"Job 2 (tenant acme, class normal, size lg) could run, but no connected, undrained worker of size lg or larger is there to take it. ` +
			`Place in line: 0 jobs go before it on the workers of size lg (0 of its own tenant's).",` +
			`"size":"LG","class":"NORMAL","position":"0","vertex":"","current":"0","limit":"0","ahead":"0","tag_ms":"","vnow_ms":"","worker_id":"",` +
			`"due_ms":"0","eligible_at_ms":"0","group":"","group_order":"","fitting_workers":0,"workers_busy":false,` +
			`"place":{"ahead":"0","own_ahead":"0","complete":true,"estimated_start_ms":"0","rate_per_minute":0,"share":0.5},"kind":"","schedule":"","schedule_slot_ms":"0","schedule_run_key":"","resource":"","held":"0","capacity":"0","tenant_held":"0","reserved_job_id":"0"}`},
		{"a statement in a format there is none of", "GET", "/v1/usage/statement?format=xml", gwAcme, "", nil, 400,
			`{"code":"INVALID_ARGUMENT","message":"format: \"xml\" (want json or csv)","reason":"","field":"format","retry_after_ms":0}`},
		{"a certificate of another tenant", "GET", "/v1/usage/certificate?tenant=beta", gwAcme, "", nil, 403,
			`{"code":"PERMISSION_DENIED","message":"tenant: this token is for tenant \"acme\", not \"beta\"","reason":"","field":"tenant","retry_after_ms":0}`},
		{"explain another tenant's job", "GET", "/v1/jobs/1:explain", gwAcme, "", nil, 404, `{"code":"NOT_FOUND","message":"job 1 not found","reason":"","field":"","retry_after_ms":0}`},
		{"cancel", "POST", "/v1/jobs/2:cancel", gwAcme, "", nil, 200, `{"cancel_requested":false,"state":"cancelled"}`},
		{"cancel a cancelled job", "POST", "/v1/jobs/2:cancel", gwAcme, "", nil, 200, `{"cancel_requested":false,"state":"cancelled"}`},
		{"an admin names the tenant", "POST", "/v1/jobs", gwAdmin, `{"tenant":"beta","size":"SM","est_cost_ms":"7"}`, nil, 200, `{"created":true,"job_id":"3"}`},
		{"an admin names none", "POST", "/v1/jobs", gwAdmin, `{"size":"SM","est_cost_ms":"7"}`, nil, 400, `{"code":"INVALID_ARGUMENT","message":"tenant: required","reason":"","field":"tenant","retry_after_ms":0}`},
		{"no route", "GET", "/v1/nope", gwAcme, "", nil, 404,
			`{"code":"NOT_FOUND","message":"no route GET /v1/nope (the routes: /v1/openapi.json)","reason":"","field":"","retry_after_ms":0}`},
		{"no such method", "DELETE", "/v1/jobs", gwAcme, "", nil, 405,
			`{"code":"UNIMPLEMENTED","message":"DELETE is not a method of /v1/jobs (the routes: /v1/openapi.json)","reason":"","field":"","retry_after_ms":0}`},
		{"a body too large", "POST", "/v1/jobs", gwAcme, strings.Repeat(" ", fsm.MaxMessageBytes+1), nil, 413,
			fmt.Sprintf(`{"code":"RESOURCE_EXHAUSTED","message":"request body: %d bytes (at most %d: limits.max_message_bytes)","reason":"","field":"","retry_after_ms":0}`, fsm.MaxMessageBytes+1, fsm.MaxMessageBytes)},
	} {
		r := gwDo(t, ts, c.method, c.path, c.token, c.body, c.hdr...)
		if r.status != c.status || (c.want != "" && canonical(t, r.body) != canonical(t, c.want)) {
			t.Errorf("%s: %s %s: %d %s\nwant %d %s", c.name, c.method, c.path, r.status, r.body, c.status, c.want)
		}
		if ct := r.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", c.name, ct)
		}
		if r.header.Get("Cache-Control") != "no-store" || r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: headers %v", c.name, r.header)
		}
		if r.status == 401 && r.header.Get("WWW-Authenticate") != `Bearer realm="barista"` {
			t.Errorf("%s: WWW-Authenticate %q", c.name, r.header.Get("WWW-Authenticate"))
		}
	}
}

// TestGatewayEscapedNames: a name travels URL-escaped in a path segment
// and is unescaped exactly once, whatever it holds ("/", "?", "%", ":").
func TestGatewayEscapedNames(t *testing.T) {
	_, ts := gatewayNode(t)
	for _, name := range []string{"a/b", "q?x=1", "100%25", "x:drain", "%2F", "naïve"} {
		path := "/v1/admin/tenants/" + pathEscape(name)
		r := gwDo(t, ts, "PUT", path, gwAdmin, `{"tier":"SILVER"}`)
		var got struct {
			Name    string `json:"name"`
			Tier    string `json:"tier"`
			Created bool   `json:"created"`
		}
		if r.status != 200 || json.Unmarshal([]byte(r.body), &got) != nil || got.Name != name || got.Tier != "SILVER" || !got.Created {
			t.Errorf("PUT %s: %d %s", path, r.status, r.body)
		}
		if r := gwDo(t, ts, "GET", path, gwAdmin, ""); r.status != 200 || !strings.Contains(r.body, fmt.Sprintf(`"name":%q`, name)) {
			t.Errorf("GET %s: %d %s", path, r.status, r.body)
		}
		if r := gwDo(t, ts, "DELETE", path, gwAdmin, ""); r.status != 200 || canonical(t, r.body) != "{}" {
			t.Errorf("DELETE %s: %d %s", path, r.status, r.body)
		}
		if r := gwDo(t, ts, "GET", path, gwAdmin, ""); r.status != 404 {
			t.Errorf("GET %s after DELETE: %d %s", path, r.status, r.body)
		}
	}
	// A worker ID ending like the verb of its route.
	r := gwDo(t, ts, "POST", "/v1/admin/workers/"+pathEscape("w:drain")+":drain", gwAdmin, `{"create":true}`)
	if r.status != 200 {
		t.Fatalf("drain w:drain: %d %s", r.status, r.body)
	}
	if r := gwDo(t, ts, "GET", "/v1/admin/workers", gwAdmin, ""); !strings.Contains(r.body, `"worker_id":"w:drain"`) {
		t.Errorf("workers: %d %s", r.status, r.body)
	}
}

// pathEscape escapes a path segment the way url.PathEscape does, and
// ":" too (a client may or may not).
func pathEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// TestGatewayEventStream: /v1/events answers 200 as soon as the watch is
// accepted (before any event), then one event per line; a watch of one
// job ends after its terminal event; a refused watch is an error answer.
func TestGatewayEventStream(t *testing.T) {
	_, ts := gatewayNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// An idle watch: the answer starts before any event.
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/v1/events?from=0", nil)
	req.Header.Set("Authorization", "Bearer "+gwAcme)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("idle watch: %s %v", resp.Status, resp.Header)
	}
	lines := bufio.NewScanner(resp.Body)
	r := gwDo(t, ts, "POST", "/v1/jobs", gwAcme, `{"size":"SM","est_cost_ms":"5"}`)
	if r.status != 200 {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	if !lines.Scan() {
		t.Fatalf("no event: %v", lines.Err())
	}
	var ev struct {
		Seq, JobID, Tenant, Kind string
	}
	first := map[string]any{}
	if err := json.Unmarshal(lines.Bytes(), &first); err != nil {
		t.Fatalf("line %q: %v", lines.Text(), err)
	}
	ev.Seq, ev.JobID, ev.Tenant, ev.Kind = fmt.Sprint(first["seq"]), fmt.Sprint(first["job_id"]), fmt.Sprint(first["tenant"]), fmt.Sprint(first["kind"])
	if ev.JobID != "1" || ev.Tenant != "acme" || ev.Kind != "queued" {
		t.Fatalf("first event %s", lines.Text())
	}
	resp.Body.Close()

	// A job's watch ends after its terminal event.
	gwDo(t, ts, "POST", "/v1/jobs/1:cancel", gwAcme, "")
	r = gwDo(t, ts, "GET", "/v1/events?job_id=1&from_oldest=true", gwAcme, "")
	var kinds []string
	for _, l := range strings.Split(strings.TrimSuffix(r.body, "\n"), "\n") {
		var e struct{ Kind, Reason string }
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		kinds = append(kinds, e.Kind+"/"+e.Reason)
	}
	if r.status != 200 || fmt.Sprint(kinds) != "[queued/ cancelled/requested]" {
		t.Errorf("job watch: %d %v\n%s", r.status, kinds, r.body)
	}
	// Refused before it starts: a plain error answer.
	if r := gwDo(t, ts, "GET", "/v1/events?job_id=1", gwBeta, ""); r.status != 404 || canonical(t, r.body) != canonical(t, `{"code":"NOT_FOUND","message":"job 1 not found","reason":"","field":"","retry_after_ms":0}`) {
		t.Errorf("beta watching acme's job: %d %s", r.status, r.body)
	}
}

// TestGatewayStreamError: a stream that fails after it started ends with
// one line {"error": {"code": NAME, "message": ...}}; its messages are
// lines of protojson without an envelope.
func TestGatewayStreamError(t *testing.T) {
	m := newGatewayMarshaler()
	b, err := m.Marshal(map[string]proto.Message{"error": &spb.Status{Code: int32(codes.Unavailable), Message: "leadership changed"}})
	if err != nil || string(b) != `{"error":{"code":"UNAVAILABLE","message":"leadership changed","reason":"","field":"","retry_after_ms":0}}` {
		t.Errorf("error line %s %v", b, err)
	}
	b, err = m.Marshal(map[string]any{"result": &pb.Event{Seq: 7, Kind: "queued"}})
	if err != nil || canonical(t, string(b)) != `{"at_ms":"0","attempt":0,"cpu_ms":"0","exit_code":0,"group":"","job_id":"0","kind":"queued","pool":"","reason":"","schedule":"","seq":"7","slot_ms":"0","slots":"0","tenant":"","wall_ms":"0","worker_id":""}` {
		t.Errorf("event line %s %v", b, err)
	}
	if strings.Contains(string(b), "\n") {
		t.Errorf("an event spans lines: %q", b)
	}
}

// TestGatewayHTTPStatus: every gRPC code's HTTP status.
func TestGatewayHTTPStatus(t *testing.T) {
	want := map[codes.Code]int{
		codes.OK: 200, codes.Canceled: 499, codes.Unknown: 500, codes.InvalidArgument: 400, codes.DeadlineExceeded: 504,
		codes.NotFound: 404, codes.AlreadyExists: 409, codes.PermissionDenied: 403, codes.ResourceExhausted: 429,
		codes.FailedPrecondition: 412, codes.Aborted: 409, codes.OutOfRange: 400, codes.Unimplemented: 501,
		codes.Internal: 500, codes.Unavailable: 503, codes.DataLoss: 500, codes.Unauthenticated: 401,
	}
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if got := httpStatus(c); got != want[c] {
			t.Errorf("%s: %d, want %d", wire.CodeName(c), got, want[c])
		}
	}
	if wire.CodeName(codes.Canceled) != "CANCELLED" || wire.CodeName(codes.FailedPrecondition) != "FAILED_PRECONDITION" {
		t.Errorf("code names: %s %s", wire.CodeName(codes.Canceled), wire.CodeName(codes.FailedPrecondition))
	}
}

// TestGatewayStreamBroken: a stream the node ends under it (here: the
// node stops) ends with one error line, after a 200 answer.
func TestGatewayStreamBroken(t *testing.T) {
	n, ts := gatewayNode(t)
	req, _ := http.NewRequest("GET", ts.URL+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+gwAcme)
	resp, err := ts.Client().Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("watch: %v %v", resp, err)
	}
	defer resp.Body.Close()
	n.stop()
	body, _ := io.ReadAll(resp.Body)
	if want := `{"error":{"code":"UNAVAILABLE","message":"this node is shutting down; resume the watch on another node from seq 1","reason":"","field":"","retry_after_ms":0}}` + "\n"; string(body) != want {
		t.Fatalf("the end of a broken stream: %q, want %q", body, want)
	}
}
