package test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/test/cluster"
)

// browser starts headless Chromium for a test: a context whose tabs
// share it (each chromedp.NewContext of it is a tab), and a counter of
// the JavaScript dialogs any page of the first tab opened (each is
// dismissed). Skipped without Chromium.
func browser(t *testing.T) (context.Context, *atomic.Int32) {
	t.Helper()
	path := chromium()
	if path == "" {
		t.Skip("Chromium is not installed (apt-get install chromium); .ci/run installs it")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900), chromedp.Flag("hide-scrollbars", true))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	var dialogs atomic.Int32
	events := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range events {
			if err != nil {
				return
			}
			dialogs.Add(1)
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	return ctx, &dialogs
}

// step runs browser actions with a timeout, failing the test on an error.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// act runs action with a timeout and returns its value, failing the
// test on an error (what names the action).
func act[T any](t *testing.T, ctx context.Context, timeout time.Duration, what string, action chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, action)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// eval evaluates a JavaScript expression in the page (awaiting a promise).
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	return act(t, ctx, 30*time.Second, "evaluating "+expr, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
}

// text reads an element's text.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return act(t, ctx, 30*time.Second, "text of "+sel, chromedp.TextContent(chromedp.CSS(sel)))
}

// open navigates and returns the HTTP status of the page.
func open(t *testing.T, ctx context.Context, url string) int64 {
	t.Helper()
	return act(t, ctx, 60*time.Second, "opening "+url, chromedp.NavigateResponse(url)).Status
}

// signIn fills the login form with token.
func signIn(t *testing.T, ctx context.Context, base, token string) {
	t.Helper()
	step(t, ctx, "sign in", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`input[name=token]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=token]`), token), chromedp.Submit(chromedp.CSS(`input[name=token]`)),
		chromedp.WaitVisible(chromedp.ID("tenants")))
}

// forge posts a form made up in the page (as a forged request would be,
// with the page's cookies: the CSP lets no page script fetch) and returns
// the error page it gets: its heading and message.
func forge(t *testing.T, ctx context.Context, path, body string) string {
	t.Helper()
	eval[bool](t, ctx, fmt.Sprintf(`(() => {
		window.__forging = true;
		const f = document.createElement("form");
		f.method = "post";
		f.action = %q;
		for (const [k, v] of new URLSearchParams(%q)) {
			const i = document.createElement("input");
			i.type = "hidden"; i.name = k; i.value = v;
			f.appendChild(i);
		}
		document.body.appendChild(f);
		f.submit();
		return true;
	})()`, path, body))
	return arrive(t, ctx, "__forging", "the post of "+path, "false")
}

// press clicks a button that posts a form and waits for the page the
// post answers with (a button's page is still showing while the post is
// in flight; navigating away then would cancel it): the page's mark is
// gone, and ready (a JavaScript condition) holds on the new page. It
// returns the new page's error, if it is one.
func press(t *testing.T, ctx context.Context, what, button, ready string) string {
	t.Helper()
	eval[bool](t, ctx, `(() => { window.__pressing = true; return true; })()`)
	step(t, ctx, what, chromedp.Click(chromedp.CSS(button)))
	return arrive(t, ctx, "__pressing", what, ready)
}

