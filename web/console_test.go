package web

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// consoleCSP is the policy of every console page: no script at all,
// styles only from the console's own stylesheet.
const consoleCSP = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// consoleNode is gatewayNode with jobs: acme's 1, 3, 5 and beta's 2, 4
// (all queued, sm).
func consoleNode(t *testing.T) (*testNode, *httptest.Server) {
	t.Helper()
	n, ts := gatewayNode(t)
	for i := range 5 {
		tenant := []string{"acme", "beta"}[i%2]
		n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: tenant, Size: pb.Size_SM, EstCostMs: 100, JobType: fmt.Sprintf("type-%d", i+1)}}})
	}
	return n, ts
}

// cdo is gwDo without following redirects.
func cdo(t *testing.T, ts *httptest.Server, method, path, token, body string, hdr ...string) gwResult {
	t.Helper()
	c := *ts.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return gwSend(t, &c, ts, method, path, token, body, hdr...)
}

// signIn logs in with a token and returns the session cookie and the
// CSRF token its pages carry.
func signIn(t *testing.T, ts *httptest.Server, token string) (cookie, csrf string) {
	t.Helper()
	r := cdo(t, ts, "POST", "/login", "", url.Values{"token": {token}}.Encode(), "Content-Type", "application/x-www-form-urlencoded", "Origin", ts.URL)
	if r.status != http.StatusSeeOther {
		t.Fatalf("login: %d %s", r.status, r.body)
	}
	cookie = strings.SplitN(r.header.Get("Set-Cookie"), ";", 2)[0]
	page := cdo(t, ts, "GET", "/jobs", "", "", "Cookie", cookie)
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`).FindStringSubmatch(page.body)
	if page.status != 200 || m == nil {
		t.Fatalf("no CSRF token on /jobs: %d\n%s", page.status, page.body)
	}
	return cookie, m[1]
}

// post sends a console form from the console's own origin.
func post(t *testing.T, ts *httptest.Server, path, cookie string, form url.Values) gwResult {
	t.Helper()
	return cdo(t, ts, "POST", path, "", form.Encode(), "Content-Type", "application/x-www-form-urlencoded", "Cookie", cookie, "Origin", ts.URL)
}

// errorText is the message of a console error page.
func errorText(body string) string {
	m := regexp.MustCompile(`<p class="err" id="error">([^<]*)</p>`).FindStringSubmatch(body)
	if m == nil {
		return "(no error message)"
	}
	return m[1]
}

// jobIDs lists the job IDs of a page's job table, in order.
func jobIDs(body string) string {
	var ids []string
	for _, m := range regexp.MustCompile(`<tr><td><a href="/jobs/(\d+)">`).FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	return strings.Join(ids, " ")
}

// TestConsoleRoles: every console page needs a token; an admin sees
// every tenant, a client token only its own, with 403 for another
// tenant's pages and jobs (whether they exist or not) and for the admin
// pages; every page has the CSP without script.
func TestConsoleRoles(t *testing.T) {
	_, ts := consoleNode(t)
	for _, c := range []struct {
		name, path, token string
		status            int
		want              string // the page's job IDs, or its error message
	}{
		{"admin: every job", "/jobs", gwAdmin, 200, "5 4 3 2 1"},
		{"acme: its own", "/jobs", gwAcme, 200, "5 3 1"},
		{"beta: its own", "/jobs", gwBeta, 200, "4 2"},
		{"acme: beta's jobs", "/jobs?tenant=beta", gwAcme, 403, "a client token of tenant acme may not search another tenant&#39;s jobs"},
		{"acme: its job", "/jobs/3", gwAcme, 200, ""},
		{"acme: beta's job", "/jobs/2", gwAcme, 403, "job 2 is not a job of tenant acme"},
		{"acme: no such job", "/jobs/99", gwAcme, 403, "job 99 is not a job of tenant acme"},
		{"admin: no such job", "/jobs/99", gwAdmin, 404, "NOT_FOUND: job 99 not found"},
		{"admin: beta's job", "/jobs/2", gwAdmin, 200, ""},
		{"acme: by ID, beta's", "/jobs?id=2", gwAcme, 200, ""},
		{"acme: its tenant", "/tenants/acme", gwAcme, 200, ""},
		{"acme: beta's tenant", "/tenants/beta", gwAcme, 403, "a client token of tenant acme may not open another tenant&#39;s page"},
		{"admin: beta's tenant", "/tenants/beta", gwAdmin, 200, ""},
		{"admin: no such tenant", "/tenants/gamma", gwAdmin, 404, "NOT_FOUND: tenant: &#34;gamma&#34; not found"},
		{"acme: workers", "/workers", gwAcme, 403, "the workers page needs an admin token"},
		{"admin: workers", "/workers", gwAdmin, 200, ""},
		{"admin: overview", "/", gwAdmin, 200, ""},
		{"admin: no page", "/nothing", gwAdmin, 404, "no console page at /nothing"},
		{"a bad job ID", "/jobs/x", gwAdmin, 400, "job id: &#34;x&#34; is not a job ID (a positive integer)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := cdo(t, ts, "GET", c.path, c.token, "")
			if r.status != c.status {
				t.Fatalf("GET %s: %d, want %d\n%s", c.path, r.status, c.status, r.body)
			}
			if csp := r.header.Get("Content-Security-Policy"); csp != consoleCSP {
				t.Errorf("CSP %q", csp)
			}
			switch {
			case c.status != 200:
				if got := errorText(r.body); got != c.want {
					t.Errorf("error %q, want %q", got, c.want)
				}
			case c.want != "":
				if got := jobIDs(r.body); got != c.want {
					t.Errorf("jobs %q, want %q", got, c.want)
				}
			}
			if strings.Contains(r.body, "<script") {
				t.Error("a page has a script element")
			}
		})
	}
	// acme by ID: beta's job is no result, not an error.
	if r := cdo(t, ts, "GET", "/jobs?id=2", gwAcme, ""); jobIDs(r.body) != "" || !strings.Contains(r.body, `<p class="note" id="message">no job 2 of tenant acme</p>`) {
		t.Errorf("acme searching beta's job by ID:\n%s", r.body)
	}
	// The overview: a client sees its own tenant only, and no members.
	r := cdo(t, ts, "GET", "/", gwAcme, "")
	if !strings.Contains(r.body, `<a href="/tenants/acme">acme</a>`) || strings.Contains(r.body, "beta") || strings.Contains(r.body, `id="members"`) {
		t.Errorf("acme's overview:\n%s", r.body)
	}
	r = cdo(t, ts, "GET", "/", gwAdmin, "")
	for _, want := range []string{`<a href="/tenants/beta">beta</a>`, `id="members"`, `<td class="l">n1</td>`, `id="share-chart"`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the admin's overview lacks %s", want)
		}
	}
	// Queued sm jobs of class normal: 5 for the admin, 3 for acme.
	for token, want := range map[string]string{gwAdmin: "5", gwAcme: "3"} {
		body := cdo(t, ts, "GET", "/", token, "").body
		if !strings.Contains(body, `<tr><td class="l">normal</td><td>`+want+`</td><td>0</td><td>0</td><td><b>`+want+`</b></td>`) {
			t.Errorf("queued by class and size, want %s normal sm jobs:\n%s", want, body)
		}
	}
	// Without a token: the login page, for every page.
	for _, p := range []string{"/", "/jobs", "/jobs/1", "/tenants/acme", "/workers"} {
		if r := cdo(t, ts, "GET", p, "", ""); r.status != http.StatusSeeOther || r.header.Get("Location") != "/login" {
			t.Errorf("GET %s without a token: %d %q", p, r.status, r.header.Get("Location"))
		}
	}
}

// TestConsoleCSRF: an action needs the session's own CSRF token (none, a
// wrong one or another session's is refused), a same-origin post and the
// right role; with them it is done.
func TestConsoleCSRF(t *testing.T) {
	n, ts := consoleNode(t)
	admin, adminCSRF := signIn(t, ts, gwAdmin)
	acme, acmeCSRF := signIn(t, ts, gwAcme)
	if adminCSRF == acmeCSRF {
		t.Fatal("two sessions have the same CSRF token")
	}
	state := func(id sfq.JobID) string {
		j, _, _ := n.node.FSM.Job(id)
		return j.State.String()
	}
	for _, c := range []struct {
		name, path, cookie string
		form               url.Values
		hdr                []string
		status             int
		want               string
	}{
		{"no CSRF token", "/jobs/1/cancel", admin, url.Values{}, nil, 403, "missing or wrong CSRF token: act from the console&#39;s own pages while signed in"},
		{"a wrong token", "/jobs/1/cancel", admin, url.Values{"csrf": {strings.Repeat("0", 64)}}, nil, 403, "missing or wrong CSRF token: act from the console&#39;s own pages while signed in"},
		{"another session's token", "/jobs/1/cancel", admin, url.Values{"csrf": {acmeCSRF}}, nil, 403, "missing or wrong CSRF token: act from the console&#39;s own pages while signed in"},
		{"from another origin", "/jobs/1/cancel", admin, url.Values{"csrf": {adminCSRF}}, []string{"Origin", "http://evil.example"}, 403, "cross-origin action refused"},
		{"acme cancels beta's job", "/jobs/2/cancel", acme, url.Values{"csrf": {acmeCSRF}}, nil, 403, "job 2 is not a job of tenant acme"},
		{"acme drains a worker", "/workers/w1/drain", acme, url.Values{"csrf": {acmeCSRF}}, nil, 403, "draining a worker needs an admin token"},
		{"admin drains an unknown worker", "/workers/w1/drain", admin, url.Values{"csrf": {adminCSRF}}, nil, 404,
			"NOT_FOUND: worker_id: no worker &#34;w1&#34; is connected or known (create=true drains it before it first connects)"},
		{"an unknown action", "/workers/w1/explode", admin, url.Values{"csrf": {adminCSRF}}, nil, 404, "no worker action &#34;explode&#34; (drain or undrain)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			hdr := append([]string{"Content-Type", "application/x-www-form-urlencoded", "Cookie", c.cookie, "Origin", ts.URL}, c.hdr...)
			r := cdo(t, ts, "POST", c.path, "", c.form.Encode(), hdr...)
			if r.status != c.status || errorText(r.body) != c.want {
				t.Errorf("POST %s: %d %q, want %d %q", c.path, r.status, errorText(r.body), c.status, c.want)
			}
		})
	}
	if s1, s2 := state(1), state(2); s1 != "queued" || s2 != "queued" {
		t.Fatalf("after the refused posts: jobs 1 and 2 are %s and %s", s1, s2)
	}
	// A bearer header has no session: no console action.
	r := cdo(t, ts, "POST", "/jobs/1/cancel", gwAdmin, "", "Origin", ts.URL)
	if r.status != 403 || state(1) != "queued" {
		t.Errorf("a bearer post: %d %s", r.status, state(1))
	}
	// With the token: done, and the job page says so.
	if r := post(t, ts, "/jobs/1/cancel", acme, url.Values{"csrf": {acmeCSRF}}); r.status != http.StatusSeeOther || r.header.Get("Location") != "/jobs/1" {
		t.Fatalf("acme cancels its job: %d %s", r.status, r.body)
	}
	if r := post(t, ts, "/jobs/2/cancel", admin, url.Values{"csrf": {adminCSRF}}); r.status != http.StatusSeeOther {
		t.Fatalf("the admin cancels beta's job: %d %s", r.status, r.body)
	}
	if s1, s2 := state(1), state(2); s1 != "cancelled" || s2 != "cancelled" {
		t.Errorf("jobs 1 and 2: %s and %s, want cancelled", s1, s2)
	}
	page := cdo(t, ts, "GET", "/jobs/1", "", "", "Cookie", acme).body
	if !strings.Contains(page, `<span class="st cancelled" id="job-state">cancelled</span>`) || strings.Contains(page, `id="cancel"`) {
		t.Errorf("job 1's page after the cancel:\n%s", page)
	}
	// Logging out is an action too.
	if r := post(t, ts, "/logout", acme, url.Values{}); r.status != 403 {
		t.Errorf("logout without the CSRF token: %d", r.status)
	}
	if r := post(t, ts, "/logout", acme, url.Values{"csrf": {acmeCSRF}}); r.status != http.StatusSeeOther {
		t.Errorf("logout: %d", r.status)
	}
	if r := cdo(t, ts, "GET", "/jobs", "", "", "Cookie", acme); r.status != http.StatusSeeOther {
		t.Errorf("after logout: %d", r.status)
	}
}

// TestConsoleOpenCSRF: an open development server (no tokens) serves
// without a login, and still takes no action without the CSRF token of
// the browser's own cookie.
func TestConsoleOpenCSRF(t *testing.T) {
	n := startTestNode(t, nil, nil)
	job := n.submit()
	ts := httptest.NewServer(n.web)
	t.Cleanup(ts.Close)
	r := cdo(t, ts, "GET", fmt.Sprintf("/jobs/%d", job), "", "")
	cookie := strings.SplitN(r.header.Get("Set-Cookie"), ";", 2)[0]
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`).FindStringSubmatch(r.body)
	if r.status != 200 || !strings.HasPrefix(cookie, "barista_csrf=") || m == nil || strings.Contains(r.body, "sign out") {
		t.Fatalf("open server's job page: %d %q\n%s", r.status, cookie, r.body)
	}
	path := fmt.Sprintf("/jobs/%d/cancel", job)
	if r := post(t, ts, path, cookie, url.Values{}); r.status != 403 {
		t.Errorf("without the token: %d", r.status)
	}
	if r := cdo(t, ts, "POST", path, "", url.Values{"csrf": {m[1]}}.Encode(), "Content-Type", "application/x-www-form-urlencoded", "Origin", ts.URL); r.status != 403 {
		t.Errorf("the token without its cookie: %d", r.status)
	}
	if r := post(t, ts, path, cookie, url.Values{"csrf": {m[1]}}); r.status != http.StatusSeeOther {
		t.Errorf("with both: %d %s", r.status, r.body)
	}
	if j, _, _ := n.node.FSM.Job(job); j.State != sfq.Cancelled {
		t.Errorf("job %d is %s", job, j.State)
	}
}

