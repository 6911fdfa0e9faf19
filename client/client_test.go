package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/baristahq/barista/internal/wire"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
)

func key(s string) *string { return &s }

// TestFailoverSkipsADeadNode: the first node refuses connections; the
// call goes to the second, once, and the next call starts there.
func TestFailoverSkipsADeadNode(t *testing.T) {
	b := serve(t, &fakeNode{get: func(n int, req *pb.GetJobRequest) (*pb.Job, error) {
		return &pb.Job{JobId: req.JobId, Tenant: req.Tenant, State: "queued"}, nil
	}})
	c := newClient(t, Options{}, deadAddr(t), b.addr)
	for i := range 3 {
		j, err := c.GetJob(context.Background(), &pb.GetJobRequest{Tenant: "acme", JobId: uint64(7 + i)})
		if err != nil || j.JobId != uint64(7+i) || j.State != "queued" {
			t.Fatalf("call %d: %v %v", i, j, err)
		}
	}
	if got := count(b, &b.gets); got != 3 {
		t.Errorf("the live node served %d calls, want 3", got)
	}
	c.mu.Lock()
	next := c.next
	c.mu.Unlock()
	if next != 1 {
		t.Errorf("the node tried first is %d, want 1 (the one that answered)", next)
	}
}

// TestEveryNodeDown: with no node reachable a call retries in rounds until
// its timeout, then fails UNAVAILABLE naming a node.
func TestEveryNodeDown(t *testing.T) {
	c := newClient(t, Options{CallTimeout: 300 * time.Millisecond}, deadAddr(t), deadAddr(t))
	start := time.Now()
	_, err := c.GetJob(context.Background(), &pb.GetJobRequest{Tenant: "acme", JobId: 1})
	if !errors.Is(err, ErrUnavailable) || !strings.HasPrefix(err.Error(), "UNAVAILABLE: cannot connect to 127.0.0.1:") {
		t.Fatalf("err = %v", err)
	}
	if took := time.Since(start); took < 300*time.Millisecond || took > 10*time.Second {
		t.Errorf("gave up after %s, want the 300ms call timeout", took)
	}
	if status.Code(err) != codes.Unavailable {
		t.Errorf("status.Code = %v", status.Code(err))
	}
}