// arrive waits until the page no longer has the window mark set before a
// post (a new page arrived) and the condition ready holds on it or it is
// an error page; it returns the error page's heading and text, if any.
func arrive(t *testing.T, ctx context.Context, mark, what, ready string) string {
	t.Helper()
	cond := fmt.Sprintf(`window.%s === undefined && document.readyState === "complete" && (%s || !!document.getElementById("error"))`, mark, ready)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
		arrived, err := chromedp.Run(ectx, chromedp.Evaluate[bool](cond))
		cancel()
		if err == nil && arrived {
			if eval[bool](t, ctx, `!!document.getElementById("error")`) {
				return text(t, ctx, "h1") + ": " + text(t, ctx, "#error")
			}
			return ""
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer to %s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestConsoleInChromium drives the web console of a follower (which
// reads and acts through the leader) in headless Chromium, with a real
// worker running real commands: an admin signs in, finds a failed job by
// search, reads its events and stderr, cancels a queued job; a forged
// post without the CSRF token is refused; a job whose type and stderr
// are markup shows them as text and runs no script, and so does a
// schedule's row whose job's type is markup, run now from the tenant
// page and listed as its recent fire; a client token sees
// only its tenant and gets 403 for another tenant's job and for admin
// actions. With -update-screenshot it rewrites the screenshots of every
// page under docs/.
func TestConsoleInChromium(t *testing.T) {
	ctx, dialogs := browser(t)
	c := startWithTokens(t, 3, "")
	leader := c.WaitLeader(30 * time.Second)
	follower := c.Followers(leader)[0]
	base := "http://" + follower.HTTPAddr
	admin, acme := adminAndAcme(t, leader.GRPCAddr)
	beta := pb.NewClientClient(cluster.Dial(t, leader.GRPCAddr, betaToken, nil))
	cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, name := range []string{"acme", "beta"} {
		if _, err := admin.UpsertTenant(cctx, &pb.UpsertTenantRequest{Name: name, Tier: pb.Tier_GOLD.Enum()}); err != nil {
			t.Fatal(err)
		}
	}
	w := c.AddWorker("w1", "sm")
	w.Token = workerToken
	w.Start("")
	submit := func(cl pb.ClientClient, typ string, size pb.Size, argv ...string) uint64 {
		t.Helper()
		r, err := cl.Submit(cctx, &pb.SubmitRequest{JobType: typ, Size: size, EstCostMs: 100, MaxAttempts: 1, Payload: payload(t, argv...)})
		if err != nil {
			t.Fatal(err)
		}
		return r.JobId
	}
	const (
		xssType   = `<img src=x onerror="window.__pwned=1;alert(1)">`
		xssStderr = `<script>window.__pwned=2;alert(2)</script>`
	)
	done := submit(acme, "thumbnail", pb.Size_SM, "sh", "-c", "echo resized 12 images")
	// The report fails on its first run, and succeeds once redriven.
	marker := filepath.Join(t.TempDir(), "disk-freed")
	failed := submit(acme, "nightly-report", pb.Size_SM, "sh", "-c", "if [ -e "+marker+" ]; then echo 'report written'; exit 0; fi; touch "+marker+
		"; echo 'loading 3 tables'; echo 'report: disk full writing /var/tmp/report.csv' >&2; exit 3")
	xss := submit(acme, xssType, pb.Size_SM, "sh", "-c", "echo '"+xssStderr+"' >&2; exit 1")
	queued := submit(acme, "render-4k", pb.Size_LG, "true") // no lg worker: it waits
	betaJob := submit(beta, "invoice", pb.Size_LG, "true")
	for _, id := range []uint64{done, failed, xss} {
		waitJob(t, acme, id, 90*time.Second, "its end", func(j *pb.Job) bool { return j.EndedAtMs != 0 })
	}
	c.WaitConverged(30 * time.Second)

	// The admin signs in on the follower.
	signIn(t, ctx, base, adminToken)
	if got := text(t, ctx, "#tenants"); !strings.Contains(got, "acme") || !strings.Contains(got, "beta") {
		t.Errorf("the admin's overview lacks a tenant: %q", got)
	}
	if got := text(t, ctx, "#members"); !strings.Contains(got, "leader") || !strings.Contains(got, leader.ID) {
		t.Errorf("members: %q", got)
	}
	if *updateScreenshot {
		// Let the follower take a few samples, for a chart in the shot.
		waitFor(t, 90*time.Second, "a share chart", func() (bool, string) {
			open(t, ctx, base+"/")
			n := eval[int](t, ctx, `document.querySelectorAll("#share-chart polyline").length`)
			return n > 0, fmt.Sprint(n, " lines")
		})
		shot(t, ctx, "web-ui-overview-admin.png")
	}

	// Find the failed job by search and open it.
	step(t, ctx, "search failed jobs", chromedp.Navigate(base+"/jobs"), chromedp.WaitVisible(chromedp.ID("search")),
		chromedp.SetValue(chromedp.CSS(`select[name=state]`), "failed"), chromedp.SendKeys(chromedp.CSS(`input[name=type]`), "nightly"),
		chromedp.Submit(chromedp.CSS(`input[name=type]`)), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`a[href="/jobs/%d"]`, failed))))
	// The unfiltered page may list the job too: wait for the search's page.
	waitFor(t, 10*time.Second, "the search's page", func() (bool, string) {
		loc, err := chromedp.Run(ctx, chromedp.Evaluate[string]("location.search"))
		if err != nil { // the page is being replaced
			return false, err.Error()
		}
		return loc == "?tenant=&state=failed&type=nightly&group=&pool=&id=", "query " + loc
	})
	step(t, ctx, "the search's results", chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`a[href="/jobs/%d"]`, failed))))
	if n := eval[int](t, ctx, `document.querySelectorAll("table.jobs a[href^='/jobs/']").length`); n != 1 {
		t.Errorf("%d jobs found, want 1", n)
	}
	shot(t, ctx, "web-ui-jobs.png")
	step(t, ctx, "open the failed job", chromedp.Click(chromedp.CSS(fmt.Sprintf(`a[href="/jobs/%d"]`, failed))), chromedp.WaitVisible(chromedp.ID("events")))
	if got := text(t, ctx, "#job-state"); got != "failed" {
		t.Errorf("state %q", got)
	}
	if got := text(t, ctx, "#exit-code"); got != "3" {
		t.Errorf("exit code %q", got)
	}
	if got := text(t, ctx, "#stderr"); got != "report: disk full writing /var/tmp/report.csv\n" {
		t.Errorf("stderr tail %q", got)
	}
	if got := text(t, ctx, "#stdout"); got != "loading 3 tables\n" {
		t.Errorf("stdout tail %q", got)
	}
	if got := eval[string](t, ctx, `[...document.querySelectorAll("#events span.ev")].map(e => e.textContent).join(" ")`); got != "queued assigned started failed" {
		t.Errorf("events %q", got)
	}
	if got := text(t, ctx, "#explain"); !strings.HasPrefix(got, "failed ") {
		t.Errorf("explain %q", got)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll("#cancel").length`); n != 0 {
		t.Error("a failed job has a cancel button")
	}
	shot(t, ctx, "web-ui-job.png")

	// Redrive it: it runs again, as attempt 2, and completes.
	if n := eval[int](t, ctx, `document.querySelectorAll("#redrive button").length`); n != 1 {
		t.Fatalf("the failed job's page has %d redrive buttons:\n%s", n, eval[string](t, ctx, `document.body.innerHTML`))
	}
	if got := press(t, ctx, "redrive the failed job", `#redrive button`, `!!document.getElementById("events")`); got != "" {
		t.Fatalf("redrive: %s", got)
	}
	waitFor(t, 90*time.Second, "the redriven job to complete", func() (bool, string) {
		if err := chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", base, failed)), chromedp.WaitVisible(chromedp.ID("job-state"))); err != nil {
			return false, err.Error() // the page is being replaced
		}
		got, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.ID("job-state")))
		if err != nil {
			return false, err.Error()
		}
		// The job and its events show the end together: the page reads
		// the events once the serving node has applied what the leader
		// had when it read the job.
		evs := eval[string](t, ctx, `[...document.querySelectorAll("#events span.ev")].map(e => e.textContent).join(" ")`)
		return got == "completed" && strings.HasSuffix(evs, " completed"), got + ": " + evs
	})
	if got := eval[string](t, ctx, `[...document.querySelectorAll("#events span.ev")].map(e => e.textContent).join(" ")`); got != "queued assigned started failed redriven queued assigned started completed" {
		t.Errorf("events after the redrive %q", got)
	}
	if got := text(t, ctx, "#stdout"); got != "report written\n" {
		t.Errorf("stdout tail after the redrive %q", got)
	}

	// Pause acme from its page, then resume it.
	step(t, ctx, "open acme", chromedp.Navigate(base+"/tenants/acme"), chromedp.WaitVisible(chromedp.ID("pause-form")))
	if got := press(t, ctx, "pause acme", `#pause-form button`, `!!document.getElementById("pause-form")`); got != "" {
		t.Fatalf("pause: %s", got)
	}
	// (The follower shows its own state: it may apply the pause a moment
	// after the leader answered.)
	pauseShows := func(want string) {
		t.Helper()
		waitFor(t, 30*time.Second, want, func() (bool, string) {
			if err := chromedp.Do(ctx, chromedp.Navigate(base+"/tenants/acme"), chromedp.WaitVisible(chromedp.ID("pause-form"))); err != nil {
				return false, err.Error()
			}
			got, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.ID("pause")))
			if err != nil {
				return false, err.Error()
			}
			return strings.HasPrefix(got, want), got
		})
	}
	pauseShows("dispatch: paused by admin")
	if got := press(t, ctx, "resume acme", `#pause-form button`, `!!document.getElementById("pause-form")`); got != "" {
		t.Fatalf("resume: %s", got)
	}
	pauseShows("dispatch: not paused")

	// A forged post without the CSRF token is refused; so is one from
	// a page of another origin (same site: the cookie goes with it).
	queuedPath := fmt.Sprintf("/jobs/%d/cancel", queued)
	step(t, ctx, "open the queued job", chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", base, queued)), chromedp.WaitVisible(chromedp.ID("cancel")))
	const noCSRF = "403 Forbidden: missing or wrong CSRF token: act from the console's own pages while signed in"
	if got := forge(t, ctx, queuedPath, ""); got != noCSRF {
		t.Errorf("a post without the CSRF token: %q", got)
	}
	if got := forge(t, ctx, queuedPath, "csrf=0000"); got != noCSRF {
		t.Errorf("a post with a wrong CSRF token: %q", got)
	}
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<form method="post" action="%s%s"><input type="hidden" name="csrf" value="guess"><button id="go">win a prize</button></form>`, base, queuedPath)
	}))
	defer evil.Close()
	step(t, ctx, "the forged form of another origin", chromedp.Navigate(evil.URL), chromedp.Click(chromedp.ID("go")), chromedp.WaitVisible(chromedp.ID("error")))
	if got := text(t, ctx, "h1") + ": " + text(t, ctx, "#error"); got != "403 Forbidden: cross-origin action refused" {
		t.Errorf("the forged form: %q", got)
	}
	waitJob(t, acme, queued, 5*time.Second, "still queued", func(j *pb.Job) bool { return j.State == "queued" })

	// Cancel the queued job with the button.
	step(t, ctx, "cancel", chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", base, queued)), chromedp.Click(chromedp.CSS("#cancel button")),
		chromedp.WaitVisible(chromedp.CSS(`#job-state.cancelled`)))
	if got := text(t, ctx, "#job-state"); got != "cancelled" {
		t.Errorf("after cancel: %q", got)
	}
	waitJob(t, acme, queued, 5*time.Second, "cancelled", func(j *pb.Job) bool { return j.State == "cancelled" })

	// Tenant-written markup is text, and no script runs.
	for _, u := range []string{fmt.Sprintf("%s/jobs/%d", base, xss), base + "/jobs?type=onerror", base + "/jobs?tenant=acme"} {
		step(t, ctx, "open "+u, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("main")))
		if got := eval[string](t, ctx, `typeof window.__pwned`); got != "undefined" {
			t.Errorf("%s: a tenant's script ran (window.__pwned is %s)", u, got)
		}
		if n := eval[int](t, ctx, `document.querySelectorAll("script, img, main svg[onload]").length`); n != 0 {
			t.Errorf("%s: %d script or img elements", u, n)
		}
	}
	step(t, ctx, "open the markup job", chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", base, xss)), chromedp.WaitVisible(chromedp.ID("stderr")))
	if got := text(t, ctx, "#job-type"); got != xssType {
		t.Errorf("type shown as %q", got)
	}
	if got := text(t, ctx, "#stderr"); got != xssStderr+"\n" {
		t.Errorf("stderr shown as %q", got)
	}
	if n := dialogs.Load(); n != 0 {
		t.Errorf("%d dialogs opened", n)
	}
	shot(t, ctx, "web-ui-job-markup.png")

	// Drain the worker and undrain it, with its buttons.
	workers := pb.NewWorkerClient(cluster.Dial(t, leader.GRPCAddr, adminToken, nil))
	drained := func() bool {
		ws, err := workers.ListWorkers(cctx, &pb.ListWorkersRequest{})
		if err != nil || len(ws.Workers) != 1 {
			t.Fatalf("workers: %v %v", ws, err)
		}
		return ws.Workers[0].Drained
	}
	step(t, ctx, "drain", chromedp.Navigate(base+"/workers"), chromedp.Click(chromedp.CSS(`form[action="/workers/w1/drain"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`form[action="/workers/w1/undrain"]`)))
	if got := text(t, ctx, "#workers tr:nth-child(2) td:nth-child(3)"); got != "default" {
		t.Errorf("the worker's pool: %q", got)
	}
	if got := text(t, ctx, "#workers tr:nth-child(2) td:nth-child(4)"); got != "drained" || !drained() {
		t.Errorf("after drain: the page says %q, the leader %v", got, drained())
	}
	step(t, ctx, "undrain", chromedp.Click(chromedp.CSS(`form[action="/workers/w1/undrain"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`form[action="/workers/w1/drain"]`)))
	if got := text(t, ctx, "#workers tr:nth-child(2) td:nth-child(4)"); got != "idle" || drained() {
		t.Errorf("after undrain: the page says %q, the leader %v", got, drained())
	}
	shot(t, ctx, "web-ui-workers.png")

	// A schedule of acme whose job's type is markup, paused: run it now
	// from the tenant page; its job is the schedule's recent fire.
	if _, err := acme.SetSchedule(cctx, &pb.SetScheduleRequest{Name: "nightly-report", Spec: "30 2 * * *", Zone: "Europe/Berlin", Paused: true,
		Job: &pb.SubmitRequest{JobType: xssType, Size: pb.Size_SM, EstCostMs: 100, MaxAttempts: 1, Payload: payload(t, "sh", "-c", "echo report")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := acme.SetSchedule(cctx, &pb.SetScheduleRequest{Name: "weekday-sync", Spec: "0 6 * * 1-5", Zone: "America/New_York",
		Job: &pb.SubmitRequest{JobType: "sync-crm", Size: pb.Size_SM, EstCostMs: 100, MaxAttempts: 1, Payload: payload(t, "true")}}); err != nil {
		t.Fatal(err)
	}
	const runNow = `#schedule-nightly-report form[action="/tenants/acme/schedules/nightly-report/run-now"] button`
	waitFor(t, 30*time.Second, "the schedule on the follower's page", func() (bool, string) {
		if err := chromedp.Do(ctx, chromedp.Navigate(base+"/tenants/acme"), chromedp.WaitVisible(chromedp.ID("states"))); err != nil {
			return false, err.Error()
		}
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('`+runNow+`').length`))
		return err == nil && n == 1, fmt.Sprint(n, " run-now buttons ", err)
	})
	if got := press(t, ctx, "run the schedule now", runNow, `!!document.getElementById("job-state")`); got != "" {
		t.Fatalf("run now: %s", got)
	}
	if got := text(t, ctx, "#job-type"); got != xssType {
		t.Errorf("the fired job's type: %q", got)
	}
	fired := eval[string](t, ctx, `location.pathname`)
	waitFor(t, 30*time.Second, "the fire on the tenant page", func() (bool, string) {
		if err := chromedp.Do(ctx, chromedp.Navigate(base+"/tenants/acme"), chromedp.WaitVisible(chromedp.ID("states"))); err != nil {
			return false, err.Error()
		}
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll("#fires tr")].filter(tr => tr.cells[0].textContent == "nightly-report").map(tr => tr.querySelector("a").getAttribute("href")).join(" ")`))
		return err == nil && got == fired, got
	})
	if got := eval[string](t, ctx, `[...document.querySelectorAll("#schedule-nightly-report td")].slice(0, 6).map(td => td.textContent).join("|")`); got !=
		"nightly-report|30 2 * * *|Europe/Berlin|skip|paused|"+xssType+" (sm)" {
		t.Errorf("the schedule's row: %q", got)
	}
	if got := text(t, ctx, "#schedule-nightly-report td:nth-child(9)"); got != "1" {
		t.Errorf("fired: %q", got)
	}
	if got := eval[string](t, ctx, `typeof window.__pwned`); got != "undefined" {
		t.Errorf("the tenant page ran a tenant's script (window.__pwned is %s)", got)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll("script, img").length`); n != 0 {
		t.Errorf("the tenant page has %d script or img elements", n)
	}
	shot(t, ctx, "web-ui-tenant.png")

	// A client token sees its own tenant only. Sign out first.
	step(t, ctx, "sign out", chromedp.Click(chromedp.CSS(`form[action="/logout"] button`)), chromedp.WaitVisible(chromedp.CSS(`input[name=token]`)))
	shot(t, ctx, "web-ui-login.png")
	signIn(t, ctx, base, acmeToken)
	if got := text(t, ctx, "#tenants"); !strings.Contains(got, "acme") || strings.Contains(got, "beta") {
		t.Errorf("acme's overview: %q", got)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll("#members").length`); n != 0 {
		t.Error("a client sees the members")
	}
	shot(t, ctx, "web-ui-overview-client.png")
	if got := open(t, ctx, fmt.Sprintf("%s/jobs/%d", base, betaJob)); got != http.StatusForbidden {
		t.Errorf("acme opening beta's job: %d", got)
	}
	if got := text(t, ctx, "#error"); got != fmt.Sprintf("job %d is not a job of tenant acme", betaJob) {
		t.Errorf("acme opening beta's job: %q", got)
	}
	if got := open(t, ctx, base+"/tenants/beta"); got != http.StatusForbidden {
		t.Errorf("acme opening beta's page: %d", got)
	}
	if got := open(t, ctx, base+"/workers"); got != http.StatusForbidden {
		t.Errorf("acme opening the workers page: %d", got)
	}
	if got := open(t, ctx, fmt.Sprintf("%s/jobs?state=failed", base)); got != http.StatusOK {
		t.Errorf("acme's search: %d", got)
	}
	csrf := eval[string](t, ctx, `document.querySelector("input[name=csrf]").value`)
	if got := forge(t, ctx, "/workers/w1/drain", "csrf="+csrf); got != "403 Forbidden: draining a worker needs an admin token" {
		t.Errorf("acme draining a worker (with its CSRF token): %q", got)
	}
	step(t, ctx, "back to the search", chromedp.Navigate(base+"/jobs"), chromedp.WaitVisible(chromedp.ID("search")))
	if got := forge(t, ctx, fmt.Sprintf("/jobs/%d/cancel", betaJob), "csrf="+csrf); got != fmt.Sprintf("403 Forbidden: job %d is not a job of tenant acme", betaJob) {
		t.Errorf("acme cancelling beta's job: %q", got)
	}
	waitJob(t, beta, betaJob, 5*time.Second, "still queued", func(j *pb.Job) bool { return j.State == "queued" })
	if drained() {
		t.Error("acme's drain drained the worker")
	}
	if n := dialogs.Load(); n != 0 {
		t.Errorf("%d dialogs opened", n)
	}
}

// shot saves a screenshot of the page to docs/NAME with
// -update-screenshot.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if !*updateScreenshot {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join("..", "docs", name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
