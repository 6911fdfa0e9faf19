package rpc

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/baristahq/barista/sfq"
)

// Role is what a bearer token may do.
type Role uint8

// The roles.
const (
	// RoleClient calls the client service for the one tenant its token is
	// pinned to.
	RoleClient Role = iota + 1
	// RoleWorker runs jobs (the worker service).
	RoleWorker
	// RoleAdmin may do anything, for any tenant.
	RoleAdmin
	// RoleMetrics may only scrape /metrics (when it needs a token).
	RoleMetrics
)

func (r Role) String() string {
	switch r {
	case RoleClient:
		return "client"
	case RoleWorker:
		return "worker"
	case RoleAdmin:
		return "admin"
	case RoleMetrics:
		return "metrics"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// ParseRole reads a role name.
func ParseRole(s string) (Role, error) {
	for r := RoleClient; r <= RoleMetrics; r++ {
		if r.String() == s {
			return r, nil
		}
	}
	return 0, fmt.Errorf("unknown role %q (want client, worker, admin or metrics)", s)
}

// Token is one configured bearer token.
type Token struct {
	Secret string
	Role   Role
	Tenant string // client tokens only: the tenant the token is pinned to
	// Worker (worker tokens only) binds the token to one worker ID, or
	// with a trailing "*" to every ID of a prefix ("gpu-*"); empty: any
	// worker ID.
	Worker string
}

// MinSecretLen is the shortest accepted secret, in bytes.
const MinSecretLen = 16

// Validate checks a token's fields. A secret has at least MinSecretLen
// bytes, each printable ASCII other than the space (it travels in an HTTP
// header): no whitespace anywhere. Messages never show the secret.
func (t Token) Validate() error {
	switch {
	case t.Role < RoleClient || t.Role > RoleMetrics:
		return fmt.Errorf("token without a role")
	case t.Role == RoleClient && t.Tenant == "":
		return fmt.Errorf("a client token needs a tenant")
	case t.Role != RoleClient && t.Tenant != "":
		return fmt.Errorf("only client tokens are pinned to a tenant")
	case t.Role != RoleWorker && t.Worker != "":
		return fmt.Errorf("only worker tokens are bound to a worker_id")
	}
	for i := 0; i < len(t.Secret); i++ {
		if c := t.Secret[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("%s token: byte %d of the secret is whitespace or not printable ASCII (want %d or more printable ASCII bytes, no whitespace)", t.Role, i, MinSecretLen)
		}
	}
	if len(t.Secret) < MinSecretLen {
		return fmt.Errorf("%s token: the secret has %d bytes (want %d or more printable ASCII bytes, no whitespace)", t.Role, len(t.Secret), MinSecretLen)
	}
	if t.Tenant != "" {
		return sfq.ValidateName("tenant", t.Tenant)
	}
	if t.Worker != "" {
		return ValidateWorkerBinding(t.Worker)
	}
	return nil
}

// ValidateWorkerBinding checks a worker token's binding: a worker ID, or
// a prefix of worker IDs followed by one "*" ("gpu-*"). "*" may appear
// only at the end, and a lone "*" is refused: a token for every worker
// is one without a binding.
func ValidateWorkerBinding(b string) error {
	prefix, wild := strings.CutSuffix(b, "*")
	switch {
	case wild && prefix == "":
		return fmt.Errorf("worker_id %q binds nothing: a worker token for every worker ID has no worker_id", b)
	case strings.Contains(prefix, "*"):
		return fmt.Errorf("worker_id %q: \"*\" may only end a prefix (\"gpu-*\")", b)
	}
	if err := sfq.ValidateName("worker_id", prefix); err != nil {
		return err
	}
	return nil
}

// bindingCovers reports whether a worker binding ("" = any) covers the
// worker ID id.
func bindingCovers(binding, id string) bool {
	if prefix, wild := strings.CutSuffix(binding, "*"); wild {
		return strings.HasPrefix(id, prefix)
	}
	return binding == "" || binding == id
}

// ParseTokens reads tokens written as ROLE[:SCOPE]=SECRET, separated by
// commas (the BARISTA_TOKENS environment variable). The scope of a client
// token is its tenant; of a worker token, its worker ID binding (an ID,
// or a prefix ending in "*"; none: any worker ID). E.g.
// "admin=s3cr3t-admin-0001,client:acme=acme-s3cr3t-0001,worker:gpu-*=gpu-s3cr3t-0001".
func ParseTokens(s string) ([]Token, error) {
	var out []Token
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		who, secret, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("token %q: want ROLE[:SCOPE]=SECRET", redact(part))
		}
		roleName, scope, _ := strings.Cut(who, ":")
		role, err := ParseRole(roleName)
		if err != nil {
			return nil, err
		}
		t := Token{Secret: secret, Role: role, Tenant: scope}
		if role == RoleWorker {
			t.Tenant, t.Worker = "", scope
		}
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("token for %s: %w", who, err)
		}
		out = append(out, t)
	}
	return out, nil
}

