package sfq

import (
	"fmt"
	"strings"
	"time"
)

// ClampMode selects how SFQ keeps idle tenants from banking credit.
type ClampMode uint8

const (
	// ClampActivation (default): when a tenant becomes eligible after being
	// ineligible, its finish tag is raised to virtual_now. A tenant that
	// stays eligible keeps the credit of a negative cost correction.
	ClampActivation ClampMode = iota
	// ClampDispatch: start = max(virtual_now, finish_tag) at every dispatch,
	// the reference design's rule.
	ClampDispatch
)

func (c ClampMode) String() string {
	if c == ClampDispatch {
		return "dispatch"
	}
	return "activation"
}

// ParseClamp reads "activation" or "dispatch".
func ParseClamp(s string) (ClampMode, error) {
	switch s {
	case "activation":
		return ClampActivation, nil
	case "dispatch":
		return ClampDispatch, nil
	}
	return 0, invalidf("", "unknown clamp %q (want activation or dispatch)", s)
}

// StealPolicy decides whether a worker takes a smaller job over the best
// job of its own size. It is consulted only when both exist; with no
// eligible same-size job every policy takes the best smaller one.
type StealPolicy interface {
	// Steal reports whether a smaller job whose start tag is steal should
	// run instead of the same-size job whose start tag is same.
	Steal(same, steal VirtualTime) bool
	// String names the policy as ParsePolicy reads it.
	String() string
}

// PreferFit always takes a same-size job when one is eligible.
type PreferFit struct{}

// Steal implements StealPolicy.
func (PreferFit) Steal(same, steal VirtualTime) bool { return false }

func (PreferFit) String() string { return "prefer-fit" }

// Reserve steals a smaller job only when its start tag is below the best
// same-size tag by more than Margin.
type Reserve struct{ Margin VirtualTime }

// Steal implements StealPolicy.
func (r Reserve) Steal(same, steal VirtualTime) bool { return same-steal > r.Margin }

func (r Reserve) String() string {
	return "reserve:" + formatDurationMs(int64(r.Margin)/1000, int64(r.Margin)%1000)
}

// ParsePolicy reads "prefer-fit" or "reserve:DURATION" (a margin in virtual
// time, e.g. "reserve:500ms").
func ParsePolicy(s string) (StealPolicy, error) {
	if s == "prefer-fit" {
		return PreferFit{}, nil
	}
	if m, ok := strings.CutPrefix(s, "reserve:"); ok {
		d, err := time.ParseDuration(m)
		if err != nil || d < 0 {
			return nil, invalidf("", "bad reserve margin %q (want a duration like 500ms)", m)
		}
		return Reserve{Margin: VirtualTime(d.Microseconds())}, nil
	}
	return nil, invalidf("", "unknown policy %q (want prefer-fit or reserve:DURATION)", s)
}

// Decay configures usage decay. A nil *Decay in Config means plain SFQ.
type Decay struct {
	// HalfLifeMs is the time after which half the usage is forgotten.
	HalfLifeMs int64
	// NormMs is the usage (CPU ms) that halves a tenant's weight.
	NormMs int64
}

func (d *Decay) String() string {
	if d == nil {
		return "off"
	}
	return "half_life:" + formatDurationMs(d.HalfLifeMs, 0) + ",norm:" + formatDurationMs(d.NormMs, 0)
}

// ParseDecay reads "off" or "half_life:DURATION,norm:DURATION" (norm is CPU
// time, e.g. "half_life:168h,norm:10000s").
func ParseDecay(s string) (*Decay, error) {
	if s == "off" {
		return nil, nil
	}
	var d Decay
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, ":")
		if !ok {
			return nil, invalidf("", "bad decay %q (want off or half_life:DUR,norm:DUR)", s)
		}
		dur, err := time.ParseDuration(v)
		if err != nil || dur <= 0 {
			return nil, invalidf("", "bad decay %s %q (want a positive duration)", k, v)
		}
		switch k {
		case "half_life":
			d.HalfLifeMs = dur.Milliseconds()
		case "norm":
			d.NormMs = dur.Milliseconds()
		default:
			return nil, invalidf("", "unknown decay key %q (want half_life or norm)", k)
		}
	}
	if err := d.validate(); err != nil {
		return nil, err
	}
	return &d, nil
}

