package main

import (
	"strings"
	"testing"

	"github.com/baristahq/barista/internal/auth"
)

// TestConfigWorkerBinding: [[auth.tokens]] worker_id binds a worker
// token; on another role, or malformed, it is an error naming the entry.
func TestConfigWorkerBinding(t *testing.T) {
	sc := serverFlags(t, "--node-id", "n1", "--data-dir", t.TempDir(), "--config", writeConfig(t, `
[[auth.tokens]]
role = "worker"
worker_id = "gpu-*"
token = "gpu-worker-secret-01"
`))
	tokens := sc.Tokens
	if want := (auth.Token{Secret: "gpu-worker-secret-01", Role: auth.RoleWorker, Worker: "gpu-*"}); len(tokens) != 1 || tokens[0] != want {
		t.Fatalf("tokens %+v, want %+v", tokens, want)
	}
	for _, c := range []struct{ body, want string }{
		{"[[auth.tokens]]\nrole = \"client\"\ntenant = \"acme\"\nworker_id = \"gpu-1\"\ntoken = \"client-secret-0001\"\n", "auth.tokens[0]: only worker tokens are bound to a worker_id"},
		{"[[auth.tokens]]\nrole = \"worker\"\nworker_id = \"*\"\ntoken = \"worker-secret-0001\"\n", `worker_id "*" binds nothing`},
	} {
		if _, err := loadConfigFile(writeConfig(t, c.body)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error containing %q", c.body, err, c.want)
		}
	}
}
