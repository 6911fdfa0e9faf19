package auth

import (
	"strings"
	"testing"
)

// TestParseTokensWorkerBinding: ROLE[:SCOPE]=SECRET, where a worker
// token's scope is its worker ID binding.
func TestParseTokensWorkerBinding(t *testing.T) {
	got, err := ParseTokens("admin=admin-secret-000001, client:acme=acme-secret-000001,worker=shared-secret-000001,worker:gpu-*=gpu-secret-0000001,worker:cpu-7=cpu7-secret-000001")
	if err != nil {
		t.Fatal(err)
	}
	want := []Token{
		{Secret: "admin-secret-000001", Role: RoleAdmin},
		{Secret: "acme-secret-000001", Role: RoleClient, Tenant: "acme"},
		{Secret: "shared-secret-000001", Role: RoleWorker},
		{Secret: "gpu-secret-0000001", Role: RoleWorker, Worker: "gpu-*"},
		{Secret: "cpu7-secret-000001", Role: RoleWorker, Worker: "cpu-7"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d tokens: %+v", len(got), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("token %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, c := range []struct{ in, want string }{
		{"worker:*=shared-secret-000001", `token for worker:*: worker_id "*" binds nothing: a worker token for every worker ID has no worker_id`},
		{"worker:a*b*=shared-secret-000001", `token for worker:a*b*: worker_id "a*b*": "*" may only end a prefix ("gpu-*")`},
		{"worker:a b=shared-secret-000001", `token for worker:a b: worker_id "a b" has a space at byte 1`},
		{"admin:gpu-1=admin-secret-000001", "token for admin:gpu-1: only client tokens are pinned to a tenant"},
	} {
		if _, err := ParseTokens(c.in); err == nil || err.Error() != c.want {
			t.Errorf("%q: %v, want %q", c.in, err, c.want)
		}
	}
	if err := (Token{Secret: "admin-secret-000001", Role: RoleAdmin, Worker: "gpu-1"}).Validate(); err == nil || err.Error() != "only worker tokens are bound to a worker_id" {
		t.Errorf("admin token with a binding: %v", err)
	}
}

// TestWorkerBindingCovers: who may open a session as, and drain, which
// worker ID.
func TestWorkerBindingCovers(t *testing.T) {
	ids := []string{"gpu-1", "gpu-", "gpu", "cpu-7", "cpu-70", "gpu-*"}
	for _, c := range []struct {
		who       Identity
		be, drain string // the IDs of ids it may open a session as / drain
	}{
		{Identity{Role: RoleAdmin}, "gpu-1 gpu- gpu cpu-7 cpu-70 gpu-*", "gpu-1 gpu- gpu cpu-7 cpu-70 gpu-*"},
		{Identity{Role: RoleWorker}, "gpu-1 gpu- gpu cpu-7 cpu-70 gpu-*", ""},
		{Identity{Role: RoleWorker, Worker: "gpu-*"}, "gpu-1 gpu- gpu-*", "gpu-1 gpu- gpu-*"},
		{Identity{Role: RoleWorker, Worker: "cpu-7"}, "cpu-7", "cpu-7"},
		{Identity{Role: RoleClient, Tenant: "acme"}, "", ""},
	} {
		var be, drain []string
		for _, id := range ids {
			if c.who.MayBeWorker(id) {
				be = append(be, id)
			}
			if c.who.MayDrain(id) {
				drain = append(drain, id)
			}
		}
		if strings.Join(be, " ") != c.be || strings.Join(drain, " ") != c.drain {
			t.Errorf("%+v: may be %v and drain %v; want %q and %q", c.who, be, drain, c.be, c.drain)
		}
	}
}

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