func redact(s string) string {
	if i := strings.IndexByte(s, '='); i >= 0 {
		return s[:i] + "=…"
	}
	return "…"
}

// Identity is who a request comes from.
type Identity struct {
	Role   Role
	Tenant string // pinned tenant of a client token
	Worker string // worker ID binding of a worker token ("" = any ID)
}

// MayBeWorker reports whether the caller may open a worker session as
// worker id: an admin, or a worker token whose binding covers id (an
// unbound worker token covers every ID).
func (i Identity) MayBeWorker(id string) bool {
	switch i.Role {
	case RoleAdmin:
		return true
	case RoleWorker:
		return bindingCovers(i.Worker, id)
	}
	return false
}

// MayDrain reports whether the caller may drain (or undrain) worker id:
// an admin, or the worker's own token, i.e. a worker token bound to a
// binding that covers id. An unbound worker token is shared by every
// worker, so it is no worker's own: it may drain none.
func (i Identity) MayDrain(id string) bool {
	switch i.Role {
	case RoleAdmin:
		return true
	case RoleWorker:
		return i.Worker != "" && bindingCovers(i.Worker, id)
	}
	return false
}

type identityKey struct{}

// IdentityFrom returns the caller's identity set by the auth interceptor.
func IdentityFrom(ctx context.Context) Identity {
	id, _ := ctx.Value(identityKey{}).(Identity)
	return id
}

// Auth checks bearer tokens and method permissions.
type Auth struct {
	tokens map[[32]byte]Identity
	open   bool
	admin  string // a configured admin secret, for this server's own calls
}

// NewAuth builds an authenticator. With no tokens the server is open only
// if insecureDev is set; otherwise it is an error.
func NewAuth(tokens []Token, insecureDev bool) (*Auth, error) {
	a := &Auth{tokens: map[[32]byte]Identity{}, open: len(tokens) == 0 && insecureDev}
	if len(tokens) == 0 && !insecureDev {
		return nil, fmt.Errorf("no tokens configured: set [[auth.tokens]] in --config or BARISTA_TOKENS, or run an open development server with --insecure-dev")
	}
	for _, t := range tokens {
		if err := t.Validate(); err != nil {
			return nil, err
		}
		key := sha256.Sum256([]byte(t.Secret))
		if prev, dup := a.tokens[key]; dup {
			if prev.Role == t.Role {
				return nil, fmt.Errorf("the same secret is configured twice for role %s", t.Role)
			}
			return nil, fmt.Errorf("the same secret is configured for roles %s and %s", prev.Role, t.Role)
		}
		a.tokens[key] = Identity{Role: t.Role, Tenant: t.Tenant, Worker: t.Worker}
		if t.Role == RoleAdmin && a.admin == "" {
			a.admin = t.Secret
		}
	}
	return a, nil
}

// Identify returns the identity of a bearer secret.
func (a *Auth) Identify(secret string) (Identity, bool) {
	if secret == "" {
		return Identity{}, false
	}
	id, ok := a.tokens[sha256.Sum256([]byte(secret))]
	return id, ok
}

// Open reports whether the server runs without tokens (--insecure-dev).
func (a *Auth) Open() bool { return a.open }

// AdminToken returns a configured admin secret ("" if none), which this
// server uses for its own calls to other members (join).
func (a *Auth) AdminToken() string { return a.admin }

// methodRoles lists who may call each service or method; a method entry
// overrides its service's. A method of no listed service is refused.
var methodRoles = map[string][]Role{
	"/barista.v1.Client/":     {RoleClient, RoleAdmin},
	"/barista.v1.Admin/":      {RoleAdmin},
	"/barista.v1.Worker/":     {RoleWorker, RoleAdmin},
	"/barista.v1.Node/":       {RoleAdmin},
	"/barista.v1.Node/Status": {RoleClient, RoleWorker, RoleAdmin},
	// A follower asks it before a read from its own state, with its
	// caller's token.
	"/barista.v1.Node/ReadIndex": {RoleClient, RoleWorker, RoleAdmin},
	// Each forwarded submit is authorized again on its own (forwardsubmit.go).
	"/barista.v1.Node/ForwardSubmits": {RoleClient, RoleAdmin},
	"/grpc.health.v1.Health/":         nil, // no token needed
	// The API's schema (with --grpc-reflection): any token.
	"/grpc.reflection.v1.ServerReflection/":      {RoleClient, RoleWorker, RoleAdmin, RoleMetrics},
	"/grpc.reflection.v1alpha.ServerReflection/": {RoleClient, RoleWorker, RoleAdmin, RoleMetrics},
}

