package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestWorkerTokenFile: --token-file reads the token from a file only its
// owner may read; a file others may read, an empty one, a directory, and
// --token beside it are refused before anything connects, naming the
// flag and the fix.
func TestWorkerTokenFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "worker-secret-0001\n", 0o600)
	readOnly := write("ro", "worker-secret-0002", 0o400)
	open := write("open", "worker-secret-0003\n", 0o644)
	group := write("group", "worker-secret-0004\n", 0o640)
	empty := write("empty", "\n", 0o600)
	two := write("two", "a b\n", 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--token-file", open}, "--token-file: " + open + " has mode 0644: other users may read it; want 0600 or 0400 (chmod 600 " + open + ")"},
		{[]string{"--token-file", group}, "--token-file: " + group + " has mode 0640: other users may read it; want 0600 or 0400 (chmod 600 " + group + ")"},
		{[]string{"--token-file", empty}, "--token-file: " + empty + " is empty"},
		{[]string{"--token-file", two}, "--token-file: " + two + " holds more than one line or word: want the secret alone"},
		{[]string{"--token-file", dir}, "--token-file: " + dir + " is not a regular file"},
		{[]string{"--token-file", filepath.Join(dir, "missing")}, "--token-file: open " + filepath.Join(dir, "missing") + ": no such file or directory"},
		{[]string{"--token-file", good, "--token", "x"}, "--token and --token-file exclude each other"},
	} {
		var out, errOut bytes.Buffer
		code := Run(append([]string{"worker", "--size", "sm", "--server", "10.0.0.1:7400", "--log-level", "error"}, tc.args...), &out, &errOut)
		if code != 2 || !strings.HasPrefix(errOut.String(), tc.want+"\n") {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, errOut.String(), tc.want)
		}
	}
	for path, want := range map[string]string{good: "worker-secret-0001", readOnly: "worker-secret-0002"} {
		o := &workerOpts{tokenFile: path}
		o.servers = "10.0.0.1:7400"
		if tok, err := o.workerToken(hclog.NewNullLogger()); err != nil || tok != want {
			t.Errorf("%s: %q, %v; want %q", path, tok, err, want)
		}
	}
}

// TestWorkerTokenWarnings: a token from --token or $BARISTA_TOKEN works,
// with a warning naming its source when a server is not on loopback;
// --token-file wins over $BARISTA_TOKEN, saying so.
func TestWorkerTokenWarnings(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("from-the-file-0001"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		servers   string
		flag, env bool
		file      string
		want      string
		warning   string
	}{
		{"127.0.0.1:7400,[::1]:7400,localhost:7400", true, false, "", "secret-0001", ""},
		{"127.0.0.1:7400,10.0.0.2:7400", true, false, "", "secret-0001", "the worker token is on the command line, which every user of this machine can read (ps, /proc/PID/cmdline): use --token-file with a file of mode 0600 (docs/workers.md)"},
		{"10.0.0.2:7400", false, true, "", "secret-0001", "the worker token comes from $BARISTA_TOKEN: an environment is easily handed on (to child processes, to dumps, to whoever can read the unit or container spec); use --token-file with a file of mode 0600 (docs/workers.md)"},
		{"10.0.0.2:7400", false, true, file, "from-the-file-0001", "$BARISTA_TOKEN is set but --token-file wins: remove the token from the environment"},
		{"10.0.0.2:7400", false, false, file, "from-the-file-0001", ""},
	} {
		env := ""
		if tc.env {
			env = "secret-0001"
		}
		t.Setenv("BARISTA_TOKEN", env)
		o := &workerOpts{tokenFile: tc.file, tokenFlag: tc.flag}
		o.servers = tc.servers
		if tc.flag || tc.env {
			o.token = "secret-0001"
		}
		var logs bytes.Buffer
		log := hclog.New(&hclog.LoggerOptions{Output: &logs, DisableTime: true})
		tok, err := o.workerToken(log)
		if err != nil || tok != tc.want {
			t.Errorf("%+v: %q, %v", tc, tok, err)
		}
		want := ""
		if tc.warning != "" {
			want = "[WARN]  " + tc.warning + "\n"
		}
		if logs.String() != want {
			t.Errorf("%+v: logged %q, want %q", tc, logs.String(), want)
		}
	}
}

// TestWorkerRefusesUnsafeSetups: the worker's refusals of a job user, a
// log or work directory name the flag: a log directory other users may
// enter, an unknown user, root as the job user (as root), and --run-as
// without root (otherwise), and --job-env of barista's own variables.
func TestWorkerRefusesUnsafeSetups(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	runAsRoot := "--run-as: user root (uid 0) is root: name an unprivileged user for the jobs"
	if os.Geteuid() != 0 {
		runAsRoot = "--run-as: running jobs as user root (uid 0) needs the worker to run as root (it runs as uid " + strconv.Itoa(os.Geteuid()) + ")"
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--log-dir", open, "--work-dir", work}, "--log-dir: " + open + " has mode 0755, which lets other users in: want 0700 (chmod 700 " + open + ")"},
		{[]string{"--log-dir", filepath.Join(dir, "logs"), "--work-dir", open}, "--work-dir: " + open + " has mode 0755, which lets other users in: want 0700 (chmod 700 " + open + ")"},
		{[]string{"--run-as", "no-such-user-barista", "--work-dir", work}, `--run-as: no user "no-such-user-barista" on this machine`},
		{[]string{"--run-as", "root", "--log-dir", filepath.Join(dir, "logs"), "--work-dir", work}, runAsRoot},
		{[]string{"--job-env", "BARISTA_TOKEN", "--work-dir", work}, "--job-env: BARISTA_TOKEN: barista's own variables are never passed to jobs (the worker sets BARISTA_JOB_ID and the like itself)"},
	} {
		var out, errOut bytes.Buffer
		code := Run(append([]string{"worker", "--size", "sm", "--server", "127.0.0.1:1", "--log-level", "error"}, tc.args...), &out, &errOut)
		if code != 2 || !strings.HasPrefix(errOut.String(), tc.want+"\n") {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, errOut.String(), tc.want)
		}
	}
}
