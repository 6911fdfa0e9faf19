package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/auth"
	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/sfq"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "barista.toml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// resolveServer parses a server command line and resolves it as the
// server does before it opens anything, with $BARISTA_TOKENS = env.
func resolveServer(t *testing.T, env string, args ...string) (*serverConfig, error) {
	t.Helper()
	t.Setenv("BARISTA_TOKENS", env)
	fs := flag.NewFlagSet("barista server", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := commands["server"].flags(fs).(*serverOpts)
	if err := fs.Parse(args); err != nil {
		return nil, errors.New(flagError(err))
	}
	return o.resolve()
}

// fullConfig sets every key of the configuration file.
const fullConfig = `
[node]
id = "n7"
data_dir = "/tmp/x"
raft_addr = "127.0.0.1:1"
grpc_addr = "127.0.0.1:2"
http_addr = "127.0.0.1:3"
bootstrap = false
join = ["a:1", "b:2"]
prune_interval = "3s"
pprof = true
[raft]
heartbeat_timeout = "700ms"
election_timeout = "800ms"
leader_lease_timeout = "300ms"
commit_timeout = "10ms"
snapshot_threshold = 100
snapshot_interval = "1s"
trailing_logs = 50
insecure = true
ready_max_lag_entries = 40
ready_max_lag = "2s"
[log]
level = "debug"
json = true
[auth]
insecure_dev = false
[[auth.tokens]]
role = "admin"
token = "admin-secret-0001"
[[auth.tokens]]
role = "client"
tenant = "acme"
token = "acme-secret-00001"
[[auth.tokens]]
role = "worker"
worker_id = "gpu-*"
token = "gpu-worker-secret-01"
[http]
insecure = true
metrics_require_token = true
[tls]
cert = "n7.pem"
key = "n7-key.pem"
ca = "ca.pem"
cluster_name = "east"
[metrics]
max_tenants = 50
[scheduler]
policy = "reserve:500ms"
clamp = "dispatch"
decay = "half_life:168h,norm:10000s"
ack_timeout = "5s"
lease_timeout = "20s"
heartbeat_interval = "2s"
self_kill_after = "15s"
cancel_grace = "3s"
max_attempts = 5
job_retention = "1h"
event_retention = "2h"
event_retention_count = 1000
dedupe_window = "3h"
max_payload_bytes = 4096
estimate = "auto"
default_cost = "2m"
[scheduler.weights]
free = 2
diamond = 32
`

// TestConfigFileEveryKey reads a file setting every key, under no flags.
func TestConfigFileEveryKey(t *testing.T) {
	c, err := resolveServer(t, "", "--config", writeConfig(t, fullConfig))
	if err != nil {
		t.Fatal(err)
	}
	want := raftnode.DefaultConfig()
	want.ID, want.DataDir, want.RaftAddr, want.GRPCAddr, want.HTTPAddr = "n7", "/tmp/x", "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"
	want.PruneInterval = 3 * time.Second
	want.HeartbeatTimeout, want.ElectionTimeout, want.LeaderLeaseTimeout, want.CommitTimeout = 700*time.Millisecond, 800*time.Millisecond, 300*time.Millisecond, 10*time.Millisecond
	want.SnapshotThreshold, want.SnapshotInterval, want.TrailingLogs = 100, time.Second, 50
	want.MaxLagEntries, want.MaxLag = 40, 2*time.Second
	s := &want.Seed
	s.Sched.TierWeights = [sfq.NumTiers]uint32{2, 2, 4, 8, 32}
	s.Sched.Policy = sfq.Reserve{Margin: 500_000}
	s.Sched.Clamp = sfq.ClampDispatch
	s.Sched.AckTimeoutMs, s.Sched.LeaseTimeoutMs, s.Sched.DefaultMaxAttempts = 5000, 20000, 5
	s.HeartbeatIntervalMs, s.SelfKillAfterMs, s.CancelGraceMs = 2000, 15000, 3000
	s.JobRetentionMs, s.EventRetentionMs, s.EventRetentionCount, s.DedupeWindowMs = 3600_000, 7200_000, 1000, 3*3600_000
	s.MaxPayloadBytes = 4096
	s.Sched.Estimate, s.Sched.DefaultCostMs = sfq.EstimateAuto, 120_000
	got := c.Node
	if *got.Seed.Sched.Decay != (sfq.Decay{HalfLifeMs: 168 * 3600_000, NormMs: 10_000_000}) {
		t.Errorf("decay %+v", got.Seed.Sched.Decay)
	}
	got.Seed.Sched.Decay = nil
	if got != want {
		t.Errorf("node:\n got %+v\nwant %+v", got, want)
	}
	if strings.Join(c.Join, " ") != "a:1 b:2" || c.LogLevel != "debug" || !c.LogJSON || !c.Pprof || c.InsecureDev || c.UnsafeDebug ||
		!c.InsecureRaft || !c.InsecureHTTP || !c.MetricsAuth || c.MetricsMaxTenants != 50 ||
		c.TLS != (raftnode.TLSFiles{Cert: "n7.pem", Key: "n7-key.pem", CA: "ca.pem", Cluster: "east"}) {
		t.Errorf("server settings: %+v", c)
	}
	wantTokens := []auth.Token{{Secret: "admin-secret-0001", Role: auth.RoleAdmin}, {Secret: "acme-secret-00001", Role: auth.RoleClient, Tenant: "acme"},
		{Secret: "gpu-worker-secret-01", Role: auth.RoleWorker, Worker: "gpu-*"}}
	if len(c.Tokens) != 3 || c.Tokens[0] != wantTokens[0] || c.Tokens[1] != wantTokens[1] || c.Tokens[2] != wantTokens[2] {
		t.Errorf("tokens %+v", c.Tokens)
	}
}

// TestFlagsOverrideFile: a flag given on the command line wins over the
// file; a key the flag does not name keeps the file's value; and
// $BARISTA_TOKENS adds to the file's tokens.
func TestFlagsOverrideFile(t *testing.T) {
	p := writeConfig(t, fullConfig)
	c, err := resolveServer(t, "worker=worker-secret-0001", "--config", p, "--snapshot-threshold", "7", "--node-id", "n9", "--join", "c:3", "--log-json=false")
	if err != nil {
		t.Fatal(err)
	}
	if c.Node.SnapshotThreshold != 7 || c.Node.TrailingLogs != 50 || c.Node.ID != "n9" || c.Node.DataDir != "/tmp/x" ||
		strings.Join(c.Join, " ") != "c:3" || c.LogJSON || c.LogLevel != "debug" {
		t.Errorf("merged: %+v", c)
	}
	if len(c.Tokens) != 4 || c.Tokens[3] != (auth.Token{Secret: "worker-secret-0001", Role: auth.RoleWorker}) {
		t.Errorf("tokens %+v", c.Tokens)
	}
	// Without a file: the defaults, and the flags.
	c, err = resolveServer(t, "", "--node-id", "n1", "--data-dir", "/d", "--insecure-dev")
	if err != nil {
		t.Fatal(err)
	}
	want := raftnode.DefaultConfig()
	want.ID, want.DataDir, want.RaftAddr, want.GRPCAddr, want.HTTPAddr = "n1", "/d", "127.0.0.1:7440", "127.0.0.1:7400", "127.0.0.1:7480"
	if c.Node.Seed.Sched.Decay != nil {
		t.Errorf("decay %v", c.Node.Seed.Sched.Decay)
	}
	if c.Node != want || c.LogLevel != "info" || !c.InsecureDev {
		t.Errorf("defaults:\n got %+v\nwant %+v", c.Node, want)
	}
}

// TestServerRefusalsFlagAndFile: every bad value is refused before the
// server opens anything, in one line naming the flag or key, the value
// and what is allowed; the flag form and the file form give the same
// message but for the names.
func TestServerRefusalsFlagAndFile(t *testing.T) {
	type kv struct{ flag, key, text, toml string }
	cases := []struct {
		set  []kv
		want string // with the names as flags
	}{
		{[]kv{{"snapshot-threshold", "raft.snapshot_threshold", "0", "0"}}, "--snapshot-threshold: 0 is out of range (1..1000000000)"},
		{[]kv{{"snapshot-threshold", "raft.snapshot_threshold", "-1", "-1"}}, "--snapshot-threshold: -1 is out of range (1..1000000000)"},
		{[]kv{{"trailing-logs", "raft.trailing_logs", "0", "0"}}, "--trailing-logs: 0 is out of range (1..1000000000)"},
		{[]kv{{"prune-interval", "node.prune_interval", "0s", `"0s"`}}, "--prune-interval: 0s is out of range (1ms..24h)"},
		{[]kv{{"prune-interval", "node.prune_interval", "-5s", `"-5s"`}}, "--prune-interval: -5s is out of range (1ms..24h)"},
		{[]kv{{"raft-heartbeat-timeout", "raft.heartbeat_timeout", "1ms", `"1ms"`}}, "--raft-heartbeat-timeout: 1ms is out of range (5ms..10m)"},
		{[]kv{{"raft-commit-timeout", "raft.commit_timeout", "0s", `"0s"`}}, "--raft-commit-timeout: 0s is out of range (1ms..1m)"},
		{[]kv{{"snapshot-interval", "raft.snapshot_interval", "soon", `"soon"`}}, `--snapshot-interval: "soon" is not a duration (like 500ms or 24h)`},
		{[]kv{{"log-level", "log.level", "loud", `"loud"`}}, `--log-level: unknown level "loud" (want trace, debug, info, warn or error)`},
		{[]kv{{"raft-heartbeat-timeout", "raft.heartbeat_timeout", "1s", `"1s"`}},
			"--raft-election-timeout (or raft.election_timeout in --config): 500ms must be at least --raft-heartbeat-timeout (1s)"},
		{[]kv{{"raft-heartbeat-timeout", "raft.heartbeat_timeout", "1s", `"1s"`}, {"raft-election-timeout", "raft.election_timeout", "900ms", `"900ms"`}},
			"--raft-election-timeout: 900ms must be at least --raft-heartbeat-timeout (1s)"},
		{[]kv{{"raft-leader-lease-timeout", "raft.leader_lease_timeout", "600ms", `"600ms"`}},
			"--raft-leader-lease-timeout: 600ms must be at most --raft-heartbeat-timeout (or raft.heartbeat_timeout in --config) (500ms)"},
		{[]kv{{"bootstrap", "node.bootstrap", "true", "true"}, {"join", "node.join", "a:1", `["a:1"]`}}, "--bootstrap and --join exclude each other"},
		{[]kv{{"webhook-slow-workers", "webhooks.slow_workers", "16", "16"}, {"webhook-workers", "webhooks.workers", "16", "16"}},
			"--webhook-slow-workers: 16 must be below --webhook-workers (16): the others are for prompt endpoints"},
		{[]kv{{"max-sessions-per-identity", "limits.sessions_per_identity", "51", "51"}, {"max-sessions", "limits.sessions", "100", "100"}},
			"--max-sessions-per-identity: 51 is more than half of --max-sessions (100): the admin's sessions are kept out of the others'"},
	}
	for _, tc := range cases {
		args := []string{"--data-dir", t.TempDir(), "--node-id", "n1", "--insecure-dev"}
		sections := map[string]string{}
		var order []string
		for _, s := range tc.set {
			args = append(args, "--"+s.flag+"="+s.text)
			section, key, _ := strings.Cut(s.key, ".")
			if _, ok := sections[section]; !ok {
				order = append(order, section)
			}
			sections[section] += key + " = " + s.toml + "\n"
		}
		_, err := resolveServer(t, "", args...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("flags %v:\n got %v\nwant %s", tc.set, err, tc.want)
		}
		// The file form: the same message, with the keys for the flags (a
		// setting left at its default is named alike in both).
		var body strings.Builder
		for _, sec := range order {
			body.WriteString("[" + sec + "]\n" + sections[sec])
		}
		path := writeConfig(t, body.String())
		_, err = resolveServer(t, "", "--config", path, "--data-dir", t.TempDir(), "--node-id", "n1", "--insecure-dev")
		want := tc.want
		for _, s := range tc.set {
			want = strings.ReplaceAll(want, "--"+s.flag, s.key)
		}
		got := ""
		if err != nil {
			got = strings.TrimPrefix(err.Error(), path+": ")
		}
		if got != want {
			t.Errorf("file %q:\n got %s\nwant %s", body.String(), got, want)
		}
	}
	// A number beyond every integer type is out of range, not wrapped.
	if _, err := resolveServer(t, "", "--snapshot-threshold", "18446744073709551617"); err == nil ||
		err.Error() != "--snapshot-threshold: 18446744073709551617 is out of range (1..1000000000)" {
		t.Errorf("huge threshold: %v", err)
	}
	if _, err := loadConfigFile(writeConfig(t, "[raft]\nsnapshot_threshold = 9223372036854775807\n")); err == nil ||
		!strings.HasSuffix(err.Error(), "raft.snapshot_threshold: 9223372036854775807 is out of range (1..1000000000)") {
		t.Errorf("huge threshold in the file: %v", err)
	}
}

// TestServerRefusesRequiredAndTokens: required settings and tokens.
func TestServerRefusesRequiredAndTokens(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		env  string
		file string
		args []string
		want string
	}{
		{"", "", []string{"--data-dir", dir, "--insecure-dev"}, "--node-id (or node.id in --config) is required"},
		{"", "", []string{"--node-id", "n1", "--insecure-dev"}, "--data-dir (or node.data_dir in --config) is required"},
		{"", "", []string{"--node-id", "n1", "--data-dir", dir, "--raft-addr", ""}, "--raft-addr is required"},
		{"", "", []string{"--node-id", "n1", "--data-dir", dir}, "no tokens configured: set [[auth.tokens]] in --config or BARISTA_TOKENS, or run an open development server with --insecure-dev"},
		{"", "[[auth.tokens]]\nrole = \"admin\"\ntoken = \"                    \"\n", nil,
			"auth.tokens[0]: admin token: byte 0 of the secret is whitespace or not printable ASCII (want 16 or more printable ASCII bytes, no whitespace)"},
		{"", "[[auth.tokens]]\nrole = \"admin\"\ntoken = \"short\"\n", nil,
			"auth.tokens[0]: admin token: the secret has 5 bytes (want 16 or more printable ASCII bytes, no whitespace)"},
		{"", "[[auth.tokens]]\nrole = \"root\"\ntoken = \"0123456789abcdef\"\n", nil, `auth.tokens[0].role: unknown role "root" (want client, worker, admin or metrics)`},
		{"", "[[auth.tokens]]\nrole = \"admin\"\ntoken = \"0123456789abcdef\"\nworkr = \"x\"\n", nil, "auth.tokens[0].workr: unknown key"},
		{"", "[[auth.tokens]]\nrole = \"client\"\ntenant = \"acme\"\ntoken = \"shared-secret-0001\"\n[[auth.tokens]]\nrole = \"admin\"\ntoken = \"shared-secret-0001\"\n", nil,
			"the same secret is configured for roles client and admin"},
		{"admin=shared-secret-0001", "[[auth.tokens]]\nrole = \"worker\"\ntoken = \"shared-secret-0001\"\n", nil, "the same secret is configured for roles worker and admin"},
		{"admin=short", "", nil, "BARISTA_TOKENS: token for admin: admin token: the secret has 5 bytes (want 16 or more printable ASCII bytes, no whitespace)"},
	}
	for _, c := range cases {
		args := c.args
		path := ""
		if c.file != "" || args == nil {
			path = writeConfig(t, c.file)
			args = []string{"--config", path, "--node-id", "n1", "--data-dir", dir}
		}
		_, err := resolveServer(t, c.env, args...)
		got := ""
		if err != nil {
			got = strings.TrimPrefix(err.Error(), path+": ")
		}
		if got != c.want {
			t.Errorf("%q %q %v:\n got %s\nwant %s", c.env, c.file, c.args, got, c.want)
		}
		if strings.Contains(got, "shared-secret") || strings.Contains(got, "short") {
			t.Errorf("the refusal shows a secret: %s", got)
		}
	}
}

