package test

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/test/cluster"
)

const (
	adminToken  = "admin-secret-0001"
	acmeToken   = "acme-secret-0001"
	betaToken   = "beta-secret-0001"
	workerToken = "worker-secret-0001"
)

// tokenConfig writes a config file with one token of each role (two
// client tokens) and extra TOML.
func tokenConfig(t *testing.T, extra string) string {
	t.Helper()
	body := fmt.Sprintf(`
[[auth.tokens]]
role = "admin"
token = %q
[[auth.tokens]]
role = "client"
tenant = "acme"
token = %q
[[auth.tokens]]
role = "client"
tenant = "beta"
token = %q
[[auth.tokens]]
role = "worker"
token = %q
%s`, adminToken, acmeToken, betaToken, workerToken, extra)
	return configFile(t, body)
}

// startWithTokens starts a cluster of n nodes with the tokens of
// tokenConfig (and extra TOML) and args, whose own calls carry the admin
// token.
func startWithTokens(t *testing.T, n int, extra string, args ...string) *cluster.Cluster {
	t.Helper()
	c := cluster.New(t, append([]string{"--config", tokenConfig(t, extra)}, args...)...)
	c.Token = adminToken
	c.Boot(n)
	return c
}

// adminAndAcme dials addr as the admin and as tenant acme.
func adminAndAcme(t *testing.T, addr string) (pb.AdminClient, pb.ClientClient) {
	t.Helper()
	return pb.NewAdminClient(cluster.Dial(t, addr, adminToken, nil)), pb.NewClientClient(cluster.Dial(t, addr, acmeToken, nil))
}

func str(s string) *string { return &s }

