package rpc

import (
	"strings"
	"testing"
)

// TestTokenValidate: a secret has 16 or more printable ASCII bytes and no
// whitespace; a refusal never shows the secret.
func TestTokenValidate(t *testing.T) {
	cases := []struct {
		tok  Token
		want string
	}{
		{Token{Secret: "0123456789abcdef", Role: RoleAdmin}, ""},
		{Token{Secret: "0123456789abcdef", Role: RoleClient, Tenant: "acme"}, ""},
		{Token{Secret: "0123456789abcde", Role: RoleAdmin}, "admin token: the secret has 15 bytes (want 16 or more printable ASCII bytes, no whitespace)"},
		{Token{Secret: "                    ", Role: RoleWorker}, "worker token: byte 0 of the secret is whitespace or not printable ASCII (want 16 or more printable ASCII bytes, no whitespace)"},
		{Token{Secret: "0123456789 abcdef", Role: RoleAdmin}, "admin token: byte 10 of the secret is whitespace or not printable ASCII (want 16 or more printable ASCII bytes, no whitespace)"},
		{Token{Secret: "0123456789abcdef\t", Role: RoleAdmin}, "admin token: byte 16 of the secret is whitespace or not printable ASCII (want 16 or more printable ASCII bytes, no whitespace)"},
		{Token{Secret: "0123456789abcdéf", Role: RoleAdmin}, "admin token: byte 14 of the secret is whitespace or not printable ASCII (want 16 or more printable ASCII bytes, no whitespace)"},
		{Token{Secret: "0123456789abcdef", Role: RoleClient}, "a client token needs a tenant"},
		{Token{Secret: "0123456789abcdef", Role: RoleWorker, Tenant: "acme"}, "only client tokens are pinned to a tenant"},
		{Token{Secret: "0123456789abcdef"}, "token without a role"},
	}
	for _, c := range cases {
		err := c.tok.Validate()
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%+v: got %q, want %q", c.tok, got, c.want)
		}
		if c.tok.Secret != "" && strings.TrimSpace(c.tok.Secret) != "" && strings.Contains(got, c.tok.Secret) {
			t.Errorf("the refusal shows the secret: %s", got)
		}
	}
}

// TestNewAuthSameSecret: one secret given to two roles (or twice to one)
// is named as such, without the secret.
func TestNewAuthSameSecret(t *testing.T) {
	const secret = "shared-secret-0001"
	cases := []struct {
		tokens []Token
		want   string
	}{
		{[]Token{{Secret: secret, Role: RoleClient, Tenant: "acme"}, {Secret: secret, Role: RoleAdmin}}, "the same secret is configured for roles client and admin"},
		{[]Token{{Secret: secret, Role: RoleWorker}, {Secret: secret, Role: RoleWorker}}, "the same secret is configured twice for role worker"},
		{[]Token{{Secret: secret, Role: RoleClient, Tenant: "acme"}, {Secret: secret, Role: RoleClient, Tenant: "beta"}}, "the same secret is configured twice for role client"},
	}
	for _, c := range cases {
		_, err := NewAuth(c.tokens, false)
		if err == nil || err.Error() != c.want {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	if _, err := NewAuth([]Token{{Secret: secret, Role: RoleAdmin}, {Secret: secret + "x", Role: RoleWorker}}, false); err != nil {
		t.Errorf("distinct secrets: %v", err)
	}
}

// TestParseTokens reads BARISTA_TOKENS and names the bad entry by its role
// and tenant, never by its secret.
func TestParseTokens(t *testing.T) {
	ts, err := ParseTokens(" admin=admin-secret-0001, client:acme=acme-secret-00001 ,worker=worker-secret-0001,")
	if err != nil {
		t.Fatal(err)
	}
	want := []Token{{Secret: "admin-secret-0001", Role: RoleAdmin}, {Secret: "acme-secret-00001", Role: RoleClient, Tenant: "acme"}, {Secret: "worker-secret-0001", Role: RoleWorker}}
	if len(ts) != len(want) {
		t.Fatalf("got %+v", ts)
	}
	for i := range want {
		if ts[i] != want[i] {
			t.Errorf("token %d: got %+v, want %+v", i, ts[i], want[i])
		}
	}
	bad := []struct{ in, want string }{
		{"admin=short", "token for admin: admin token: the secret has 5 bytes (want 16 or more printable ASCII bytes, no whitespace)"},
		{"client:acme=acme secret 0001 xx", "token for client:acme: client token: byte 4 of the secret is whitespace or not printable ASCII (want 16 or more printable ASCII bytes, no whitespace)"},
		{"root=0123456789abcdef", `unknown role "root" (want client, worker, admin or metrics)`},
		{"admin0123456789abcdef", `token "…": want ROLE[:SCOPE]=SECRET`},
	}
	for _, b := range bad {
		_, err := ParseTokens(b.in)
		if err == nil || err.Error() != b.want {
			t.Errorf("%q: got %v, want %q", b.in, err, b.want)
		}
	}
}