// TestConsoleEscaping: a job's type, payload, stderr and stdout are
// written by the tenant: the pages show them as text.
func TestConsoleEscaping(t *testing.T) {
	n, ts := gatewayNode(t)
	const (
		typ    = `<img src=x onerror=alert(1)>`
		stderr = "<script>alert(2)</script>\n"
		stdout = `"><svg onload=alert(3)>`
		load   = `{"argv":["</pre><script>alert(4)</script>"]}`
	)
	res := n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 100, JobType: typ, Payload: []byte(load), MaxAttempts: 1}}})
	job := uint64(res[0].Job)
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: "w1", Size: pb.Size_SM, Credit: 1}}})
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: job, Attempt: 1, WorkerId: "w1", Outcome: pb.Outcome_FAILED, CpuMs: 5, ExitCode: 3,
		StderrTail: stderr, StdoutTail: stdout}}})
	page := cdo(t, ts, "GET", fmt.Sprintf("/jobs/%d", job), gwAdmin, "")
	if page.status != 200 {
		t.Fatalf("job page: %d\n%s", page.status, page.body)
	}
	for _, want := range []string{
		`<td class="l" id="job-type">&lt;img src=x onerror=alert(1)&gt;</td>`,
		`<pre id="stderr">&lt;script&gt;alert(2)&lt;/script&gt;` + "\n</pre>",
		`<pre id="stdout">&#34;&gt;&lt;svg onload=alert(3)&gt;</pre>`,
		`<pre id="payload">{&#34;argv&#34;:[&#34;&lt;/pre&gt;&lt;script&gt;alert(4)&lt;/script&gt;&#34;]}</pre>`,
		`<td class="l" id="exit-code">3</td>`,
		`<span class="st failed" id="job-state">failed</span>`,
	} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the job page lacks %s", want)
		}
	}
	list := cdo(t, ts, "GET", "/jobs?type=onerror", gwAdmin, "")
	if !strings.Contains(list.body, `<td class="l type">&lt;img src=x onerror=alert(1)&gt;</td>`) || jobIDs(list.body) != fmt.Sprint(job) {
		t.Errorf("the search by type:\n%s", list.body)
	}
	for _, body := range []string{page.body, list.body} {
		for _, bad := range []string{"<script", "<img", "<svg onload"} {
			if strings.Contains(body, bad) {
				t.Errorf("a page has %q unescaped", bad)
			}
		}
	}
	// Events: queued, assigned, failed (exit 3).
	evs := regexp.MustCompile(`<span class="ev (\w+)">`).FindAllStringSubmatch(page.body, -1)
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e[1])
	}
	if got := strings.Join(kinds, " "); got != "queued assigned failed" {
		t.Errorf("events %q", got)
	}
}

