package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/test/cluster"
)

// spyScript is a tenant's job that looks for what it should not find on
// its worker's machine, each probe under a "== name" heading: its own
// environment, the worker's token file ($1), the command line of its
// parent and the command line, environment, memory and open files of the
// agent ($2, its PID), another tenant's log ($3), the log directory ($4)
// and the work directory ($5).
const spyScript = `
exec 2>&1
echo "== env"; env | sort
echo "== id"; id -u
echo "== ppid"; echo $PPID
echo "== token file"; cat "$1"
echo "== parent cmdline"; cat /proc/$PPID/cmdline | tr '\0' ' '; echo
echo "== agent cmdline"; cat /proc/$2/cmdline | tr '\0' ' '; echo
echo "== agent environ"; cat /proc/$2/environ | tr '\0' '\n'
echo "== agent memory"; head -c 16 /proc/$2/mem >/dev/null
echo "== agent files"; ls /proc/$2/fd
echo "== other log"; cat "$3"
echo "== log dir"; ls "$4"
echo "== work dir"; ls "$5"
echo "== end"
`

// spyReport splits a spy job's output into its sections.
func spyReport(out string) map[string]string {
	sections := map[string]string{}
	name := ""
	for _, line := range strings.SplitAfter(out, "\n") {
		if h, ok := strings.CutPrefix(line, "== "); ok {
			name = strings.TrimSpace(h)
			sections[name] = ""
			continue
		}
		sections[name] += line
	}
	return sections
}

// TestJobCannotSeeWorkerSecrets: a worker runs another tenant's job
// (beta, which prints a private line), then acme's spy job. The spy's
// environment is exactly the documented set: no token, none of the
// worker's variables (a cloud credential in the worker's environment
// does not reach it), HOME, TMPDIR and PWD its own directory, which is
// gone once the run ends; job logs are 0600 in a 0700 directory. Run as
// another user (--run-as nobody, the token in a 0600 --token-file), the
// spy gets none of the rest either: the token file, the agent's
// environment and memory, beta's log, the log and work directories are
// refused, and the agent's command line, which anyone may read, names
// the token file but holds no token.
func TestJobCannotSeeWorkerSecrets(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "worker-cloud-credential-0001")
	t.Setenv("LANG", "C.UTF-8")
	t.Setenv("TZ", "UTC")
	c := startWithTokens(t, 1, workerTimeouts)
	setupTenants(t, c, map[string]pb.Tier{"acme": pb.Tier_GOLD, "beta": pb.Tier_GOLD})
	client := pb.NewClientClient(c.Nodes[0].Conn())
	const private = "beta-private-output-5b1e"

	// run runs beta's job and then acme's spy (sh -c script with the
	// arguments args gives for beta's log) on w, and returns the spy's
	// report, its run's directory and beta's log.
	run := func(t *testing.T, w *cluster.Worker, workDir, script string, args func(betaLog string) []string) (map[string]string, string, string) {
		t.Helper()
		beta := submitJob(t, c, 0, &pb.SubmitRequest{Tenant: "beta", Size: pb.Size_SM, EstCostMs: 100,
			Payload: payload(t, "sh", "-c", "echo "+private+"; echo "+private+" > $HOME/private.txt")})
		waitJob(t, client, beta, time.Minute, "completed", func(j *pb.Job) bool { return j.State == "completed" })
		betaLog := filepath.Join(w.LogDir, fmt.Sprintf("job-%d-attempt-1.log", beta))
		spy := submitJob(t, c, 0, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 100,
			Payload: payload(t, append([]string{"sh", "-c", script, "spy"}, args(betaLog)...)...)})
		j := waitJob(t, client, spy, time.Minute, "completed", func(j *pb.Job) bool { return j.State == "completed" })
		if j.WorkerId != w.ID {
			t.Fatalf("the spy ran on %q, want %s", j.WorkerId, w.ID)
		}
		out, err := os.ReadFile(filepath.Join(w.LogDir, fmt.Sprintf("job-%d-attempt-1.log", spy)))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("the spy's output:\n%s", out)
		for _, secret := range []string{workerToken, "worker-cloud-credential-0001", private} {
			if strings.Contains(string(out), secret) {
				t.Errorf("the spy found %q", secret)
			}
		}
		// Logs: the worker's user's only.
		for path, want := range map[string]os.FileMode{w.LogDir: 0o700, betaLog: 0o600} {
			if st, err := os.Stat(path); err != nil || st.Mode().Perm() != want {
				t.Errorf("%s: %v, %v; want mode %04o", path, st.Mode(), err, want)
			}
		}
		runDir := filepath.Join(workDir, fmt.Sprintf("job-%d-attempt-1", spy))
		if _, err := os.Stat(runDir); !os.IsNotExist(err) {
			t.Errorf("the spy's directory %s after its run: %v, want it removed", runDir, err)
		}
		return spyReport(string(out)), runDir, betaLog
	}

	// wantEnv is the whole environment of the spy: the documented set (and
	// PWD, which sh sets).
	wantEnv := func(runDir, user, worker string) string {
		var job, attempt int
		fmt.Sscanf(filepath.Base(runDir), "job-%d-attempt-%d", &job, &attempt)
		env := []string{"BARISTA_ATTEMPT=1", "BARISTA_JOB_ID=" + strconv.Itoa(job), "BARISTA_TENANT=acme", "BARISTA_WORKER_ID=" + worker,
			"HOME=" + runDir, "LANG=C.UTF-8", "LOGNAME=" + user, "PATH=" + os.Getenv("PATH"), "PWD=" + runDir,
			"TMPDIR=" + runDir, "TZ=UTC", "USER=" + user}
		slices.Sort(env)
		return strings.Join(env, "\n") + "\n"
	}
	t.Run("token in the environment, jobs as the worker's user", func(t *testing.T) {
		w := c.AddWorker("w-root", "sm")
		w.Token, w.TokenEnv = workerToken, true
		w.Start("")
		workDir := w.WorkDir
		defer w.Stop(30 * time.Second)
		// A job of the agent's user (root here) may read whatever the
		// agent can: only the environment is checked.
		report, runDir, _ := run(t, w, workDir, `echo "== env"; env | sort`, func(string) []string { return nil })
		if got, want := report["env"], wantEnv(runDir, "root", w.ID); got != want {
			t.Errorf("the spy's environment:\n%s\nwant exactly:\n%s", got, want)
		}
	})

	t.Run("token file, jobs as nobody", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("--run-as needs root")
		}
		// Only the files' and directories' own modes protect them: they
		// are in a directory anyone may enter (nobody must reach its own
		// run's directory), outside the test's private one.
		base, err := os.MkdirTemp("", "barista-worker-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(base)
		if err := os.Chmod(base, 0o755); err != nil {
			t.Fatal(err)
		}
		workDir := filepath.Join(base, "jobs")
		tokenFile := filepath.Join(base, "worker.token")
		if err := os.WriteFile(tokenFile, []byte(workerToken+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		w := c.AddWorker("w-nobody", "sm")
		w.LogDir, w.WorkDir = filepath.Join(base, "logs"), workDir
		w.TokenFile = tokenFile
		w.Args = []string{"--run-as", "nobody"}
		w.Start("")
		defer w.Stop(30 * time.Second)
		report, runDir, betaLog := run(t, w, workDir, spyScript, func(betaLog string) []string {
			return []string{tokenFile, strconv.Itoa(w.PID()), betaLog, w.LogDir, workDir}
		})
		if got, want := report["env"], wantEnv(runDir, "nobody", w.ID); got != want {
			t.Errorf("the spy's environment:\n%s\nwant exactly:\n%s", got, want)
		}
		agent := strconv.Itoa(w.PID())
		for section, want := range map[string]string{
			"id":            "65534\n",
			"ppid":          agent + "\n",
			"token file":    "cat: " + tokenFile + ": Permission denied\n",
			"agent environ": "cat: /proc/" + agent + "/environ: Permission denied\n",
			"agent memory":  "head: cannot open '/proc/" + agent + "/mem' for reading: Permission denied\n",
			"agent files":   "ls: cannot open directory '/proc/" + agent + "/fd': Permission denied\n",
			"other log":     "cat: " + betaLog + ": Permission denied\n",
			"log dir":       "ls: cannot open directory '" + w.LogDir + "': Permission denied\n",
			"work dir":      "ls: cannot open directory '" + workDir + "': Permission denied\n",
		} {
			if got := report[section]; got != want {
				t.Errorf("%s: the spy got %q, want %q", section, got, want)
			}
		}
		// The command line is public, and holds no secret.
		for _, section := range []string{"parent cmdline", "agent cmdline"} {
			if got := report[section]; !strings.Contains(got, " --token-file "+tokenFile+" ") || strings.Contains(got, "--token ") {
				t.Errorf("%s: %q, want the worker's command line with --token-file and no --token", section, got)
			}
		}
	})
}

