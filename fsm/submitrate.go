package fsm

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/baristahq/barista/sfq"
)

// SubmitRate is the rate of submits each tenant may make: at most N per
// PeriodMs, in bursts of up to Burst (0: N). N = 0 means no limit. The
// leader enforces it before proposing (so that every node's submits count
// against one allowance); it is replicated so that every leader enforces
// the same one. Feature level 5.
type SubmitRate struct {
	Rate
	Burst uint32
}

// Rate is N per PeriodMs; N = 0 is no limit.
type Rate struct {
	N        uint32
	PeriodMs int64
}

// Limits of a submit rate.
const (
	MaxSubmitRateN = 1_000_000_000
	MaxSubmitBurst = 1_000_000_000
)

// On reports whether a limit is set.
func (r Rate) On() bool { return r.N != 0 }

// BurstOrN is the burst in force: Burst, or N when it is 0.
func (r SubmitRate) BurstOrN() uint32 {
	if r.Burst == 0 {
		return r.N
	}
	return r.Burst
}

// Validate checks a submit rate and names what is wrong. A rate that is
// off is stored without a period or burst (configFromPB drops them).
func (r SubmitRate) Validate() error {
	switch {
	case r.N == 0:
		return nil // off: the period and the burst are not read
	case r.N > MaxSubmitRateN:
		return fmt.Errorf("%w: submit_rate %d per period is over %d", sfq.ErrInvalid, r.N, MaxSubmitRateN)
	case r.PeriodMs < 1 || r.PeriodMs > maxDuration:
		return fmt.Errorf("%w: submit_rate period %s (want 1ms up to a year)", sfq.ErrInvalid, ms(r.PeriodMs))
	case r.Burst > MaxSubmitBurst:
		return fmt.Errorf("%w: submit_burst %d is over %d", sfq.ErrInvalid, r.Burst, MaxSubmitBurst)
	}
	return nil
}

// String prints a rate as ParseRate reads it: "off" or "N/PERIOD".
func (r Rate) String() string {
	if !r.On() {
		return "off"
	}
	return fmt.Sprintf("%d/%s", r.N, time.Duration(r.PeriodMs)*time.Millisecond)
}

// ParseRate reads "off" or "N/PERIOD" (a Go duration, whole
// milliseconds: "100/1s", "6000/1m").
func ParseRate(s string) (Rate, error) {
	if s == "off" || s == "0" {
		return Rate{}, nil
	}
	n, per, ok := strings.Cut(s, "/")
	if !ok {
		return Rate{}, fmt.Errorf("%w: rate %q: want N/PERIOD (e.g. 100/1s) or off", sfq.ErrInvalid, s)
	}
	c, err := strconv.ParseUint(n, 10, 32)
	if err != nil || c == 0 {
		return Rate{}, fmt.Errorf("%w: rate %q: N must be a whole number from 1 to %d", sfq.ErrInvalid, s, MaxSubmitRateN)
	}
	d, err := time.ParseDuration(per)
	if err != nil || d <= 0 || d%time.Millisecond != 0 {
		return Rate{}, fmt.Errorf("%w: rate %q: PERIOD must be a positive duration in whole milliseconds (e.g. 1s, 1m)", sfq.ErrInvalid, s)
	}
	r := SubmitRate{Rate: Rate{N: uint32(c), PeriodMs: d.Milliseconds()}}
	return r.Rate, r.Validate()
}

func encodeSubmitRate(e *sfq.Encoder, r SubmitRate) {
	e.Uvarint(uint64(r.N))
	e.Varint(r.PeriodMs)
	e.Uvarint(uint64(r.Burst))
}

func decodeSubmitRate(d *sfq.Decoder) SubmitRate {
	return SubmitRate{Rate: Rate{N: d.Uint32(), PeriodMs: d.Varint()}, Burst: d.Uint32()}
}
