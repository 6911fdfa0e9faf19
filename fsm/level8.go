package fsm

import (
	"strings"

	"github.com/baristahq/barista/internal/text"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// The settings of feature level 8: event_retention_per_tenant (each
// tenant's recent history, eventkeep.go) and max_worker_records (the
// worker records drains may make, here). Each is a setting of the
// replicated configuration that only a cluster at Level8 may hold: Apply
// reads it as it reads any setting, and below Level8 it is 0 (none), so
// that the commands of an older log mean what they meant.

// DefaultMaxWorkerRecords is max_worker_records on a new cluster.
const DefaultMaxWorkerRecords = 100_000

// maxRecordsLimit bounds both settings.
const maxRecordsLimit = 1 << 40

// stateVersionLevel8 (feature level 8) is version 10 with the two
// settings after clock_tick's section and, after the event log, the
// events tenants keep (eventkeep.go). It is what a cluster at Level8
// writes, whatever it holds, so that the level is read back from it.
const stateVersionLevel8 = 11

func (c Config) validateLevel8() error {
	if c.EventRetentionPerTenant > maxRecordsLimit {
		return invalidf("event_retention_per_tenant", "event_retention_per_tenant is %d (want 0 = none, or up to %d)", c.EventRetentionPerTenant, uint64(maxRecordsLimit))
	}
	if c.MaxSchedules < 1 || c.MaxSchedules > MaxMaxSchedules {
		return invalidf("max_schedules", "max_schedules is %d (want 1 .. %d)", c.MaxSchedules, MaxMaxSchedules)
	}
	if c.MaxWorkerRecords > maxRecordsLimit {
		return invalidf("max_worker_records", "max_worker_records is %d (want 0 = none, or up to %d)", c.MaxWorkerRecords, uint64(maxRecordsLimit))
	}
	return nil
}

// level8ConfigLevel is the level a SetConfig's settings of level 8 need:
// a value other than none or the default.
func level8ConfigLevel(p *pb.SchedulerConfig) (uint32, string) {
	switch {
	case p.GetEventRetentionPerTenant() != 0 && p.GetEventRetentionPerTenant() != DefaultEventRetentionPerTenant:
		return Level8, "event_retention_per_tenant"
	case p.GetMaxWorkerRecords() != 0 && p.GetMaxWorkerRecords() != DefaultMaxWorkerRecords:
		return Level8, "max_worker_records"
	}
	return Level1, ""
}

func encodeConfigLevel8(e *sfq.Encoder, c *Config) {
	e.Uvarint(c.EventRetentionPerTenant)
	e.Uvarint(c.MaxWorkerRecords)
}

func decodeConfigLevel8(d *sfq.Decoder, c *Config) {
	c.EventRetentionPerTenant = d.Uvarint()
	c.MaxWorkerRecords = d.Uvarint()
}

// checkWorkerDrain is the check of a WorkerDrain, the first half of its
// Apply: a worker already drained (or not) as asked changes nothing
// (Duplicate: the leader answers it without an entry), and a drain that
// would make a record past max_worker_records is refused.
func (f *FSM) checkWorkerDrain(c *clusterpb.WorkerDrain) Result {
	if r := validWorkerID(c.WorkerId); r.Code != OK {
		return r
	}
	w := f.workers[c.WorkerId]
	switch {
	case w != nil && w.Drained == c.Drain:
		return Result{Outcome: sfq.Duplicate}
	case w == nil && f.cfg.MaxWorkerRecords > 0 && uint64(len(f.workers)) >= f.cfg.MaxWorkerRecords:
		return refuseWhy(ResourceExhausted, text.ReasonQuotaExceeded, "worker_id",
			"the cluster holds %d worker records, its max_worker_records: a drain of a worker it holds no record of would make one more (records of workers not seen within job_retention are pruned)", len(f.workers))
	}
	return Result{}
}

// CountWorkers returns how many worker records the state holds whose ID
// begins with prefix, counting no further than limit (0: all).
func (f *FSM) CountWorkers(prefix string, limit int) int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if prefix == "" {
		if limit > 0 {
			return min(len(f.workers), limit)
		}
		return len(f.workers)
	}
	n := 0
	for id := range f.workers {
		if strings.HasPrefix(id, prefix) {
			if n++; limit > 0 && n >= limit {
				break
			}
		}
	}
	return n
}
