package sfq

// Wall-clock times are for display only: every deadline and rule runs on
// cluster time, which pauses while no leader runs (SPEC §4), so after an
// outage it lags the wall clock. Each log entry carries the leader's wall
// clock beside its cluster time; a record that shows a time keeps the wall
// time of that entry too, as a WallDelta from the cluster time of the same
// record, so that it costs 4 bytes and no rule can read it by mistake.

// WallDelta is a wall-clock time stored as its distance from a cluster
// time kept in the same record. An even value is twice a distance in
// milliseconds (exact within ±12.4 days); an odd value is twice a
// distance in whole seconds plus one (the nearest second, up to ±34
// years); a distance beyond that is clamped. The zero value means
// the wall time is the cluster time itself: so it reads for an entry that
// carried no wall clock (older builds, tools), and cluster time starts at
// the wall clock when a cluster is created.
type WallDelta int32

// The largest distance kept to the millisecond, and the largest kept at
// all, in seconds.
const (
	wallExactMs = 1<<30 - 1
	wallMaxS    = 1<<30 - 1
)

// MakeWallDelta returns the WallDelta of wall time wall from cluster time
// at; a wall of 0 (unknown) is no distance.
func MakeWallDelta(wall, at Time) WallDelta {
	if wall == 0 {
		return 0
	}
	d := int64(wall) - int64(at)
	overflow := (int64(wall)^int64(at))&(int64(wall)^d) < 0
	if !overflow && d >= -wallExactMs && d <= wallExactMs {
		return WallDelta(2 * d)
	}
	// Whole seconds, the nearest (a half rounds up), computed without
	// overflowing on distances near the int64 range.
	s := floorDiv(int64(wall), 1000) - floorDiv(int64(at), 1000)
	r := floorMod(int64(wall), 1000) - floorMod(int64(at), 1000) // -999..999
	s += floorDiv(r+500, 1000)
	s = min(max(s, -wallMaxS), wallMaxS)
	return WallDelta(2*s + 1)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }

// Wall returns the wall time d stores, given the cluster time at it is
// kept beside.
func (d WallDelta) Wall(at Time) Time {
	if d&1 == 0 {
		return at + Time(d>>1)
	}
	return at + Time(d>>1)*1000
}
