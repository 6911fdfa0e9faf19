package main

// The schedules scenario of bench (SPEC §3 "Schedules"; docs/schedules.md).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	nethttp "net/http"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// schedulesPerTenant is how many schedules each bench tenant has: the
// default max_schedules.
const schedulesPerTenant = 100

// scheduleSetCmd is the bench's schedule i: tenant i/100, every minute
// (all at the same second), overlap skip, an sm job no worker runs.
func scheduleSetCmd(i int) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_ScheduleSet{ScheduleSet: &clusterpb.ScheduleSet{Tenant: benchTenant(i / schedulesPerTenant),
		Name: fmt.Sprintf("s%03d", i%schedulesPerTenant), Spec: "* * * * *",
		Job: &clusterpb.SubmitJob{JobType: "report", Size: pb.Size_SM, EstCostMs: 1000, Payload: benchPayload}}}}
}

// benchSchedules measures a three-node cluster with 100,000 schedules
// (1,000 tenants × 100; --quick 10,000): the leader's resident memory per
// schedule; the leader's CPU and the entries it commits per minute while
// idle between slots, beside the same cluster before the schedules; the
// lateness of the fires of one minute, all due at the same second (from
// the slot to the cluster time of the entry that fired it, read from the
// schedule_fired events, and to its commit on the leader, from the
// leader's histogram), the entries they took and the time to fire them
// all; and, in process, the snapshot and restore of a state that holds
// them.
func benchSchedules(ctx context.Context, o *benchOpts) ([]benchResult, error) {
	tenants := 1000
	window := 30 * time.Second
	if o.quick {
		tenants, window = 100, 10*time.Second
	}
	n := tenants * schedulesPerTenant
	// --pprof: a read of the heap profile makes the leader collect its
	// garbage first, so that its heap in use is what it holds.
	// One tenant more than the schedules': the bystander, which has none
	// and submits through the minute's fires.
	lc, leader, cc, err := benchLeader(ctx, o, "schedules", 3, tenants+1, "--pprof")
	if err != nil {
		return nil, err
	}
	defer lc.stop()
	defer cc.Close()
	node := clusterpb.NewNodeClient(cc)
	pid, http := lc.nodes[leader].PID(), lc.nodes[leader].http
	res := map[string]any{}
	// The idle cluster before the schedules: the baseline.
	time.Sleep(2 * time.Second)
	base, err := idleWindow(lc, leader, window)
	if err != nil {
		return nil, err
	}
	res["idle_without_schedules"] = base
	collect(http)
	rss0, heap0 := rss(pid), scrapeMetrics(http, "go_memstats_heap_inuse_bytes")[0]
	// The schedules, set right after a minute's slot so that they are
	// all made well before the next one.
	waitSecond(5)
	t := time.Now()
	for i := 0; i < n; i += 1000 {
		var cmds []*clusterpb.Command
		for j := i; j < min(i+1000, n); j++ {
			cmds = append(cmds, scheduleSetCmd(j))
		}
		resp, err := node.Apply(ctx, &clusterpb.ApplyRequest{Commands: cmds})
		if err != nil {
			return nil, err
		}
		for _, r := range resp.Results {
			if r.Code != clusterpb.Code_CODE_OK {
				return nil, fmt.Errorf("schedule set: %s", r.Message)
			}
		}
	}
	res["set_schedules_per_s"] = round(float64(n) / time.Since(t).Seconds())
	time.Sleep(2 * time.Second)
	collect(http)
	rss1, heap1 := rss(pid), scrapeMetrics(http, "go_memstats_heap_inuse_bytes")[0]
	res["leader_rss_bytes_per_schedule"] = round(float64(rss1-rss0) / float64(n))
	res["leader_heap_bytes_per_schedule"] = round((heap1 - heap0) / float64(n))
	// Idle between slots: after the sets, before the next minute.
	if s := time.Now().Second(); s > 60-int(window.Seconds())-3 {
		return nil, fmt.Errorf("setting the schedules took until second %d: no idle window left before the minute", s)
	}
	idle, err := idleWindow(lc, leader, window)
	if err != nil {
		return nil, err
	}
	res["idle_between_slots"] = idle
	// The shared minute: every schedule's slot at second 0.
	st0, err := lc.status(leader)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	hist0 := latencyBuckets(http)
	ticks0 := scrapeMetrics(http, "barista_clock_ticks_total")[0]
	// The events are read from a follower: the leader fires.
	wc, err := lc.dial((leader + 1) % len(lc.nodes))
	if err != nil {
		return nil, err
	}
	defer wc.Close()
	by := startBystander(ctx, cc, benchTenant(tenants))
	slot, lateness, last, err := watchFires(ctx, wc, n)
	if err != nil {
		by.stop()
		return nil, err
	}
	time.Sleep(time.Second)
	if err := by.stop(); err != nil {
		return nil, fmt.Errorf("the bystander's submits: %w", err)
	}
	quiet, during := by.split(time.UnixMilli(slot), time.UnixMilli(last))
	res["bystander_submits_quiet"], res["bystander_submits_during_fires"] = quiet, during
	st1, err := lc.status(leader)
	if err != nil {
		return nil, err
	}
	t1 := time.Now()
	p50, p99 := lateness.pct(0.50), lateness.pct(0.99)
	res["fires"] = n
	res["fire_lateness_p50_ms"], res["fire_lateness_p99_ms"], res["fire_lateness_max_ms"] = p50, p99, lateness.pct(1)
	res["all_fired_after_ms"] = last - slot
	// The entries from before the minute to its last fire, but the clock
	// ticks among them, and the bystander's submits (an entry each).
	res["fire_entries"] = float64(st1.AppliedIndex-st0.AppliedIndex) - (scrapeMetrics(http, "barista_clock_ticks_total")[0] - ticks0) - float64(by.answered(t0, t1))
	res["commit_lateness_p50_s"], res["commit_lateness_p99_s"] = histogramQuantile(hist0, latencyBuckets(http), 0.50), histogramQuantile(hist0, latencyBuckets(http), 0.99)
	// Snapshot and restore of a state with the schedules, in process.
	snap, err := snapshotSchedules(o, tenants, n)
	if err != nil {
		return nil, err
	}
	for k, v := range snap {
		res[k] = v
	}
	return []benchResult{{Scenario: "schedules", P50Ms: p50, P99Ms: p99, Params: map[string]any{"schedules": n, "tenants": tenants, "spec": "* * * * *", "window": window.String()},
		Results: res}}, nil
}

