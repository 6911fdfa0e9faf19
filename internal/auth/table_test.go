package auth

import "testing"

// TestNewTableSameSecret: one secret given to two roles (or twice to one)
// is named as such, without the secret.
func TestNewTableSameSecret(t *testing.T) {
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
		_, err := NewTable(c.tokens, false)
		if err == nil || err.Error() != c.want {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	if _, err := NewTable([]Token{{Secret: secret, Role: RoleAdmin}, {Secret: secret + "x", Role: RoleWorker}}, false); err != nil {
		t.Errorf("distinct secrets: %v", err)
	}
}