func (d *Decay) validate() error {
	if d == nil {
		return nil
	}
	if d.HalfLifeMs <= 0 || d.HalfLifeMs > maxHalfPowerDenominator {
		return invalidf("", "decay half_life %d ms out of range (1 ms .. 2^40 ms)", d.HalfLifeMs)
	}
	if d.NormMs <= 0 || d.NormMs > maxHalfPowerDenominator {
		return invalidf("", "decay norm %d ms out of range (1 ms .. 2^40 ms)", d.NormMs)
	}
	return nil
}

// Config is everything the core reads besides its inputs. In the replicated
// system it is part of the replicated state, changed only by a command.
type Config struct {
	// TierWeights is the weight of each tier (default 1, 2, 4, 8, 16).
	TierWeights [NumTiers]uint32
	// Policy decides size stealing (default PreferFit).
	Policy StealPolicy
	// Clamp selects the clamp mode (default ClampActivation).
	Clamp ClampMode
	// Decay enables usage decay; nil means plain SFQ.
	Decay *Decay
	// AckTimeoutMs is how long an assigned job waits for Started.
	AckTimeoutMs int64
	// LeaseTimeoutMs is how long a running job's lease lasts without a
	// heartbeat; GrantLeases also gives every live deadline this long.
	LeaseTimeoutMs int64
	// DefaultMaxAttempts applies to submits that do not set max_attempts.
	DefaultMaxAttempts uint32
	// Estimate says where a submit's est_cost comes from (default
	// EstimateSubmitted).
	Estimate EstimateMode
	// DefaultCostMs is the est_cost under EstimateAuto of a submit that
	// states none while its job type has too few samples (default 60 s).
	DefaultCostMs int64
	// RetryBackoffMs is how long a failed run's retry waits (scheduled),
	// doubling per failure up to RetryBackoffMaxMs; 0 = requeue at once
	// (the default here; a new cluster at feature level 5 starts with
	// DefaultRetryBackoffMs and DefaultRetryBackoffMaxMs).
	RetryBackoffMs    int64
	RetryBackoffMaxMs int64
	// MaxSnoozes is how many runs of a job may be snoozed in a row: the
	// next snooze ends it failed, snoozed_too_often (feature level 7;
	// default DefaultMaxSnoozes).
	MaxSnoozes uint16
	// ResourceReserveAfterMs is how long a job must have been blocked
	// only by resources before it may take a resource's reservation
	// (resource_reserve_after, feature level 8; default
	// DefaultResourceReserveAfterMs); MaxResources bounds the declared
	// resources (max_resources; 0: DefaultMaxResources).
	ResourceReserveAfterMs int64
	MaxResources           uint32
}

// Limits on configuration and input values, chosen so that no product in
// the scheduling arithmetic can leave int64.
const (
	MaxTierWeight  = 1 << 20
	MaxMultiplier  = 1 << 16
	MaxEstCostMs   = 365 * 24 * 3600 * 1000 // one CPU-year
	MaxMaxAttempts = 1000
	MaxTimeoutMs   = 365 * 24 * 3600 * 1000
	// DefaultMaxSnoozes and MaxMaxSnoozes are Config.MaxSnoozes' default
	// and bound.
	DefaultMaxSnoozes = 100
	MaxMaxSnoozes     = 10_000
)

// DefaultCostMs is the default of Config.DefaultCostMs.
const DefaultCostMs = 60_000

