package schedule

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestGoldenDSTFires: the fires the golden scenario schedule-dst states
// (testdata/scenarios/schedule-dst.txt) are exactly the slots this
// package computes for its spec and zone: from its set until its pause,
// and from its resume on.
func TestGoldenDSTFires(t *testing.T) {
	b, err := os.ReadFile("../testdata/scenarios/schedule-dst.txt")
	if err != nil {
		t.Fatal(err)
	}
	var at time.Time
	var fires []int64
	var from []time.Time // where each run of fires counts from: the set, the resume
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "at":
			if at, err = time.Parse(time.RFC3339, f[1]); err != nil {
				t.Fatal(err)
			}
		case len(f) > 3 && f[0] == "schedule" && strings.HasPrefix(f[3], "spec="), len(f) == 4 && f[0] == "schedule" && f[3] == "resume":
			from = append(from, at)
		case len(f) == 4 && f[0] == "fire":
			slot, err := time.Parse(time.RFC3339, f[3])
			if err != nil {
				t.Fatal(err)
			}
			fires = append(fires, slot.UnixMilli())
		}
	}
	s, err := Parse("30 2 * * *", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	if len(from) != 2 {
		t.Fatalf("the script sets and resumes at %v", from)
	}
	want := append(s.Slots(from[0].UnixMilli(), 3), s.Slots(from[1].UnixMilli(), 3)...)
	if !slices.Equal(fires, want) {
		t.Fatalf("the script fires %v, the leader computes %v", fires, want)
	}
}
