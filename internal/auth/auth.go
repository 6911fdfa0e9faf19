// Package auth holds what a bearer token is and who it makes its caller:
// the roles, the configured tokens (BARISTA_TOKENS and [[auth.tokens]]),
// their checks, and the identity of a call with what it may do. The gRPC
// server (rpc) checks calls with it, the HTTP side (web) its logins and
// requests, the command line its configuration.
package auth

import (
	"fmt"
	"strings"

	"github.com/baristahq/barista/internal/text"
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
		return text.ValidateName("tenant", t.Tenant)
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
	if err := text.ValidateName("worker_id", prefix); err != nil {
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

// Key returns the identity's key in the per-identity bounds (a caller's
// budget key): its role, tenant and worker binding.
func (i Identity) Key() string { return i.Role.String() + ":" + i.Tenant + ":" + i.Worker }
