package soak

import (
	"os"
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
// and one with a single slow minute; names exactly what grew by more than
// 10 % after the warm-up; and refuses a run too short to judge.
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
	// The dispatch p99 comes from a histogram whose buckets double: moving
	// between two neighbouring buckets is within its resolution.
	flapping := flat(20, func(i int) Sample {
		d := 128.0
		if i%3 != 0 || i >= 17 {
			d = 256
		}
		return Sample{Servers: server(100e6, 50, 30, 64e6), SubmitP99Ms: 20, DispatchP99Ms: d}
	})
	if got := Growth(flapping, 5*time.Minute, 0.10); len(got) != 0 {
		t.Fatalf("a dispatch p99 between two buckets: %q", got)
	}
	// One slow minute among the last three is not growth, nor is one
	// before them; latencies that stay up are.
	for _, slow := range []int{17, 18, 19, 10} {
		spike := flat(20, func(i int) Sample {
			p := 20.0
			if i == slow {
				p = 120
			}
			return Sample{Servers: server(100e6, 50, 30, 64e6), SubmitP99Ms: p, DispatchP99Ms: 128}
		})
		if got := Growth(spike, 5*time.Minute, 0.10); len(got) != 0 {
			t.Fatalf("one slow minute (%d): %q", slow, got)
		}
	}
	raised := flat(20, func(i int) Sample {
		p := 20.0
		if i >= 18 {
			p = 40
		}
		return Sample{Servers: server(100e6, 50, 30, 64e6), SubmitP99Ms: p, DispatchP99Ms: 128}
	})
	if got := Growth(raised, 5*time.Minute, 0.10); !slices.Equal(got, []string{"submit p99 ms grew 100.0%: 20 → 40"}) {
		t.Fatalf("two slow minutes of the last three: %q", got)
	}
	leak := flat(20, func(i int) Sample {
		d := 32.0
		if i >= 17 {
			d = 256
		}
		return Sample{Servers: server(100e6+uint64(i)*2e6, 50+uint64(i)*3, 30, 64e6), SubmitP99Ms: 20 + 2*float64(i), DispatchP99Ms: d}
	})
	want := []string{
		"n1 rss grew 23.6%: 110000000 → 136000000",
		"n1 goroutines grew 60.0%: 65 → 104",
		"submit p99 ms grew 27.3%: 44 → 56",
		"dispatch p99 ms grew 700.0%: 32 → 256",
	}
	if got := Growth(leak, 5*time.Minute, 0.10); !slices.Equal(got, want) {
		t.Fatalf("a leaking run:\n got %q\nwant %q", got, want)
	}
	if got := Growth(steady[:7], 5*time.Minute, 0.10); len(got) != 1 || got[0] != "too few samples after the warm-up of 5m0s: 2" {
		t.Fatalf("a short run: %q", got)
	}
}

// TestSavedReport checks a report the soak wrote, named by
// SOAK_CHECK_REPORT (skipped without it), as the soak does at its end:
// the warm-up is the first sixth of the run.
func TestSavedReport(t *testing.T) {
	path := os.Getenv("SOAK_CHECK_REPORT")
	if path == "" {
		t.Skip("SOAK_CHECK_REPORT names no report")
	}
	samples, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) == 0 {
		t.Fatalf("%s holds no sample", path)
	}
	t.Logf("%d samples:\n%s", len(samples), Table(samples))
	for _, g := range Growth(samples, samples[len(samples)-1].At/6, 0.10) {
		t.Error(g)
	}
}
