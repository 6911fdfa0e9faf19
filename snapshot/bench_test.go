package snapshot

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
)

// bigFSM builds a state of jobs queued over tenants through Apply.
func bigFSM(b *testing.B, tenants, jobs int) (*fsm.FSM, uint64) {
	f := fsm.NewLatest()
	var index uint64
	apply := func(cmds []*clusterpb.Command) {
		index++
		if _, err := f.ApplyEnvelope(index, &clusterpb.Envelope{Version: fsm.Version, StampMs: int64(index), Commands: cmds}); err != nil {
			b.Fatal(err)
		}
	}
	var cmds []*clusterpb.Command
	for i := range tenants {
		cmds = append(cmds, &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: fmt.Sprintf("tenant-%06d", i), Tier: pb.Tier(1 + i%5)}}})
		if len(cmds) == 1000 {
			apply(cmds)
			cmds = nil
		}
	}
	for i := range jobs {
		cmds = append(cmds, &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{
			Tenant: fmt.Sprintf("tenant-%06d", i%tenants), Size: pb.Size(1 + i%3), EstCostMs: int64(1000 + i%7*100), Payload: []byte("run --input s3://bucket/object")}}})
		if len(cmds) == 1000 {
			apply(cmds)
			cmds = nil
		}
	}
	if len(cmds) > 0 {
		apply(cmds)
	}
	return f, index
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// BenchmarkSnapshot1M measures, at 1,000,000 jobs and 100,000 tenants: the
// Apply pause of a snapshot (the freeze), persisting it while Apply goes on
// (cancels that touch chunks all over the job table, so copy-on-write
// copies as much as it can), the longest single Apply during that persist,
// the extra live memory while the frozen view is held (after a GC), the
// peak heap in use (garbage included) relative to the live state, and
// restoring.
func BenchmarkSnapshot1M(b *testing.B) {
	f, index := bigFSM(b, 100_000, 1_000_000)
	base := liveHeap()
	dir := b.TempDir()
	for n := 0; b.Loop(); n++ {
		path := filepath.Join(dir, fmt.Sprintf("snap-%d.bin", n))
		t0 := time.Now()
		v, err := f.Freeze()
		if err != nil {
			b.Fatal(err)
		}
		pause := time.Since(t0)

		var peak atomic.Uint64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // sample the heap
			defer wg.Done()
			for {
				if h := heapInUse(); h > peak.Load() {
					peak.Store(h)
				}
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
		}()
		done := make(chan error, 1)
		var persist time.Duration
		go func() {
			t := time.Now()
			fh, err := os.Create(path)
			if err != nil {
				done <- err
				return
			}
			_, err = Write(fh, v)
			if cerr := fh.Close(); err == nil {
				err = cerr
			}
			persist = time.Since(t)
			done <- err
		}()
		var longest time.Duration
		applied := 0
		rng := rand.New(rand.NewPCG(uint64(n), 7))
	loop:
		for {
			select {
			case err := <-done:
				if err != nil {
					b.Fatal(err)
				}
				break loop
			default:
			}
			index++
			job := 1 + rng.Uint64N(1_000_000)
			cmd := &clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Job: job}}}
			t := time.Now()
			f.ApplyEnvelope(index, &clusterpb.Envelope{Version: fsm.Version, StampMs: int64(index), Commands: []*clusterpb.Command{cmd}})
			longest = max(longest, time.Since(t))
			applied++
		}
		close(stop)
		wg.Wait()
		// Live memory while the frozen view is still held: the state, the
		// chunks copied on write since the freeze, and what the applies
		// added.
		live := liveHeap()
		runtime.KeepAlive(v)
		st, _ := os.Stat(path)

		t1 := time.Now()
		fh, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		g := fsm.New()
		if _, err := Read(fh, g); err != nil {
			b.Fatal(err)
		}
		fh.Close()
		restore := time.Since(t1)
		os.Remove(path)

		b.ReportMetric(float64(pause.Microseconds())/1000, "pause-ms")
		b.ReportMetric(persist.Seconds(), "persist-s")
		b.ReportMetric(restore.Seconds(), "restore-s")
		b.ReportMetric(float64(longest.Microseconds())/1000, "max-apply-ms")
		b.ReportMetric(float64(live-base)/float64(base), "extra-live-x")
		b.ReportMetric(float64(peak.Load())/float64(base), "peak-heap-x")
		b.ReportMetric(float64(base)/1e6, "state-MB")
		b.ReportMetric(float64(st.Size())/1e6, "file-MB")
		b.ReportMetric(float64(applied), "applies-during")
	}
}