// bystander is a tenant without schedules that submits through the
// leader, one submit at a time, while the minute's schedules fire: what
// the fires, which share the leader's proposals, do to another tenant's
// submits.
type bystander struct {
	cancel context.CancelFunc
	done   chan error
	mu     sync.Mutex
	at     []time.Time // when each submit was sent
	lat    []time.Duration
}

// startBystander starts tenant's submits on cc.
func startBystander(ctx context.Context, cc *grpc.ClientConn, tenant string) *bystander {
	ctx, cancel := context.WithCancel(ctx)
	b := &bystander{cancel: cancel, done: make(chan error, 1)}
	cl := pb.NewClientClient(cc)
	go func() {
		for ctx.Err() == nil {
			t := time.Now()
			_, err := cl.Submit(ctx, &pb.SubmitRequest{Tenant: tenant, JobType: "bystander", Size: pb.Size_SM, EstCostMs: 1000, Payload: benchPayload})
			if err != nil {
				if ctx.Err() == nil {
					b.done <- err
					return
				}
				break
			}
			b.mu.Lock()
			b.at, b.lat = append(b.at, t), append(b.lat, time.Since(t))
			b.mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
		b.done <- nil
	}()
	return b
}

// answered counts the submits answered between from and to.
func (b *bystander) answered(from, to time.Time) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for i, t := range b.at {
		if end := t.Add(b.lat[i]); end.After(from) && !end.After(to) {
			n++
		}
	}
	return n
}

