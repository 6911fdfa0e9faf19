package web

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/internal/auth"
	"github.com/baristahq/barista/internal/wire"
)

// Who may use each part of the HTTP listener once tokens are configured:
// the web page and /api/ need an admin token, or a client token (which
// sees only its own tenant); /metrics is open unless MetricsAuth is set
// (then admin or metrics tokens); /healthz and /readyz are always open;
// /debug/pprof/ needs an admin token.
var (
	pageRoles    = []auth.Role{auth.RoleAdmin, auth.RoleClient}
	metricsRoles = []auth.Role{auth.RoleAdmin, auth.RoleMetrics}
	adminRoles   = []auth.Role{auth.RoleAdmin}
)

// sessionCookie names the web console's session cookie. Its value is a
// random session ID (never the token); it is HttpOnly, Secure and
// SameSite=Strict.
const (
	sessionCookie = "barista_session"
	sessionTTL    = 12 * time.Hour
)

type httpSession struct {
	id auth.Identity
	// token is the secret the session signed in with: the console's
	// reads and actions go to the leader with it, as an API call would.
	// It never leaves this process.
	token   string
	expires time.Time
}

// sessions holds the web console's logins on this node (a restart logs
// everyone out). One identity (a client token's tenant, every admin
// token) holds at most perIdentity of them: its next login signs its
// oldest session out. Identities other than the admin hold at most max
// − perIdentity together, so the admin can always sign in.
type sessions struct {
	mu   sync.Mutex
	m    map[[32]byte]httpSession
	byID map[auth.Identity][][32]byte // each identity's sessions, oldest first

	max, perIdentity int
	metrics          *limitMetrics
}

// adminIdentity is every admin token's identity.
var adminIdentity = auth.Identity{Role: auth.RoleAdmin}

