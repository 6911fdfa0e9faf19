package web

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/internal/auth"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/rpc"
)

// limitedGateway is gatewayNode with the limits of its gRPC server and
// of its HTTP side.
func limitedGateway(t *testing.T, limits rpc.Limits, webLimits Limits) (*testNode, *httptest.Server) {
	t.Helper()
	n := startNode(t, nodeOptions{tokens: []auth.Token{{Secret: gwAdmin, Role: auth.RoleAdmin}, {Secret: gwAcme, Role: auth.RoleClient, Tenant: "acme"}},
		rpc: rpc.Options{Limits: limits}, web: Options{Limits: webLimits}})
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD}}})
	return n, n.serve()
}

// chunked hides a reader's length: the request goes out chunked.
type chunked struct{ io.Reader }

// stalled is a body that sends nothing until released, then its rest:
// a server that tried to read it would wait.
type stalled struct {
	release chan struct{}
	rest    io.Reader
}

func (s stalled) Read(p []byte) (int, error) {
	<-s.release
	if s.rest == nil {
		return 0, io.EOF
	}
	return s.rest.Read(p)
}

// gwBody sends one request with a body reader and returns the answer
// and whether the server closes the connection after it.
func gwBody(t *testing.T, ts *httptest.Server, method, path, token string, body io.Reader, length int64) (gwResult, bool) {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return gwResult{resp.StatusCode, resp.Header, string(b)}, resp.Close
}

