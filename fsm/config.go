package fsm

import (
	"fmt"
	"time"

	"barista/sfq"
)

// Config is every value Apply reads: the scheduling core's configuration
// plus the runtime timeouts and retention limits. It is replicated state,
// changed only by a SetConfig command; flags and config files only seed the
// bootstrap SetConfig.
type Config struct {
	Sched sfq.Config
	// HeartbeatIntervalMs is how often workers heartbeat (and the leader
	// replicates a heartbeat batch).
	HeartbeatIntervalMs int64
	// SelfKillAfterMs: a worker without an acknowledged heartbeat for this
	// long kills its job. Must be below the lease timeout.
	SelfKillAfterMs int64
	// CancelGraceMs is the time between SIGTERM and SIGKILL on cancel.
	CancelGraceMs int64
	// JobRetentionMs is how long terminal jobs are kept before pruning.
	JobRetentionMs int64
	// EventRetentionCount bounds the event log; EventRetentionMs ages it.
	EventRetentionCount uint64
	EventRetentionMs    int64
	// DedupeWindowMs is how long an idempotency key is remembered, even
	// after its job is pruned.
	DedupeWindowMs int64
	// MaxPayloadBytes bounds a job's payload.
	MaxPayloadBytes uint32
}

// Limits on runtime settings.
const (
	// MaxPayloadLimit is the largest payload limit a config may set: a
	// Raft entry must stay small.
	MaxPayloadLimit = 4 << 20
	maxDuration     = 365 * 24 * 3600 * 1000
)

// DefaultConfig returns the defaults of the design: heartbeat 5 s, lease
// 30 s, self-kill after 25 s, ack 10 s, cancel grace 10 s; terminal jobs,
// events and idempotency keys kept 24 h (at most 2,000,000 events);
// payloads up to 1 MiB.
func DefaultConfig() Config {
	return Config{
		Sched:               sfq.DefaultConfig(),
		HeartbeatIntervalMs: 5_000,
		SelfKillAfterMs:     25_000,
		CancelGraceMs:       10_000,
		JobRetentionMs:      24 * 3600 * 1000,
		EventRetentionCount: 2_000_000,
		EventRetentionMs:    24 * 3600 * 1000,
		DedupeWindowMs:      24 * 3600 * 1000,
		MaxPayloadBytes:     1 << 20,
	}
}

func ms(v int64) string { return (time.Duration(v) * time.Millisecond).String() }

// Validate checks every field, and the order of the timeouts (heartbeat <
// self-kill < lease), naming the values in its errors.
func (c Config) Validate() error {
	if err := c.Sched.Validate(); err != nil {
		return err
	}
	check := func(name string, v int64, allowZero bool) error {
		if v < 0 || v > maxDuration || (v == 0 && !allowZero) {
			return fmt.Errorf("%w: %s is %s (want a positive duration up to a year)", sfq.ErrInvalid, name, ms(v))
		}
		return nil
	}
	for _, f := range []struct {
		name string
		v    int64
		zero bool
	}{
		{"heartbeat_interval", c.HeartbeatIntervalMs, false},
		{"self_kill_after", c.SelfKillAfterMs, false},
		{"cancel_grace", c.CancelGraceMs, false},
		{"job_retention", c.JobRetentionMs, true},
		{"event_retention", c.EventRetentionMs, true},
		{"dedupe_window", c.DedupeWindowMs, true},
	} {
		if err := check(f.name, f.v, f.zero); err != nil {
			return err
		}
	}
	if c.HeartbeatIntervalMs >= c.SelfKillAfterMs {
		return fmt.Errorf("%w: heartbeat_interval %s must be below self_kill_after %s", sfq.ErrInvalid, ms(c.HeartbeatIntervalMs), ms(c.SelfKillAfterMs))
	}
	if c.SelfKillAfterMs >= c.Sched.LeaseTimeoutMs {
		return fmt.Errorf("%w: self_kill_after %s must be below lease_timeout %s, so a partitioned worker kills its job before the lease expires",
			sfq.ErrInvalid, ms(c.SelfKillAfterMs), ms(c.Sched.LeaseTimeoutMs))
	}
	if c.MaxPayloadBytes == 0 || c.MaxPayloadBytes > MaxPayloadLimit {
		return fmt.Errorf("%w: max_payload_bytes %d (want 1..%d)", sfq.ErrInvalid, c.MaxPayloadBytes, MaxPayloadLimit)
	}
	return nil
}

func encodeConfig(e *sfq.Encoder, c *Config) {
	sfq.EncodeConfig(e, &c.Sched)
	e.Varint(c.HeartbeatIntervalMs)
	e.Varint(c.SelfKillAfterMs)
	e.Varint(c.CancelGraceMs)
	e.Varint(c.JobRetentionMs)
	e.Uvarint(c.EventRetentionCount)
	e.Varint(c.EventRetentionMs)
	e.Varint(c.DedupeWindowMs)
	e.Uvarint(uint64(c.MaxPayloadBytes))
}

// decodeConfig reads a configuration of FSM state version v (its core part
// is the core's encoding of the same version).
func decodeConfig(d *sfq.Decoder, v int) Config {
	var c Config
	c.Sched = sfq.DecodeConfigVersion(d, v)
	c.HeartbeatIntervalMs = d.Varint()
	c.SelfKillAfterMs = d.Varint()
	c.CancelGraceMs = d.Varint()
	c.JobRetentionMs = d.Varint()
	c.EventRetentionCount = d.Uvarint()
	c.EventRetentionMs = d.Varint()
	c.DedupeWindowMs = d.Varint()
	c.MaxPayloadBytes = d.Uint32()
	return c
}
