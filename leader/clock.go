package leader

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/baristahq/barista/raftnode"
)

// Clock ticks (SPEC §4 "Cluster time", fsm/clocktick.go). A new leader
// starts cluster time from the stamp of the last applied entry, so the
// time that passed after it goes with a leader that crashes; a cluster
// idle for an hour would lose the hour, and every delay, deadline,
// expiry, lease and rate window would move back by as much. The leader
// therefore commits a tick, an entry with a stamp and no command,
// whenever no entry has been stamped for clock_tick: a crash then loses
// at most clock_tick plus the election. A tick goes through the
// coalescer like any proposal, so it shares an entry with whatever is
// queued at that moment; and while entries are stamped more often than
// clock_tick (a cluster with any load), none is proposed at all.

// maxTickSleep bounds the loop's sleep, so that a clock_tick shortened
// by a SetConfig takes effect within a second.
const maxTickSleep = time.Second

// ClockMetrics counts the ticks the leader committed.
type ClockMetrics struct {
	ticks prometheus.Counter
}

// NewClockMetrics registers the clock tick metrics with reg (none if nil).
func NewClockMetrics(reg prometheus.Registerer) *ClockMetrics {
	m := &ClockMetrics{ticks: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "barista_clock_ticks_total",
		Help: "Clock ticks this node committed as leader: entries without a command, proposed when no entry had been stamped for clock_tick."})}
	if reg != nil {
		reg.MustRegister(m.ticks)
	}
	return m
}

// ClockTicks commits a clock tick whenever no entry has been stamped for
// the configuration's clock_tick (TickOnce), for as long as ctx lives.
func ClockTicks(n Node, log hclog.Logger, m *ClockMetrics) raftnode.LeaderLoop {
	return func(ctx context.Context) {
		for {
			ticked, wait, err := TickOnce(ctx, n)
			switch {
			case err != nil && ctx.Err() == nil:
				log.Warn("clock tick failed", "error", err)
			case ticked && m != nil:
				m.ticks.Inc()
			}
			t := time.NewTimer(min(wait, maxTickSleep))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// TickOnce proposes a clock tick if, at the cluster time the next entry
// would carry, no entry has been stamped for clock_tick, and returns
// whether it did and how long until the next tick may be due.
func TickOnce(ctx context.Context, n Node) (ticked bool, wait time.Duration, err error) {
	tick := n.State().Config().ClockTick()
	now, ok := n.ClusterNow()
	if !ok {
		return false, tick, nil
	}
	if idle := time.Duration(now-n.Stamped()) * time.Millisecond; idle < tick {
		return false, tick - idle, nil
	}
	ctx, cancel := context.WithTimeout(ctx, proposeTimeout)
	defer cancel()
	if _, err := n.Propose(ctx, nil); err != nil {
		return false, tick, err
	}
	return true, tick, nil
}
