package client

import (
	"time"

	"github.com/baristahq/barista/internal/wire"
	pb "github.com/baristahq/barista/proto"
)

// WallAt turns a cluster time (ms) of an answer into the wall time it
// happens (or happened) at, by the answer's ClockNow: cluster time pauses
// while no leader runs, so it is not a wall time itself. ok is false when
// the answer carries no ClockNow (a node of an earlier build).
func WallAt(now *pb.ClockNow, clusterMs int64) (wall time.Time, ok bool) {
	return wire.WallAt(now, clusterMs)
}

// When says a cluster time (ms) of an answer to a person: how far from
// now, and the wall time, "in 5.5s (2026-12-03T12:31:04Z)" or "2m ago
// (...)". Without a ClockNow it says the raw cluster time, labelled: "at
// cluster time 61000 ms".
func When(now *pb.ClockNow, clusterMs int64) string { return wire.When(now, clusterMs) }
