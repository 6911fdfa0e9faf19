package web

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/baristahq/barista/internal/inflight"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/status"
)

// Limits bound what callers can make a node's HTTP side hold: requests
// without a token, and console sessions (docs/security.md, "Limits"; the
// request bodies are bounded by the gRPC server's
// limits.max_message_bytes, rpc.Limits). A zero field takes its default.
type Limits struct {
	// HTTPUnauthenticated bounds the HTTP requests without a valid token
	// or session served at once (/healthz and /readyz are not counted);
	// more are answered 503 at once.
	HTTPUnauthenticated int
	// Sessions bounds the web console's sessions on the node, and
	// SessionsPerIdentity those of one identity (a client token's
	// tenant, the admin): its next login signs its oldest out. The
	// identities other than the admin hold at most Sessions −
	// SessionsPerIdentity, so the admin always finds room.
	Sessions, SessionsPerIdentity int
	// BodyBytes bounds the bytes of HTTP/JSON request bodies the node
	// holds while it reads and serves them, and BodyBytesPerIdentity
	// those of one caller: a request reserves its Content-Length (a body
	// without one, limits.max_message_bytes) before any of it is read;
	// over the caller's bound it is answered 429 with Retry-After, over
	// the node's 503, unread.
	BodyBytes, BodyBytesPerIdentity int64
	// HTTPRequestsPerIdentity and HTTPRequests bound the HTTP/JSON
	// requests (watches aside) in progress of one caller and in all, and
	// HTTPHeldReadsPerIdentity those of one caller held until the node
	// has applied the index they name (edgeshare.go).
	HTTPRequestsPerIdentity, HTTPRequests, HTTPHeldReadsPerIdentity int
}

// Defaults of Limits.
const (
	DefaultHTTPUnauthenticated = 128
	DefaultSessions            = 10_000
	DefaultSessionsPerIdentity = 32
	// DefaultBodyBytes and DefaultBodyBytesPerIdentity are those of the
	// gRPC side (rpc.DefaultRequestBytes): the API's bodies become its
	// requests.
	DefaultBodyBytes            = 256 << 20
	DefaultBodyBytesPerIdentity = 64 << 20
	// DefaultHTTPRequests leaves, of the gateway connection's 1,024
	// streams (rpc.DefaultStreamsPerConnection), the 512 of the watches
	// (rpc.DefaultWatchStreams) and some to spare.
	DefaultHTTPRequestsPerIdentity  = 64
	DefaultHTTPRequests             = 384
	DefaultHTTPHeldReadsPerIdentity = 16
)

// DefaultLimits returns every limit at its default.
func DefaultLimits() Limits {
	return Limits{HTTPUnauthenticated: DefaultHTTPUnauthenticated, Sessions: DefaultSessions, SessionsPerIdentity: DefaultSessionsPerIdentity,
		BodyBytes: DefaultBodyBytes, BodyBytesPerIdentity: DefaultBodyBytesPerIdentity,
		HTTPRequestsPerIdentity: DefaultHTTPRequestsPerIdentity, HTTPRequests: DefaultHTTPRequests, HTTPHeldReadsPerIdentity: DefaultHTTPHeldReadsPerIdentity}
}

// withDefaults gives each zero field its default.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	orDefault(&l.HTTPUnauthenticated, d.HTTPUnauthenticated)
	orDefault(&l.Sessions, d.Sessions)
	orDefault(&l.SessionsPerIdentity, d.SessionsPerIdentity)
	orDefault(&l.BodyBytes, d.BodyBytes)
	orDefault(&l.BodyBytesPerIdentity, d.BodyBytesPerIdentity)
	orDefault(&l.HTTPRequestsPerIdentity, d.HTTPRequestsPerIdentity)
	orDefault(&l.HTTPRequests, d.HTTPRequests)
	orDefault(&l.HTTPHeldReadsPerIdentity, d.HTTPHeldReadsPerIdentity)
	// The admin's share is kept out of the others'.
	l.SessionsPerIdentity = min(l.SessionsPerIdentity, max(l.Sessions/2, 1))
	return l
}

