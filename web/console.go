package web

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/apiview"
	"github.com/baristahq/barista/internal/auth"
	"github.com/baristahq/barista/internal/evidence"
	"github.com/baristahq/barista/internal/joblist"
	"github.com/baristahq/barista/internal/peertext"
	"github.com/baristahq/barista/internal/version"
	"github.com/baristahq/barista/internal/wire"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/rpc"
	"github.com/baristahq/barista/sfq"
)

// The web console: server-rendered pages (html/template, no script)
// under /, every one behind the login (or the bearer header) and
// scoped like the API: an admin sees everything, a client token its own
// tenant. Its reads and actions are calls of this node's own services,
// made in this process with the caller's identity and token, so that a
// follower's console reads and acts through the leader exactly as an
// API call to that follower would. Three things the API has no call for
// are read from this node's replicated state: counts of jobs by state,
// class and size, and a job's events (consoledata.go), and the jobs a
// tenant's schedules fired (schedules.go); and the share chart is drawn
// from samples this node keeps (history.go).

//go:embed assets
var webFiles embed.FS

var consoleTmpl = template.Must(template.New("console").Funcs(template.FuncMap{
	"pct": func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) },
	// pctp is pct of a figure that may be undefined (nil: "-"), to two
	// decimals.
	"pctp": func(f *float64) string {
		if f == nil {
			return "-"
		}
		return fmt.Sprintf("%.2f%%", 100**f)
	},
	"w": func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) },
	// entitled is the 1 min entitlement of the fairness report, "-" when
	// no tenant had eligible work in the class.
	"entitled": func(r TenantTopJSON) string {
		if len(r.Fairness) == 0 || r.Fairness[0].Entitled == nil {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100**r.Fairness[0].Entitled)
	},
	"ratio": func(p *float64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprintf("%.2f", *p)
	},
	"lag": func(p *float64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprintf("%+.1fs", *p)
	},
	"ms":   func(ms int64) string { return (time.Duration(ms) * time.Millisecond).String() },
	"wall": wallText,
	// when shows a cluster time of an answer as people read time: "in
	// 5.5s (2026-12-03T12:31:04Z)" (wire.When).
	"when": wire.When,
	"size": func(s pb.Size) string {
		if v, err := fsm.SizeFromPB(s); err == nil {
			return v.String()
		}
		return "-"
	},
	"class": func(c pb.Class) string {
		if v, err := fsm.ClassFromPB(c); err == nil {
			return v.String()
		}
		return "-"
	},
	"tier": func(t pb.Tier) string {
		if v, err := fsm.TierFromPB(t); err == nil {
			return v.String()
		}
		return "-"
	},
	// limit shows a cap or quota, 0 being none.
	"limit": func(n any) string {
		if fmt.Sprint(n) == "0" {
			return "none"
		}
		return fmt.Sprint(n)
	},
	"bar": func(f float64) int { return int(barWidth * min(max(f, 0), 1)) },
	"add": func(a, b int) int { return a + b },
	// seg escapes a name for one path segment ("/" included).
	"seg": url.PathEscape,
	// opt shows an optional limit, "-" being none.
	"opt": LimitText,
	"inc": func(n int) int { return n + 1 },
	// share shows a statement's share ("-": undefined).
	"share": func(f *evidence.Fixed) string {
		if f == nil {
			return "-"
		}
		return strconv.FormatFloat(100*float64(*f), 'f', 2, 64) + "%"
	},
	"dec": func(n int) int { return n - 1 },
}).ParseFS(webFiles, "assets/*.html"))

// barWidth is the width of a share bar at 100%.
const barWidth = 200

// wallText shows a wall-clock time in ms since the epoch (UTC), "-" for
// none.
func wallText(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05")
}