// TestJobHoldsNoInheritedDescriptors: a worker started holding
// descriptors its starter left open (a shell's fds 10 and 251, not
// close-on-exec) runs its job with only stdin, stdout and stderr: the
// job's own listing of its descriptors is 0, 1, 2 and the one it lists
// them through. (Before, the job held both.)
func TestJobHoldsNoInheritedDescriptors(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is needed to start the worker with fds 10 and 251 open")
	}
	c := startWithTokens(t, 1, workerTimeouts)
	setupTenants(t, c, map[string]pb.Tier{"acme": pb.Tier_GOLD})
	c.Wrap = func(string) []string {
		return []string{bash, "-c", `exec 10</dev/null 251</dev/null; exec "$0" "$@"`}
	}
	w := c.AddWorker("w-fds", "sm")
	w.Token = workerToken
	w.Start("")
	client := pb.NewClientClient(c.Nodes[0].Conn())
	id := submitJob(t, c, 0, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 100,
		Payload: payload(t, "sh", "-c", `for f in /proc/$$/fd/*; do printf '%s ' "${f##*/}"; done; echo`)})
	waitJob(t, client, id, time.Minute, "completed", func(j *pb.Job) bool { return j.State == "completed" })
	out, err := os.ReadFile(filepath.Join(w.LogDir, fmt.Sprintf("job-%d-attempt-1.log", id)))
	if err != nil {
		t.Fatal(err)
	}
	// The worker itself holds them (its starter's), the job does not.
	held, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", w.PID()))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range held {
		names = append(names, e.Name())
	}
	if !slices.Contains(names, "10") || !slices.Contains(names, "251") {
		t.Fatalf("the worker does not hold fds 10 and 251 (%v): the test proves nothing", names)
	}
	// The shell lists its directory of descriptors through one of its
	// own (3) while it reads it.
	if got := strings.TrimSpace(string(out)); got != "0 1 2 3" {
		t.Fatalf("the job's descriptors: %q, want \"0 1 2 3\" (3: the listing's own)", got)
	}
}
