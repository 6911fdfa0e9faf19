package fsm

import (
	"time"

	"github.com/baristahq/barista/internal/text"
	"github.com/baristahq/barista/sfq"
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
	// SubmitRate bounds each tenant's submits (feature level 5).
	SubmitRate sfq.RateLimit
	// Feature level 5 (levers.go): the dead letters' retention and their
	// bounds per tenant.
	DeadLetters
	// Feature level 6 (quotas.go): a tenant's quotas by default (0: none).
	DefaultMaxQueued uint32
	MaxQueuedBytes   uint64
	// Feature level 6 (pools.go): max_pools, implicit_tenants and
	// default_tenant.
	Pools PoolSettings
	// ClockTickMs is how long the leader lets pass without an entry
	// before it commits a clock tick (clocktick.go); another value than
	// the default needs feature level 7.
	ClockTickMs int64
	// MaxTotalQueuedBytes bounds the payload bytes of every tenant's
	// unfinished jobs together (feature level 7, quotas.go; 0: none).
	MaxTotalQueuedBytes uint64
	// EventRetentionPerTenant is how many of its events younger than
	// EventRetentionMs a tenant keeps when the cluster's count prunes
	// them (feature level 8, eventkeep.go; 0: none).
	EventRetentionPerTenant uint64
	// MaxWorkerRecords bounds the worker records a drain may make
	// (feature level 8, level8.go; 0: none).
	MaxWorkerRecords uint64
	// MaxSchedules bounds the schedules of one tenant (feature level 8,
	// schedule.go; the default at every level below).
	MaxSchedules uint32
}

// Limits on runtime settings.
const (
	// MaxMessageBytes is the largest gRPC message a node receives or sends
	// (text.MaxMessageBytes).
	MaxMessageBytes = text.MaxMessageBytes
	// MaxPayloadLimit is the largest payload limit a config may set: a job
	// with a payload that large and every other field at its longest still
	// fits one message (Submit, GetJob, a worker's Assign) and one Raft
	// entry. The margin covers the other fields (stderr tail 4 KiB, names
	// 256 bytes each) many times over.
	MaxPayloadLimit = MaxMessageBytes - 64<<10
	// legacyPayloadLimit is the limit builds before MaxPayloadLimit
	// accepted: a replicated config holding such a value still loads from
	// a snapshot (the edge cuts payloads at PayloadLimit all the same).
	legacyPayloadLimit = 4 << 20
	maxDuration        = 365 * 24 * 3600 * 1000
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
		DeadLetters:         DefaultDeadLetters(),
		DefaultMaxQueued:    DefaultMaxQueued,
		MaxQueuedBytes:      DefaultMaxQueuedBytes,
		ClockTickMs:         DefaultClockTickMs,
		MaxTotalQueuedBytes: DefaultMaxTotalQueuedBytes,
		// Feature level 8 (level8.go).
		EventRetentionPerTenant: DefaultEventRetentionPerTenant,
		MaxWorkerRecords:        DefaultMaxWorkerRecords,
		MaxSchedules:            DefaultMaxSchedules,
	}
}

func ms(v int64) string { return (time.Duration(v) * time.Millisecond).String() }

// PayloadLimit is the largest payload a submit may carry now: the
// configured limit, within what one message carries.
func (c Config) PayloadLimit() uint32 { return min(c.MaxPayloadBytes, MaxPayloadLimit) }

// Validate checks every field, and the order of the timeouts (heartbeat <
// self-kill < lease), naming the values in its errors.
func (c Config) Validate() error { return c.validate(MaxPayloadLimit) }

// validateStored checks a configuration read from a snapshot: as Validate,
// but with the payload limit older builds accepted, so that their state
// still loads.
func (c Config) validateStored() error { return c.validate(legacyPayloadLimit) }

func (c Config) validate(payloadLimit uint32) error {
	if err := c.Sched.Validate(); err != nil {
		return err
	}
	check := func(name string, v int64, allowZero bool) error {
		if v < 0 || v > maxDuration || (v == 0 && !allowZero) {
			return invalidf("", "%s is %s (want a positive duration up to a year)", name, ms(v))
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
		return invalidf("", "heartbeat_interval %s must be below self_kill_after %s", ms(c.HeartbeatIntervalMs), ms(c.SelfKillAfterMs))
	}
	if c.SelfKillAfterMs >= c.Sched.LeaseTimeoutMs {
		return invalidf("", "self_kill_after %s must be below lease_timeout %s, so a partitioned worker kills its job before the lease expires", ms(c.SelfKillAfterMs), ms(c.Sched.LeaseTimeoutMs))
	}
	if err := c.SubmitRate.Validate("submit_rate"); err != nil {
		return err
	}
	if err := c.DeadLetters.validate(); err != nil {
		return err
	}
	if err := (Quotas{c.DefaultMaxQueued, c.MaxQueuedBytes, c.MaxTotalQueuedBytes}).validate(); err != nil {
		return err
	}
	if err := c.Pools.validate(); err != nil {
		return err
	}
	if err := validateClockTick(c.ClockTickMs); err != nil {
		return err
	}
	if err := c.validateLevel8(); err != nil {
		return err
	}
	switch {
	case c.MaxPayloadBytes == 0:
		return invalidf("", "max_payload_bytes is 0 (want 1..%d)", payloadLimit)
	case c.MaxPayloadBytes > payloadLimit:
		return invalidf("", "max_payload_bytes %d is over %d, the most a job's payload may be for the job to fit one %d-byte gRPC message", c.MaxPayloadBytes, payloadLimit, MaxMessageBytes)
	}
	return nil
}

// encodeConfig writes a configuration of FSM state version v (1 or 2).
func encodeConfig(e *sfq.Encoder, c *Config, v int) {
	sfq.EncodeConfigVersion(e, &c.Sched, v)
	e.Varint(c.HeartbeatIntervalMs)
	e.Varint(c.SelfKillAfterMs)
	e.Varint(c.CancelGraceMs)
	e.Varint(c.JobRetentionMs)
	e.Uvarint(c.EventRetentionCount)
	e.Varint(c.EventRetentionMs)
	e.Varint(c.DedupeWindowMs)
	e.Uvarint(uint64(c.MaxPayloadBytes))
	if v >= 5 {
		encodeConfigLevers(e, c)
	}
}

// decodeConfig reads a configuration whose core part is of the core's
// encoding version v.
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
	if v >= 5 {
		decodeConfigLevers(d, &c)
	} else {
		c.DeadLetters = DefaultDeadLetters()
	}
	c.ClockTickMs = DefaultClockTickMs // state version 10 holds another
	c.MaxTotalQueuedBytes = 0          // likewise
	return c
}
