package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/test/cluster"
)

// TestListJobsWithLargePayloads: five jobs of 0.9 MiB each (4.5 MiB of
// payload) are more than one 4 MiB gRPC message. `barista jobs` lists them
// through the leader and through a follower (whose forwarding connection
// carries the reply), without payloads. With include_payload the pages
// stop before 3 MiB and, following the tokens, return every job exactly
// once with its payload; GetJob returns the payload too.
func TestListJobsWithLargePayloads(t *testing.T) {
	c := cluster.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	leader := c.WaitLeader(20 * time.Second)
	follower := c.Followers(leader)[0]
	if _, err := pb.NewAdminClient(leader.Conn()).UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "acme", Tier: pb.Tier_GOLD.Enum()}); err != nil {
		t.Fatal(err)
	}
	const n, size = 5, 9 << 20 / 10
	payloads := map[uint64][]byte{}
	client := pb.NewClientClient(leader.Conn())
	for i := range n {
		p := bytes.Repeat([]byte{byte('a' + i)}, size)
		r, err := client.Submit(ctx, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1000, Payload: p})
		if err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
		payloads[r.JobId] = p
	}
	c.WaitConverged(60 * time.Second)
	for _, node := range []*cluster.Node{leader, follower} {
		out, errOut, err := c.Run("jobs", "--server", node.GRPCAddr, "--tenant", "acme", "--json", "--oldest-first")
		if err != nil {
			t.Fatalf("barista jobs via %s: %v: %s", node.ID, err, errOut)
		}
		var ids []uint64
		for line := range strings.Lines(out) {
			var j struct {
				JobID   uint64  `json:"job_id"`
				State   string  `json:"state"`
				Payload *string `json:"payload"`
			}
			if err := json.Unmarshal([]byte(line), &j); err != nil {
				t.Fatalf("via %s: %q: %v", node.ID, line, err)
			}
			if j.State != "queued" || j.Payload != nil {
				t.Errorf("via %s: job %d is %s with payload %v (want queued, no payload key)", node.ID, j.JobID, j.State, j.Payload != nil)
			}
			ids = append(ids, j.JobID)
		}
		if fmt.Sprint(ids) != "[1 2 3 4 5]" || errOut != "" {
			t.Errorf("barista jobs via %s lists %v (stderr %q), want [1 2 3 4 5]", node.ID, ids, errOut)
		}

		// With payloads: 3 jobs (2.7 MiB) fit a page, a 4th would pass
		// 3 MiB. A page size below that bounds the pages by count.
		for _, pageSize := range []uint32{0, 2} {
			var pages []string
			seen := map[uint64]int{}
			token := ""
			for {
				page, err := pb.NewClientClient(node.Conn()).ListJobs(ctx, &pb.ListJobsRequest{Tenant: "acme", PageSize: pageSize, PageToken: token, IncludePayload: true})
				if err != nil {
					t.Fatalf("ListJobs with payloads via %s (page size %d, token %q): %v", node.ID, pageSize, token, err)
				}
				var ids []uint64
				for _, j := range page.Jobs {
					ids = append(ids, j.JobId)
					seen[j.JobId]++
					if !bytes.Equal(j.Payload, payloads[j.JobId]) {
						t.Errorf("via %s: job %d came with %d bytes of payload, not its own %d", node.ID, j.JobId, len(j.Payload), len(payloads[j.JobId]))
					}
				}
				pages = append(pages, fmt.Sprintf("%v%s", ids, page.NextPageToken))
				if token = page.NextPageToken; token == "" {
					break
				}
			}
			want := map[uint32]string{0: "[[5 4 3]d2 [2 1]]", 2: "[[5 4]d3 [3 2]d1 [1]]"}[pageSize]
			if fmt.Sprint(pages) != want || len(seen) != n {
				t.Errorf("pages with payloads via %s, page size %d: %v, want %s", node.ID, pageSize, pages, want)
			}
		}
		j, err := pb.NewClientClient(node.Conn()).GetJob(ctx, &pb.GetJobRequest{Tenant: "acme", JobId: 5})
		if err != nil || !bytes.Equal(j.Payload, payloads[5]) {
			t.Errorf("GetJob 5 via %s: %d bytes of payload, %v", node.ID, len(j.GetPayload()), err)
		}
	}
	// The CLI asks for payloads with --payload (and --json).
	out, errOut, err := c.Run("jobs", "--server", follower.GRPCAddr, "--tenant", "acme", "--json", "--payload", "--oldest-first")
	if err != nil {
		t.Fatalf("barista jobs --payload: %v: %s", err, errOut)
	}
	var got []string
	for line := range strings.Lines(out) {
		var j struct {
			JobID   uint64 `json:"job_id"`
			Payload string `json:"payload"`
		}
		if err := json.Unmarshal([]byte(line), &j); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d:%v", j.JobID, j.Payload == string(payloads[j.JobID])))
	}
	if fmt.Sprint(got) != "[1:true 2:true 3:true]" || errOut != "more: --page-token p4\n" {
		t.Errorf("barista jobs --payload: %v, stderr %q", got, errOut)
	}
}

// TestMaxPayloadOverMessageLimit: max_payload_bytes cannot exceed what one
// gRPC message carries beside a job's other fields, neither in the file a
// server starts with nor in a SetConfig.
func TestMaxPayloadOverMessageLimit(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "barista.toml")
	if err := os.WriteFile(conf, []byte("[scheduler]\nmax_payload_bytes = 4194304\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := cluster.New(t, "--config", conf)
	node := bad.Add("n1")
	node.Start("--bootstrap")
	err, exited := node.Wait(30 * time.Second)
	if !exited || err == nil {
		t.Fatalf("a server with max_payload_bytes = 4194304 started (exited %v, %v)", exited, err)
	}
	if log := node.Log(); !strings.Contains(log, "max_payload_bytes") || !strings.Contains(log, "4128768") {
		t.Fatalf("the refusal does not name the key and the limit 4128768:\n%s", cluster.Tail(node.LogPath, 5))
	}

	c := cluster.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := pb.NewAdminClient(c.Nodes[0].Conn())
	cfg, err := admin.GetConfig(ctx, &pb.GetConfigRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxPayloadBytes = 4 << 20
	_, err = admin.SetConfig(ctx, &pb.SetConfigRequest{Config: cfg})
	const want = "config: max_payload_bytes 4194304 is over 4128768, the most a job's payload may be for the job to fit one 4194304-byte gRPC message"
	if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != want {
		t.Fatalf("SetConfig max_payload_bytes 4 MiB: %v\nwant INVALID_ARGUMENT %q", err, want)
	}
	cfg.MaxPayloadBytes = 4128768
	if got, err := admin.SetConfig(ctx, &pb.SetConfigRequest{Config: cfg}); err != nil || got.MaxPayloadBytes != 4128768 {
		t.Fatalf("SetConfig at the limit: %v %v", got, err)
	}
}
