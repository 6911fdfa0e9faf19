package main

// The snapshot scenario of bench.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/proc"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
	"github.com/baristahq/barista/snapshot"
)

func benchSnapshot(ctx context.Context, o *benchOpts) ([]benchResult, error) {
	tenants, jobs := 100_000, 1_000_000
	if o.quick {
		tenants, jobs = 20_000, 200_000
	}
	f := fsm.NewLatest()
	var idx uint64
	apply := func(cmds []*clusterpb.Command) {
		idx++
		f.ApplyEnvelope(idx, &clusterpb.Envelope{Version: fsm.Version, StampMs: int64(idx), Commands: cmds})
	}
	var cmds []*clusterpb.Command
	for i := range tenants {
		cmds = append(cmds, &clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: benchTenant(i), Tier: fsm.TierToPB(sfq.Tier(i % 5))}}})
		if len(cmds) == 1000 {
			apply(cmds)
			cmds = nil
		}
	}
	for j := range jobs {
		cmds = append(cmds, &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: benchTenant(j % tenants), Size: pb.Size_SM, EstCostMs: 1000, Payload: benchPayload}}})
		if len(cmds) == 1000 {
			apply(cmds)
			cmds = nil
		}
	}
	runtime.GC()
	base := rss(os.Getpid())
	path := o.dir + "/bench.snap"
	t := time.Now()
	v, err := f.Freeze()
	if err != nil {
		return nil, err
	}
	pause := time.Since(t)
	fh, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	t = time.Now()
	if _, err := snapshot.Write(fh, v); err != nil {
		return nil, err
	}
	fh.Sync()
	fh.Close()
	persist := time.Since(t)
	st, _ := os.Stat(path)
	fh, _ = os.Open(path)
	t = time.Now()
	g := fsm.New()
	if _, err := snapshot.Read(fh, g); err != nil {
		return nil, err
	}
	restore := time.Since(t)
	fh.Close()
	peak := rss(os.Getpid())
	os.Remove(path)
	runtime.KeepAlive(g)
	out := []benchResult{{Scenario: "snapshot",
		Params: map[string]any{"jobs": jobs, "tenants": tenants},
		Results: map[string]any{"freeze_pause_ms": round(float64(pause.Microseconds()) / 1000), "persist_s": round(persist.Seconds()),
			"restore_s": round(restore.Seconds()), "file_mb": round(float64(st.Size()) / 1e6), "rss_before_mb": round(float64(base) / 1e6),
			"rss_after_restore_mb": round(float64(peak) / 1e6)}}}

	// A new follower catches up by InstallSnapshot.
	catch := jobs / 4
	lc, leader, cc, err := benchLeader(ctx, o, "catch-up", 3, tenants/10, "--snapshot-threshold", "16", "--trailing-logs", "8", "--snapshot-interval", "1s")
	if err != nil {
		return nil, err
	}
	defer lc.stop()
	defer cc.Close()
	if err := preload(ctx, cc, tenants/10, catch); err != nil {
		return nil, err
	}
	time.Sleep(3 * time.Second) // let the snapshot happen
	n4, err := freeLocalNode(lc, "n4")
	if err != nil {
		return nil, err
	}
	t = time.Now()
	if err := lc.startNode(n4, "--join", lc.nodes[leader].grpc, "--log-level", "info"); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := lc.waitConverged(cctx, []int{leader, n4}); err != nil {
		return nil, fmt.Errorf("the new follower did not catch up: %w", err)
	}
	took := time.Since(t)
	logText, _ := os.ReadFile(filepath.Join(lc.dir, "n4.log"))
	out = append(out, benchResult{Scenario: "snapshot-catch-up", Params: map[string]any{"jobs": catch, "tenants": tenants / 10},
		Results: map[string]any{"catch_up_s": round(took.Seconds()), "by_install_snapshot": strings.Contains(string(logText), "installed snapshot restored")}})

	// A follower killed and started again: it restores its newest
	// snapshot, replays the log after it, and catches up.
	follower := (leader + 1) % 3
	lc.kill(follower)
	if err := preload(ctx, cc, tenants/10, catch/10); err != nil { // what it missed
		return nil, err
	}
	t = time.Now()
	if err := lc.startNode(follower); err != nil {
		return nil, err
	}
	if err := lc.waitConverged(cctx, []int{leader, follower}); err != nil {
		return nil, fmt.Errorf("the restarted follower did not catch up: %w", err)
	}
	out = append(out, benchResult{Scenario: "snapshot-restart", Params: map[string]any{"jobs": catch + catch/10, "missed_jobs": catch / 10, "tenants": tenants / 10},
		Results: map[string]any{"restart_to_caught_up_s": round(time.Since(t).Seconds())}})
	return out, nil
}

// freeLocalNode adds a node (not started) to the cluster.
func freeLocalNode(lc *localCluster, id string) (int, error) {
	n := &localNode{id: id, dataDir: lc.dir + "/" + id}
	addrs, err := proc.FreeAddrs(3)
	if err != nil {
		return 0, err
	}
	n.grpc, n.raft, n.http = addrs[0], addrs[1], addrs[2]
	n.LogPath = filepath.Join(lc.dir, n.id+".log")
	lc.nodes = append(lc.nodes, n)
	return len(lc.nodes) - 1, nil
}
