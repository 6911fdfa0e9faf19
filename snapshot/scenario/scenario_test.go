package scenario

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baristahq/barista/fsm"
)

var update = flag.Bool("update", false, "rewrite the .golden files of testdata/scenarios")

const scenarioDir = "../../testdata/scenarios"

// TestScenarios runs every script under testdata/scenarios through the
// core and compares its output with the .golden file beside it.
func TestScenarios(t *testing.T) {
	scripts, err := filepath.Glob(filepath.Join(scenarioDir, "*.txt"))
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no scenarios found in %s: %v", scenarioDir, err)
	}
	for _, script := range scripts {
		name := strings.TrimSuffix(filepath.Base(script), ".txt")
		t.Run(name, func(t *testing.T) {
			got := runScript(t, script)
			golden := strings.TrimSuffix(script, ".txt") + ".golden"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./snapshot/scenario -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("output differs from %s\n--- got\n%s--- want\n%s", golden, got, want)
			}
			// Same script, fresh state machine: identical bytes, hash included.
			if again := runScript(t, script); !bytes.Equal(got, again) {
				t.Errorf("second run differs:\n%s\nvs\n%s", got, again)
			}
			// The core alone makes the same decisions: identical dispatch and
			// show lines (hashes and error texts differ by design). Schedules
			// are the state machine's alone.
			if strings.HasPrefix(name, "schedule-") {
				return
			}
			core := runScriptOn(t, script, NewCore())
			if a, b := decisions(got), decisions(core); a != b {
				t.Errorf("the core and the state machine disagree:\n--- fsm\n%s--- core\n%s", a, b)
			}
		})
	}
}

func runScript(t *testing.T, path string) []byte {
	t.Helper()
	return runScriptOn(t, path, NewMachine())
}

// decisions keeps the dispatch, show and explain lines of an output.
func decisions(out []byte) string {
	var b strings.Builder
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "dispatch ") || strings.HasPrefix(l, "job ") || strings.HasPrefix(l, "tenant ") ||
			strings.HasPrefix(l, "explain ") || strings.HasPrefix(l, "type ") || strings.HasPrefix(l, "group ") || strings.HasPrefix(l, "place ") ||
			strings.HasPrefix(l, "worker ") || strings.HasPrefix(l, "kind ") || strings.HasPrefix(l, "resource ") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func runScriptOn(t *testing.T, path string, target Target) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	res, err := Run(f, target, &out, Options{})
	if err != nil && !errors.Is(err, ErrScript) {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if n := strings.Count(out.String(), "\nerror ") + boolInt(strings.HasPrefix(out.String(), "error ")); n != res.Errors {
		t.Fatalf("%d error lines printed, %d counted", n, res.Errors)
	}
	return out.Bytes()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestWorkedExample pins SPEC §3's worked example independently of the
// golden file: the exact 18-line order, the tie at dispatch 10, and 16:2.
func TestWorkedExample(t *testing.T) {
	for _, clamp := range []string{"activation", "dispatch"} {
		script := "at 0s\nconfig clamp=" + clamp + "\ntenant gold tier=gold\ntenant free tier=free\n" +
			"submit gold x20 size=md cost=1s\nsubmit free x20 size=md cost=1s\ndispatch md x18\n"
		var out bytes.Buffer
		if _, err := Run(strings.NewReader(script), NewMachine(), &out, Options{}); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 19 {
			t.Fatalf("%s: %d lines:\n%s", clamp, len(lines), out.String())
		}
		gold, free := 0, 0
		for i, l := range lines[:18] {
			wantTenant := "gold"
			if i == 1 || i == 10 {
				wantTenant = "free"
			}
			if !strings.Contains(l, "tenant="+wantTenant+" ") {
				t.Errorf("%s: dispatch %d is %q, want %s", clamp, i+1, l, wantTenant)
			}
			if strings.Contains(l, "tenant=gold") {
				gold++
			} else {
				free++
			}
		}
		if gold != 16 || free != 2 {
			t.Errorf("%s: gold %d free %d, want 16:2", clamp, gold, free)
		}
		if lines[9] != "dispatch 10 tenant=gold job=9 size=md start=1000" || lines[10] != "dispatch 11 tenant=free job=22 size=md start=1000" {
			t.Errorf("%s: tie at dispatch 10 not won by gold on tier:\n%s\n%s", clamp, lines[9], lines[10])
		}
	}
}

// TestJSONOutput checks the --json form of each kind of line.
func TestJSONOutput(t *testing.T) {
	script := "at 0s\ntenant a tier=gold\nsubmit a size=lg cost=1500ms\ndispatch lg x2\nstart 1\nfinish 1 cpu=1001ms\nsubmit a size=sm cost=1s\ndispatch sm\nfinish 9 cpu=1s\n" +
		"submit a x2 size=md cost=1s\nexplain 3\nexplain 4\nexplain 2\n"
	var out bytes.Buffer
	_, err := Run(strings.NewReader(script), NewMachine(), &out, Options{JSON: true})
	if !errors.Is(err, ErrScript) {
		t.Fatalf("want ErrScript, got %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		`{"n":1,"tenant":"a","job":1,"size":"lg","start_ms":0}`,
		`{"n":2,"none":true}`,
		`{"n":3,"tenant":"a","job":2,"size":"sm","start_ms":125.125}`,
		`{"error":"unknown job: 9","line":9}`,
		`{"ahead":0,"explain":3,"reason":"waiting","tag_ms":250.125,"vnow_ms":250.125}`,
		`{"explain":4,"position":1,"reason":"behind"}`,
		`{"explain":2,"reason":"assigned","worker":"sm-3"}`,
	}
	if len(lines) != len(want)+1 {
		t.Fatalf("got %d lines:\n%s", len(lines), out.String())
	}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("line %d: got %s, want %s", i+1, lines[i], w)
		}
	}
	if !strings.HasPrefix(lines[len(lines)-1], `{"hash":"`) {
		t.Errorf("last line %s is not the hash", lines[len(lines)-1])
	}
}