// TestConsolePaging: a search pages from the newest job down; "next page" goes on
// after the last job shown, with the type filter too; bad parameters are
// refused naming the field.
func TestConsolePaging(t *testing.T) {
	n, ts := gatewayNode(t)
	for i := 1; i <= 9; i++ {
		typ := []string{"render", "encode", "upload"}[i%3]
		group := []string{"a", ""}[i%2]
		n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 100, JobType: typ, Group: group}}})
	}
	// 1 encode, 2 upload, 3 render, 4 encode, ...; the even ones in group
	// a, the odd ones in the unnamed group.
	follow := func(path string) (ids []string) {
		for path != "" {
			r := cdo(t, ts, "GET", path, gwAdmin, "")
			if r.status != 200 {
				t.Fatalf("GET %s: %d\n%s", path, r.status, r.body)
			}
			ids = append(ids, jobIDs(r.body))
			path = ""
			if m := regexp.MustCompile(`<a href="(/jobs\?[^"]*)" id="next">`).FindStringSubmatch(r.body); m != nil {
				path = strings.ReplaceAll(m[1], "&amp;", "&")
			}
		}
		return ids
	}
	// Pages, separated by "|". A type search that stops at its limit
	// links to the rest, which may hold no match.
	for _, c := range []struct{ path, want string }{
		{"/jobs?tenant=acme&limit=4", "9 8 7 6 | 5 4 3 2 | 1"},
		{"/jobs?limit=3&type=enc", "7 4 1"},
		{"/jobs?limit=2&type=enc", "7 4 | 1"},
		{"/jobs?type=load&limit=1", "8 | 5 | 2 | "},
		{"/jobs?type=none", ""},
		{"/jobs?after=d5&limit=10", "5 4 3 2 1"},
		{"/jobs?state=queued&tenant=acme", "9 8 7 6 5 4 3 2 1"},
		{"/jobs?state=failed", ""},
		{"/jobs?group=a", "8 6 4 2"},
		{"/jobs?group=-&limit=3", "9 7 5 | 3 1"},
		{"/jobs?group=a&type=enc", "4"},
		{"/jobs?group=b", ""},
	} {
		if got := strings.Join(follow(c.path), " | "); got != c.want {
			t.Errorf("%s: pages %q, want %q", c.path, got, c.want)
		}
	}
	for _, c := range []struct{ path, want string }{
		{"/jobs?state=lost", "state: &#34;lost&#34; (want scheduled, queued, assigned, running, completed, failed, cancelled, timed_out or expired)"},
		{"/jobs?id=-1", "id: &#34;-1&#34; is not a job ID (a positive integer)"},
		{"/jobs?limit=501", "limit: &#34;501&#34; (want 1..500)"},
		{"/jobs?after=q1", "after: &#34;q1&#34; is not a page this console issued"},
		{"/jobs?tenant=a%20b", "tenant &#34;a b&#34; has a space at byte 1"},
		{"/jobs?group=a/b", "group: group name &#34;a/b&#34; has &#39;/&#39; at byte 1 (allowed: A-Z a-z 0-9 . _ : @ -)"},
	} {
		r := cdo(t, ts, "GET", c.path, gwAdmin, "")
		if r.status != 400 || errorText(r.body) != c.want {
			t.Errorf("%s: %d %q, want 400 %q", c.path, r.status, errorText(r.body), c.want)
		}
	}
	// The tenant page lists its groups by name, each linked to its jobs.
	r := cdo(t, ts, "GET", "/tenants/acme", gwAdmin, "")
	for _, row := range []string{
		`<tr><td class="l"><a href="/jobs?tenant=acme&amp;group=-">(unnamed)</a></td><td>5</td><td>0</td><td>inherit</td><td>none</td><td>none</td><td class="l">-</td><td class="l">-</td></tr>`,
		`<tr><td class="l"><a href="/jobs?tenant=acme&amp;group=a">a</a></td><td>4</td><td>0</td><td>inherit</td><td>none</td><td>none</td><td class="l">-</td><td class="l">-</td></tr>`,
		`Groups by name. A group without jobs or settings is forgotten.`,
	} {
		if !strings.Contains(r.body, row) {
			t.Errorf("tenant page: no %s in\n%s", row, r.body)
		}
	}
}

