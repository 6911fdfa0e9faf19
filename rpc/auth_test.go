package rpc

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
