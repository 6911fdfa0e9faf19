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
// A token bound to one ID makes one record; one bound to none (a fleet's
// shared token) may drain no worker, and its records come only from
// dispatches, which take a job each.

// DefaultWorkerRecordsPerBinding is limits.worker_records_per_binding.
const DefaultWorkerRecordsPerBinding = 10_000

// bindingRecords counts the worker records of each prefix binding.
type bindingRecords struct {
	limit int
	f     *fsm.FSM
	mu    sync.Mutex
	count map[string]bindingCount // by prefix
}

type bindingCount struct {
	n  int
	at time.Time
}

// bindingRecount is how long a binding's count is trusted.
const bindingRecount = time.Second

func newBindingRecords(limit int, f *fsm.FSM) *bindingRecords {
	return &bindingRecords{limit: limit, f: f, count: map[string]bindingCount{}}
}

// admit refuses a new record of worker id for a caller whose binding
// holds its bound of records; made says one was made (or will be).
func (b *bindingRecords) admit(caller auth.Identity, id string) (made func(), err error) {
	prefix, wild := strings.CutSuffix(caller.Worker, "*")
	if b == nil || caller.Role != auth.RoleWorker || !wild {
		return func() {}, nil
	}
	if _, known := b.f.Worker(id); known {
		return func() {}, nil
	}
	b.mu.Lock()
	c, ok := b.count[prefix]
	b.mu.Unlock()
	if !ok || time.Since(c.at) > bindingRecount {
		c = bindingCount{n: b.f.CountWorkers(prefix, b.limit), at: time.Now()}
		b.mu.Lock()
		b.count[prefix] = c
		b.mu.Unlock()
	}
	if c.n >= b.limit {
		return nil, status.Errorf(codes.ResourceExhausted,
			"worker_id %q: the cluster holds %d records of workers of this token's binding %q, the most it may (limits.worker_records_per_binding); records of workers not seen within job_retention are pruned",
			id, c.n, caller.Worker)
	}
	return func() {
		b.mu.Lock()
		if c, ok := b.count[prefix]; ok {
			c.n++
			b.count[prefix] = c
		}
		b.mu.Unlock()
	}, nil
}
