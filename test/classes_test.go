package test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/snapshot"
	"github.com/baristahq/barista/test/cluster"
)

// wantStatus fails unless err has the code and message.
func wantStatus(t *testing.T, what string, err error, code codes.Code, msg string) {
	t.Helper()
	if st := status.Convert(err); err == nil || st.Code() != code || st.Message() != msg {
		t.Errorf("%s: %v\nwant %v: %s", what, err, code, msg)
	}
}

// runCLI runs the barista command line and returns stdout, the first line
// of stderr and whether it exited 0.
func runCLI(c *cluster.Cluster, args ...string) (string, string, bool) {
	out, errOut, err := c.Run(args...)
	first, _, _ := strings.Cut(errOut, "\n")
	return out, first, err == nil
}

// cliVia returns a runCLI whose commands go to the node at addr with a
// token: "--server addr --token token" go before a "--" (the submitted
// command line), or at the end.
func cliVia(c *cluster.Cluster, addr string) func(token string, args ...string) (string, string, bool) {
	return func(token string, args ...string) (string, string, bool) {
		at := len(args)
		for i, a := range args {
			if a == "--" {
				at = i
				break
			}
		}
		full := append(append(append([]string{}, args[:at]...), "--server", addr, "--token", token), args[at:]...)
		return runCLI(c, full...)
	}
}

// hasRow reports whether a table printed by the command line has a row
// whose words are row's.
func hasRow(table, row string) bool {
	for _, l := range strings.Split(table, "\n") {
		if strings.Join(strings.Fields(l), " ") == row {
			return true
		}
	}
	return false
}