func (s *sessions) create(id auth.Identity, token string, now time.Time) (string, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	key := sha256.Sum256(raw[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m, s.byID = map[[32]byte]httpSession{}, map[auth.Identity][][32]byte{}
	}
	for len(s.byID[id]) >= s.perIdentity {
		s.remove(s.byID[id][0])
		s.metrics.sessionsEvicted.Inc()
	}
	others := func() int { return len(s.m) - len(s.byID[adminIdentity]) }
	if id != adminIdentity && others() >= s.max-s.perIdentity {
		for k, v := range s.m {
			if now.After(v.expires) {
				s.remove(k)
			}
		}
		if others() >= s.max-s.perIdentity {
			s.metrics.loginsRefused.Inc()
			return "", errTooManySessions
		}
	}
	s.m[key] = httpSession{id: id, token: token, expires: now.Add(sessionTTL)}
	s.byID[id] = append(s.byID[id], key)
	s.metrics.sessions.Set(float64(len(s.m)))
	return hex.EncodeToString(raw[:]), nil
}

// remove ends a session; the caller holds mu.
func (s *sessions) remove(key [32]byte) {
	sess, ok := s.m[key]
	if !ok {
		return
	}
	delete(s.m, key)
	keys := slices.DeleteFunc(s.byID[sess.id], func(k [32]byte) bool { return k == key })
	if len(keys) == 0 {
		delete(s.byID, sess.id)
	} else {
		s.byID[sess.id] = keys
	}
	s.metrics.sessions.Set(float64(len(s.m)))
}

func (s *sessions) lookup(value string, now time.Time) (httpSession, bool) {
	raw, err := hex.DecodeString(value)
	if err != nil || len(raw) != 32 {
		return httpSession{}, false
	}
	key := sha256.Sum256(raw)
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.m[key]
	if !ok || now.After(sess.expires) {
		s.remove(key)
		return httpSession{}, false
	}
	return sess, true
}

func (s *sessions) delete(value string) {
	raw, err := hex.DecodeString(value)
	if err != nil {
		return
	}
	s.mu.Lock()
	s.remove(sha256.Sum256(raw))
	s.mu.Unlock()
}

// httpErr is a refusal as the HTTP side answers it: its HTTP status and
// the JSON body {"code", "message", "reason", "field", "retry_after_ms"}
// (the gRPC code's name; the message as it is; the cause a client
// branches on and the request field at fault, "" when the refusal names
// none; how long to wait before trying again, 0 when it asks nothing).
type httpErr struct {
	status       int
	code         string
	msg          string
	reason       string
	field        string
	retryAfterMs int64
}

// newHTTPErr is a refusal of the HTTP side's own, with no reason or
// field.
func newHTTPErr(status int, code, msg string) *httpErr {
	return &httpErr{status: status, code: code, msg: msg}
}

// errorBody is the JSON of an httpErr.
type errorBody struct {
	Code         string `json:"code"`
	Message      string `json:"message"`
	Reason       string `json:"reason"`
	Field        string `json:"field"`
	RetryAfterMs int64  `json:"retry_after_ms"`
}

// body is e's JSON body.
func (e *httpErr) body() errorBody {
	return errorBody{Code: e.code, Message: e.msg, Reason: e.reason, Field: e.field, RetryAfterMs: e.retryAfterMs}
}

// statusError is the httpErr of a gRPC status: its code's name and HTTP
// status, its message, and what its details say (wire.RefusalOf).
func statusError(st *status.Status) *httpErr {
	r := wire.RefusalOf(st)
	e := &httpErr{status: httpStatus(st.Code()), code: wire.CodeName(st.Code()), msg: st.Message(), reason: r.Reason, field: r.Field}
	if r.HasRetry {
		e.retryAfterMs = max(r.RetryAfter.Milliseconds(), 1)
	}
	return e
}

var errTooManySessions = newHTTPErr(http.StatusServiceUnavailable, "UNAVAILABLE", "too many web sessions on this node (limits.sessions); try again later")

func (e *httpErr) Error() string { return e.msg }

// writeHTTPError answers with e's status and JSON body.
func writeHTTPError(w http.ResponseWriter, e *httpErr) {
	w.Header().Set("Content-Type", "application/json")
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="barista"`)
	}
	w.WriteHeader(e.status)
	json.NewEncoder(w).Encode(e.body())
}

// caller is who an HTTP request comes from: its identity, the secret it
// authenticated with (a bearer header's or its session's; "" in open
// mode), which the console's calls to the leader carry as an API call
// would, and the value its CSRF token is bound to: the session cookie,
// or in open mode the browser's own CSRF cookie ("" for a bearer header:
// no console action then).
type caller struct {
	id      auth.Identity
	token   string
	session string
}

// httpIdentity identifies an HTTP request: the bearer header, or (where
// cookies are allowed: the web pages) the session cookie.
func (s *Server) httpIdentity(r *http.Request, cookies bool) (caller, *httpErr) {
	a := s.auth
	if a.Open() {
		c := caller{id: auth.Identity{Role: auth.RoleAdmin}}
		if ck, err := r.Cookie(openCSRFCookie); err == nil && cookies && validCookieValue(ck.Value) {
			c.session = "open:" + ck.Value
		}
		return c, nil
	}
	if h := r.Header.Get("Authorization"); h != "" {
		secret, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			return caller{}, newHTTPErr(http.StatusUnauthorized, "UNAUTHENTICATED", "the Authorization header must be \"Bearer TOKEN\"")
		}
		id, ok := a.Identify(secret)
		if !ok {
			return caller{}, newHTTPErr(http.StatusUnauthorized, "UNAUTHENTICATED", "unknown token")
		}
		return caller{id: id, token: secret}, nil
	}
	if cookies {
		if c, err := r.Cookie(sessionCookie); err == nil {
			if sess, ok := s.sessions.lookup(c.Value, time.Now()); ok {
				return caller{id: sess.id, token: sess.token, session: c.Value}, nil
			}
		}
	}
	return caller{}, newHTTPErr(http.StatusUnauthorized, "UNAUTHENTICATED", "missing bearer token (Authorization: Bearer TOKEN)")
}

type httpCallerKey struct{}

// guard serves h only to the given roles. With cookies, a browser without
// a session is sent to the login page instead of a 401.
func (s *Server) guard(roles []auth.Role, cookies bool, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, herr := s.httpIdentity(r, cookies)
		if herr != nil {
			if cookies && r.Method == http.MethodGet && r.Header.Get("Authorization") == "" {
				http.Redirect(w, r, "/login", http.StatusSeeOther)
				return
			}
			writeHTTPError(w, herr)
			return
		}
		if !slices.Contains(roles, c.id.Role) {
			writeHTTPError(w, newHTTPErr(http.StatusForbidden, "PERMISSION_DENIED", "a "+c.id.Role.String()+" token may not open "+r.URL.Path))
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), httpCallerKey{}, c)))
	}
}

func requestCaller(r *http.Request) caller {
	c, _ := r.Context().Value(httpCallerKey{}).(caller)
	return c
}

func requestIdentity(r *http.Request) auth.Identity { return requestCaller(r).id }

// openCSRFCookie holds, without tokens (--insecure-dev), a random value
// per browser that its CSRF token is bound to: even an open development
// server takes no action a page of another site forged.
const openCSRFCookie = "barista_csrf"

func validCookieValue(v string) bool {
	raw, err := hex.DecodeString(v)
	return err == nil && len(raw) == 32
}

// cookieSecure says whether a cookie set in answer to r is marked
// Secure: always, except over plain HTTP to a host that is not loopback
// (served so only with --insecure-http), where a browser would never
// store a Secure cookie and signing in could not work. Browsers treat
// loopback addresses as secure contexts.
func cookieSecure(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// ensureOpenCSRF gives a browser of an open server its CSRF cookie if it
// has none yet, and returns the caller bound to it.
func (s *Server) ensureOpenCSRF(w http.ResponseWriter, r *http.Request, c caller) caller {
	if !s.auth.Open() || c.session != "" {
		return c
	}
	var raw [32]byte
	rand.Read(raw[:]) // never returns an error
	v := hex.EncodeToString(raw[:])
	http.SetCookie(w, &http.Cookie{Name: openCSRFCookie, Value: v, Path: "/", HttpOnly: true, Secure: cookieSecure(r), SameSite: http.SameSiteStrictMode})
	c.session = "open:" + v
	return c
}

// csrfToken is the CSRF token of a session: an HMAC of its cookie under
// this server's key ("" without a session). Every console form carries
// it; every console action checks it.
func (s *Server) csrfToken(session string) string {
	if session == "" {
		return ""
	}
	m := hmac.New(sha256.New, s.csrfKey[:])
	m.Write([]byte("barista console csrf\x00"))
	m.Write([]byte(session))
	return hex.EncodeToString(m.Sum(nil))
}

// checkAction admits a console action (a POST): from this origin, with
// the session's CSRF token, compared in constant time. The body is
// small: a CSRF token and a few fields.
func (s *Server) checkAction(w http.ResponseWriter, r *http.Request, c caller) *httpErr {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		return newHTTPErr(http.StatusMethodNotAllowed, "INVALID_ARGUMENT", "console actions are POSTs")
	}
	if !sameOrigin(r) {
		return newHTTPErr(http.StatusForbidden, "PERMISSION_DENIED", "cross-origin action refused")
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	want := s.csrfToken(c.session)
	got := r.PostFormValue("csrf")
	if want == "" || !hmac.Equal([]byte(got), []byte(want)) {
		return newHTTPErr(http.StatusForbidden, "PERMISSION_DENIED", "missing or wrong CSRF token: act from the console's own pages while signed in")
	}
	return nil
}

// pageHeaders are set on every HTML page: tenant-written text is shown
// there, so no script runs at all, and styles come only from the
// console's own stylesheet.
func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: under no-referrer a browser sends
	// "Origin: null" with the page's own form posts, which sameOrigin
	// must refuse. Under same-origin a post from this origin carries it,
	// one from anywhere else carries null, and no other site ever sees
	// a console URL as a referrer.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// sameOrigin refuses a form post from another site (login CSRF): a
// browser sends Origin on every POST.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return o == ""
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if s.auth.Open() {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	switch r.Method {
	case http.MethodGet:
		pageHeaders(w)
		consoleTmpl.ExecuteTemplate(w, "login", loginPage{Node: s.node.ID()})
	case http.MethodPost:
		if !sameOrigin(r) {
			writeHTTPError(w, newHTTPErr(http.StatusForbidden, "PERMISSION_DENIED", "cross-origin login refused"))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 4096)
		token := strings.TrimSpace(r.PostFormValue("token"))
		id, ok := s.auth.Identify(token)
		if !ok || (id.Role != auth.RoleAdmin && id.Role != auth.RoleClient) {
			pageHeaders(w)
			w.WriteHeader(http.StatusUnauthorized)
			consoleTmpl.ExecuteTemplate(w, "login", loginPage{Node: s.node.ID(), Failed: true})
			return
		}
		value, err := s.sessions.create(id, token, time.Now())
		if err != nil {
			writeHTTPError(w, err.(*httpErr))
			return
		}
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: value, Path: "/", MaxAge: int(sessionTTL.Seconds()),
			HttpOnly: true, Secure: cookieSecure(r), SameSite: http.SameSiteStrictMode})
		http.Redirect(w, r, "/", http.StatusSeeOther)
	default:
		w.Header().Set("Allow", "GET, POST")
		writeHTTPError(w, newHTTPErr(http.StatusMethodNotAllowed, "INVALID_ARGUMENT", "use GET or POST"))
	}
}

// logout ends the session: a POST with its CSRF token, like every
// console action (a page of another site cannot sign anyone out).
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if c, herr := s.httpIdentity(r, true); herr == nil && c.session != "" && !s.auth.Open() {
		if herr := s.checkAction(w, r, c); herr != nil {
			writeHTTPError(w, herr)
			return
		}
		s.sessions.delete(c.session)
	} else if r.Method != http.MethodPost || !sameOrigin(r) {
		writeHTTPError(w, newHTTPErr(http.StatusForbidden, "PERMISSION_DENIED", "log out with a same-origin POST"))
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: cookieSecure(r), SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

type loginPage struct {
	Node   string
	Failed bool
}
