package rpc

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/baristahq/barista/internal/auth"
)

// A call's identity rides on its context (identityKey), set by the
// interceptors below from its bearer token; what a token, a role and an
// identity are is package internal/auth's.
type identityKey struct{}

// IdentityFrom returns the caller's identity set by the auth interceptor.
func IdentityFrom(ctx context.Context) auth.Identity {
	id, _ := ctx.Value(identityKey{}).(auth.Identity)
	return id
}

// Auth checks bearer tokens and method permissions, against the
// configured tokens (auth.Table: Identify, Open, AdminToken).
type Auth struct{ *auth.Table }

// NewAuth builds an authenticator. With no tokens the server is open only
// if insecureDev is set; otherwise it is an error.
func NewAuth(tokens []auth.Token, insecureDev bool) (*Auth, error) {
	t, err := auth.NewTable(tokens, insecureDev)
	if err != nil {
		return nil, err
	}
	return &Auth{Table: t}, nil
}

// methodRoles lists who may call each service or method; a method entry
// overrides its service's. A method of no listed service is refused.
var methodRoles = map[string][]auth.Role{
	"/barista.v1.Client/":     {auth.RoleClient, auth.RoleAdmin},
	"/barista.v1.Admin/":      {auth.RoleAdmin},
	"/barista.v1.Worker/":     {auth.RoleWorker, auth.RoleAdmin},
	"/barista.v1.Node/":       {auth.RoleAdmin},
	"/barista.v1.Node/Status": {auth.RoleClient, auth.RoleWorker, auth.RoleAdmin},
	// A follower asks it before a read from its own state, with its
	// caller's token.
	"/barista.v1.Node/ReadIndex": {auth.RoleClient, auth.RoleWorker, auth.RoleAdmin},
	// Each forwarded submit is authorized again on its own (forwardsubmit.go).
	"/barista.v1.Node/ForwardSubmits":  {auth.RoleClient, auth.RoleAdmin},
	"/barista.v1.Node/ForwardCommands": {auth.RoleClient, auth.RoleAdmin},
	"/grpc.health.v1.Health/":          nil, // no token needed
	// The API's schema (with --grpc-reflection): any token.
	"/grpc.reflection.v1.ServerReflection/":      {auth.RoleClient, auth.RoleWorker, auth.RoleAdmin, auth.RoleMetrics},
	"/grpc.reflection.v1alpha.ServerReflection/": {auth.RoleClient, auth.RoleWorker, auth.RoleAdmin, auth.RoleMetrics},
}

func allowed(method string) ([]auth.Role, bool) {
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
	if _, ok := ctx.Value(identityKey{}).(auth.Identity); ok {
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
func (a *Auth) identifyFor(method string, authorization []string) (*auth.Identity, error) {
	roles, known := allowed(method)
	if !known {
		return nil, status.Errorf(codes.PermissionDenied, "method %s is not open to any role", method)
	}
	if roles == nil {
		return nil, nil
	}
	if a.Open() {
		return &auth.Identity{Role: auth.RoleAdmin}, nil
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
func (a *Auth) Authenticate(authorization []string) (auth.Identity, error) {
	var secret string
	for _, v := range authorization {
		if s, ok := strings.CutPrefix(v, "Bearer "); ok {
			secret = s
		}
	}
	if secret == "" {
		return auth.Identity{}, status.Error(codes.Unauthenticated, "missing bearer token (authorization: Bearer TOKEN)")
	}
	id, ok := a.Identify(secret)
	if !ok {
		return auth.Identity{}, status.Error(codes.Unauthenticated, "unknown token")
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
	if id.Role == auth.RoleClient {
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
