package rpc

import (
	"testing"

	"github.com/baristahq/barista/internal/auth"
)

// TestNewAuthSameSecret: one secret given to two roles (or twice to one)
// is named as such, without the secret.
func TestNewAuthSameSecret(t *testing.T) {
	const secret = "shared-secret-0001"
	cases := []struct {
		tokens []auth.Token
		want   string
	}{
		{[]auth.Token{{Secret: secret, Role: auth.RoleClient, Tenant: "acme"}, {Secret: secret, Role: auth.RoleAdmin}}, "the same secret is configured for roles client and admin"},
		{[]auth.Token{{Secret: secret, Role: auth.RoleWorker}, {Secret: secret, Role: auth.RoleWorker}}, "the same secret is configured twice for role worker"},
		{[]auth.Token{{Secret: secret, Role: auth.RoleClient, Tenant: "acme"}, {Secret: secret, Role: auth.RoleClient, Tenant: "beta"}}, "the same secret is configured twice for role client"},
	}
	for _, c := range cases {
		_, err := NewAuth(c.tokens, false)
		if err == nil || err.Error() != c.want {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	if _, err := NewAuth([]auth.Token{{Secret: secret, Role: auth.RoleAdmin}, {Secret: secret + "x", Role: auth.RoleWorker}}, false); err != nil {
		t.Errorf("distinct secrets: %v", err)
	}
}