// TestClassesDeadlinesThroughAPIAndCLI: priority classes, deadlines and
// cost estimates through the API and the command line of a three-node
// cluster, every call on a follower. Every refusal names the field and
// the rule; tenant set keeps what it is not given; explain gives the
// reasons, no_worker among them, from the leader, to the job's own tenant
// only.
func TestClassesDeadlinesThroughAPIAndCLI(t *testing.T) {
	c := startWithTokens(t, 3, workerTimeouts)
	follower := c.Followers(c.WaitLeader(20 * time.Second))[0]
	addr := follower.GRPCAddr
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin, acme := adminAndAcme(t, addr)
	beta := pb.NewClientClient(cluster.Dial(t, addr, betaToken, nil))
	goldTenants(t, ctx, admin, "acme", "beta")
	cli := cliVia(c, addr)
	sleep := payload(t, "sleep", "600")

	// Refusals through the API, each naming the field and the rule.
	_, err := acme.Submit(ctx, &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1000, Class: pb.Class_CRITICAL})
	wantStatus(t, "critical", err, codes.PermissionDenied, "class critical is above tenant acme's max_class normal")
	_, err = acme.Submit(ctx, &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1000, DeadlineMs: 60_000})
	wantStatus(t, "deadline", err, codes.PermissionDenied, "tenant acme may not submit a job with a deadline (allow_deadlines is off)")
	_, err = acme.Submit(ctx, &pb.SubmitRequest{Size: pb.Size_SM})
	wantStatus(t, "no cost", err, codes.InvalidArgument, "est_cost_ms: must be positive (got 0); it may be left out only while the cluster's estimate is auto")
	_, err = acme.Submit(ctx, &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1000, DeadlineMs: 500})
	wantStatus(t, "short deadline", err, codes.InvalidArgument, "deadline_ms: 500 is out of range (0 = none, else 1 s .. 1 year after the submit)")
	batch, err := acme.SubmitBatch(ctx, &pb.SubmitBatchRequest{Jobs: []*pb.SubmitRequest{
		{Size: pb.Size_SM, EstCostMs: 1000, Class: pb.Class_HIGH}, {Size: pb.Size_SM, EstCostMs: 1000, Class: pb.Class_LOW, Payload: sleep},
	}})
	if err != nil || batch.Results[0].Error != "PERMISSION_DENIED: class high is above tenant acme's max_class normal" || batch.Results[1].Error != "" {
		t.Fatalf("batch: %v %v", batch, err)
	}
	lowJob := batch.Results[1].JobId
	// ... and through the command line.
	if _, e, ok := cli(acmeToken, "submit", "--size", "sm", "--cost", "1s", "--class", "critical", "--", "true"); ok || e != "PERMISSION_DENIED: class critical is above tenant acme's max_class normal" {
		t.Errorf("CLI critical: ok=%t %q", ok, e)
	}
	if _, e, ok := cli(acmeToken, "submit", "--size", "sm", "--cost", "1s", "--deadline", "1m", "--", "true"); ok || e != "PERMISSION_DENIED: tenant acme may not submit a job with a deadline (allow_deadlines is off)" {
		t.Errorf("CLI deadline: ok=%t %q", ok, e)
	}

	// The admin grants high, deadlines and caps; tenant set keeps what it
	// is not given.
	if _, e, ok := cli(adminToken, "tenant", "set", "acme", "--max-class", "high", "--deadlines", "on", "--cap-high", "1", "--deadline-cap", "2"); !ok {
		t.Fatal(e)
	}
	if _, e, ok := cli(adminToken, "tenant", "set", "acme", "--multiplier", "2"); !ok {
		t.Fatal(e)
	}
	out, e, ok := cli(adminToken, "tenant", "get", "acme", "--json")
	var tj map[string]any
	if !ok || json.Unmarshal([]byte(out), &tj) != nil || tj["max_class"] != "high" || tj["deadlines"] != true || tj["cap_high"] != 1.0 ||
		tj["deadline_cap"] != 2.0 || tj["cap_critical"] != 0.0 || tj["multiplier"] != 2.0 {
		t.Fatalf("tenant get after two sets: %s %s", out, e)
	}
	if out, _, _ := cli(adminToken, "tenant", "get", "acme"); !hasRow(out, "max_class high") || !hasRow(out, "deadlines on") || !hasRow(out, "cap_high 1") {
		t.Errorf("tenant get:\n%s", out)
	}
	// The API's upsert changes only what it names: one without the
	// grants keeps them; one that names them at normal and off clears
	// them.
	if _, err := admin.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "beta", Tier: pb.Tier_GOLD.Enum(), MaxClass: pb.Class_CRITICAL.Enum(), AllowDeadlines: proto.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	if b, err := admin.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "beta", Tier: pb.Tier_GOLD.Enum()}); err != nil || b.MaxClass != pb.Class_CRITICAL || !b.AllowDeadlines {
		t.Fatalf("an upsert without the grants: %v %v", b, err)
	}
	if b, err := admin.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "beta", MaxClass: pb.Class_NORMAL.Enum(), AllowDeadlines: proto.Bool(false)}); err != nil || b.MaxClass != pb.Class_NORMAL || b.AllowDeadlines {
		t.Fatalf("an upsert that clears the grants: %v %v", b, err)
	}
	if _, e, ok := cli(acmeToken, "submit", "--size", "sm", "--cost", "1s", "--class", "critical", "--", "true"); ok || e != "PERMISSION_DENIED: class critical is above tenant acme's max_class high" {
		t.Errorf("CLI critical under high: ok=%t %q", ok, e)
	}

	// Beta may have deadlines again.
	if _, err := admin.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "beta", Tier: pb.Tier_GOLD.Enum(), AllowDeadlines: proto.Bool(true)}); err != nil {
		t.Fatal(err)
	}

	// One sm worker runs a high job of acme; acme's next high sm job is
	// capped, and holds back acme's sm jobs of lower classes; acme's md job
	// has no worker; acme's low lg job waits for the higher classes;
	// beta's sm jobs wait their turn, one behind the other.
	w := c.AddWorker("w-sm", "sm")
	w.Token = workerToken
	w.Start(addr)
	submit := func(cl pb.ClientClient, sz pb.Size, class pb.Class, deadline int64) uint64 {
		t.Helper()
		r, err := cl.Submit(ctx, &pb.SubmitRequest{Size: sz, EstCostMs: 1000, Class: class, DeadlineMs: deadline, Payload: sleep})
		if err != nil {
			t.Fatal(err)
		}
		return r.JobId
	}
	running := submit(acme, pb.Size_SM, pb.Class_HIGH, 0)
	waitJob(t, acme, running, time.Minute, "running", func(j *pb.Job) bool { return j.State == "running" })
	capped := submit(acme, pb.Size_SM, pb.Class_HIGH, 0)
	md := submit(acme, pb.Size_MD, pb.Class_NORMAL, 0)
	held := submit(acme, pb.Size_SM, pb.Class_NORMAL, 0)
	lg := submit(acme, pb.Size_LG, pb.Class_LOW, 0)
	waiting := submit(beta, pb.Size_SM, pb.Class_NORMAL, 0)
	behind := submit(beta, pb.Size_SM, pb.Class_NORMAL, 0)

	explainAs := func(cl pb.ClientClient, id uint64) *pb.ExplainJobResponse {
		t.Helper()
		r, err := cl.ExplainJob(ctx, &pb.ExplainJobRequest{JobId: id})
		if err != nil {
			t.Fatalf("explain %d: %v", id, err)
		}
		return r
	}
	explain := func(id uint64) *pb.ExplainJobResponse { t.Helper(); return explainAs(acme, id) }
	if r := explain(running); r.Reason != "running" || r.WorkerId != "w-sm" {
		t.Errorf("running job: %v", r)
	}
	if r := explain(capped); r.Reason != "cap" || r.Vertex != "class" || r.Current != 1 || r.Limit != 1 ||
		r.Text != fmt.Sprintf("Job %d (tenant acme, class high, size sm) is next in its queue but a cap holds it: tenant acme runs 1 jobs of class high, its cap_high is 1.", capped) {
		t.Errorf("capped job: %v", r)
	}
	if r := explain(md); r.Reason != "no_worker" {
		t.Errorf("md job: %v", r)
	}
	for _, id := range []uint64{held, lowJob} {
		if r := explain(id); r.Reason != "held" {
			t.Errorf("acme's sm job %d below the capped one: %v", id, r)
		}
	}
	if r := explain(lg); r.Reason != "higher_class" {
		t.Errorf("low lg job: %v", r)
	}
	if r := explainAs(beta, waiting); r.Reason != "waiting" || r.Ahead != 0 || r.TagMs != "0" || r.VnowMs != "0" || r.FittingWorkers != 1 || !r.WorkersBusy || r.Place == nil ||
		withoutPlace(r.Text) != fmt.Sprintf("Job %d (tenant beta, class normal, size sm) is next: nothing goes before it, and every worker that fits it (1 worker of size sm or larger) is busy; the first to ask for work takes it. Tenant beta's tag in class normal is 0 virtual ms; the class's virtual_now is 0.", waiting) {
		t.Errorf("waiting job: %v", r)
	}
	if r := explainAs(beta, behind); r.Reason != "behind" || r.Position != 1 {
		t.Errorf("behind job: %v", r)
	}
	// The command line: a paragraph, or the fields as numbers.
	if out, e, ok := cli(acmeToken, "explain", fmt.Sprint(md)); !ok ||
		withoutPlace(strings.TrimSuffix(out, "\n"))+"\n" != fmt.Sprintf("Job %d (tenant acme, class normal, size md) could run, but no connected, undrained worker of size md or larger is there to take it.\n", md) {
		t.Errorf("explain md: %q %s", out, e)
	}
	out, e, ok = cli(acmeToken, "explain", fmt.Sprint(capped), "--json")
	var ej map[string]any
	if !ok || json.Unmarshal([]byte(out), &ej) != nil || ej["reason"] != "cap" || ej["vertex"] != "class" || ej["current"] != 1.0 ||
		ej["limit"] != 1.0 || ej["job_id"] != float64(capped) || ej["class"] != "high" || ej["size"] != "sm" {
		t.Errorf("explain --json: %s %s", out, e)
	}
	// A deadline job goes ahead of its class's other jobs (the waiting
	// job now has one candidate ahead); still queued past its deadline,
	// it has missed it.
	dl := submit(beta, pb.Size_SM, pb.Class_NORMAL, 1000)
	if r := explainAs(beta, waiting); r.Reason != "waiting" || r.Ahead != 1 {
		t.Errorf("waiting job behind a deadline job: %v", r)
	}
	if r := explainAs(beta, dl); r.Reason != "waiting" || r.Ahead != 0 {
		t.Errorf("deadline job: %v", r)
	}
	j := waitJob(t, beta, dl, 30*time.Second, "deadline missed", func(j *pb.Job) bool { return j.DeadlineMissed })
	if j.Class != pb.Class_NORMAL || j.DeadlineAtMs != j.SubmittedAtMs+1000 || j.EstSource != "submitted" || j.State != "queued" {
		t.Errorf("deadline job: %v", j)
	}
	if out, _, _ := cli(betaToken, "job", fmt.Sprint(dl)); !strings.Contains(out, "(missed: still queued)\n") || !hasRow(out, "estimated 1s (submitted)") {
		t.Errorf("barista job:\n%s", out)
	}
	// Another tenant's job is not found, exactly like a missing one.
	_, err = beta.ExplainJob(ctx, &pb.ExplainJobRequest{JobId: running})
	wantStatus(t, "beta explains acme's job", err, codes.NotFound, fmt.Sprintf("job %d not found", running))
	_, err = acme.ExplainJob(ctx, &pb.ExplainJobRequest{JobId: 99999})
	wantStatus(t, "a missing job", err, codes.NotFound, "job 99999 not found")
	if _, e, ok := cli(betaToken, "explain", fmt.Sprint(running)); ok || e != fmt.Sprintf("NOT_FOUND: job %d not found", running) {
		t.Errorf("CLI explain of another tenant's job: ok=%t %q", ok, e)
	}
	if _, err := beta.CancelJob(ctx, &pb.CancelJobRequest{JobId: behind}); err != nil {
		t.Fatal(err)
	}
	if r := explainAs(beta, behind); r.Reason != "cancelled" || r.Text != fmt.Sprintf("Job %d (tenant beta, class normal, size sm) has ended: cancelled.", behind) {
		t.Errorf("cancelled job: %v", r)
	}

	// estimate=auto: a submit may leave its cost out.
	if _, e, ok := cli(adminToken, "config", "set", "estimate=auto", "default_cost=2m"); !ok {
		t.Fatal(e)
	}
	out, e, ok = cli(acmeToken, "submit", "--size", "lg", "--json", "--", "true")
	var sj map[string]any
	if !ok || json.Unmarshal([]byte(out), &sj) != nil {
		t.Fatalf("submit without a cost under estimate=auto: %s %s", out, e)
	}
	if out, _, _ := cli(acmeToken, "job", fmt.Sprint(sj["job_id"])); !hasRow(out, "estimated 2m0s (default)") || !hasRow(out, "class normal") {
		t.Errorf("barista job of an auto estimate:\n%s", out)
	}
}