func allowed(method string) ([]Role, bool) {
	if roles, ok := methodRoles[method]; ok {
		return roles, true
	}
	if i := strings.LastIndexByte(method, '/'); i > 0 {
		roles, ok := methodRoles[method[:i+1]]
		return roles, ok
	}
	return nil, false
}

// authorize identifies the caller and checks the method's roles (once:
// a call the tap handle identified keeps its identity).
func (a *Auth) authorize(ctx context.Context, method string) (context.Context, error) {
	if _, ok := ctx.Value(identityKey{}).(Identity); ok {
		return ctx, nil
	}
	id, err := a.identifyFor(method, metadata.ValueFromIncomingContext(ctx, "authorization"))
	if err != nil {
		return nil, err
	}
	if id == nil {
		return ctx, nil
	}
	return context.WithValue(ctx, identityKey{}, *id), nil
}

// identifyFor identifies the caller of method from its authorization
// header values (the last "Bearer TOKEN" counts) and checks the method's
// roles: nil (and no error) for a method open without a token.
func (a *Auth) identifyFor(method string, authorization []string) (*Identity, error) {
	roles, known := allowed(method)
	if !known {
		return nil, status.Errorf(codes.PermissionDenied, "method %s is not open to any role", method)
	}
	if roles == nil {
		return nil, nil
	}
	if a.open {
		return &Identity{Role: RoleAdmin}, nil
	}
	id, err := a.Authenticate(authorization)
	if err != nil {
		return nil, err
	}
	for _, r := range roles {
		if r == id.Role {
			return &id, nil
		}
	}
	return nil, status.Errorf(codes.PermissionDenied, "a %s token may not call %s", id.Role, method)
}

// Authenticate identifies the caller of authorization header values (the
// last "Bearer TOKEN" counts): the one check of a gRPC call's token and
// of an HTTP/JSON call's, which is made before its body is read. Its
// error is a gRPC status (UNAUTHENTICATED).
func (a *Auth) Authenticate(authorization []string) (Identity, error) {
	var secret string
	for _, v := range authorization {
		if s, ok := strings.CutPrefix(v, "Bearer "); ok {
			secret = s
		}
	}
	if secret == "" {
		return Identity{}, status.Error(codes.Unauthenticated, "missing bearer token (authorization: Bearer TOKEN)")
	}
	id, ok := a.Identify(secret)
	if !ok {
		return Identity{}, status.Error(codes.Unauthenticated, "unknown token")
	}
	return id, nil
}

// TapHandle refuses a call before its stream is made, before any byte
// of its request is read (grpc.InTapHandle): an unknown or missing token
// UNAUTHENTICATED, a role that may not call the method PERMISSION_DENIED
// — the check the interceptors make (identifyFor), on the call's
// headers. The identity rides on the call's context, where the
// interceptors find it.
func (a *Auth) TapHandle(ctx context.Context, info *tap.Info) (context.Context, error) {
	id, err := a.identifyFor(info.FullMethodName, info.Header.Get("authorization"))
	if err != nil {
		return nil, err
	}
	if id == nil {
		return ctx, nil
	}
	return context.WithValue(ctx, identityKey{}, *id), nil
}

// UnaryInterceptor authenticates unary calls.
func (a *Auth) UnaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, err := a.authorize(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// StreamInterceptor authenticates streams.
func (a *Auth) StreamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, err := a.authorize(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return handler(srv, &identityStream{ServerStream: ss, ctx: ctx})
}

type identityStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *identityStream) Context() context.Context { return s.ctx }

// scopeTenant resolves the tenant a call acts on: a client token's own
// tenant (naming another is PERMISSION_DENIED), or the tenant an admin
// names. required makes an admin's tenant mandatory.
func scopeTenant(ctx context.Context, named string, required bool) (string, error) {
	id := IdentityFrom(ctx)
	if id.Role == RoleClient {
		if named != "" && named != id.Tenant {
			return "", fieldErr(codes.PermissionDenied, "tenant", "this token is for tenant %q, not %q", id.Tenant, named)
		}
		return id.Tenant, nil
	}
	if named == "" && required {
		return "", fieldErr(codes.InvalidArgument, "tenant", "required")
	}
	return named, nil
}

// Bearer returns per-RPC credentials sending a bearer token (nil if the
// token is empty).
func Bearer(token string, requireTLS bool) grpc.CallOption {
	return grpc.PerRPCCredentials(bearer{token: token, tls: requireTLS})
}

type bearer struct {
	token string
	tls   bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	if b.token == "" {
		return nil, nil
	}
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.tls }
