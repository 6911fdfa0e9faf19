package test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/test/cluster"
)

// The upgrade tests play an older build with a voter started with
// --test-feature-level; these are what they share.

// levels lists each running node's cluster feature level and the level its
// build reports: "n1:3/3 n2:3/5 n3:3/5".
func levels(c *cluster.Cluster) string {
	var b strings.Builder
	for _, n := range c.Running() {
		st, err := n.Status()
		if err != nil {
			return err.Error()
		}
		fmt.Fprintf(&b, "%s:%d/%d ", n.ID, st.ClusterFeatureLevel, st.FeatureLevel)
	}
	return strings.TrimSpace(b.String())
}

// startOldVoter bootstraps n1 as a voter of an older build (reporting
// feature level level), joins n2 and n3 of this build to it, and checks
// that the cluster stays at that level. It returns n1.
func startOldVoter(t *testing.T, c *cluster.Cluster, level int) *cluster.Node {
	t.Helper()
	c.BootWith(3, func(i int, n *cluster.Node) {
		if i == 0 {
			n.Args = []string{"--test-feature-level", strconv.Itoa(level)}
		}
	})
	c.WaitConverged(30 * time.Second)
	want := fmt.Sprintf("n1:%d/%d n2:%d/%d n3:%d/%d", level, level, level, fsm.MaxFeatureLevel, level, fsm.MaxFeatureLevel)
	if got := levels(c); got != want {
		t.Fatalf("levels (cluster/own): %s", got)
	}
	return c.Nodes[0]
}

// upgradeOldVoter restarts old at this build's level and waits until the
// leader has raised the cluster to it (within a minute), which exactly
// one leader must have logged.
func upgradeOldVoter(t *testing.T, c *cluster.Cluster, old *cluster.Node) {
	t.Helper()
	if err := old.Stop(); err != nil {
		t.Fatalf("stopping %s: %v", old.ID, err)
	}
	old.Args = nil
	old.Start()
	var want []string
	for _, n := range c.Running() {
		want = append(want, fmt.Sprintf("%s:%d/%d", n.ID, fsm.MaxFeatureLevel, fsm.MaxFeatureLevel))
	}
	waitFor(t, time.Minute, "the level to be raised", func() (bool, string) {
		got := levels(c)
		return got == strings.Join(want, " "), got
	})
	raised := 0
	for _, n := range c.Nodes {
		raised += strings.Count(n.Log(), fmt.Sprintf("raised the cluster's feature level: every voter understands it: level=%d", fsm.MaxFeatureLevel))
	}
	if raised != 1 {
		t.Errorf("%d leaders logged raising the level, want 1", raised)
	}
}

// snapshotFormat saves a snapshot with the CLI (args: --server and the
// like) and returns its format byte.
func snapshotFormat(t *testing.T, c *cluster.Cluster, args ...string) byte {
	t.Helper()
	file := t.TempDir() + "/backup.snap"
	if _, e, ok := runCLI(c, append([]string{"operator", "snapshot", "save", file}, args...)...); !ok {
		t.Fatal(e)
	}
	b, err := os.ReadFile(file)
	if err != nil || len(b) < 17 {
		t.Fatalf("snapshot: %v", err)
	}
	return b[16]
}
