package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"barista/fsm"
	pb "barista/proto"
)

// HTTPOptions configure the HTTP handler.
type HTTPOptions struct {
	// Pprof serves /debug/pprof/ (profiling; admin only once tokens are
	// configured).
	Pprof bool
	// MetricsAuth makes /metrics need an admin or metrics token.
	MetricsAuth bool
}

// HTTPHandler serves a node's HTTP address: /metrics (Prometheus),
// /healthz (the process is up), /readyz (the node can serve; see
// raftnode.Node.Health), /api/top (the live view as JSON), / (a read-only
// web page of fair shares and membership), /login, and /v1/ (the
// HTTP/JSON API, see gateway.go: its routes take the bearer header only,
// checked by the gRPC server they call; /v1/openapi.json is open). With
// tokens configured, / and /api/ need an admin token or a client token,
// which sees only its own tenant; /healthz and /readyz stay open, and
// /metrics too unless MetricsAuth is set.
func (s *Server) HTTPHandler(opt HTTPOptions) http.Handler {
	b := s.base
	mux := http.NewServeMux()
	metrics := promhttp.HandlerFor(b.node.Metrics.Registry, promhttp.HandlerOpts{})
	if opt.MetricsAuth {
		mux.HandleFunc("/metrics", s.guard(metricsRoles, false, metrics.ServeHTTP))
	} else {
		mux.Handle("/metrics", metrics)
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if ok, why := ready(&b); !ok {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("/api/top", s.guard(pageRoles, false, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		json.NewEncoder(w).Encode(topJSON(visibleTop(topView(&b, DefaultTopWindow), requestIdentity(r))))
	}))
	mux.Handle("/v1/", s.gatewayHandler())
	mux.HandleFunc("/login", s.login)
	mux.HandleFunc("/logout", s.logout)
	mux.HandleFunc("/", s.guard(pageRoles, true, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		pageHeaders(w)
		if err := pageTmpl.Execute(w, pageData(&b, requestIdentity(r), !s.auth.Open())); err != nil {
			b.log.Warn("web page", "error", err)
		}
	}))
	if opt.Pprof {
		for path, h := range map[string]http.HandlerFunc{"/debug/pprof/": pprof.Index, "/debug/pprof/cmdline": pprof.Cmdline,
			"/debug/pprof/profile": pprof.Profile, "/debug/pprof/symbol": pprof.Symbol, "/debug/pprof/trace": pprof.Trace} {
			mux.HandleFunc(path, s.guard(adminRoles, false, h))
		}
	}
	return mux
}

// visibleTop keeps what an identity may see: a client token only its own
// tenant.
func visibleTop(t *pb.TopResponse, id Identity) *pb.TopResponse {
	if id.Role == RoleAdmin {
		return t
	}
	own := t.Tenants[:0:0]
	for _, r := range t.Tenants {
		if r.Name == id.Tenant {
			own = append(own, r)
		}
	}
	t.Tenants = own
	return t
}

// ready reports whether this node can serve (raftnode.Node.Health): a
// leader is known, its log is writable, and it is within the configured
// lag of the leader's commit index.
func ready(b *base) (bool, string) {
	h := b.node.Health()
	return h.Ready, h.Reason
}

// TopJSON is the JSON form of the live view (barista top --once --json).
type TopJSON struct {
	LeaderID     string `json:"leader_id"`
	AppliedIndex uint64 `json:"applied_index"`
	WindowMs     int64  `json:"window_ms"`
	// FairnessSinceMs is the cluster time this node's fairness report
	// starts at (its start or its last snapshot load).
	FairnessSinceMs int64           `json:"fairness_since_ms"`
	Tenants         []TenantTopJSON `json:"tenants"`
}

// TenantTopJSON is one tenant's line in one class.
type TenantTopJSON struct {
	Name             string  `json:"name"`
	Tier             string  `json:"tier"`
	Class            string  `json:"class"`
	Weight           float64 `json:"weight"`
	Queued           uint32  `json:"queued"`
	Running          uint32  `json:"running"`
	Dispatches1m     uint64  `json:"dispatches_1m"`
	DispatchedCost1m int64   `json:"dispatched_cost_ms_1m"`
	Share            float64 `json:"share"`
	EntitledShare    float64 `json:"entitled_share"`
	// Ratio is the 1 min window's (null when undefined).
	Ratio    *float64 `json:"ratio"`
	Eligible bool     `json:"eligible"`
	// LagCPUSeconds is null while the tenant has no eligible work in the
	// class (the activation clamp will discard it).
	LagCPUSeconds *float64         `json:"lag_cpu_s"`
	Fairness      []FairWindowJSON `json:"fairness"`
}

