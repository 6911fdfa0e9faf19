package rpc

import (
	"context"
	"testing"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
)

// TestEdgeSubmitKeepsTheForm: the command a submit becomes at the edge
// carries the job's form (SPEC §3 "Kinds"), so that a command line is a
// command job and a typed payload a function job of its kind; a submit
// that gives none is a job of no form, as before kinds.
func TestEdgeSubmitKeepsTheForm(t *testing.T) {
	for _, form := range []pb.JobForm{pb.JobForm_JOB_FORM_UNSPECIFIED, pb.JobForm_COMMAND, pb.JobForm_FUNCTION} {
		req := &pb.SubmitRequest{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 1000, JobType: "digest", Form: form}
		job := &clusterpb.SubmitJob{}
		if err := edgeSubmit(context.Background(), req, job, fsm.DefaultConfig(), fsm.MaxFeatureLevel); err != nil {
			t.Fatalf("%s: %v", form, err)
		}
		if job.Form != form {
			t.Errorf("submit of form %s became a command of form %s", form, job.Form)
		}
	}
}