// TestShareChart: the chart's polylines, exactly, from three samples.
func TestShareChart(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var h shareHistory
	h.add(shareSample{at: now.Add(-2 * time.Hour), window: time.Minute}) // forgotten by the next one
	for i, v := range []float32{0.5, 0.25, 0.75} {
		h.add(shareSample{at: now.Add(time.Duration(i-2) * time.Minute), dispatches: uint64(60 * (i + 1)), window: time.Minute,
			tenants: []tenantSample{{name: "a", share: v, entitled: 0.5, dispatches: uint32(30 * (i + 1))}, {name: "b", share: 1 - v, entitled: 0.5}}})
	}
	samples := h.since(now, historySpan)
	if len(samples) != 3 {
		t.Fatalf("%d samples kept, want 3", len(samples))
	}
	if got := fmt.Sprint(chartTenants(samples, []string{"b", "a", "c"})); got != "[b a]" {
		t.Errorf("tenants %s", got)
	}
	c := shareChart(samples, []string{"a"}, now)
	// 3 minutes span (2 min of samples + 1), plot 706 × 194 from (44, 10).
	want := []chartSeries{
		{Name: "a entitled", Color: "#2563eb", Points: "279,107 515,107 750,107", Dashed: true},
		{Name: "a", Color: "#2563eb", Points: "279,107 515,155 750,58"},
	}
	if fmt.Sprint(c.Series) != fmt.Sprint(want) {
		t.Errorf("series %v\nwant %v", c.Series, want)
	}
	var ticks []string
	for _, x := range c.XTicks {
		ticks = append(ticks, fmt.Sprintf("%s@%d", x.Label, x.X))
	}
	if got := strings.Join(ticks, " "); got != "now@750 -1m@515 -2m@279 -3m@44" {
		t.Errorf("x ticks %s", got)
	}
	r := rateChart(samples, "", now)
	if len(r.Series) != 1 || r.Series[0].Points != "279,101 515,78 750,56" {
		t.Errorf("rate %v (ticks %v)", r.Series, r.YTicks)
	}
	// Too few samples: an empty chart that says why.
	if c := shareChart(samples[:1], []string{"a"}, now); c.Empty == "" || len(c.Series) != 0 {
		t.Errorf("one sample: %+v", c)
	}
	// A sample keeps at most historyTenants tenants, the largest.
	var many []tenantSample
	for i := range historyTenants + 10 {
		many = append(many, tenantSample{name: fmt.Sprint(i), share: float32(i) / 1000})
	}
	h.add(shareSample{at: now, tenants: many})
	last := h.since(now, time.Minute)
	if k := last[len(last)-1].tenants; len(k) != historyTenants || k[0].name != fmt.Sprint(historyTenants+9) || k[len(k)-1].name != "10" {
		t.Errorf("bounded sample: %d tenants, first %s last %s", len(k), k[0].name, k[len(k)-1].name)
	}
}

