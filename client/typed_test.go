package client

import (
	"context"
	"testing"

	pb "github.com/baristahq/barista/proto"
)

type resizeArgs struct {
	Image string `json:"image"`
}

func (resizeArgs) Kind() string { return "resize" }

type digestArgs struct {
	Name string `json:"name"`
}

func (digestArgs) Kind() string { return "digest" }

// TestInsertIsAFunctionJob: Insert and InsertMany submit typed arguments
// as function jobs of their kind (SPEC §3 "Kinds"), which only a worker
// that registered the kind is given; Submit and SubmitBatch send the form
// the caller set, unspecified included; a job read back says its form.
func TestInsertIsAFunctionJob(t *testing.T) {
	f := serve(t, &fakeNode{
		submit: func(n int, req *pb.SubmitRequest) (*pb.SubmitResponse, error) {
			return &pb.SubmitResponse{JobId: uint64(n), Created: true}, nil
		},
		batch: func(n int, req *pb.SubmitBatchRequest) (*pb.SubmitBatchResponse, error) {
			resp := &pb.SubmitBatchResponse{}
			for i := range req.Jobs {
				resp.Results = append(resp.Results, &pb.SubmitResult{JobId: uint64(10*n + i), Created: true})
			}
			return resp, nil
		},
		get: func(n int, req *pb.GetJobRequest) (*pb.Job, error) {
			return &pb.Job{JobId: req.JobId, Tenant: "acme", JobType: "resize", State: "queued", Form: pb.JobForm_FUNCTION}, nil
		},
	})
	c := newClient(t, Options{}, f.addr)
	ctx := context.Background()

	r, err := c.Insert(ctx, resizeArgs{Image: "a.png"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Job.ID != 1 || r.Job.Kind != "resize" || r.Job.Form != "function" {
		t.Errorf("inserted job %d of kind %q, form %q; want 1, resize, function", r.Job.ID, r.Job.Kind, r.Job.Form)
	}
	res, err := c.InsertMany(ctx, []InsertManyParams{{Args: digestArgs{Name: "x"}}, {Args: resizeArgs{Image: "b.png"}}})
	if err != nil || len(res) != 2 || res[0].ID != 10 || res[1].ID != 11 {
		t.Fatalf("InsertMany: %+v, %v", res, err)
	}

	// The caller's own requests go as built.
	if _, err := c.Submit(ctx, &pb.SubmitRequest{JobType: "render", Payload: []byte(`{"argv": ["true"]}`), Form: pb.JobForm_COMMAND}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(ctx, &pb.SubmitRequest{JobType: "render", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SubmitBatch(ctx, []*pb.SubmitRequest{{JobType: "a"}, {JobType: "b", Form: pb.JobForm_FUNCTION}}); err != nil {
		t.Fatal(err)
	}

	type sent struct {
		kind string
		form pb.JobForm
	}
	var got []sent
	for _, s := range f.submits {
		got = append(got, sent{s.JobType, s.Form})
	}
	for _, b := range f.batches {
		for _, s := range b.Jobs {
			got = append(got, sent{s.JobType, s.Form})
		}
	}
	want := []sent{
		{"resize", pb.JobForm_FUNCTION},             // Insert
		{"render", pb.JobForm_COMMAND},              // Submit, a command line
		{"render", pb.JobForm_JOB_FORM_UNSPECIFIED}, // Submit, no form
		{"digest", pb.JobForm_FUNCTION},             // InsertMany
		{"resize", pb.JobForm_FUNCTION},             // InsertMany
		{"a", pb.JobForm_JOB_FORM_UNSPECIFIED},      // SubmitBatch, no form
		{"b", pb.JobForm_FUNCTION},                  // SubmitBatch, as set
	}
	if len(got) != len(want) {
		t.Fatalf("sent %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d: kind %q form %v, want kind %q form %v", i, got[i].kind, got[i].form, want[i].kind, want[i].form)
		}
	}
}

// TestJobForm: a job read back names its form.
func TestJobForm(t *testing.T) {
	for _, c := range []struct {
		form pb.JobForm
		want Form
	}{{pb.JobForm_JOB_FORM_UNSPECIFIED, "any"}, {pb.JobForm_COMMAND, "command"}, {pb.JobForm_FUNCTION, "function"}} {
		if got := JobFromProto(&pb.Job{Form: c.form}).Form; got != c.want {
			t.Errorf("form %v: %q, want %q", c.form, got, c.want)
		}
	}
}
