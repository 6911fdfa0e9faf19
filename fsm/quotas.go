package fsm

import (
	"github.com/baristahq/barista/internal/text"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
)

// Tenant quotas by default (feature level 6). A tenant holds at most its
// own max_queued scheduled and queued jobs — or, with none of its own,
// the cluster's default_max_queued — and at most max_queued_bytes of
// payloads in its unfinished jobs (scheduled, queued, assigned,
// running). Both are settings of the replicated configuration, counted in
// Apply (and checked by the leader before it proposes): a submit or a
// redrive beyond them is RESOURCE_EXHAUSTED. 0 is no bound. A new
// cluster starts with DefaultMaxQueued and DefaultMaxQueuedBytes; a
// cluster raised to level 6 has none until they are set.

// Every tenant together (feature level 7): at most max_total_queued_bytes
// of payloads in unfinished jobs, so that a cluster of many tenants at
// their quotas still fits its servers' memory (docs/security.md, "Worst
// case"). A new cluster at level 7 starts with
// DefaultMaxTotalQueuedBytes; one raised to level 7 has none until set.

// The defaults of a new cluster.
const (
	DefaultMaxQueued           = 100_000
	DefaultMaxQueuedBytes      = 64 << 20
	DefaultMaxTotalQueuedBytes = 4 << 30
	// maxQueuedBytesLimit bounds the setting (1 PiB).
	maxQueuedBytesLimit = 1 << 50
)

// Quotas are the configuration's tenant quotas in force.
type Quotas struct {
	DefaultMaxQueued    uint32
	MaxQueuedBytes      uint64
	MaxTotalQueuedBytes uint64 // Level7
}

// quotas returns the quotas in force (none below the levels that added
// them: the configuration holds none there, normalize).
func (f *FSM) quotas() Quotas {
	return Quotas{DefaultMaxQueued: f.cfg.DefaultMaxQueued, MaxQueuedBytes: f.cfg.MaxQueuedBytes, MaxTotalQueuedBytes: f.cfg.MaxTotalQueuedBytes}
}

// ReadQuotas runs fn with the scheduling core and the quotas in force,
// under the read lock (see Read).
func (f *FSM) ReadQuotas(fn func(s *sfq.Scheduler, q Quotas)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.sched, f.quotas())
}

// Room says why tenant t (index ti of s) may not take one more job with
// a payload of payload bytes ("" if it may): room's refusal, on the
// state alone.
func (q Quotas) Room(s *sfq.Scheduler, ti uint32, t *sfq.Tenant, payload int) string {
	if r := q.room(t, 0, s.UnfinishedPayload(ti), s.UnfinishedPayloadAll(), payload); r != nil {
		return r.Msg
	}
	return ""
}

// room refuses one more job of tenant t with a payload of payload bytes
// when it would pass its max_queued (or the default_max_queued it falls
// under) or max_queued_bytes; t holds its jobs in every pool and
// heldBytes the payloads of its unfinished jobs, and extra jobs more are
// counted as queued (those of a batch admitted before this one);
// allBytes is what every tenant's unfinished jobs hold (with the batch's
// before this one).
func (q Quotas) room(t *sfq.Tenant, extra uint32, heldBytes, allBytes uint64, payload int) *sfq.Refusal {
	held := t.QueuedTotal() + t.Scheduled + extra // each scheduled job will be queued
	switch {
	case t.Caps.MaxQueued > 0 && held >= t.Caps.MaxQueued:
		return sfq.Refusef(ResourceExhausted, text.ReasonQuotaExceeded, "", "tenant %q has %d queued jobs, its max_queued quota", t.Name, held)
	case t.Caps.MaxQueued == 0 && q.DefaultMaxQueued > 0 && held >= q.DefaultMaxQueued:
		return sfq.Refusef(ResourceExhausted, text.ReasonQuotaExceeded, "", "tenant %q has %d queued jobs, the cluster's default_max_queued (it has no max_queued of its own)", t.Name, held)
	}
	if q.MaxQueuedBytes > 0 && heldBytes+uint64(payload) > q.MaxQueuedBytes {
		return sfq.Refusef(ResourceExhausted, text.ReasonQuotaExceeded, "", "tenant %q holds %d bytes of payloads in its unfinished jobs; with this job's %d it would pass the cluster's max_queued_bytes of %d",
			t.Name, heldBytes, payload, q.MaxQueuedBytes)
	}
	if q.MaxTotalQueuedBytes > 0 && allBytes+uint64(payload) > q.MaxTotalQueuedBytes {
		return sfq.Refusef(ResourceExhausted, text.ReasonQuotaExceeded, "", "the tenants hold %d bytes of payloads in their unfinished jobs; with this job's %d they would pass the cluster's max_total_queued_bytes of %d",
			allBytes, payload, q.MaxTotalQueuedBytes)
	}
	return nil
}

func (q Quotas) validate() error {
	if q.MaxQueuedBytes > maxQueuedBytesLimit {
		return invalidf("", "max_queued_bytes is %d (want 0 = none, or up to %d)", q.MaxQueuedBytes, uint64(maxQueuedBytesLimit))
	}
	if q.MaxTotalQueuedBytes > maxQueuedBytesLimit {
		return invalidf("", "max_total_queued_bytes is %d (want 0 = none, or up to %d)", q.MaxTotalQueuedBytes, uint64(maxQueuedBytesLimit))
	}
	return nil
}

func encodeConfigQuotas(e *sfq.Encoder, c *Config) {
	e.Uvarint(uint64(c.DefaultMaxQueued))
	e.Uvarint(c.MaxQueuedBytes)
}

func decodeConfigQuotas(d *sfq.Decoder, c *Config) {
	c.DefaultMaxQueued = d.Uint32()
	c.MaxQueuedBytes = d.Uvarint()
}

// quotasLevel is the level a SetConfig's quotas need: a value other than
// none or the default needs Level6 (below it Apply keeps none: a
// configuration that carries the defaults, as ConfigToPB of
// DefaultConfig does, is taken at any level).
func quotasLevel(p *pb.SchedulerConfig) (uint32, string) {
	switch {
	case p.GetDefaultMaxQueued() != 0 && p.GetDefaultMaxQueued() != DefaultMaxQueued:
		return Level6, "default_max_queued"
	case p.GetMaxTotalQueuedBytes() != 0 && p.GetMaxTotalQueuedBytes() != DefaultMaxTotalQueuedBytes:
		return Level7, "max_total_queued_bytes"
	case p.GetMaxQueuedBytes() != 0 && p.GetMaxQueuedBytes() != DefaultMaxQueuedBytes:
		return Level6, "max_queued_bytes"
	}
	return Level1, ""
}
