package rpc

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/leader"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// BenchmarkDispatchRound is one dispatch round of the leader's hub on a
// leader.Memory: 512 ready md workers (one entry's worth) and 100 tenants
// with queued md jobs, every worker in one pool, or the workers and the
// jobs split evenly over 4 pools. The round's selection, its proposal
// (applied at once: the state machine's Dispatch of every worker) and
// its assignments are measured; the runs that free the workers again are
// not. The cost and allocations per dispatch should not depend on the
// number of pools.
func BenchmarkDispatchRound(b *testing.B) {
	for _, pools := range []int{1, 4} {
		b.Run(fmt.Sprintf("pools=%d", pools), func(b *testing.B) {
			mem, err := leader.NewConfigured(fsm.DefaultConfig(), 1_000_000)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			h := newHub(ctx, mem, "n1", hclog.NewNullLogger(), newWorkerMetrics())
			apply := func(cmds ...*clusterpb.Command) []fsm.Result {
				res, err := mem.Propose(ctx, cmds)
				if err != nil {
					b.Fatal(err)
				}
				return res
			}
			names := []string{""}
			for p := 1; p < pools; p++ {
				names = append(names, fmt.Sprintf("p%d", p))
				apply(poolSetCmd(names[p]))
			}
			var cmds []*clusterpb.Command
			for i := range 100 {
				cmds = append(cmds, tenant(fmt.Sprintf("t%d", i), pb.Tier_GOLD))
			}
			apply(cmds...)
			// refill keeps 4,096 md jobs queued, spread over the tenants
			// and the pools.
			queued := 0
			refill := func() {
				cmds = cmds[:0]
				for ; queued < 4096; queued++ {
					cmds = append(cmds, &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: fmt.Sprintf("t%d", queued%100),
						Size: pb.Size_MD, EstCostMs: 1000, Pool: names[queued%pools]}}})
				}
				apply(cmds...)
			}
			refill()
			var sessions []*session
			for i := range maxDispatchBatch {
				s, err := h.open(fmt.Sprintf("w%04d", i), sfq.MD, names[i%pools])
				if err != nil {
					b.Fatal(err)
				}
				sessions = append(sessions, s)
			}
			credit := uint64(0)
			ready := func() {
				credit++
				for _, s := range sessions {
					s.credit, s.ready = credit, true
				}
			}
			// free ends the run of every session's job and refills the
			// queues.
			free := func() {
				cmds = cmds[:0]
				for _, s := range sessions {
					for len(s.out) > 0 {
						<-s.out
					}
					if s.job != 0 {
						cmds = append(cmds, &clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: uint64(s.job), Attempt: s.attempt,
							WorkerId: s.id, Outcome: pb.Outcome_OK, CpuMs: 1000}}})
						s.job, s.attempt = 0, 0
						queued--
					}
				}
				apply(cmds...)
				refill()
			}
			ready()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if !h.dispatchRound() {
					b.Fatal("the round assigned nothing")
				}
				b.StopTimer()
				free()
				ready()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*maxDispatchBatch), "ns/dispatch")
		})
	}
}
