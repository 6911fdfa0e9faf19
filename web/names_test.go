package web

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/baristahq/barista/internal/auth"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
)

// TestConsoleLinksEscapeNames: a tenant named "team/a?b#c%d" and a
// drained worker "rack/1": every console link and form to them carries
// the name as one escaped path segment, and following it opens that
// tenant's page, or undrains that worker.
func TestConsoleLinksEscapeNames(t *testing.T) {
	const tenant, worker = "team/a?b#c%d", "rack/1"
	tok := "team-secret-000000"
	n := startTestNode(t, []auth.Token{{Secret: gwAdmin, Role: auth.RoleAdmin}, {Secret: tok, Role: auth.RoleClient, Tenant: tenant}}, nil)
	n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: tenant, Tier: pb.Tier_GOLD}}})
	res := n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: tenant, Size: pb.Size_SM, EstCostMs: 100}}})
	if _, err := pb.NewWorkerClient(n.dial(gwAdmin)).Drain(context.Background(), &pb.DrainRequest{WorkerId: worker, Create: true}); err != nil {
		t.Fatal(err)
	}
	ts := n.serve()
	link := "/tenants/" + url.PathEscape(tenant)
	for _, c := range []struct{ page, token, want string }{
		{"/", gwAdmin, `href="` + link + `"`},
		{fmt.Sprintf("/jobs/%d", res[0].Job), gwAdmin, `href="` + link + `"`},
		{"/jobs", gwAdmin, `href="` + link + `"`},
		{"/", tok, `href="` + link + `"`},
	} {
		r := cdo(t, ts, "GET", c.page, c.token, "")
		if r.status != 200 || !strings.Contains(r.body, c.want) {
			t.Errorf("%s as %s: %d, want it to have %s", c.page, c.token, r.status, c.want)
		}
	}
	if r := cdo(t, ts, "GET", link, gwAdmin, ""); r.status != 200 || !strings.Contains(r.body, "<title>barista · tenant team/a?b#c%d · ") {
		t.Errorf("GET %s: %d\n%s", link, r.status, r.body)
	}
	cookie, csrf := signIn(t, ts, gwAdmin)
	want := `action="/workers/` + url.PathEscape(worker) + `/undrain"`
	if r := cdo(t, ts, "GET", "/workers", "", "", "Cookie", cookie); r.status != 200 || !strings.Contains(r.body, want) {
		t.Errorf("/workers signed in as the admin: %d, want it to have %s", r.status, want)
	}
	if r := post(t, ts, "/workers/"+url.PathEscape(worker)+"/undrain", cookie, url.Values{"csrf": {csrf}}); r.status != 303 {
		t.Errorf("undrain %s: %d %s", worker, r.status, errorText(r.body))
	}
}

// TestGatewayRunNowBody: POST /v1/jobs/N:run-now takes its fields in a
// JSON body, as every POST of the API does: the tenant named there is
// checked against the token, a field it does not have is refused naming
// it, and an admin's run-now naming the job's tenant releases it.
func TestGatewayRunNowBody(t *testing.T) {
	n, ts := gatewayNode(t)
	res := n.propose(&clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 100, DelayMs: 3_600_000}}})
	path := fmt.Sprintf("/v1/jobs/%d:run-now", res[0].Job)
	for _, c := range []struct {
		token, body string
		status      int
		want        string
	}{
		{gwAcme, `{"tenant":"beta"}`, 403, `{"code":"PERMISSION_DENIED","message":"tenant: this token is for tenant \"acme\", not \"beta\"","reason":"","field":"tenant","retry_after_ms":0}`},
		{gwAdmin, `{"tenant":"acme","sise":1}`, 400, `{"code":"INVALID_ARGUMENT","message":"sise: not a field of this request (it takes tenant, job_id)","reason":"","field":"sise","retry_after_ms":0}`},
		{gwAdmin, `{"tenant":"acme"}`, 200, `{"state":"queued"}`},
	} {
		if r := gwDo(t, ts, "POST", path, c.token, c.body); r.status != c.status || canonical(t, r.body) != canonical(t, c.want) {
			t.Errorf("run-now with %s: %d %s\nwant %d %s", c.body, r.status, r.body, c.status, c.want)
		}
	}
}

// TestEdgeRefusesControlAndBidi: the API refuses, before anything is
// proposed, a job type, a group or a tenant name with a control or
// bidirectional formatting character, over gRPC and HTTP alike, naming
// the field, the character and where it is.
func TestEdgeRefusesControlAndBidi(t *testing.T) {
	n, ts := gatewayNode(t)
	ctx := context.Background()
	cl, admin := pb.NewClientClient(n.dial(gwAcme)), pb.NewAdminClient(n.dial(gwAdmin))
	_, applied := n.node.FSM.Hash()
	_, err := cl.Submit(ctx, &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 10, JobType: "a\x00b"})
	wantStatus(t, err, codes.InvalidArgument, `job_type "a\x00b" has U+0000 (a control character) at byte 1`)
	_, err = cl.Submit(ctx, &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 10, JobType: "invoice\u202epdf.exe"})
	wantStatus(t, err, codes.InvalidArgument, `job_type "invoice\u202epdf.exe" has U+202E (a bidirectional formatting character) at byte 7`)
	_, err = cl.Submit(ctx, &pb.SubmitRequest{Size: pb.Size_SM, EstCostMs: 10, Group: "g\u202e"})
	wantStatus(t, err, codes.InvalidArgument, `group: group name "g\u202e" has '\u202e' at byte 1 (allowed: A-Z a-z 0-9 . _ : @ -)`)
	_, err = admin.UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "evil\u202etxt", Tier: pb.Tier_GOLD.Enum()})
	wantStatus(t, err, codes.InvalidArgument, `tenant name "evil\u202etxt" has U+202E (a bidirectional formatting character) at byte 4`)
	r := gwDo(t, ts, "POST", "/v1/jobs", gwAcme, `{"size":"SM","est_cost_ms":"10","job_type":"x\u202ey"}`)
	if want := `{"code":"INVALID_ARGUMENT","message":"job_type \"x\\u202ey\" has U+202E (a bidirectional formatting character) at byte 1","reason":"","field":"job_type","retry_after_ms":0}`; r.status != 400 || canonical(t, r.body) != canonical(t, want) {
		t.Errorf("POST /v1/jobs with a bidi override in the job type: %d %s\nwant 400 %s", r.status, r.body, want)
	}
	if _, got := n.node.FSM.Hash(); got != applied {
		t.Errorf("the refusals reached the log: applied index %d, was %d", got, applied)
	}
}