// TestAuthMatrix calls every RPC with every role (and none) against a
// node with tokens configured, and checks who gets through.
func TestAuthMatrix(t *testing.T) {
	c := startWithTokens(t, 1, "")
	addr := c.Nodes[0].GRPCAddr
	admin := cluster.Dial(t, addr, adminToken, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, name := range []string{"acme", "beta"} {
		if _, err := pb.NewAdminClient(admin).UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: name, Tier: pb.Tier_GOLD.Enum()}); err != nil {
			t.Fatal(err)
		}
	}
	betaJob, err := pb.NewClientClient(admin).Submit(ctx, &pb.SubmitRequest{Tenant: "beta", Size: pb.Size_SM, EstCostMs: 1000})
	if err != nil {
		t.Fatal(err)
	}

	type call func(ctx context.Context, cc *grpc.ClientConn) error
	calls := map[string]call{
		"Client.Submit": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewClientClient(cc).Submit(ctx, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1000})
			return err
		},
		"Client.GetJob": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewClientClient(cc).GetJob(ctx, &pb.GetJobRequest{Tenant: "acme", JobId: 999})
			return err
		},
		"Client.ListJobs": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewClientClient(cc).ListJobs(ctx, &pb.ListJobsRequest{Tenant: "acme"})
			return err
		},
		"Client.CancelJob": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewClientClient(cc).CancelJob(ctx, &pb.CancelJobRequest{Tenant: "acme", JobId: 999})
			return err
		},
		"Client.RunJobNow": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewClientClient(cc).RunJobNow(ctx, &pb.RunJobNowRequest{Tenant: "acme", JobId: 999})
			return err
		},
		"Client.WatchEvents": func(ctx context.Context, cc *grpc.ClientConn) error {
			ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			s, err := pb.NewClientClient(cc).WatchEvents(ctx, &pb.WatchEventsRequest{Tenant: "acme", FromSeq: 1})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			if status.Code(err) == codes.DeadlineExceeded {
				return nil
			}
			return err
		},
		"Client.TenantUsage": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewClientClient(cc).TenantUsage(ctx, &pb.TenantUsageRequest{Tenant: "acme"})
			return err
		},
		"Admin.UpsertTenant": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewAdminClient(cc).UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "gamma", Tier: pb.Tier_FREE.Enum()})
			return err
		},
		"Admin.DeleteTenant": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewAdminClient(cc).DeleteTenant(ctx, &pb.DeleteTenantRequest{Name: "nobody"})
			return err
		},
		"Admin.GetTenant": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewAdminClient(cc).GetTenant(ctx, &pb.GetTenantRequest{Name: "acme"})
			return err
		},
		"Admin.ListTenants": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewAdminClient(cc).ListTenants(ctx, &pb.ListTenantsRequest{})
			return err
		},
		"Admin.GetConfig": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewAdminClient(cc).GetConfig(ctx, &pb.GetConfigRequest{})
			return err
		},
		"Admin.SetConfig": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewAdminClient(cc).SetConfig(ctx, &pb.SetConfigRequest{})
			return err
		},
		"Node.Status": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := clusterpb.NewNodeClient(cc).Status(ctx, &clusterpb.StatusRequest{})
			return err
		},
		"Node.Apply": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := clusterpb.NewNodeClient(cc).Apply(ctx, &clusterpb.ApplyRequest{})
			return err
		},
		"Node.Join": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := clusterpb.NewNodeClient(cc).Join(ctx, &clusterpb.JoinRequest{})
			return err
		},
		"Node.RemovePeer": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := clusterpb.NewNodeClient(cc).RemovePeer(ctx, &clusterpb.RemovePeerRequest{Id: "nobody"})
			return err
		},
		"Node.ListPeers": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := clusterpb.NewNodeClient(cc).ListPeers(ctx, &clusterpb.ListPeersRequest{})
			return err
		},
		"Node.TransferLeadership": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := clusterpb.NewNodeClient(cc).TransferLeadership(ctx, &clusterpb.TransferLeadershipRequest{Id: "nobody"})
			return err
		},
		"Client.ExplainJob": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewClientClient(cc).ExplainJob(ctx, &pb.ExplainJobRequest{Tenant: "acme", JobId: 999})
			return err
		},
		"Client.SetGroup": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewClientClient(cc).SetGroup(ctx, &pb.SetGroupRequest{Tenant: "acme", Group: "g", Cap: "2"})
			return err
		},
		"Client.GetGroup": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewClientClient(cc).GetGroup(ctx, &pb.GetGroupRequest{Tenant: "acme", Group: "nope"})
			return err
		},
		"Client.ListGroups": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewClientClient(cc).ListGroups(ctx, &pb.ListGroupsRequest{Tenant: "acme"})
			return err
		},
		"Client.Pause": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewClientClient(cc).Pause(ctx, &pb.PauseRequest{Tenant: "acme", Group: "g"})
			return err
		},
		"Admin.PauseDispatch": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewAdminClient(cc).PauseDispatch(ctx, &pb.PauseDispatchRequest{Resume: true})
			return err
		},
		"Client.Redrive": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewClientClient(cc).Redrive(ctx, &pb.BulkJobsRequest{Tenant: "acme", JobIds: []uint64{999}})
			return err
		},
		"Client.CancelJobs": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewClientClient(cc).CancelJobs(ctx, &pb.BulkJobsRequest{Tenant: "acme", JobIds: []uint64{999}})
			return err
		},
		"Client.PurgeJobs": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewClientClient(cc).PurgeJobs(ctx, &pb.BulkJobsRequest{Tenant: "acme", Filter: &pb.JobFilter{}, DryRun: true})
			return err
		},
		"Node.ForwardSubmits": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := clusterpb.NewNodeClient(cc).ForwardSubmits(ctx, &clusterpb.ForwardSubmitsRequest{})
			return err
		},
		"Worker.ListWorkers": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewWorkerClient(cc).ListWorkers(ctx, &pb.ListWorkersRequest{})
			return err
		},
		"Worker.Drain": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewWorkerClient(cc).Drain(ctx, &pb.DrainRequest{WorkerId: "nobody", Undrain: true})
			return err
		},
	}
	// What an admin gets past authorization (each call is built to fail
	// or succeed harmlessly).
	adminWant := map[string]codes.Code{
		"Client.Submit": codes.OK, "Client.GetJob": codes.NotFound, "Client.ListJobs": codes.OK, "Client.CancelJob": codes.NotFound,
		"Client.RunJobNow": codes.NotFound, "Client.WatchEvents": codes.OK, "Client.TenantUsage": codes.OK, "Client.ExplainJob": codes.NotFound, "Admin.UpsertTenant": codes.OK, "Admin.DeleteTenant": codes.NotFound,
		"Client.SetGroup": codes.OK, "Client.GetGroup": codes.NotFound, "Client.ListGroups": codes.OK,
		"Client.Pause": codes.OK, "Admin.PauseDispatch": codes.OK,
		"Client.Redrive": codes.OK, "Client.CancelJobs": codes.OK, "Client.PurgeJobs": codes.OK,
		"Admin.GetTenant": codes.OK, "Admin.ListTenants": codes.OK, "Admin.GetConfig": codes.OK, "Admin.SetConfig": codes.InvalidArgument,
		"Node.Status": codes.OK, "Node.Apply": codes.InvalidArgument, "Node.Join": codes.InvalidArgument, "Node.RemovePeer": codes.NotFound,
		"Node.ListPeers": codes.OK, "Node.TransferLeadership": codes.NotFound, "Node.ForwardSubmits": codes.InvalidArgument, "Worker.ListWorkers": codes.OK, "Worker.Drain": codes.NotFound,
	}
	roles := []struct {
		name  string
		token string
		want  func(method string) codes.Code
	}{
		{"none", "", func(string) codes.Code { return codes.Unauthenticated }},
		{"bad token", "not-a-real-token", func(string) codes.Code { return codes.Unauthenticated }},
		{"client", acmeToken, func(m string) codes.Code {
			if strings.HasPrefix(m, "Client.") || m == "Node.Status" || m == "Node.ForwardSubmits" {
				return adminWant[m]
			}
			return codes.PermissionDenied
		}},
		{"worker", workerToken, func(m string) codes.Code {
			if m == "Node.Status" || m == "Worker.ListWorkers" {
				return codes.OK
			}
			return codes.PermissionDenied // Worker.Drain too: an unbound worker token is no worker's own
		}},
		{"admin", adminToken, func(m string) codes.Code { return adminWant[m] }},
	}
	methods := make([]string, 0, len(calls))
	for m := range calls {
		methods = append(methods, m)
	}
	sort.Strings(methods)
	for _, r := range roles {
		cc := cluster.Dial(t, addr, r.token, nil)
		for _, m := range methods {
			if got, want := status.Code(calls[m](ctx, cc)), r.want(m); got != want {
				t.Errorf("%s calling %s: %s, want %s", r.name, m, got, want)
			}
		}
	}

	// A client token is pinned to its tenant.
	acme := pb.NewClientClient(cluster.Dial(t, addr, acmeToken, nil))
	denied := []struct {
		name string
		err  error
	}{}
	_, err = acme.Submit(ctx, &pb.SubmitRequest{Tenant: "beta", Size: pb.Size_SM, EstCostMs: 1})
	denied = append(denied, struct {
		name string
		err  error
	}{"submit", err})
	_, err = acme.ListJobs(ctx, &pb.ListJobsRequest{Tenant: "beta"})
	denied = append(denied, struct {
		name string
		err  error
	}{"list", err})
	_, err = acme.TenantUsage(ctx, &pb.TenantUsageRequest{Tenant: "beta"})
	denied = append(denied, struct {
		name string
		err  error
	}{"usage", err})
	_, err = acme.GetJob(ctx, &pb.GetJobRequest{Tenant: "beta", JobId: betaJob.JobId})
	denied = append(denied, struct {
		name string
		err  error
	}{"get", err})
	_, err = acme.SetGroup(ctx, &pb.SetGroupRequest{Tenant: "beta", Group: "g", Cap: "1"})
	denied = append(denied, struct {
		name string
		err  error
	}{"set group", err})
	_, err = acme.ListGroups(ctx, &pb.ListGroupsRequest{Tenant: "beta"})
	denied = append(denied, struct {
		name string
		err  error
	}{"list groups", err})
	_, err = acme.Pause(ctx, &pb.PauseRequest{Tenant: "beta"})
	denied = append(denied, struct {
		name string
		err  error
	}{"pause", err})
	_, err = acme.Redrive(ctx, &pb.BulkJobsRequest{Tenant: "beta", JobIds: []uint64{betaJob.JobId}})
	denied = append(denied, struct {
		name string
		err  error
	}{"redrive", err})
	_, err = acme.CancelJobs(ctx, &pb.BulkJobsRequest{Tenant: "beta", Filter: &pb.JobFilter{}})
	denied = append(denied, struct {
		name string
		err  error
	}{"cancel jobs", err})
	for _, d := range denied {
		if status.Code(d.err) != codes.PermissionDenied || !strings.Contains(d.err.Error(), `tenant: this token is for tenant "acme", not "beta"`) {
			t.Errorf("acme naming beta (%s): %v", d.name, d.err)
		}
	}
	// The tenant's token cannot lift the pause the admin took over (the
	// matrix paused group g as acme, then as the admin).
	if _, err := acme.Pause(ctx, &pb.PauseRequest{Group: "g", Resume: true}); status.Code(err) != codes.PermissionDenied ||
		!strings.Contains(err.Error(), "group g of tenant acme was paused by an admin: only an admin may resume it") {
		t.Errorf("acme resuming an admin's pause: %v", err)
	}
	if _, err := pb.NewClientClient(admin).Pause(ctx, &pb.PauseRequest{Tenant: "acme", Group: "g", Resume: true}); err != nil {
		t.Errorf("admin resuming: %v", err)
	}
	// Omitting the tenant scopes the call to the token's own.
	own, err := acme.Submit(ctx, &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if j, err := acme.GetJob(ctx, &pb.GetJobRequest{JobId: own.JobId}); err != nil || j.Tenant != "acme" {
		t.Fatalf("own job: %v %v", j, err)
	}
	// Guessing beta's job id looks exactly like a job that does not exist.
	_, guessErr := acme.GetJob(ctx, &pb.GetJobRequest{JobId: betaJob.JobId})
	_, missingErr := acme.GetJob(ctx, &pb.GetJobRequest{JobId: 424242})
	_, cancelErr := acme.CancelJob(ctx, &pb.CancelJobRequest{JobId: betaJob.JobId})
	want := fmt.Sprintf("rpc error: code = NotFound desc = job %d not found", betaJob.JobId)
	if guessErr == nil || guessErr.Error() != want || cancelErr == nil || cancelErr.Error() != want || status.Code(missingErr) != codes.NotFound {
		t.Errorf("guessing another tenant's job: %v / %v / %v", guessErr, cancelErr, missingErr)
	}
	if j, _ := pb.NewClientClient(admin).GetJob(ctx, &pb.GetJobRequest{JobId: betaJob.JobId}); j.GetState() != "queued" {
		t.Errorf("acme's cancel touched beta's job: %v", j)
	}
	// Every job acme lists is its own.
	list, err := acme.ListJobs(ctx, &pb.ListJobsRequest{})
	if err != nil || len(list.Jobs) != 3 { // the matrix submitted twice (client, admin), plus own
		t.Fatalf("acme lists %v %v", list, err)
	}
	for _, j := range list.Jobs {
		if j.Tenant != "acme" {
			t.Errorf("acme sees %s's job %d", j.Tenant, j.JobId)
		}
	}
}

