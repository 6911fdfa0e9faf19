package leader

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/sfq"
)

// maxDelayBatch bounds the jobs one proposal releases, and the jobs it
// expires.
const maxDelayBatch = 1000

// delayPoll is the longest the delays loop sleeps: a job submitted with a
// short delay while it sleeps is released at most this late (plus one
// proposal), well within a second of its due time.
const delayPoll = 250 * time.Millisecond

// Delays releases scheduled jobs (delayed, or backing off after a failed
// run) when they are due, and expires jobs never dispatched whose
// expire_at has passed. It wakes at the earliest due time or expire_at,
// and at least every delayPoll; each pass proposes one entry holding one
// batched Release and one Expire ttl per job. It keeps nothing of its
// own: a new leader starts from the replicated state, and a release or
// expiry proposed twice (by the old leader and the new one) is refused by
// Apply the second time, so nothing is lost or done twice.
func Delays(n Node, log hclog.Logger) raftnode.LeaderLoop {
	return func(ctx context.Context) {
		for {
			wait := delayPoll
			if now, ok := n.ClusterNow(); ok {
				released, expired, err := ReleaseDue(ctx, n, now, log)
				if err != nil {
					log.Warn("release proposal failed", "error", err)
				}
				if released+expired >= maxDelayBatch {
					wait = 0 // more are due
				} else if next, ok := n.State().NextDelayWake(); ok && next > now {
					wait = min(wait, time.Duration(next-now)*time.Millisecond)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}
}

// ReleaseDue proposes, in one entry, a Release of the scheduled jobs due
// at now and an Expire ttl of each job whose expiry is due, at most
// maxDelayBatch of each, and returns how many Apply released and expired.
func ReleaseDue(ctx context.Context, n Node, now sfq.Time, log hclog.Logger) (released, expired int, err error) {
	rel, exp := n.State().DueDelays(now, maxDelayBatch)
	if len(rel) == 0 && len(exp) == 0 {
		return 0, 0, nil
	}
	var cmds []*clusterpb.Command
	if len(rel) > 0 {
		ids := make([]uint64, len(rel))
		for i, id := range rel {
			ids[i] = uint64(id)
		}
		cmds = append(cmds, &clusterpb.Command{Cmd: &clusterpb.Command_Release{Release: &clusterpb.Release{Jobs: ids}}})
	}
	for _, id := range exp {
		cmds = append(cmds, &clusterpb.Command{Cmd: &clusterpb.Command_Expire{Expire: &clusterpb.Expire{Job: uint64(id), Kind: clusterpb.ExpireKind_TTL}}})
	}
	ctx, cancel := context.WithTimeout(ctx, proposeTimeout)
	defer cancel()
	res, err := n.Propose(ctx, cmds)
	if err != nil {
		return 0, 0, err
	}
	for i, r := range res {
		switch {
		case cmds[i].GetRelease() != nil:
			released += int(r.Count)
			if r.Msg != "" {
				// Refused jobs (already released by a previous leader, or
				// expired meanwhile) are harmless.
				log.Debug("release", "released", r.Count, "refused", r.Msg)
			}
		case r.Outcome == sfq.Changed:
			expired++
			log.Info("job expired", "job", cmds[i].GetExpire().Job, "kind", "ttl")
		}
	}
	return released, expired, nil
}
