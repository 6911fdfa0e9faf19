package rpc

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
)

// TestSubmitFormAtTheEdge: a submit's form reaches the job (Submit and
// SubmitBatch), and a job read back says its form (SPEC §3 "Kinds"); a
// function job without a type is refused at the edge; below feature
// level 8 the form is ignored and the job runs on any worker.
func TestSubmitFormAtTheEdge(t *testing.T) {
	ctx := context.Background()
	forms := func(n *poolNode, reqs ...*pb.SubmitRequest) []pb.JobForm {
		t.Helper()
		var out []pb.JobForm
		for _, r := range reqs {
			resp, err := n.cl.Submit(ctx, r)
			if err != nil {
				t.Fatalf("submit %v: %v", r, err)
			}
			j, err := n.cl.GetJob(ctx, &pb.GetJobRequest{Tenant: "acme", JobId: resp.JobId})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, j.Form)
		}
		return out
	}
	job := func(kind string, form pb.JobForm) *pb.SubmitRequest {
		return &pb.SubmitRequest{Tenant: "acme", JobType: kind, Size: pb.Size_SM, EstCostMs: 1000, Form: form}
	}
	want := func(got []pb.JobForm, want ...pb.JobForm) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("forms %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("job %d: form %v, want %v", i, got[i], want[i])
			}
		}
	}

	n := startPoolNode(t, 0)
	n.tenant(t, "acme", pb.Tier_GOLD)
	want(forms(n, job("render", pb.JobForm_COMMAND), job("digest", pb.JobForm_FUNCTION), job("digest", pb.JobForm_JOB_FORM_UNSPECIFIED)),
		pb.JobForm_COMMAND, pb.JobForm_FUNCTION, pb.JobForm_JOB_FORM_UNSPECIFIED)
	res, err := n.cl.SubmitBatch(ctx, &pb.SubmitBatchRequest{Jobs: []*pb.SubmitRequest{job("resize", pb.JobForm_FUNCTION), job("", pb.JobForm_COMMAND)}})
	if err != nil {
		t.Fatal(err)
	}
	var got []pb.JobForm
	for _, r := range res.Results {
		j, err := n.cl.GetJob(ctx, &pb.GetJobRequest{Tenant: "acme", JobId: r.JobId})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, j.Form)
	}
	want(got, pb.JobForm_FUNCTION, pb.JobForm_COMMAND)
	_, err = n.cl.Submit(ctx, job("", pb.JobForm_FUNCTION))
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("a function job without a type: %v, want INVALID_ARGUMENT", err)
	}

	old := startPoolNode(t, fsm.Level7)
	old.tenant(t, "acme", pb.Tier_GOLD)
	want(forms(old, job("render", pb.JobForm_COMMAND), job("digest", pb.JobForm_FUNCTION)),
		pb.JobForm_JOB_FORM_UNSPECIFIED, pb.JobForm_JOB_FORM_UNSPECIFIED)
}

// TestDispatchFindsTheWorkerOfTheKind: with one job queued, a function
// job of kind thumbnail, and two ready workers — the first in the
// dispatcher's order runs digest and resize, the second thumbnail — the
// job goes to the second at once: a worker that runs other kinds does not
// take the round's one turn and get nothing, round after round.
func TestDispatchFindsTheWorkerOfTheKind(t *testing.T) {
	n := startTestNode(t, nil, nil)
	cc := n.dial("")
	ctx := context.Background()
	if _, err := pb.NewAdminClient(cc).UpsertTenant(ctx, &pb.UpsertTenantRequest{Name: "acme", Tier: pb.Tier_GOLD.Enum()}); err != nil {
		t.Fatal(err)
	}
	kinds, welcome, err := n.connectOn(cc, &pb.Hello{WorkerId: "a-kinds", Size: pb.Size_SM, Version: "1", Kinds: []string{"digest", "resize"}})
	if err != nil || !welcome.Kinds {
		t.Fatalf("worker a-kinds: %v, welcome %v", err, welcome)
	}
	thumbs, _, err := n.connectOn(cc, &pb.Hello{WorkerId: "b-thumbs", Size: pb.Size_SM, Version: "1", Kinds: []string{"thumbnail"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []*rawWorker{kinds, thumbs} {
		w.send(&pb.WorkerMessage{Msg: &pb.WorkerMessage_Ready{Ready: &pb.Ready{Credit: 1}}})
	}
	resp, err := pb.NewClientClient(cc).Submit(ctx, &pb.SubmitRequest{Tenant: "acme", JobType: "thumbnail", Form: pb.JobForm_FUNCTION, Size: pb.Size_SM, EstCostMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case m := <-thumbs.msgs:
			if a := m.GetAssign(); a != nil {
				if a.Job != resp.JobId || a.JobType != "thumbnail" || a.Form != pb.JobForm_FUNCTION {
					t.Fatalf("b-thumbs was assigned %v, want job %d of kind thumbnail", a, resp.JobId)
				}
				return
			}
		case m := <-kinds.msgs:
			if a := m.GetAssign(); a != nil {
				t.Fatalf("a-kinds, which does not run thumbnail, was assigned %v", a)
			}
		case <-deadline:
			t.Fatal("the thumbnail job was not assigned to b-thumbs within 5s")
		}
	}
}