// TestValidation checks every validation rule through the real server:
// the status code and a message naming the field.
func TestValidation(t *testing.T) {
	c := startWithTokens(t, 1, "[scheduler]\nmax_payload_bytes = 1024\nevent_retention_count = 5\n", "--prune-interval", "100ms")
	addr := c.Nodes[0].GRPCAddr
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := pb.NewAdminClient(cluster.Dial(t, addr, adminToken, nil))
	client := pb.NewClientClient(cluster.Dial(t, addr, adminToken, nil))
	for _, tn := range []*pb.UpsertTenantRequest{{Name: "acme", Tier: pb.Tier_GOLD.Enum()}, {Name: "capped", Tier: pb.Tier_FREE.Enum(), Caps: &pb.CapsUpdate{MaxQueued: proto.Uint32(2)}}} {
		if _, err := admin.UpsertTenant(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := client.Submit(ctx, &pb.SubmitRequest{Tenant: "capped", Size: pb.Size_SM, EstCostMs: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 { // more events than retained: the oldest get pruned
		if _, err := client.Submit(ctx, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1}); err != nil {
			t.Fatal(err)
		}
	}
	ok := func(r *pb.SubmitRequest) *pb.SubmitRequest {
		if r.Tenant == "" {
			r.Tenant = "acme"
		}
		if r.Size == 0 {
			r.Size = pb.Size_MD
		}
		if r.EstCostMs == 0 {
			r.EstCostMs = 1000
		}
		return r
	}
	type check struct {
		name string
		call func() error
		code codes.Code
		msg  string
	}
	submit := func(r *pb.SubmitRequest) func() error {
		return func() error { _, err := client.Submit(ctx, r); return err }
	}
	checks := []check{
		{"unknown tenant", submit(ok(&pb.SubmitRequest{Tenant: "nobody"})), codes.NotFound, `unknown tenant "nobody"`},
		{"empty key", submit(ok(&pb.SubmitRequest{IdempotencyKey: str("")})), codes.InvalidArgument, "idempotency_key: given but empty"},
		{"long key", submit(ok(&pb.SubmitRequest{IdempotencyKey: str(strings.Repeat("k", 257))})), codes.InvalidArgument, "idempotency_key: 257 bytes, at most 256"},
		{"no size", submit(&pb.SubmitRequest{Tenant: "acme", EstCostMs: 5}), codes.InvalidArgument, "size: SIZE_UNSPECIFIED is not sm, md or lg"},
		{"bad size", submit(&pb.SubmitRequest{Tenant: "acme", Size: pb.Size(9), EstCostMs: 5}), codes.InvalidArgument, "size: 9 is not sm, md or lg"},
		{"zero cost", submit(&pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM}), codes.InvalidArgument, "est_cost_ms: must be positive (got 0)"},
		{"negative cost", submit(&pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: -5}), codes.InvalidArgument, "est_cost_ms: must be positive (got -5)"},
		{"absurd cost", submit(ok(&pb.SubmitRequest{EstCostMs: 1 << 50})), codes.InvalidArgument, "est_cost_ms: 1125899906842624 is more than a CPU-year"},
		{"max attempts", submit(ok(&pb.SubmitRequest{MaxAttempts: 5000})), codes.InvalidArgument, "max_attempts: 5000, at most 1000"},
		{"timeout", submit(ok(&pb.SubmitRequest{TimeoutMs: -1})), codes.InvalidArgument, "timeout_ms: -1 is out of range"},
		{"job type", submit(ok(&pb.SubmitRequest{JobType: strings.Repeat("t", 300)})), codes.InvalidArgument, "job_type: 300 bytes, at most 256"},
		{"payload", submit(ok(&pb.SubmitRequest{Payload: make([]byte, 2048)})), codes.InvalidArgument, "payload: 2048 bytes, over the cluster's limit of 1024 (max_payload_bytes)"},
		{"quota", submit(&pb.SubmitRequest{Tenant: "capped", Size: pb.Size_SM, EstCostMs: 1}), codes.ResourceExhausted, `tenant "capped" has 2 queued jobs, its max_queued quota`},
		{"submit without tenant (admin)", submit(&pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1}), codes.InvalidArgument, "tenant: required"},
		{"bad page token", func() error {
			_, err := client.ListJobs(ctx, &pb.ListJobsRequest{Tenant: "acme", PageToken: "xyz"})
			return err
		}, codes.InvalidArgument, `page_token: "xyz" is not a token this server issued`},
		{"page size", func() error {
			_, err := client.ListJobs(ctx, &pb.ListJobsRequest{Tenant: "acme", PageSize: 5000})
			return err
		}, codes.InvalidArgument, "page_size: 5000, at most 1000"},
		{"bad state", func() error {
			_, err := client.ListJobs(ctx, &pb.ListJobsRequest{Tenant: "acme", State: "sleeping"})
			return err
		}, codes.InvalidArgument, `state: "sleeping"`},
		{"unknown job", func() error {
			_, err := client.GetJob(ctx, &pb.GetJobRequest{Tenant: "acme", JobId: 9999})
			return err
		}, codes.NotFound, "job 9999 not found"},
		{"cancel unknown job", func() error {
			_, err := client.CancelJob(ctx, &pb.CancelJobRequest{Tenant: "acme", JobId: 9999})
			return err
		}, codes.NotFound, "job 9999 not found"},
		{"bad tier", func() error {
			_, err := admin.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "x"})
			return err
		}, codes.InvalidArgument, `tier: required to create tenant "x" (free, bronze, silver, gold or diamond)`},
		{"bad tenant name", func() error {
			_, err := admin.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "a b", Tier: pb.Tier_FREE.Enum()})
			return err
		}, codes.InvalidArgument, `name "a b" has a space at byte 1`},
		{"bad config", func() error {
			cfg, err := admin.GetConfig(ctx, &pb.GetConfigRequest{})
			if err != nil {
				return err
			}
			cfg.SelfKillAfterMs = cfg.LeaseTimeoutMs
			_, err = admin.SetConfig(ctx, &pb.SetConfigRequest{Config: cfg})
			return err
		}, codes.InvalidArgument, "config: self_kill_after 30s must be below lease_timeout 30s"},
		{"busy tenant delete", func() error {
			_, err := admin.DeleteTenant(ctx, &pb.DeleteTenantRequest{Name: "capped"})
			return err
		}, codes.FailedPrecondition, `"capped" has 2 queued and 0 running`},
	}
	for _, ch := range checks {
		err := ch.call()
		if status.Code(err) != ch.code || !strings.Contains(status.Convert(err).Message(), ch.msg) {
			t.Errorf("%s: got %v, want %s containing %q", ch.name, err, ch.code, ch.msg)
		}
	}
	// A watch cursor older than the retained events is OUT_OF_RANGE.
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := client.WatchEvents(ctx, &pb.WatchEventsRequest{Tenant: "acme", FromSeq: 1})
		if err == nil {
			_, err = s.Recv()
		}
		if status.Code(err) == codes.OutOfRange {
			if !strings.Contains(err.Error(), "from_seq: 1 is older than the oldest retained event") {
				t.Errorf("watch: %v", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("old cursor accepted: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSubmitAnyNodeAndFailover submits to each node in turn (followers
// forward), then kills the leader while clients submit with idempotency
// keys and retry: every acknowledged submit exists exactly once.
func TestSubmitAnyNodeAndFailover(t *testing.T) {
	c := cluster.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin := pb.NewAdminClient(c.Nodes[0].Conn())
	if _, err := admin.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "acme", Tier: pb.Tier_GOLD.Enum()}); err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for i, n := range c.Nodes {
		r, err := pb.NewClientClient(n.Conn()).Submit(ctx, &pb.SubmitRequest{Tenant: "acme", IdempotencyKey: str(fmt.Sprintf("each-%d", i)), Size: pb.Size_MD, EstCostMs: 1000})
		if err != nil || !r.Created {
			t.Fatalf("submit via %s: %v %v", n.ID, r, err)
		}
		ids = append(ids, r.JobId)
	}
	for _, n := range c.Nodes {
		for _, id := range ids {
			if j, err := pb.NewClientClient(n.Conn()).GetJob(ctx, &pb.GetJobRequest{Tenant: "acme", JobId: id}); err != nil || j.State != "queued" {
				t.Fatalf("job %d via %s: %v %v", id, n.ID, j, err)
			}
		}
	}

	var mu sync.Mutex
	acked := map[string]uint64{}
	stop := make(chan struct{})
	wg := keyedLoad(6, stop, func(cl, i int, key string) bool {
		for try := 0; ; try++ { // retry the same key until acknowledged
			n := c.Nodes[(cl+try)%len(c.Nodes)]
			if !n.Running() {
				continue
			}
			sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
			r, err := pb.NewClientClient(n.Conn()).Submit(sctx, &pb.SubmitRequest{Tenant: "acme", IdempotencyKey: str(key), Size: pb.Size_SM, EstCostMs: 1000})
			scancel()
			if err == nil {
				mu.Lock()
				acked[key] = r.JobId
				mu.Unlock()
				return true
			}
			if ctx.Err() != nil {
				return false
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	time.Sleep(time.Second)
	leader := c.WaitLeader(10 * time.Second)
	t.Logf("kill -9 leader %s", leader.ID)
	leader.Kill()
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	leader.Start()
	c.WaitConverged(60 * time.Second)

	// Count every job per idempotency key through the API.
	perKey := map[string]int{}
	client := pb.NewClientClient(c.WaitLeader(10 * time.Second).Conn())
	token := ""
	for {
		page, err := client.ListJobs(ctx, &pb.ListJobsRequest{Tenant: "acme", PageSize: 1000, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range page.Jobs {
			perKey[j.IdempotencyKey]++
		}
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(acked) < 50 {
		t.Fatalf("only %d acknowledged submits", len(acked))
	}
	for key := range acked {
		if perKey[key] != 1 {
			t.Errorf("acknowledged key %s has %d jobs", key, perKey[key])
		}
	}
	t.Logf("%d acknowledged keyed submits across a leader kill; each exists once", len(acked))
}

// TestWatchAcrossLeaderKill watches a tenant's events on followers while
// the leader is killed; the watcher reconnects with its cursor several
// times and still sees every event of its tenant, in order, with no gap.
func TestWatchAcrossLeaderKill(t *testing.T) {
	c := cluster.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin := pb.NewAdminClient(c.Nodes[0].Conn())
	goldTenants(t, ctx, admin, "acme", "other")
	leader := c.WaitLeader(10 * time.Second)
	followers := c.Followers(leader)
	var got []*pb.Event
	var gotMu sync.Mutex
	watchDone := make(chan struct{})
	wctx, wcancel := context.WithCancel(ctx)
	go func() {
		defer close(watchDone)
		next := uint64(1)
		for session := 0; wctx.Err() == nil; session++ {
			n := followers[session%len(followers)]
			s, err := pb.NewClientClient(n.Conn()).WatchEvents(wctx, &pb.WatchEventsRequest{Tenant: "acme", FromSeq: next})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for i := 0; i < 15; i++ { // drop the stream every 15 events
				ev, err := s.Recv()
				if err != nil {
					break
				}
				gotMu.Lock()
				got = append(got, ev)
				gotMu.Unlock()
				next = ev.Seq + 1
			}
		}
	}()
	submitted := 0
	produce := func(n int) {
		for i := 0; i < n; i++ {
			tenant := []string{"acme", "other"}[i%2]
			for {
				if _, err := c.Apply(ctx, submitCmd(tenant, fmt.Sprintf("%s-%d-%d", tenant, submitted, i), pb.Size_SM, 1000)); err == nil {
					break
				}
			}
			if tenant == "acme" {
				submitted++
			}
		}
	}
	produce(60)
	t.Logf("kill -9 leader %s", leader.ID)
	leader.Kill()
	produce(60)
	// Cancel some of acme's jobs too: more event kinds.
	for id := uint64(1); id <= 10; id++ {
		c.Apply(ctx, &clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Job: id}}})
	}
	_, _ = c.WaitConverged(30 * time.Second)
	// The reference: a fresh watch from the start on a follower.
	var want []*pb.Event
	s, err := pb.NewClientClient(followers[0].Conn()).WatchEvents(ctx, &pb.WatchEventsRequest{Tenant: "acme", FromSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	for {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		ev, err := func() (*pb.Event, error) {
			type res struct {
				ev  *pb.Event
				err error
			}
			ch := make(chan res, 1)
			go func() { ev, err := s.Recv(); ch <- res{ev, err} }()
			select {
			case r := <-ch:
				return r.ev, r.err
			case <-rctx.Done():
				return nil, rctx.Err()
			}
		}()
		rcancel()
		if err != nil {
			break
		}
		want = append(want, ev)
	}
	// Give the watcher time to catch up, then stop it.
	deadline := time.Now().Add(20 * time.Second)
	for {
		gotMu.Lock()
		n := len(got)
		gotMu.Unlock()
		if n >= len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	wcancel()
	<-watchDone
	gotMu.Lock()
	defer gotMu.Unlock()
	if len(want) < 65 { // 60 submits of acme, plus its share of the 10 cancels
		t.Fatalf("only %d events of acme exist", len(want))
	}
	if len(got) != len(want) {
		t.Fatalf("watcher saw %d events, the log has %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Seq != want[i].Seq || got[i].Kind != want[i].Kind || got[i].JobId != want[i].JobId || got[i].Tenant != "acme" {
			t.Fatalf("event %d: watcher %v, log %v", i, got[i], want[i])
		}
	}
	t.Logf("watcher saw all %d events of acme in order across a leader kill and %d reconnects", len(got), len(got)/15)
}

// TestTLSCluster runs gRPC over TLS and Raft over mutual TLS; a node
// whose certificate another CA signed cannot join.
func TestTLSCluster(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	c := cluster.New(t)
	if _, errOut, err := c.Run("tls", "init", "--dir", dir, "--names", "n1,n2,n3", "--clients", "client"); err != nil {
		t.Fatalf("tls init: %v %s", err, errOut)
	}
	if _, errOut, err := c.Run("tls", "init", "--dir", other, "--names", "n4"); err != nil {
		t.Fatalf("tls init: %v %s", err, errOut)
	}
	for i := 1; i <= 3; i++ {
		n := c.Add(fmt.Sprintf("n%d", i))
		n.Args = []string{"--tls-cert", filepath.Join(dir, n.ID+".pem"), "--tls-key", filepath.Join(dir, n.ID+"-key.pem"), "--tls-ca", filepath.Join(dir, "ca.pem")}
	}
	pool, err := raftnode.LoadCAPool(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	clientTLS := &tls.Config{RootCAs: pool}
	status := func(n *cluster.Node) (*clusterpb.StatusResponse, error) {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return clusterpb.NewNodeClient(cluster.Dial(t, n.GRPCAddr, "", clientTLS)).Status(sctx, &clusterpb.StatusRequest{})
	}
	waitVoters := func(want int) bool {
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			for _, n := range c.Running() {
				sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				resp, err := clusterpb.NewNodeClient(cluster.Dial(t, n.GRPCAddr, "", clientTLS)).ListPeers(sctx, &clusterpb.ListPeersRequest{})
				cancel()
				if err == nil && len(resp.Peers) == want {
					return true
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		return false
	}
	c.Nodes[0].Start("--bootstrap")
	c.Nodes[1].Start("--join", c.Nodes[0].GRPCAddr)
	c.Nodes[2].Start("--join", c.Nodes[0].GRPCAddr)
	if !waitVoters(3) {
		t.Fatal("the TLS cluster did not form")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cc := cluster.Dial(t, c.Nodes[1].GRPCAddr, "", clientTLS)
	if _, err := pb.NewAdminClient(cc).UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "acme", Tier: pb.Tier_GOLD.Enum()}); err != nil {
		t.Fatalf("write through a follower over TLS: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		hashes := map[string]bool{}
		for _, n := range c.Nodes[:3] {
			if st, err := status(n); err == nil && st.Tenants == 1 {
				hashes[st.StateHash] = true
			}
		}
		if len(hashes) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("TLS nodes did not converge")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Plain-text gRPC is refused.
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = clusterpb.NewNodeClient(cluster.Dial(t, c.Nodes[0].GRPCAddr, "", nil)).Status(pctx, &clusterpb.StatusRequest{})
	pcancel()
	if err == nil {
		t.Fatal("a plain-text client was served")
	}
	// A node of another CA cannot join.
	n4 := c.Add("n4")
	n4.Args = []string{"--tls-cert", filepath.Join(other, "n4.pem"), "--tls-key", filepath.Join(other, "n4-key.pem"), "--tls-ca", filepath.Join(other, "ca.pem")}
	n4.Start("--join", c.Nodes[0].GRPCAddr)
	time.Sleep(5 * time.Second)
	sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
	resp, err := clusterpb.NewNodeClient(cc).ListPeers(sctx, &clusterpb.ListPeersRequest{})
	scancel()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range resp.Peers {
		if p.Id == "n4" {
			t.Fatal("n4, signed by another CA, joined")
		}
	}
	if !strings.Contains(n4.Log(), "join attempt failed") || !strings.Contains(n4.Log(), "certificate") {
		t.Fatalf("n4's log does not show a failed TLS join:\n%s", n4.Log()[max(0, len(n4.Log())-2000):])
	}
}

// TestWatchAllTenantsUnderLoad watches every tenant's events (names looked
// up per event) while 32 clients submit: the node stays responsive and the
// watcher sees every submit's event. A watch that took the state's read
// lock twice deadlocked against a pending Apply here.
func TestWatchAllTenantsUnderLoad(t *testing.T) {
	c := cluster.Start(t, 1)
	node := c.Nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	goldTenants(t, ctx, pb.NewAdminClient(node.Conn()), "a", "b")
	const clients, each, watchers = 32, 150, 4
	var queued atomic.Int64
	for range watchers {
		stream, err := pb.NewClientClient(node.Conn()).WatchEvents(ctx, &pb.WatchEventsRequest{FromSeq: 1})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				ev, err := stream.Recv()
				if err != nil {
					return
				}
				if ev.Kind == "queued" {
					if ev.Tenant != "a" && ev.Tenant != "b" {
						t.Errorf("event %d names tenant %q", ev.Seq, ev.Tenant)
					}
					queued.Add(1)
				}
			}
		}()
	}
	var wg sync.WaitGroup
	for g := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := pb.NewClientClient(node.Conn()).Submit(sctx, &pb.SubmitRequest{Tenant: []string{"a", "b"}[g%2], IdempotencyKey: str(fmt.Sprintf("%d-%d", g, i)), Size: pb.Size_SM, EstCostMs: 10, Payload: []byte(`{"argv":["true"]}`)})
				scancel()
				if err != nil {
					t.Errorf("submit %d-%d: %v (the node stalled)", g, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(20 * time.Second)
	for queued.Load() < clients*each*watchers && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := queued.Load(); got != clients*each*watchers {
		t.Fatalf("the watchers saw %d queued events, want %d", got, clients*each*watchers)
	}
}

// TestSubmitBatch: one call, one result per job in order, each job
// validated and idempotent on its own; through a follower alike; and the
// CLI's --from-file on top of it.
func TestSubmitBatch(t *testing.T) {
	c := cluster.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := pb.NewAdminClient(c.Nodes[0].Conn()).UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "acme", Tier: pb.Tier_GOLD.Enum()}); err != nil {
		t.Fatal(err)
	}
	leader := c.WaitLeader(10 * time.Second)
	follower := c.Followers(leader)[0]
	job := func(tenant, key string, size pb.Size) *pb.SubmitRequest {
		r := &pb.SubmitRequest{Tenant: tenant, Size: size, EstCostMs: 1000, Payload: []byte(`{"argv":["true"]}`)}
		if key != "" {
			r.IdempotencyKey = str(key)
		}
		return r
	}
	batch := &pb.SubmitBatchRequest{Jobs: []*pb.SubmitRequest{
		job("acme", "k1", pb.Size_MD),
		job("acme", "k1", pb.Size_MD), // the same job again
		job("acme", "k2", pb.Size_SIZE_UNSPECIFIED),
		job("nobody", "k3", pb.Size_SM),
		job("acme", "", pb.Size_LG),
	}}
	render := func(rs []*pb.SubmitResult) string {
		var out []string
		for _, r := range rs {
			out = append(out, fmt.Sprintf("%d/%v/%s", r.JobId, r.Created, r.Error))
		}
		return strings.Join(out, "\n")
	}
	resp, err := pb.NewClientClient(leader.Conn()).SubmitBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"1/true/",
		"1/false/",
		"0/false/INVALID_ARGUMENT: size: SIZE_UNSPECIFIED is not sm, md or lg",
		"0/false/NOT_FOUND: unknown tenant \"nobody\"",
		"2/true/",
	}, "\n")
	if got := render(resp.Results); got != want {
		t.Fatalf("results:\n%s\nwant:\n%s", got, want)
	}
	// Again through a follower: the keyed job exists, the unkeyed one is new.
	resp, err = pb.NewClientClient(follower.Conn()).SubmitBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	want = strings.Replace(strings.Replace(want, "1/true/", "1/false/", 1), "2/true/", "3/true/", 1)
	if got := render(resp.Results); got != want {
		t.Fatalf("results through a follower:\n%s\nwant:\n%s", got, want)
	}
	for _, n := range []int{0, 1001} {
		_, err := pb.NewClientClient(leader.Conn()).SubmitBatch(ctx, &pb.SubmitBatchRequest{Jobs: make([]*pb.SubmitRequest, n)})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), fmt.Sprintf("jobs: %d given (want 1..1000)", n)) {
			t.Fatalf("a batch of %d: %v", n, err)
		}
	}
	// The CLI: a JSON-lines file, one bad line; a rerun finds the keyed jobs.
	file := filepath.Join(t.TempDir(), "jobs.jsonl")
	body := `{"tenant": "acme", "size": "md", "cost": "90s", "key": "f1", "argv": ["render", "7"]}
{"tenant": "acme", "size": "huge", "cost": "1s", "key": "f2", "argv": ["true"]}
{"tenant": "acme", "size": "sm", "cost": "2s", "key": "f3", "payload": {"argv": ["sleep", "1"]}}
`
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2 submitted, 0 already existed, 1 refused", "0 submitted, 2 already existed, 1 refused"} {
		out, errOut, err := c.Run("submit", "--server", follower.GRPCAddr, "--from-file", file)
		if err == nil || !strings.Contains(out, want) || !strings.Contains(errOut, "line 2") {
			t.Fatalf("submit --from-file: err %v, stdout %q, stderr %q; want exit 1 and %q", err, out, errOut, want)
		}
	}
}