// TestRetries: which calls that failed after they went out are sent again
// to the next node. NOT_LEADER (the node did nothing) always is; plain
// UNAVAILABLE only for calls that are safe to repeat.
func TestRetries(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "connection reset")
	ok := &pb.SubmitResponse{JobId: 7, Created: true}
	cases := []struct {
		name      string
		fail      error
		call      func(c *Client) error
		log       func(f *fakeNode) int
		wantFirst int // calls the failing node saw
		wantNext  int // calls the next node saw
		wantErr   string
	}{
		{"unkeyed submit, UNAVAILABLE: not retried", unavailable,
			func(c *Client) error {
				_, err := c.Submit(context.Background(), &pb.SubmitRequest{Tenant: "acme", JobType: "a"})
				return err
			}, func(f *fakeNode) int { return count(f, &f.submits) }, 1, 0, "UNAVAILABLE: connection reset"},
		{"unkeyed submit, NOT_LEADER: retried", notLeaderErr(),
			func(c *Client) error {
				_, err := c.Submit(context.Background(), &pb.SubmitRequest{Tenant: "acme", JobType: "a"})
				return err
			}, func(f *fakeNode) int { return count(f, &f.submits) }, 1, 1, ""},
		{"keyed submit, UNAVAILABLE: retried", unavailable,
			func(c *Client) error {
				_, err := c.Submit(context.Background(), &pb.SubmitRequest{Tenant: "acme", IdempotencyKey: key("k1")})
				return err
			}, func(f *fakeNode) int { return count(f, &f.submits) }, 1, 1, ""},
		{"keyed submit, DEADLINE_EXCEEDED from the node: retried", status.Error(codes.DeadlineExceeded, "apply timed out"),
			func(c *Client) error {
				_, err := c.Submit(context.Background(), &pb.SubmitRequest{Tenant: "acme", IdempotencyKey: key("k1")})
				return err
			}, func(f *fakeNode) int { return count(f, &f.submits) }, 1, 1, ""},
		{"keyed submit, INVALID_ARGUMENT: answered", status.Error(codes.InvalidArgument, "size: must be sm, md or lg"),
			func(c *Client) error {
				_, err := c.Submit(context.Background(), &pb.SubmitRequest{Tenant: "acme", IdempotencyKey: key("k1")})
				return err
			}, func(f *fakeNode) int { return count(f, &f.submits) }, 1, 0, "INVALID_ARGUMENT: size: must be sm, md or lg"},
		{"batch with one unkeyed job: not retried", unavailable,
			func(c *Client) error {
				_, err := c.SubmitBatch(context.Background(), []*pb.SubmitRequest{{IdempotencyKey: key("k1")}, {}})
				return err
			}, func(f *fakeNode) int { return count(f, &f.batches) }, 1, 0, "jobs 0..1 of 2 not submitted: UNAVAILABLE: connection reset"},
		{"batch, every job keyed: retried", unavailable,
			func(c *Client) error {
				_, err := c.SubmitBatch(context.Background(), []*pb.SubmitRequest{{IdempotencyKey: key("k1")}, {IdempotencyKey: key("k2")}})
				return err
			}, func(f *fakeNode) int { return count(f, &f.batches) }, 1, 1, ""},
		{"cancel: not retried", unavailable,
			func(c *Client) error {
				_, err := c.CancelJob(context.Background(), &pb.CancelJobRequest{Tenant: "acme", JobId: 7})
				return err
			}, func(f *fakeNode) int { return count(f, &f.cancels) }, 1, 0, "UNAVAILABLE: connection reset"},
		{"cancel, NOT_LEADER: retried", notLeaderErr(),
			func(c *Client) error {
				_, err := c.CancelJob(context.Background(), &pb.CancelJobRequest{Tenant: "acme", JobId: 7})
				return err
			}, func(f *fakeNode) int { return count(f, &f.cancels) }, 1, 1, ""},
		{"read: retried", unavailable,
			func(c *Client) error {
				_, err := c.GetJob(context.Background(), &pb.GetJobRequest{Tenant: "acme", JobId: 7})
				return err
			}, func(f *fakeNode) int { return count(f, &f.gets) }, 1, 1, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			failing := serve(t, &fakeNode{
				submit: func(int, *pb.SubmitRequest) (*pb.SubmitResponse, error) { return nil, tc.fail },
				batch:  func(int, *pb.SubmitBatchRequest) (*pb.SubmitBatchResponse, error) { return nil, tc.fail },
				cancel: func(int, *pb.CancelJobRequest) (*pb.CancelJobResponse, error) { return nil, tc.fail },
				get:    func(int, *pb.GetJobRequest) (*pb.Job, error) { return nil, tc.fail },
			})
			next := serve(t, &fakeNode{
				submit: func(int, *pb.SubmitRequest) (*pb.SubmitResponse, error) { return ok, nil },
				batch: func(_ int, req *pb.SubmitBatchRequest) (*pb.SubmitBatchResponse, error) {
					resp := &pb.SubmitBatchResponse{}
					for range req.Jobs {
						resp.Results = append(resp.Results, &pb.SubmitResult{JobId: 1, Created: true})
					}
					return resp, nil
				},
				cancel: func(int, *pb.CancelJobRequest) (*pb.CancelJobResponse, error) {
					return &pb.CancelJobResponse{State: "cancelled"}, nil
				},
				get: func(int, *pb.GetJobRequest) (*pb.Job, error) { return &pb.Job{JobId: 7}, nil },
			})
			c := newClient(t, Options{}, failing.addr, next.addr)
			err := tc.call(c)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.wantErr {
				t.Errorf("err = %q, want %q", got, tc.wantErr)
			}
			if f, n := tc.log(failing), tc.log(next); f != tc.wantFirst || n != tc.wantNext {
				t.Errorf("calls: failing node %d, next node %d; want %d and %d", f, n, tc.wantFirst, tc.wantNext)
			}
		})
	}
}

