package test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/test/cluster"
)

// readyz returns /readyz's status code and body.
func readyz(t *testing.T, httpAddr string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s (last: %s)", what, timeout, last)
}

// waitLogged waits until p's log holds text (the end of the log says
// why not).
func waitLogged(t *testing.T, timeout time.Duration, what string, p interface{ Log() string }, text string) {
	t.Helper()
	waitFor(t, timeout, what, func() (bool, string) {
		log := p.Log()
		return strings.Contains(log, text), tail(log)
	})
}

// goldTenants creates (or sets) each named tenant at tier gold.
func goldTenants(t *testing.T, ctx context.Context, admin pb.AdminClient, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := admin.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: n, Tier: pb.Tier_GOLD.Enum()}); err != nil {
			t.Fatal(err)
		}
	}
}

// keyedLoad starts clients goroutines; each calls submit with its number,
// a sequence number from 0 and the key "cCLIENT-SEQ", until stop is
// closed or submit returns false. Wait on the group it returns.
func keyedLoad(clients int, stop <-chan struct{}, submit func(cl, i int, key string) bool) *sync.WaitGroup {
	var wg sync.WaitGroup
	for cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if !submit(cl, i, fmt.Sprintf("c%d-%d", cl, i)) {
					return
				}
			}
		}()
	}
	return &wg
}

// smallDisk mounts a tmpfs of size bytes at a new directory that outlives
// the cluster's processes (cleanups run last-registered first). It skips
// the test where mounting is not allowed.
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// fill writes a file until the file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
}

// TestFollowerWithFullDiskNotReady: a follower whose disk is full cannot
// store what the leader sends, yet still answers heartbeats. It must say
// it is not ready (/readyz, gRPC health), its stale reads must say how far
// behind they are, and it must catch up once space is back.
func TestFollowerWithFullDiskNotReady(t *testing.T) {
	disk := smallDisk(t, 16<<20)
	c := cluster.New(t)
	c.BootWith(3, func(_ int, n *cluster.Node) {
		if n.ID == "n3" {
			n.DataDir = filepath.Join(disk, "n3")
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := c.Apply(ctx, tenantCmd("acme", pb.Tier_GOLD, 0)); err != nil {
		t.Fatal(err)
	}
	c.WaitConverged(30 * time.Second)
	n3 := c.Nodes[2]
	waitFor(t, 20*time.Second, "n3 ready", func() (bool, string) {
		code, body := readyz(t, n3.HTTPAddr)
		return code == 200 && body == "ready", fmt.Sprint(code, " ", body)
	})
	health := func() healthpb.HealthCheckResponse_ServingStatus {
		hctx, hcancel := context.WithTimeout(ctx, 5*time.Second)
		defer hcancel()
		r, err := healthpb.NewHealthClient(n3.Conn()).Check(hctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return healthpb.HealthCheckResponse_UNKNOWN
		}
		return r.Status
	}
	waitFor(t, 10*time.Second, "n3 gRPC health SERVING", func() (bool, string) {
		st := health()
		return st == healthpb.HealthCheckResponse_SERVING, st.String()
	})

	fill(t, filepath.Join(disk, "filler"))
	leader := c.WaitLeader(10 * time.Second)
	if leader == n3 {
		t.Fatal("n3 leads; the test needs it to follow")
	}
	// Entries of about 2 KiB each: n3 can store none of them.
	payload := strings.Repeat("x", 2048)
	const writes = 300
	for i := range writes {
		cmd := &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "acme", IdempotencyKey: fmt.Sprintf("k%d", i),
			Size: pb.Size_SM, EstCostMs: 1000, Payload: []byte(payload)}}}
		actx, acancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := leader.Client().Apply(actx, &clusterpb.ApplyRequest{Commands: []*clusterpb.Command{cmd}})
		acancel()
		if err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
	}
	waitFor(t, 30*time.Second, "n3 not ready", func() (bool, string) {
		code, body := readyz(t, n3.HTTPAddr)
		return code == 503 && strings.Contains(body, "cannot write the Raft log"), fmt.Sprint(code, " ", body)
	})
	waitFor(t, 10*time.Second, "n3 gRPC health NOT_SERVING", func() (bool, string) {
		st := health()
		return st == healthpb.HealthCheckResponse_NOT_SERVING, st.String()
	})

	// A stale read on n3 says how far behind it is: exactly the leader's
	// commit index minus what n3 applied, once the leader's retries have
	// told n3 the latest commit index.
	lst, err := leader.Status()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "stale read headers", func() (bool, string) {
		var md metadata.MD
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		defer rcancel()
		_, err := pb.NewClientClient(n3.Conn()).ListJobs(rctx, &pb.ListJobsRequest{Tenant: "acme", Read: &pb.ReadOptions{Stale: true}}, grpc.Header(&md))
		if err != nil {
			return false, err.Error()
		}
		applied, _ := strconv.ParseUint(first(md.Get("x-barista-applied-index")), 10, 64)
		behind, _ := strconv.ParseUint(first(md.Get("x-barista-behind-entries")), 10, 64)
		ms, _ := strconv.ParseInt(first(md.Get("x-barista-behind-ms")), 10, 64)
		ok := applied > 0 && applied+behind == lst.CommitIndex && behind >= writes && ms > 0 && first(md.Get("x-barista-node")) == "n3"
		return ok, fmt.Sprintf("headers %v, leader commit %d", md, lst.CommitIndex)
	})
	// The CLI shows it too.
	_, errOut, err := c.Run("jobs", "--server", n3.GRPCAddr, "--tenant", "acme", "--stale")
	if err != nil || !strings.Contains(errOut, "stale read from n3") || !strings.Contains(errOut, "entries") {
		t.Fatalf("barista jobs --stale: err %v, stderr %q", err, errOut)
	}

	// Space back: n3 catches up and is ready again.
	if err := os.Remove(filepath.Join(disk, "filler")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "n3 ready again", func() (bool, string) {
		code, body := readyz(t, n3.HTTPAddr)
		return code == 200, fmt.Sprint(code, " ", body)
	})
	c.WaitConverged(60 * time.Second)
	waitFor(t, 10*time.Second, "n3 gRPC health SERVING again", func() (bool, string) {
		st := health()
		return st == healthpb.HealthCheckResponse_SERVING, st.String()
	})
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}
