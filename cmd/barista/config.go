package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"barista/fsm"
	"barista/rpc"
	"barista/sfq"
)

// fileConfig is the server's TOML configuration file. docs/configuration.md
// documents every key and its default. The [scheduler] section only seeds
// the replicated configuration when a new cluster is first configured; a
// node never applies it on its own afterwards (use "barista config set").
type fileConfig struct {
	Node      nodeSection      `toml:"node"`
	Raft      raftSection      `toml:"raft"`
	Log       logSection       `toml:"log"`
	Auth      authSection      `toml:"auth"`
	TLS       tlsSection       `toml:"tls"`
	HTTP      httpSection      `toml:"http"`
	Metrics   metricsSection   `toml:"metrics"`
	Scheduler schedulerSection `toml:"scheduler"`
}

type authSection struct {
	InsecureDev bool         `toml:"insecure_dev"`
	Tokens      []tokenEntry `toml:"tokens"`
}

type tokenEntry struct {
	Role     string `toml:"role"`
	Tenant   string `toml:"tenant"`
	WorkerID string `toml:"worker_id"` // worker tokens: an ID, or a prefix ending in "*"
	Token    string `toml:"token"`
}

type httpSection struct {
	Insecure            bool `toml:"insecure"`
	MetricsRequireToken bool `toml:"metrics_require_token"`
}

type metricsSection struct {
	MaxTenants *int64 `toml:"max_tenants"` // --metrics-max-tenants
}

type tlsSection struct {
	Cert string `toml:"cert"`
	Key  string `toml:"key"`
	CA   string `toml:"ca"`
	// ClusterName is --cluster-name: members' certificates carry
	// server.NAME.barista.
	ClusterName string `toml:"cluster_name"`
}

// tokens converts the [[auth.tokens]] entries, naming the bad one.
func (a authSection) tokens() ([]rpc.Token, error) {
	var out []rpc.Token
	for i, e := range a.Tokens {
		role, err := rpc.ParseRole(e.Role)
		if err != nil {
			return nil, fmt.Errorf("auth.tokens[%d].role: %w", i, err)
		}
		t := rpc.Token{Secret: e.Token, Role: role, Tenant: e.Tenant, Worker: e.WorkerID}
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("auth.tokens[%d]: %w", i, err)
		}
		out = append(out, t)
	}
	return out, nil
}

type nodeSection struct {
	ID        string   `toml:"id"`
	DataDir   string   `toml:"data_dir"`
	RaftAddr  string   `toml:"raft_addr"`
	GRPCAddr  string   `toml:"grpc_addr"`
	HTTPAddr  string   `toml:"http_addr"`
	Bootstrap bool     `toml:"bootstrap"`
	Join      []string `toml:"join"`
}

type raftSection struct {
	HeartbeatTimeout   *duration `toml:"heartbeat_timeout"`
	ElectionTimeout    *duration `toml:"election_timeout"`
	LeaderLeaseTimeout *duration `toml:"leader_lease_timeout"`
	CommitTimeout      *duration `toml:"commit_timeout"`
	SnapshotThreshold  *int64    `toml:"snapshot_threshold"`
	SnapshotInterval   *duration `toml:"snapshot_interval"`
	TrailingLogs       *int64    `toml:"trailing_logs"`
	ReadyMaxLagEntries *int64    `toml:"ready_max_lag_entries"`
	ReadyMaxLag        *duration `toml:"ready_max_lag"`
	// Insecure is --insecure-raft.
	Insecure bool `toml:"insecure"`
}

type logSection struct {
	Level string `toml:"level"`
	JSON  bool   `toml:"json"`
}

type schedulerSection struct {
	Weights             map[string]int64 `toml:"weights"`
	Policy              *string          `toml:"policy"`
	Clamp               *string          `toml:"clamp"`
	Decay               *string          `toml:"decay"`
	AckTimeout          *duration        `toml:"ack_timeout"`
	LeaseTimeout        *duration        `toml:"lease_timeout"`
	HeartbeatInterval   *duration        `toml:"heartbeat_interval"`
	SelfKillAfter       *duration        `toml:"self_kill_after"`
	CancelGrace         *duration        `toml:"cancel_grace"`
	MaxAttempts         *int64           `toml:"max_attempts"`
	JobRetention        *duration        `toml:"job_retention"`
	EventRetention      *duration        `toml:"event_retention"`
	EventRetentionCount *int64           `toml:"event_retention_count"`
	DedupeWindow        *duration        `toml:"dedupe_window"`
	MaxPayloadBytes     *int64           `toml:"max_payload_bytes"`
}

// duration reads a TOML string like "500ms" or "24h".
type duration struct{ time.Duration }

func (d *duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("want a duration like 500ms or 24h, got %q", b)
	}
	if v < 0 {
		return fmt.Errorf("negative duration %q", b)
	}
	d.Duration = v
	return nil
}