// TestJobEvents: a job's events, found by bisection among the others'.
func TestJobEvents(t *testing.T) {
	n, _ := gatewayNode(t)
	var ids []sfq.JobID
	for i := range 40 {
		res := n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: []string{"acme", "beta"}[i%2], Size: pb.Size_SM, EstCostMs: 100}}})
		ids = append(ids, res[0].Job)
	}
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Tenant: "beta", Job: uint64(ids[21])}}})
	for _, c := range []struct {
		job  sfq.JobID
		want string
	}{
		{ids[0], "queued"}, {ids[21], "queued cancelled"}, {ids[39], "queued"},
	} {
		j, _, _ := n.node.FSM.Job(c.job)
		evs, more, pruned := jobEvents(n.node.FSM, c.job, j.SubmittedAt, j.EndedAt)
		var kinds []string
		for _, ev := range evs {
			if ev.Job != c.job {
				t.Errorf("job %d: an event of job %d", c.job, ev.Job)
			}
			kinds = append(kinds, ev.Kind.String())
		}
		if got := strings.Join(kinds, " "); got != c.want || more || pruned {
			t.Errorf("job %d: events %q (more %v, pruned %v), want %q", c.job, got, more, pruned, c.want)
		}
	}
}

// TestCookieSecure: the session cookie is Secure over TLS and on
// loopback (browsers keep Secure cookies there), and only over plain
// HTTP to another address (--insecure-http) is it not.
func TestCookieSecure(t *testing.T) {
	for _, c := range []struct {
		host string
		tls  bool
		want bool
	}{
		{"127.0.0.1:7480", false, true}, {"localhost:7480", false, true}, {"[::1]:7480", false, true}, {"127.0.0.2", false, true},
		{"10.0.0.5:7480", false, false}, {"console.example:7480", false, false}, {"10.0.0.5:7480", true, true}, {"console.example", true, true},
	} {
		scheme := "http://"
		if c.tls {
			scheme = "https://" // the request has a TLS connection state
		}
		r := httptest.NewRequest("GET", scheme+c.host+"/", nil)
		if got := cookieSecure(r); got != c.want {
			t.Errorf("%s (TLS %v): Secure %v, want %v", c.host, c.tls, got, c.want)
		}
	}
	// The login sets it so.
	_, ts := gatewayNode(t)
	r := cdo(t, ts, "POST", "/login", "", url.Values{"token": {gwAcme}}.Encode(), "Content-Type", "application/x-www-form-urlencoded", "Origin", ts.URL)
	if c := r.header.Get("Set-Cookie"); !strings.Contains(c, "; HttpOnly; Secure; SameSite=Strict") {
		t.Errorf("session cookie %q", c)
	}
}

