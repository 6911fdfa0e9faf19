package raftnode

import (
	"context"
	"sync"
	"testing"
	"time"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
)

// TestEnqueueOrder: proposals apply in the order they were queued, even
// while several entries are in flight at once. Each goroutine queues
// submits one after another without waiting and must see its job IDs
// rise in that order (a later entry handed to Raft before an earlier one
// would give a later submit the smaller ID); every entry index of one
// goroutine rises or stays the same too.
func TestEnqueueOrder(t *testing.T) {
	n, err := New(testConfig(t, t.TempDir(), 1024))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	waitLeader(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, res, err := n.Propose(ctx, []*clusterpb.Command{{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "a", Tier: pb.Tier_GOLD}}}}); err != nil || res[0].Err() != nil {
		t.Fatalf("tenant: %v %v", err, res)
	}
	const writers, each = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var queued []*Pending
			for range each {
				q, err := n.Enqueue(ctx, []*clusterpb.Command{{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "a", Size: pb.Size_SM, EstCostMs: 100}}}})
				if err != nil {
					t.Error(err)
					return
				}
				queued = append(queued, q)
			}
			var lastIndex, lastJob uint64
			for i, q := range queued {
				index, res, err := q.Wait(ctx)
				if err != nil || res[0].Err() != nil {
					t.Errorf("writer %d, proposal %d: %v %v", w, i, err, res)
					return
				}
				if index < lastIndex || uint64(res[0].Job) <= lastJob {
					t.Errorf("writer %d, proposal %d: entry %d, job %d after entry %d, job %d", w, i, index, res[0].Job, lastIndex, lastJob)
					return
				}
				lastIndex, lastJob = index, uint64(res[0].Job)
			}
		}()
	}
	wg.Wait()
}