// TestReadRetriedInRounds: one node failing twice then answering; the read
// is sent three times, with a pause between rounds.
func TestReadRetriedInRounds(t *testing.T) {
	f := serve(t, &fakeNode{get: func(n int, req *pb.GetJobRequest) (*pb.Job, error) {
		if n < 3 {
			return nil, status.Error(codes.Unavailable, "no leader yet")
		}
		return &pb.Job{JobId: req.JobId, State: "running"}, nil
	}})
	c := newClient(t, Options{Backoff: Backoff{First: 20 * time.Millisecond, Max: 40 * time.Millisecond}}, f.addr)
	start := time.Now()
	j, err := c.GetJob(context.Background(), &pb.GetJobRequest{Tenant: "acme", JobId: 9})
	if err != nil || j.State != "running" {
		t.Fatalf("%v %v", j, err)
	}
	if n := count(f, &f.gets); n != 3 {
		t.Errorf("%d calls, want 3", n)
	}
	if took := time.Since(start); took < 60*time.Millisecond {
		t.Errorf("took %s: want pauses of 20ms then 40ms between the rounds", took)
	}
}

// TestErrorsAreTyped: each code the cluster answers matches its sentinel
// (and no other), keeps the message, prints "CODE_NAME: message" and
// still carries its gRPC status.
func TestErrorsAreTyped(t *testing.T) {
	cases := []struct {
		code codes.Code
		is   error
		name string
	}{
		{codes.InvalidArgument, ErrInvalid, "INVALID_ARGUMENT"},
		{codes.NotFound, ErrNotFound, "NOT_FOUND"},
		{codes.AlreadyExists, ErrAlreadyExists, "ALREADY_EXISTS"},
		{codes.PermissionDenied, ErrPermissionDenied, "PERMISSION_DENIED"},
		{codes.Unauthenticated, ErrUnauthenticated, "UNAUTHENTICATED"},
		{codes.ResourceExhausted, ErrResourceExhausted, "RESOURCE_EXHAUSTED"},
		{codes.FailedPrecondition, ErrFailedPrecondition, "FAILED_PRECONDITION"},
		{codes.OutOfRange, ErrOutOfRange, "OUT_OF_RANGE"},
		{codes.Aborted, ErrAborted, "ABORTED"},
		{codes.Internal, ErrInternal, "INTERNAL"},
		{codes.Unimplemented, ErrUnimplemented, "UNIMPLEMENTED"},
		{codes.DataLoss, ErrDataLoss, "DATA_LOSS"},
		{codes.Unknown, ErrUnknown, "UNKNOWN"},
	}
	f := serve(t, &fakeNode{get: func(_ int, req *pb.GetJobRequest) (*pb.Job, error) {
		c := codes.Code(req.JobId)
		return nil, status.Errorf(c, "job %d: %s", req.JobId, c)
	}})
	c := newClient(t, Options{}, f.addr)
	for _, tc := range cases {
		_, err := c.GetJob(context.Background(), &pb.GetJobRequest{Tenant: "acme", JobId: uint64(tc.code)})
		want := fmt.Sprintf("%s: job %d: %s", tc.name, tc.code, tc.code)
		var e *Error
		if !errors.As(err, &e) || e.Code != tc.code || e.Message != fmt.Sprintf("job %d: %s", tc.code, tc.code) || err.Error() != want {
			t.Errorf("%s: err = %v, want %q", tc.name, err, want)
		}
		if status.Code(err) != tc.code {
			t.Errorf("%s: status.Code = %v", tc.name, status.Code(err))
		}
		for _, other := range cases {
			if got := errors.Is(err, other.is); got != (other.code == tc.code) {
				t.Errorf("%s: errors.Is(err, %v) = %v", tc.name, other.is, got)
			}
		}
	}
	if n := count(f, &f.gets); n != len(cases) {
		t.Errorf("%d calls for %d refusals: a refusal was retried", n, len(cases))
	}
	// The context's own errors.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.GetJob(ctx, &pb.GetJobRequest{Tenant: "acme", JobId: 1})
	if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrCanceled) {
		t.Errorf("cancelled: %v", err)
	}
	slow := serve(t, &fakeNode{get: func(int, *pb.GetJobRequest) (*pb.Job, error) {
		time.Sleep(200 * time.Millisecond)
		return &pb.Job{}, nil
	}})
	c2 := newClient(t, Options{CallTimeout: 50 * time.Millisecond}, slow.addr)
	_, err = c2.GetJob(context.Background(), &pb.GetJobRequest{Tenant: "acme", JobId: 1})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrDeadlineExceeded) || !strings.HasPrefix(err.Error(), "DEADLINE_EXCEEDED: ") {
		t.Errorf("timed out: %v", err)
	}
}

