package auth

import (
	"crypto/sha256"
	"fmt"
)

// Table is a server's configured tokens: each secret kept as its SHA-256
// with the identity it makes its caller.
type Table struct {
	tokens map[[32]byte]Identity
	open   bool
	admin  string // a configured admin secret, for the server's own calls
}

// NewTable builds the table of tokens. With no tokens the server is open
// only if insecureDev is set; otherwise it is an error.
func NewTable(tokens []Token, insecureDev bool) (*Table, error) {
	a := &Table{tokens: map[[32]byte]Identity{}, open: len(tokens) == 0 && insecureDev}
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
func (a *Table) Identify(secret string) (Identity, bool) {
	if secret == "" {
		return Identity{}, false
	}
	id, ok := a.tokens[sha256.Sum256([]byte(secret))]
	return id, ok
}

// Open reports whether the server runs without tokens (--insecure-dev).
func (a *Table) Open() bool { return a.open }

// AdminToken returns a configured admin secret ("" if none), which the
// server uses for its own calls to other members (join).
func (a *Table) AdminToken() string { return a.admin }
