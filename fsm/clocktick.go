package fsm

import (
	"time"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
)

// The clock tick (SPEC §4 "Cluster time"). Cluster time moves only with
// the entries a leader stamps, and a new leader starts from the clock of
// the last applied entry: whatever time passed after it would go with a
// leader that crashes. So the leader commits a tick — an envelope with a
// stamp and no command — whenever no entry has been committed for
// clock_tick (leader.ClockTicks). A tick applies as any entry does (the
// clock becomes max(previous, stamp)) and does nothing else, on every
// build since the first: an envelope without commands has always been
// valid, so ticks need no feature level. Only the setting does: a
// clock_tick other than the default is written in the state (FSM state
// version 10, that of level 7), which a build of level 6 cannot read, so
// it needs Level7.

// Bounds and default of clock_tick.
const (
	DefaultClockTickMs = 1_000
	MinClockTickMs     = 100
	MaxClockTickMs     = 3_600_000
)

// stateVersionLevel7 is what a cluster at feature level 7 writes: version
// 9 with clock_tick after the pool settings. Its version says the level,
// as every version before it does.
const stateVersionLevel7 = 10

// ClockTick returns the clock tick in force.
func (c Config) ClockTick() time.Duration { return time.Duration(c.ClockTickMs) * time.Millisecond }

func validateClockTick(ms int64) error {
	if ms < MinClockTickMs || ms > MaxClockTickMs {
		return invalidf("", "clock_tick is %s (want %s .. %s)", (time.Duration(ms) * time.Millisecond).String(),
			time.Duration(MinClockTickMs)*time.Millisecond, time.Duration(MaxClockTickMs)*time.Millisecond)
	}
	return nil
}

// clockTickFromPB reads clock_tick_ms: 0 is the default.
func clockTickFromPB(p *pb.SchedulerConfig) int64 {
	if p.GetClockTickMs() == 0 {
		return DefaultClockTickMs
	}
	return p.GetClockTickMs()
}

// clockTickLevel is the level a SetConfig's clock_tick needs.
func clockTickLevel(p *pb.SchedulerConfig) (uint32, string) {
	if t := p.GetClockTickMs(); t != 0 && t != DefaultClockTickMs {
		return Level7, "clock_tick"
	}
	return Level1, ""
}

// encodeConfigClockTick writes the settings of version 10 after the
// pool settings: clock_tick, then max_total_queued_bytes (quotas.go).
func encodeConfigClockTick(e *sfq.Encoder, c *Config) {
	e.Varint(c.ClockTickMs)
	e.Uvarint(c.MaxTotalQueuedBytes)
}

func decodeConfigClockTick(d *sfq.Decoder, c *Config) {
	c.ClockTickMs = d.Varint()
	c.MaxTotalQueuedBytes = d.Uvarint()
}
