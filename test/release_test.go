package test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baristahq/barista/internal/proc"
	"github.com/baristahq/barista/internal/version"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/test/cluster"
)

// TestReleaseArtifacts checks a release directory that make dist made
// ($BARISTA_DIST; make dist-check runs it, with BARISTA_BIN the release's
// linux binary of this machine): every artifact matches SHA256SUMS and
// MANIFEST.json, which name this source's version; the release's binary
// says it; the Python wheel installs offline (pip --no-index) into a fresh
// virtual environment that sees Debian's grpcio and protobuf
// (--system-site-packages), and examples/python-worker, run by that
// environment's python (not from this checkout), completes a job on a
// cluster of the release's binary.
func TestReleaseArtifacts(t *testing.T) {
	dir := os.Getenv("BARISTA_DIST")
	if dir == "" {
		t.Skip("BARISTA_DIST is not set: make dist-check runs this test on the release it builds")
	}
	var manifest struct {
		Version, Commit string
		Artifacts       []struct {
			Name, SHA256 string
			Size         int64
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "MANIFEST.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &manifest); err != nil {
		t.Fatal(err)
	}
	if manifest.Version != version.Version || len(manifest.Artifacts) != 5 {
		t.Fatalf("MANIFEST.json: version %q, %d artifacts (want %s, 5)", manifest.Version, len(manifest.Artifacts), version.Version)
	}
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	var wheel string
	for _, a := range manifest.Artifacts {
		data, err := os.ReadFile(filepath.Join(dir, a.Name))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != a.SHA256 || int64(len(data)) != a.Size ||
			!strings.Contains(string(sums), got+"  "+a.Name+"\n") {
			t.Errorf("%s: sha256 %s, %d bytes; the manifest says %s, %d bytes; SHA256SUMS:\n%s", a.Name, got, len(data), a.SHA256, a.Size, sums)
		}
		if strings.HasSuffix(a.Name, ".whl") {
			wheel = filepath.Join(dir, a.Name)
		}
	}

	bin := cluster.Binary(t)
	out, err := exec.Command(bin, "version").Output()
	if want := "barista " + version.Version + " (commit " + manifest.Commit + ", "; err != nil || !strings.HasPrefix(string(out), want) {
		t.Fatalf("%s version: %v %q, want %q...", bin, err, out, want)
	}

	// The wheel, offline, into a fresh environment.
	py := "/usr/bin/python3"
	env := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command(py, "-m", "venv", "--system-site-packages", env).CombinedOutput(); err != nil {
		t.Fatalf("python3 -m venv: %v\n%s", err, out)
	}
	vpy := filepath.Join(env, "bin", "python")
	if out, err := exec.Command(vpy, "-m", "pip", "install", "--no-index", "--no-deps", "--disable-pip-version-check", wheel).CombinedOutput(); err != nil {
		t.Fatalf("pip install %s: %v\n%s", wheel, err, out)
	}

	c := cluster.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Apply(ctx, tenantCmd("acme", pb.Tier_GOLD, 0)); err != nil {
		t.Fatal(err)
	}
	example, err := filepath.Abs("../examples/python-worker")
	if err != nil {
		t.Fatal(err)
	}
	clean := []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()} // no PYTHONPATH: barista comes from the venv
	var w proc.Process
	var procs proc.Set
	defer func() { procs.KillAll(); w.Wait(10 * time.Second) }()
	cmd := exec.Command(vpy, filepath.Join(example, "worker.py"), "--server", c.Servers(), "--id", "release-py")
	cmd.Env, cmd.Dir = clean, t.TempDir()
	logPath := filepath.Join(t.TempDir(), "worker.log")
	w.LogPath = logPath
	if err := w.Start(cmd, false, &procs); err != nil {
		t.Fatal(err)
	}
	sub := exec.CommandContext(ctx, vpy, filepath.Join(example, "submit.py"), "--server", c.Servers(), "--tenant", "acme", "one two three")
	sub.Env, sub.Dir = clean, t.TempDir()
	got, err := sub.Output()
	lines := strings.Split(strings.TrimSpace(string(got)), "\n")
	if err != nil || lines[len(lines)-1] != `{"words": 3, "lines": 1}` {
		t.Fatalf("submit.py: %v\n%s\nworker log:\n%s", err, got, cluster.Tail(logPath, 40))
	}
	t.Logf("the release's wheel (%s) ran a job on the release's binary:\n%s", filepath.Base(wheel), got)
}
