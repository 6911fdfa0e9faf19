package wire

import (
	"strconv"
	"time"

	pb "github.com/baristahq/barista/proto"
)

// WallAt turns a cluster time (ms) of an answer into the wall time it
// happens (or happened) at, by the answer's ClockNow: cluster time pauses
// while no leader runs, so it is not a wall time itself. ok is false when
// the answer carries no ClockNow (a node of an earlier build).
func WallAt(now *pb.ClockNow, clusterMs int64) (wall time.Time, ok bool) {
	if now == nil || now.WallMs == 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(now.WallMs + (clusterMs - now.ClusterMs)).UTC(), true
}

// When says a cluster time (ms) of an answer to a person: how far from
// now, and the wall time, "in 5.5s (2026-12-03T12:31:04Z)" or "2m ago
// (...)". Without a ClockNow it says the raw cluster time, labelled: "at
// cluster time 61000 ms".
func When(now *pb.ClockNow, clusterMs int64) string {
	wall, ok := WallAt(now, clusterMs)
	if !ok {
		return "at cluster time " + strconv.FormatInt(clusterMs, 10) + " ms"
	}
	d := time.Duration(clusterMs-now.ClusterMs) * time.Millisecond
	at := wall.Format("2006-01-02T15:04:05Z")
	switch {
	case d >= time.Second:
		return "in " + round(d).String() + " (" + at + ")"
	case d <= -time.Second:
		return round(-d).String() + " ago (" + at + ")"
	}
	return "now (" + at + ")"
}

// round keeps a duration to a tenth of a second under a minute, to the
// second above.
func round(d time.Duration) time.Duration {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}