// TestFeatureLevelOldVoter: a cluster with one voter that reports feature
// level 1 (as a server of a build before feature levels would) stays at
// level 1: class, deadline, the new tenant and configuration fields and
// webhooks are refused at the edge naming the level, snapshots are format
// 1. When that voter restarts at this build's level (4), the leader
// raises the level (a command in the log) and they are accepted. A voter
// below the level in force cannot join.
func TestFeatureLevelOldVoter(t *testing.T) {
	c := cluster.New(t)
	old := startOldVoter(t, c, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	setupTenants(t, c, map[string]pb.Tier{"acme": pb.Tier_GOLD})
	n2 := c.Nodes[1]
	client := pb.NewClientClient(n2.Conn())
	msgAt := func(what string, need int) string {
		return fmt.Sprintf(`%s needs cluster feature level %d; the cluster is at level 1 until every voter runs a build that understands level %d (docs/operations.md, "Upgrades")`, what, need, need)
	}
	msg := func(what string) string { return msgAt(what, 2) }
	_, err := client.Submit(ctx, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1000, Class: pb.Class_HIGH})
	wantStatus(t, "class at level 1", err, codes.FailedPrecondition, msg("class high"))
	_, err = client.Submit(ctx, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1000, DeadlineMs: 5000})
	wantStatus(t, "deadline at level 1", err, codes.FailedPrecondition, msg("deadline"))
	if _, e, ok := runCLI(c, "tenant", "set", "acme", "--max-class", "high", "--server", n2.GRPCAddr); ok || e != "FAILED_PRECONDITION: "+msg("max_class high") {
		t.Errorf("tenant set --max-class at level 1: ok=%t %q", ok, e)
	}
	if _, e, ok := runCLI(c, "config", "set", "estimate=auto", "--server", old.GRPCAddr); ok || e != "FAILED_PRECONDITION: "+msg("estimate=auto") {
		t.Errorf("config set estimate=auto at level 1: ok=%t %q", ok, e)
	}
	if _, e, ok := runCLI(c, "webhook", "set", "--tenant", "acme", "--url", "https://hooks.example.com/", "--server", n2.GRPCAddr); ok || e != "FAILED_PRECONDITION: "+msgAt("webhook set", 3) {
		t.Errorf("webhook set at level 1: ok=%t %q", ok, e)
	}
	if _, err := client.Submit(ctx, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1000}); err != nil {
		t.Fatalf("a normal submit at level 1: %v", err)
	}
	// Snapshots are what the previous build reads.
	snap := func() byte { return snapshotFormat(t, c, "--server", n2.GRPCAddr) }
	if f := snap(); f != 1 {
		t.Errorf("snapshot format %d at level 1", f)
	}

	// The old voter is upgraded: restarted at the build's level.
	upgradeOldVoter(t, c, old)
	if _, err := client.Submit(ctx, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1000, Class: pb.Class_LOW, DeadlineMs: 0}); err != nil {
		t.Fatalf("a low submit at level 5: %v", err)
	}
	if _, e, ok := runCLI(c, "tenant", "set", "acme", "--max-class", "high", "--deadlines", "on", "--server", n2.GRPCAddr); !ok {
		t.Fatalf("tenant set at level 5: %s", e)
	}
	if _, err := client.Submit(ctx, &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1000, Class: pb.Class_HIGH, DeadlineMs: 5000}); err != nil {
		t.Fatalf("class and deadline at level 5: %v", err)
	}
	if f := snap(); f != snapshot.FormatVersion {
		t.Errorf("snapshot format %d at level 5, want %d", f, snapshot.FormatVersion)
	}
	c.WaitConverged(30 * time.Second)

	// A server that understands only level 1 cannot join now.
	n4 := c.Add("n4")
	n4.Args = []string{"--test-feature-level", "1"}
	n4.Start("--join", n2.GRPCAddr)
	want := fmt.Sprintf("n4 understands feature level 1, the cluster is at %d: upgrade it before it joins", fsm.MaxFeatureLevel)
	waitFor(t, 30*time.Second, "n4's join to be refused naming the levels", func() (bool, string) {
		return strings.Contains(n4.Log(), want), cluster.Tail(n4.LogPath, 20)
	})
	peers, err := n2.Client().ListPeers(ctx, &clusterpb.ListPeersRequest{})
	if err != nil || len(peers.Peers) != 3 {
		t.Fatalf("peers after n4's refused join: %v %v", peers, err)
	}
}