// FairWindowJSON is one window of the fairness report; share, entitled
// and ratio are null when undefined.
type FairWindowJSON struct {
	Window         string   `json:"window"`
	SpanMs         int64    `json:"span_ms"`
	ChargedMs      int64    `json:"charged_ms"`
	ClassChargedMs int64    `json:"class_charged_ms"`
	BusyMs         int64    `json:"busy_ms"`
	Share          *float64 `json:"share"`
	Entitled       *float64 `json:"entitled"`
	Ratio          *float64 `json:"ratio"`
}

func topJSON(t *pb.TopResponse) TopJSON {
	out := TopJSON{LeaderID: t.LeaderId, AppliedIndex: t.AppliedIndex, WindowMs: t.WindowMs, FairnessSinceMs: t.FairnessSinceMs, Tenants: []TenantTopJSON{}}
	for _, r := range t.Tenants {
		tier, _ := fsm.TierFromPB(r.Tier)
		class, _ := fsm.ClassFromPB(r.JobClass)
		row := TenantTopJSON{Name: r.Name, Tier: tier.String(), Class: class.String(), Weight: r.Weight, Queued: r.Queued,
			Running: r.Running, Dispatches1m: r.Dispatches, DispatchedCost1m: r.DispatchedCostMs, Share: r.Share, EntitledShare: r.EntitledShare,
			Eligible: r.Eligible, Fairness: []FairWindowJSON{}}
		if r.Eligible {
			lag := float64(r.LagCpuMs) / 1000
			row.LagCPUSeconds = &lag
		}
		for i, w := range r.Windows {
			row.Fairness = append(row.Fairness, FairWindowJSON{Window: w.Window, SpanMs: w.SpanMs, ChargedMs: w.ChargedMs,
				ClassChargedMs: w.ClassChargedMs, BusyMs: w.BusyMs, Share: w.Share, Entitled: w.Entitled, Ratio: w.Ratio})
			if i == 0 {
				row.Ratio = w.Ratio
			}
		}
		out.Tenants = append(out.Tenants, row)
	}
	return out
}

// TopToJSON converts a Top response (the CLI uses it).
func TopToJSON(t *pb.TopResponse) TopJSON { return topJSON(t) }

type page struct {
	Node, State, Leader string
	Applied             uint64
	Time                string
	Top                 TopJSON
	Members             []pageMember
	// Who is signed in ("" without tokens); a client sees its own tenant
	// and no members.
	Who     string
	Session bool
	// Time is this node's wall clock; Lag says how far cluster time (the
	// clock of every deadline, which pauses while no leader runs) is
	// behind it as of the last applied entry, when a second or more.
	Lag string
}

type pageMember struct {
	ID, Raft, GRPC, HTTP string
	Leader               bool
	State                string // leader, follower, unreachable, unknown
	Contact, Lag         string
}