// TestScriptErrors checks that malformed lines are reported with their
// line number and the run goes on.
func TestScriptErrors(t *testing.T) {
	cases := []struct{ line, want string }{
		{"bogus", `unknown command "bogus"`},
		{"level x", `bad level "x"`},
		{"at 5", `bad time "5"`},
		{"tenant x", `new tenant "x" needs tier=`},
		{"tenant x tier=platinum", `unknown tier "platinum"`},
		{"submit a size=xl cost=1s", `unknown size "xl"`},
		{"submit a size=sm", `submit needs cost=`},
		{"submit nobody size=sm cost=1s", `NOT_FOUND: unknown tenant "nobody"`},
		{"submit a size=sm cost=0s", `est_cost_ms: must be positive (got 0)`},
		{"dispatch md x0", `bad repeat "x0"`},
		{"config policy=random", `unknown policy "random"`},
		{"config decay=half_life:0s,norm:1s", `bad decay half_life`},
		{"expire 1 soon", `bad expiry "soon"`},
		{"finish 1", `finish needs cpu=`},
		{"delete a", `tenant has queued or running jobs`},
		{"submit a size=sm cost=1s group=bad/name", `group name "bad/name" has '/' at byte 3 (allowed: A-Z a-z 0-9 . _ : @ -)`},
		{"tenant a group_order=random", `unknown group_order "random" (want fifo or fair)`},
		{"tenant a max_groups=0", `bad max_groups "0"`},
		{"tenant a group_cap=0", `bad group_cap "0"`},
		{"group a g cap=0", `group cap "0" (want inherit, none or 1..1000000)`},
		{"group a g size=1", `unknown group key "size" (want cap or tenant_cap)`},
		{"group nobody g cap=1", `NOT_FOUND: unknown tenant "nobody"`},
		{"show group a g", `tenant "a" has no group "g"`},
	}
	for _, c := range cases {
		script := "level 4\nat 0s\ntenant a tier=free\nsubmit a size=sm cost=1s\n" + c.line + "\ndispatch sm\n"
		var out bytes.Buffer
		res, err := Run(strings.NewReader(script), NewMachine(), &out, Options{})
		if !errors.Is(err, ErrScript) || res.Errors != 1 {
			t.Errorf("%q: err %v, %d errors", c.line, err, res.Errors)
			continue
		}
		if !strings.Contains(out.String(), "error 5: ") || !strings.Contains(out.String(), c.want) {
			t.Errorf("%q: output\n%s\nwant error 5 containing %q", c.line, out.String(), c.want)
		}
		if !strings.Contains(out.String(), "dispatch 1 tenant=a job=1") {
			t.Errorf("%q: run did not go on after the error:\n%s", c.line, out.String())
		}
	}
}

