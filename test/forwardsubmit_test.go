package test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/rpc"
	"github.com/baristahq/barista/test/cluster"
)

// TestForwardedSubmitsBatched: single submits given to a follower reach
// the leader in batched ForwardSubmits calls, and each is still its own
// caller's: 300 concurrent submits of two tenants through a follower all
// land in their caller's tenant, once each, in fewer calls than submits;
// the leader authorizes every forwarded submit on its own (an unknown, a
// missing and a worker token, a token naming another tenant and a bad
// field are refused one by one, beside the accepted ones), and a follower
// asked directly refuses as not the leader.
func TestForwardedSubmitsBatched(t *testing.T) {
	c := cluster.New(t, "--config", tokenConfig(t, ""))
	c.Token = adminToken
	c.Boot(3)
	c.WaitConverged(30 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	leader := c.WaitLeader(20 * time.Second)
	follower := c.Followers(leader)[0]
	admin := pb.NewAdminClient(cluster.Dial(t, leader.GRPCAddr, adminToken, nil))
	goldTenants(t, ctx, admin, "acme", "beta")

	const n = 300
	tokens := map[string]string{"acme": acmeToken, "beta": betaToken}
	clients := map[string]pb.ClientClient{}
	for name, tok := range tokens {
		clients[name] = pb.NewClientClient(cluster.Dial(t, follower.GRPCAddr, tok, nil))
	}
	ids := make([]uint64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			key := fmt.Sprintf("k%d", i)
			r, err := clients[tenantOf(i)].Submit(ctx, &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1000, IdempotencyKey: &key})
			if err == nil && !r.Created {
				err = fmt.Errorf("not created")
			}
			ids[i], errs[i] = r.GetJobId(), err
		}()
	}
	close(start)
	wg.Wait()
	seen := map[uint64]bool{}
	leaderAdmin := pb.NewClientClient(cluster.Dial(t, leader.GRPCAddr, adminToken, nil))
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("submit %d: %v", i, errs[i])
		}
		if seen[ids[i]] {
			t.Fatalf("job %d given twice", ids[i])
		}
		seen[ids[i]] = true
		key := fmt.Sprintf("k%d", i)
		j, err := leaderAdmin.GetJob(ctx, &pb.GetJobRequest{Tenant: tenantOf(i), JobId: ids[i]})
		if err != nil || j.Tenant != tenantOf(i) || j.IdempotencyKey != key {
			t.Fatalf("job %d of submit %d: %v %v", ids[i], i, j, err)
		}
	}
	m, err := rpc.Scrape(ctx, "http://"+follower.HTTPAddr+"/metrics", adminToken)
	if err != nil {
		t.Fatal(err)
	}
	calls, carried := m["barista_submit_forward_calls_total"], m["barista_submits_forwarded_total"]
	t.Logf("%d submits through the follower in %.0f calls", n, calls)
	if carried != n || calls < 1 || calls >= n {
		t.Fatalf("the follower carried %.0f submits in %.0f calls; want %d in fewer calls", carried, calls, n)
	}

	// The leader checks each forwarded submit on its own.
	job := func(tenant string, cost int64) *pb.SubmitRequest {
		return &pb.SubmitRequest{Tenant: tenant, Size: pb.Size_SM, EstCostMs: cost}
	}
	bearer := func(s string) string { return "Bearer " + s }
	req := &pb.ForwardSubmitsRequest{Submits: []*pb.ForwardedSubmit{
		{Authorization: bearer(acmeToken), Job: job("", 1000)},
		{Authorization: bearer("unknown-secret-0001"), Job: job("", 1000)},
		{Authorization: bearer(workerToken), Job: job("acme", 1000)},
		{Authorization: bearer(acmeToken), Job: job("beta", 1000)},
		{Authorization: bearer(adminToken), Job: job("beta", 1000)},
		{Authorization: bearer(acmeToken), Job: job("", -1)},
		{Job: job("acme", 1000)},
		{Authorization: bearer(acmeToken)},
	}}
	want := []string{
		"OK acme",
		`Unauthenticated: unknown token`,
		`PermissionDenied: a worker token may not call /barista.v1.Client/Submit`,
		`PermissionDenied: tenant: this token is for tenant "acme", not "beta"`,
		"OK beta",
		"InvalidArgument: est_cost_ms: must be positive (got -1); it may be left out only while the cluster's estimate is auto",
		"Unauthenticated: missing bearer token (authorization: Bearer TOKEN)",
		"InvalidArgument: job: required",
	}
	resp, err := pb.NewNodeClient(cluster.Dial(t, leader.GRPCAddr, acmeToken, nil)).ForwardSubmits(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range resp.Results {
		got := "OK"
		if len(r.Status) > 0 {
			got = forwardedStatus(t, r.Status)
		} else {
			j, err := leaderAdmin.GetJob(ctx, &pb.GetJobRequest{JobId: r.JobId, Tenant: want[i][3:]})
			if err != nil {
				t.Fatalf("result %d: job %d: %v", i, r.JobId, err)
			}
			got += " " + j.Tenant
		}
		if got != want[i] {
			t.Errorf("result %d: %s; want %s", i, got, want[i])
		}
	}
	// A worker token may not make the call at all; a follower does not
	// take it.
	if _, err := pb.NewNodeClient(cluster.Dial(t, leader.GRPCAddr, workerToken, nil)).ForwardSubmits(ctx, req); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a worker token's call: %v; want PermissionDenied", err)
	}
	_, err = pb.NewNodeClient(cluster.Dial(t, follower.GRPCAddr, acmeToken, nil)).ForwardSubmits(ctx, req)
	if !rpc.IsNotLeader(err) {
		t.Errorf("a follower's answer: %v; want not the leader", err)
	}
}

func tenantOf(i int) string {
	if i%2 == 0 {
		return "acme"
	}
	return "beta"
}

// forwardedStatus reads a ForwardSubmits result's status as "Code: message".
func forwardedStatus(t *testing.T, b []byte) string {
	t.Helper()
	st, err := rpc.ForwardedStatus(b)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s: %s", st.Code(), st.Message())
}
