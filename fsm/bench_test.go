package fsm

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/hashicorp/raft"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// benchFSM returns an FSM with 1,000 tenants and queued jobs, and the next
// log index.
func benchFSM(b *testing.B, queued int) (*FSM, uint64) {
	b.Helper()
	f := NewLatest()
	var index uint64
	apply := func(cmds ...*clusterpb.Command) {
		index++
		if _, err := f.ApplyEnvelope(index, &clusterpb.Envelope{Version: Version, StampMs: int64(index), Commands: cmds}); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 1000 {
		apply(tenant(fmt.Sprintf("t%d", i), pb.Tier(1+i%5)))
	}
	for i := 0; i < queued; i += 100 {
		var cmds []*clusterpb.Command
		for j := i; j < i+100 && j < queued; j++ {
			cmds = append(cmds, submit(fmt.Sprintf("t%d", j%1000), "", 1000, "run"))
		}
		apply(cmds...)
	}
	return f, index
}

// logs encodes one single-command entry per op.
func logs(b *testing.B, first uint64, n int, cmd func(i int) *clusterpb.Command) []*raft.Log {
	out := make([]*raft.Log, n)
	for i := range out {
		data, err := Encode(&clusterpb.Envelope{Version: Version, StampMs: int64(first) + int64(i), Commands: []*clusterpb.Command{cmd(i)}})
		if err != nil {
			b.Fatal(err)
		}
		out[i] = &raft.Log{Index: first + uint64(i), Type: raft.LogCommand, Data: data}
	}
	return out
}

func runLogs(b *testing.B, f *FSM, ls []*raft.Log) {
	b.ReportAllocs()
	b.ResetTimer()
	for _, l := range ls {
		res, ok := f.Apply(l).([]Result)
		if !ok || res[0].Code != OK || (res[0].Outcome != 0 && res[0].Outcome != sfq.Changed) {
			b.Fatalf("entry %d: %+v", l.Index, res)
		}
		for _, o := range res[0].HeartbeatOutcomes {
			if o != sfq.Changed {
				b.Fatalf("heartbeat %d: %s", l.Index, o)
			}
		}
	}
}

// BenchmarkApply measures Apply of one command per log entry (decode
// included) against 1,000 tenants, per command type.
func BenchmarkApply(b *testing.B) {
	b.Run("submit", func(b *testing.B) {
		f, idx := benchFSM(b, 100_000)
		ls := logs(b, idx+1, b.N, func(i int) *clusterpb.Command { return submit(fmt.Sprintf("t%d", i%1000), "", 1000, "run") })
		runLogs(b, f, ls)
	})
	b.Run("submit-keyed", func(b *testing.B) {
		f, idx := benchFSM(b, 100_000)
		ls := logs(b, idx+1, b.N, func(i int) *clusterpb.Command {
			return submit(fmt.Sprintf("t%d", i%1000), fmt.Sprintf("key-%d", i), 1000, "run")
		})
		runLogs(b, f, ls)
	})
	b.Run("dispatch", func(b *testing.B) {
		f, idx := benchFSM(b, b.N+1000)
		ls := logs(b, idx+1, b.N, func(i int) *clusterpb.Command { return dispatch(fmt.Sprintf("w%d", i), 1) })
		runLogs(b, f, ls)
	})
	// The worker events need jobs in the right state first; jobs[i] is the
	// job worker w<i> got.
	prepared := func(b *testing.B, start bool) (*FSM, uint64, []uint64) {
		f, idx := benchFSM(b, b.N+1000)
		jobs := make([]uint64, b.N)
		for i, l := range logs(b, idx+1, b.N, func(i int) *clusterpb.Command { return dispatch(fmt.Sprintf("w%d", i), 1) }) {
			jobs[i] = uint64(f.Apply(l).([]Result)[0].Job)
		}
		idx += uint64(b.N)
		if start {
			for _, l := range logs(b, idx+1, b.N, func(i int) *clusterpb.Command { return started(jobs[i], 1, fmt.Sprintf("w%d", i)) }) {
				f.Apply(l)
			}
			idx += uint64(b.N)
		}
		return f, idx, jobs
	}
	b.Run("started", func(b *testing.B) {
		f, idx, jobs := prepared(b, false)
		runLogs(b, f, logs(b, idx+1, b.N, func(i int) *clusterpb.Command { return started(jobs[i], 1, fmt.Sprintf("w%d", i)) }))
	})
	b.Run("heartbeat", func(b *testing.B) {
		f, idx, jobs := prepared(b, true)
		runLogs(b, f, logs(b, idx+1, b.N, func(i int) *clusterpb.Command {
			return &clusterpb.Command{Cmd: &clusterpb.Command_Heartbeats{Heartbeats: &clusterpb.HeartbeatBatch{Heartbeats: []*clusterpb.Heartbeat{{Job: jobs[i], Attempt: 1, WorkerId: fmt.Sprintf("w%d", i), CpuMs: 10}}}}}
		}))
	})
	b.Run("finished", func(b *testing.B) {
		f, idx, jobs := prepared(b, true)
		runLogs(b, f, logs(b, idx+1, b.N, func(i int) *clusterpb.Command { return finished(jobs[i], 1, fmt.Sprintf("w%d", i), 900) }))
	})
	b.Run("cancel", func(b *testing.B) {
		f, idx := benchFSM(b, b.N+1000)
		runLogs(b, f, logs(b, idx+1, b.N, func(i int) *clusterpb.Command {
			return &clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Tenant: fmt.Sprintf("t%d", i%1000), Job: uint64(i + 1)}}}
		}))
	})
	b.Run("tenant-upsert", func(b *testing.B) {
		f, idx := benchFSM(b, 100_000)
		runLogs(b, f, logs(b, idx+1, b.N, func(i int) *clusterpb.Command { return tenant(fmt.Sprintf("t%d", i%1000), pb.Tier(1+i%5)) }))
	})
}