// stop ends the submits and returns the first that failed.
func (b *bystander) stop() error {
	b.cancel()
	return <-b.done
}

// split gives the count, p50, p99 and max of the submits answered
// before from (quiet) and of those in progress at some time from from to
// to (during the fires).
func (b *bystander) split(from, to time.Time) (quiet, during map[string]any) {
	var q, d latencies
	b.mu.Lock()
	for i, t := range b.at {
		switch end := t.Add(b.lat[i]); {
		case end.Before(from):
			q.add(b.lat[i])
		case !t.After(to):
			d.add(b.lat[i])
		}
	}
	b.mu.Unlock()
	sum := func(l *latencies) map[string]any {
		return map[string]any{"submits": len(l.d), "p50_ms": l.pct(0.5), "p99_ms": l.pct(0.99), "max_ms": l.pct(1)}
	}
	return sum(&q), sum(&d)
}

// collect makes the server at http collect its garbage (a read of its
// heap profile, with gc=1; it runs with --pprof).
func collect(http string) {
	if resp, err := nethttp.Get("http://" + http + "/debug/pprof/heap?gc=1"); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// waitSecond sleeps until the wall clock's second within its minute is s.
func waitSecond(s int) {
	now := time.Now()
	next := now.Truncate(time.Minute).Add(time.Duration(s) * time.Second)
	if !next.After(now) {
		next = next.Add(time.Minute)
	}
	time.Sleep(time.Until(next))
}

// idleWindow measures the leader of lc for d: its CPU and the entries
// committed, per minute, and of them the clock ticks.
func idleWindow(lc *localCluster, leader int, d time.Duration) (map[string]any, error) {
	pid, http := lc.nodes[leader].PID(), lc.nodes[leader].http
	st0, err := lc.status(leader)
	if err != nil {
		return nil, err
	}
	cpu0, ticks0 := procCPU(pid), scrapeMetrics(http, "barista_clock_ticks_total")[0]
	time.Sleep(d)
	st1, err := lc.status(leader)
	if err != nil {
		return nil, err
	}
	cpu, ticks := procCPU(pid)-cpu0, scrapeMetrics(http, "barista_clock_ticks_total")[0]-ticks0
	perMin := d.Minutes()
	entries := float64(st1.AppliedIndex - st0.AppliedIndex)
	return map[string]any{"entries_per_min": round(entries / perMin), "clock_ticks_per_min": round(ticks / perMin),
		"other_entries_per_min": round((entries - ticks) / perMin), "leader_cpu_ms_per_min": round(float64(cpu.Milliseconds()) / perMin),
		"leader_cpu_pct_of_core": round(100 * cpu.Seconds() / d.Seconds())}, nil
}

// watchFires reads the schedule_fired events of every tenant until n
// fires of one slot arrived: the slot, each fire's lateness (the cluster
// time of its entry minus the slot) and the cluster time of the last.
func watchFires(ctx context.Context, cc *grpc.ClientConn, n int) (slot int64, lat *latencies, last int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	stream, err := pb.NewClientClient(cc).WatchEvents(ctx, &pb.WatchEventsRequest{})
	if err != nil {
		return 0, nil, 0, err
	}
	lat = &latencies{}
	count := 0
	for count < n {
		ev, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("the watch ended after %d fires", count)
			}
			return 0, nil, 0, err
		}
		if ev.Kind != "schedule_fired" {
			continue
		}
		if slot == 0 {
			slot = ev.SlotMs
		}
		if ev.SlotMs != slot {
			continue
		}
		count++
		lat.add(time.Duration(ev.AtMs-slot) * time.Millisecond)
		last = max(last, ev.AtMs)
	}
	return slot, lat, last, nil
}

// latencyBuckets reads the leader's fire lateness histogram: the count
// at or below each bound, in order.
func latencyBuckets(http string) []float64 {
	names := make([]string, len(latencyBounds))
	for i, b := range latencyBounds {
		names[i] = fmt.Sprintf("barista_schedule_fire_lateness_seconds_bucket{le=%q}", b)
	}
	return scrapeMetrics(http, names...)
}

