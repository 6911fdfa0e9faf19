package test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"gopkg.in/yaml.v3"

	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/test/cluster"
)

// api is an HTTP/JSON client of one node, as curl would be.
type api struct {
	t      *testing.T
	client *http.Client
	base   string // scheme://host:port
}

type apiAnswer struct {
	status int
	header http.Header
	body   string
}

// do sends one request ("" token: no Authorization header; hdr: more
// headers as name, value pairs).
func (a api) do(method, path, token, body string, hdr ...string) apiAnswer {
	a.t.Helper()
	r, err := a.try(method, path, token, body, hdr...)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

func (a api) try(method, path, token, body string, hdr ...string) (apiAnswer, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	if err != nil {
		return apiAnswer{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	client := *a.client
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	if err != nil {
		return apiAnswer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return apiAnswer{resp.StatusCode, resp.Header, string(b)}, err
}

// json sends a request that must answer 200 and decodes the answer.
func (a api) json(method, path, token, body string, into any) {
	a.t.Helper()
	r := a.do(method, path, token, body)
	if r.status != 200 {
		a.t.Fatalf("%s %s: %d %s", method, path, r.status, r.body)
	}
	if err := json.Unmarshal([]byte(r.body), into); err != nil {
		a.t.Fatalf("%s %s: %v: %s", method, path, err, r.body)
	}
}

// expect checks a refusal: its status and its exact {"code","message"}.
func (a api) expect(what string, r apiAnswer, status int, code, message string) {
	a.t.Helper()
	var e struct{ Code, Message string }
	if err := json.Unmarshal([]byte(r.body), &e); err != nil || r.status != status || e.Code != code || e.Message != message {
		a.t.Errorf("%s: %d %s\nwant %d {%q, %q}", what, r.status, r.body, status, code, message)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		a.t.Errorf("%s: Content-Type %q", what, ct)
	}
}

// events reads an event stream to its end (or n lines, n > 0).
func (a api) events(path, token string, n int) []apiEvent {
	a.t.Helper()
	req, _ := http.NewRequest("GET", a.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := a.client.Do(req)
	if err != nil {
		a.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		b, _ := io.ReadAll(resp.Body)
		a.t.Fatalf("GET %s: %s %q %s", path, resp.Status, resp.Header.Get("Content-Type"), b)
	}
	var out []apiEvent
	lines := bufio.NewScanner(resp.Body)
	for (n <= 0 || len(out) < n) && lines.Scan() {
		var ev apiEvent
		if err := json.Unmarshal(lines.Bytes(), &ev); err != nil || ev.Seq == "" {
			a.t.Fatalf("GET %s: line %q: %v", path, lines.Text(), err)
		}
		out = append(out, ev)
	}
	return out
}

type apiEvent struct {
	Seq    string `json:"seq"`
	JobID  string `json:"job_id"`
	Tenant string `json:"tenant"`
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
}

func kinds(evs []apiEvent) string {
	var k []string
	for _, e := range evs {
		k = append(k, e.Kind)
	}
	return strings.Join(k, " ")
}

type apiJob struct {
	JobID          string `json:"job_id"`
	Tenant         string `json:"tenant"`
	State          string `json:"state"`
	Size           string `json:"size"`
	EstCostMs      string `json:"est_cost_ms"`
	JobType        string `json:"job_type"`
	IdempotencyKey string `json:"idempotency_key"`
	Payload        string `json:"payload"`
}

type apiSubmit struct {
	JobID   string `json:"job_id"`
	Created bool   `json:"created"`
}

// TestHTTPAPI: the whole client API and the admin routes over HTTP/JSON
// (HTTPS, the node's certificate) through a follower of a 3-node cluster
// with mutual TLS between members and tokens: answers, paging, the event
// stream to a job's end and resumed with from, a tenant's webhook, and
// the status and exact {"code","message"} of each class of error.
func TestHTTPAPI(t *testing.T) {
	const webhookKey = "98bf3a139b1a2e491ba0980bc0063fde132b266387b880858d025cc63cbb005b"
	t.Setenv("BARISTA_WEBHOOK_KEY", webhookKey)
	dir := t.TempDir()
	c := cluster.New(t, "--config", tokenConfig(t, ""))
	if _, errOut, err := c.Run("tls", "init", "--dir", dir, "--names", "n1,n2,n3"); err != nil {
		t.Fatalf("tls init: %v %s", err, errOut)
	}
	pool, err := raftnode.LoadCAPool(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	c.TLS, c.Token = &tls.Config{RootCAs: pool}, adminToken
	c.BootWith(3, func(_ int, n *cluster.Node) { n.Args = tlsFlags(dir, n.ID) })
	leader := c.WaitLeader(20 * time.Second)
	follower := c.Followers(leader)[0]
	a := api{t: t, client: &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}},
		base: "https://" + follower.HTTPAddr}
	t.Logf("leader %s; every request goes to follower %s at %s", leader.ID, follower.ID, a.base)
	w := c.AddWorker("w1", "md")
	w.Token, w.Args = workerToken, []string{"--tls-ca", filepath.Join(dir, "ca.pem")}
	w.Start("")

	// Admin: tenants (a name with "/" and "?" travels escaped).
	var tenant struct {
		Name    string `json:"name"`
		Tier    string `json:"tier"`
		Created bool   `json:"created"`
		Caps    struct {
			MaxQueued int `json:"max_queued"`
		} `json:"caps"`
	}
	for _, name := range []string{"acme", "beta", "team/a?b"} {
		a.json("PUT", "/v1/admin/tenants/"+url.PathEscape(name), adminToken, `{"tier":"GOLD"}`, &tenant)
		if tenant.Name != name || tenant.Tier != "GOLD" || !tenant.Created {
			t.Fatalf("PUT tenant %q: %+v", name, tenant)
		}
	}
	a.json("PUT", "/v1/admin/tenants/tiny", adminToken, `{"tier":"FREE","caps":{"max_queued":1}}`, &tenant)
	if tenant.Name != "tiny" || tenant.Caps.MaxQueued != 1 {
		t.Fatalf("PUT tiny: %+v", tenant)
	}
	a.json("GET", "/v1/admin/tenants/team%2Fa%3Fb", adminToken, "", &tenant)
	if tenant.Name != "team/a?b" || tenant.Created {
		t.Errorf("GET team/a?b: %+v", tenant)
	}
	if r := a.do("DELETE", "/v1/admin/tenants/team%2Fa%3Fb", adminToken, ""); r.status != 200 || strings.TrimSpace(r.body) != "{}" {
		t.Errorf("DELETE team/a?b: %d %s", r.status, r.body)
	}
	var list struct {
		Tenants []struct {
			Name string `json:"name"`
		} `json:"tenants"`
	}
	a.json("GET", "/v1/admin/tenants", adminToken, "", &list)
	var names []string
	for _, tn := range list.Tenants {
		names = append(names, tn.Name)
	}
	if fmt.Sprint(names) != "[acme beta tiny]" {
		t.Errorf("tenants: %v", names)
	}

	// Submit with a key: idempotent; the same key with other content is
	// refused.
	var sub apiSubmit
	const render = `{"job_type":"render","size":"LG","est_cost_ms":"1000","idempotency_key":"k1","payload":"aGVsbG8="}`
	a.json("POST", "/v1/jobs", acmeToken, render, &sub)
	if !sub.Created || sub.JobID == "" {
		t.Fatalf("submit: %+v", sub)
	}
	first := sub.JobID
	a.json("POST", "/v1/jobs", acmeToken, render, &sub)
	if sub.Created || sub.JobID != first {
		t.Errorf("submit again: %+v, want job %s not created", sub, first)
	}
	a.expect("the key with other content", a.do("POST", "/v1/jobs", acmeToken, `{"size":"LG","est_cost_ms":"2000","idempotency_key":"k1"}`),
		409, "ALREADY_EXISTS", fmt.Sprintf(`idempotency key "k1" of tenant "acme" was used for job %s with different content`, first))

	// A batch with one bad job: one result per job.
	var batch struct {
		Results []struct {
			JobID   string `json:"job_id"`
			Created bool   `json:"created"`
			Error   string `json:"error"`
		} `json:"results"`
	}
	a.json("POST", "/v1/jobs:batch", acmeToken, `{"jobs":[
		{"size":"LG","est_cost_ms":"500","idempotency_key":"b1"},
		{"size":"LG","idempotency_key":"b2"},
		{"size":"LG","est_cost_ms":"500","idempotency_key":"b3"}]}`, &batch)
	if len(batch.Results) != 3 || !batch.Results[0].Created || batch.Results[1].Created || batch.Results[1].JobID != "0" ||
		batch.Results[1].Error != "INVALID_ARGUMENT: est_cost_ms: must be positive (got 0); it may be left out only while the cluster's estimate is auto" || !batch.Results[2].Created || batch.Results[2].Error != "" {
		t.Fatalf("batch: %+v", batch.Results)
	}
	b1, b3 := batch.Results[0].JobID, batch.Results[2].JobID

	// Get: int64 as strings, enums by name, bytes in base64.
	var job apiJob
	a.json("GET", "/v1/jobs/"+first, acmeToken, "", &job)
	if job != (apiJob{JobID: first, Tenant: "acme", State: "queued", Size: "LG", EstCostMs: "1000", JobType: "render", IdempotencyKey: "k1", Payload: "aGVsbG8="}) {
		t.Errorf("job %s: %+v", first, job)
	}

	// List with paging: two pages of queued jobs, then no token.
	var got []string
	pages := 0
	for token := ""; ; pages++ {
		var page struct {
			Jobs []apiJob `json:"jobs"`
			Next string   `json:"next_page_token"`
		}
		a.json("GET", "/v1/jobs?state=queued&page_size=2&page_token="+url.QueryEscape(token), acmeToken, "", &page)
		for _, j := range page.Jobs {
			got = append(got, j.JobID)
			if j.Payload != "" {
				t.Errorf("a listed job came with its payload: %+v", j)
			}
		}
		if token = page.Next; token == "" {
			break
		}
	}
	if want := []string{b3, b1, first}; !slices.Equal(got, want) || pages != 1 {
		t.Errorf("paged list: %v in %d pages after the first, want %v in 1", got, pages, want)
	}

	// A bulk call: a dry run of a cancel by filter lists the queued jobs
	// and changes nothing (a state is named in either case, as enums are).
	var bulk struct {
		Items []struct {
			Job   string `json:"job_id"`
			Done  bool   `json:"done"`
			State string `json:"state"`
		} `json:"items"`
		Done string `json:"done"`
	}
	a.json("POST", "/v1/jobs:cancel", acmeToken, `{"filter":{"states":["QUEUED"]},"dry_run":true}`, &bulk)
	var listed []string
	for _, it := range bulk.Items {
		if it.Done && it.State == "queued" {
			listed = append(listed, it.Job)
		}
	}
	if want := []string{first, b1, b3}; !slices.Equal(listed, want) || bulk.Done != "3" {
		t.Errorf("dry run of a cancel by filter: %+v, want jobs %v", bulk, want)
	}

	// Why a job waits (no worker of its size).
	var why struct {
		JobID  string `json:"job_id"`
		Reason string `json:"reason"`
	}
	a.json("GET", "/v1/jobs/"+first+":explain", acmeToken, "", &why)
	if why.JobID != first || why.Reason != "no_worker" {
		t.Errorf("explain %s: %+v", first, why)
	}

	// Cancel a queued job.
	var cancelled struct {
		State           string `json:"state"`
		CancelRequested bool   `json:"cancel_requested"`
	}
	a.json("POST", "/v1/jobs/"+b3+":cancel", acmeToken, "", &cancelled)
	if cancelled.State != "cancelled" || cancelled.CancelRequested {
		t.Errorf("cancel %s: %+v", b3, cancelled)
	}

	// A job the worker runs: its event stream, read to its end.
	runTrue := fmt.Sprintf(`{"size":"MD","est_cost_ms":"100","idempotency_key":"run","payload":%q}`, base64JSON(t, payload(t, "true")))
	a.json("POST", "/v1/jobs", acmeToken, runTrue, &sub)
	run := sub.JobID
	// A watch is served from the node's own state: wait until the
	// follower has applied the submit (a stale read shows it).
	waitFor(t, 20*time.Second, "the follower to apply job "+run, func() (bool, string) {
		r := a.do("GET", "/v1/jobs/"+run+"?stale=true", acmeToken, "")
		return r.status == 200, r.body
	})
	full := a.events("/v1/events?job_id="+run+"&from_oldest=true", acmeToken, 0)
	if kinds(full) != "queued assigned started completed" {
		t.Fatalf("job %s's stream: %+v", run, full)
	}
	for _, e := range full {
		if e.JobID != run || e.Tenant != "acme" {
			t.Errorf("event of job %s: %+v", run, e)
		}
	}
	// Resumed with from: two events, a new connection, the rest.
	head := a.events("/v1/events?job_id="+run+"&from_oldest=true", acmeToken, 2)
	var seq uint64
	fmt.Sscan(head[1].Seq, &seq)
	tail := a.events(fmt.Sprintf("/v1/events?job_id=%s&from=%d", run, seq+1), acmeToken, 0)
	if resumed := append(head, tail...); !slices.Equal(resumed, full) {
		t.Errorf("resumed stream %+v, want %+v", resumed, full)
	}

	// Usage.
	var usage struct {
		Tenant       string `json:"tenant"`
		Queued       int    `json:"queued"`
		QueuedBySize []int  `json:"queued_by_size"`
		Submitted    string `json:"submitted"`
		Completed    string `json:"completed"`
		Cancelled    string `json:"cancelled"`
	}
	a.json("GET", "/v1/usage?stale=false", acmeToken, "", &usage)
	if usage.Tenant != "acme" || usage.Queued != 2 || fmt.Sprint(usage.QueuedBySize) != "[0 0 2]" || usage.Submitted != "4" || usage.Completed != "1" || usage.Cancelled != "1" {
		t.Errorf("usage: %+v", usage)
	}

	// Each class of error: its status and exact message.
	a.expect("an unknown field", a.do("POST", "/v1/jobs", acmeToken, `{"size":"LG","est_cost_ms":"1000","priority":"high"}`),
		400, "INVALID_ARGUMENT", `priority: not a field of this request (it takes tenant, idempotency_key, job_type, size, est_cost_ms, payload, max_attempts, timeout_ms, class, deadline_ms, group, delay_ms, expire_ms, retry_backoff_ms, pool, form, return_job, uses)`)
	a.expect("a field out of range", a.do("POST", "/v1/jobs", acmeToken, `{"size":"LG","est_cost_ms":"1000","max_attempts":5000}`),
		400, "INVALID_ARGUMENT", "max_attempts: 5000, at most 1000")
	a.expect("an unknown query parameter", a.do("GET", "/v1/jobs?sate=queued", acmeToken, ""),
		400, "INVALID_ARGUMENT", `unknown query parameter "sate" (this route takes tenant, state, page_size, page_token, stale, include_payload, newest_first, oldest_first, pool)`)
	a.expect("an unknown job", a.do("GET", "/v1/jobs/987654", acmeToken, ""), 404, "NOT_FOUND", "job 987654 not found")
	a.expect("another tenant's job", a.do("GET", "/v1/jobs/"+first, betaToken, ""), 404, "NOT_FOUND", "job "+first+" not found")
	a.expect("cancel another tenant's job", a.do("POST", "/v1/jobs/"+first+":cancel", betaToken, ""), 404, "NOT_FOUND", "job "+first+" not found")
	a.expect("watch another tenant's job", a.do("GET", "/v1/events?job_id="+first, betaToken, ""), 404, "NOT_FOUND", "job "+first+" not found")
	a.expect("explain another tenant's job", a.do("GET", "/v1/jobs/"+first+":explain", betaToken, ""), 404, "NOT_FOUND", "job "+first+" not found")
	a.expect("another tenant by name", a.do("GET", "/v1/usage?tenant=acme", betaToken, ""),
		403, "PERMISSION_DENIED", `tenant: this token is for tenant "beta", not "acme"`)
	a.expect("a completed job cancelled", a.do("POST", "/v1/jobs/"+run+":cancel", acmeToken, ""),
		412, "FAILED_PRECONDITION", "job "+run+" is already completed")
	a.json("POST", "/v1/jobs", adminToken, `{"tenant":"tiny","size":"LG","est_cost_ms":"10"}`, &sub)
	a.expect("over the tenant's max_queued", a.do("POST", "/v1/jobs", adminToken, `{"tenant":"tiny","size":"LG","est_cost_ms":"10"}`),
		429, "RESOURCE_EXHAUSTED", `tenant "tiny" has 1 queued jobs, its max_queued quota`)
	noToken := a.do("GET", "/v1/jobs", "", "")
	a.expect("no token", noToken, 401, "UNAUTHENTICATED", "missing bearer token (authorization: Bearer TOKEN)")
	if h := noToken.header.Get("WWW-Authenticate"); h != `Bearer realm="barista"` {
		t.Errorf("WWW-Authenticate %q", h)
	}
	a.expect("an unknown token", a.do("GET", "/v1/jobs", "wrong-token-000000000", ""), 401, "UNAUTHENTICATED", "unknown token")
	// A valid console session cookie opens the console, never the API.
	login := a.do("POST", "/login", "", url.Values{"token": {acmeToken}}.Encode(), "Content-Type", "application/x-www-form-urlencoded", "Origin", a.base)
	session := strings.SplitN(login.header.Get("Set-Cookie"), ";", 2)[0]
	if login.status != 303 || !strings.HasPrefix(session, "barista_session=") {
		t.Fatalf("login: %d %q", login.status, session)
	}
	if r := a.do("GET", "/api/top", "", "", "Cookie", session); r.status != 401 {
		t.Errorf("the session does not open the console's JSON either: %d", r.status)
	}
	if r := a.do("GET", "/", "", "", "Cookie", session); r.status != 200 {
		t.Fatalf("the session cookie does not open the page: %d", r.status)
	}
	a.expect("the session cookie alone", a.do("GET", "/v1/jobs", "", "", "Cookie", session),
		401, "UNAUTHENTICATED", "missing bearer token (authorization: Bearer TOKEN)")
	a.expect("no route", a.do("GET", "/v1/job", acmeToken, ""), 404, "NOT_FOUND", "no route GET /v1/job (the routes: /v1/openapi.json)")

	// Admin routes: served to an admin token, refused to a client token.
	for _, r := range []struct{ method, path, body, rpc string }{
		{"GET", "/v1/admin/tenants", "", "Admin/ListTenants"},
		{"GET", "/v1/admin/tenants/acme", "", "Admin/GetTenant"},
		{"PUT", "/v1/admin/tenants/acme", `{"tier":"DIAMOND"}`, "Admin/UpsertTenant"},
		{"DELETE", "/v1/admin/tenants/acme", "", "Admin/DeleteTenant"},
		{"GET", "/v1/admin/config", "", "Admin/GetConfig"},
		{"PUT", "/v1/admin/config", `{}`, "Admin/SetConfig"},
		{"GET", "/v1/admin/top", "", "Admin/Top"},
		{"GET", "/v1/admin/workers", "", "Worker/ListWorkers"},
		{"POST", "/v1/admin/workers/w1:drain", "", "Worker/Drain"},
		{"GET", "/v1/admin/members", "", "Node/ListPeers"},
		{"PUT", "/v1/admin/tenants/acme/webhook", `{"url":"https://hooks.example.com/"}`, "Admin/WebhookSet"},
		{"GET", "/v1/admin/tenants/acme/webhook", "", "Admin/WebhookGet"},
		{"DELETE", "/v1/admin/tenants/acme/webhook", "", "Admin/WebhookDelete"},
		{"GET", "/v1/admin/tenants/acme/webhook:status", "", "Admin/WebhookStatus"},
		{"POST", "/v1/admin/tenants/acme/webhook:replay", `{"from_seq":"1"}`, "Admin/WebhookReplay"},
	} {
		a.expect("a client token on "+r.method+" "+r.path, a.do(r.method, r.path, acmeToken, r.body),
			403, "PERMISSION_DENIED", "a client token may not call /barista.v1."+r.rpc)
	}
	var cfg map[string]any
	a.json("GET", "/v1/admin/config", adminToken, "", &cfg)
	cfg["max_payload_bytes"] = 65536
	body, _ := json.Marshal(cfg)
	var set map[string]any
	a.json("PUT", "/v1/admin/config", adminToken, string(body), &set)
	if fmt.Sprint(set) != fmt.Sprint(cfg) {
		t.Errorf("PUT config answered %v, want %v", set, cfg)
	}
	cfg["lease_timeout_ms"], cfg["self_kill_after_ms"] = "1000", "2000"
	body, _ = json.Marshal(cfg)
	a.expect("a bad config", a.do("PUT", "/v1/admin/config", adminToken, string(body)),
		400, "INVALID_ARGUMENT", "config: heartbeat_interval 5s must be below self_kill_after 2s")
	var top struct {
		LeaderID string `json:"leader_id"`
		Tenants  []struct {
			Name string `json:"name"`
		} `json:"tenants"`
	}
	a.json("GET", "/v1/admin/top?window_ms=60000", adminToken, "", &top)
	if top.LeaderID != leader.ID || len(top.Tenants) != 3 {
		t.Errorf("top: %+v", top)
	}
	var members struct {
		Peers []struct {
			ID     string `json:"id"`
			Leader bool   `json:"leader"`
		} `json:"peers"`
	}
	a.json("GET", "/v1/admin/members", adminToken, "", &members)
	var peers []string
	for _, p := range members.Peers {
		peers = append(peers, fmt.Sprintf("%s:%v", p.ID, p.Leader))
	}
	sort.Strings(peers)
	if want := []string{"n1:" + fmt.Sprint(leader.ID == "n1"), "n2:" + fmt.Sprint(leader.ID == "n2"), "n3:" + fmt.Sprint(leader.ID == "n3")}; !slices.Equal(peers, want) {
		t.Errorf("members: %v, want %v", peers, want)
	}
	type workers struct {
		Workers []struct {
			WorkerID string `json:"worker_id"`
			Drained  bool   `json:"drained"`
		} `json:"workers"`
	}
	for _, drain := range []string{`{}`, `{"undrain":true}`} {
		if r := a.do("POST", "/v1/admin/workers/w1:drain", adminToken, drain); r.status != 200 {
			t.Fatalf("drain %s: %d %s", drain, r.status, r.body)
		}
		var ws workers
		a.json("GET", "/v1/admin/workers", adminToken, "", &ws)
		if len(ws.Workers) != 1 || ws.Workers[0].WorkerID != "w1" || ws.Workers[0].Drained != (drain == `{}`) {
			t.Errorf("workers after %s: %+v", drain, ws)
		}
	}
	a.expect("drain an unknown worker", a.do("POST", "/v1/admin/workers/nobody:drain", adminToken, ""),
		404, "NOT_FOUND", `worker_id: no worker "nobody" is connected or known (create=true drains it before it first connects)`)
	a.expect("delete a tenant with queued jobs", a.do("DELETE", "/v1/admin/tenants/tiny", adminToken, ""),
		412, "FAILED_PRECONDITION", `tenant has queued or running jobs: "tiny" has 1 queued and 0 running`)

	// A tenant's webhook: the secret in the answer of the PUT that
	// creates the endpoint (derived from the servers' key: the leader's
	// and the follower's agree) and in no other answer.
	type apiWebhook struct {
		Tenant        string   `json:"tenant"`
		URL           string   `json:"url"`
		Kinds         []string `json:"kinds"`
		SecretVersion string   `json:"secret_version"`
		Cursor        string   `json:"cursor"`
	}
	var hookSet struct {
		Webhook apiWebhook `json:"webhook"`
		Created bool       `json:"created"`
		Secret  string     `json:"secret"`
	}
	hookPath := "/v1/admin/tenants/beta/webhook"
	a.json("PUT", hookPath, adminToken, `{"url":"https://hooks.example.com/beta","kinds":["completed"]}`, &hookSet)
	if w := hookSet.Webhook; !hookSet.Created || !strings.HasPrefix(hookSet.Secret, "whsec_") || len(hookSet.Secret) != 70 ||
		w.Tenant != "beta" || w.URL != "https://hooks.example.com/beta" || fmt.Sprint(w.Kinds) != "[completed]" || w.SecretVersion != "1" {
		t.Errorf("PUT webhook: %+v", hookSet)
	}
	for _, path := range []string{hookPath, hookPath + ":status"} {
		if r := a.do("GET", path, adminToken, ""); r.status != 200 || strings.Contains(r.body, "whsec_") || !strings.Contains(r.body, `"url":"https://hooks.example.com/beta"`) {
			t.Errorf("GET %s: %d %s", path, r.status, r.body)
		}
	}
	var hookStatus struct {
		LeaderID string `json:"leader_id"`
	}
	a.json("GET", hookPath+":status", adminToken, "", &hookStatus)
	if hookStatus.LeaderID != leader.ID {
		t.Errorf("webhook status from %q, want the leader %s", hookStatus.LeaderID, leader.ID)
	}
	var replayed apiWebhook
	a.json("POST", hookPath+":replay", adminToken, `{"from_seq":"1"}`, &replayed)
	if replayed.Tenant != "beta" || replayed.Cursor != "0" {
		t.Errorf("replay: %+v", replayed)
	}
	a.expect("a webhook to a private address", a.do("PUT", hookPath, adminToken, `{"url":"http://10.1.2.3/hook"}`),
		400, "INVALID_ARGUMENT", "url: 10.1.2.3 is a private address, refused (a server's [webhooks] allow_cidrs or --webhook-allow-cidr may allow it)")
	if r := a.do("DELETE", hookPath, adminToken, ""); r.status != 200 || strings.TrimSpace(r.body) != "{}" {
		t.Errorf("DELETE webhook: %d %s", r.status, r.body)
	}
	a.expect("a deleted webhook", a.do("GET", hookPath, adminToken, ""), 404, "NOT_FOUND", `tenant "beta" has no webhook`)
}

// base64JSON is the JSON form (base64) of bytes.
func base64JSON(t *testing.T, b []byte) string {
	t.Helper()
	s, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Trim(string(s), `"`)
}

// TestHTTPAPIAcrossLeaderKill: clients submit keyed jobs over HTTP/JSON
// to every node in turn while the leader is killed; each retries a key
// (on a refusal or a broken connection, on the next node) until it is
// acknowledged. Every acknowledged key names exactly one job.
func TestHTTPAPIAcrossLeaderKill(t *testing.T) {
	c := startWithTokens(t, 3, "")
	clients := make([]api, len(c.Nodes))
	for i, n := range c.Nodes {
		clients[i] = api{t: t, client: &http.Client{Timeout: 10 * time.Second}, base: "http://" + n.HTTPAddr}
	}
	clients[0].json("PUT", "/v1/admin/tenants/acme", adminToken, `{"tier":"GOLD"}`, new(map[string]any))

	var (
		mu       sync.Mutex
		acked    = map[string]string{}
		statuses = map[string]int{}
		retried  int
		stop     = make(chan struct{})
	)
	deadline := time.Now().Add(2 * time.Minute)
	wg := keyedLoad(4, stop, func(cl, _ int, key string) bool {
		body := fmt.Sprintf(`{"size":"LG","est_cost_ms":"1000","idempotency_key":%q}`, key)
		for try := 0; ; try++ {
			if time.Now().After(deadline) {
				return false
			}
			r, err := clients[(cl+try)%len(clients)].try("POST", "/v1/jobs", acmeToken, body)
			mu.Lock()
			if err != nil {
				statuses["connection error"]++
			} else {
				statuses[fmt.Sprint(r.status)]++
			}
			mu.Unlock()
			if err == nil && r.status == 200 {
				var s apiSubmit
				if json.Unmarshal([]byte(r.body), &s) == nil && s.JobID != "" {
					mu.Lock()
					acked[key] = s.JobID
					if try > 0 {
						retried++
					}
					mu.Unlock()
					return true
				}
			}
			if err == nil && r.status != 503 && r.status != 504 {
				t.Errorf("submit %s: %d %s", key, r.status, r.body)
				return false
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	waitAcked := func(n int) {
		waitFor(t, time.Minute, fmt.Sprintf("%d acknowledged submits", n), func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			return len(acked) >= n, fmt.Sprint(len(acked))
		})
	}
	waitAcked(20)
	leader := c.WaitLeader(10 * time.Second)
	t.Logf("kill -9 leader %s", leader.ID)
	leader.Kill()
	mu.Lock()
	before := len(acked)
	mu.Unlock()
	waitAcked(before + 40) // submits go on under the next leader
	close(stop)
	wg.Wait()
	leader.Start()
	c.WaitConverged(time.Minute)

	perKey := map[string][]string{}
	a := clients[0]
	for token := ""; ; {
		var page struct {
			Jobs []apiJob `json:"jobs"`
			Next string   `json:"next_page_token"`
		}
		a.json("GET", "/v1/jobs?page_size=1000&page_token="+url.QueryEscape(token), acmeToken, "", &page)
		for _, j := range page.Jobs {
			perKey[j.IdempotencyKey] = append(perKey[j.IdempotencyKey], j.JobID)
		}
		if token = page.Next; token == "" {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for key, id := range acked {
		if got := perKey[key]; len(got) != 1 || got[0] != id {
			t.Errorf("key %s acknowledged as job %s has jobs %v", key, id, got)
		}
	}
	if len(perKey) != len(acked) {
		t.Errorf("%d keys have jobs, %d were acknowledged", len(perKey), len(acked))
	}
	t.Logf("%d keyed submits acknowledged across a leader kill (%d after a retry), each exactly one job; answers: %v", len(acked), retried, statuses)
}

// TestOpenAPIDocument: every node serves the OpenAPI document without a
// token; it validates (kin-openapi: Swagger 2 converted to OpenAPI 3), its
// routes are exactly those of proto/barista.http.yaml, and each of them is
// served (without a token, the gRPC server's own 401 answers).
func TestOpenAPIDocument(t *testing.T) {
	c := startWithTokens(t, 1, "")
	a := api{t: t, client: &http.Client{Timeout: 30 * time.Second}, base: "http://" + c.Nodes[0].HTTPAddr}
	r := a.do("GET", "/v1/openapi.json", "", "")
	if r.status != 200 || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/openapi.json: %d %v", r.status, r.header)
	}
	var doc2 openapi2.T
	if err := json.Unmarshal([]byte(r.body), &doc2); err != nil {
		t.Fatal(err)
	}
	doc3, err := openapi2conv.ToV3(&doc2)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc3.Validate(context.Background()); err != nil {
		t.Fatalf("the OpenAPI document does not validate: %v", err)
	}
	// What the generator cannot know: the short query names, the stream,
	// the error shape, the token.
	params := func(path string) string {
		var names []string
		for _, p := range doc2.Paths[path].Get.Parameters {
			names = append(names, p.In+":"+p.Name)
		}
		return strings.Join(names, " ")
	}
	if got := params("/v1/jobs"); got != "query:tenant query:state query:page_size query:page_token query:stale query:include_payload query:newest_first query:oldest_first query:pool" {
		t.Errorf("GET /v1/jobs parameters: %s", got)
	}
	if got := params("/v1/events"); got != "query:tenant query:from query:job_id query:from_oldest query:until_idle" {
		t.Errorf("GET /v1/events parameters: %s", got)
	}
	watch := doc2.Paths["/v1/events"].Get
	if ok := watch.Responses.Value("200").Schema.Ref == "#/definitions/v1Event" && slices.Equal(watch.Produces, []string{"application/x-ndjson"}); !ok {
		t.Errorf("GET /v1/events answers %+v, produces %v", watch.Responses.Value("200").Schema, watch.Produces)
	}
	if ref := doc2.Paths["/v1/jobs/{job_id}"].Get.Responses.Value("default").Schema.Ref; ref != "#/definitions/Error" {
		t.Errorf("the error answer: %s", ref)
	}
	errSchema := doc2.Definitions["Error"].Value
	if code := errSchema.Properties["code"].Value; code == nil || len(code.Enum) != 16 || code.Enum[4] != "NOT_FOUND" || errSchema.Properties["message"] == nil {
		t.Errorf("the error schema: %+v", errSchema)
	}
	if sec := doc2.SecurityDefinitions["bearer"]; sec == nil || sec.Type != "apiKey" || sec.In != "header" || sec.Name != "Authorization" || len(doc2.Security) != 1 {
		t.Errorf("security: %+v %+v", sec, doc2.Security)
	}
	var documented []string
	for path, item := range doc2.Paths {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	sort.Strings(documented)

	raw, err := os.ReadFile("../proto/barista.http.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		HTTP struct {
			Rules []map[string]any `yaml:"rules"`
		} `yaml:"http"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	var routes []string
	var addRoutes func(rule map[string]any)
	addRoutes = func(rule map[string]any) {
		for _, m := range []string{"get", "put", "post", "delete", "patch"} {
			if p, ok := rule[m].(string); ok {
				routes = append(routes, strings.ToUpper(m)+" "+p)
			}
		}
		more, _ := rule["additional_bindings"].([]any)
		for _, b := range more {
			if b, ok := b.(map[string]any); ok {
				addRoutes(b)
			}
		}
	}
	for _, rule := range cfg.HTTP.Rules {
		addRoutes(rule)
	}
	sort.Strings(routes)
	if !slices.Equal(documented, routes) {
		t.Fatalf("documented routes:\n%s\nrouted:\n%s", strings.Join(documented, "\n"), strings.Join(routes, "\n"))
	}
	fill := strings.NewReplacer("{job_id}", "1", "{name}", "acme", "{worker_id}", "w1", "{tenant}", "acme", "{group}", "store-7", "{pool}", "gpu")
	for _, route := range routes {
		method, path, _ := strings.Cut(route, " ")
		body := ""
		if method != "GET" && method != "DELETE" {
			body = "{}"
		}
		a.expect(route+" without a token", a.do(method, fill.Replace(path), "", body), 401, "UNAUTHENTICATED", "missing bearer token (authorization: Bearer TOKEN)")
	}
	t.Logf("%d routes documented, validated and served", len(routes))
}