func pageData(b *base, id Identity, signedIn bool) page {
	leader, _ := b.node.Leader()
	p := page{Node: b.node.ID(), State: b.node.Raft().State().String(), Leader: leader, Applied: b.node.Raft().AppliedIndex(),
		Time: time.Now().UTC().Format("15:04:05 UTC"), Top: topJSON(visibleTop(topView(b, DefaultTopWindow), id)), Session: signedIn}
	if wall, cluster := b.node.FSM.WallClock(); wall != 0 && wall-cluster >= 1000 {
		p.Lag = (time.Duration(wall-cluster) * time.Millisecond).Round(100 * time.Millisecond).String()
	}
	if signedIn {
		p.Who = id.Role.String()
		if id.Role == RoleClient {
			p.Who += " of tenant " + id.Tenant
			return p
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	peers, err := b.leaderPeers(ctx)
	if err != nil {
		b.log.Debug("web page: peers from the leader", "error", err)
		peers, _ = peersView(b)
	}
	for _, m := range peers.GetPeers() {
		pm := pageMember{ID: m.Id, Raft: m.RaftAddr, GRPC: m.GrpcAddr, HTTP: m.HttpAddr, Leader: m.Leader, State: PeerState(m), Contact: "-", Lag: "-"}
		if m.Known && !m.Leader {
			pm.Contact = (time.Duration(m.LastContactMs) * time.Millisecond).String() + " ago"
			pm.Lag = strconv.FormatUint(m.Lag, 10)
		}
		p.Members = append(p.Members, pm)
	}
	return p
}

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"pct": func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) },
	"bar": func(f float64) string { return fmt.Sprintf("%.1f", 100*min(max(f, 0), 1)) },
	"w":   func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) },
	// entitled is the 1 min entitlement, "-" when no tenant had eligible
	// work in the class.
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
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="2">
<title>barista · {{.Node}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;background:#fafafa}
h1{font-size:20px;margin:0 0 4px} .sub{color:#666;margin-bottom:18px}
table{border-collapse:collapse;background:#fff;box-shadow:0 1px 2px #0002;margin-bottom:22px}
th,td{padding:6px 12px;text-align:right;border-bottom:1px solid #eee} th{background:#f0f0f0} td.l,th.l{text-align:left}
.bars{width:220px} .b{height:8px;border-radius:4px;margin:2px 0}
.got{background:#3b82f6} .ent{background:#d1d5db} .lead{font-weight:600;color:#0a7} .down{font-weight:600;color:#c00}
</style></head><body>
<h1>barista</h1>
<div class="sub">node <b>{{.Node}}</b> ({{.State}}) · leader <b>{{.Leader}}</b> · applied index {{.Applied}} · {{.Time}}{{if .Lag}} (cluster time {{.Lag}} behind: it pauses while no leader runs){{end}} · share: of the CPU charged in its class in the last minute (estimates, corrected at finish) · entitled: its weight among the tenants with eligible work, time-weighted · ratio: share / entitled over 1 min, 10 min, 1 h · lag: its tag behind virtual_now, in CPU seconds at its weight{{if .Session}} · signed in as {{.Who}} <form method="post" action="/logout" style="display:inline"><button type="submit">sign out</button></form>{{end}}</div>
<table id="tenants"><tr><th class="l">tenant</th><th class="l">tier</th><th class="l">class</th><th>weight</th><th>queued</th><th>running</th><th>dispatches (1m)</th><th>share</th><th>entitled</th><th>ratio 1m</th><th>10m</th><th>1h</th><th>lag</th><th class="l bars">share vs entitled</th></tr>
{{range .Top.Tenants}}<tr><td class="l">{{.Name}}</td><td class="l">{{.Tier}}</td><td class="l">{{.Class}}</td><td>{{w .Weight}}</td><td>{{.Queued}}</td><td>{{.Running}}</td><td>{{.Dispatches1m}}</td><td>{{pct .Share}}</td><td>{{entitled .}}</td>{{range .Fairness}}<td>{{ratio .Ratio}}</td>{{else}}<td>-</td><td>-</td><td>-</td>{{end}}<td>{{lag .LagCPUSeconds}}</td>
<td class="l bars"><div class="b got" style="width:{{bar .Share}}%"></div><div class="b ent" style="width:{{bar .EntitledShare}}%"></div></td></tr>
{{else}}<tr><td class="l" colspan="14">no tenants yet</td></tr>{{end}}
</table>
{{if .Members}}<table id="members"><tr><th class="l">member</th><th class="l">raft</th><th class="l">grpc</th><th class="l">http</th><th class="l">role</th><th>last contact</th><th>lag (entries)</th></tr>
{{range .Members}}<tr><td class="l">{{.ID}}</td><td class="l">{{.Raft}}</td><td class="l">{{.GRPC}}</td><td class="l">{{.HTTP}}</td><td class="l">{{if .Leader}}<span class="lead">leader</span>{{else if eq .State "unreachable"}}<span class="down">unreachable</span>{{else}}{{.State}}{{end}}</td><td>{{.Contact}}</td><td>{{.Lag}}</td></tr>{{end}}
</table>{{end}}
</body></html>
`))
