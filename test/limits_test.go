package test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// procStatusKB reads a field of /proc/PID/status given in kB (VmRSS,
// VmHWM).
func procStatusKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("/proc/%d/status %s: %v", pid, field, err)
			}
			return kb
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}

// chunkedPost sends a chunked POST of size bytes of JSON to path
// (header: extra header lines) and returns the status line of the
// answer. It reads while it writes, as a client that expects an early
// answer does, and stops writing once the answer came or the server
// closed the connection.
func chunkedPost(addr, path, header string, size int) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Minute))
	answered := make(chan struct{})
	var status string
	var readErr error
	go func() {
		defer close(answered)
		status, readErr = bufio.NewReader(conn).ReadString('\n')
	}()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n%s\r\n", path, addr, header)
	chunk := []byte(strings.Repeat("A", 64<<10))
	body := []byte(`{"size":"SM","est_cost_ms":"1000","payload":"`)
	for sent := 0; sent < size; sent += len(chunk) {
		select {
		case <-answered:
			return strings.TrimSpace(status), readErr
		default:
		}
		if len(body) > 0 {
			if _, err := fmt.Fprintf(conn, "%x\r\n%s\r\n", len(body), body); err != nil {
				break
			}
			body = nil
		}
		if _, err := fmt.Fprintf(conn, "%x\r\n%s\r\n", len(chunk), chunk); err != nil {
			break
		}
	}
	fmt.Fprintf(conn, "2\r\n\"}\r\n0\r\n\r\n")
	<-answered
	return strings.TrimSpace(status), readErr
}

// TestGatewayReadsNoBodyBeforeToken: 40 concurrent chunked POSTs of 8 MB
// to /v1/jobs without a token, or with an unknown one, are each answered
// 401 without the body being read, and the server's resident memory
// stays within 32 MiB of what it was before (reading them took a node
// from 25 MB to 825 MB, and each was answered 429).
func TestGatewayReadsNoBodyBeforeToken(t *testing.T) {
	c := startWithTokens(t, 1, "")
	n := c.Nodes[0]
	pid := n.PID()
	before := procStatusKB(t, pid, "VmRSS")
	const posts, size = 40, 8_000_000
	var wg sync.WaitGroup
	answers := make([]string, posts)
	for i := range posts {
		header := ""
		if i%2 == 1 {
			header = "Authorization: Bearer not-a-token-000000000\r\n"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, err := chunkedPost(n.HTTPAddr, "/v1/jobs", header, size)
			if err != nil {
				status += " (" + err.Error() + ")"
			}
			answers[i] = status
		}()
	}
	wg.Wait()
	for i, a := range answers {
		if a != "HTTP/1.1 401 Unauthorized" {
			t.Errorf("POST %d: %q, want HTTP/1.1 401 Unauthorized", i, a)
		}
	}
	peak := procStatusKB(t, pid, "VmHWM")
	t.Logf("resident before %d kB, peak %d kB", before, peak)
	if grew := peak - before; grew > 32<<10 {
		t.Errorf("resident memory grew by %d kB under the posts (peak %d kB, before %d kB); want at most %d kB", grew, peak, before, 32<<10)
	}
	// The node still serves.
	a := api{t: t, client: &http.Client{Timeout: 10 * time.Second}, base: "http://" + n.HTTPAddr}
	a.expect("a submit with the token", a.do("POST", "/v1/jobs", adminToken, `{"tenant":"nobody","size":"SM","est_cost_ms":"1000"}`),
		404, "NOT_FOUND", `tenant: "nobody" not found`)
}
