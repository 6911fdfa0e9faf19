package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// replayCmd runs barista replay with args, "-" naming a file that holds
// script.
func replayCmd(t *testing.T, script string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "script.txt")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, a := range args {
		if a == "-" {
			args[i] = path
		}
	}
	var out, errb bytes.Buffer
	code = Run(append([]string{"replay"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// TestReplayReportWorkedExample pins replay --report on the worked
// example (testdata/scenarios/worked-example.txt): gold is billed 16 s and
// free 2 s of its 18 jobs, shares 16/18 and 2/18, equal to their
// entitlements 8/9 and 1/9 (both had eligible work for the whole second):
// ratio 1. The dispatch-clamp twin prints the same table.
func TestReplayReportWorkedExample(t *testing.T) {
	const want = `CLASS   TENANT  CPU_BILLED_MS  SHARE   ENTITLED  RATIO
normal  gold    16000          0.8889  0.8889    1.0000
normal  free    2000           0.1111  0.1111    1.0000
`
	for _, f := range []string{"worked-example.txt", "worked-example-dispatch-clamp.txt"} {
		code, out, errOut := replayCmd(t, "", "--script", "../../testdata/scenarios/"+f, "--report")
		if code != 0 || out != want || errOut != "" {
			t.Errorf("%s: exit %d\n%s%s\nwant\n%s", f, code, out, errOut, want)
		}
	}
	code, out, _ := replayCmd(t, "", "--script", "../../testdata/scenarios/worked-example.txt", "--report", "--json")
	if want := `{"tenant": "gold", "pool": "default", "class": "normal", "cpu_billed_ms": 16000, "share": 0.8889, "entitled": 0.8889, "ratio": 1.0000}
{"tenant": "free", "pool": "default", "class": "normal", "cpu_billed_ms": 2000, "share": 0.1111, "entitled": 0.1111, "ratio": 1.0000}
`; code != 0 || out != want {
		t.Errorf("--json: exit %d\n%s\nwant\n%s", code, out, want)
	}
}

// TestReplayReportFiveTiers pins replay --report on five tiers with wrong
// estimates (testdata/scenarios/five-tiers-wrong-estimates.txt, whose
// header derives every figure by hand): 364 s billed, entitlements of
// weight / 31, ratios of billed × 31 / (364 × weight).
func TestReplayReportFiveTiers(t *testing.T) {
	const path = "../../testdata/scenarios/five-tiers-wrong-estimates.txt"
	code, out, errOut := replayCmd(t, "", "--script", path, "--report")
	if want := `CLASS   TENANT   CPU_BILLED_MS  SHARE   ENTITLED  RATIO
normal  free     12000          0.0330  0.0323    1.0220
normal  bronze   24000          0.0659  0.0645    1.0220
normal  silver   48000          0.1319  0.1290    1.0220
normal  gold     92000          0.2527  0.2581    0.9794
normal  diamond  188000         0.5165  0.5161    1.0007
`; code != 0 || out != want || errOut != "" {
		t.Errorf("exit %d\n%s%s\nwant\n%s", code, out, errOut, want)
	}
	code, out, _ = replayCmd(t, "", "--script", path, "--report", "--json")
	if want := `{"tenant": "free", "pool": "default", "class": "normal", "cpu_billed_ms": 12000, "share": 0.0330, "entitled": 0.0323, "ratio": 1.0220}
{"tenant": "bronze", "pool": "default", "class": "normal", "cpu_billed_ms": 24000, "share": 0.0659, "entitled": 0.0645, "ratio": 1.0220}
{"tenant": "silver", "pool": "default", "class": "normal", "cpu_billed_ms": 48000, "share": 0.1319, "entitled": 0.1290, "ratio": 1.0220}
{"tenant": "gold", "pool": "default", "class": "normal", "cpu_billed_ms": 92000, "share": 0.2527, "entitled": 0.2581, "ratio": 0.9794}
{"tenant": "diamond", "pool": "default", "class": "normal", "cpu_billed_ms": 188000, "share": 0.5165, "entitled": 0.5161, "ratio": 1.0007}
`; code != 0 || out != want {
		t.Errorf("--json: exit %d\n%s\nwant\n%s", code, out, want)
	}
}

// TestReplayReportEdges: classes apart, a deleted tenant, undefined
// figures, refused lines on standard error, and the flags that do not
// combine.
func TestReplayReportEdges(t *testing.T) {
	// a (free) has a 2 s job of class high eligible alone for 1 s; then a
	// and b (silver) queue two normal jobs each at 2 s, b runs one (it
	// wins the tie on tier), and from 2 s to 12 s both have eligible
	// work: a is entitled to 1/5 of normal and billed nothing (ratio 0), b
	// to 4/5 and billed all (ratio 1.25). b is deleted at the end.
	script := `at 0s
tenant a tier=free max_class=high
tenant b tier=silver
submit a size=sm cost=2s class=high
at 1s
dispatch sm
at 2s
finish 1 cpu=2s
submit a x2 size=sm cost=1s
submit b x2 size=sm cost=1s
dispatch sm worker=w
finish 99 cpu=1s
at 12s
finish 4 cpu=1s
cancel 2
cancel 3
cancel 5
delete b
`
	code, out, errOut := replayCmd(t, script, "--script", "-", "--report")
	want := `CLASS   TENANT       CPU_BILLED_MS  SHARE   ENTITLED  RATIO
high    a            2000           1.0000  1.0000    1.0000
normal  a            0              0.0000  0.2000    0.0000
normal  b (deleted)  1000           1.0000  0.8000    1.2500
`
	if code != 1 || out != want || errOut != "error 12: unknown job: 99\n" {
		t.Errorf("exit %d\n%s%s\nwant\n%s", code, out, errOut, want)
	}
	// Time never moves: no entitlement, no ratio.
	code, out, _ = replayCmd(t, "at 0s\ntenant a tier=gold\nsubmit a size=sm cost=1s\ndispatch sm\nfinish 1 cpu=1s\n", "--script", "-", "--report", "--json")
	if want := `{"tenant": "a", "pool": "default", "class": "normal", "cpu_billed_ms": 1000, "share": 1.0000, "entitled": null, "ratio": null}
`; code != 0 || out != want {
		t.Errorf("no time: exit %d %q", code, out)
	}
	for _, args := range [][]string{{"--data-dir", "x", "--report", "--dump"}, {"--data-dir", "x", "--report", "--audit"}} {
		if code, _, errOut := replayCmd(t, "", args...); code != 2 || !strings.Contains(errOut, "--report cannot be combined with --dump or --audit") {
			t.Errorf("%v: exit %d %s", args, code, errOut)
		}
	}
}

// TestReplayReportPools: every JSON line of the report names its pool
// ("pool" after "tenant", SPEC §3 "Pools"); the table has a POOL column
// once a pool other than default was used. In the pool default a is alone
// (share, entitlement and ratio 1); in gpu (weights equal) a and b are
// both eligible from 0 s to 1 s and each billed 1 s: 0.5, 0.5 and 1.
func TestReplayReportPools(t *testing.T) {
	const script = `level 6
at 0s
tenant a tier=gold
tenant b tier=free
pool gpu weights=equal
submit a size=sm cost=1s
submit a size=sm cost=1s pool=gpu
submit b size=sm cost=1s pool=gpu
at 1s
dispatch sm
dispatch sm pool=gpu
dispatch sm pool=gpu
at 2s
finish 1 cpu=1s
finish 2 cpu=1s
finish 3 cpu=1s
`
	code, out, errOut := replayCmd(t, script, "--script", "-", "--report", "--json")
	want := `{"tenant": "a", "pool": "default", "class": "normal", "cpu_billed_ms": 1000, "share": 1.0000, "entitled": 1.0000, "ratio": 1.0000}
{"tenant": "a", "pool": "gpu", "class": "normal", "cpu_billed_ms": 1000, "share": 0.5000, "entitled": 0.5000, "ratio": 1.0000}
{"tenant": "b", "pool": "gpu", "class": "normal", "cpu_billed_ms": 1000, "share": 0.5000, "entitled": 0.5000, "ratio": 1.0000}
`
	if code != 0 || out != want {
		t.Errorf("json: exit %d\n%s%s\nwant\n%s", code, out, errOut, want)
	}
	code, out, errOut = replayCmd(t, script, "--script", "-", "--report")
	want = `CLASS   POOL     TENANT  CPU_BILLED_MS  SHARE   ENTITLED  RATIO
normal  default  a       1000           1.0000  1.0000    1.0000
normal  gpu      a       1000           0.5000  0.5000    1.0000
normal  gpu      b       1000           0.5000  0.5000    1.0000
`
	if code != 0 || out != want {
		t.Errorf("table: exit %d\n%s%s\nwant\n%s", code, out, errOut, want)
	}
}