// orDefault sets *p to def unless it is positive.
func orDefault[T int | int64](p *T, def T) {
	if *p <= 0 {
		*p = def
	}
}

// limitMetrics count what the limits refused and what they hold.
type limitMetrics struct {
	httpRefused         *prometheus.CounterVec
	httpUnauthenticated prometheus.Gauge
	// sessions counts the console's sessions, sessionsEvicted those
	// signed out by a newer login of their identity, loginsRefused the
	// logins refused at limits.sessions.
	sessions                       prometheus.Gauge
	sessionsEvicted, loginsRefused prometheus.Counter
}

func newLimitMetrics(reg prometheus.Registerer) *limitMetrics {
	m := &limitMetrics{
		httpRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "barista_http_refused_total",
			Help: "HTTP requests refused by a limit before their body was read, by reason: unauthenticated (an API call without a known token), " +
				"unauthenticated_limit (limits.http_unauthenticated requests without a token were being served), body_too_large (over limits.max_message_bytes), " +
				"body_bytes_per_identity and body_bytes (the bodies in flight of the caller, or of the node, at limits.body_bytes_per_identity or limits.body_bytes)."},
			[]string{"reason"}),
		httpUnauthenticated: prometheus.NewGauge(prometheus.GaugeOpts{Name: "barista_http_unauthenticated_in_flight",
			Help: "HTTP requests without a valid token or session being served (at most limits.http_unauthenticated)."}),
	}
	m.sessions = prometheus.NewGauge(prometheus.GaugeOpts{Name: "barista_web_sessions",
		Help: "Web console sessions on this node (at most limits.sessions)."})
	m.sessionsEvicted = prometheus.NewCounter(prometheus.CounterOpts{Name: "barista_web_sessions_evicted_total",
		Help: "Web console sessions signed out because their identity signed in once more than limits.sessions_per_identity (its oldest goes)."})
	m.loginsRefused = prometheus.NewCounter(prometheus.CounterOpts{Name: "barista_web_logins_refused_total",
		Help: "Web console logins refused because the identities other than the admin held limits.sessions − limits.sessions_per_identity sessions."})
	for _, r := range []string{"unauthenticated", "unauthenticated_limit", "body_too_large", "body_bytes_per_identity", "body_bytes"} {
		m.httpRefused.WithLabelValues(r)
	}
	reg.MustRegister(m.httpRefused, m.httpUnauthenticated, m.sessions, m.sessionsEvicted, m.loginsRefused)
	return m
}

// limitUnauthenticated serves at most Limits.HTTPUnauthenticated
// requests without a credential at once, and answers more with 503 at
// once, without reading their bodies. Health and readiness probes are
// served regardless: they read nothing and must answer under attack. A
// request with a credential this node knows (every request on an open
// server) marks its connection as one with a token's call
// (connAuthenticated).
func (s *Server) limitUnauthenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
			next.ServeHTTP(w, r)
			return
		}
		if c, herr := s.httpIdentity(r, true); herr == nil {
			if s.connAuthenticated(w, r, c.id) {
				next.ServeHTTP(w, r)
			}
			return
		}
		select {
		case s.unauthenticated <- struct{}{}:
		default:
			s.limitMetrics.httpRefused.WithLabelValues("unauthenticated_limit").Inc()
			w.Header().Set("Retry-After", "1")
			closeUnread(w, r)
			writeHTTPError(w, newHTTPErr(http.StatusServiceUnavailable, "UNAVAILABLE",
				fmt.Sprintf("this node is serving %d requests without a token already (limits.http_unauthenticated); try again later", cap(s.unauthenticated))))
			return
		}
		s.limitMetrics.httpUnauthenticated.Inc()
		defer func() {
			s.limitMetrics.httpUnauthenticated.Dec()
			<-s.unauthenticated
		}()
		next.ServeHTTP(w, r)
	})
}

// closeUnread closes the connection after an answer that leaves the
// request's body unread: the server then neither drains it nor reads
// another request from it.
func closeUnread(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
}

