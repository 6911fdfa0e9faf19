package leader

import (
	"context"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/sfq"
)

// maxExpiries bounds the Expire commands of one proposal.
const maxExpiries = 1000

// DeadlineMetrics counts the deadlines the leader expired.
type DeadlineMetrics struct {
	expiries *prometheus.CounterVec
}

// NewDeadlineMetrics registers the deadline metrics with reg (none if nil).
func NewDeadlineMetrics(reg prometheus.Registerer) *DeadlineMetrics {
	m := &DeadlineMetrics{expiries: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "barista_expiries_total", Help: "Deadlines the leader expired, by kind (ack, lease, timeout)."}, []string{"kind"})}
	for _, kind := range []string{"ack", "lease", "timeout"} {
		m.expiries.WithLabelValues(kind)
	}
	if reg != nil {
		reg.MustRegister(m.expiries)
	}
	return m
}

// Deadlines proposes an Expire for every passed deadline (an unacknowledged
// assignment, a lease not renewed, a run over its timeout) at least every
// tenth of the shorter of the ack and lease timeouts, and at most every
// second; Apply checks each deadline again.
func Deadlines(n Node, log hclog.Logger, m *DeadlineMetrics) raftnode.LeaderLoop {
	return func(ctx context.Context) {
		for {
			cfg := n.State().Config()
			period := time.Duration(min(cfg.Sched.AckTimeoutMs, cfg.Sched.LeaseTimeoutMs)) * time.Millisecond / 10
			select {
			case <-ctx.Done():
				return
			case <-time.After(min(max(period, 20*time.Millisecond), time.Second)):
			}
			now, ok := n.ClusterNow()
			if !ok {
				continue
			}
			if _, err := ExpireDue(ctx, n, now, log, m); err != nil {
				log.Warn("expiry proposal failed", "error", err)
			}
		}
	}
}

// ExpireDue proposes the expiries due at now (at most maxExpiries) and returns
// how many Apply carried out.
func ExpireDue(ctx context.Context, n Node, now sfq.Time, log hclog.Logger, m *DeadlineMetrics) (int, error) {
	var cmds []*clusterpb.Command
	n.State().Due(now, func(id sfq.JobID, attempt uint32, kind sfq.InputKind) bool {
		cmds = append(cmds, &clusterpb.Command{Cmd: &clusterpb.Command_Expire{Expire: &clusterpb.Expire{Job: uint64(id), Attempt: attempt, Kind: expireKind(kind)}}})
		return len(cmds) < maxExpiries
	})
	if len(cmds) == 0 {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, proposeTimeout)
	defer cancel()
	res, err := n.Propose(ctx, cmds)
	if err != nil {
		return 0, err
	}
	done := 0
	for i, r := range res {
		if r.Outcome != sfq.Changed {
			continue
		}
		done++
		e := cmds[i].GetExpire()
		kind := strings.ToLower(e.Kind.String())
		if m != nil {
			m.expiries.WithLabelValues(kind).Inc()
		}
		log.Info("deadline expired", "job", e.Job, "attempt", e.Attempt, "kind", kind)
	}
	return done, nil
}

func expireKind(k sfq.InputKind) clusterpb.ExpireKind {
	switch k {
	case sfq.InExpireAck:
		return clusterpb.ExpireKind_ACK
	case sfq.InExpireLease:
		return clusterpb.ExpireKind_LEASE
	}
	return clusterpb.ExpireKind_TIMEOUT
}

// Expiries returns the counter of one kind (ack, lease, timeout).
func (m *DeadlineMetrics) Expiries(kind string) prometheus.Counter {
	return m.expiries.WithLabelValues(kind)
}
