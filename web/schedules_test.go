package web

import (
	"fmt"
	"html/template"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/schedule"
	"github.com/baristahq/barista/sfq"
)

// scheduleSet is the command that sets tenant's schedule name.
func scheduleSet(tenant, name, spec, zone string, catchupMs int64, jobType string) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_ScheduleSet{ScheduleSet: &clusterpb.ScheduleSet{Tenant: tenant, Name: name, Spec: spec, Zone: zone,
		CatchupMs: catchupMs, Job: &clusterpb.SubmitJob{JobType: jobType, Size: pb.Size_SM, EstCostMs: 100}}}}
}

// schedulesNode is gatewayNode with acme's schedules:
//   - nightly (30 2 29 2 * in Europe/Berlin, overlap skip, catch-up 1 s,
//     its job's type markup) with one slot fired (job a), three slots
//     missed, one slot skipped (a still queued) and a run-now with key
//     "manual" (job b);
//   - raw, whose spec (markup) this build cannot read: Apply reads no
//     spec, so a command proposed without the edge's check holds one;
//   - again, whose job c was fired by a schedule of the same name
//     deleted before it was created;
//
// and beta's schedule b1.
func schedulesNode(t *testing.T) (n *testNode, ts *httptest.Server, a, b sfq.JobID, slot1, slot2 int64) {
	t.Helper()
	n, ts = gatewayNode(t)
	clock := func() int64 { c, _ := n.node.FSM.Clock(); return int64(c) }
	n.propose(scheduleSet("acme", "nightly", "30 2 29 2 *", "Europe/Berlin", 1000, `<img src=x onerror=alert(1)>`),
		scheduleSet("acme", "raw", "<b>*</b> * * * *", "", 0, "raw-job"),
		scheduleSet("acme", "again", "@yearly", "", 0, "again-job"),
		scheduleSet("beta", "b1", "@daily", "UTC", 0, "beta-job"))
	run := func(tenant, name, key string) sfq.JobID {
		t.Helper()
		res := n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_ScheduleRunNow{ScheduleRunNow: &clusterpb.ScheduleRunNow{Tenant: tenant, Name: name, Key: key}}})
		if res[0].Refused() || res[0].Job == 0 {
			t.Fatalf("run-now of %s: %+v", name, res[0])
		}
		return res[0].Job
	}
	run("acme", "again", "before")
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_ScheduleDelete{ScheduleDelete: &clusterpb.ScheduleDelete{Tenant: "acme", Name: "again"}}})
	n.clockMoves()
	n.propose(scheduleSet("acme", "again", "@yearly", "", 0, "again-job"))

	info, ok := n.node.FSM.GetSchedule("acme", "nightly")
	if !ok {
		t.Fatal("no schedule nightly")
	}
	n.clockMoves()
	slot1 = clock()
	fire := func(slot int64) fsm.Result {
		t.Helper()
		return n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_ScheduleFire{ScheduleFire: &clusterpb.ScheduleFire{Tenant: "acme", Name: "nightly",
			Version: info.Version, SlotMs: slot}}})[0]
	}
	if r := fire(slot1); r.Fire != fsm.FireFired {
		t.Fatalf("fire of slot %d (since %d): %+v", slot1, info.Since, r)
	}
	got, _ := n.node.FSM.GetSchedule("acme", "nightly")
	a = got.LastJob
	// Three slots missed, the newest 1 ms after slot 1: once it is more
	// than the catch-up window (1 s) behind cluster time.
	waitFor(t, 10*time.Second, "cluster time past the catch-up window", func() bool {
		n.clockMoves()
		return clock() > slot1+1+1000
	})
	miss := &clusterpb.ScheduleMiss{Tenant: "acme", Name: "nightly", Version: info.Version, ThroughMs: slot1 + 1, Count: 3}
	if r := n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_ScheduleMiss{ScheduleMiss: miss}})[0]; r.Fire != fsm.FireMissed {
		t.Fatalf("miss: %+v", r)
	}
	n.clockMoves()
	slot2 = clock()
	if r := fire(slot2); r.Fire != fsm.FireSkipped {
		t.Fatalf("fire of slot %d while job %d is queued: %+v", slot2, a, r)
	}
	b = run("acme", "nightly", "manual")
	return n, ts, a, b, slot1, slot2
}