// TestConsoleLevers: the tenant page pauses and resumes its tenant and a
// group (the tenant's own token cannot lift the admin's pause); a job
// page redrives a dead letter and runs a scheduled job now, each a POST
// with the session's CSRF token, refused for another tenant's job.
func TestConsoleLevers(t *testing.T) {
	n, ts := consoleNode(t)
	admin, adminCSRF := signIn(t, ts, gwAdmin)
	acme, acmeCSRF := signIn(t, ts, gwAcme)
	// Job 6 of acme is delayed; job 7 of acme in group g.
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 100, DelayMs: 3_600_000}}})
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 100, Group: "g"}}})
	job := func(id sfq.JobID) sfq.Job { j, _, _ := n.node.FSM.Job(id); return j }
	paused := func() (tenant, group string) {
		n.node.FSM.Read(func(s *sfq.Scheduler) {
			t, _ := s.Tenant("acme")
			g, _ := s.Group("acme", "g")
			tenant, group = t.PausedBy().String(), g.PausedBy().String()
		})
		return
	}
	page := func(path, cookie string) string { return cdo(t, ts, "GET", path, "", "", "Cookie", cookie).body }

	// The tenant page offers the pause; the admin pauses acme.
	if p := page("/tenants/acme", admin); !strings.Contains(p, `<form method="post" action="/tenants/acme/pause" class="inline" id="pause-form">`) ||
		!strings.Contains(p, `<input type="hidden" name="group" value="g"><button type="submit">pause</button>`) {
		t.Fatalf("tenant page without the pause forms:\n%s", p)
	}
	if r := post(t, ts, "/tenants/acme/pause", admin, url.Values{"csrf": {adminCSRF}}); r.status != http.StatusSeeOther || r.header.Get("Location") != "/tenants/acme" {
		t.Fatalf("admin pauses acme: %d %s", r.status, r.body)
	}
	if tp, _ := paused(); tp != "admin" {
		t.Fatalf("acme paused by %q", tp)
	}
	if p := page("/tenants/acme", acme); !strings.Contains(p, "dispatch: <b>paused</b> by admin") || !strings.Contains(p, `action="/tenants/acme/resume"`) {
		t.Errorf("acme's tenant page after the pause:\n%s", p)
	}
	// acme cannot lift the admin's pause, nor pause beta; it pauses its group.
	if r := post(t, ts, "/tenants/acme/resume", acme, url.Values{"csrf": {acmeCSRF}}); r.status != http.StatusForbidden {
		t.Errorf("acme lifts the admin's pause: %d %s", r.status, errorText(r.body))
	}
	if r := post(t, ts, "/tenants/beta/pause", acme, url.Values{"csrf": {acmeCSRF}}); r.status != http.StatusForbidden ||
		errorText(r.body) != "a client token of tenant acme may not pause another tenant" {
		t.Errorf("acme pauses beta: %d %q", r.status, errorText(r.body))
	}
	if r := post(t, ts, "/tenants/acme/pause", acme, url.Values{"csrf": {acmeCSRF}, "group": {"g"}}); r.status != http.StatusSeeOther {
		t.Fatalf("acme pauses its group: %d %s", r.status, r.body)
	}
	if r := post(t, ts, "/tenants/acme/resume", admin, url.Values{"csrf": {adminCSRF}}); r.status != http.StatusSeeOther {
		t.Fatalf("admin resumes acme: %d %s", r.status, r.body)
	}
	if tp, gp := paused(); tp != "no" || gp != "tenant" {
		t.Errorf("after: acme paused by %q, group g by %q", tp, gp)
	}
	if r := post(t, ts, "/tenants/acme/explode", admin, url.Values{"csrf": {adminCSRF}}); r.status != http.StatusNotFound {
		t.Errorf("an unknown action: %d", r.status)
	}

	// Run a scheduled job now.
	if p := page("/jobs/6", acme); !strings.Contains(p, `action="/jobs/6/run-now" id="run-now"`) || strings.Contains(p, `id="redrive"`) {
		t.Fatalf("job 6's page:\n%s", p)
	}
	if r := post(t, ts, "/jobs/6/run-now", admin, url.Values{"csrf": {adminCSRF}}); r.status != http.StatusSeeOther || job(6).State != sfq.Queued {
		t.Fatalf("the admin runs job 6 now: %d %s, %s", r.status, errorText(r.body), job(6).State)
	}
	// Redrive a cancelled job; not another tenant's.
	if r := post(t, ts, "/jobs/1/cancel", acme, url.Values{"csrf": {acmeCSRF}}); r.status != http.StatusSeeOther {
		t.Fatalf("cancel job 1: %d", r.status)
	}
	if p := page("/jobs/1", acme); !strings.Contains(p, `action="/jobs/1/redrive" id="redrive"`) {
		t.Fatalf("job 1's page has no redrive:\n%s", p)
	}
	if r := post(t, ts, "/jobs/2/redrive", acme, url.Values{"csrf": {acmeCSRF}}); r.status != http.StatusForbidden {
		t.Errorf("acme redrives beta's job: %d %q", r.status, errorText(r.body))
	}
	if r := post(t, ts, "/jobs/1/redrive", acme, url.Values{"csrf": {acmeCSRF}}); r.status != http.StatusSeeOther || job(1).State != sfq.Queued {
		t.Fatalf("acme redrives job 1: %d %s, %s", r.status, errorText(r.body), job(1).State)
	}
	if r := post(t, ts, "/jobs/1/redrive", admin, url.Values{"csrf": {adminCSRF}}); r.status != http.StatusPreconditionFailed ||
		!strings.HasPrefix(errorText(r.body), "FAILED_PRECONDITION: job 1 was not redriven: ") {
		t.Errorf("a second redrive: %d %q", r.status, errorText(r.body))
	}
}