// serveCSS serves the console's one stylesheet (the CSP allows styles
// from this origin only).
func serveCSS(w http.ResponseWriter, r *http.Request) {
	b, _ := webFiles.ReadFile("assets/console.css")
	h := w.Header()
	h.Set("Content-Type", "text/css; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	w.Write(b)
}

// consoleRoutes registers the console's pages and actions.
func (s *Server) consoleRoutes(mux *http.ServeMux) {
	page := func(h http.HandlerFunc) http.HandlerFunc { return s.guard(pageRoles, true, h) }
	mux.HandleFunc("GET /console.css", serveCSS)
	mux.HandleFunc("/", page(s.overview))
	mux.HandleFunc("GET /tenants/{name}", page(s.tenantPage))
	mux.HandleFunc("GET /tenants/{name}/statement", page(s.statementPage))
	mux.HandleFunc("GET /tenants/{name}/evidence/{file}", page(s.evidenceDownload))
	mux.HandleFunc("GET /jobs", page(s.jobsPage))
	mux.HandleFunc("GET /jobs/{id}", page(s.jobPage))
	mux.HandleFunc("POST /jobs/{id}/cancel", page(s.cancelAction))
	mux.HandleFunc("POST /jobs/{id}/redrive", page(s.redriveAction))
	mux.HandleFunc("POST /jobs/{id}/run-now", page(s.runNowAction))
	mux.HandleFunc("POST /tenants/{name}/{action}", page(s.pauseAction))
	mux.HandleFunc("POST /tenants/{name}/schedules/{schedule}/{action}", page(s.scheduleAction))
	mux.HandleFunc("GET /workers", page(s.workersPage))
	mux.HandleFunc("POST /workers/{id}/{action}", page(s.drainAction))
}

// consoleCallTimeout bounds one call of a page: longer than rpc.ForwardWait,
// which a follower waits for a leader.
const consoleCallTimeout = rpc.ForwardWait + 3*time.Second

// callCtx is the context of a service call made for r: its caller's
// identity (as the auth interceptor would set it) and bearer token (which
// a follower forwards to the leader).
func callCtx(r *http.Request) (context.Context, context.CancelFunc) {
	c := requestCaller(r)
	ctx, cancel := context.WithTimeout(r.Context(), consoleCallTimeout)
	return rpc.CallerContext(ctx, c.id, c.token), cancel
}

// frame is what every console page shows around its content.
type frame struct {
	Title, Nav string
	Node       string
	NodeState  string
	Leader     string
	Applied    uint64
	Now        string
	// Lag says how far cluster time is behind this node's clock, when a
	// second or more.
	Lag string
	// Who is the caller ("" in open mode, where nobody signs in);
	// SignedIn says it has a session to sign out of; Admin and Tenant (a
	// client's) say what it may see.
	Who      string
	SignedIn bool
	Admin    bool
	Tenant   string
	// CSRF is the session's token, which every form posts ("" without a
	// session: the page shows no action).
	CSRF string
	// Version is the release of this node's build.
	Version string
}

func (s *Server) frame(w http.ResponseWriter, r *http.Request, title, nav string) frame {
	c := s.ensureOpenCSRF(w, r, requestCaller(r))
	leader, _ := s.node.Leader()
	f := frame{Title: title, Nav: nav, Node: s.node.ID(), NodeState: peertext.StateName(s.node.Raft().State()), Leader: leader,
		Applied: s.node.Raft().AppliedIndex(), Now: time.Now().UTC().Format("15:04:05 UTC"),
		Admin: c.id.Role == auth.RoleAdmin, Tenant: c.id.Tenant, CSRF: s.csrfToken(c.session), SignedIn: !s.auth.Open() && c.session != "",
		Version: version.Version}
	if wall, cluster := s.node.FSM.WallClock(); wall != 0 && wall-cluster >= 1000 {
		f.Lag = (time.Duration(wall-cluster) * time.Millisecond).Round(100 * time.Millisecond).String()
	}
	if !s.auth.Open() {
		f.Who = c.id.Role.String()
		if c.id.Role == auth.RoleClient {
			f.Who += " of tenant " + c.id.Tenant
		}
	}
	return f
}

// render writes a page (status 200 unless code says otherwise).
func (s *Server) render(w http.ResponseWriter, name string, code int, data any) {
	pageHeaders(w)
	var b bytes.Buffer
	if err := consoleTmpl.ExecuteTemplate(&b, name, data); err != nil {
		s.log.Warn("console page", "page", name, "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	if code != 0 {
		w.WriteHeader(code)
	}
	w.Write(b.Bytes())
}

type errorPage struct {
	frame
	Code    int
	Status  string
	Message string
}

// fail shows an error page with an HTTP status and its message.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, code int, msg string) {
	s.render(w, "error", code, errorPage{frame: s.frame(w, r, http.StatusText(code), ""), Code: code, Status: http.StatusText(code), Message: msg})
}

// failCall shows a refused service call: its gRPC code as an HTTP status.
func (s *Server) failCall(w http.ResponseWriter, r *http.Request, err error) {
	st := status.Convert(err)
	s.fail(w, r, httpStatus(st.Code()), wire.CodeName(st.Code())+": "+st.Message())
}

type pageMember struct {
	ID, Raft, GRPC, HTTP string
	Leader               bool
	State                string // leader, follower, unreachable, unknown
	Contact, Lag         string
}

// overviewPage is the overview: fair shares now and over the last hour,
// queued and running jobs per class and size, dispatches per second, and
// the members.
type overviewPage struct {
	frame
	Top    TopJSON
	Chart  chart
	Legend []legendItem
	// Rate is the dispatches per second over the last window; RateChart
	// over the samples.
	Rate      string
	RateChart chart
	Classes   []classRow
	// Members is empty for a client token.
	Members []consoleMember
	// Pools are the pools, once there are others than default (an
	// admin's: empty for a client token); PoolColumn: the tenants' lines
	// name their pool (there are other pools than default).
	Pools      []PoolTopJSON
	PoolColumn bool
	// Resources are the declared resources (an admin's: empty for a
	// client token); Holdings what each tenant shown holds of them.
	Resources []ResourceTopJSON
	Holdings  []holdingRow
}

// holdingRow is what one tenant holds of one resource, and its limit in
// force there ("-": none).
type holdingRow struct {
	Tenant, Resource string
	Held             uint32
	Max              string
}

type legendItem struct{ Name, Color string }

// classRow is one class's queued and running (assigned or running) jobs
// by size.
type classRow struct {
	Class             string
	Queued, Running   [sfq.NumSizes]uint32
	QueuedT, RunningT uint32
}

type consoleMember struct {
	pageMember
	Applied string
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		s.fail(w, r, http.StatusNotFound, "no console page at "+r.URL.Path)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		s.fail(w, r, http.StatusMethodNotAllowed, "the overview is read with GET")
		return
	}
	id := requestIdentity(r)
	p := overviewPage{frame: s.frame(w, r, "overview", "overview"), Top: topJSON(visibleTop(s.srv.LocalTop(rpc.DefaultTopWindow), id))}
	if len(p.Top.Pools) > 1 {
		p.Pools = p.Top.Pools
	}
	p.PoolColumn = len(p.Pools) > 0 || slices.ContainsFunc(p.Top.Tenants, func(t TenantTopJSON) bool { return t.Pool != sfq.DefaultPoolName })
	p.Resources = p.Top.Resources
	for _, t := range p.Top.Tenants {
		for _, u := range t.Resources {
			p.Holdings = append(p.Holdings, holdingRow{Tenant: t.Name, Resource: u.Resource, Held: u.Held, Max: LimitText(u.Max)})
		}
	}
	var dispatches uint64
	var order []string
	for _, t := range p.Top.Tenants {
		dispatches += t.Dispatches1m
		order = append(order, t.Name)
	}
	p.Rate = strconv.FormatFloat(float64(dispatches)/rpc.DefaultTopWindow.Seconds(), 'f', 2, 64)
	now := time.Now()
	samples := s.history.since(now, historySpan)
	var names []string
	own := ""
	if id.Role == auth.RoleClient {
		own = id.Tenant
		names = []string{id.Tenant}
	} else {
		names = chartTenants(samples, order)
	}
	p.Chart = shareChart(samples, names, now)
	for i, n := range names {
		p.Legend = append(p.Legend, legendItem{Name: n, Color: chartColors[i%len(chartColors)]})
	}
	p.RateChart = rateChart(samples, own, now)
	counts, _ := countJobs(s.node.FSM, own)
	for _, c := range sfq.Classes() {
		row := classRow{Class: c.String()}
		for sz := range sfq.NumSizes {
			row.Queued[sz] = counts[sfq.Queued][c][sz]
			row.Running[sz] = counts[sfq.Assigned][c][sz] + counts[sfq.Running][c][sz]
			row.QueuedT += row.Queued[sz]
			row.RunningT += row.Running[sz]
		}
		p.Classes = append(p.Classes, row)
	}
	if id.Role == auth.RoleAdmin {
		p.Members = s.members(r)
	}
	s.render(w, "overview", 0, p)
}

