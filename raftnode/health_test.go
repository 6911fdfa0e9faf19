package raftnode

import (
	"testing"
	"time"
)

func TestLagTracker(t *testing.T) {
	var l lagTracker
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	steps := []struct {
		saw     uint64 // 0: no announcement
		atMs    int
		applied uint64
		commit  uint64
		ageMs   int
	}{
		{saw: 10, atMs: 0, applied: 10, commit: 10, ageMs: 0},   // caught up
		{saw: 20, atMs: 100, applied: 10, commit: 20, ageMs: 0}, // behind since now
		{atMs: 600, applied: 12, commit: 20, ageMs: 500},        // still behind the commit seen at 100
		{saw: 30, atMs: 700, applied: 15, commit: 30, ageMs: 600},
		{saw: 31, atMs: 720, applied: 20, commit: 31, ageMs: 20}, // 20 applied: the sample of 700 is the oldest left
		{saw: 29, atMs: 800, applied: 31, commit: 31, ageMs: 0},  // an older announcement is ignored
	}
	for i, s := range steps {
		if s.saw != 0 {
			l.saw(s.saw, at(s.atMs))
		}
		commit, age := l.behind(s.applied, at(s.atMs))
		if commit != s.commit || age != time.Duration(s.ageMs)*time.Millisecond {
			t.Fatalf("step %d: commit %d age %s, want %d %dms", i, commit, age, s.commit, s.ageMs)
		}
	}
}

func TestLagTrackerBounded(t *testing.T) {
	var l lagTracker
	t0 := time.Unix(1000, 0)
	for i := range 3 * lagMaxSamples {
		l.saw(uint64(i+1), t0.Add(time.Duration(i)*time.Second))
	}
	if len(l.samples) > lagMaxSamples {
		t.Fatalf("%d samples kept, limit %d", len(l.samples), lagMaxSamples)
	}
	// Nothing applied: the age is measured from the very first sample.
	_, age := l.behind(0, t0.Add(time.Duration(3*lagMaxSamples)*time.Second))
	if want := time.Duration(3*lagMaxSamples) * time.Second; age != want {
		t.Fatalf("age %s, want %s", age, want)
	}
}