// slotIn is a slot as the console shows it in zone and UTC, written
// here from the zone's rules.
func slotIn(t *testing.T, ms int64, zone string) string {
	t.Helper()
	loc, err := schedule.LoadZone(zone)
	if err != nil {
		t.Fatal(err)
	}
	at := time.UnixMilli(ms)
	return at.In(loc).Format("2006-01-02 15:04:05.999 MST") + " · " + at.UTC().Format("2006-01-02 15:04:05.999 UTC")
}

// jobWall is a job's submit as the console shows it.
func jobWall(t *testing.T, n *testNode, id sfq.JobID) string {
	t.Helper()
	j, _, ok := n.node.FSM.Job(id)
	if !ok {
		t.Fatalf("no job %d", id)
	}
	return time.UnixMilli(int64(j.SubmittedWall())).UTC().Format("2006-01-02 15:04:05")
}

// TestConsoleSchedules: a tenant page lists the tenant's schedules (its
// own only) with spec, zone, overlap, pause, job, next fire, last slot,
// counts and last job, and the jobs each fired (not a deleted
// namesake's), newest first; tenant-written text (the job's type, a
// spec) is shown as text.
func TestConsoleSchedules(t *testing.T) {
	n, ts, a, b, slot1, slot2 := schedulesNode(t)
	r := cdo(t, ts, "GET", "/tenants/acme", gwAcme, "")
	if r.status != 200 {
		t.Fatalf("acme's page: %d\n%s", r.status, r.body)
	}
	// The next slot: the next 29 February, 02:30 in Berlin, after slot 2.
	berlin, _ := schedule.LoadZone("Europe/Berlin")
	next := time.Time{}
	for y := time.UnixMilli(slot2).Year(); next.IsZero(); y++ {
		if c := time.Date(y, 2, 29, 2, 30, 0, 0, berlin); c.Day() == 29 && c.UnixMilli() > slot2 {
			next = c
		}
	}
	row := regexp.MustCompile(`<tr id="schedule-nightly">(.*)</tr>`).FindStringSubmatch(r.body)
	if row == nil {
		t.Fatalf("no row of nightly:\n%s", r.body)
	}
	want := regexp.MustCompile(`^<td class="l">nightly</td><td class="l"><code>30 2 29 2 \*</code></td><td class="l">Europe/Berlin</td><td class="l">skip</td>` +
		`<td class="l">no</td><td class="l type">&lt;img src=x onerror=alert\(1\)&gt; \(sm\)</td>` +
		`<td class="l">in [0-9hms.]+ \((\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)\)<br><span class="note">slot ` + regexp.QuoteMeta(slotIn(t, next.UnixMilli(), "Europe/Berlin")) + `</span></td>` +
		`<td class="l">` + regexp.QuoteMeta(slotIn(t, slot2, "Europe/Berlin")) + `</td><td>2</td><td>1</td><td>3</td><td>0</td>` +
		fmt.Sprintf(`<td><a href="/jobs/%d">%d</a></td>$`, b, b))
	m := want.FindStringSubmatch(row[1])
	if m == nil {
		t.Fatalf("nightly's row:\n%s\nwant\n%s", row[1], want)
	}
	// The next fire at its wall time: cluster time is this node's clock.
	if at, err := time.Parse(time.RFC3339, m[1]); err != nil || at.Sub(next).Abs() > 5*time.Second {
		t.Errorf("next fire at %s, want about %s", m[1], next.UTC())
	}
	// raw: its spec as text, and why this build cannot compute its slots.
	_, perr := schedule.Parse("<b>*</b> * * * *", "")
	if perr == nil {
		t.Fatal("the spec <b>*</b> * * * * parses")
	}
	for _, want := range []string{
		`<tr id="schedule-raw"><td class="l">raw</td><td class="l"><code>&lt;b&gt;*&lt;/b&gt; * * * *</code></td><td class="l">UTC</td><td class="l">skip</td>` +
			`<td class="l">no</td><td class="l type">raw-job (sm)</td><td class="l"><span class="err">` + template.HTMLEscapeString(perr.Error()) + `</span></td>` +
			`<td class="l">-</td><td>0</td><td>0</td><td>0</td><td>0</td><td>-</td></tr>`,
		`<tr id="schedule-again"><td class="l">again</td><td class="l"><code>@yearly</code></td>`,
		// Recent fires: nightly's run-now (b), then its slot 1 (a);
		// nothing of again's deleted namesake.
		fmt.Sprintf(`<tr><td class="l">nightly</td><td class="l">run now (key manual)</td><td><a href="/jobs/%d">%d</a></td><td class="l"><span class="st queued">queued</span></td>`+
			`<td class="l">%s</td><td class="l">-</td></tr>`, b, b, jobWall(t, n, b)),
		fmt.Sprintf(`<tr><td class="l">nightly</td><td class="l">%s</td><td><a href="/jobs/%d">%d</a></td><td class="l"><span class="st queued">queued</span></td>`+
			`<td class="l">%s</td><td class="l">-</td></tr>`, slotIn(t, slot1, "Europe/Berlin"), a, a, jobWall(t, n, a)),
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("acme's page lacks\n%s", want)
		}
	}
	fires := r.body[strings.Index(r.body, `<table id="fires">`):]
	fires = fires[:strings.Index(fires, "</table>")]
	if got := regexp.MustCompile(`<td><a href="/jobs/(\d+)">`).FindAllStringSubmatch(fires, -1); len(got) != 2 || got[0][1] != fmt.Sprint(b) || got[1][1] != fmt.Sprint(a) {
		t.Errorf("recent fires %v, want jobs %d %d:\n%s", got, b, a, fires)
	}
	if strings.Contains(r.body, "b1") || strings.Contains(r.body, "<img") || strings.Contains(r.body, "<b>*") || strings.Contains(r.body, "<script") {
		t.Errorf("acme's page shows beta's schedule or markup:\n%s", r.body)
	}
	// A bearer header has no session: no action forms.
	if strings.Contains(r.body, "/schedules/") {
		t.Errorf("actions without a session:\n%s", r.body)
	}
	// beta's page: its own schedule only.
	r = cdo(t, ts, "GET", "/tenants/beta", gwAdmin, "")
	if !strings.Contains(r.body, `<tr id="schedule-b1"><td class="l">b1</td><td class="l"><code>@daily</code></td><td class="l">UTC</td>`) ||
		strings.Contains(r.body, "nightly") || !strings.Contains(r.body, `<tr><td class="l" colspan="6">no retained jobs fired by these schedules</td></tr>`) {
		t.Errorf("beta's page:\n%s", r.body)
	}
	// A tenant without schedules.
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "gamma", Tier: pb.Tier_GOLD}}})
	if r := cdo(t, ts, "GET", "/tenants/gamma", gwAdmin, ""); !strings.Contains(r.body, `<h2>Schedules</h2>
<p class="note">No schedules.</p>`) {
		t.Errorf("gamma's page:\n%s", r.body)
	}
}

