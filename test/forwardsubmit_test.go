package test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/internal/wire"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/rpc"
	"github.com/baristahq/barista/test/cluster"
	"github.com/baristahq/barista/web"
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
	m, err := web.Scrape(ctx, "http://"+follower.HTTPAddr+"/metrics", adminToken)
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
	req := &clusterpb.ForwardSubmitsRequest{Submits: []*clusterpb.ForwardedSubmit{
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
		"InvalidArgument: est_cost_ms: must be positive (got -1)",
		"Unauthenticated: missing bearer token (authorization: Bearer TOKEN)",
		"InvalidArgument: job: required",
	}
	resp, err := clusterpb.NewNodeClient(cluster.Dial(t, leader.GRPCAddr, acmeToken, nil)).ForwardSubmits(ctx, req)
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
	if _, err := clusterpb.NewNodeClient(cluster.Dial(t, leader.GRPCAddr, workerToken, nil)).ForwardSubmits(ctx, req); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a worker token's call: %v; want PermissionDenied", err)
	}
	_, err = clusterpb.NewNodeClient(cluster.Dial(t, follower.GRPCAddr, acmeToken, nil)).ForwardSubmits(ctx, req)
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
	st, err := wire.StatusFromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s: %s", st.Code(), st.Message())
}

// TestForwardingAcrossBuilds: a leader of a build before batched
// forwarding (played with --test-forward-singly) answers ForwardSubmits
// UNIMPLEMENTED, and a newer follower then forwards each submit alone;
// an older follower forwards each alone to a newer leader. Every submit
// of each phase lands once, and only a newer follower under a newer
// leader makes batched calls.
func TestForwardingAcrossBuilds(t *testing.T) {
	c := cluster.New(t)
	c.BootWith(3, func(i int, n *cluster.Node) {
		if i == 0 {
			n.Args = []string{"--test-forward-singly"}
		}
	})
	c.WaitConverged(30 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	old, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	if l := c.WaitLeader(20 * time.Second); l != old {
		if _, err := l.Client().TransferLeadership(ctx, &clusterpb.TransferLeadershipRequest{Id: old.ID}); err != nil {
			t.Fatal(err)
		}
	}
	if l := c.WaitLeader(20 * time.Second); l != old {
		t.Fatalf("leader %s, want %s", l.ID, old.ID)
	}
	goldTenants(t, ctx, pb.NewAdminClient(old.Conn()), "acme")
	const each = 60
	forwarded := func(n *cluster.Node) (calls, carried float64) {
		m, err := web.Scrape(ctx, "http://"+n.HTTPAddr+"/metrics", "")
		if err != nil {
			t.Fatal(err)
		}
		return m["barista_submit_forward_calls_total"], m["barista_submits_forwarded_total"]
	}
	ids := map[uint64]bool{}
	submitVia := func(n *cluster.Node, phase string) {
		cl := pb.NewClientClient(n.Conn())
		got := make([]uint64, each)
		errs := make([]error, each)
		var wg sync.WaitGroup
		for i := range each {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := fmt.Sprintf("%s-%d", phase, i)
				r, err := cl.Submit(ctx, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1000, IdempotencyKey: &key})
				got[i], errs[i] = r.GetJobId(), err
			}()
		}
		wg.Wait()
		for i := range each {
			if errs[i] != nil || ids[got[i]] {
				t.Fatalf("%s: submit %d: job %d, %v", phase, i, got[i], errs[i])
			}
			ids[got[i]] = true
		}
	}
	submitVia(n2, "new-follower-old-leader")
	if calls, carried := forwarded(n2); calls != 0 || carried != 0 {
		t.Fatalf("under the older leader, the newer follower counted %.0f batched calls carrying %.0f submits; want none", calls, carried)
	}
	if _, err := old.Client().TransferLeadership(ctx, &clusterpb.TransferLeadershipRequest{Id: n2.ID}); err != nil {
		t.Fatal(err)
	}
	if l := c.WaitLeader(20 * time.Second); l != n2 {
		t.Fatalf("leader %s, want %s", l.ID, n2.ID)
	}
	submitVia(old, "old-follower-new-leader")
	submitVia(n3, "new-follower-new-leader")
	if calls, carried := forwarded(old); calls != 0 || carried != 0 {
		t.Fatalf("the older follower counted %.0f batched calls; want none", calls)
	}
	if calls, carried := forwarded(n3); carried != each || calls < 1 {
		t.Fatalf("the newer follower under the newer leader carried %.0f submits in %.0f calls; want %d", carried, calls, each)
	}
	page, err := pb.NewClientClient(n2.Conn()).ListJobs(ctx, &pb.ListJobsRequest{Tenant: "acme", PageSize: 1000})
	if err != nil || len(page.Jobs) != 3*each {
		t.Fatalf("acme has %d jobs (%v), want %d", len(page.GetJobs()), err, 3*each)
	}
}
