package test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"barista/test/cluster"
)

// snapshotDirs returns a data directory's snapshot directories, oldest
// (lowest index) first.
func snapshotDirs(t *testing.T, dataDir string) []string {
	t.Helper()
	states, _ := filepath.Glob(filepath.Join(dataDir, "snapshots", "*", "state.bin"))
	var dirs []string
	for len(states) > 0 {
		newest := newestSnapshot(t, states)
		dirs = append([]string{filepath.Dir(newest)}, dirs...)
		for i, s := range states {
			if s == newest {
				states = append(states[:i], states[i+1:]...)
				break
			}
		}
	}
	return dirs
}

// tail returns the end of a log for a failure message.
func tail(log string) string { return log[max(0, len(log)-2500):] }

// TestMovedSnapshotLogTooShort follows the guide's "use the previous
// snapshot" on a node whose log no longer reaches back to it (compacted
// after the newer snapshot): the node refuses to start, exits non-zero,
// names the log and the snapshot and the rebuild procedure, and leaves
// its data directory as it was. It never panics and never starts.
func TestMovedSnapshotLogTooShort(t *testing.T) {
	c := cluster.Start(t, 1, "--snapshot-threshold", "20", "--trailing-logs", "5", "--snapshot-interval", "100ms")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, setup := newWorkload(21)
	if _, err := c.Apply(ctx, setup...); err != nil {
		t.Fatal(err)
	}
	n := c.Nodes[0]
	for i := 0; strings.Count(n.Log(), "snapshot written") < 3; i++ {
		if i > 2000 {
			t.Fatal("fewer than 3 snapshots written")
		}
		if _, err := c.Apply(ctx, w.next()); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	dirs := snapshotDirs(t, n.DataDir)
	if len(dirs) != 2 {
		t.Fatalf("%d snapshots retained, want 2: %v", len(dirs), dirs)
	}
	older, newer := dirs[0], dirs[1]
	quarantine := filepath.Join(n.DataDir, "snapshots-quarantine")
	if err := os.MkdirAll(quarantine, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(newer, filepath.Join(quarantine, filepath.Base(newer))); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(n.DataDir, "raft.db")
	before, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	mark := len(n.Log())
	n.Start()
	err, exited := n.Wait(30 * time.Second)
	if !exited || err == nil {
		t.Fatalf("the node started from a snapshot its log does not continue (exited %v, err %v)", exited, err)
	}
	out := n.Log()[mark:]
	if strings.Contains(out, "panic") {
		t.Fatalf("the node panicked:\n%s", tail(out))
	}
	for _, want := range []string{logPath, older, "remove-peer n1", "--join", "docs/operations.md"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the refusal does not mention %q:\n%s", want, tail(out))
		}
	}
	after, err := os.ReadFile(logPath)
	if err != nil || string(after) != string(before) {
		t.Fatalf("the refused start changed %s (%v)", logPath, err)
	}
	t.Logf("refused: %s", strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]))
	_ = fmt.Sprint
}