// apiAuth marks every answer of the API as private and not to be
// sniffed (payloads and names are tenant-written), and answers a call
// without a token this node knows with 401 before anything of its body
// is read. The gRPC server checks the token again, and the roles, as
// for any call.
func (s *Server) apiAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		if !s.auth.Open() {
			if _, err := s.auth.Authenticate(r.Header.Values("Authorization")); err != nil {
				s.limitMetrics.httpRefused.WithLabelValues("unauthenticated").Inc()
				closeUnread(w, r)
				writeHTTPError(w, newHTTPErr(http.StatusUnauthorized, "UNAUTHENTICATED", status.Convert(err).Message()))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// apiBody is an API request's body, read at most once and at most
// limit bytes (see apiMarshaler.NewDecoder).
type apiBody struct {
	io.ReadCloser
	limit    int64
	length   int64 // Content-Length, -1 if unknown (chunked)
	tooLarge bool
	// refused is the field of the body that the decoder refused, which
	// the gateway's status (made from the error's text alone) does not
	// carry: apiError adds it to the answer.
	refused string
}

type apiBodyKey struct{}

// errBodyTooLarge is the refusal of a body over the limit; apiError
// answers it 413.
func (b *apiBody) errTooLarge() error {
	return fmt.Errorf("request body: more than %d bytes (limits.max_message_bytes)", b.limit)
}

// readAll reads the whole body into one buffer that grows as its bytes
// arrive: a Content-Length is what a caller says, not what it sends, so
// it sizes no more than the first bodyChunk.
func (b *apiBody) readAll() ([]byte, error) {
	var buf bytes.Buffer
	if b.length > 0 {
		buf.Grow(int(min(b.length, bodyChunk)) + 1) // +1: ReadFrom's EOF read needs no growth
	}
	_, err := buf.ReadFrom(b.ReadCloser)
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		b.tooLarge = true
		return nil, b.errTooLarge()
	}
	return buf.Bytes(), err
}

// bodyChunk is the most a request's buffer takes before its bytes
// arrive.
const bodyChunk = 64 << 10

// bodyTooLarge reports whether the call of ctx was refused for its
// body's size.
func bodyTooLarge(ctx context.Context) (*apiBody, bool) {
	b, _ := ctx.Value(apiBodyKey{}).(*apiBody)
	return b, b != nil && b.tooLarge
}

// bodyField is the field of the request's body the decoder refused ("":
// none).
func bodyField(ctx context.Context) string {
	if b, _ := ctx.Value(apiBodyKey{}).(*apiBody); b != nil {
		return b.refused
	}
	return ""
}

// reserveBody reserves a request's body bytes (its Content-Length, or
// limit for a body without one) from its caller's and the node's budget
// before any of it is read (Limits.BodyBytes). Over a bound it answers
// (429 or 503, with Retry-After) and reports false.
func (s *Server) reserveBody(w http.ResponseWriter, r *http.Request, limit int64) (release func(), ok bool) {
	n := r.ContentLength
	switch {
	case n == 0:
		return func() {}, true
	case n < 0 || n > limit:
		n = limit
	}
	key := ""
	if id, err := s.auth.Authenticate(r.Header.Values("Authorization")); err == nil {
		key = id.Key()
	}
	release, which := s.bodies.Reserve(key, n)
	if which == inflight.None {
		return release, true
	}
	w.Header().Set("Retry-After", "1")
	closeUnread(w, r)
	if which == inflight.PerIdentity {
		s.limitMetrics.httpRefused.WithLabelValues("body_bytes_per_identity").Inc()
		writeHTTPError(w, newHTTPErr(http.StatusTooManyRequests, "RESOURCE_EXHAUSTED",
			"this caller's request bodies in flight are at their bound (limits.body_bytes_per_identity); retry once they are in"))
	} else {
		s.limitMetrics.httpRefused.WithLabelValues("body_bytes").Inc()
		writeHTTPError(w, newHTTPErr(http.StatusServiceUnavailable, "UNAVAILABLE",
			"this node holds its bound of request bodies in flight (limits.body_bytes); retry, or ask another node"))
	}
	return nil, false
}
