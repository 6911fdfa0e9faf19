package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// TestChaos runs real servers and workers under a seeded fault schedule
// with client load, then checks the history against SPEC §8. By default
// it is the short run of the test suite (fixed seed, 75 s of faults,
// under two minutes in all); make chaos sets CHAOS_SEED, CHAOS_DURATION
// and CHAOS_NODES for long runs. CHAOS_SCHEDULES (default 50) is the
// number of schedules fired through the faults (SPEC §8 rule 14);
// CHAOS_RESOURCES=0 leaves out the three resources part of every tenant's
// jobs use (SPEC §8 rule 13).
func TestChaos(t *testing.T) {
	seed, err := strconv.ParseUint(envOr("CHAOS_SEED", "20261129"), 10, 64)
	if err != nil {
		t.Fatalf("CHAOS_SEED: %v", err)
	}
	dur, err := time.ParseDuration(envOr("CHAOS_DURATION", "75s"))
	if err != nil {
		t.Fatalf("CHAOS_DURATION: %v", err)
	}
	nodes, err := strconv.Atoi(envOr("CHAOS_NODES", "3"))
	if err != nil || (nodes != 3 && nodes != 5) {
		t.Fatalf("CHAOS_NODES: want 3 or 5, got %q", os.Getenv("CHAOS_NODES"))
	}
	schedules, err := strconv.Atoi(envOr("CHAOS_SCHEDULES", "50"))
	if err != nil || schedules < 0 || schedules > 100 {
		t.Fatalf("CHAOS_SCHEDULES: want 0..100, got %q", os.Getenv("CHAOS_SCHEDULES"))
	}
	cfg := Config{Seed: seed, Duration: dur, Nodes: nodes, SM: 3, MD: 2, LG: 1, GPU: 2, Submitters: 3, Schedules: schedules, Resources: os.Getenv("CHAOS_RESOURCES") != "0"}
	if os.Getenv("CHAOS_PARTITIONS") == "0" {
		t.Log("partitions skipped: CHAOS_PARTITIONS=0")
	} else if why := NetAvailable(); why != "" {
		t.Logf("partitions skipped: %s", why)
	} else {
		cfg.Partitions = true
	}
	run := Start(t, cfg)
	res := run.Execute()
	t.Log("\n" + res.Report)
	if t.Failed() || len(res.Violations) > 0 || os.Getenv("CHAOS_KEEP") != "" {
		keep := filepath.Join(os.TempDir(), fmt.Sprintf("barista-chaos-%d-%d", seed, os.Getpid()))
		if err := exec.Command("cp", "-a", run.Dir(), keep).Run(); err == nil {
			t.Logf("logs, data directories and the job journal kept in %s", keep)
		}
	}
	if len(res.Violations) > 0 {
		path := filepath.Join(os.TempDir(), fmt.Sprintf("barista-chaos-%d.json", seed))
		if err := res.History.Save(path); err == nil {
			t.Logf("history saved to %s", path)
		}
		t.Fatal(Report(res.Violations))
	}
}