// TestSubmitResultError: a batch job's refusal is read from its status
// (code, reason, field, retry delay), never from its text; a result of a
// server that sends no status keeps its text as an UNKNOWN error's
// message.
func TestSubmitResultError(t *testing.T) {
	if SubmitResultError(&pb.SubmitResult{JobId: 1}) != nil {
		t.Error("an accepted job has an error")
	}
	st, _ := status.New(codes.ResourceExhausted, "tenant acme: 3 queued jobs (max_queued 3)").WithDetails(
		&errdetails.ErrorInfo{Reason: "QUOTA_EXCEEDED", Domain: ErrorDomain, Metadata: map[string]string{"field": "tenant"}},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(1500 * time.Millisecond)})
	r := &pb.SubmitResult{}
	wire.SetRefusal(r, st.Err())
	if r.Error != "RESOURCE_EXHAUSTED: tenant acme: 3 queued jobs (max_queued 3)" || r.Reason != "QUOTA_EXCEEDED" || r.Field != "tenant" || r.RetryAfterMs != 1500 {
		t.Errorf("the result's plain fields: %v", r)
	}
	r.Error, r.Reason, r.Field = "INVALID_ARGUMENT: not what the status says", "", "" // the status alone decides
	err := SubmitResultError(r)
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrQuotaExceeded) || !errors.Is(err, ErrResourceExhausted) ||
		e.Reason != "QUOTA_EXCEEDED" || e.Field != "tenant" || e.RetryAfter != 1500*time.Millisecond || Reason(err) != "QUOTA_EXCEEDED" {
		t.Errorf("%#v", err)
	}
	err = SubmitResultError(&pb.SubmitResult{Error: "ALREADY_EXISTS: from an earlier build"})
	if !errors.Is(err, ErrUnknown) || err.Error() != "UNKNOWN: ALREADY_EXISTS: from an earlier build" {
		t.Errorf("%v", err)
	}
}

