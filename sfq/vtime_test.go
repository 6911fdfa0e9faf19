package sfq

import (
	"errors"
	"math"
	"testing"

	"pgregory.net/rapid"
)

func TestTagStep(t *testing.T) {
	cases := []struct {
		cost int64
		w    Weight
		want VirtualTime
	}{
		{1000, 8 * WeightOne, 125_000},
		{1000, WeightOne, 1_000_000},
		{2500, 8 * WeightOne, 312_500},
		{1, 3 * WeightOne, 333},          // floor
		{1000, WeightOne / 2, 2_000_000}, // decayed weight 0.5
		{0, WeightOne, 0},
	}
	for _, c := range cases {
		got, err := tagStep(c.cost, c.w)
		if err != nil || got != c.want {
			t.Errorf("tagStep(%d, %d) = %d, %v; want %d", c.cost, c.w, got, err, c.want)
		}
	}
	if _, err := tagStep(MaxEstCostMs, minDecayFactor); err != nil {
		t.Errorf("largest cost at the smallest weight: %v", err)
	}
	if _, err := tagStep(math.MaxInt64, 1); !errors.Is(err, ErrOverflow) {
		t.Errorf("want overflow, got %v", err)
	}
	if _, err := tagStep(-1, WeightOne); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative cost: %v", err)
	}
}

func TestCheckedAdd(t *testing.T) {
	if _, err := addVT(math.MaxInt64, 1); !errors.Is(err, ErrOverflow) {
		t.Error("add overflow not caught")
	}
	if _, err := subVT(math.MinInt64, 1); !errors.Is(err, ErrOverflow) {
		t.Error("sub overflow not caught")
	}
	if v, err := addVT(5, -7); err != nil || v != -2 {
		t.Errorf("5 + -7 = %d, %v", v, err)
	}
}

func TestFormatMillis(t *testing.T) {
	for us, want := range map[int64]string{0: "0", 125_000: "125", 312_500: "312.5", 1_683_012: "1683.012", -250: "-0.25", 1: "0.001"} {
		if got := FormatMillis(us); got != want {
			t.Errorf("FormatMillis(%d) = %q, want %q", us, got, want)
		}
	}
}

// TestHalfPowerAccuracy compares the integer HalfPower with the exact value
// over a dense grid: within one Q16 unit everywhere.
func TestHalfPowerAccuracy(t *testing.T) {
	for _, d := range []int64{1, 3, 7, 1000, 86_400_000, 604_800_000} {
		for i := int64(0); i <= 4000; i++ {
			n := i * d / 200
			exact := math.Pow(2, -float64(n)/float64(d)) * 65536
			got := HalfPower(n, d)
			if math.Abs(float64(got)-exact) > 1 {
				t.Fatalf("HalfPower(%d, %d) = %d, exact %.3f", n, d, got, exact)
			}
		}
	}
	if HalfPower(0, 5) != 65536 || HalfPower(5, 5) != 32768 || HalfPower(10, 5) != 16384 || HalfPower(17*5, 5) != 0 {
		t.Error("exact powers of two are wrong")
	}
	if HalfPower(1, 0) != 0 || HalfPower(-3, 5) != 65536 {
		t.Error("edge cases")
	}
}

// TestHalfPowerTable checks the literal table against 2^(-i/256).
func TestHalfPowerTable(t *testing.T) {
	for i, v := range halfPowerTable {
		exact := math.Round(math.Pow(2, -float64(i)/256) * (1 << 30))
		if float64(v) != exact {
			t.Errorf("table[%d] = %d, want %.0f", i, v, exact)
		}
	}
}

// lazyBound is the stated rounding bound of lazy decay: decaying a usage U
// in two steps differs from one step over the sum by at most U/2^15 + 2 ms
// (two Q16 units of U, plus one ms per floor). Each HalfPower is rounded to
// within half a Q16 unit of the exact factor, so the two-step product and
// the one-step factor differ by at most 1.5 units; over 2,000,000 random
// cases the worst seen was 1.43 units.
func lazyBound(u int64) int64 { return u>>15 + 2 }

func TestLazyDecay(t *testing.T) {
	const day = 86_400_000
	const halfLife = 7 * day
	u := int64(20_000_000) // 20,000 CPU seconds
	two := decayUsage(decayUsage(u, 7*day, halfLife), 14*day, halfLife)
	one := decayUsage(u, 21*day, halfLife)
	if d := two - one; d < -lazyBound(u) || d > lazyBound(u) {
		t.Fatalf("7d+14d = %d, 21d = %d: off by %d, bound %d", two, one, d, lazyBound(u))
	}
	if one != u/8 {
		t.Errorf("three half-lives: %d, want %d", one, u/8)
	}
	rapid.Check(t, func(t *rapid.T) {
		u := rapid.Int64Range(0, 1<<46).Draw(t, "usage")
		hl := rapid.Int64Range(1, 1<<36).Draw(t, "half_life")
		a := rapid.Int64Range(0, 1<<38).Draw(t, "a")
		b := rapid.Int64Range(0, 1<<38).Draw(t, "b")
		two := decayUsage(decayUsage(u, a, hl), b, hl)
		one := decayUsage(u, a+b, hl)
		if d := two - one; d < -lazyBound(u) || d > lazyBound(u) {
			t.Fatalf("u=%d hl=%d: %d+%d gives %d, one step %d (off %d, bound %d)", u, hl, a, b, two, one, d, lazyBound(u))
		}
	})
}

func TestWeight(t *testing.T) {
	s, _ := New(DefaultConfig())
	gold := &Tenant{TenantSpec: TenantSpec{Tier: Gold, Multiplier: 2}}
	if w := s.weight(gold, 1_000_000); w != 16*WeightOne {
		t.Errorf("gold x2 without decay: %d", w)
	}
	cfg := DefaultConfig()
	cfg.Decay = &Decay{HalfLifeMs: 1000, NormMs: 10_000}
	s, _ = New(cfg)
	gold.Multiplier = 1
	for usage, want := range map[int64]Weight{0: 8 * WeightOne, 10_000: 4 * WeightOne, 20_000: 2 * WeightOne, 1 << 40: 8 * minDecayFactor} {
		if w := s.weight(gold, usage); w != want {
			t.Errorf("usage %d: weight %d, want %d", usage, w, want)
		}
	}
}