// TestConfigFileErrorsNameTheKey: unknown keys and bad values.
func TestConfigFileErrorsNameTheKey(t *testing.T) {
	cases := []struct{ body, want string }{
		{"[scheduler]\nlease_timout = \"1s\"\n", "unknown key scheduler.lease_timout"},
		{"[nodes]\nid = \"x\"\n", "unknown key nodes"},
		{"[node]\nid = \"x\"\nfoo = 1\nbar = 2\n", "unknown key node.bar, node.foo"},
		{"\"raft.snapshot_threshold\" = 5\n", `unknown key "raft.snapshot_threshold"`},
		{"raft = 5\n", "unknown key raft"},
		{"[scheduler]\nlease_timeout = \"soon\"\n", `scheduler.lease_timeout: "soon" is not a duration (like 500ms or 24h)`},
		{"[scheduler]\nlease_timeout = \"20s\"\n", "scheduler: self_kill_after 25s must be below lease_timeout 20s"},
		{"[scheduler]\nack_timeout = \"1500us\"\n", "scheduler.ack_timeout: 1500us is not a whole number of milliseconds"},
		{"[scheduler]\nack_timeout = \"1ns\"\n", "scheduler.ack_timeout: 1ns is out of range (1ms..8760h in whole milliseconds)"},
		{"[scheduler]\npolicy = \"random\"\n", `scheduler.policy: unknown policy "random" (want prefer-fit or reserve:DURATION)`},
		{"[scheduler]\nclamp = \"never\"\n", `scheduler.clamp: unknown clamp "never" (want activation or dispatch)`},
		{"[scheduler]\ndecay = \"half_life:0s,norm:1s\"\n", "scheduler.decay"},
		{"[scheduler.weights]\nplatinum = 3\n", "unknown key scheduler.weights.platinum"},
		{"[scheduler.weights]\ngold = 0\n", "scheduler.weights.gold: 0 is out of range (1..1048576)"},
		{"[scheduler]\nmax_payload_bytes = 99999999\n", "scheduler.max_payload_bytes: 99999999 is out of range (1..4128768)"},
		{"[scheduler]\nmax_attempts = 0\n", "scheduler.max_attempts: 0 is out of range (1..1000)"},
		{"[scheduler]\nmax_attempts = 4294967297\n", "scheduler.max_attempts: 4294967297 is out of range (1..1000)"},
		{"[scheduler]\nmax_attempts = 2.5\n", "scheduler.max_attempts: want a whole number, got a float"},
		{"[raft]\nsnapshot_threshold = -1\n", "raft.snapshot_threshold: -1 is out of range (1..1000000000)"},
		{"[raft]\nsnapshot_threshold = \"5\"\n", "raft.snapshot_threshold: want a whole number, got a string"},
		{"[node]\nid = 7\n", "node.id: want a string, got an integer"},
		{"[node]\njoin = [\"a\", 1]\n", "node.join[1]: want a string, got an integer"},
		{"[node]\nbootstrap = \"yes\"\n", "node.bootstrap: want true or false, got a string"},
		{"[auth]\ntokens = 5\n", "auth.tokens: want an array of tables ([[auth.tokens]]), got an integer"},
		{"[log]\nlevel = \"loud\"\n", `log.level: unknown level "loud" (want trace, debug, info, warn or error)`},
		{"[metrics]\nmax_tenants = -1\n", "metrics.max_tenants: -1 is out of range (0..10000000)"},
		{"[scheduler]\nestimate = \"guess\"\n", `scheduler.estimate: unknown estimate mode "guess" (want submitted or auto)`},
		{"[scheduler]\ndefault_cost = \"0s\"\n", "scheduler.default_cost: 0s is out of range (1ms..8760h in whole milliseconds)"},
		{"[node\nid=1", "line 2, column 6"},
	}
	for _, c := range cases {
		p := writeConfig(t, c.body)
		_, err := loadConfigFile(p)
		if err == nil || !strings.HasPrefix(err.Error(), p+": ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error containing %q", c.body, err, c.want)
		}
	}
}

