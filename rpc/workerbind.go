package rpc

import (
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/auth"
)

// Worker records per binding. A worker token bound to a prefix of IDs
// ("gpu-*") could make a record for each ID of its prefix — connect as a
// new ID, then drain it — and the records stay for job_retention. So on
// the leader a new ID of such a token (a session of a worker the state
// holds no record of, or a drain that would make one) is refused
// RESOURCE_EXHAUSTED while the state holds limits.worker_records_per_binding
// records of the binding. The count is of the replicated records (read
// at most once a second per binding, and counted up as this node makes
// some); the cluster's max_worker_records bounds every binding together.
// A token bound to one ID makes one record. One bound to none (a fleet's
// shared token) may drain no worker, but each session of a new ID makes a
// record (the leader records what a worker runs, feature level 8): its
// new IDs are refused while the state holds limits.worker_records_unbound
// records in all.

// DefaultWorkerRecordsPerBinding is limits.worker_records_per_binding,
// and DefaultWorkerRecordsUnbound limits.worker_records_unbound.
const (
	DefaultWorkerRecordsPerBinding = 10_000
	DefaultWorkerRecordsUnbound    = 100_000
)

// bindingRecords counts the worker records of each prefix binding, and
// every record for the tokens bound to no ID.
type bindingRecords struct {
	limit, unbound int
	f              *fsm.FSM
	mu             sync.Mutex
	count          map[string]bindingCount // by prefix; unboundKey: every record
}

// unboundKey is the count of every record (no prefix binding is
// spelled so).
const unboundKey = "\x00unbound"

type bindingCount struct {
	n  int
	at time.Time
}

// bindingRecount is how long a binding's count is trusted.
const bindingRecount = time.Second

func newBindingRecords(limit, unbound int, f *fsm.FSM) *bindingRecords {
	return &bindingRecords{limit: limit, unbound: unbound, f: f, count: map[string]bindingCount{}}
}

// admit refuses a new record of worker id for a caller whose binding
// holds its bound of records, or, bound to no ID, while the state holds
// the bound of every record; made says one was made (or will be).
func (b *bindingRecords) admit(caller auth.Identity, id string) (made func(), err error) {
	if b == nil || caller.Role != auth.RoleWorker {
		return func() {}, nil
	}
	prefix, wild := strings.CutSuffix(caller.Worker, "*")
	key, limit := prefix, b.limit
	switch {
	case caller.Worker == "":
		key, limit = unboundKey, b.unbound
	case !wild:
		return func() {}, nil
	}
	if _, known := b.f.Worker(id); known {
		return func() {}, nil
	}
	b.mu.Lock()
	c, ok := b.count[key]
	b.mu.Unlock()
	if !ok || time.Since(c.at) > bindingRecount {
		c = bindingCount{n: b.f.CountWorkers(prefix, limit), at: time.Now()}
		b.mu.Lock()
		b.count[key] = c
		b.mu.Unlock()
	}
	if c.n >= limit {
		if key == unboundKey {
			return nil, status.Errorf(codes.ResourceExhausted,
				"worker_id %q: the cluster holds %d worker records, the most past which a worker token bound to no ID may make new ones (limits.worker_records_unbound); records of workers not seen within job_retention are pruned",
				id, c.n)
		}
		return nil, status.Errorf(codes.ResourceExhausted,
			"worker_id %q: the cluster holds %d records of workers of this token's binding %q, the most it may (limits.worker_records_per_binding); records of workers not seen within job_retention are pruned",
			id, c.n, caller.Worker)
	}
	return func() {
		b.mu.Lock()
		if c, ok := b.count[key]; ok {
			c.n++
			b.count[key] = c
		}
		b.mu.Unlock()
	}, nil
}