// TestGatewayBodyLimits: an API call without a known token is answered
// 401 before its body is read (a body that never comes does not hold it
// up), and the connection is closed rather than drained; a body over
// limits.max_message_bytes is refused 413, whether its length is
// declared or it comes chunked; a chunked body within it is decoded.
func TestGatewayBodyLimits(t *testing.T) {
	n, ts := limitedGateway(t, rpc.Limits{MaxMessageBytes: rpc.MinMessageBytes}, Limits{})
	release := make(chan struct{})
	defer close(release)
	for _, c := range []struct{ name, token, want string }{
		{"no token", "", `{"code":"UNAUTHENTICATED","message":"missing bearer token (authorization: Bearer TOKEN)","reason":"","field":"","retry_after_ms":0}`},
		{"an unknown token", "not-a-token-0000000", `{"code":"UNAUTHENTICATED","message":"unknown token","reason":"","field":"","retry_after_ms":0}`},
	} {
		r, closed := gwBody(t, ts, "POST", "/v1/jobs", c.token, stalled{release: release}, -1)
		if r.status != 401 || canonical(t, r.body) != canonical(t, c.want) || !closed {
			t.Errorf("%s, a body that never comes: %d %v %s\nwant 401 Connection: close %s", c.name, r.status, r.header, r.body, c.want)
		}
	}
	over := fmt.Sprintf(`{"code":"RESOURCE_EXHAUSTED","message":"request body: more than %d bytes (limits.max_message_bytes)","reason":"","field":"","retry_after_ms":0}`, rpc.MinMessageBytes)
	r, _ := gwBody(t, ts, "POST", "/v1/jobs", gwAcme, chunked{strings.NewReader(`{"job_type":"` + strings.Repeat("x", rpc.MinMessageBytes) + `"}`)}, -1)
	if r.status != 413 || canonical(t, r.body) != canonical(t, over) {
		t.Errorf("a chunked body over the limit: %d %s\nwant 413 %s", r.status, r.body, over)
	}
	declared := fmt.Sprintf(`{"code":"RESOURCE_EXHAUSTED","message":"request body: %d bytes (at most %d: limits.max_message_bytes)","reason":"","field":"","retry_after_ms":0}`, rpc.MinMessageBytes+1, rpc.MinMessageBytes)
	r, _ = gwBody(t, ts, "POST", "/v1/jobs", gwAcme, stalled{release: release}, rpc.MinMessageBytes+1)
	if r.status != 413 || canonical(t, r.body) != canonical(t, declared) {
		t.Errorf("a declared length over the limit: %d %s\nwant 413 %s", r.status, r.body, declared)
	}
	r, _ = gwBody(t, ts, "POST", "/v1/jobs", gwAcme, chunked{strings.NewReader(`{"size":"SM","est_cost_ms":"1000"}`)}, -1)
	if r.status != 200 || canonical(t, r.body) != `{"created":true,"job_id":"1"}` {
		t.Errorf("a chunked submit: %d %s", r.status, r.body)
	}
	// gRPC receives no larger message either.
	_, err := pb.NewClientClient(n.dial(gwAcme)).Submit(context.Background(), &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1000, Payload: make([]byte, rpc.MinMessageBytes)})
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), fmt.Sprintf("larger than max (%d vs. %d)", rpc.MinMessageBytes+9, rpc.MinMessageBytes)) {
		t.Errorf("a gRPC submit over the limit: %v", err)
	}
	m := n.web.limitMetrics.httpRefused
	for reason, want := range map[string]float64{"unauthenticated": 2, "body_too_large": 2, "unauthenticated_limit": 0} {
		if got := testutil.ToFloat64(m.WithLabelValues(reason)); got != want {
			t.Errorf("barista_http_refused_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}
}

// TestHTTPUnauthenticatedLimit: with limits.http_unauthenticated 2, two
// logins whose bodies have not arrived hold both places: a third
// request without a token is answered 503 at once, while a request with
// a token, /healthz and /readyz are served; once they end, the next
// request without a token is served again.
func TestHTTPUnauthenticatedLimit(t *testing.T) {
	n, ts := limitedGateway(t, rpc.Limits{}, Limits{HTTPUnauthenticated: 2})
	release := make(chan struct{})
	held := make(chan gwResult, 2)
	for range 2 {
		go func() {
			form := "token=" + strings.Repeat("x", 94)
			req, _ := http.NewRequest("POST", ts.URL+"/login", stalled{release, strings.NewReader(form)})
			req.ContentLength = int64(len(form))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := ts.Client().Do(req)
			if err != nil {
				held <- gwResult{body: err.Error()}
				return
			}
			resp.Body.Close()
			held <- gwResult{status: resp.StatusCode}
		}()
	}
	waitFor(t, 10e9, "two requests without a token in flight", func() bool {
		return testutil.ToFloat64(n.web.limitMetrics.httpUnauthenticated) == 2
	})
	r := gwDo(t, ts, "GET", "/login", "", "")
	want := `{"code":"UNAVAILABLE","message":"this node is serving 2 requests without a token already (limits.http_unauthenticated); try again later","reason":"","field":"","retry_after_ms":0}`
	if r.status != 503 || canonical(t, r.body) != canonical(t, want) || r.header.Get("Retry-After") != "1" {
		t.Errorf("a third request without a token: %d %v %s\nwant 503 %s", r.status, r.header, r.body, want)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if r := gwDo(t, ts, "GET", p, "", ""); r.status != 200 {
			t.Errorf("GET %s while the limit is reached: %d %s", p, r.status, r.body)
		}
	}
	if r := gwDo(t, ts, "GET", "/v1/jobs", gwAcme, ""); r.status != 200 {
		t.Errorf("GET /v1/jobs with a token while the limit is reached: %d %s", r.status, r.body)
	}
	close(release)
	for range 2 {
		if r := <-held; r.status != 401 {
			t.Errorf("a held login: %d %s", r.status, r.body)
		}
	}
	waitFor(t, 10e9, "no request without a token in flight", func() bool {
		return testutil.ToFloat64(n.web.limitMetrics.httpUnauthenticated) == 0
	})
	if r := gwDo(t, ts, "GET", "/login", "", ""); r.status != 200 {
		t.Errorf("a request without a token after the others ended: %d %s", r.status, r.body)
	}
	if got := testutil.ToFloat64(n.web.limitMetrics.httpRefused.WithLabelValues("unauthenticated_limit")); got != 1 {
		t.Errorf("barista_http_refused_total{reason=\"unauthenticated_limit\"} = %v, want 1", got)
	}
}

// login signs in through h (no network) and returns the status and the
// session cookie ("" if none).
func login(t *testing.T, h http.Handler, token string) (int, string) {
	t.Helper()
	req := httptest.NewRequest("POST", "http://node/login", strings.NewReader("token="+token))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://node")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	cookie, _, _ := strings.Cut(w.Header().Get("Set-Cookie"), ";")
	return w.Code, cookie
}

// signedIn reports whether a session cookie opens a console page.
func signedIn(t *testing.T, h http.Handler, cookie string) bool {
	t.Helper()
	req := httptest.NewRequest("GET", "http://node/jobs", nil)
	req.Header.Set("Cookie", cookie)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Code == 200
}

// TestSessionsPerIdentity: 10,001 console logins with one client token
// keep that token's 32 newest sessions (the older are signed out, the
// oldest first), so they neither fill the node's 10,000 sessions nor
// keep the admin out; the admin's own logins are bounded the same way.
func TestSessionsPerIdentity(t *testing.T) {
	n, _ := limitedGateway(t, rpc.Limits{}, Limits{})
	h := n.web
	var cookies []string
	for i := range 10_001 {
		code, cookie := login(t, h, gwAcme)
		if code != http.StatusSeeOther || cookie == "" {
			t.Fatalf("acme's login %d: %d", i, code)
		}
		cookies = append(cookies, cookie)
	}
	per := 32
	if !signedIn(t, h, cookies[len(cookies)-1]) || !signedIn(t, h, cookies[len(cookies)-per]) || signedIn(t, h, cookies[len(cookies)-per-1]) || signedIn(t, h, cookies[0]) {
		t.Errorf("acme's sessions: want the %d newest signed in and no older one", per)
	}
	var admin []string
	for i := range per + 1 {
		code, cookie := login(t, h, gwAdmin)
		if code != http.StatusSeeOther || cookie == "" {
			t.Fatalf("the admin's login %d after acme's 10,001: %d", i, code)
		}
		admin = append(admin, cookie)
	}
	if !signedIn(t, h, admin[per]) || signedIn(t, h, admin[0]) {
		t.Errorf("the admin's sessions: want the %d newest signed in, the first signed out", per)
	}
	m := n.web.limitMetrics
	if got := testutil.ToFloat64(m.sessions); got != float64(2*per) {
		t.Errorf("barista_web_sessions = %v, want %d", got, 2*per)
	}
	if got := testutil.ToFloat64(m.sessionsEvicted); got != float64(10_001-per+1) {
		t.Errorf("barista_web_sessions_evicted_total = %v, want %d", got, 10_001-per+1)
	}
}

// TestSessionsNodeBound: with limits.sessions 6 and 2 per identity, two
// tenants fill the 4 places the identities other than the admin share:
// a third tenant's login is refused 503 naming the limit, while the
// admin still signs in; a signed-out session frees its place.
func TestSessionsNodeBound(t *testing.T) {
	tokens := []auth.Token{{Secret: gwAdmin, Role: auth.RoleAdmin}}
	for _, name := range []string{"t1", "t2", "t3"} {
		tokens = append(tokens, auth.Token{Secret: name + "-secret-000000000", Role: auth.RoleClient, Tenant: name})
	}
	n := startNode(t, nodeOptions{tokens: tokens, web: Options{Limits: Limits{Sessions: 6, SessionsPerIdentity: 2}}})
	h := n.web
	var t1 string
	for _, name := range []string{"t1", "t1", "t2", "t2"} {
		code, cookie := login(t, h, name+"-secret-000000000")
		if code != http.StatusSeeOther {
			t.Fatalf("%s's login: %d", name, code)
		}
		t1 = cookie
	}
	req := httptest.NewRequest("POST", "http://node/login", strings.NewReader("token=t3-secret-000000000"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	want := `{"code":"UNAVAILABLE","message":"too many web sessions on this node (limits.sessions); try again later","reason":"","field":"","retry_after_ms":0}`
	if w.Code != 503 || canonical(t, w.Body.String()) != canonical(t, want) {
		t.Errorf("t3's login with the others' places full: %d %s\nwant 503 %s", w.Code, w.Body.String(), want)
	}
	for range 3 {
		if code, _ := login(t, h, gwAdmin); code != http.StatusSeeOther {
			t.Errorf("the admin's login: %d", code)
		}
	}
	n.web.sessions.delete(strings.TrimPrefix(t1, sessionCookie+"="))
	if code, _ := login(t, h, "t3-secret-000000000"); code != http.StatusSeeOther {
		t.Errorf("t3's login once a place is free: %d", code)
	}
	if got := testutil.ToFloat64(n.web.limitMetrics.loginsRefused); got != 1 {
		t.Errorf("barista_web_logins_refused_total = %v, want 1", got)
	}
}
