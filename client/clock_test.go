package client

import (
	"testing"
	"time"

	pb "github.com/baristahq/barista/proto"
)

// TestWhenShowsWallTime: a cluster time is shown as wall time by the
// answer's clock pair, also when cluster time runs 58 s behind the wall
// clock (after a full restart): a job submitted at wall 12:00:00 (cluster
// time then 1,000,000) with a delay of 10 s is due at wall 12:00:10, not
// 58 s earlier, before its submit.
func TestWhenShowsWallTime(t *testing.T) {
	wall := time.Date(2026, 12, 3, 12, 0, 5, 0, time.UTC).UnixMilli()
	now := &pb.ClockNow{ClusterMs: 1_005_000, WallMs: wall} // cluster time counts from its own start
	for _, tc := range []struct {
		at   int64
		want string
	}{
		{1_010_000, "in 5s (2026-12-03T12:00:10Z)"},
		{1_005_500, "now (2026-12-03T12:00:05Z)"},
		{1_000_000, "5s ago (2026-12-03T12:00:00Z)"},
		{1_005_000 + 5_500, "in 5.5s (2026-12-03T12:00:10Z)"},
		{1_005_000 + 3_723_400, "in 1h2m3s (2026-12-03T13:02:08Z)"},
	} {
		if got := When(now, tc.at); got != tc.want {
			t.Errorf("When(%d) = %q, want %q", tc.at, got, tc.want)
		}
	}
	if w, ok := WallAt(now, 1_010_000); !ok || w != time.Date(2026, 12, 3, 12, 0, 10, 0, time.UTC) {
		t.Errorf("WallAt: %v %v", w, ok)
	}
	if got := When(nil, 61_000); got != "at cluster time 61000 ms" {
		t.Errorf("without a clock: %q", got)
	}
}
