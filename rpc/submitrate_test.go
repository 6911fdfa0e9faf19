package rpc

import (
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/baristahq/barista/internal/ratelimit"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// TestSubmitRateBatchAndError: a batch is held to each tenant's allowance
// in its order, the jobs beyond it refused with RESOURCE_EXHAUSTED and
// when to retry; a lone submit's refusal carries a RetryInfo.
func TestSubmitRateBatchAndError(t *testing.T) {
	now := time.Unix(1_000, 0)
	s := &ClientService{submits: ratelimit.New(func() time.Time { return now }, nil)}
	r := sfq.RateLimit{N: 1, PeriodMs: 60_000, Burst: 2}
	var cmds []*clusterpb.Command
	for _, tenant := range []string{"a", "b", "a", "x", "a", "b", "a"} {
		cmds = append(cmds, &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: tenant}}})
	}
	errs := make([]error, len(cmds))
	errs[3] = status.Error(codes.InvalidArgument, "earlier")
	known := make([]sfq.JobID, len(cmds))
	known[6] = 9 // a keyed resend answered from the state takes nothing
	s.limitBatch(r, cmds, errs, known)
	want := []string{"", "", "", "INVALID_ARGUMENT: earlier",
		`RESOURCE_EXHAUSTED: submit_rate: tenant "a" may submit 1/1m0s (bursts of 2); retry in 1m0s`, "", ""}
	for i, w := range want {
		got := ""
		if errs[i] != nil {
			got = StatusLine(errs[i])
		}
		if got != w {
			t.Errorf("job %d: %q, want %q", i, got, w)
		}
	}
	st := status.Convert(submitRateError("a", r, 1500*time.Millisecond))
	if st.Code() != codes.ResourceExhausted || len(st.Details()) != 2 {
		t.Fatalf("error: %v %v", st.Code(), st.Details())
	}
	if ri, ok := st.Details()[0].(*errdetails.RetryInfo); !ok || ri.RetryDelay.AsDuration() != 1500*time.Millisecond {
		t.Errorf("retry info: %v", st.Details()[0])
	}
	if info, ok := st.Details()[1].(*errdetails.ErrorInfo); !ok || info.Reason != "RATE_LIMITED" {
		t.Errorf("error info: %v", st.Details()[1])
	}
}

// TestForwardedAnswerKeepsStatus: a refusal the leader writes into a
// ForwardSubmits result reaches the follower's caller with its code,
// message and details (a submit_rate refusal's RetryInfo); an accepted
// result is the job; a result saying OK with a status, or a status that
// does not decode, is an internal error, never a success.
func TestForwardedAnswerKeepsStatus(t *testing.T) {
	refusal := submitRateError("acme", sfq.RateLimit{N: 5, PeriodMs: 3_600_000, Burst: 5}, 90*time.Second)
	b, err := proto.Marshal(status.Convert(refusal).Proto())
	if err != nil {
		t.Fatal(err)
	}
	a := forwardedAnswer(&clusterpb.ForwardedSubmitResult{Status: b})
	st := status.Convert(a.err)
	if a.resp != nil || a.how != forwardSent || st.Code() != codes.ResourceExhausted || st.Message() != status.Convert(refusal).Message() || len(st.Details()) != 2 {
		t.Fatalf("refusal: %+v %v", a, st)
	}
	if d := st.Details()[0].(*errdetails.RetryInfo).GetRetryDelay().AsDuration(); d != 90*time.Second {
		t.Fatalf("retry delay %s, want 1m30s", d)
	}
	a = forwardedAnswer(&clusterpb.ForwardedSubmitResult{JobId: 7, Created: true})
	if a.err != nil || a.resp.JobId != 7 || !a.resp.Created {
		t.Fatalf("accepted: %+v", a)
	}
	ok, _ := proto.Marshal(status.New(codes.OK, "fine").Proto())
	for _, bad := range [][]byte{ok, {0xff, 0xff}} {
		if a := forwardedAnswer(&clusterpb.ForwardedSubmitResult{JobId: 7, Status: bad}); status.Code(a.err) != codes.Internal || a.resp != nil {
			t.Fatalf("status %x: %+v", bad, a)
		}
	}
}
