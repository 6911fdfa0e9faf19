package scenario

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// runBoth runs script on the state machine and on the core and returns
// both outputs.
func runBoth(t *testing.T, script string, opt Options) (machine, core string) {
	t.Helper()
	var a, b bytes.Buffer
	if _, err := Run(strings.NewReader(script), NewMachine(), &a, opt); err != nil && !errors.Is(err, ErrScript) {
		t.Fatalf("machine: %v\n%s", err, a.String())
	}
	if _, err := Run(strings.NewReader(script), NewCore(), &b, opt); err != nil && !errors.Is(err, ErrScript) {
		t.Fatalf("core: %v\n%s", err, b.String())
	}
	return a.String(), b.String()
}

// TestKindsScriptErrors: each malformed or refused line of the kinds
// grammar is an error line naming what is wrong, on both targets, and
// the run goes on.
func TestKindsScriptErrors(t *testing.T) {
	cases := []struct{ line, want, core string }{
		{"worker w", "worker needs size=", ""},
		{"worker w size=sm kinds=", `bad kinds ""`, ""},
		{"worker w size=sm cmds", "usage: worker ID size=S", ""},
		{"worker w size=sm holds=3", `bad holds "3"`, ""},
		{"worker w size=sm holds=1/0", `bad holds "1/0"`, ""},
		{"worker w size=sm kinds=x," + strings.Repeat("k", 257), "kinds: 257 bytes, at most 256", ""},
		{"worker w size=sm pool=gpu", `unknown pool "gpu"`, `unknown pool: "gpu"`},
		{"worker w size=sm holds=1/1,1/2,1/3,1/4,1/5,1/6,1/7,1/8,1/9", "holds: 9 runs, at most 8", ""},
		{"submit a command size=sm cost=1s kind=x", "kind=K makes a function job of type K", ""},
		{"submit a size=sm cost=1s kind=x type=y", "kind=K makes a function job of type K", ""},
		{"kind nobody resize max_attempts=2", `unknown tenant "nobody"`, `unknown tenant: "nobody"`},
		{"kind * resize", "a retry policy sets max_attempts, retry_backoff, retry_backoff_max or timeout", ""},
		{"kind * resize size=sm", `unknown kind key "size"`, ""},
		{"kind * resize max_attempts=2 remove", "usage: kind TENANT|* KIND", ""},
		{"kind * resize max_attempts=1001", "max_attempts: 1001, at most", ""},
		{"finish 1 outcome=unknown_kind", "job 1 was submitted with no form", ""},
		{"show worker nobody", `no worker "nobody"`, ""},
		{"show kind * resize", `no retry policy of kind "resize" for *`, ""},
	}
	for _, c := range cases {
		script := "level 8\nat 0s\ntenant a tier=free\nsubmit a size=sm cost=1s\n" + c.line + "\ndispatch sm\n"
		m, k := runBoth(t, script, Options{})
		if c.core == "" {
			c.core = c.want
		}
		for target, out := range []string{m, k} {
			want := []string{c.want, c.core}[target]
			if !strings.Contains(out, "error 5: ") || !strings.Contains(out, want) {
				t.Errorf("%q (target %d): output\n%s\nwant error 5 containing %q", c.line, target, out, want)
			}
			if !strings.Contains(out, "dispatch 1 tenant=a job=1") {
				t.Errorf("%q (target %d): run did not go on after the error:\n%s", c.line, target, out)
			}
		}
	}
}

// TestKindsBelowLevel8: before level 8 a worker's Hello and a retry policy
// of a kind are refused, and a submit's form is dropped as a cluster of
// that level does (the job runs on any worker): on both targets.
func TestKindsBelowLevel8(t *testing.T) {
	script := "at 0s\ntenant a tier=free\nworker w size=sm commands\nkind * x max_attempts=2\nsubmit a size=sm cost=1s kind=x\n" +
		"show job 1\nfinish 1 outcome=unknown_kind\n"
	m, k := runBoth(t, script, Options{})
	for target, out := range []string{m, k} {
		for _, want := range []string{"error 3: ", "needs cluster feature level 8", "error 4: ",
			"job 1 tenant=a state=queued attempt=0 failures=0 cancel=none cpu=0ms class=normal est=1000ms est_source=submitted\n", "error 7: "} {
			if target == 1 && want == "needs cluster feature level 8" {
				want = "needs feature level 8"
			}
			if !strings.Contains(out, want) {
				t.Errorf("target %d: output\n%s\nwant %q", target, out, want)
			}
		}
	}
}

// TestKindsConnectedWorker: a dispatch to a worker the script connected
// is of its size and pool (a pool not given is the worker's; another
// size or pool is an error, before any request is made, so not
// numbered), its line names the worker, a worker it did not connect
// runs every job, and the JSON forms of the new lines.
func TestKindsConnectedWorker(t *testing.T) {
	script := `level 8
at 0s
pool gpu
tenant a tier=gold
submit a size=sm cost=1s kind=digest pool=gpu
submit a command size=sm cost=1s
worker py size=sm pool=gpu kinds=digest
dispatch md worker=py
dispatch sm worker=py pool=default
dispatch sm worker=py
kind a digest max_attempts=4 backoff=0s
show worker py
show kind a digest
show job 1
dispatch sm worker=nobody
`
	m, k := runBoth(t, script, Options{})
	wantText := "error 8: worker py connected with size=sm: it asks for sm jobs (connect it again to change its size)\n" +
		"error 9: worker py connected in pool gpu: it asks for jobs of that pool (connect it again to change its pool)\n" +
		"dispatch 1 tenant=a job=1 size=sm start=0 pool=gpu worker=py\n" +
		"worker py size=sm pool=gpu commands=no kinds=digest job=1/1\n" +
		"kind a digest max_attempts=4 backoff=0ms backoff_max=unset timeout=unset\n" +
		"job 1 tenant=a state=assigned attempt=1 failures=0 cancel=none cpu=0ms class=normal est=1000ms est_source=submitted form=function kind=digest max_attempts=3 backoff=config backoff_max=config timeout=none\n" +
		"dispatch 2 tenant=a job=2 size=sm start=0\n"
	for target, out := range []string{m, k} {
		if got, _, _ := strings.Cut(out, "hash="); got != wantText {
			t.Errorf("target %d: output\n%s\nwant\n%s", target, got, wantText)
		}
	}
	j, _ := runBoth(t, script, Options{JSON: true})
	for _, want := range []string{
		`{"n":1,"tenant":"a","job":1,"size":"sm","pool":"gpu","worker":"py","start_ms":0}`,
		`{"commands":false,"job":"1/1","kinds":"digest","pool":"gpu","size":"sm","worker":"py"}`,
		`{"backoff":"0ms","backoff_max":"unset","kind":"digest","max_attempts":"4","tenant":"a","timeout":"unset"}`,
		`"form":"function","job":1,"kind":"digest","max_attempts":3,`,
	} {
		if !strings.Contains(j, want) {
			t.Errorf("JSON output\n%s\nlacks %s", j, want)
		}
	}
}
