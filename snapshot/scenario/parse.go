package scenario

// Reading a command's arguments: key=value options, counts, durations,
// job ids, rates and repeat counts.

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/baristahq/barista/sfq"
)

// jobID reads a job id: a whole number above zero.
func jobID(s string) (sfq.JobID, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("bad job id %q", s)
	}
	return sfq.JobID(id), nil
}

// option is one key=value argument.
type option struct{ k, v string }

// options are key=value arguments in the order given.
type options []option

func (o options) has(k string) bool {
	for _, x := range o {
		if x.k == k {
			return true
		}
	}
	return false
}

func (o options) get(k string) (string, bool) {
	for _, x := range o {
		if x.k == k {
			return x.v, true
		}
	}
	return "", false
}

// withKV runs a command that takes key=value arguments on args split by kv.
func withKV(args []string, run func(pos []string, opts options) error) error {
	pos, opts, err := kv(args)
	if err != nil {
		return err
	}
	return run(pos, opts)
}

// kv splits "key=value" arguments; bare words go to positional.
func kv(args []string) (positional []string, opts options, err error) {
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			positional = append(positional, a)
			continue
		}
		if opts.has(k) {
			return nil, nil, fmt.Errorf("%s given twice", k)
		}
		opts = append(opts, option{k, v})
	}
	return positional, opts, nil
}

func durationMs(key, v string) (int64, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("bad %s %q: want a duration like 1s or 250ms", key, v)
	}
	return d.Milliseconds(), nil
}

func count(key, v string) (uint32, error) {
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("bad %s %q: want a whole number", key, v)
	}
	return uint32(n), nil
}

// rateOpts reads rate=N/DUR|none and burst=N over the limit old: rate=
// replaces it (with burst= or the default burst), burst= alone changes
// the burst of the limit in force.
func rateOpts(opts options, old sfq.RateLimit) (sfq.RateLimit, error) {
	var burst uint32
	bv, hasBurst := opts.get("burst")
	if hasBurst {
		n, err := count("burst", bv)
		if err != nil || n == 0 {
			return old, fmt.Errorf("bad burst %q: want 1..%d", bv, sfq.MaxRateBurst)
		}
		burst = n
	}
	if rv, ok := opts.get("rate"); ok {
		return sfq.ParseRate(rv, burst)
	}
	if hasBurst {
		if old.None() {
			return old, fmt.Errorf("burst=%s without a rate: give rate=N/DUR", bv)
		}
		old.Burst = burst
		return old, old.Validate("rate")
	}
	return old, nil
}

// times reads an optional "xN" repeat count.
func times(pos []string) (int, []string, error) {
	for i, p := range pos {
		if len(p) > 1 && p[0] == 'x' {
			n, err := strconv.Atoi(p[1:])
			if err != nil || n < 1 || n > 10_000_000 {
				return 0, nil, fmt.Errorf("bad repeat %q: want x1 .. x10000000", p)
			}
			return n, append(append([]string{}, pos[:i]...), pos[i+1:]...), nil
		}
	}
	return 1, pos, nil
}