// TestConfigSetUsesTheFileSettings: "config set" reads values with the
// settings of the file's [scheduler] keys, and refuses with the same
// message but for the name.
func TestConfigSetUsesTheFileSettings(t *testing.T) {
	c, err := applySettings(fsm.DefaultConfig(), []string{"lease_timeout=45s", "self_kill_after=35s", "weights.gold=10", "policy=reserve:500ms", "max_attempts=7",
		"estimate=auto", "default_cost=90s"})
	if err != nil {
		t.Fatal(err)
	}
	want := fsm.DefaultConfig()
	want.Sched.LeaseTimeoutMs, want.SelfKillAfterMs, want.Sched.TierWeights[sfq.Gold] = 45_000, 35_000, 10
	want.Sched.Policy, want.Sched.DefaultMaxAttempts = sfq.Reserve{Margin: 500_000}, 7
	want.Sched.Estimate, want.Sched.DefaultCostMs = sfq.EstimateAuto, 90_000
	if c != want {
		t.Errorf("got %+v\nwant %+v", c, want)
	}
	for _, b := range []struct{ set, file, want string }{
		{"max_attempts=0", "[scheduler]\nmax_attempts = 0\n", "max_attempts: 0 is out of range (1..1000)"},
		{"weights.gold=4294967297", "[scheduler.weights]\ngold = 4294967297\n", "weights.gold: 4294967297 is out of range (1..1048576)"},
		{"cancel_grace=1ns", "[scheduler]\ncancel_grace = \"1ns\"\n", "cancel_grace: 1ns is out of range (1ms..8760h in whole milliseconds)"},
	} {
		_, err := applySettings(fsm.DefaultConfig(), []string{b.set})
		if err == nil || err.Error() != b.want {
			t.Errorf("config set %s: got %v, want %q", b.set, err, b.want)
		}
		p := writeConfig(t, b.file)
		_, err = loadConfigFile(p)
		if want := p + ": scheduler." + b.want; err == nil || err.Error() != want {
			t.Errorf("file %q: got %v, want %q", b.file, err, want)
		}
	}
	if _, err := applySettings(fsm.DefaultConfig(), []string{"lease_timout=1s"}); err == nil || err.Error() != "unknown key lease_timout" {
		t.Errorf("unknown key: %v", err)
	}
}

