package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/snapshot"
	"github.com/baristahq/barista/test/cluster"
)

// TestGroupsThroughAPIAndCLI: groups on a three-node cluster, every call
// on a follower. While one voter reports feature level 3 (as the build
// before groups does) everything of groups is refused, naming the field
// and both levels, and snapshots are format 4; once it runs this build the
// leader raises the level to 4 and they are accepted. Then: an admin sets
// a group's cap and the tenant's own token can only tighten it; get and
// list (paged, the unnamed group first); max_groups; explain gives
// cap vertex=group_running, held, behind and group_turn under both
// orders; TenantUsage, usage and top list the groups by queue; the
// HTTP/JSON routes of the group calls, a name with a colon included.
func TestGroupsThroughAPIAndCLI(t *testing.T) {
	c := cluster.New(t, "--config", tokenConfig(t, workerTimeouts))
	c.Token = adminToken
	old := startOldVoter(t, c, 3)
	n2 := c.Nodes[1]
	addr := n2.GRPCAddr
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	admin, acme := adminAndAcme(t, addr)
	adminClient := pb.NewClientClient(cluster.Dial(t, addr, adminToken, nil))
	goldTenants(t, ctx, admin, "acme", "beta")
	cli := cliVia(c, addr)
	snap := func() byte { return snapshotFormat(t, c, "--server", addr, "--token", adminToken) }

	// Level 3: refused at the edge, naming the field and both levels.
	msg := func(what string) string {
		return what + ` needs cluster feature level 4; the cluster is at level 3 until every voter runs a build that understands level 4 (docs/operations.md, "Upgrades")`
	}
	_, err := acme.Submit(ctx, &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1000, Group: "a"})
	wantStatus(t, "group at level 3", err, codes.FailedPrecondition, msg("group"))
	_, err = acme.SetGroup(ctx, &pb.SetGroupRequest{Group: "a", Cap: "1"})
	wantStatus(t, "SetGroup at level 3", err, codes.FailedPrecondition, msg("SetGroup"))
	for _, c := range []struct {
		args []string
		what string
	}{
		{[]string{"tenant", "set", "acme", "--group-cap", "1"}, "group_cap"},
		{[]string{"tenant", "set", "acme", "--group-order", "fair"}, "group_order fair"},
		{[]string{"tenant", "set", "acme", "--max-groups", "3"}, "max_groups"},
		{[]string{"group", "set", "a", "--tenant", "acme", "--cap", "2"}, "SetGroup"},
		{[]string{"submit", "--tenant", "acme", "--size", "sm", "--cost", "1s", "--group", "a", "--", "true"}, "group"},
	} {
		if _, e, ok := cli(adminToken, c.args...); ok || e != "FAILED_PRECONDITION: "+msg(c.what) {
			t.Errorf("%v at level 3: ok=%t %q", c.args, ok, e)
		}
	}
	// The default order and a bad name are not a matter of level.
	if _, e, ok := cli(adminToken, "tenant", "set", "acme", "--group-order", "fifo"); !ok {
		t.Errorf("--group-order fifo at level 3: %s", e)
	}
	_, err = acme.Submit(ctx, &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 1000, Group: "a/b"})
	wantStatus(t, "a bad group name", err, codes.InvalidArgument, `group: group name "a/b" has '/' at byte 1 (allowed: A-Z a-z 0-9 . _ : @ -)`)
	if f := snap(); f != 4 {
		t.Errorf("snapshot format %d at level 3, want 4", f)
	}

	// The old voter runs this build: the level goes to 4.
	upgradeOldVoter(t, c, old)
	if f := snap(); f != snapshot.FormatVersion {
		t.Errorf("snapshot format %d at level 5, want 6", f)
	}

	// Tenant settings: tenant set keeps what it is not given.
	if _, e, ok := cli(adminToken, "tenant", "set", "acme", "--group-cap", "1", "--inflight-cpu", "3s"); !ok {
		t.Fatal(e)
	}
	if _, e, ok := cli(adminToken, "tenant", "set", "acme", "--max-groups", "4"); !ok {
		t.Fatal(e)
	}
	out, e, ok := cli(adminToken, "tenant", "get", "acme", "--json")
	var tj map[string]any
	if !ok || json.Unmarshal([]byte(out), &tj) != nil || tj["group_cap"] != 1.0 || tj["group_order"] != "fifo" || tj["max_groups"] != 4.0 ||
		tj["groups"] != 0.0 || tj["inflight_cpu_ms"] != 3000.0 {
		t.Fatalf("tenant get: %s %s", out, e)
	}

	// One sm worker. acme: a1 runs (1 s in flight); then a2 (its group
	// at its cap of 1), b3 (2.5 s: 1 + 2.5 > 3 s, its tenant's in-flight
	// cap), c4 (held behind b3), c5 (behind c4 in c's queue).
	w := c.AddWorker("w-sm", "sm")
	w.Token = workerToken
	w.Start(addr)
	sleep := payload(t, "sleep", "600")
	submit := func(sz pb.Size, cost int64, group string) uint64 {
		t.Helper()
		r, err := acme.Submit(ctx, &pb.SubmitRequest{Size: sz, EstCostMs: cost, Group: group, Payload: sleep})
		if err != nil {
			t.Fatalf("submit to group %q: %v", group, err)
		}
		return r.JobId
	}
	a1 := submit(pb.Size_SM, 1000, "a")
	waitJob(t, acme, a1, time.Minute, "running", func(j *pb.Job) bool { return j.State == "running" })
	a2 := submit(pb.Size_SM, 1000, "a")
	b3 := submit(pb.Size_SM, 2500, "b")
	c4 := submit(pb.Size_SM, 1000, "c")
	c5 := submit(pb.Size_SM, 1000, "c")
	if j, err := acme.GetJob(ctx, &pb.GetJobRequest{JobId: a2}); err != nil || j.Group != "a" || j.State != "queued" {
		t.Fatalf("job a2: %v %v", j, err)
	}
	explain := func(id uint64) *pb.ExplainJobResponse {
		t.Helper()
		r, err := acme.ExplainJob(ctx, &pb.ExplainJobRequest{JobId: id})
		if err != nil {
			t.Fatalf("explain %d: %v", id, err)
		}
		return r
	}
	if r := explain(a2); r.Reason != "cap" || r.Vertex != "group_running" || r.Current != 1 || r.Limit != 1 || r.Group != "a" ||
		r.Text != fmt.Sprintf("Job %d (tenant acme, class normal, size sm, group a) is next in its queue but a cap holds it: group a of tenant acme runs 1 jobs, its cap is 1 (its other groups are not held back).", a2) {
		t.Errorf("a2: %v", r)
	}
	if r := explain(b3); r.Reason != "cap" || r.Vertex != "tenant_inflight" || r.Current != 1000 || r.Limit != 3000 {
		t.Errorf("b3: %v", r)
	}
	if r := explain(c4); r.Reason != "held" || r.Group != "c" {
		t.Errorf("c4: %v", r)
	}
	if r := explain(c5); r.Reason != "behind" || r.Position != 1 {
		t.Errorf("c5: %v", r)
	}
	out, e, ok = cli(acmeToken, "explain", fmt.Sprint(a2), "--json")
	var ej map[string]any
	if !ok || json.Unmarshal([]byte(out), &ej) != nil || ej["reason"] != "cap" || ej["vertex"] != "group_running" || ej["group"] != "a" ||
		ej["current"] != 1.0 || ej["limit"] != 1.0 {
		t.Errorf("explain --json: %s %s", out, e)
	}

	// md jobs, no md worker: d6 and e7 both eligible; fifo makes d6 the
	// candidate (no_worker), e7 waits for its group's turn.
	d6 := submit(pb.Size_MD, 100, "d")
	e7 := submit(pb.Size_MD, 100, "")
	if r := explain(d6); r.Reason != "no_worker" {
		t.Errorf("d6: %v", r)
	}
	if r := explain(e7); r.Reason != "group_turn" || r.GroupOrder != "fifo" || r.Group != "" ||
		withoutPlace(r.Text) != fmt.Sprintf("Job %d (tenant acme, class normal, size md) could run, but an older job of another group of tenant acme goes first: under group_order fifo the oldest does.", e7) {
		t.Errorf("e7: %v", r)
	}
	// max_groups 4: a, b, c, d; a fifth named group is refused, the
	// unnamed group does not count.
	_, err = acme.Submit(ctx, &pb.SubmitRequest{Size: pb.Size_MD, EstCostMs: 100, Group: "f"})
	wantStatus(t, "a fifth group", err, codes.ResourceExhausted, `tenant acme has 4 groups, its max_groups; a job of a new group "f" would exceed it`)
	_, err = acme.SetGroup(ctx, &pb.SetGroupRequest{Group: "f", Cap: "1"})
	wantStatus(t, "a setting on a fifth group", err, codes.ResourceExhausted, `tenant acme has 4 groups, its max_groups; a setting on a new group "f" would exceed it`)
	if _, e, ok := cli(adminToken, "tenant", "set", "acme", "--max-groups", "0", "--group-order", "fair"); !ok {
		t.Fatal(e)
	}
	// Under fair all groups' tags are equal here (d's and the unnamed
	// group's 0): the lower job ID, d6, goes first.
	if r := explain(e7); r.Reason != "group_turn" || r.GroupOrder != "fair" {
		t.Errorf("e7 under fair: %v", r)
	}

	// Group caps: the admin's, and the tenant's own, which only tightens.
	group := func(cl pb.ClientClient, name, cp string) *pb.Group {
		t.Helper()
		g, err := cl.SetGroup(ctx, &pb.SetGroupRequest{Tenant: "acme", Group: name, Cap: cp})
		if err != nil {
			t.Fatalf("set group %s cap %s: %v", name, cp, err)
		}
		return g
	}
	show := func(g *pb.Group) string {
		return fmt.Sprintf("%s cap=%s own=%d limit=%d running=%d queued=%d", g.Name, g.Cap, g.TenantCap, g.Limit, g.Running, g.Queued)
	}
	for _, s := range []struct {
		cl   pb.ClientClient
		cp   string
		want string
	}{
		{adminClient, "3", "a cap=3 own=0 limit=3 running=1 queued=1"},
		{acme, "2", "a cap=3 own=2 limit=2 running=1 queued=1"},
		{acme, "5", "a cap=3 own=5 limit=3 running=1 queued=1"}, // never above the admin's
		{adminClient, "none", "a cap=none own=5 limit=5 running=1 queued=1"},
		{acme, "none", "a cap=none own=0 limit=0 running=1 queued=1"},
		{adminClient, "inherit", "a cap=inherit own=0 limit=1 running=1 queued=1"},
	} {
		if got := show(group(s.cl, "a", s.cp)); got != s.want {
			t.Errorf("set a cap %s: %s, want %s", s.cp, got, s.want)
		}
	}
	_, err = acme.SetGroup(ctx, &pb.SetGroupRequest{Group: "a", Cap: "0"})
	wantStatus(t, "cap 0", err, codes.InvalidArgument, `cap: "0" (want inherit, none or a number 1..1000000)`)
	_, err = acme.SetGroup(ctx, &pb.SetGroupRequest{Tenant: "beta", Group: "a", Cap: "1"})
	wantStatus(t, "acme naming beta", err, codes.PermissionDenied, `tenant: this token is for tenant "acme", not "beta"`)
	_, err = acme.GetGroup(ctx, &pb.GetGroupRequest{Group: "zz"})
	wantStatus(t, "an unknown group", err, codes.NotFound, `group: tenant "acme" has no group "zz" (a group without jobs or settings is forgotten)`)
	// A setting keeps a group without jobs; clearing it forgets the group.
	if got := show(group(adminClient, "idle", "2")); got != "idle cap=2 own=0 limit=2 running=0 queued=0" {
		t.Errorf("a group with a setting only: %s", got)
	}
	if got := show(group(adminClient, "idle", "inherit")); got != "idle cap=inherit own=0 limit=1 running=0 queued=0" {
		t.Errorf("the setting cleared: %s", got)
	}
	_, err = acme.GetGroup(ctx, &pb.GetGroupRequest{Group: "idle"})
	wantStatus(t, "a forgotten group", err, codes.NotFound, `group: tenant "acme" has no group "idle" (a group without jobs or settings is forgotten)`)

	// list, paged by name, the unnamed group first; the CLI follows pages.
	var names []string
	tok := ""
	for {
		page, err := acme.ListGroups(ctx, &pb.ListGroupsRequest{PageSize: 2, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		var ns []string
		for _, g := range page.Groups {
			ns = append(ns, fmt.Sprintf("%q:%d/%d", g.Name, g.Running, g.Queued))
		}
		names = append(names, strings.Join(ns, " "))
		if tok = page.NextPageToken; tok == "" {
			break
		}
	}
	if got := strings.Join(names, " | "); got != `"":0/1 "a":1/1 | "b":0/1 "c":0/2 | "d":0/1` {
		t.Errorf("pages: %s", got)
	}
	out, _, _ = cli(acmeToken, "group", "list")
	for _, row := range []string{"GROUP CAP TENANT_CAP LIMIT RUNNING QUEUED", "(unnamed) inherit none none 0 1", "a inherit none 1 1 1", "c inherit none 1 0 2"} {
		if !hasRow(out, row) {
			t.Errorf("group list has no row %q:\n%s", row, out)
		}
	}
	if out, e, ok := cli(acmeToken, "group", "get", "c", "--json"); !ok ||
		strings.TrimSpace(out) != `{"burst":0,"cap":"inherit","limit":1,"name":"c","paused":"","queued":2,"rate":"","rate_eligible_at_ms":0,"running":0,"tenant":"acme","tenant_cap":0}` {
		t.Errorf("group get --json: %s %s", out, e)
	}

	// Usage and top: the groups with the most queued jobs first.
	u, err := acme.TenantUsage(ctx, &pb.TenantUsageRequest{TopGroups: 2})
	if err != nil {
		t.Fatal(err)
	}
	var top []string
	for _, g := range u.Groups {
		top = append(top, fmt.Sprintf("%q:%d/%d/%d", g.Name, g.Running, g.Queued, g.Limit))
	}
	if got := strings.Join(top, " "); got != `"c":0/2/1 "a":1/1/1` || u.GroupCount != 5 {
		t.Errorf("usage groups: %s of %d", got, u.GroupCount)
	}
	if out, _, _ := cli(acmeToken, "usage"); !hasRow(out, "groups 5") || !hasRow(out, "c 0 2 1") || !hasRow(out, "(unnamed) 0 1 none") {
		t.Errorf("usage:\n%s", out)
	}
	out, e, ok = cli(adminToken, "top", "--once", "--json")
	var tp struct {
		Tenants []struct {
			Name   string `json:"name"`
			Groups []struct {
				Name    string `json:"name"`
				Running uint32 `json:"running"`
				Queued  uint32 `json:"queued"`
				Limit   uint32 `json:"limit"`
			} `json:"groups"`
		} `json:"tenants"`
	}
	if !ok || json.Unmarshal([]byte(out), &tp) != nil {
		t.Fatalf("top: %s %s", out, e)
	}
	for _, tn := range tp.Tenants {
		if tn.Name == "acme" && fmt.Sprint(tn.Groups) != "[{c 0 2 1} {a 1 1 1} { 0 1 0} {b 0 1 1} {d 0 1 1}]" {
			t.Errorf("top groups of acme: %v", tn.Groups)
		}
	}

	// HTTP/JSON: the same calls, a name with a colon in the path.
	a := api{t: t, client: &http.Client{Timeout: 30 * time.Second}, base: "http://" + n2.HTTPAddr}
	var g struct {
		Name  string `json:"name"`
		Cap   string `json:"cap"`
		Limit uint32 `json:"limit"`
	}
	a.json("PUT", "/v1/groups/cust:42", adminToken, `{"tenant":"acme","cap":"7"}`, &g)
	if g.Name != "cust:42" || g.Cap != "7" || g.Limit != 7 {
		t.Errorf("PUT /v1/groups/cust:42: %+v", g)
	}
	a.json("GET", "/v1/groups/cust%3A42", acmeToken, "", &g)
	if g.Name != "cust:42" || g.Cap != "7" {
		t.Errorf("GET /v1/groups/cust%%3A42: %+v", g)
	}
	var list struct {
		Groups []struct {
			Name string `json:"name"`
		} `json:"groups"`
		Next string `json:"next_page_token"`
	}
	a.json("GET", "/v1/groups?page_size=3&stale=false", acmeToken, "", &list)
	if fmt.Sprint(list.Groups) != "[{} {a} {b}]" || list.Next == "" {
		t.Errorf("GET /v1/groups: %+v", list)
	}
	a.expect("a bad cap over HTTP", a.do("PUT", "/v1/groups/a", acmeToken, `{"cap":"lots"}`), 400, "INVALID_ARGUMENT",
		`cap: "lots" (want inherit, none or a number 1..1000000)`)
	a.expect("an unknown group over HTTP", a.do("GET", "/v1/groups/nope", acmeToken, ""), 404, "NOT_FOUND",
		`group: tenant "acme" has no group "nope" (a group without jobs or settings is forgotten)`)
	c.WaitConverged(30 * time.Second)
}
