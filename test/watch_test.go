package test

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	pb "github.com/baristahq/barista/proto"
)

// TestWatchJobAndUntilIdle: watch --job prints only that job's events,
// from the first, and ends with the job with an exit code that says how
// it ended; watch --until-idle ends once the tenant has nothing queued or
// running.
func TestWatchJobAndUntilIdle(t *testing.T) {
	c, ctx := startWithAcme(t, 1, 2*time.Minute)
	server := c.Nodes[0].GRPCAddr
	submit := func(args ...string) {
		t.Helper()
		base := []string{"submit", "--server", server, "--tenant", "acme", "--size", "sm", "--cost", "100ms", "--max-attempts", "1", "--"}
		if out, errOut, err := c.Run(append(base, args...)...); err != nil {
			t.Fatalf("submit: %v %s %s", err, out, errOut)
		}
	}
	submit("sh", "-c", "sleep 1")         // job 1: completes
	submit("sh", "-c", "sleep 1; exit 7") // job 2: fails
	exitCode := func(err error) int {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			return -1
		}
		return 0
	}
	// Not found, before any worker.
	if _, errOut, err := c.Run("watch", "--server", server, "--tenant", "acme", "--job", "99"); exitCode(err) != 1 || !strings.Contains(errOut, "NOT_FOUND: job 99 not found") {
		t.Fatalf("watch --job 99: exit %d, %q", exitCode(err), errOut)
	}
	c.AddWorker("w1", "sm").Start("")
	for _, tc := range []struct {
		job, kinds string
		code       int
	}{{"1", "queued assigned started completed", 0}, {"2", "queued assigned started failed", 3}} {
		out, errOut, err := c.Run("watch", "--server", server, "--tenant", "acme", "--job", tc.job)
		var kinds []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			if len(f) < 5 || f[2] != "job="+tc.job {
				t.Fatalf("watch --job %s printed a line of another job: %q", tc.job, line)
			}
			kinds = append(kinds, f[4])
		}
		if got := strings.Join(kinds, " "); got != tc.kinds || exitCode(err) != tc.code {
			t.Fatalf("watch --job %s: %q exit %d (%s), want %q exit %d", tc.job, got, exitCode(err), errOut, tc.kinds, tc.code)
		}
	}
	// An ended job: the watch prints its events and ends at once.
	start := time.Now()
	if out, _, err := c.Run("watch", "--server", server, "--tenant", "acme", "--job", "1", "--json"); err != nil || strings.Count(out, "\n") != 4 || time.Since(start) > 10*time.Second {
		t.Fatalf("watch --job of an ended job: %v %q", err, out)
	}
	// --until-idle: ends once jobs 3 and 4 are done.
	submit("sh", "-c", "sleep 1")
	submit("sh", "-c", "sleep 1")
	out, errOut, err := c.Run("watch", "--server", server, "--tenant", "acme", "--until-idle")
	if err != nil || strings.Count(out, " completed") != 2 {
		t.Fatalf("watch --until-idle: %v %q %q", err, out, errOut)
	}
	st, err := pb.NewClientClient(c.Nodes[0].Conn()).TenantUsage(ctx, &pb.TenantUsageRequest{Tenant: "acme"})
	if err != nil || st.Queued != 0 || st.Running != 0 {
		t.Fatalf("after --until-idle: %v %v", st, err)
	}
	// --until-idle waits for a job scheduled to run again: job 5 fails its
	// first run, backs off 2 s, then completes.
	marker := t.TempDir() + "/ran-once"
	if out, errOut, err := c.Run("submit", "--server", server, "--tenant", "acme", "--size", "sm", "--cost", "100ms", "--max-attempts", "2",
		"--retry-backoff", "2s", "--", "sh", "-c", "test -e "+marker+" || { touch "+marker+"; exit 1; }"); err != nil {
		t.Fatalf("submit: %v %s %s", err, out, errOut)
	}
	out, errOut, err = c.Run("watch", "--server", server, "--tenant", "acme", "--until-idle")
	if err != nil || !strings.Contains(out, "job=5 attempt=2 completed") {
		t.Fatalf("watch --until-idle over a retry: %v %q %q", err, out, errOut)
	}
}
