// Package web is everything a node serves on its HTTP address
// (--http-addr): the HTTP/JSON API (gateway.go: the routes grpc-gateway
// generates, under /v1/), the web console (console.go: pages, login,
// sessions and CSRF in httpauth.go, the share history and its charts in
// history.go, the templates and stylesheet in assets/), /metrics,
// /healthz, /readyz and /api/top, and the bounds of what callers can make
// it hold (limits.go). It holds no state of the cluster's: it calls the
// node's gRPC services in this process (package rpc), with each caller's
// identity and token, so that a follower's console and API forward to the
// leader as a gRPC call to that follower would.
package web

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/baristahq/barista/internal/auth"
	"github.com/baristahq/barista/internal/inflight"
	"github.com/baristahq/barista/internal/share"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/rpc"
)

// Options configure a node's HTTP side.
type Options struct {
	// Pprof serves /debug/pprof/ (profiling; admin only once tokens are
	// configured).
	Pprof bool
	// MetricsAuth makes /metrics need an admin or metrics token.
	MetricsAuth bool
	// Limits bound what callers can make it hold (zero fields: the
	// defaults).
	Limits Limits
	// Logger, if set, is its logger (by default the gRPC server's).
	Logger hclog.Logger
}

// Server is a node's HTTP side, an http.Handler.
type Server struct {
	srv     *rpc.Server
	node    *raftnode.Node
	auth    *rpc.Auth
	log     hclog.Logger
	handler http.Handler
	// The services, called in this process with each caller's identity
	// and token (callCtx).
	client  *rpc.ClientService
	workers *rpc.WorkerService
	// limits are the HTTP limits; maxBody bounds an API request's body
	// (limits.max_message_bytes), stall a write to its client
	// (limits.watch_stall_timeout); unauthenticated holds a token per
	// request without a credential being served.
	limits          Limits
	maxBody         int64
	stall           time.Duration
	limitMetrics    *limitMetrics
	unauthenticated chan struct{}
	// bodies holds the request bodies' reservations (reserveBody);
	// apiCalls and heldReads the API requests in progress and those
	// held for an index (edgeshare.go).
	bodies              *inflight.Budget
	apiCalls, heldReads *share.Limiter
	sessions            sessions
	// csrfKey signs the console's CSRF tokens (see csrfToken); history
	// holds the fair shares sampled for the overview's chart.
	csrfKey [32]byte
	history shareHistory
}

// New builds the HTTP side of srv's node: /metrics (Prometheus),
// /healthz (the process is up), /readyz (the node can serve; see
// raftnode.Node.Health), /api/top (the live view as JSON), the web
// console (/, /tenants/, /jobs, /workers: see console.go), /login,
// /logout, and /v1/ (the HTTP/JSON API, see gateway.go: its routes take
// the bearer header only, checked by the gRPC server they call;
// /v1/openapi.json is open). With tokens configured, the console and
// /api/ need an admin token or a client token, which sees only its own
// tenant; /healthz and /readyz stay open, and /metrics too unless
// MetricsAuth is set. Requests without a credential are served at most
// Limits.HTTPUnauthenticated at once (limits.go). Its metrics join the
// node's registry; it samples the shares for the console's charts until
// srv stops. One node has one.
func New(srv *rpc.Server, opt Options) *Server {
	limits := opt.Limits.withDefaults()
	node := srv.Node()
	s := &Server{srv: srv, node: node, auth: srv.Auth(), log: opt.Logger, client: srv.Client(), workers: srv.Workers(),
		limits: limits, maxBody: int64(srv.Limits().MaxMessageBytes), stall: srv.Limits().WatchStall,
		limitMetrics: newLimitMetrics(node.Metrics.Registry), unauthenticated: make(chan struct{}, limits.HTTPUnauthenticated),
		bodies: inflight.New("http_body", limits.BodyBytesPerIdentity, limits.BodyBytes, node.Metrics.Registry),
		apiCalls: share.New("http_requests_in_progress", "HTTP/JSON requests in progress, watches aside (at most limits.http_requests_per_identity of one caller, limits.http_requests in all).",
			limits.HTTPRequestsPerIdentity, limits.HTTPRequests, node.Metrics.Registry),
		heldReads: share.New("http_held_reads", "HTTP/JSON reads held until this node has applied the index they name (at most limits.http_held_reads_per_identity of one caller).",
			limits.HTTPHeldReadsPerIdentity, 0, node.Metrics.Registry)}
	if s.log == nil {
		s.log = srv.Logger()
	}
	s.sessions.max, s.sessions.perIdentity, s.sessions.metrics = limits.Sessions, limits.SessionsPerIdentity, s.limitMetrics
	rand.Read(s.csrfKey[:]) // crypto/rand.Read never returns an error
	s.handler = s.routes(opt)
	srv.Go(s.sampleShares)
	return s
}

// ServeHTTP serves a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// routes is the handler of every path.
func (s *Server) routes(opt Options) http.Handler {
	mux := http.NewServeMux()
	metrics := promhttp.HandlerFor(s.node.Metrics.Registry, promhttp.HandlerOpts{})
	if opt.MetricsAuth {
		mux.HandleFunc("/metrics", s.guard(metricsRoles, false, metrics.ServeHTTP))
	} else {
		mux.Handle("/metrics", metrics)
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		// Ready: a leader is known, the log is writable, and the node is
		// within the configured lag of the leader's commit index.
		if h := s.node.Health(); !h.Ready {
			http.Error(w, h.Reason, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("/api/top", s.guard(pageRoles, false, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		json.NewEncoder(w).Encode(topJSON(visibleTop(s.srv.LocalTop(rpc.DefaultTopWindow), requestIdentity(r))))
	}))
	mux.Handle("/v1/", s.gatewayHandler())
	mux.HandleFunc("/login", s.login)
	mux.HandleFunc("/logout", s.logout)
	s.consoleRoutes(mux)
	if opt.Pprof {
		for path, h := range map[string]http.HandlerFunc{"/debug/pprof/": pprof.Index, "/debug/pprof/cmdline": pprof.Cmdline,
			"/debug/pprof/profile": pprof.Profile, "/debug/pprof/symbol": pprof.Symbol, "/debug/pprof/trace": pprof.Trace} {
			mux.HandleFunc(path, s.guard(adminRoles, false, h))
		}
	}
	return s.limitUnauthenticated(mux)
}

// visibleTop keeps what an identity may see: a client token only its own
// tenant.
func visibleTop(t *pb.TopResponse, id auth.Identity) *pb.TopResponse {
	if id.Role == auth.RoleAdmin {
		return t
	}
	own := t.Tenants[:0:0]
	for _, r := range t.Tenants {
		if r.Name == id.Tenant {
			own = append(own, r)
		}
	}
	// The pools' jobs and workers are every tenant's: an admin's to see.
	// So are the resources' (their holders and tenants' limits).
	t.Tenants, t.Pools, t.Resources = own, nil, nil
	// A pool's fairness error is the pool's; the row it is in names
	// another tenant only to an admin.
	for i, e := range t.FairnessErrors {
		if e.Tenant != id.Tenant {
			t.FairnessErrors[i] = &pb.FairnessError{Pool: e.Pool, Window: e.Window, Defined: e.Defined, Error: e.Error}
		}
	}
	return t
}
