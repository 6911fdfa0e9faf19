package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"barista/fsm"
	"barista/sfq"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "barista.toml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfigFileEveryKey parses a file setting every key.
func TestConfigFileEveryKey(t *testing.T) {
	p := writeConfig(t, `
[node]
id = "n7"
data_dir = "/tmp/x"
raft_addr = "127.0.0.1:1"
grpc_addr = "127.0.0.1:2"
http_addr = "127.0.0.1:3"
bootstrap = true
join = ["a:1", "b:2"]
[raft]
heartbeat_timeout = "700ms"
election_timeout = "800ms"
leader_lease_timeout = "300ms"
commit_timeout = "10ms"
snapshot_threshold = 100
snapshot_interval = "1s"
trailing_logs = 50
[log]
level = "debug"
json = true
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
[scheduler.weights]
free = 2
diamond = 32
`)
	fc, err := loadConfigFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if fc.Node.ID != "n7" || !fc.Node.Bootstrap || len(fc.Node.Join) != 2 || fc.Raft.HeartbeatTimeout.Duration != 700*time.Millisecond ||
		*fc.Raft.TrailingLogs != 50 || fc.Log.Level != "debug" || !fc.Log.JSON || *fc.Metrics.MaxTenants != 50 {
		t.Fatalf("node/raft/log sections: %+v", fc)
	}
	c, err := fc.Scheduler.apply(fsm.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	want := fsm.DefaultConfig()
	want.Sched.TierWeights = [sfq.NumTiers]uint32{2, 2, 4, 8, 32}
	want.Sched.Policy = sfq.Reserve{Margin: 500_000}
	want.Sched.Clamp = sfq.ClampDispatch
	want.Sched.AckTimeoutMs, want.Sched.LeaseTimeoutMs, want.Sched.DefaultMaxAttempts = 5000, 20000, 5
	want.HeartbeatIntervalMs, want.SelfKillAfterMs, want.CancelGraceMs = 2000, 15000, 3000
	want.JobRetentionMs, want.EventRetentionMs, want.EventRetentionCount, want.DedupeWindowMs = 3600_000, 7200_000, 1000, 3*3600_000
	want.MaxPayloadBytes = 4096
	if *c.Sched.Decay != (sfq.Decay{HalfLifeMs: 168 * 3600_000, NormMs: 10_000_000}) {
		t.Errorf("decay %+v", c.Sched.Decay)
	}
	c.Sched.Decay = nil
	if c != want {
		t.Errorf("scheduler:\n got %+v\nwant %+v", c, want)
	}
}

// TestConfigFileErrorsNameTheKey: unknown keys and bad values.
func TestConfigFileErrorsNameTheKey(t *testing.T) {
	cases := []struct{ body, want string }{
		{"[scheduler]\nlease_timout = \"1s\"\n", "unknown key scheduler.lease_timout"},
		{"[nodes]\nid = \"x\"\n", "unknown key nodes"},
		{"[scheduler]\nlease_timeout = \"soon\"\n", "lease_timeout"},
		{"[scheduler]\nlease_timeout = \"20s\"\n", "self_kill_after 25s must be below lease_timeout 20s"},
		{"[scheduler]\npolicy = \"random\"\n", "scheduler.policy"},
		{"[scheduler]\nclamp = \"never\"\n", "scheduler.clamp"},
		{"[scheduler]\ndecay = \"half_life:0s,norm:1s\"\n", "scheduler.decay"},
		{"[scheduler.weights]\nplatinum = 3\n", "scheduler.weights.platinum"},
		{"[scheduler.weights]\ngold = 0\n", "scheduler.weights.gold: weight of tier gold is 0"},
		{"[scheduler]\nmax_payload_bytes = 99999999\n", "scheduler.max_payload_bytes: 99999999 is out of range"},
		{"[scheduler]\nmax_attempts = 0\n", "scheduler.max_attempts: 0 is out of range"},
		{"[raft]\nsnapshot_threshold = -1\n", "raft.snapshot_threshold: -1 is not a positive count"},
		{"[metrics]\nmax_tenants = -1\n", "metrics.max_tenants: -1 is negative (want 0 or more)"},
		{"[node]\nid = 7\n", "node.id"},
		{"[log]\nlevel = \"loud\"\n", "log.level"},
		{"[node\nid=1", "line 2, column 6"},
	}
	for _, c := range cases {
		_, err := loadConfigFile(writeConfig(t, c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error containing %q", c.body, err, c.want)
		}
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
	if code := Run([]string{"server", "--help"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "--node-id") {
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
	if code := Run([]string{"server", "--data-dir", "/tmp/x"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--node-id") {
		t.Fatalf("server without id: %d %s", code, errb.String())
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
