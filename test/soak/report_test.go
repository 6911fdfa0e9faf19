package soak

import (
	"slices"
	"testing"
	"time"
)

func flat(n int, at func(i int) Sample) []Sample {
	var out []Sample
	for i := range n {
		s := at(i)
		s.At = time.Duration(i) * time.Minute
		out = append(out, s)
	}
	return out
}

func server(rss, gor, fds, db uint64) []Server {
	return []Server{{ID: "n1", RSSBytes: rss, Goroutines: gor, OpenFiles: fds, RaftDB: db}}
}

// TestGrowth: the report's check passes a flat run whose warm-up grew,
// names exactly what grew by more than 10 % after it, and refuses a run
// too short to judge.
func TestGrowth(t *testing.T) {
	steady := flat(20, func(i int) Sample {
		rss := uint64(100e6)
		if i < 5 {
			rss = uint64(20e6 * (i + 1)) // warming up
		}
		return Sample{Servers: server(rss+uint64(i%3)*1e6, 50, 30, 64e6), SubmitP99Ms: 20, DispatchP99Ms: 30}
	})
	if got := Growth(steady, 5*time.Minute, 0.10); len(got) != 0 {
		t.Fatalf("a flat run: %q", got)
	}
	leak := flat(20, func(i int) Sample {
		return Sample{Servers: server(100e6+uint64(i)*2e6, 50+uint64(i)*3, 30, 64e6), SubmitP99Ms: 20, DispatchP99Ms: 30 + 2*float64(i)}
	})
	want := []string{
		"n1 rss grew 23.6%: 110000000 → 136000000",
		"n1 goroutines grew 60.0%: 65 → 104",
		"dispatch p99 ms grew 22.2%: 54 → 66",
	}
	if got := Growth(leak, 5*time.Minute, 0.10); !slices.Equal(got, want) {
		t.Fatalf("a leaking run:\n got %q\nwant %q", got, want)
	}
	if got := Growth(steady[:7], 5*time.Minute, 0.10); len(got) != 1 || got[0] != "too few samples after the warm-up of 5m0s: 2" {
		t.Fatalf("a short run: %q", got)
	}
}
