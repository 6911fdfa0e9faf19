package rpc

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Who may use each part of the HTTP listener once tokens are configured:
// the web page and /api/ need an admin token, or a client token (which
// sees only its own tenant); /metrics is open unless MetricsAuth is set
// (then admin or metrics tokens); /healthz and /readyz are always open;
// /debug/pprof/ needs an admin token.
var (
	pageRoles    = []Role{RoleAdmin, RoleClient}
	metricsRoles = []Role{RoleAdmin, RoleMetrics}
	adminRoles   = []Role{RoleAdmin}
)

// sessionCookie names the web console's session cookie. Its value is a
// random session ID (never the token); it is HttpOnly, Secure and
// SameSite=Strict.
const (
	sessionCookie = "barista_session"
	sessionTTL    = 12 * time.Hour
	maxSessions   = 10_000
)

type httpSession struct {
	id      Identity
	expires time.Time
}

// sessions holds the web console's logins on this node (a restart logs
// everyone out).
type sessions struct {
	mu sync.Mutex
	m  map[[32]byte]httpSession
}

func (s *sessions) create(id Identity, now time.Time) (string, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	key := sha256.Sum256(raw[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[[32]byte]httpSession{}
	}
	if len(s.m) >= maxSessions {
		for k, v := range s.m {
			if now.After(v.expires) {
				delete(s.m, k)
			}
		}
		if len(s.m) >= maxSessions {
			return "", errTooManySessions
		}
	}
	s.m[key] = httpSession{id: id, expires: now.Add(sessionTTL)}
	return hex.EncodeToString(raw[:]), nil
}

func (s *sessions) lookup(value string, now time.Time) (Identity, bool) {
	raw, err := hex.DecodeString(value)
	if err != nil || len(raw) != 32 {
		return Identity{}, false
	}
	key := sha256.Sum256(raw)
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.m[key]
	if !ok || now.After(sess.expires) {
		delete(s.m, key)
		return Identity{}, false
	}
	return sess.id, true
}

func (s *sessions) delete(value string) {
	raw, err := hex.DecodeString(value)
	if err != nil {
		return
	}
	s.mu.Lock()
	delete(s.m, sha256.Sum256(raw))
	s.mu.Unlock()
}

type httpErr struct {
	status int
	code   string
	msg    string
}

var errTooManySessions = &httpErr{http.StatusServiceUnavailable, "UNAVAILABLE", "too many web sessions on this node; try again later"}

func (e *httpErr) Error() string { return e.msg }

// writeHTTPError answers with {"code": NAME, "message": ...}.
func writeHTTPError(w http.ResponseWriter, e *httpErr) {
	w.Header().Set("Content-Type", "application/json")
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="barista"`)
	}
	w.WriteHeader(e.status)
	json.NewEncoder(w).Encode(map[string]string{"code": e.code, "message": e.msg})
}

// httpIdentity identifies an HTTP request: the bearer header, or (where
// cookies are allowed: the web pages) the session cookie.
func (s *Server) httpIdentity(r *http.Request, cookies bool) (Identity, *httpErr) {
	a := s.auth
	if a.Open() {
		return Identity{Role: RoleAdmin}, nil
	}
	if h := r.Header.Get("Authorization"); h != "" {
		secret, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			return Identity{}, &httpErr{http.StatusUnauthorized, "UNAUTHENTICATED", "the Authorization header must be \"Bearer TOKEN\""}
		}
		id, ok := a.Identify(secret)
		if !ok {
			return Identity{}, &httpErr{http.StatusUnauthorized, "UNAUTHENTICATED", "unknown token"}
		}
		return id, nil
	}
	if cookies {
		if c, err := r.Cookie(sessionCookie); err == nil {
			if id, ok := s.web.lookup(c.Value, time.Now()); ok {
				return id, nil
			}
		}
	}
	return Identity{}, &httpErr{http.StatusUnauthorized, "UNAUTHENTICATED", "missing bearer token (Authorization: Bearer TOKEN)"}
}

type httpIdentityKey struct{}

// guard serves h only to the given roles. With cookies, a browser without
// a session is sent to the login page instead of a 401.
func (s *Server) guard(roles []Role, cookies bool, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, herr := s.httpIdentity(r, cookies)
		if herr != nil {
			if cookies && r.Method == http.MethodGet && r.Header.Get("Authorization") == "" {
				http.Redirect(w, r, "/login", http.StatusSeeOther)
				return
			}
			writeHTTPError(w, herr)
			return
		}
		allowed := false
		for _, role := range roles {
			allowed = allowed || role == id.Role
		}
		if !allowed {
			writeHTTPError(w, &httpErr{http.StatusForbidden, "PERMISSION_DENIED", "a " + id.Role.String() + " token may not open " + r.URL.Path})
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), httpIdentityKey{}, id)))
	}
}

func requestIdentity(r *http.Request) Identity {
	id, _ := r.Context().Value(httpIdentityKey{}).(Identity)
	return id
}

// pageHeaders are set on every HTML page: tenant-written text is shown
// there, so no script runs at all.
func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
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
		loginTmpl.Execute(w, loginPage{Node: s.base.node.ID()})
	case http.MethodPost:
		if !sameOrigin(r) {
			writeHTTPError(w, &httpErr{http.StatusForbidden, "PERMISSION_DENIED", "cross-origin login refused"})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 4096)
		token := strings.TrimSpace(r.PostFormValue("token"))
		id, ok := s.auth.Identify(token)
		if !ok || (id.Role != RoleAdmin && id.Role != RoleClient) {
			pageHeaders(w)
			w.WriteHeader(http.StatusUnauthorized)
			loginTmpl.Execute(w, loginPage{Node: s.base.node.ID(), Failed: true})
			return
		}
		value, err := s.web.create(id, time.Now())
		if err != nil {
			writeHTTPError(w, err.(*httpErr))
			return
		}
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: value, Path: "/", MaxAge: int(sessionTTL.Seconds()),
			HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
		http.Redirect(w, r, "/", http.StatusSeeOther)
	default:
		w.Header().Set("Allow", "GET, POST")
		writeHTTPError(w, &httpErr{http.StatusMethodNotAllowed, "INVALID_ARGUMENT", "use GET or POST"})
	}
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !sameOrigin(r) {
		writeHTTPError(w, &httpErr{http.StatusForbidden, "PERMISSION_DENIED", "log out with a same-origin POST"})
		return
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		s.web.delete(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

type loginPage struct {
	Node   string
	Failed bool
}

var loginTmpl = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>barista · sign in</title>
<style>body{font:14px/1.4 system-ui,sans-serif;margin:48px;color:#222;background:#fafafa} input{font:inherit;padding:6px;width:320px} .err{color:#b00}</style>
</head><body><h1>barista</h1><p>node <b>{{.Node}}</b>: sign in with an admin token, or a client token to see your own tenant.</p>
{{if .Failed}}<p class="err">That token is not an admin or client token of this cluster.</p>{{end}}
<form method="post" action="/login"><p><input type="password" name="token" autocomplete="off" placeholder="token" autofocus></p><p><button type="submit">Sign in</button></p></form>
</body></html>
`))