// loadConfigFile reads a configuration file. Unknown keys and bad values
// are errors that name the key.
func loadConfigFile(path string) (*fileConfig, error) {
	var fc fileConfig
	md, err := toml.DecodeFile(path, &fc)
	if err != nil {
		var perr toml.ParseError
		if errors.As(err, &perr) {
			where := fmt.Sprintf("line %d, column %d", perr.Position.Line, perr.Position.Col)
			if perr.LastKey != "" {
				where += " (key " + perr.LastKey + ")"
			}
			return nil, fmt.Errorf("%s: %s: %s", path, where, perr.Message)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return nil, fmt.Errorf("%s: unknown key %s", path, strings.Join(keys, ", "))
	}
	for _, v := range []struct {
		key string
		val *int64
	}{{"raft.snapshot_threshold", fc.Raft.SnapshotThreshold}, {"raft.trailing_logs", fc.Raft.TrailingLogs}, {"raft.ready_max_lag_entries", fc.Raft.ReadyMaxLagEntries}} {
		if v.val != nil && *v.val < 1 {
			return nil, fmt.Errorf("%s: %s: %d is not a positive count", path, v.key, *v.val)
		}
	}
	if m := fc.Metrics.MaxTenants; m != nil && *m < 0 {
		return nil, fmt.Errorf("%s: metrics.max_tenants: %d is negative (want 0 or more)", path, *m)
	}
	if _, err := fc.Scheduler.apply(fsm.DefaultConfig()); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, err := fc.Auth.tokens(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if l := fc.Log.Level; l != "" && !validLogLevel(l) {
		return nil, fmt.Errorf("%s: log.level: unknown level %q (want trace, debug, info, warn or error)", path, l)
	}
	return &fc, nil
}

func validLogLevel(l string) bool {
	switch l {
	case "trace", "debug", "info", "warn", "error":
		return true
	}
	return false
}

// apply lays the section's keys over base and validates the result,
// naming the key of any bad value.
func (s *schedulerSection) apply(base fsm.Config) (fsm.Config, error) {
	c := base
	for name, w := range s.Weights {
		t, err := sfq.ParseTier(name)
		if err != nil {
			return c, fmt.Errorf("scheduler.weights.%s: not a tier (want free, bronze, silver, gold or diamond)", name)
		}
		if w < 1 || w > sfq.MaxTierWeight {
			return c, fmt.Errorf("scheduler.weights.%s: weight of tier %s is %d (want 1..%d)", name, name, w, sfq.MaxTierWeight)
		}
		c.Sched.TierWeights[t] = uint32(w)
	}
	var err error
	if s.Policy != nil {
		if c.Sched.Policy, err = sfq.ParsePolicy(*s.Policy); err != nil {
			return c, fmt.Errorf("scheduler.policy: %w", err)
		}
	}
	if s.Clamp != nil {
		if c.Sched.Clamp, err = sfq.ParseClamp(*s.Clamp); err != nil {
			return c, fmt.Errorf("scheduler.clamp: %w", err)
		}
	}
	if s.Decay != nil {
		if c.Sched.Decay, err = sfq.ParseDecay(*s.Decay); err != nil {
			return c, fmt.Errorf("scheduler.decay: %w", err)
		}
	}
	setMs := func(dst *int64, d *duration) {
		if d != nil {
			*dst = d.Milliseconds()
		}
	}
	setMs(&c.Sched.AckTimeoutMs, s.AckTimeout)
	setMs(&c.Sched.LeaseTimeoutMs, s.LeaseTimeout)
	setMs(&c.HeartbeatIntervalMs, s.HeartbeatInterval)
	setMs(&c.SelfKillAfterMs, s.SelfKillAfter)
	setMs(&c.CancelGraceMs, s.CancelGrace)
	setMs(&c.JobRetentionMs, s.JobRetention)
	setMs(&c.EventRetentionMs, s.EventRetention)
	setMs(&c.DedupeWindowMs, s.DedupeWindow)
	counts := []struct {
		key      string
		val      *int64
		min, max int64
		set      func(int64)
	}{
		{"max_attempts", s.MaxAttempts, 1, sfq.MaxMaxAttempts, func(v int64) { c.Sched.DefaultMaxAttempts = uint32(v) }},
		{"event_retention_count", s.EventRetentionCount, 0, 1 << 40, func(v int64) { c.EventRetentionCount = uint64(v) }},
		{"max_payload_bytes", s.MaxPayloadBytes, 1, fsm.MaxPayloadLimit, func(v int64) { c.MaxPayloadBytes = uint32(v) }},
	}
	for _, n := range counts {
		if n.val == nil {
			continue
		}
		if *n.val < n.min || *n.val > n.max {
			return c, fmt.Errorf("scheduler.%s: %d is out of range (%d..%d)", n.key, *n.val, n.min, n.max)
		}
		n.set(*n.val)
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("scheduler: %w", err)
	}
	return c, nil
}