// TestSubmitBatchChunks: 2,500 jobs go as 1,000 + 1,000 + 500, results in
// the jobs' order; a refused job has a typed error; a failing chunk stops
// the batch with the results before it.
func TestSubmitBatchChunks(t *testing.T) {
	f := serve(t, &fakeNode{batch: func(n int, req *pb.SubmitBatchRequest) (*pb.SubmitBatchResponse, error) {
		resp := &pb.SubmitBatchResponse{}
		for _, j := range req.Jobs {
			i, _ := strconv.Atoi(strings.TrimPrefix(j.GetIdempotencyKey(), "k-"))
			if i == 1500 {
				r := &pb.SubmitResult{}
				wire.SetRefusal(r, status.Error(codes.InvalidArgument, "size: must be sm, md or lg"))
				resp.Results = append(resp.Results, r)
				continue
			}
			resp.Results = append(resp.Results, &pb.SubmitResult{JobId: uint64(i + 1), Created: true})
		}
		return resp, nil
	}})
	c := newClient(t, Options{}, f.addr)
	jobs := make([]*pb.SubmitRequest, 2500)
	for i := range jobs {
		jobs[i] = &pb.SubmitRequest{Tenant: "acme", IdempotencyKey: key(fmt.Sprintf("k-%d", i))}
	}
	res, err := c.SubmitBatch(context.Background(), jobs)
	if err != nil || len(res) != 2500 {
		t.Fatalf("%d results, %v", len(res), err)
	}
	var sizes []int
	for _, b := range f.batches {
		sizes = append(sizes, len(b.Jobs))
	}
	if !slices.Equal(sizes, []int{1000, 1000, 500}) {
		t.Errorf("requests of %v jobs", sizes)
	}
	for i, r := range res {
		if i == 1500 {
			if !errors.Is(SubmitResultError(r), ErrInvalid) || r.JobId != 0 {
				t.Errorf("job 1500: %v", r)
			}
			continue
		}
		if r.JobId != uint64(i+1) || r.Error != "" {
			t.Fatalf("result %d: %v", i, r)
		}
	}

	g := serve(t, &fakeNode{batch: func(n int, req *pb.SubmitBatchRequest) (*pb.SubmitBatchResponse, error) {
		if n == 2 {
			return nil, status.Error(codes.PermissionDenied, `tenant: this token is for tenant "beta", not "acme"`)
		}
		resp := &pb.SubmitBatchResponse{}
		for range req.Jobs {
			resp.Results = append(resp.Results, &pb.SubmitResult{JobId: 1, Created: true})
		}
		return resp, nil
	}})
	c2 := newClient(t, Options{}, g.addr)
	res, err = c2.SubmitBatch(context.Background(), jobs)
	want := `jobs 1000..1999 of 2500 not submitted: PERMISSION_DENIED: tenant: this token is for tenant "beta", not "acme"`
	if len(res) != 1000 || !errors.Is(err, ErrPermissionDenied) || err.Error() != want {
		t.Errorf("%d results, err %v", len(res), err)
	}
	if n := count(g, &g.batches); n != 2 {
		t.Errorf("%d requests, want 2 (the batch stops at the refused chunk)", n)
	}
}

// TestSubmitBatchSplitsByBytes: six jobs of 0.9 MiB go in requests of at
// most MaxBatchBytes (three, then three), not in one message too large
// to send; a job too large for any message is refused on its own, as
// INVALID_ARGUMENT (permanent) naming its size and the limit in its
// result, and the jobs after it are submitted.
func TestSubmitBatchSplitsByBytes(t *testing.T) {
	f := serve(t, &fakeNode{batch: func(n int, req *pb.SubmitBatchRequest) (*pb.SubmitBatchResponse, error) {
		resp := &pb.SubmitBatchResponse{}
		for _, j := range req.Jobs {
			i, _ := strconv.Atoi(strings.TrimPrefix(j.GetIdempotencyKey(), "k-"))
			resp.Results = append(resp.Results, &pb.SubmitResult{JobId: uint64(i + 1), Created: true})
		}
		return resp, nil
	}}, grpc.MaxRecvMsgSize(MaxMessageBytes))
	c := newClient(t, Options{}, f.addr)
	jobs := make([]*pb.SubmitRequest, 8)
	for i := range jobs {
		size := 900 << 10
		if i == 6 {
			size = 5 << 20 // over any message
		}
		jobs[i] = &pb.SubmitRequest{Tenant: "acme", IdempotencyKey: key(fmt.Sprintf("k-%d", i)), Payload: make([]byte, size)}
	}
	res, err := c.SubmitBatch(context.Background(), jobs)
	if err != nil || len(res) != 8 {
		t.Fatalf("%d results, %v", len(res), err)
	}
	var sizes []int
	for _, b := range f.batches {
		sizes = append(sizes, len(b.Jobs))
	}
	if !slices.Equal(sizes, []int{3, 3, 1}) {
		t.Errorf("requests of %v jobs, want [3 3 1] (the job of 5 MiB is never received)", sizes)
	}
	for i, r := range res {
		if i == 6 {
			if want := "INVALID_ARGUMENT: payload: 5242880 bytes: the job would be a 5242901-byte request, over the largest a server takes (4194304 bytes; the cluster's max_payload_bytes is lower still)"; !errors.Is(SubmitResultError(r), ErrTooLarge) || r.JobId != 0 || r.Error != want || r.Field != "payload" {
				t.Errorf("job 6: %v", r)
			}
			continue
		}
		if r.JobId != uint64(i+1) || r.Error != "" {
			t.Errorf("result %d: %v", i, r)
		}
	}
}

