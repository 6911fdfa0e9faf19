package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"barista/fsm"
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
	Scheduler schedulerSection `toml:"scheduler"`
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
	SnapshotThreshold  *uint64   `toml:"snapshot_threshold"`
	SnapshotInterval   *duration `toml:"snapshot_interval"`
	TrailingLogs       *uint64   `toml:"trailing_logs"`
}

type logSection struct {
	Level string `toml:"level"`
	JSON  bool   `toml:"json"`
}

type schedulerSection struct {
	Weights             map[string]uint32 `toml:"weights"`
	Policy              *string           `toml:"policy"`
	Clamp               *string           `toml:"clamp"`
	Decay               *string           `toml:"decay"`
	AckTimeout          *duration         `toml:"ack_timeout"`
	LeaseTimeout        *duration         `toml:"lease_timeout"`
	HeartbeatInterval   *duration         `toml:"heartbeat_interval"`
	SelfKillAfter       *duration         `toml:"self_kill_after"`
	CancelGrace         *duration         `toml:"cancel_grace"`
	MaxAttempts         *uint32           `toml:"max_attempts"`
	JobRetention        *duration         `toml:"job_retention"`
	EventRetention      *duration         `toml:"event_retention"`
	EventRetentionCount *uint64           `toml:"event_retention_count"`
	DedupeWindow        *duration         `toml:"dedupe_window"`
	MaxPayloadBytes     *uint32           `toml:"max_payload_bytes"`
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
			return nil, fmt.Errorf("%s: %s", path, perr.ErrorWithPosition())
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
	if _, err := fc.Scheduler.apply(fsm.DefaultConfig()); err != nil {
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
		c.Sched.TierWeights[t] = w
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
	if s.MaxAttempts != nil {
		c.Sched.DefaultMaxAttempts = *s.MaxAttempts
	}
	if s.EventRetentionCount != nil {
		c.EventRetentionCount = *s.EventRetentionCount
	}
	if s.MaxPayloadBytes != nil {
		c.MaxPayloadBytes = *s.MaxPayloadBytes
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("scheduler: %w", err)
	}
	return c, nil
}
