package test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baristahq/barista/internal/proc"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/test/cluster"
)

// buildExample builds a program of the examples module (a module of its
// own that requires this one through a replace) and returns its path.
func buildExample(t *testing.T, pkg string) string {
	t.Helper()
	dir, err := filepath.Abs("../examples")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s in examples: %v\n%s", pkg, err, out)
	}
	return bin
}

// TestExampleSubmitAndWatch runs examples/submit-and-watch against a
// three-node cluster with tokens and a worker: it submits three jobs with
// a client token and prints each one's events to completion; a second run
// with the same keys finds the same jobs; another tenant's token is
// refused with the cluster's message.
func TestExampleSubmitAndWatch(t *testing.T) {
	bin := buildExample(t, "./submit-and-watch")
	c := startWithTokens(t, 3, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Apply(ctx, tenantCmd("acme", pb.Tier_GOLD, 0)); err != nil {
		t.Fatal(err)
	}
	w := c.AddWorker("w1", "sm")
	w.Token = workerToken
	w.Start("")

	run := func(args ...string) (code int, stdout, stderr string) {
		t.Helper()
		var out, errb strings.Builder
		cmd := exec.CommandContext(ctx, bin, append([]string{"--server", c.Servers()}, args...)...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, out.String(), errb.String()
	}
	var ids []string
	for round, verb := range []string{"submitted", "already submitted"} {
		code, out, errOut := run("--token", acmeToken, "--jobs", "3", "--key-prefix", "order")
		if code != 0 || errOut != "" {
			t.Fatalf("run %d: exit %d\n%s\n%s", round+1, code, out, errOut)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != 3+3*4+1 {
			t.Fatalf("run %d printed %d lines:\n%s", round+1, len(lines), out)
		}
		for i := range 3 {
			var id string
			if _, err := fmt.Sscanf(lines[i], "job %s", &id); err != nil {
				t.Fatalf("line %q: %v", lines[i], err)
			}
			if want := fmt.Sprintf("job %s %s (key order-%d)", id, verb, i+1); lines[i] != want {
				t.Errorf("run %d: %q, want %q", round+1, lines[i], want)
			}
			if round == 0 {
				ids = append(ids, id)
			} else if id != ids[i] {
				t.Errorf("run 2: key order-%d is job %s, was %s", i+1, id, ids[i])
			}
			// The job's events, in order, among the others' lines.
			var events []string
			for _, l := range lines[3 : len(lines)-1] {
				if rest, ok := strings.CutPrefix(l, "job "+id+": "); ok {
					events = append(events, rest)
				}
			}
			want := []string{"queued", "assigned on w1", "started on w1", "completed (exit code 0)"}
			if !slices.Equal(events, want) {
				t.Errorf("run %d, job %s: events %q, want %q", round+1, id, events, want)
			}
		}
		if last := lines[len(lines)-1]; last != "3 jobs: 3 completed, 0 failed, 0 cancelled, 0 timed out" {
			t.Errorf("run %d: summary %q", round+1, last)
		}
	}
	code, out, errOut := run("--token", betaToken, "--tenant", "acme", "--jobs", "1")
	want := "the cluster refused the token: PERMISSION_DENIED: tenant: this token is for tenant \"beta\", not \"acme\"\n"
	if code != 1 || out != "" || errOut != want {
		t.Errorf("beta's token for acme: exit %d, stdout %q, stderr %q, want %q", code, out, errOut, want)
	}
	// 50 runs with a follower first in the address list: each submits
	// through the follower and watches its job there at once.
	leader := c.WaitLeader(20 * time.Second)
	var addrs []string
	for _, f := range c.Followers(leader) {
		addrs = append(addrs, f.GRPCAddr)
	}
	addrs = append(addrs, leader.GRPCAddr)
	for i := range 50 {
		var out, errb strings.Builder
		cmd := exec.CommandContext(ctx, bin, "--server", strings.Join(addrs, ","), "--token", acmeToken, "--jobs", "1", "--key-prefix", fmt.Sprintf("follower-%d", i))
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil || !strings.HasSuffix(out.String(), "1 jobs: 1 completed, 0 failed, 0 cancelled, 0 timed out\n") {
			t.Fatalf("run %d of 50, a follower first: %v\n%s\n%s", i+1, err, out.String(), errb.String())
		}
	}
}

// TestExampleGoWorker runs examples/go-worker, Go functions routed by
// kind, with two slots, against a one-node cluster with tokens: a job of
// kind count-words completes with the function's answer as its output,
// billed the wall time the call took; one whose text says "later" is
// snoozed once and then completes, without a failure counted; a payload
// it cannot read, and a job of no form of another kind, fail at once with
// no retry; a function job of another kind is never given to it and
// waits queued; SIGTERM stops the worker gracefully, and it exits 0.
func TestExampleGoWorker(t *testing.T) {
	bin := buildExample(t, "./go-worker")
	c := startWithTokens(t, 1, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Apply(ctx, tenantCmd("acme", pb.Tier_GOLD, 0)); err != nil {
		t.Fatal(err)
	}
	var procs proc.Set
	t.Cleanup(procs.KillAll)
	w := &proc.Process{LogPath: filepath.Join(t.TempDir(), "go-worker.log")}
	cmd := exec.Command(bin, "--server", c.Servers(), "--id", "words", "--size", "md", "--concurrency", "2")
	cmd.Env = append(os.Environ(), "BARISTA_TOKEN="+workerToken)
	if err := w.Start(cmd, false, &procs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("---- output of go-worker\n%s", w.Log())
		}
	})

	acme := pb.NewClientClient(cluster.Dial(t, c.Nodes[0].GRPCAddr, acmeToken, nil))
	submit := func(kind, payload string) uint64 {
		t.Helper()
		r, err := acme.Submit(ctx, &pb.SubmitRequest{Size: pb.Size_MD, EstCostMs: 100, JobType: kind, Payload: []byte(payload)})
		if err != nil {
			t.Fatal(err)
		}
		return r.JobId
	}
	ended := func(j *pb.Job) bool { return j.State == "completed" || j.State == "failed" }
	thumb, err := acme.Submit(ctx, &pb.SubmitRequest{Size: pb.Size_MD, EstCostMs: 100, JobType: "thumbnail", Payload: []byte(`{}`), Form: pb.JobForm_FUNCTION})
	if err != nil {
		t.Fatal(err)
	}
	good := submit("count-words", `{"text": "one two three\nfour five"}`)
	j := waitJob(t, acme, good, time.Minute, "its end", ended)
	if j.State != "completed" || j.ExitCode != 0 || j.StdoutTail != `{"words":5,"lines":2}` || (j.WorkerId != "words-1" && j.WorkerId != "words-2") || j.Attempt != 1 {
		t.Errorf("job %d: %s, exit code %d, output %q on %q at attempt %d; want completed, 0, {\"words\":5,\"lines\":2} on words-1 or words-2 at 1",
			good, j.State, j.ExitCode, j.StdoutTail, j.WorkerId, j.Attempt)
	}
	if j.CpuMs < 0 || j.CpuMs > 10_000 {
		t.Errorf("job %d billed %d ms: want the wall time of one call", good, j.CpuMs)
	}
	later := submit("count-words", `{"text": "later, please"}`)
	j = waitJob(t, acme, later, time.Minute, "its end", ended)
	if j.State != "completed" || j.Attempt != 2 || j.Failures != 0 || j.StdoutTail != `{"words":2,"lines":1}` {
		t.Errorf("job %d: %s at attempt %d with %d failures, output %q; want completed at attempt 2 after a snooze, no failure",
			later, j.State, j.Attempt, j.Failures, j.StdoutTail)
	}
	for _, c := range []struct{ kind, payload, stderr string }{
		{"count-words", `not json`, `its payload is not the arguments of kind "count-words" (main.CountWords)`},
		{"resize", `{}`, `is of kind "resize", which this worker has no function for (it runs count-words)`},
	} {
		id := submit(c.kind, c.payload)
		j = waitJob(t, acme, id, time.Minute, "its end", ended)
		if j.State != "failed" || j.ExitCode == 0 || !strings.Contains(j.StderrTail, c.stderr) || j.Attempt != 1 || j.MaxAttempts < 2 {
			t.Errorf("job %d: %s, exit code %d, stderr %q at attempt %d of %d; want failed at once, saying %q",
				id, j.State, j.ExitCode, j.StderrTail, j.Attempt, j.MaxAttempts, c.stderr)
		}
	}

	// Every other job ended; the function job of kind thumbnail, which
	// the worker does not register, was never given to it.
	if j := waitJob(t, acme, thumb.JobId, time.Minute, "a read", func(*pb.Job) bool { return true }); j.State != "queued" || j.Attempt != 0 || j.Failures != 0 {
		t.Errorf("thumbnail job %d: %s at attempt %d with %d failures; want queued, never tried", thumb.JobId, j.State, j.Attempt, j.Failures)
	}

	w.Signal(syscall.SIGTERM)
	if !w.Wait(30 * time.Second) {
		t.Fatal("go-worker did not exit within 30s of SIGTERM")
	}
	if err := w.ExitErr(); err != nil {
		t.Errorf("go-worker exited: %v", err)
	}
	log := w.Log()
	for _, line := range []string{"worker words-1, words-2 (md) runs count-words from " + c.Servers(), fmt.Sprintf("job %d of acme: 5 words", good),
		"stopping: finishing the running jobs", "stopped"} {
		if !strings.Contains(log, line+"\n") {
			t.Errorf("go-worker printed no line %q", line)
		}
	}
}