// TestRunHelpAndUsage checks the command table: help, unknown commands
// and usage errors.
func TestRunHelpAndUsage(t *testing.T) {
	var out, errb strings.Builder
	if code := Run([]string{"help"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "replay") {
		t.Fatalf("help: %d %s", code, out.String())
	}
	out.Reset()
	if code := Run([]string{"server", "--help"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "--node-id") ||
		!strings.Contains(out.String(), "log entries between snapshots (1..1000000000) (default 8192)") {
		t.Fatalf("server --help: %d %s", code, out.String())
	}
	errb.Reset()
	if code := Run([]string{"frobnicate"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unknown command "frobnicate"`) {
		t.Fatalf("unknown command: %d %s", code, errb.String())
	}
	errb.Reset()
	if code := Run([]string{"replay"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "exactly one of --script") {
		t.Fatalf("replay without flags: %d %s", code, errb.String())
	}
	errb.Reset()
	if code := Run([]string{"server", "--data-dir", "/tmp/x", "--insecure-dev"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--node-id") {
		t.Fatalf("server without id: %d %s", code, errb.String())
	}
	errb.Reset()
	if code := Run([]string{"server", "--prune-interval", "0s"}, &out, &errb); code != 2 ||
		!strings.HasPrefix(errb.String(), "barista server: --prune-interval: 0s is out of range (1ms..24h)\n") {
		t.Fatalf("server --prune-interval 0s: %d %s", code, errb.String())
	}
	errb.Reset()
	if code := Run([]string{"server", "--frobnicate"}, &out, &errb); code != 2 || !strings.HasPrefix(errb.String(), "barista server: unknown flag --frobnicate\n") {
		t.Fatalf("unknown flag: %d %s", code, errb.String())
	}
}

// TestEveryCommandHelp runs --help of every registered command: flag
// definitions must not collide, and the help must name the command.
func TestEveryCommandHelp(t *testing.T) {
	for path := range commands {
		var out, errb strings.Builder
		args := append(strings.Fields(path), "--help")
		if code := Run(args, &out, &errb); code != 0 || !strings.Contains(out.String(), "Usage: barista "+path) {
			t.Errorf("%s --help: exit %d\n%s%s", path, code, out.String(), errb.String())
		}
	}
}

var updateDocs = flag.Bool("update-docs", false, "rewrite the settings table of docs/configuration.md")

// settingsTable renders every setting as a Markdown table: key, flag,
// default, allowed values and meaning.
func settingsTable() string {
	c := defaultServerConfig()
	var b strings.Builder
	b.WriteString("| Key | Flag | Default | Allowed | Meaning |\n|---|---|---|---|---|\n")
	for _, s := range c.settings() {
		key, fl, def := "", "", s.val.String()
		if s.key != "" {
			key = "`" + s.key + "`"
		}
		if s.flag != "" {
			fl = "`--" + s.flag + "`"
		}
		switch {
		case s.key == "auth.tokens":
			def = "none"
		case def != "":
			def = "`" + def + "`"
		}
		b.WriteString("| " + key + " | " + fl + " | " + def + " | " + s.val.allowed() + " | " + strings.ReplaceAll(s.usage, "`", "") + " |\n")
	}
	return b.String()
}

// TestConfigDocs: docs/configuration.md lists every setting with its
// flag, default and range, as the settings table declares them (go test
// -run TestConfigDocs -update-docs rewrites it).
func TestConfigDocs(t *testing.T) {
	const path = "../../docs/configuration.md"
	const begin, end = "<!-- settings: begin (generated by TestConfigDocs) -->\n", "<!-- settings: end -->\n"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(doc), begin)
	current, after, ok2 := strings.Cut(rest, end)
	if !ok1 || !ok2 {
		t.Fatalf("%s has no settings markers", path)
	}
	want := settingsTable()
	if current == want {
		return
	}
	if *updateDocs {
		if err := os.WriteFile(path, []byte(before+begin+want+end+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the settings table of %s is out of date (go test ./cmd/barista -run TestConfigDocs -update-docs):\n%s", path, want)
}

// TestConfigViewReadsTheSettings: `config get` shows every [scheduler]
// key of the settings table and nothing else, whole numbers as numbers
// and durations as the file writes them, so what it prints can be given
// back to `config set` unchanged.
func TestConfigViewReadsTheSettings(t *testing.T) {
	c := fsm.DefaultConfig()
	c.Sched.DefaultMaxAttempts, c.DedupeWindowMs = 7, 90*60*1000
	m := configView(c)
	want := map[string]any{
		"policy": "prefer-fit", "clamp": "activation", "decay": "off", "ack_timeout": "10s", "lease_timeout": "30s",
		"heartbeat_interval": "5s", "self_kill_after": "25s", "cancel_grace": "10s", "max_attempts": uint32(7),
		"job_retention": "24h", "event_retention": "24h", "event_retention_count": uint64(2_000_000), "dedupe_window": "90m",
		"max_payload_bytes": uint32(1 << 20), "estimate": "submitted", "default_cost": "1m",
		"submit_rate": "off", "submit_burst": uint32(0),
		"retry_backoff": "0s", "retry_backoff_max": "0s",
		"dead_letter_retention": "168h", "dead_letter_max_jobs": uint64(100_000), "dead_letter_max_bytes": uint64(256 << 20),
		"default_max_queued": uint32(100_000), "max_queued_bytes": uint64(64 << 20),
		"max_pools": uint32(0), "implicit_tenants": "off", "default_tenant": "none", "clock_tick": "1s", "max_snoozes": uint16(100), "max_total_queued_bytes": uint64(4 << 30),
		"event_retention_per_tenant": uint64(10_000), "max_worker_records": uint64(100_000), "max_schedules": uint32(100),
		"resource_reserve_after": "1m", "max_resources": uint32(0),
	}
	for tier := sfq.Tier(0); tier < sfq.NumTiers; tier++ {
		want["weights."+tier.String()] = c.Sched.TierWeights[tier]
	}
	if len(m) != len(want) {
		t.Errorf("%d keys, want %d: %v", len(m), len(want), m)
	}
	var settings []string
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %#v, want %#v", k, m[k], v)
		}
		settings = append(settings, fmt.Sprintf("%s=%v", k, m[k]))
	}
	back, err := applySettings(fsm.DefaultConfig(), settings)
	if err != nil || !reflect.DeepEqual(back, c) {
		t.Errorf("config set of what config get printed: %v\n got %+v\nwant %+v", err, back, c)
	}
}