// TestJobsWalksPages: Jobs follows the page tokens to the end, every
// page asked with the first request's filters (state, pool, order).
func TestJobsWalksPages(t *testing.T) {
	f := serve(t, &fakeNode{list: func(_ int, req *pb.ListJobsRequest) (*pb.ListJobsResponse, error) {
		from, _ := strconv.Atoi(req.PageToken)
		resp := &pb.ListJobsResponse{}
		for id := from + 1; id <= min(from+2, 5); id++ {
			resp.Jobs = append(resp.Jobs, &pb.Job{JobId: uint64(id)})
		}
		if from+2 < 5 {
			resp.NextPageToken = strconv.Itoa(from + 2)
		}
		return resp, nil
	}})
	c := newClient(t, Options{}, f.addr)
	var ids []uint64
	for j, err := range c.Jobs(context.Background(), &pb.ListJobsRequest{Tenant: "acme", State: "queued", PageSize: 2, Pool: "gpu", NewestFirst: true}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.JobId)
	}
	var tokens []string
	for _, r := range f.lists {
		tokens = append(tokens, r.PageToken)
		if r.State != "queued" || r.PageSize != 2 || r.Tenant != "acme" || r.Pool != "gpu" || !r.NewestFirst {
			t.Errorf("request %v", r)
		}
	}
	if !slices.Equal(ids, []uint64{1, 2, 3, 4, 5}) || !slices.Equal(tokens, []string{"", "2", "4"}) {
		t.Errorf("ids %v, tokens %v", ids, tokens)
	}
}

