package raftnode

import (
	"errors"
	"testing"
	"time"
)

func validConfig(t *testing.T) Config {
	c := DefaultConfig()
	c.ID, c.DataDir, c.RaftAddr = "n1", t.TempDir(), "127.0.0.1:0"
	return c
}

// TestValidateNamesFieldAndValue: every refusal names the field, the
// value, and the range or the other field of the rule.
func TestValidateNamesFieldAndValue(t *testing.T) {
	cases := []struct {
		name string
		mod  func(c *Config)
		want string
	}{
		{"id", func(c *Config) { c.ID = "" }, "raftnode: ID is required"},
		{"data dir", func(c *Config) { c.DataDir = "" }, "raftnode: DataDir is required"},
		{"prune 0", func(c *Config) { c.PruneInterval = 0 }, "raftnode: PruneInterval: 0s is out of range (1ms..24h0m0s)"},
		{"prune negative", func(c *Config) { c.PruneInterval = -time.Second }, "raftnode: PruneInterval: -1s is out of range (1ms..24h0m0s)"},
		{"snapshot threshold 0", func(c *Config) { c.SnapshotThreshold = 0 }, "raftnode: SnapshotThreshold: 0 is out of range (1..1000000000)"},
		{"trailing logs 0", func(c *Config) { c.TrailingLogs = 0 }, "raftnode: TrailingLogs: 0 is out of range (1..1000000000)"},
		{"trailing logs huge", func(c *Config) { c.TrailingLogs = 1<<64 - 1 }, "raftnode: TrailingLogs: 18446744073709551615 is out of range (1..1000000000)"},
		{"entries in flight", func(c *Config) { c.EntriesInFlight = 17 }, "raftnode: EntriesInFlight: 17 is out of range (1..16)"},
		{"heartbeat low", func(c *Config) { c.HeartbeatTimeout = time.Millisecond }, "raftnode: HeartbeatTimeout: 1ms is out of range (5ms..10m0s)"},
		{"commit 0", func(c *Config) { c.CommitTimeout = 0 }, "raftnode: CommitTimeout: 0s is out of range (1ms..1m0s)"},
		{"snapshot interval", func(c *Config) { c.SnapshotInterval = time.Millisecond }, "raftnode: SnapshotInterval: 1ms is out of range (5ms..24h0m0s)"},
		{"lease low", func(c *Config) { c.LeaderLeaseTimeout = time.Millisecond }, "raftnode: LeaderLeaseTimeout: 1ms is out of range (5ms..10m0s)"},
		{"election below heartbeat", func(c *Config) { c.HeartbeatTimeout = time.Second },
			"raftnode: ElectionTimeout: 500ms must be at least HeartbeatTimeout (1s)"},
		{"lease above heartbeat", func(c *Config) { c.LeaderLeaseTimeout = 600 * time.Millisecond },
			"raftnode: LeaderLeaseTimeout: 600ms must be at most HeartbeatTimeout (500ms)"},
		{"seed", func(c *Config) { c.Seed.MaxPayloadBytes = 0 }, "raftnode: seed configuration: max_payload_bytes is 0 (want 1..4128768)"},
	}
	for _, tc := range cases {
		c := validConfig(t)
		tc.mod(&c)
		err := c.Validate()
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
	if err := validConfig(t).Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// TestConfigErrorFormat renders a refusal with the caller's names.
func TestConfigErrorFormat(t *testing.T) {
	c := validConfig(t)
	c.HeartbeatTimeout = time.Second
	var ce *ConfigError
	if !errors.As(c.Validate(), &ce) {
		t.Fatal("want a *ConfigError")
	}
	names := map[string]string{"ElectionTimeout": "raft.election_timeout", "HeartbeatTimeout": "--raft-heartbeat-timeout"}
	got := ce.Format(func(f string) string { return names[f] })
	if want := "raft.election_timeout: 500ms must be at least --raft-heartbeat-timeout (1s)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestLeaderLeaseDefault: 0 is the default lease, never above the
// heartbeat timeout.
func TestLeaderLeaseDefault(t *testing.T) {
	c := DefaultConfig()
	if got := c.leaderLease(); got != DefaultLeaderLease {
		t.Errorf("default lease %v", got)
	}
	c.HeartbeatTimeout = 100 * time.Millisecond
	if got := c.leaderLease(); got != 100*time.Millisecond {
		t.Errorf("lease with a 100ms heartbeat: %v", got)
	}
	c.LeaderLeaseTimeout = 50 * time.Millisecond
	if got := c.leaderLease(); got != 50*time.Millisecond {
		t.Errorf("explicit lease: %v", got)
	}
}

// TestNewRefusesPruneIntervalZero: a zero prune interval used to start,
// then panic in time.NewTicker when the node became leader. New refuses
// it before opening anything.
func TestNewRefusesPruneIntervalZero(t *testing.T) {
	c := validConfig(t)
	c.Bootstrap = true
	c.PruneInterval = 0
	n, err := New(c)
	if err == nil {
		n.Shutdown()
		t.Fatal("New accepted a zero prune interval")
	}
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "PruneInterval" || ce.Value != "0s" {
		t.Fatalf("got %v, want a ConfigError for PruneInterval 0s", err)
	}
}