// TestConsoleScheduleActions: a tenant page pauses, resumes and runs
// its schedules now, each a POST with the session's CSRF token; a
// client acts on its own tenant's only.
func TestConsoleScheduleActions(t *testing.T) {
	n, ts, _, _, _, _ := schedulesNode(t)
	admin, adminCSRF := signIn(t, ts, gwAdmin)
	acme, acmeCSRF := signIn(t, ts, gwAcme)
	sched := func(tenant, name string) fsm.ScheduleInfo {
		s, _ := n.node.FSM.GetSchedule(tenant, name)
		return s
	}
	page := cdo(t, ts, "GET", "/tenants/acme", "", "", "Cookie", acme).body
	for _, want := range []string{
		`<form method="post" action="/tenants/acme/schedules/nightly/pause" class="inline"><input type="hidden" name="csrf" value="` + acmeCSRF + `"><button type="submit">pause</button></form>`,
		`<form method="post" action="/tenants/acme/schedules/nightly/run-now" class="inline"><input type="hidden" name="csrf" value="` + acmeCSRF + `"><button type="submit">run now</button></form>`,
	} {
		if !strings.Contains(page, want) {
			t.Fatalf("acme's page lacks %s:\n%s", want, page)
		}
	}
	for _, c := range []struct {
		name, path, cookie string
		form               url.Values
		status             int
		want               string
	}{
		{"no CSRF token", "/tenants/acme/schedules/nightly/pause", acme, url.Values{}, 403,
			"missing or wrong CSRF token: act from the console&#39;s own pages while signed in"},
		{"another session's token", "/tenants/acme/schedules/nightly/pause", acme, url.Values{"csrf": {adminCSRF}}, 403,
			"missing or wrong CSRF token: act from the console&#39;s own pages while signed in"},
		{"acme pauses beta's", "/tenants/beta/schedules/b1/pause", acme, url.Values{"csrf": {acmeCSRF}}, 403,
			"a client token of tenant acme may not act on another tenant&#39;s schedules"},
		{"acme runs beta's", "/tenants/beta/schedules/b1/run-now", acme, url.Values{"csrf": {acmeCSRF}}, 403,
			"a client token of tenant acme may not act on another tenant&#39;s schedules"},
		{"an unknown action", "/tenants/acme/schedules/nightly/explode", admin, url.Values{"csrf": {adminCSRF}}, 404,
			"no schedule action &#34;explode&#34; (pause, resume or run-now)"},
		{"no such schedule", "/tenants/acme/schedules/nope/pause", admin, url.Values{"csrf": {adminCSRF}}, 404,
			"NOT_FOUND: name: tenant &#34;acme&#34; has no schedule &#34;nope&#34;"},
		{"a bad name", "/tenants/acme/schedules/n%20o/pause", admin, url.Values{"csrf": {adminCSRF}}, 400,
			"schedule: schedule name &#34;n o&#34; has &#39; &#39; at byte 1 (allowed: A-Z a-z 0-9 . _ : @ -)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if r := post(t, ts, c.path, c.cookie, c.form); r.status != c.status || errorText(r.body) != c.want {
				t.Errorf("POST %s: %d %q, want %d %q", c.path, r.status, errorText(r.body), c.status, c.want)
			}
		})
	}
	if s, b := sched("acme", "nightly"), sched("beta", "b1"); s.Paused || b.Paused || s.Fired != 2 || b.Fired != 0 {
		t.Fatalf("after the refused posts: nightly paused %v fired %d, b1 paused %v fired %d", s.Paused, s.Fired, b.Paused, b.Fired)
	}
	// acme pauses nightly: the page says so and offers the resume.
	if r := post(t, ts, "/tenants/acme/schedules/nightly/pause", acme, url.Values{"csrf": {acmeCSRF}}); r.status != http.StatusSeeOther || r.header.Get("Location") != "/tenants/acme" {
		t.Fatalf("acme pauses nightly: %d %s", r.status, errorText(r.body))
	}
	if !sched("acme", "nightly").Paused {
		t.Fatal("nightly is not paused")
	}
	page = cdo(t, ts, "GET", "/tenants/acme", "", "", "Cookie", acme).body
	if !strings.Contains(page, `<td class="l">skip</td><td class="l"><b>paused</b></td><td class="l type">&lt;img src=x onerror=alert(1)&gt; (sm)</td><td class="l">-</td>`) ||
		!strings.Contains(page, `action="/tenants/acme/schedules/nightly/resume"`) {
		t.Errorf("acme's page after the pause:\n%s", page)
	}
	// The admin runs it now (a pause does not stop a run-now): the job's page.
	r := post(t, ts, "/tenants/acme/schedules/nightly/run-now", admin, url.Values{"csrf": {adminCSRF}})
	s := sched("acme", "nightly")
	if r.status != http.StatusSeeOther || s.Fired != 3 || r.header.Get("Location") != fmt.Sprintf("/jobs/%d", s.LastJob) {
		t.Fatalf("the admin runs nightly now: %d %q %s; fired %d, last job %d", r.status, r.header.Get("Location"), errorText(r.body), s.Fired, s.LastJob)
	}
	if j, _, _ := n.node.FSM.Job(s.LastJob); !strings.HasPrefix(j.Key(), "schedule/nightly/run/") {
		t.Errorf("job %d has key %q", s.LastJob, j.Key())
	}
	if r := post(t, ts, "/tenants/acme/schedules/nightly/resume", acme, url.Values{"csrf": {acmeCSRF}}); r.status != http.StatusSeeOther || sched("acme", "nightly").Paused {
		t.Errorf("acme resumes nightly: %d %s", r.status, errorText(r.body))
	}
}

