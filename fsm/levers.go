package fsm

import (
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
)

// The FSM's part of feature level 5 (dead-letter retention and the submit
// rate, beside the core's levers): configuration fields written after the
// others in a configuration of core version 5 or later.

// DeadLetters is how long the dead letters (jobs that ended failed,
// timed_out, expired or cancelled) are kept, and how many of them, with
// how many payload bytes, each tenant keeps at most (the oldest go first).
// Completed jobs keep JobRetentionMs. Below feature level 5 every ended
// job keeps JobRetentionMs and these are not used.
type DeadLetters struct {
	DeadLetterRetentionMs int64
	DeadLetterMaxJobs     uint64
	DeadLetterMaxBytes    uint64
}

// The defaults of the dead letters: 7 days, 100,000 jobs and 256 MiB of
// payloads per tenant.
const (
	DefaultDeadLetterRetentionMs = 7 * 24 * 3600 * 1000
	DefaultDeadLetterMaxJobs     = 100_000
	DefaultDeadLetterMaxBytes    = 256 << 20
)

// DefaultDeadLetters returns the defaults.
func DefaultDeadLetters() DeadLetters {
	return DeadLetters{DefaultDeadLetterRetentionMs, DefaultDeadLetterMaxJobs, DefaultDeadLetterMaxBytes}
}

func (d DeadLetters) validate() error {
	if d.DeadLetterRetentionMs <= 0 || d.DeadLetterRetentionMs > maxDuration {
		return invalidf("", "dead_letter_retention is %s (want a positive duration up to a year)", ms(d.DeadLetterRetentionMs))
	}
	if d.DeadLetterMaxJobs == 0 || d.DeadLetterMaxJobs > sfq.MaxID {
		return invalidf("", "dead_letter_max_jobs is %d (want 1..%d)", d.DeadLetterMaxJobs, uint64(sfq.MaxID))
	}
	if d.DeadLetterMaxBytes == 0 || d.DeadLetterMaxBytes > 1<<50 {
		return invalidf("", "dead_letter_max_bytes is %d (want 1..%d)", d.DeadLetterMaxBytes, uint64(1<<50))
	}
	return nil
}

func encodeConfigLevers(e *sfq.Encoder, c *Config) {
	encodeSubmitRate(e, c.SubmitRate)
	e.Varint(c.DeadLetterRetentionMs)
	e.Uvarint(c.DeadLetterMaxJobs)
	e.Uvarint(c.DeadLetterMaxBytes)
}

func decodeConfigLevers(d *sfq.Decoder, c *Config) {
	c.SubmitRate = decodeSubmitRate(d)
	c.DeadLetterRetentionMs = d.Varint()
	c.DeadLetterMaxJobs = d.Uvarint()
	c.DeadLetterMaxBytes = d.Uvarint()
}

// configLeversFromPB reads the lever settings (the submit rate and the
// dead letters'); 0 is the default.
func configLeversFromPB(p *pb.SchedulerConfig, c *Config) {
	if p.SubmitRateN != 0 { // off: no period and no burst either
		c.SubmitRate = sfq.RateLimit{N: p.SubmitRateN, PeriodMs: p.SubmitRatePeriodMs, Burst: p.SubmitBurst}
	}
	c.DeadLetters = DefaultDeadLetters()
	if p.DeadLetterRetentionMs != 0 {
		c.DeadLetterRetentionMs = p.DeadLetterRetentionMs
	}
	if p.DeadLetterMaxJobs != 0 {
		c.DeadLetterMaxJobs = p.DeadLetterMaxJobs
	}
	if p.DeadLetterMaxBytes != 0 {
		c.DeadLetterMaxBytes = p.DeadLetterMaxBytes
	}
}

func configLeversToPB(c Config, p *pb.SchedulerConfig) {
	p.SubmitRateN, p.SubmitRatePeriodMs, p.SubmitBurst = c.SubmitRate.N, c.SubmitRate.PeriodMs, c.SubmitRate.Burst
	p.DeadLetterRetentionMs = c.DeadLetterRetentionMs
	p.DeadLetterMaxJobs = c.DeadLetterMaxJobs
	p.DeadLetterMaxBytes = c.DeadLetterMaxBytes
}

// deadLetterLevel is the level a SetConfig's dead-letter settings need: a
// value other than the default needs Level5.
func deadLetterLevel(p *pb.SchedulerConfig) (uint32, string) {
	switch {
	case p.GetDeadLetterRetentionMs() != 0 && p.GetDeadLetterRetentionMs() != DefaultDeadLetterRetentionMs:
		return Level5, "dead_letter_retention"
	case p.GetDeadLetterMaxJobs() != 0 && p.GetDeadLetterMaxJobs() != DefaultDeadLetterMaxJobs:
		return Level5, "dead_letter_max_jobs"
	case p.GetDeadLetterMaxBytes() != 0 && p.GetDeadLetterMaxBytes() != DefaultDeadLetterMaxBytes:
		return Level5, "dead_letter_max_bytes"
	}
	return Level1, ""
}

// usesLevers reports whether the configuration holds a setting of feature
// level 5.
func (c *Config) usesLevers() bool {
	return c.SubmitRate != sfq.RateLimit{} || c.DeadLetters != DefaultDeadLetters()
}