// members lists the members as the leader sees them (rpc.Server.Peers,
// the view list-peers and GET /v1/admin/members give too).
func (s *Server) members(r *http.Request) []consoleMember {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	peers := s.srv.Peers(ctx)
	out := make([]consoleMember, len(peers.GetPeers()))
	for i, m := range peers.GetPeers() {
		f := peertext.Facts(m)
		out[i] = consoleMember{pageMember: pageMember{ID: m.Id, Raft: m.RaftAddr, GRPC: m.GrpcAddr, HTTP: m.HttpAddr, Leader: m.Leader,
			State: peertext.State(m), Contact: f.Contact, Lag: f.Lag}, Applied: f.Applied}
	}
	return out
}

// mayOpenTenant says whether the caller may see a tenant's pages.
func mayOpenTenant(id auth.Identity, tenant string) bool {
	return id.Role == auth.RoleAdmin || (id.Role == auth.RoleClient && id.Tenant == tenant)
}

// tenantPage shows one tenant: its usage, configuration, jobs by state,
// class and size, groups, schedules, and its share over the last hour.
type tenantPage struct {
	frame
	Name   string
	Usage  *pb.TenantUsageResponse
	Config *pb.Tenant
	States []stateRow
	Chart  chart
	Legend []legendItem
	Rate   chart
	// Groups is the first page of the tenant's groups by name (MoreGroups:
	// there are more); CanAct: the caller may pause and resume them.
	Groups     []*pb.Group
	MoreGroups bool
	CanAct     bool
	// Schedules are the first page of the tenant's schedules by name
	// (MoreSchedules: there are more; SchedulesErr: why none could be
	// read).
	Schedules     []scheduleRow
	MoreSchedules bool
	SchedulesErr  string
}

