package ratelimit

import (
	"testing"
	"time"

	"github.com/baristahq/barista/sfq"
)

// TestLimiterGCRA: rate 2/1s with bursts of 3 (interval 500 ms,
// tolerance 1 s) admits 3 at once, then one every 500 ms; each refusal
// says how long until the next admission; tenants are apart; no limit
// admits everything.
func TestLimiterGCRA(t *testing.T) {
	t0 := time.Unix(1_000, 0)
	now := t0
	l := New(func() time.Time { return now }, nil)
	r := sfq.RateLimit{N: 2, PeriodMs: 1000, Burst: 3}
	at := func(ms int64) { now = t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, c := range []struct {
		at     int64
		tenant string
		n, got int
		wait   time.Duration
	}{
		{0, "a", 5, 3, 500 * time.Millisecond},
		{0, "b", 1, 1, 0},
		{499, "a", 1, 0, time.Millisecond},
		{500, "a", 1, 1, 0},
		{600, "a", 1, 0, 400 * time.Millisecond},
		{1000, "a", 2, 1, 500 * time.Millisecond},
		// Idle long enough, the burst is back whole (and no more).
		{60_000, "a", 4, 3, 500 * time.Millisecond},
	} {
		at(c.at)
		got, wait := l.Take(c.tenant, r, c.n)
		if got != c.got || wait != c.wait {
			t.Errorf("at %d ms, %s takes %d: got %d, wait %s; want %d, wait %s", c.at, c.tenant, c.n, got, wait, c.got, c.wait)
		}
	}
	if got, wait := l.Take("a", sfq.RateLimit{}, 1000); got != 1000 || wait != 0 {
		t.Errorf("no limit: %d %s", got, wait)
	}
}
