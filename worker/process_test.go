//go:build linux

package worker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/worker/runner"
)

// runJob starts a on r and waits for the run to be done.
func runJob(t *testing.T, r *ProcessRunner, a *pb.Assign) Result {
	t.Helper()
	run, err := r.Start(a)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-run.Done():
	case <-time.After(20 * time.Second):
		run.Kill()
		<-run.Done()
		t.Fatal("the job did not end")
	}
	return run.Result()
}

func shellJob(t *testing.T, job uint64, script string, env map[string]string) *pb.Assign {
	t.Helper()
	p, err := runner.EncodePayload(runner.Spec{Argv: []string{"/bin/sh", "-c", script}, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	return &pb.Assign{Job: job, Attempt: 2, Tenant: "acme", Payload: p}
}

// TestProcessRunnerJobEnvironment: a job's environment is exactly the
// base (BaseEnv of the agent's), HOME and TMPDIR (its own directory, also
// its working directory, mode 0700), USER and LOGNAME, its payload's env
// (which may replace LANG, not BARISTA_JOB_ID), and its run's variables;
// nothing else of the agent's environment. Its log is 0600 in a 0700
// directory, and its directory is gone once the run is; one that a dead
// agent's run left is removed when the runner starts.
func TestProcessRunnerJobEnvironment(t *testing.T) {
	t.Setenv("BARISTA_TOKEN", "agent-token-never-in-a-job")
	agentEnv := map[string]string{"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "CUDA_VISIBLE_DEVICES": "0", "AWS_SECRET_ACCESS_KEY": "no"}
	base, err := BaseEnv(func(k string) string { return agentEnv[k] }, []string{"CUDA_VISIBLE_DEVICES", "SITE=eu-1", "UNSET"})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	logDir, workDir := filepath.Join(root, "logs"), filepath.Join(root, "work")
	// A run of an agent that died left its directory and a file in it.
	left := filepath.Join(workDir, "job-3-attempt-1")
	if err := os.MkdirAll(left, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(workDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(left, "output"), []byte("left"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := NewProcessRunner(ProcessConfig{LogDir: logDir, WorkDir: workDir, WorkerID: "w1", Env: base})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("the directory a dead agent's run left: %v, want it removed at start", err)
	}
	res := runJob(t, r, shellJob(t, 7, `/usr/bin/env | LC_ALL=C sort; echo "pwd=$(pwd -P)"; stat -c %a "$TMPDIR"`,
		map[string]string{"LANG": "fr_FR.UTF-8", "BARISTA_JOB_ID": "99", "MINE": "1"}))
	if res.ExitCode != 0 {
		t.Fatalf("result %+v", res)
	}
	dir := filepath.Join(workDir, "job-7-attempt-2")
	user := currentUserName()
	want := fmt.Sprintf(`BARISTA_ATTEMPT=2
BARISTA_JOB_ID=7
BARISTA_TENANT=acme
BARISTA_WORKER_ID=w1
CUDA_VISIBLE_DEVICES=0
HOME=%[1]s
LANG=fr_FR.UTF-8
LOGNAME=%[2]s
MINE=1
PATH=/usr/bin:/bin
PWD=%[1]s
SITE=eu-1
TMPDIR=%[1]s
USER=%[2]s
pwd=%[1]s
700
`, dir, user)
	logPath := filepath.Join(logDir, "job-7-attempt-2.log")
	got, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("the job's output:\n%s\nwant:\n%s", got, want)
	}
	for path, mode := range map[string]os.FileMode{logDir: 0o700, logPath: 0o600, workDir: 0o700} {
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != mode {
			t.Errorf("%s: %v %v, want mode %04o", path, st.Mode(), err, mode)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the run's directory after the run: %v, want it removed", err)
	}
}

// TestProcessRunnerPayloadDir: a payload's dir is the working directory;
// HOME and TMPDIR stay the run's own.
func TestProcessRunnerPayloadDir(t *testing.T) {
	root := t.TempDir()
	r, err := NewProcessRunner(ProcessConfig{LogDir: filepath.Join(root, "logs"), WorkDir: filepath.Join(root, "work"), WorkerID: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := runner.EncodePayload(runner.Spec{Argv: []string{"/bin/sh", "-c", `echo "$(pwd -P) $HOME"`}, Dir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	res := runJob(t, r, &pb.Assign{Job: 3, Attempt: 1, Tenant: "acme", Payload: p})
	if want := "/ " + filepath.Join(root, "work", "job-3-attempt-1") + "\n"; res.StdoutTail != want {
		t.Errorf("stdout %q, want %q", res.StdoutTail, want)
	}
}

// TestProcessRunnerRefuses: directories other users may enter, a link, a
// root job user, and barista's own variables in BaseEnv are refused,
// each with its reason.
func TestProcessRunnerRefuses(t *testing.T) {
	root := t.TempDir()
	open := filepath.Join(root, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(open, link); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(root, "work")
	for _, tc := range []struct {
		cfg   ProcessConfig
		field string
		want  string
	}{
		{ProcessConfig{LogDir: open, WorkDir: work}, "LogDir", open + " has mode 0755, which lets other users in: want 0700 (chmod 700 " + open + ")"},
		{ProcessConfig{WorkDir: open}, "WorkDir", open + " has mode 0755, which lets other users in: want 0700 (chmod 700 " + open + ")"},
		{ProcessConfig{LogDir: link, WorkDir: work}, "LogDir", link + " is not a directory (a link is refused: name the directory itself)"},
		{ProcessConfig{}, "WorkDir", "required"},
	} {
		_, err := NewProcessRunner(tc.cfg)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || ce.Err.Error() != tc.want {
			t.Errorf("%+v: %v, want %s: %s", tc.cfg, err, tc.field, tc.want)
		}
	}
	rootUser := &JobUser{Name: "root"}
	_, err := NewProcessRunner(ProcessConfig{WorkDir: work, User: rootUser})
	want := "User: user root (uid 0) is root: name an unprivileged user for the jobs"
	if os.Geteuid() != 0 {
		want = fmt.Sprintf("User: running jobs as user root (uid 0) needs the worker to run as root (it runs as uid %d)", os.Geteuid())
	}
	if err == nil || err.Error() != want {
		t.Errorf("a root job user: %v, want %s", err, want)
	}
	for _, tc := range []struct{ pass, want string }{
		{"BARISTA_TOKEN", "BARISTA_TOKEN: barista's own variables are never passed to jobs (the worker sets BARISTA_JOB_ID and the like itself)"},
		{"barista_token=x", "barista_token: barista's own variables are never passed to jobs (the worker sets BARISTA_JOB_ID and the like itself)"},
		{"=x", `"=x" is not NAME or NAME=VALUE`},
		{"A B", `"A B" is not NAME or NAME=VALUE`},
	} {
		if _, err := BaseEnv(os.Getenv, []string{tc.pass}); err == nil || err.Error() != tc.want {
			t.Errorf("BaseEnv(%q): %v, want %s", tc.pass, err, tc.want)
		}
	}
	// Without a PATH of its own, a job gets the default one.
	if env, err := BaseEnv(func(string) string { return "" }, nil); err != nil || strings.Join(env, " ") != "PATH="+DefaultPath {
		t.Errorf("BaseEnv of an empty environment: %q, %v", env, err)
	}
}

// TestLookupUser: a name, a known and an unknown user ID, and UID:GID.
func TestLookupUser(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"nobody", "user nobody (uid 65534) gid 65534 groups [65534]"},
		{"65534", "user nobody (uid 65534) gid 65534 groups [65534]"},
		{"4242", "uid 4242 gid 4242 groups []"},
		{"4242:100", "uid 4242 gid 100 groups []"},
	} {
		u, err := LookupUser(tc.spec)
		if err != nil {
			t.Errorf("%s: %v", tc.spec, err)
			continue
		}
		if got := fmt.Sprintf("%s gid %d groups %v", u, u.GID, u.Groups); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.spec, got, tc.want)
		}
	}
	for _, tc := range []struct{ spec, want string }{
		{"no-such-user-barista", `no user "no-such-user-barista" on this machine`},
		{"nobody:65534", `"nobody:65534": want a user name, a UID, or UID:GID with numbers`},
		{"", "no user given"},
	} {
		if _, err := LookupUser(tc.spec); err == nil || err.Error() != tc.want {
			t.Errorf("%q: %v, want %s", tc.spec, err, tc.want)
		}
	}
}

// TestProcessRunnerRunAs: with a job user (nobody) the run's directory is
// nobody's, the work directory lets it through (0711) but not list, and
// the job runs as nobody; a work directory nobody cannot reach is
// refused. It needs root.
func TestProcessRunnerRunAs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running jobs as another user needs root")
	}
	nobody, err := LookupUser("nobody")
	if err != nil {
		t.Skip(err)
	}
	// The test's own temporary directory is closed to nobody.
	closed := filepath.Join(t.TempDir(), "work")
	_, err = NewProcessRunner(ProcessConfig{WorkDir: closed, User: nobody})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "WorkDir" || !strings.HasPrefix(ce.Err.Error(), "user nobody (uid 65534) cannot reach its job directories under "+closed+": "+filepath.Dir(filepath.Dir(closed))+" (mode 0700") {
		t.Errorf("an unreachable work directory: %v", err)
	}
	base, err := os.MkdirTemp("", "barista-agent-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(base, "work")
	r, err := NewProcessRunner(ProcessConfig{LogDir: filepath.Join(base, "logs"), WorkDir: work, WorkerID: "w1", User: nobody, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	res := runJob(t, r, shellJob(t, 5, `id -u; id -G; stat -c '%u %a' "$HOME"; echo "$USER"; ls ..`, nil))
	if want := "65534\n65534\n65534 700\nnobody\n"; res.StdoutTail != want || res.ExitCode == 0 {
		t.Errorf("stdout %q (exit %d), want %q and ls failing", res.StdoutTail, res.ExitCode, want)
	}
	if want := "ls: cannot open directory '..': Permission denied\n"; res.StderrTail != want {
		t.Errorf("stderr %q, want %q", res.StderrTail, want)
	}
	if st, err := os.Stat(work); err != nil || st.Mode().Perm() != 0o711 {
		t.Errorf("work directory: %v %v, want mode 0711", st.Mode(), err)
	}
}

// TestProcessRunnerUnrunnablePayload: a payload that is not a command
// (empty, not JSON, no argv) can never run: Start's error wraps
// ErrUnrunnable, so the job ends failed with no retry, while a command
// that cannot start here (a missing program) is an ordinary failure.
func TestProcessRunnerUnrunnablePayload(t *testing.T) {
	root := t.TempDir()
	r, err := NewProcessRunner(ProcessConfig{LogDir: filepath.Join(root, "logs"), WorkDir: filepath.Join(root, "work"), WorkerID: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, payload := range []string{"", "hello", `{"argv":[]}`} {
		if _, err := r.Start(&pb.Assign{Job: 4, Attempt: 1, Tenant: "acme", Payload: []byte(payload)}); !errors.Is(err, ErrUnrunnable) {
			t.Errorf("payload %q: %v, want ErrUnrunnable", payload, err)
		}
	}
	// The job's stderr tail says what is wrong, once, in one sentence.
	_, err = r.Start(&pb.Assign{Job: 4, Attempt: 1, Tenant: "acme"})
	if want := `job 4: payload: empty, so there is no argv to run: a command worker runs {"argv": ["PROGRAM", "ARG", ...], "env": {...}, "dir": "..."} (barista submit -- PROGRAM ARG... builds it) (the job can never run)`; err == nil || err.Error() != want {
		t.Errorf("an empty payload: %v\nwant %s", err, want)
	}
	missing, _ := runner.EncodePayload(runner.Spec{Argv: []string{"/nonexistent/program"}})
	run, err := r.Start(&pb.Assign{Job: 5, Attempt: 1, Tenant: "acme", Payload: missing})
	if errors.Is(err, ErrUnrunnable) {
		t.Fatalf("a program missing on this worker is not unrunnable everywhere: %v", err)
	}
	if run != nil {
		run.Kill()
		<-run.Done()
	}
}
