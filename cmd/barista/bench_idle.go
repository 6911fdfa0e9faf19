package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/grpc"

	pb "github.com/baristahq/barista/proto"
)

// benchIdle measures what clock ticks cost (docs/operations.md, "Cluster
// time"): a three-node cluster left idle for a window, with clock_tick 1s
// (the default) and 1h (no tick in the window: the idle cluster without
// them), and the same cluster under a light load (one client's single
// submits through the leader, about one entry each), whose leader must
// commit no tick at all. Each variant reports the entries the window
// added (per minute), the bytes they take in the leader's log store
// (raft.db), the CPU of the three servers (per minute of the window) and
// the ticks the leader counted.
func benchIdle(ctx context.Context, o *benchOpts) ([]benchResult, error) {
	window := time.Minute
	if o.quick {
		window = 15 * time.Second
	}
	var out []benchResult
	for _, v := range []struct {
		tick string
		busy bool
	}{{"1s", false}, {"1h", false}, {"1s", true}} {
		r, err := benchIdleOnce(ctx, o, v.tick, v.busy, window)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func benchIdleOnce(ctx context.Context, o *benchOpts, tick string, busy bool, window time.Duration) (benchResult, error) {
	load := "idle"
	if busy {
		load = "one-client"
	}
	conf := filepath.Join(o.dir, fmt.Sprintf("clock-%s-%s.toml", tick, load))
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("[scheduler]\nclock_tick = %q\n", tick)), 0o644); err != nil {
		return benchResult{}, err
	}
	lc, leader, cc, err := benchLeader(ctx, o, "clock-"+load, 3, 1, "--config", conf)
	if err != nil {
		return benchResult{}, err
	}
	stopped := false
	defer func() {
		cc.Close()
		if !stopped {
			lc.stop()
		}
	}()
	// The setup entries (members, tenants) are behind us after a second.
	time.Sleep(2 * time.Second)
	st0, err := lc.status(leader)
	if err != nil {
		return benchResult{}, err
	}
	cpu0 := lc.serverCPU()
	ticks0 := scrapeMetrics(lc.nodes[leader].http, "barista_clock_ticks_total")[0]
	var submits atomic.Int64
	if busy {
		loadFor(ctx, cc, window, &submits)
	} else {
		time.Sleep(window)
	}
	st1, err := lc.status(leader)
	if err != nil {
		return benchResult{}, err
	}
	cpu := lc.serverCPU() - cpu0
	ticks := scrapeMetrics(lc.nodes[leader].http, "barista_clock_ticks_total")[0] - ticks0
	lc.stop()
	stopped = true
	entries := st1.AppliedIndex - st0.AppliedIndex
	perMin := window.Minutes()
	res := map[string]any{
		"entries_per_min":        round(float64(entries) / perMin),
		"ticks":                  int64(ticks),
		"server_cpu_ms_per_min":  round(float64(cpu.Milliseconds()) / perMin),
		"server_cpu_pct_of_core": round(100 * cpu.Seconds() / window.Seconds()),
	}
	if busy {
		res["submits_per_s"] = round(float64(submits.Load()) / window.Seconds())
	} else if bytes, err := logBytes(filepath.Join(lc.nodes[leader].dataDir, "raft.db"), st0.AppliedIndex+1, st1.AppliedIndex); err != nil {
		return benchResult{}, err
	} else {
		res["log_bytes_per_min"] = round(float64(bytes) / perMin)
		if entries > 0 {
			res["log_bytes_per_entry"] = round(float64(bytes) / float64(entries))
		}
	}
	return benchResult{Scenario: "clock", Params: map[string]any{"clock_tick": tick, "load": load, "window": window.String()}, Results: res}, nil
}

// loadFor submits from one client through cc, one at a time, for d.
func loadFor(ctx context.Context, cc *grpc.ClientConn, d time.Duration, n *atomic.Int64) {
	client := pb.NewClientClient(cc)
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if _, err := client.Submit(ctx, &pb.SubmitRequest{Tenant: benchTenant(0), Size: pb.Size_SM, EstCostMs: 100, Payload: benchPayload}); err == nil {
			n.Add(1)
		}
	}
}

// logBytes sums the stored size of the log entries from..to (inclusive)
// in a stopped server's log store.
func logBytes(path string, from, to uint64) (int64, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return 0, fmt.Errorf("opening %s: %w", path, err)
	}
	defer db.Close()
	var total int64
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("logs"))
		if b == nil {
			return fmt.Errorf("%s holds no log", path)
		}
		key := make([]byte, 8)
		for i := from; i <= to; i++ {
			binary.BigEndian.PutUint64(key, i)
			v := b.Get(key)
			if v == nil {
				return fmt.Errorf("%s holds no entry %d (compacted?)", path, i)
			}
			total += int64(len(key) + len(v))
		}
		return nil
	})
	return total, err
}