// TestConsoleRunDetails: the job page says where the last run's CPU was
// measured and that the memory limit killed it; its event says
// oom_killed.
func TestConsoleRunDetails(t *testing.T) {
	n, ts := gatewayNode(t)
	res := n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 100, MaxAttempts: 1}}})
	job := uint64(res[0].Job)
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: "w1", Size: pb.Size_SM, Credit: 1}}})
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: job, Attempt: 1, WorkerId: "w1", Outcome: pb.Outcome_FAILED, CpuMs: 5, ExitCode: -1,
		CpuSource: pb.CpuSource_CPU_SOURCE_CGROUP, Failure: pb.RunFailure_OOM_KILLED}}})
	page := cdo(t, ts, "GET", fmt.Sprintf("/jobs/%d", job), gwAdmin, "")
	if page.status != 200 {
		t.Fatalf("job page: %d\n%s", page.status, page.body)
	}
	for _, want := range []string{
		` (from cgroup)</td>`,
		`<td class="l" colspan="3" id="job-failure">oom_killed: the kernel killed the last run for the memory limit of its size</td>`,
		`<td class="l">oom_killed</td></tr>`,
	} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the job page lacks %s", want)
		}
	}
	api := cdo(t, ts, "GET", fmt.Sprintf("/v1/jobs/%d?tenant=acme", job), gwAdmin, "")
	if api.status != 200 || !strings.Contains(api.body, `"cpu_source":"cgroup"`) || !strings.Contains(api.body, `"failure":"oom_killed"`) {
		t.Errorf("GET /v1/jobs/%d: %d %s", job, api.status, api.body)
	}
}