// DefaultConfig returns the defaults of the design: weights 1, 2, 4, 8, 16,
// prefer-fit, the activation clamp, no decay, a 10 s ack timeout, a 30 s
// lease, 3 attempts, submitted estimates and a 60 s default cost.
func DefaultConfig() Config {
	return Config{
		TierWeights:        [NumTiers]uint32{1, 2, 4, 8, 16},
		Policy:             PreferFit{},
		Clamp:              ClampActivation,
		AckTimeoutMs:       10_000,
		LeaseTimeoutMs:     30_000,
		DefaultMaxAttempts: 3,
		Estimate:           EstimateSubmitted,
		DefaultCostMs:      DefaultCostMs,
		MaxSnoozes:         DefaultMaxSnoozes,

		ResourceReserveAfterMs: DefaultResourceReserveAfterMs,
	}
}

// Validate checks every field and names the offending value.
func (c Config) Validate() error {
	if c.MaxSnoozes < 1 || c.MaxSnoozes > MaxMaxSnoozes {
		return invalidf("max_snoozes", "%d (want 1..%d)", c.MaxSnoozes, MaxMaxSnoozes)
	}
	for i, w := range c.TierWeights {
		if w < 1 || w > MaxTierWeight {
			return invalidf("", "weight of tier %s is %d (want 1..%d)", Tier(i), w, MaxTierWeight)
		}
	}
	switch p := c.Policy.(type) {
	case PreferFit:
	case Reserve:
		if p.Margin < 0 {
			return invalidf("", "reserve margin %d is negative", p.Margin)
		}
	default:
		return invalidf("", "unsupported steal policy %v", c.Policy)
	}
	if c.Clamp > ClampDispatch {
		return invalidf("", "unknown clamp mode %d", c.Clamp)
	}
	if err := c.Decay.validate(); err != nil {
		return err
	}
	if c.AckTimeoutMs <= 0 || c.AckTimeoutMs > MaxTimeoutMs {
		return invalidf("", "ack timeout %d ms out of range", c.AckTimeoutMs)
	}
	if c.LeaseTimeoutMs <= 0 || c.LeaseTimeoutMs > MaxTimeoutMs {
		return invalidf("", "lease timeout %d ms out of range", c.LeaseTimeoutMs)
	}
	if c.DefaultMaxAttempts < 1 || c.DefaultMaxAttempts > MaxMaxAttempts {
		return invalidf("", "default max attempts %d (want 1..%d)", c.DefaultMaxAttempts, MaxMaxAttempts)
	}
	if c.Estimate > EstimateAuto {
		return invalidf("", "unknown estimate mode %d (want submitted or auto)", c.Estimate)
	}
	if c.ResourceReserveAfterMs < 0 || c.ResourceReserveAfterMs > MaxResourceReserveAfterMs {
		return invalidf("resource_reserve_after", "%d ms (want 0 .. 7 days)", c.ResourceReserveAfterMs)
	}
	if c.MaxResources > MaxMaxResources {
		return invalidf("max_resources", "%d (want 1..%d, or 0 for the default %d)", c.MaxResources, MaxMaxResources, DefaultMaxResources)
	}
	if c.DefaultCostMs < 1 || c.DefaultCostMs > MaxEstCostMs {
		return invalidf("", "default_cost %d ms (want 1 ms .. a CPU-year)", c.DefaultCostMs)
	}
	return c.validateBackoff()
}

// formatDurationMs prints ms milliseconds plus frac thousandths of a
// millisecond in the largest exact unit (h, m, s, ms, us).
func formatDurationMs(ms, frac int64) string {
	if frac != 0 {
		return fmt.Sprintf("%dus", ms*1000+frac)
	}
	switch {
	case ms == 0:
		return "0s"
	case ms%3_600_000 == 0:
		return fmt.Sprintf("%dh", ms/3_600_000)
	case ms%60_000 == 0:
		return fmt.Sprintf("%dm", ms/60_000)
	case ms%1000 == 0:
		return fmt.Sprintf("%ds", ms/1000)
	}
	return fmt.Sprintf("%dms", ms)
}
