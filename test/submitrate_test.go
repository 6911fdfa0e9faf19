package test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/test/cluster"
)

// TestSubmitRateAcrossNodes: submit_rate (seeded from the config file) is
// held on the leader, so a tenant submitting through every node at once
// gets its burst once, not once per node: 12 concurrent submits of acme
// through three nodes, 4 each, with submit_rate=5/1h and bursts of 5,
// give exactly 5 jobs and 7 RESOURCE_EXHAUSTED refusals that say when to
// retry (a RetryInfo of about 12 minutes); beta has an allowance of its
// own; over HTTP the refusal is 429 with Retry-After.
func TestSubmitRateAcrossNodes(t *testing.T) {
	c := startWithTokens(t, 3, "[scheduler]\nsubmit_rate = \"5/1h\"\nsubmit_burst = 5\n")
	c.WaitConverged(30 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := pb.NewAdminClient(cluster.Dial(t, c.Nodes[0].GRPCAddr, adminToken, nil))
	goldTenants(t, ctx, admin, "acme", "beta")
	var mu sync.Mutex
	var ok, limited int
	var other []string
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		cl := pb.NewClientClient(cluster.Dial(t, n.GRPCAddr, acmeToken, nil))
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := cl.Submit(ctx, &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1000})
				mu.Lock()
				defer mu.Unlock()
				st := status.Convert(err)
				switch {
				case err == nil:
					ok++
				case st.Code() == codes.ResourceExhausted && strings.HasPrefix(st.Message(), `submit_rate: tenant "acme" may submit 5/1h0m0s (bursts of 5); retry in 1`) &&
					len(st.Details()) == 2: // a RetryInfo and the reason RATE_LIMITED
					ri, _ := st.Details()[0].(*errdetails.RetryInfo)
					if d := ri.GetRetryDelay().AsDuration(); d < 11*time.Minute || d > 12*time.Minute {
						other = append(other, "retry delay "+d.String())
					}
					limited++
				default:
					other = append(other, err.Error())
				}
			}()
		}
	}
	wg.Wait()
	if ok != 5 || limited != 7 || len(other) > 0 {
		t.Fatalf("%d submitted, %d limited, others %q; want 5 and 7", ok, limited, other)
	}
	beta := pb.NewClientClient(cluster.Dial(t, c.Nodes[2].GRPCAddr, betaToken, nil))
	if _, err := beta.Submit(ctx, &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1000}); err != nil {
		t.Fatalf("beta: %v", err)
	}
	// Over HTTP, through a follower: 429 and Retry-After in seconds.
	follower := c.Followers(c.WaitLeader(20 * time.Second))[0]
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+follower.HTTPAddr+"/v1/jobs", strings.NewReader(`{"size":"SM","est_cost_ms":"1000"}`))
	req.Header.Set("Authorization", "Bearer "+acmeToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ra := resp.Header.Get("Retry-After"); resp.StatusCode != http.StatusTooManyRequests || (ra != "719" && ra != "720") {
		t.Fatalf("HTTP: %d, Retry-After %q", resp.StatusCode, ra)
	}
	var jobs int
	if r, err := pb.NewClientClient(cluster.Dial(t, c.Nodes[0].GRPCAddr, adminToken, nil)).ListJobs(ctx, &pb.ListJobsRequest{Tenant: "acme"}); err == nil {
		jobs = len(r.Jobs)
	}
	if jobs != 5 {
		t.Fatalf("acme has %d jobs, want 5", jobs)
	}
}
