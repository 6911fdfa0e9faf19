package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// checkCommandLine fails the test if args (a barista command line without
// the program: "server --node-id=..." or "worker ...") names a command or a
// flag that barista does not have, or a value its flag refuses. $(VAR),
// ${VAR} and systemd's %x specifiers are filled with a stand-in first.
func checkCommandLine(t *testing.T, where string, args []string) {
	t.Helper()
	if len(args) == 0 {
		t.Errorf("%s: no barista command", where)
		return
	}
	path, rest := args[0], args[1:]
	for len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		if _, ok := commands[path+" "+rest[0]]; !ok {
			break
		}
		path, rest = path+" "+rest[0], rest[1:]
	}
	c, ok := commands[path]
	if !ok {
		t.Errorf("%s: barista has no command %q", where, path)
		return
	}
	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.flags(fs)
	var filled []string
	for _, a := range rest {
		for _, v := range []string{"$(POD_NAME)", "${BARISTA_ADDR}", "%H", "%i"} {
			stand := map[string]string{"%i": "md"}[v]
			if stand == "" {
				stand = "host-1"
			}
			a = strings.ReplaceAll(a, v, stand)
		}
		filled = append(filled, a)
	}
	if err := fs.Parse(filled); err != nil && !errors.Is(err, flag.ErrHelp) {
		t.Errorf("%s: barista %s: %s", where, path, flagError(err))
	}
	if fs.NArg() > 0 && path != "worker" {
		t.Errorf("%s: barista %s: unexpected argument %q", where, path, fs.Arg(0))
	}
}

// deployLine is a barista command line found in deploy/ or the Dockerfile.
type deployLine struct {
	where string
	args  []string
}

// deployCommandLines returns every barista command line of the
// Kubernetes manifests, the systemd units and the Dockerfile.
func deployCommandLines(t *testing.T) []deployLine {
	t.Helper()
	manifests, _ := filepath.Glob("../../deploy/kubernetes/*.yaml")
	units, _ := filepath.Glob("../../deploy/systemd/*.service")
	if len(manifests) < 2 || len(units) < 2 {
		t.Fatalf("deploy files missing: %v %v", manifests, units)
	}
	var out []deployLine
	for _, m := range manifests {
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var doc map[string]any
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", m, err)
			}
			for _, args := range containerArgs(doc) {
				out = append(out, deployLine{filepath.Base(m), args})
			}
		}
	}
	for _, u := range units {
		f, err := os.Open(u)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "ExecStart="); ok {
				fields := strings.Fields(line)
				if len(fields) == 0 || filepath.Base(fields[0]) != "barista" {
					t.Errorf("%s: ExecStart is not barista: %q", u, line)
					continue
				}
				out = append(out, deployLine{filepath.Base(u), fields[1:]})
			}
		}
		f.Close()
	}
	df, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(df), "\n") {
		if rest, ok := strings.CutPrefix(line, "CMD "); ok {
			var args []string
			if err := yaml.Unmarshal([]byte(rest), &args); err != nil {
				t.Fatalf("Dockerfile: %q: %v", line, err)
			}
			out = append(out, deployLine{"Dockerfile", args})
		}
	}
	return out
}

// TestDeployFilesMatchTheCLI: every command line in deploy/ (Kubernetes
// manifests, systemd units, the Dockerfile) uses commands and flags that
// barista has, and the example configuration file loads, so that they
// cannot rot.
func TestDeployFilesMatchTheCLI(t *testing.T) {
	lines := deployCommandLines(t)
	for _, l := range lines {
		checkCommandLine(t, l.where, l.args)
	}
	if len(lines) < 8 {
		t.Fatalf("only %d barista command lines found in deploy/", len(lines))
	}
	if _, err := loadConfigFile("../../deploy/systemd/server.toml"); err != nil {
		t.Fatalf("deploy/systemd/server.toml: %v", err)
	}
}

// TestDeployWorkersKeepTheirToken: every worker of deploy/ reads its token
// from a file (--token-file) and runs its jobs as another user
// (--run-as), and no deploy file hands a worker its token in the
// environment.
func TestDeployWorkersKeepTheirToken(t *testing.T) {
	workers := 0
	for _, l := range deployCommandLines(t) {
		if len(l.args) < 2 || l.args[0] != "worker" || l.args[1] == "--help" {
			continue
		}
		workers++
		joined := " " + strings.Join(l.args, " ")
		for _, want := range []string{" --token-file", " --run-as"} {
			if !strings.Contains(joined, want) {
				t.Errorf("%s: worker %q has no %s", l.where, strings.TrimSpace(joined), strings.TrimSpace(want))
			}
		}
		if strings.Contains(joined, " --token ") || strings.Contains(joined, " --token=") {
			t.Errorf("%s: worker %q has its token on the command line", l.where, strings.TrimSpace(joined))
		}
	}
	if workers < 4 {
		t.Fatalf("only %d worker command lines found in deploy/", workers)
	}
	files, _ := filepath.Glob("../../deploy/*/*")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "BARISTA_TOKEN") && !strings.Contains(line, "BARISTA_TOKENS") {
				t.Errorf("%s:%d: %q: a worker's token belongs in its --token-file", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}

// containerArgs returns the args of every container of a workload.
func containerArgs(doc map[string]any) [][]string {
	get := func(m any, key string) any {
		if mm, ok := m.(map[string]any); ok {
			return mm[key]
		}
		return nil
	}
	var out [][]string
	pod := get(get(doc, "spec"), "template")
	for _, c := range asList(get(get(pod, "spec"), "containers")) {
		var args []string
		for _, a := range asList(get(c, "args")) {
			args = append(args, a.(string))
		}
		out = append(out, args)
	}
	return out
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// TestSecretsNameTheirFiles: the commands that make the Kubernetes
// Secrets name each file (a whole directory would take whatever else is
// in it), and a worker token's prefix binding carries its "*" in the
// command itself.
func TestSecretsNameTheirFiles(t *testing.T) {
	for _, path := range []string{"../../docs/deploy.md", "../../deploy/kubernetes/secrets.example.yaml"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, line := range strings.Split(text, "\n") {
			if i := strings.Index(line, "--from-file="); i >= 0 && strings.HasSuffix(strings.Fields(line[i:])[0], "/") {
				t.Errorf("%s: a Secret made from a whole directory: %q", path, strings.TrimSpace(line))
			}
			if strings.Contains(line, "worker:barista-worker-") && !strings.Contains(line, "worker:barista-worker-*=") {
				t.Errorf("%s: a worker token binding without its \"*\": %q", path, strings.TrimSpace(line))
			}
		}
		if !strings.Contains(text, "--from-file=tls/webhook.key") || !strings.Contains(text, "--from-file=tls/ca.pem") {
			t.Errorf("%s: the barista-tls Secret does not name ca.pem and webhook.key", path)
		}
	}
}
