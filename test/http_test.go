package test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/test/cluster"
)

const metricsToken = "metrics-secret-0001"

type httpResult struct {
	code     int
	body     string
	header   http.Header
	location string
}

// httpDo sends one request without following redirects.
func httpDo(t *testing.T, client *http.Client, method, rawURL, token string, form url.Values, hdr map[string]string) httpResult {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, rawURL, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if client == nil {
		client = &http.Client{}
	}
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.Timeout = 10 * time.Second
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return httpResult{code: resp.StatusCode, body: string(b), header: resp.Header, location: resp.Header.Get("Location")}
}

func topTenants(t *testing.T, body string) []string {
	t.Helper()
	var top struct {
		Tenants []struct {
			Name string `json:"name"`
		} `json:"tenants"`
	}
	if err := json.Unmarshal([]byte(body), &top); err != nil {
		t.Fatalf("/api/top: %v: %s", err, body)
	}
	var names []string
	for _, r := range top.Tenants {
		names = append(names, r.Name)
	}
	return names
}

// TestHTTPNeedsTokens: with tokens configured, the web page and /api/
// need an admin token (everything) or a client token (its own tenant
// only); health, readiness and (by default) metrics stay open; the login
// form sets a session cookie that is HttpOnly, Secure and SameSite=Strict.
func TestHTTPNeedsTokens(t *testing.T) {
	c := startWithTokens(t, 1, fmt.Sprintf("[[auth.tokens]]\nrole = \"metrics\"\ntoken = %q\n", metricsToken))
	n := c.Nodes[0]
	admin := cluster.Dial(t, n.GRPCAddr, adminToken, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, name := range []string{"acme", "beta"} {
		if _, err := pb.NewAdminClient(admin).UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: name, Tier: pb.Tier_GOLD.Enum()}); err != nil {
			t.Fatal(err)
		}
	}
	base := "http://" + n.HTTPAddr

	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if r := httpDo(t, nil, "GET", base+p, "", nil, nil); r.code != 200 {
			t.Errorf("GET %s without a token: %d %s", p, r.code, r.body)
		}
	}
	r := httpDo(t, nil, "GET", base+"/api/top", "", nil, nil)
	if r.code != 401 || !strings.Contains(r.body, `"code":"UNAUTHENTICATED"`) {
		t.Errorf("/api/top without a token: %d %s", r.code, r.body)
	}
	if r := httpDo(t, nil, "GET", base+"/api/top", "not-a-token-at-all", nil, nil); r.code != 401 || !strings.Contains(r.body, "unknown token") {
		t.Errorf("/api/top with an unknown token: %d %s", r.code, r.body)
	}
	for _, tok := range []string{workerToken, metricsToken} {
		if r := httpDo(t, nil, "GET", base+"/api/top", tok, nil, nil); r.code != 403 || !strings.Contains(r.body, `"code":"PERMISSION_DENIED"`) {
			t.Errorf("/api/top with a worker or metrics token: %d %s", r.code, r.body)
		}
	}
	if r := httpDo(t, nil, "GET", base+"/api/top", acmeToken, nil, nil); r.code != 200 || fmt.Sprint(topTenants(t, r.body)) != "[acme]" {
		t.Errorf("/api/top as acme: %d %s", r.code, r.body)
	}
	if r := httpDo(t, nil, "GET", base+"/api/top", adminToken, nil, nil); r.code != 200 || fmt.Sprint(topTenants(t, r.body)) != "[acme beta]" {
		t.Errorf("/api/top as admin: %d %s", r.code, r.body)
	}

	// The page: a browser without a session goes to the login form.
	if r := httpDo(t, nil, "GET", base+"/", "", nil, nil); r.code != 303 || r.location != "/login" {
		t.Errorf("GET / without a token: %d %q", r.code, r.location)
	}
	page := httpDo(t, nil, "GET", base+"/", acmeToken, nil, nil)
	if page.code != 200 || !strings.Contains(page.body, ">acme<") || strings.Contains(page.body, ">beta<") || strings.Contains(page.body, `id="members"`) {
		t.Errorf("GET / as acme: %d\n%s", page.code, page.body)
	}
	if csp := page.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
		t.Errorf("page CSP %q", csp)
	}
	if r := httpDo(t, nil, "GET", base+"/", adminToken, nil, nil); r.code != 200 || !strings.Contains(r.body, ">beta<") || !strings.Contains(r.body, `id="members"`) {
		t.Errorf("GET / as admin: %d", r.code)
	}

	// Login: a bad token is refused, a cross-site post too; a good one
	// gets a session cookie that opens the page.
	if r := httpDo(t, nil, "POST", base+"/login", "", url.Values{"token": {"wrong-token-0000000"}}, nil); r.code != 401 || r.header.Get("Set-Cookie") != "" {
		t.Errorf("login with a bad token: %d %q", r.code, r.header.Get("Set-Cookie"))
	}
	if r := httpDo(t, nil, "POST", base+"/login", "", url.Values{"token": {workerToken}}, nil); r.code != 401 {
		t.Errorf("login with a worker token: %d", r.code)
	}
	if r := httpDo(t, nil, "POST", base+"/login", "", url.Values{"token": {acmeToken}}, map[string]string{"Origin": "http://evil.example"}); r.code != 403 {
		t.Errorf("cross-origin login: %d", r.code)
	}
	login := httpDo(t, nil, "POST", base+"/login", "", url.Values{"token": {acmeToken}}, map[string]string{"Origin": base})
	cookie := login.header.Get("Set-Cookie")
	if login.code != 303 || login.location != "/" {
		t.Fatalf("login: %d %q", login.code, login.location)
	}
	for _, attr := range []string{"barista_session=", "HttpOnly", "Secure", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(cookie, attr) {
			t.Errorf("session cookie %q lacks %s", cookie, attr)
		}
	}
	if strings.Contains(cookie, acmeToken) {
		t.Errorf("the cookie carries the token: %q", cookie)
	}
	session := strings.SplitN(cookie, ";", 2)[0]
	if r := httpDo(t, nil, "GET", base+"/", "", nil, map[string]string{"Cookie": session}); r.code != 200 || !strings.Contains(r.body, "signed in as client of tenant acme") || strings.Contains(r.body, ">beta<") {
		t.Errorf("GET / with the session: %d", r.code)
	}
	// The JSON API takes no cookie.
	if r := httpDo(t, nil, "GET", base+"/api/top", "", nil, map[string]string{"Cookie": session}); r.code != 401 {
		t.Errorf("/api/top with a session cookie: %d", r.code)
	}
	// Logging out is a console action: it needs the session's CSRF token.
	if r := httpDo(t, nil, "POST", base+"/logout", "", nil, map[string]string{"Cookie": session}); r.code != 403 {
		t.Errorf("logout without the CSRF token: %d", r.code)
	}
	csrf := regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`).FindStringSubmatch(httpDo(t, nil, "GET", base+"/", "", nil, map[string]string{"Cookie": session}).body)
	if csrf == nil {
		t.Fatal("no CSRF token on the page")
	}
	if r := httpDo(t, nil, "POST", base+"/logout", "", url.Values{"csrf": {csrf[1]}}, map[string]string{"Cookie": session, "Origin": base}); r.code != 303 {
		t.Errorf("logout: %d", r.code)
	}
	if r := httpDo(t, nil, "GET", base+"/", "", nil, map[string]string{"Cookie": session}); r.code != 303 {
		t.Errorf("GET / after logout: %d", r.code)
	}

	// /metrics can need a token too.
	n.Stop()
	n.Start("--metrics-require-token")
	c.WaitLeader(20 * time.Second)
	if r := httpDo(t, nil, "GET", base+"/metrics", "", nil, nil); r.code != 401 {
		t.Errorf("/metrics without a token under --metrics-require-token: %d", r.code)
	}
	if r := httpDo(t, nil, "GET", base+"/metrics", acmeToken, nil, nil); r.code != 403 {
		t.Errorf("/metrics with a client token: %d", r.code)
	}
	for _, tok := range []string{metricsToken, adminToken} {
		if r := httpDo(t, nil, "GET", base+"/metrics", tok, nil, nil); r.code != 200 || !strings.Contains(r.body, "barista_applied_index") {
			t.Errorf("/metrics with an admin or metrics token: %d", r.code)
		}
	}
	if r := httpDo(t, nil, "GET", base+"/readyz", "", nil, nil); r.code != 200 {
		t.Errorf("/readyz under --metrics-require-token: %d", r.code)
	}
}

// TestHTTPExposure: with tokens, a non-loopback HTTP address without TLS
// is refused at start unless --insecure-http; with TLS the HTTP listener
// serves HTTPS with the node's certificate.
func TestHTTPExposure(t *testing.T) {
	cfg := tokenConfig(t, "")
	c := cluster.New(t, "--config", cfg)
	n := c.Add("n1")
	n.HTTPAddr = fmt.Sprintf("0.0.0.0:%d", cluster.FreePort(t))
	n.Start("--bootstrap")
	err, exited := n.Wait(20 * time.Second)
	if !exited || err == nil {
		t.Fatalf("a non-loopback HTTP address without TLS started (exited %v, err %v)", exited, err)
	}
	if log := n.Log(); !strings.Contains(log, "--insecure-http") || !strings.Contains(log, n.HTTPAddr) {
		t.Fatalf("the refusal does not name the flag and address:\n%s", log)
	}
	n.Start("--bootstrap", "--insecure-http")
	c.Token = adminToken
	c.WaitLeader(20 * time.Second)
	if !strings.Contains(n.Log(), "--insecure-http: the web console and HTTP API take tokens over plain HTTP") {
		t.Error("no warning for --insecure-http")
	}
	n.Stop()

	// TLS: HTTPS with the node's certificate.
	dir := t.TempDir()
	if _, errOut, err := c.Run("tls", "init", "--dir", dir, "--names", "n2"); err != nil {
		t.Fatalf("tls init: %v %s", err, errOut)
	}
	m := c.Add("n2")
	m.HTTPAddr = fmt.Sprintf("0.0.0.0:%d", cluster.FreePort(t))
	m.Args = []string{"--tls-cert", filepath.Join(dir, "n2.pem"), "--tls-key", filepath.Join(dir, "n2-key.pem"), "--tls-ca", filepath.Join(dir, "ca.pem")}
	m.Start("--bootstrap")
	pool, err := raftnode.LoadCAPool(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	https := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "n2"}}}
	port := m.HTTPAddr[strings.LastIndexByte(m.HTTPAddr, ':')+1:]
	waitFor(t, 20*time.Second, "HTTPS /readyz", func() (bool, string) {
		resp, err := https.Get("https://127.0.0.1:" + port + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == 200, resp.Status
	})
	if r := httpDo(t, https, "GET", "https://127.0.0.1:"+port+"/api/top", adminToken, nil, nil); r.code != 200 {
		t.Errorf("HTTPS /api/top as admin: %d %s", r.code, r.body)
	}
	resp, err := http.Get("http://127.0.0.1:" + port + "/api/top")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to the TLS listener answered %s", resp.Status)
		}
	}
}