// tenantGroupsShown bounds the groups a tenant page lists.
const tenantGroupsShown = 50

// stateRow is one state's jobs: in all, by class and by size.
type stateRow struct {
	State   string
	Total   uint32
	ByClass []uint32 // in the order of sfq.Classes
	BySize  [sfq.NumSizes]uint32
}

func (s *Server) tenantPage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	id := requestIdentity(r)
	if err := sfq.ValidateName("tenant", name); err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	if !mayOpenTenant(id, name) {
		s.fail(w, r, http.StatusForbidden, "a client token of tenant "+id.Tenant+" may not open another tenant's page")
		return
	}
	ctx, cancel := callCtx(r)
	defer cancel()
	usage, err := s.client.TenantUsage(ctx, &pb.TenantUsageRequest{Tenant: name})
	if err != nil {
		s.failCall(w, r, err)
		return
	}
	p := tenantPage{frame: s.frame(w, r, "tenant "+name, "tenant"), Name: name, Usage: usage, Config: apiview.ReadTenant(s.node.FSM, name)}
	p.CanAct = p.CSRF != ""
	if gs, err := s.client.ListGroups(ctx, &pb.ListGroupsRequest{Tenant: name, PageSize: tenantGroupsShown}); err == nil {
		p.Groups, p.MoreGroups = gs.Groups, gs.NextPageToken != ""
	}
	p.Schedules, p.MoreSchedules, p.SchedulesErr = s.tenantSchedules(r, name)
	counts, _ := countJobs(s.node.FSM, name)
	classes := sfq.Classes()
	for _, st := range jobStates {
		row := stateRow{State: st.String(), ByClass: make([]uint32, len(classes))}
		for i, c := range classes {
			for sz := range sfq.NumSizes {
				n := counts[st][c][sz]
				row.ByClass[i] += n
				row.BySize[sz] += n
				row.Total += n
			}
		}
		p.States = append(p.States, row)
	}
	now := time.Now()
	samples := s.history.since(now, historySpan)
	p.Chart = shareChart(samples, []string{name}, now)
	p.Legend = []legendItem{{Name: name, Color: chartColors[0]}}
	p.Rate = rateChart(samples, name, now)
	s.render(w, "tenant", 0, p)
}

// jobsPageSize is a search page's default length; maxJobsPageSize its
// largest. jobsScanBudget bounds the jobs one search page reads through
// when it filters by type or group (ListJobs filters by neither): past it, the
// page ends early with a link that goes on from there.
const (
	jobsPageSize    = 50
	maxJobsPageSize = 500
	jobsScanBudget  = 5000
)

// jobsQuery is a job search, from the query string. Group "-" is the
// unnamed group ("" searches every group).
type jobsQuery struct {
	Tenant, State, Type, Group, Pool string
	ID                               uint64
	After                            string
	Limit                            int
}