// BenchmarkScheduleFires: the recent fires of a tenant page when they
// are the tenant's oldest jobs (the whole pass): 100 schedules, each run
// 5 times, then 99,000 other jobs; beside it the page's job counts,
// one pass over the same jobs.
func BenchmarkScheduleFires(b *testing.B) {
	f := fsm.NewLatest()
	var index uint64
	apply := func(cmds ...*clusterpb.Command) {
		index++
		res, err := f.ApplyEnvelope(index, &clusterpb.Envelope{Version: fsm.Version, StampMs: 1_000_000 + int64(index), Commands: cmds})
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			if r.Refused() {
				b.Fatalf("entry %d: %+v", index, r)
			}
		}
	}
	apply(&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "acme", Tier: pb.Tier_GOLD}}})
	var list []*pb.Schedule
	for i := range 100 {
		name := fmt.Sprintf("s%03d", i)
		apply(scheduleSet("acme", name, "@daily", "", 0, "report"))
		for k := range 5 {
			apply(&clusterpb.Command{Cmd: &clusterpb.Command_ScheduleRunNow{ScheduleRunNow: &clusterpb.ScheduleRunNow{Tenant: "acme", Name: name, Key: fmt.Sprint("k", k)}}})
		}
		list = append(list, &pb.Schedule{Name: name, Zone: "UTC"})
	}
	var cmds []*clusterpb.Command
	for range 99_000 { // 99,500 with the fires: the default max_queued is 100,000
		cmds = append(cmds, &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 100, JobType: "other"}}})
		if len(cmds) == 1000 {
			apply(cmds...)
			cmds = nil
		}
	}
	if c, _ := countJobs(f, "acme"); c[sfq.Queued][sfq.ClassNormal][sfq.SM] != 99_500 {
		b.Fatalf("%d queued jobs; %v", c[sfq.Queued][sfq.ClassNormal][sfq.SM], c)
	}
	b.Run("fires", func(b *testing.B) {
		for range b.N {
			rows := scheduleRows(f, "acme", list)
			if len(rows[99].Fires) != firesShown {
				b.Fatalf("%d fires", len(rows[99].Fires))
			}
		}
	})
	b.Run("counts", func(b *testing.B) {
		for range b.N {
			if _, ok := countJobs(f, "acme"); !ok {
				b.Fatal("no tenant acme")
			}
		}
	})
}