// TestScriptLevels: a script starts at feature level 3, where everything
// of groups is refused, naming the field and both levels; "level 4"
// raises it (and a level is never lowered), after which the same lines
// are accepted. A level above this build's stops the run.
func TestScriptLevels(t *testing.T) {
	script := `at 0s
tenant a tier=free
submit a size=sm cost=1s group=g
tenant a tier=free group_cap=1
tenant a tier=free group_order=fair
tenant a tier=free max_groups=5
group a g cap=2
level 4
level 2
submit a size=sm cost=1s group=g
tenant a tier=free group_cap=1 group_order=fair max_groups=5
group a g cap=2
show group a g
`
	var out bytes.Buffer
	res, err := Run(strings.NewReader(script), NewMachine(), &out, Options{})
	if !errors.Is(err, ErrScript) || res.Errors != 5 {
		t.Fatalf("err %v, %d errors:\n%s", err, res.Errors, out.String())
	}
	need := func(what string) string {
		return what + " needs cluster feature level 4; the cluster is at level 3 until every voter runs a build that understands level 4 (docs/operations.md, \"Upgrades\")"
	}
	want := "error 3: FAILED_PRECONDITION: " + need("group") + "\n" +
		"error 4: FAILED_PRECONDITION: " + need("group_cap") + "\n" +
		"error 5: FAILED_PRECONDITION: " + need("group_order fair") + "\n" +
		"error 6: FAILED_PRECONDITION: " + need("max_groups") + "\n" +
		"error 7: FAILED_PRECONDITION: " + need("SetGroup") + "\n" +
		"group a g cap=2 tenant_cap=none limit=2 running=0 queued=1 tag=0 gnow=0\n"
	if got, _, _ := strings.Cut(out.String(), "hash="); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
	out.Reset()
	unknown := fsm.MaxFeatureLevel + 1
	if _, err := Run(strings.NewReader(fmt.Sprintf("level %d\n", unknown)), NewMachine(), &out, Options{}); err == nil ||
		!strings.Contains(out.String(), fmt.Sprintf("error 1: fatal: log entry 1 cannot be applied: unknown feature level %d (this build understands up to %d): upgrade this node", unknown, fsm.MaxFeatureLevel)) {
		t.Errorf("level %d: %v\n%s", unknown, err, out.String())
	}
}

// TestPlaceIsExact: in every golden scenario, each "place JOB ahead=N"
// line is followed by exactly N dispatches of other jobs before JOB's own
// (the scenarios let only workers of the job's size ask for work after a
// block of place lines, until the job goes).
func TestPlaceIsExact(t *testing.T) {
	scripts, _ := filepath.Glob(filepath.Join(scenarioDir, "*.golden"))
	checked := 0
	for _, golden := range scripts {
		b, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		for i, l := range lines {
			var job, ahead, own int
			if n, _ := fmt.Sscanf(l, "place %d ahead=%d own=%d", &job, &ahead, &own); n != 3 {
				continue
			}
			got := 0
			found := false
			for _, d := range lines[i+1:] {
				if !strings.HasPrefix(d, "dispatch ") || strings.HasSuffix(d, " none") {
					continue
				}
				if strings.Contains(d, fmt.Sprintf(" job=%d ", job)) {
					found = true
					break
				}
				got++
			}
			if !found || got != ahead {
				t.Errorf("%s: %q: job %d dispatched after %d others (found: %v)", filepath.Base(golden), l, job, got, found)
			}
			checked++
		}
	}
	if checked < 7 {
		t.Fatalf("only %d place lines checked", checked)
	}
}
