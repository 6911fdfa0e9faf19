package test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/test/cluster"
)

// readmeBlock returns the shell block of README.md between the markers
// <!-- NAME: begin ... --> and <!-- NAME: end -->, as written.
func readmeBlock(t *testing.T, name string) (script, root string) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "<!-- "+name+": begin")
	j := strings.Index(s, "<!-- "+name+": end -->")
	if i < 0 || j < i {
		t.Fatalf("README.md has no %s block", name)
	}
	block := s[i:j]
	start := strings.Index(block, "```sh\n")
	end := strings.LastIndex(block, "```")
	if start < 0 || end <= start {
		t.Fatalf("the %s block of README.md is not a ```sh block", name)
	}
	return block[start+len("```sh\n") : end], root
}

// runReadme runs a README block with bash in the repository root, in a
// process group of its own, with its output in files (background servers
// keep no pipe open). It returns the output; every process the block left
// running is stopped by process group when the test ends.
func runReadme(t *testing.T, name string, timeout time.Duration) (out, errOut string) {
	t.Helper()
	script, root := readmeBlock(t, name)
	dir := t.TempDir()
	outPath, errPath := filepath.Join(dir, "stdout"), filepath.Join(dir, "stderr")
	of, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	ef, err := os.Create(errPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-e", "-c", script)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "TMPDIR="+dir)
	cmd.Stdout, cmd.Stderr = of, ef
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { stopGroup(t, pgid) })
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	read := func() (string, string) {
		o, _ := os.ReadFile(outPath)
		e, _ := os.ReadFile(errPath)
		return string(o), string(e)
	}
	select {
	case err := <-done:
		of.Close()
		ef.Close()
		out, errOut = read()
		if err != nil {
			t.Fatalf("the README's %s block failed: %v\nstdout:\n%s\nstderr:\n%s", name, err, out, errOut)
		}
	case <-time.After(timeout):
		out, errOut = read()
		t.Fatalf("the README's %s block did not finish within %s\nstdout:\n%s\nstderr:\n%s", name, timeout, out, errOut)
	}
	return out, errOut
}

// stopGroup ends every process of a process group: SIGTERM, then SIGKILL
// after 15 s.
func stopGroup(t *testing.T, pgid int) {
	if syscall.Kill(-pgid, syscall.SIGTERM) != nil {
		return // none left
	}
	deadline := time.Now().Add(15 * time.Second)
	for syscall.Kill(-pgid, 0) == nil {
		if time.Now().After(deadline) {
			t.Logf("process group %d did not stop within 15 s: killing it", pgid)
			syscall.Kill(-pgid, syscall.SIGKILL)
			deadline = time.Now().Add(time.Hour)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReadmeTryIt runs the README's "Try it" block as written.
func TestReadmeTryIt(t *testing.T) {
	out, _ := runReadme(t, "try-it", 3*time.Minute)
	for _, want := range []string{"dispatch 1 tenant=gold job=1 size=md start=0\n", "dispatch 2 tenant=free job=21 size=md start=0\n", "\nhash="} {
		if !strings.Contains(out, want) {
			t.Fatalf("the replay printed no %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "tenant=gold"); n != 16 {
		t.Fatalf("%d gold dispatches, want 16 of 18:\n%s", n, out)
	}
}

// TestReadmeByHand runs the README's "By hand" block as written: three
// servers, a worker, a tenant, a job watched to its end. Then the three
// nodes are voters with the same applied index and state hash.
func TestReadmeByHand(t *testing.T) {
	for _, p := range []int{7400, 7401, 7402, 7440, 7441, 7442, 7480, 7481, 7482} {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("the README's ports must be free for this test: %v", err)
		}
		l.Close()
	}
	out, errOut := runReadme(t, "by-hand", 3*time.Minute)
	t.Logf("stdout:\n%s\nstderr:\n%s", out, errOut)
	// watch --job 1 printed the job's life and ended with it.
	var kinds []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 5 && strings.HasPrefix(f[2], "job=1") {
			kinds = append(kinds, f[4])
		}
	}
	if got := strings.Join(kinds, " "); got != "queued assigned started completed" {
		t.Fatalf("watch --job 1 printed %q, want the job's four events", got)
	}
	if n := strings.Count(out, "follower") + strings.Count(out, "leader "); n < 3 {
		t.Fatalf("list-peers does not show three members:\n%s", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var index uint64
	var hash string
	deadline := time.Now().Add(30 * time.Second)
	for {
		same, voters := true, 0
		index, hash = 0, ""
		for i, addr := range []string{"127.0.0.1:7400", "127.0.0.1:7401", "127.0.0.1:7402"} {
			cc := cluster.Dial(t, addr, "", nil)
			st, err := clusterpb.NewNodeClient(cc).Status(ctx, &clusterpb.StatusRequest{})
			if err != nil {
				same = false
				break
			}
			peers, err := clusterpb.NewNodeClient(cc).ListPeers(ctx, &clusterpb.ListPeersRequest{})
			if err == nil && i == 0 {
				for _, p := range peers.Peers {
					if p.Voter {
						voters++
					}
				}
			}
			if i == 0 {
				index, hash = st.AppliedIndex, st.StateHash
			} else if st.AppliedIndex != index || st.StateHash != hash {
				same = false
			}
		}
		if same && voters == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the three nodes are not three voters with one state (voters %d)", voters)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("three voters at index %d, state hash %s", index, hash)
}

// TestServerPortInUse: a server that cannot bind one of its ports exits at
// once, and the one line it prints names the flag.
func TestServerPortInUse(t *testing.T) {
	c := cluster.New(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	n := c.Add("n1")
	n.HTTPAddr = busy.Addr().String()
	n.Start("--bootstrap")
	err, exited := n.Wait(20 * time.Second)
	var ee *exec.ExitError
	if !exited || !errors.As(err, &ee) {
		t.Fatalf("the server did not exit (exited %v, err %v)", exited, err)
	}
	log := strings.TrimSpace(n.Log())
	lines := strings.Split(log, "\n")
	want := fmt.Sprintf("cannot listen on --http-addr %s: bind: address already in use", n.HTTPAddr)
	// The harness writes its own "==== start" line first.
	if len(lines) != 2 || lines[1] != want {
		t.Fatalf("the server printed:\n%s\nwant only:\n%s", log, want)
	}
	if entries, _ := os.ReadDir(n.DataDir); len(entries) != 0 {
		t.Fatalf("the refused server wrote %d files in its data directory", len(entries))
	}
}