// latencyBounds are the histogram's bounds as /metrics writes them.
var latencyBounds = []string{"0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "30", "60", "+Inf"}

// histogramQuantile is the upper bound (in seconds) of the bucket that
// holds quantile q of what the histogram counted between two readings.
func histogramQuantile(before, after []float64, q float64) float64 {
	total := after[len(after)-1] - before[len(before)-1]
	for i := range after {
		if after[i]-before[i] >= q*total {
			var v float64
			fmt.Sscan(latencyBounds[i], &v)
			return v
		}
	}
	return 0
}

// snapshotSchedules builds, in process, a state of tenants with n
// schedules (each fired once, its job queued) and measures its snapshot:
// its bytes, the time to write it, and the time to read it back.
func snapshotSchedules(o *benchOpts, tenants, n int) (map[string]any, error) {
	f := fsm.NewLatest()
	var idx uint64
	apply := func(cmds []*clusterpb.Command) error {
		idx++
		res, err := f.ApplyEnvelope(idx, &clusterpb.Envelope{Version: fsm.Version, StampMs: int64(idx), Commands: cmds})
		if err == nil {
			for _, r := range res {
				if err = r.Err(); err != nil {
					break
				}
			}
		}
		return err
	}
	batch := func(count int, cmd func(i int) *clusterpb.Command) error {
		for i := 0; i < count; i += 1000 {
			var cmds []*clusterpb.Command
			for j := i; j < min(i+1000, count); j++ {
				cmds = append(cmds, cmd(j))
			}
			if err := apply(cmds); err != nil {
				return err
			}
		}
		return nil
	}
	if err := batch(tenants, func(i int) *clusterpb.Command {
		return &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: benchTenant(i), Tier: fsm.TierToPB(sfq.Tier(i % 5)),
			Caps: &pb.Caps{MaxQueued: benchMaxQueued}}}}
	}); err != nil {
		return nil, err
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	t := time.Now()
	if err := batch(n, scheduleSetCmd); err != nil {
		return nil, err
	}
	applySet := time.Since(t)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	idx += 60_000 // a minute later
	if err := batch(n, func(i int) *clusterpb.Command {
		s := scheduleSetCmd(i).GetScheduleSet()
		return &clusterpb.Command{Cmd: &clusterpb.Command_ScheduleFire{ScheduleFire: &clusterpb.ScheduleFire{Tenant: s.Tenant, Name: s.Name, Version: 1, SlotMs: 60_000}}}
	}); err != nil {
		return nil, err
	}
	applyFire := time.Since(t) - applySet
	t = time.Now()
	v, err := f.Freeze()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	e := sfq.NewEncoder(&buf)
	v.Encode(e)
	if err := e.Flush(); err != nil {
		return nil, err
	}
	persist := time.Since(t)
	path := o.dir + "/schedules.state"
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return nil, err
	}
	t = time.Now()
	back, err := fsm.DecodeState(sfq.NewDecoder(bytes.NewReader(buf.Bytes())), idx)
	if err != nil {
		return nil, err
	}
	restore := time.Since(t)
	h1, _ := f.Hash()
	h2, _ := back.Hash()
	if !slices.Equal(h1[:], h2[:]) || back.ScheduleCount() != n {
		return nil, fmt.Errorf("the restored state differs (%d schedules)", back.ScheduleCount())
	}
	return map[string]any{"state_heap_bytes_per_schedule": round(float64(m1.HeapInuse-m0.HeapInuse) / float64(n)),
		"apply_schedule_set_us": round(float64(applySet.Microseconds()) / float64(n)),
		"apply_fire_us":         round(float64(applyFire.Microseconds()) / float64(n)),
		"snapshot_bytes":        buf.Len(), "snapshot_encode_ms": persist.Milliseconds(), "snapshot_restore_ms": restore.Milliseconds()}, nil
}