// TestClosed: a closed Client refuses calls.
func TestClosed(t *testing.T) {
	c, err := New([]string{deadAddr(t)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetJob(context.Background(), &pb.GetJobRequest{}); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	if err := c.Watch(context.Background(), &pb.WatchEventsRequest{}, func(*pb.Event) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("watch after Close: %v", err)
	}
}

// TestNewChecksAddresses: an empty list is refused; blanks are dropped.
func TestNewChecksAddresses(t *testing.T) {
	if _, err := New([]string{" ", ""}, Options{}); err == nil || err.Error() != "client: no node address given" {
		t.Errorf("empty list: %v", err)
	}
	c, err := New([]string{" 127.0.0.1:1", "", "127.0.0.1:2 "}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.Addrs(); !slices.Equal(got, []string{"127.0.0.1:1", "127.0.0.1:2"}) {
		t.Errorf("addrs %v", got)
	}
}

// TestIdempotentCalls: which requests are sent again after a failure.
func TestIdempotentCalls(t *testing.T) {
	cases := []struct {
		method string
		req    any
		want   bool
	}{
		{"/barista.v1.Client/Submit", &pb.SubmitRequest{}, false},
		{"/barista.v1.Client/Submit", &pb.SubmitRequest{IdempotencyKey: key("k")}, true},
		{"/barista.v1.Client/SubmitBatch", &pb.SubmitBatchRequest{}, false},
		{"/barista.v1.Client/SubmitBatch", &pb.SubmitBatchRequest{Jobs: []*pb.SubmitRequest{{IdempotencyKey: key("a")}, {IdempotencyKey: key("b")}}}, true},
		{"/barista.v1.Client/SubmitBatch", &pb.SubmitBatchRequest{Jobs: []*pb.SubmitRequest{{IdempotencyKey: key("a")}, {}}}, false},
		{"/barista.v1.Client/GetJob", &pb.GetJobRequest{}, true},
		{"/barista.v1.Client/ListJobs", &pb.ListJobsRequest{}, true},
		{"/barista.v1.Client/TenantUsage", &pb.TenantUsageRequest{}, true},
		{"/barista.v1.Client/ExplainJob", &pb.ExplainJobRequest{}, true},
		{"/barista.v1.Client/CancelJob", &pb.CancelJobRequest{}, false},
		{"/barista.v1.Admin/UpsertTenant", &pb.UpsertTenantRequest{}, true},
		{"/barista.v1.Admin/DeleteTenant", &pb.DeleteTenantRequest{}, false},
		{"/barista.v1.Admin/SetConfig", &pb.SetConfigRequest{}, true},
		{"/barista.v1.Node/Status", &clusterpb.StatusRequest{}, true},
		{"/barista.v1.Node/Join", &clusterpb.JoinRequest{}, true},
		{"/barista.v1.Node/RemovePeer", &clusterpb.RemovePeerRequest{}, false},
		{"/barista.v1.Node/TransferLeadership", &clusterpb.TransferLeadershipRequest{}, false},
		{"/barista.v1.Node/Apply", &clusterpb.ApplyRequest{}, false},
		{"/barista.v1.Worker/Drain", &pb.DrainRequest{}, true},
		{"/barista.v1.Admin/WebhookGet", &pb.WebhookGetRequest{}, true},
		{"/barista.v1.Admin/WebhookStatus", &pb.WebhookStatusRequest{}, true},
		{"/barista.v1.Admin/WebhookSet", &pb.WebhookSetRequest{}, false},
		{"/barista.v1.Admin/WebhookDelete", &pb.WebhookDeleteRequest{}, false},
		{"/barista.v1.Admin/WebhookReplay", &pb.WebhookReplayRequest{}, false},
		{"/barista.v1.Admin/PoolSet", &pb.PoolSetRequest{}, true},
		{"/barista.v1.Admin/PoolGet", &pb.PoolGetRequest{}, true},
		{"/barista.v1.Admin/PoolList", &pb.PoolListRequest{}, true},
		{"/barista.v1.Admin/PoolDelete", &pb.PoolDeleteRequest{}, false},
		{"/barista.v1.Admin/SubscriptionSet", &pb.SubscriptionSetRequest{}, true},
		{"/barista.v1.Admin/SubscriptionDelete", &pb.SubscriptionDeleteRequest{}, true},
		{"/barista.v1.Admin/SubscriptionList", &pb.SubscriptionListRequest{}, true},
		{"/barista.v1.Admin/ResourceSet", &pb.ResourceSetRequest{}, true},
		{"/barista.v1.Admin/ResourceGet", &pb.ResourceGetRequest{}, true},
		{"/barista.v1.Admin/ResourceList", &pb.ResourceListRequest{}, true},
		{"/barista.v1.Admin/ResourceDelete", &pb.ResourceDeleteRequest{}, false},
	}
	for _, tc := range cases {
		if got := idempotent(tc.method, tc.req); got != tc.want {
			t.Errorf("%s %T: %v, want %v", tc.method, tc.req, got, tc.want)
		}
	}
}

// TestRetryDelay: a submit refused for the tenant's submit_rate is not
// retried, and RetryDelay reads how long the cluster asked to wait; an
// error without a RetryInfo has none.
func TestRetryDelay(t *testing.T) {
	f := serve(t, &fakeNode{submit: func(int, *pb.SubmitRequest) (*pb.SubmitResponse, error) {
		st, _ := status.New(codes.ResourceExhausted, `submit_rate: tenant "acme" may submit 1/1s (bursts of 1); retry in 750ms`).
			WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(750 * time.Millisecond)})
		return nil, st.Err()
	}})
	c := newClient(t, Options{}, f.addr)
	_, err := c.Submit(context.Background(), &pb.SubmitRequest{Tenant: "acme"})
	if !errors.Is(err, ErrResourceExhausted) {
		t.Fatalf("err %v", err)
	}
	if d, ok := RetryDelay(err); !ok || d != 750*time.Millisecond {
		t.Errorf("RetryDelay = %s, %t", d, ok)
	}
	if n := count(f, &f.submits); n != 1 {
		t.Errorf("%d calls: the refusal was retried", n)
	}
	if _, ok := RetryDelay(status.Error(codes.ResourceExhausted, "quota")); ok {
		t.Error("a delay without a RetryInfo")
	}
	if _, ok := RetryDelay(errors.New("plain")); ok {
		t.Error("a delay of a plain error")
	}
}
