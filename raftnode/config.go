package raftnode

import (
	"fmt"
	"net"
	"time"

	"github.com/baristahq/barista/fsm"
)

// Limits of a node's settings. Validate refuses a value outside them; the
// server's flags and configuration file check the same limits.
const (
	// MinTimeout is hashicorp/raft's floor for the heartbeat, election and
	// leader lease timeouts and the snapshot interval.
	MinTimeout = 5 * time.Millisecond
	// MaxTimeout bounds the heartbeat, election and leader lease timeouts.
	MaxTimeout = 10 * time.Minute
	// MinCommitTimeout and MaxCommitTimeout bound CommitTimeout.
	MinCommitTimeout = time.Millisecond
	MaxCommitTimeout = time.Minute
	// MaxSnapshotInterval bounds SnapshotInterval (at least MinTimeout).
	MaxSnapshotInterval = 24 * time.Hour
	// MaxLogEntries bounds SnapshotThreshold and TrailingLogs (at least 1).
	MaxLogEntries = 1_000_000_000
	// MinPruneInterval and MaxPruneInterval bound PruneInterval.
	MinPruneInterval = time.Millisecond
	MaxPruneInterval = 24 * time.Hour
	// MaxLag bounds MaxLag (at least MinTimeout).
	MaxLagLimit = 24 * time.Hour
	// MaxClockOffset bounds ClockOffset either way.
	MaxClockOffset = 365 * 24 * time.Hour
	// DefaultLeaderLease is the leader lease when LeaderLeaseTimeout is 0,
	// unless HeartbeatTimeout is shorter.
	DefaultLeaderLease = 250 * time.Millisecond
)

// ConfigError is a Config value that Validate refuses. It names the
// field; Format renders it with the fields named as the caller knows
// them (a flag, a file key).
type ConfigError struct {
	Field string // the Config field, e.g. "SnapshotThreshold"
	Value string // its value ("" when it is missing)
	// Min and Max are the allowed range, for a value out of range.
	Min, Max string
	// Rel ("at least", "at most") relates Field to the field Other, whose
	// value is OtherValue, for a rule between two fields.
	Rel, Other, OtherValue string
	// Rule, if set, says what is wrong with the value.
	Rule string
}

func (e *ConfigError) Error() string {
	return "raftnode: " + e.Format(func(field string) string { return field })
}

// Format renders the error on one line, naming each field by name(field).
func (e *ConfigError) Format(name func(field string) string) string {
	switch {
	case e.Value == "":
		return fmt.Sprintf("%s is required", name(e.Field))
	case e.Other != "":
		return fmt.Sprintf("%s: %s must be %s %s (%s)", name(e.Field), e.Value, e.Rel, name(e.Other), e.OtherValue)
	case e.Rule != "":
		return fmt.Sprintf("%s: %s %s", name(e.Field), e.Value, e.Rule)
	}
	return fmt.Sprintf("%s: %s is out of range (%s..%s)", name(e.Field), e.Value, e.Min, e.Max)
}

// Validate checks every field against its limits and the rules between
// fields (the election timeout is at least the heartbeat timeout, the
// leader lease at most), and the seed configuration. A refusal is a
// *ConfigError, or for the seed an error that wraps the scheduler's.
func (c Config) Validate() error {
	for _, f := range []struct{ field, v string }{{"ID", c.ID}, {"DataDir", c.DataDir}, {"RaftAddr", c.RaftAddr}} {
		if f.v == "" {
			return &ConfigError{Field: f.field}
		}
	}
	durations := []struct {
		field    string
		v        time.Duration
		min, max time.Duration
	}{
		{"HeartbeatTimeout", c.HeartbeatTimeout, MinTimeout, MaxTimeout},
		{"ElectionTimeout", c.ElectionTimeout, MinTimeout, MaxTimeout},
		{"CommitTimeout", c.CommitTimeout, MinCommitTimeout, MaxCommitTimeout},
		{"SnapshotInterval", c.SnapshotInterval, MinTimeout, MaxSnapshotInterval},
		{"PruneInterval", c.PruneInterval, MinPruneInterval, MaxPruneInterval},
		{"ClockOffset", c.ClockOffset, -MaxClockOffset, MaxClockOffset},
		{"MaxLag", c.MaxLag, MinTimeout, MaxLagLimit},
	}
	if c.LeaderLeaseTimeout != 0 {
		durations = append(durations, struct {
			field    string
			v        time.Duration
			min, max time.Duration
		}{"LeaderLeaseTimeout", c.LeaderLeaseTimeout, MinTimeout, MaxTimeout})
	}
	for _, d := range durations {
		if d.v < d.min || d.v > d.max {
			return &ConfigError{Field: d.field, Value: d.v.String(), Min: d.min.String(), Max: d.max.String()}
		}
	}
	if c.EntriesInFlight > MaxEntriesInFlight {
		return &ConfigError{Field: "EntriesInFlight", Value: fmt.Sprint(c.EntriesInFlight), Min: "1", Max: fmt.Sprint(MaxEntriesInFlight)}
	}
	for _, n := range []struct {
		field string
		v     uint64
	}{{"SnapshotThreshold", c.SnapshotThreshold}, {"TrailingLogs", c.TrailingLogs}, {"MaxLagEntries", c.MaxLagEntries}} {
		if n.v < 1 || n.v > MaxLogEntries {
			return &ConfigError{Field: n.field, Value: fmt.Sprint(n.v), Min: "1", Max: fmt.Sprint(MaxLogEntries)}
		}
	}
	for _, a := range []struct{ field, v string }{{"RaftAdvertise", c.RaftAdvertise}, {"GRPCAdvertise", c.GRPCAdvertise}} {
		if a.v == "" {
			continue
		}
		host, port, err := net.SplitHostPort(a.v)
		ip := net.ParseIP(host)
		if err != nil || host == "" || port == "" || (ip != nil && ip.IsUnspecified()) {
			return &ConfigError{Field: a.field, Value: a.v, Rule: "is not a HOST:PORT other members can reach"}
		}
	}
	if c.ElectionTimeout < c.HeartbeatTimeout {
		return &ConfigError{Field: "ElectionTimeout", Value: c.ElectionTimeout.String(), Rel: "at least", Other: "HeartbeatTimeout", OtherValue: c.HeartbeatTimeout.String()}
	}
	if c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		return &ConfigError{Field: "LeaderLeaseTimeout", Value: c.LeaderLeaseTimeout.String(), Rel: "at most", Other: "HeartbeatTimeout", OtherValue: c.HeartbeatTimeout.String()}
	}
	if c.FeatureLevel > fsm.MaxFeatureLevel {
		return &ConfigError{Field: "FeatureLevel", Value: fmt.Sprint(c.FeatureLevel), Min: "1", Max: fmt.Sprint(fsm.MaxFeatureLevel)}
	}
	if err := c.Seed.Validate(); err != nil {
		return fmt.Errorf("raftnode: seed configuration: %w", err)
	}
	return nil
}

// leaderLease is the leader lease in force: LeaderLeaseTimeout, or when
// it is 0 the default, never above the heartbeat timeout.
func (c Config) leaderLease() time.Duration {
	if c.LeaderLeaseTimeout != 0 {
		return c.LeaderLeaseTimeout
	}
	return min(DefaultLeaderLease, c.HeartbeatTimeout)
}
