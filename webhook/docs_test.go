package webhook

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDocsReceiverExample builds the receiver example of docs/webhooks.md
// and sends it requests as the leader would: a signed one is accepted, a
// repeat of it is not handled twice, a request signed with the previous
// and the current secret (a rotation) is accepted, and a tampered, a
// stale or a wrongly signed one is refused.
func TestDocsReceiverExample(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	doc, err := os.ReadFile("../docs/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok1 := strings.Cut(string(doc), "<!-- receiver example: begin -->\n```go\n")
	code, _, ok2 := strings.Cut(rest, "```\n<!-- receiver example: end -->")
	if !ok1 || !ok2 {
		t.Fatal("docs/webhooks.md has no receiver example between its markers")
	}
	dir := t.TempDir()
	for name, body := range map[string]string{"main.go": code, "go.mod": "module receiver\n\ngo 1.22\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command("go", "build", "-o", "receiver", ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("the example does not build: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	key := Key(testKey)
	secret, old := key.Secret(3, "acme", 2), key.Secret(3, "acme", 1)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "receiver"))
	cmd.Env = append(os.Environ(), "WEBHOOK_SECRET="+secret, "ADDR="+addr)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); cmd.Wait() }() // the context kills it
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	url := "http://" + addr + "/barista"
	post := func(header string, body string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set(SignatureHeader, header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the example does not listen")
		}
		time.Sleep(10 * time.Millisecond)
	}
	now := time.Now().UnixMilli()
	body := func(seqs ...uint64) string {
		p := Payload{}
		for _, s := range seqs {
			p.Events = append(p.Events, Event{Seq: s, JobID: 9, Tenant: "acme", Kind: "completed", Attempt: 1, AtMs: now})
		}
		b, _ := p.Marshal()
		return string(b)
	}
	b1, b2 := body(5, 6), body(6, 7)
	for i, c := range []struct {
		header, body string
		want         int
	}{
		{Header(now, []byte(b1), secret), b1, 204},
		{Header(now, []byte(b1), secret), b1, 204},                   // repeated: handled once
		{Header(now, []byte(b2), secret, old), b2, 204},              // both secrets (a rotation)
		{Header(now, []byte(b1), secret), b2, 401},                   // tampered
		{Header(now-6*60*1000, []byte(b1), secret), b1, 401},         // older than five minutes
		{Header(now, []byte(b1), key.Secret(3, "acme", 3)), b1, 401}, // another secret
		{"t=" + fmt.Sprint(now), b1, 401},                            // no signature
	} {
		if got := post(c.header, c.body); got != c.want {
			t.Errorf("request %d: status %d, want %d", i, got, c.want)
		}
	}
	var handled []string
	for len(handled) < 3 {
		select {
		case l := <-lines:
			handled = append(handled, l)
		case <-time.After(10 * time.Second):
			t.Fatalf("handled %q", handled)
		}
	}
	want := []string{"event 5: job 9 completed (attempt 1)", "event 6: job 9 completed (attempt 1)", "event 7: job 9 completed (attempt 1)"}
	if strings.Join(handled, "\n") != strings.Join(want, "\n") {
		t.Fatalf("handled\n%s\nwant\n%s", strings.Join(handled, "\n"), strings.Join(want, "\n"))
	}
	select {
	case l := <-lines:
		t.Fatalf("handled more: %q", l)
	default:
	}
}