// filtered reports whether the search reads through jobs it does not
// show (ListJobs has no type or group filter).
func (q jobsQuery) filtered() bool { return q.Type != "" || q.Group != "" }

// matches reports whether a job of the page passes the type and group
// filters.
func (q jobsQuery) matches(j *pb.Job) bool {
	switch {
	case q.Type != "" && !strings.Contains(j.JobType, q.Type):
		return false
	case q.Group == "-":
		return j.Group == ""
	case q.Group != "":
		return j.Group == q.Group
	}
	return true
}

// parseJobsQuery reads and checks a job search, naming the field at
// fault.
func parseJobsQuery(q url.Values) (jobsQuery, error) {
	out := jobsQuery{Tenant: strings.TrimSpace(q.Get("tenant")), State: q.Get("state"), Type: q.Get("type"), Group: strings.TrimSpace(q.Get("group")),
		Pool: strings.TrimSpace(q.Get("pool")), After: q.Get("after"), Limit: jobsPageSize}
	if out.Pool != "" {
		if err := sfq.ValidatePoolName(out.Pool); err != nil {
			return out, fmt.Errorf("pool: %s", err.Error())
		}
	}
	if out.Group != "" && out.Group != "-" {
		if err := sfq.ValidateGroupName(out.Group); err != nil {
			return out, fmt.Errorf("group: %s", err.Error())
		}
	}
	if out.Tenant != "" {
		if err := sfq.ValidateName("tenant", out.Tenant); err != nil {
			return out, err
		}
	}
	if out.State != "" {
		if _, err := sfq.ParseState(out.State); err != nil {
			return out, fmt.Errorf("state: %q (want scheduled, queued, assigned, running, completed, failed, cancelled, timed_out or expired)", out.State)
		}
	}
	if len(out.Type) > sfq.MaxNameLen {
		return out, fmt.Errorf("type: %d bytes, at most %d", len(out.Type), sfq.MaxNameLen)
	}
	if v := strings.TrimSpace(q.Get("id")); v != "" {
		id, err := strconv.ParseUint(v, 10, 64)
		if err != nil || id == 0 {
			return out, fmt.Errorf("id: %q is not a job ID (a positive integer)", v)
		}
		out.ID = id
	}
	if out.After != "" {
		if _, err := joblist.ParseListToken(out.After, true); err != nil {
			return out, fmt.Errorf("after: %q is not a page this console issued", out.After)
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxJobsPageSize {
			return out, fmt.Errorf("limit: %q (want 1..%d)", v, maxJobsPageSize)
		}
		out.Limit = n
	}
	return out, nil
}

// values is the query string of the search, on page after.
func (q jobsQuery) values(after string) string {
	v := url.Values{}
	for k, s := range map[string]string{"tenant": q.Tenant, "state": q.State, "type": q.Type, "group": q.Group, "pool": q.Pool, "after": after} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Limit != jobsPageSize {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v.Encode()
}

type jobsPage struct {
	frame
	Q      jobsQuery
	States []string
	Jobs   []*pb.Job
	// Next is the link to the next page ("" on the last); First to the
	// first page, when this is not it. Built of url.Values.Encode.
	Next, First template.URL
	// Scanned says how many jobs a type search read for this page.
	Scanned int
	Message string
}

func (s *Server) jobsPage(w http.ResponseWriter, r *http.Request) {
	id := requestIdentity(r)
	q, err := parseJobsQuery(r.URL.Query())
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	if id.Role == auth.RoleClient {
		if q.Tenant != "" && q.Tenant != id.Tenant {
			s.fail(w, r, http.StatusForbidden, "a client token of tenant "+id.Tenant+" may not search another tenant's jobs")
			return
		}
		q.Tenant = id.Tenant
	}
	p := jobsPage{frame: s.frame(w, r, "jobs", "jobs"), Q: q}
	for _, st := range jobStates {
		p.States = append(p.States, st.String())
	}
	ctx, cancel := callCtx(r)
	defer cancel()
	if q.ID != 0 {
		j, err := s.client.GetJob(ctx, &pb.GetJobRequest{Tenant: q.Tenant, JobId: q.ID})
		switch {
		case status.Code(err) == codes.NotFound:
			p.Message = fmt.Sprintf("no job %d", q.ID)
			if q.Tenant != "" {
				p.Message += " of tenant " + q.Tenant
			}
		case err != nil:
			s.failCall(w, r, err)
			return
		default:
			j.Payload = nil
			p.Jobs = []*pb.Job{j}
		}
		s.render(w, "jobs", 0, p)
		return
	}
	if q.After != "" {
		p.First = template.URL("/jobs?" + q.values(""))
	}
	jobs, next, scanned, err := s.searchJobs(ctx, q)
	if err != nil {
		s.failCall(w, r, err)
		return
	}
	p.Jobs, p.Scanned = jobs, scanned
	if next != "" {
		p.Next = template.URL("/jobs?" + q.values(next))
	}
	s.render(w, "jobs", 0, p)
}

// searchJobs reads one page of a search through ListJobs (from the
// leader): the jobs of the tenant (all, for an admin naming none) from
// the newest down, from q.After on, of q.State if set, whose type contains q.Type and
// of group q.Group if set, of pool q.Pool if set (ListJobs filters by
// pool). It returns the page token of the job after the last one shown
// ("" if none is left) and how many jobs it read.
func (s *Server) searchJobs(ctx context.Context, q jobsQuery) (jobs []*pb.Job, next string, scanned int, err error) {
	token := q.After
	for {
		size := q.Limit - len(jobs)
		if q.filtered() {
			size = min(rpc.MaxPage, jobsScanBudget-scanned)
		}
		resp, err := s.client.ListJobs(ctx, &pb.ListJobsRequest{Tenant: q.Tenant, State: q.State, Pool: q.Pool, PageSize: uint32(size), PageToken: token})
		if err != nil {
			return nil, "", scanned, err
		}
		for i, j := range resp.Jobs {
			scanned++
			if !q.matches(j) {
				continue
			}
			jobs = append(jobs, j)
			if len(jobs) == q.Limit {
				if i+1 < len(resp.Jobs) {
					return jobs, joblist.DownToken(sfq.JobID(resp.Jobs[i+1].JobId)), scanned, nil
				}
				return jobs, resp.NextPageToken, scanned, nil
			}
		}
		token = resp.NextPageToken
		if token == "" || scanned >= jobsScanBudget {
			return jobs, token, scanned, nil
		}
	}
}

// payloadShown bounds the payload bytes a job page shows.
const payloadShown = 4096

type jobPage struct {
	frame
	Job     *pb.Job
	Explain *pb.ExplainJobResponse
	// ExplainErr says why there is no explanation (the leader did not
	// answer).
	ExplainErr string
	Events     []*pb.Event
	// MoreEvents: more events than shown; Pruned: events before the
	// oldest retained one may be gone.
	MoreEvents, Pruned bool
	// EventsErr: this node could not catch up with the leader before
	// reading the events (they may trail the job).
	EventsErr string
	// Payload is the payload's first payloadShown bytes as text;
	// PayloadBytes its whole length.
	Payload      string
	PayloadBytes int
	Cut          bool
	// Output names where the worker keeps the whole output.
	Output string
	// CanCancel: the job is live, no cancel is asked yet, and the caller
	// may cancel it (it has a session to post from). CanRedrive: it is a
	// dead letter (failed, timed out, expired or cancelled); CanRunNow: it
	// is scheduled (delayed or backing off).
	CanCancel, CanRedrive, CanRunNow bool
}

// parseJobID reads the {id} of a path.
func parseJobID(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("job id: %q is not a job ID (a positive integer)", s)
	}
	return id, nil
}

// notYours answers a client token asking for a job of another tenant, or
// for one that does not exist: the same 403 either way, so the answer
// tells nothing of other tenants' jobs.
func (s *Server) notYours(w http.ResponseWriter, r *http.Request, job uint64) {
	s.fail(w, r, http.StatusForbidden, fmt.Sprintf("job %d is not a job of tenant %s", job, requestIdentity(r).Tenant))
}

func (s *Server) jobPage(w http.ResponseWriter, r *http.Request) {
	jobID, err := parseJobID(r.PathValue("id"))
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	id := requestIdentity(r)
	ctx, cancel := callCtx(r)
	defer cancel()
	j, err := s.client.GetJob(ctx, &pb.GetJobRequest{JobId: jobID})
	if err != nil {
		if status.Code(err) == codes.NotFound && id.Role == auth.RoleClient {
			s.notYours(w, r, jobID)
			return
		}
		s.failCall(w, r, err)
		return
	}
	p := jobPage{frame: s.frame(w, r, fmt.Sprintf("job %d", jobID), "jobs"), Job: j, PayloadBytes: len(j.Payload)}
	shown := j.Payload
	if len(shown) > payloadShown {
		shown, p.Cut = shown[:payloadShown], true
	}
	p.Payload = strings.ToValidUTF8(string(shown), string(utf8.RuneError))
	if ex, err := s.client.ExplainJob(ctx, &pb.ExplainJobRequest{JobId: jobID}); err != nil {
		p.ExplainErr = rpc.StatusLine(err)
	} else {
		p.Explain = ex
	}
	// The job was read from the leader, its events are read from this
	// node's state: once that has applied what the leader had, so that
	// the events show at least what the job does.
	if err := s.client.CatchUp(ctx); err != nil {
		p.EventsErr = rpc.StatusLine(err)
	}
	evs, more, pruned := jobEvents(s.node.FSM, sfq.JobID(jobID), sfq.Time(j.SubmittedAtMs), sfq.Time(j.EndedAtMs))
	for i := range evs {
		p.Events = append(p.Events, rpc.EventToPB(&evs[i], j.Tenant))
	}
	p.MoreEvents, p.Pruned = more, pruned
	if j.WorkerId != "" && j.Attempt > 0 {
		p.Output = fmt.Sprintf("job-%d-attempt-%d.log in the --log-dir of worker %s", j.JobId, j.Attempt, j.WorkerId)
	}
	st, _ := sfq.ParseState(j.State)
	may := p.CSRF != "" && mayOpenTenant(id, j.Tenant)
	p.CanCancel = (st == sfq.Queued || st == sfq.Scheduled || st.Live()) && j.Cancel == sfq.CancelNone.String() && may
	p.CanRedrive = st.DeadLetter() && may
	p.CanRunNow = st == sfq.Scheduled && may
	s.render(w, "job", 0, p)
}

// cancelAction cancels a job: an admin's, or a client's on its own
// tenant's job.
func (s *Server) cancelAction(w http.ResponseWriter, r *http.Request) {
	s.jobAction(w, r, "cancelled", func(ctx context.Context, job uint64) error {
		_, err := s.client.CancelJob(ctx, &pb.CancelJobRequest{JobId: job})
		return err
	})
}

// jobAction runs one action on the job of the path for its page's
// caller (an admin, or a client on its own tenant's job), logs it, and
// goes back to the job's page.
func (s *Server) jobAction(w http.ResponseWriter, r *http.Request, what string, act func(ctx context.Context, job uint64) error) {
	c := requestCaller(r)
	if herr := s.checkAction(w, r, c); herr != nil {
		s.fail(w, r, herr.status, herr.msg)
		return
	}
	jobID, err := parseJobID(r.PathValue("id"))
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := callCtx(r)
	defer cancel()
	if err := act(ctx, jobID); err != nil {
		if status.Code(err) == codes.NotFound && c.id.Role == auth.RoleClient {
			s.notYours(w, r, jobID)
			return
		}
		s.failCall(w, r, err)
		return
	}
	s.log.Info("console: job "+what, "job", jobID, "by", c.id.Role.String(), "tenant", c.id.Tenant)
	http.Redirect(w, r, "/jobs/"+strconv.FormatUint(jobID, 10), http.StatusSeeOther)
}

// redriveAction redrives a dead letter: back to queued at its job ID's
// place, its attempts counting on.
func (s *Server) redriveAction(w http.ResponseWriter, r *http.Request) {
	s.jobAction(w, r, "redriven", func(ctx context.Context, job uint64) error {
		// Redrive names the tenant (an admin's call must); the job's
		// own, read as the caller may.
		j, err := s.client.GetJob(ctx, &pb.GetJobRequest{JobId: job})
		if err != nil {
			return err
		}
		resp, err := s.client.Redrive(ctx, &pb.BulkJobsRequest{Tenant: j.Tenant, JobIds: []uint64{job}})
		if err != nil {
			return err
		}
		switch {
		case len(resp.Items) != 1 || resp.Items[0].Done:
		case resp.Items[0].State == "": // another tenant's job, or none
			return rpc.JobNotFound(job)
		default:
			return status.Errorf(codes.FailedPrecondition, "job %d was not redriven: %s", job, resp.Items[0].Reason)
		}
		return nil
	})
}

// runNowAction releases a scheduled job at once.
func (s *Server) runNowAction(w http.ResponseWriter, r *http.Request) {
	s.jobAction(w, r, "run now", func(ctx context.Context, job uint64) error {
		j, err := s.client.GetJob(ctx, &pb.GetJobRequest{JobId: job})
		if err != nil {
			return err
		}
		_, err = s.client.RunJobNow(ctx, &pb.RunJobNowRequest{Tenant: j.Tenant, JobId: job})
		return err
	})
}

// pauseAction pauses or resumes a tenant, or one group of it (the form's
// group): an admin, or the tenant's own client token (which cannot lift
// an admin's pause).
func (s *Server) pauseAction(w http.ResponseWriter, r *http.Request) {
	c := requestCaller(r)
	if herr := s.checkAction(w, r, c); herr != nil {
		s.fail(w, r, herr.status, herr.msg)
		return
	}
	name, action := r.PathValue("name"), r.PathValue("action")
	if action != "pause" && action != "resume" {
		s.fail(w, r, http.StatusNotFound, "no console action "+action)
		return
	}
	if !mayOpenTenant(c.id, name) {
		s.fail(w, r, http.StatusForbidden, "a client token of tenant "+c.id.Tenant+" may not pause another tenant")
		return
	}
	group := r.PostFormValue("group")
	ctx, cancel := callCtx(r)
	defer cancel()
	if _, err := s.client.Pause(ctx, &pb.PauseRequest{Tenant: name, Group: group, Resume: action == "resume"}); err != nil {
		s.failCall(w, r, err)
		return
	}
	s.log.Info("console: "+action, "tenant", name, "group", group, "by", c.id.Role.String())
	http.Redirect(w, r, "/tenants/"+url.PathEscape(name), http.StatusSeeOther)
}

type workersPage struct {
	frame
	Workers  []*pb.WorkerInfo
	LeaderID string
	// Page is this page's number (from 1), of Pages; Total the workers.
	Page, Pages, Total int
}

// workersPerPage is how many workers a page of the console lists.
const workersPerPage = 200

// workersPage lists the workers (an admin's page: they run every
// tenant's jobs).
func (s *Server) workersPage(w http.ResponseWriter, r *http.Request) {
	if requestIdentity(r).Role != auth.RoleAdmin {
		s.fail(w, r, http.StatusForbidden, "the workers page needs an admin token")
		return
	}
	ctx, cancel := callCtx(r)
	defer cancel()
	resp, err := s.workers.ListWorkers(ctx, &pb.ListWorkersRequest{})
	if err != nil {
		s.failCall(w, r, err)
		return
	}
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	pages := max(1, (len(resp.Workers)+workersPerPage-1)/workersPerPage)
	page = min(max(page, 1), pages)
	list := resp.Workers[min((page-1)*workersPerPage, len(resp.Workers)):min(page*workersPerPage, len(resp.Workers))]
	s.render(w, "workers", 0, workersPage{frame: s.frame(w, r, "workers", "workers"), Workers: list, LeaderID: resp.LeaderId,
		Page: page, Pages: pages, Total: len(resp.Workers)})
}

// drainAction drains or undrains a worker (admin only).
func (s *Server) drainAction(w http.ResponseWriter, r *http.Request) {
	c := requestCaller(r)
	if herr := s.checkAction(w, r, c); herr != nil {
		s.fail(w, r, herr.status, herr.msg)
		return
	}
	if c.id.Role != auth.RoleAdmin {
		s.fail(w, r, http.StatusForbidden, "draining a worker needs an admin token")
		return
	}
	worker, action := r.PathValue("id"), r.PathValue("action")
	if action != "drain" && action != "undrain" {
		s.fail(w, r, http.StatusNotFound, "no worker action "+strconv.Quote(action)+" (drain or undrain)")
		return
	}
	ctx, cancel := callCtx(r)
	defer cancel()
	if _, err := s.workers.Drain(ctx, &pb.DrainRequest{WorkerId: worker, Undrain: action == "undrain"}); err != nil {
		s.failCall(w, r, err)
		return
	}
	s.log.Info("console: worker "+action+"ed", "worker", worker)
	http.Redirect(w, r, "/workers", http.StatusSeeOther)
}