// BenchmarkApplyKeyedBatch applies entries of 100 keyed submits, as
// SubmitBatch writes them (decode included), to a state already holding
// 2M keyed jobs, so that the key index, as on a busy cluster, is far
// larger than the processor's caches. Each op is one entry:
//
//	go test -run '^$' -bench ApplyKeyedBatch -benchtime 3000x ./fsm/
func BenchmarkApplyKeyedBatch(b *testing.B) {
	const held, batch = 2_000_000, 100
	f := NewLatest()
	var index uint64
	apply := func(cmds []*clusterpb.Command) {
		index++
		if _, err := f.ApplyEnvelope(index, &clusterpb.Envelope{Version: Version, StampMs: int64(index), Commands: cmds}); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 100 {
		apply([]*clusterpb.Command{tenant(fmt.Sprintf("t%d", i), pb.Tier(1+i%5))})
	}
	keyed := func(n int) []*clusterpb.Command {
		cmds := make([]*clusterpb.Command, batch)
		for i := range cmds {
			k := n*batch + i
			cmds[i] = submit(fmt.Sprintf("t%d", k%100), fmt.Sprintf("order-%09d", k), 1000, "run")
		}
		return cmds
	}
	n := 0
	for ; n < held/batch; n++ {
		apply(keyed(n))
	}
	ls := make([]*raft.Log, b.N)
	for i := range ls {
		index++
		data, err := Encode(&clusterpb.Envelope{Version: Version, StampMs: int64(index), Commands: keyed(n)})
		if err != nil {
			b.Fatal(err)
		}
		n++
		ls[i] = &raft.Log{Index: index, Type: raft.LogCommand, Data: data}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for _, l := range ls {
		res, ok := f.Apply(l).([]Result)
		if !ok || len(res) != batch || !res[batch-1].Created {
			b.Fatalf("entry %d: %+v", l.Index, res)
		}
	}
}

// BenchmarkMemoryPerQueuedJob reports the live heap per queued job of the
// whole state machine (job record, queued event, queues, tenants), with
// 1,000 tenants and 500,000 jobs of no payload.
func BenchmarkMemoryPerQueuedJob(b *testing.B) {
	const jobs = 500_000
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f, _ := benchFSM(b, jobs)
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/jobs, "B/queued-job")
		runtime.KeepAlive(f)
	}
}
