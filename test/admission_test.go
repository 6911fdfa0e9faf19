package test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/rpc"
	"github.com/baristahq/barista/test/cluster"
)

// submitPaths submits one job through every path a client has — Submit
// to the leader, Submit to a follower (forwarded), SubmitBatch to each,
// HTTP/JSON to a follower and the CLI to a follower — and returns each
// path's answer as one line: "job N created|existing" or the refusal's
// "CODE_NAME: message".
func submitPaths(t *testing.T, c *cluster.Cluster, leader, follower *cluster.Node, token string, req *pb.SubmitRequest, body string, cli ...string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := map[string]string{}
	answer := func(id uint64, created bool, err error) string {
		if err != nil {
			return rpc.StatusLine(err)
		}
		if created {
			return "job " + itoa(id) + " created"
		}
		return "job " + itoa(id) + " existing"
	}
	for _, n := range []struct {
		name string
		node *cluster.Node
	}{{"leader", leader}, {"follower", follower}} {
		cl := pb.NewClientClient(cluster.Dial(t, n.node.GRPCAddr, token, nil))
		r, err := cl.Submit(ctx, req)
		out["Submit via "+n.name] = answer(r.GetJobId(), r.GetCreated(), err)
		b, err := cl.SubmitBatch(ctx, &pb.SubmitBatchRequest{Jobs: []*pb.SubmitRequest{req}})
		if err == nil && b.Results[0].Error != "" {
			out["SubmitBatch via "+n.name] = b.Results[0].Error
		} else {
			out["SubmitBatch via "+n.name] = answer(b.GetResults()[0].GetJobId(), b.GetResults()[0].GetCreated(), err)
		}
	}
	a := api{t: t, client: http.DefaultClient, base: "http://" + follower.HTTPAddr}
	r := a.do("POST", "/v1/jobs", token, body)
	var ok struct {
		JobID   string `json:"job_id"`
		Created bool   `json:"created"`
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal([]byte(r.body), &ok); err != nil {
		t.Fatalf("HTTP answer %q: %v", r.body, err)
	}
	if ok.Code != "" {
		out["HTTP via follower"] = ok.Code + ": " + ok.Message
	} else if ok.Created {
		out["HTTP via follower"] = "job " + ok.JobID + " created"
	} else {
		out["HTTP via follower"] = "job " + ok.JobID + " existing"
	}
	args := append([]string{"submit", "--server", follower.GRPCAddr, "--token", token}, cli...)
	stdout, stderr, err := c.Run(args...)
	switch {
	case err != nil:
		out["CLI via follower"] = strings.TrimSpace(stderr)
	default:
		out["CLI via follower"] = strings.TrimSpace(stdout)
	}
	return out
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// TestAdmissionOnEveryPath: a command gets one verdict whatever path it
// takes, because every path asks the state machine's own check: a keyed
// resend of a tenant at its max_queued answers the existing job through
// Submit, SubmitBatch, a follower's forward, HTTP and the CLI; the same
// cause is refused with the same text on every path (quota, unknown
// tenant, class, a bad field), the quota and the unknown tenant with
// their reason for clients to branch on; and under implicit_tenants a
// refused submit makes no tenant.
func TestAdmissionOnEveryPath(t *testing.T) {
	c := startWithTokens(t, 3, "")
	leader := c.WaitLeader(20 * time.Second)
	follower := c.Followers(leader)[0]
	c.WaitConverged(30 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := pb.NewAdminClient(cluster.Dial(t, leader.GRPCAddr, adminToken, nil))
	if _, err := admin.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "acme", Tier: pb.Tier_GOLD.Enum(), Caps: &pb.CapsUpdate{MaxQueued: proto.Uint32(1)}}); err != nil {
		t.Fatal(err)
	}
	// The first submit, from the CLI: its payload is the command the
	// other paths send again.
	if out, errOut, err := c.Run("submit", "--server", leader.GRPCAddr, "--token", acmeToken, "--size", "sm", "--cost", "1s", "--key", "k1", "--", "true"); err != nil || strings.TrimSpace(out) != "job 1 submitted" {
		t.Fatalf("the first submit: %q %q %v", out, errOut, err)
	}
	job, err := pb.NewClientClient(cluster.Dial(t, leader.GRPCAddr, acmeToken, nil)).GetJob(ctx, &pb.GetJobRequest{JobId: 1})
	if err != nil {
		t.Fatal(err)
	}
	k1 := "k1"
	check := func(what string, got map[string]string, want string) {
		t.Helper()
		if len(got) != 6 {
			t.Fatalf("%s: %d paths", what, len(got))
		}
		for path, line := range got {
			if line != want {
				t.Errorf("%s via %s: %q, want %q", what, path, line, want)
			}
		}
	}
	// The resend: the tenant is at its quota, and the key names job 1 (a
	// command job, as the CLI submits a command line).
	resend := submitPaths(t, c, leader, follower, acmeToken,
		&pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1000, IdempotencyKey: &k1, Payload: job.Payload, Form: pb.JobForm_COMMAND},
		fmt.Sprintf(`{"size":"SM","est_cost_ms":"1000","idempotency_key":"k1","payload":%q,"form":"COMMAND"}`, base64.StdEncoding.EncodeToString(job.Payload)),
		"--size", "sm", "--cost", "1s", "--key", "k1", "--", "true")
	resend["CLI via follower"] = strings.Replace(resend["CLI via follower"], `job 1 already exists for key "k1"`, "job 1 existing", 1)
	check("a keyed resend at the quota", resend, "job 1 existing")
	// A new job: the quota.
	k2 := "k2"
	check("a new job at the quota", submitPaths(t, c, leader, follower, acmeToken,
		&pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1000, IdempotencyKey: &k2},
		`{"size":"SM","est_cost_ms":"1000","idempotency_key":"k2"}`,
		"--size", "sm", "--cost", "1s", "--key", "k2", "--", "true"),
		`RESOURCE_EXHAUSTED: tenant "acme" has 1 queued jobs, its max_queued quota`)
	check("a class above max_class", submitPaths(t, c, leader, follower, acmeToken,
		&pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1000, Class: pb.Class_HIGH},
		`{"size":"SM","est_cost_ms":"1000","class":"HIGH"}`,
		"--size", "sm", "--cost", "1s", "--class", "high", "--", "true"),
		"PERMISSION_DENIED: class high is above tenant acme's max_class normal")
	check("a bad group", submitPaths(t, c, leader, follower, acmeToken,
		&pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1000, Group: "a/b"},
		`{"size":"SM","est_cost_ms":"1000","group":"a/b"}`,
		"--size", "sm", "--cost", "1s", "--group", "a/b", "--", "true"),
		`INVALID_ARGUMENT: group: group name "a/b" has '/' at byte 1 (allowed: A-Z a-z 0-9 . _ : @ -)`)
	check("an unknown tenant", submitPaths(t, c, leader, follower, adminToken,
		&pb.SubmitRequest{Tenant: "newco", Size: pb.Size_SM, EstCostMs: 1000},
		`{"tenant":"newco","size":"SM","est_cost_ms":"1000"}`,
		"--tenant", "newco", "--size", "sm", "--cost", "1s", "--", "true"),
		`NOT_FOUND: unknown tenant "newco"`)

	// The reasons, on the wire.
	cl := pb.NewClientClient(cluster.Dial(t, follower.GRPCAddr, acmeToken, nil))
	_, err = cl.Submit(ctx, &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1000})
	if got := reasonOf(err); got != "QUOTA_EXCEEDED" {
		t.Errorf("the quota's reason: %q (%v)", got, err)
	}
	_, err = pb.NewClientClient(cluster.Dial(t, follower.GRPCAddr, adminToken, nil)).Submit(ctx, &pb.SubmitRequest{Tenant: "newco", Size: pb.Size_SM, EstCostMs: 1000})
	if got := reasonOf(err); got != "TENANT_UNKNOWN" {
		t.Errorf("the unknown tenant's reason: %q (%v)", got, err)
	}

	// Under implicit_tenants a submit its would-be tenant may not make
	// (a deadline) is refused, and no tenant is made.
	cfg, err := admin.GetConfig(ctx, &pb.GetConfigRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.ImplicitTenants = pb.Tier_SILVER
	if _, err := admin.SetConfig(ctx, &pb.SetConfigRequest{Config: cfg}); err != nil {
		t.Fatal(err)
	}
	c.WaitConverged(30 * time.Second)
	check("an implicit tenant's deadline", submitPaths(t, c, leader, follower, adminToken,
		&pb.SubmitRequest{Tenant: "newco", Size: pb.Size_SM, EstCostMs: 1000, DeadlineMs: 60_000},
		`{"tenant":"newco","size":"SM","est_cost_ms":"1000","deadline_ms":"60000"}`,
		"--tenant", "newco", "--size", "sm", "--cost", "1s", "--deadline", "1m", "--", "true"),
		"PERMISSION_DENIED: tenant newco may not submit a job with a deadline (allow_deadlines is off)")
	c.WaitConverged(30 * time.Second)
	for _, n := range c.Nodes {
		fwd := pb.NewAdminClient(cluster.Dial(t, n.GRPCAddr, adminToken, nil))
		if _, err := fwd.GetTenant(ctx, &pb.GetTenantRequest{Name: "newco", Read: &pb.ReadOptions{Stale: true}}); status.Code(err) != codes.NotFound {
			t.Errorf("%s: a refused submit made tenant newco: %v", n.ID, err)
		}
	}
}

// reasonOf returns the ErrorInfo reason of a gRPC error, or "".
func reasonOf(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.Reason
		}
	}
	return ""
}
