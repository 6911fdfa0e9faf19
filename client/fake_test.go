package client

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/baristahq/barista/proto"
)

// TestMain fails the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeNode is a Client service on a loopback port whose answers a test
// scripts per method, with the number of the call (1, 2, ...) to that
// method on this node; it records every request.
type fakeNode struct {
	pb.UnimplementedClientServer
	addr string

	submit func(n int, req *pb.SubmitRequest) (*pb.SubmitResponse, error)
	batch  func(n int, req *pb.SubmitBatchRequest) (*pb.SubmitBatchResponse, error)
	get    func(n int, req *pb.GetJobRequest) (*pb.Job, error)
	list   func(n int, req *pb.ListJobsRequest) (*pb.ListJobsResponse, error)
	cancel func(n int, req *pb.CancelJobRequest) (*pb.CancelJobResponse, error)
	watch  func(n int, req *pb.WatchEventsRequest, s grpc.ServerStreamingServer[pb.Event]) error

	mu      sync.Mutex
	submits []*pb.SubmitRequest
	batches []*pb.SubmitBatchRequest
	gets    []*pb.GetJobRequest
	lists   []*pb.ListJobsRequest
	cancels []*pb.CancelJobRequest
	watches []*pb.WatchEventsRequest
}

// record appends req to *log and returns the call's number.
func record[T any](f *fakeNode, log *[]T, req T) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	*log = append(*log, req)
	return len(*log)
}

// count returns the length of one of f's logs.
func count[T any](f *fakeNode, log *[]T) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(*log)
}

func (f *fakeNode) Submit(_ context.Context, req *pb.SubmitRequest) (*pb.SubmitResponse, error) {
	n := record(f, &f.submits, req)
	if f.submit == nil {
		return nil, status.Error(codes.Unimplemented, "no submit")
	}
	return f.submit(n, req)
}

func (f *fakeNode) SubmitBatch(_ context.Context, req *pb.SubmitBatchRequest) (*pb.SubmitBatchResponse, error) {
	n := record(f, &f.batches, req)
	if f.batch == nil {
		return nil, status.Error(codes.Unimplemented, "no batch")
	}
	return f.batch(n, req)
}

func (f *fakeNode) GetJob(_ context.Context, req *pb.GetJobRequest) (*pb.Job, error) {
	n := record(f, &f.gets, req)
	if f.get == nil {
		return nil, status.Error(codes.Unimplemented, "no get")
	}
	return f.get(n, req)
}

func (f *fakeNode) ListJobs(_ context.Context, req *pb.ListJobsRequest) (*pb.ListJobsResponse, error) {
	n := record(f, &f.lists, req)
	if f.list == nil {
		return nil, status.Error(codes.Unimplemented, "no list")
	}
	return f.list(n, req)
}

func (f *fakeNode) CancelJob(_ context.Context, req *pb.CancelJobRequest) (*pb.CancelJobResponse, error) {
	n := record(f, &f.cancels, req)
	if f.cancel == nil {
		return nil, status.Error(codes.Unimplemented, "no cancel")
	}
	return f.cancel(n, req)
}

func (f *fakeNode) WatchEvents(req *pb.WatchEventsRequest, s grpc.ServerStreamingServer[pb.Event]) error {
	n := record(f, &f.watches, req)
	if f.watch == nil {
		return status.Error(codes.Unimplemented, "no watch")
	}
	return f.watch(n, req, s)
}

// serve starts f on a loopback port (with the server options given) until
// the test ends.
func serve(t *testing.T, f *fakeNode, opts ...grpc.ServerOption) *fakeNode {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	pb.RegisterClientServer(srv, f)
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	f.addr = lis.Addr().String()
	return f
}

// deadAddr returns a loopback address that refuses connections.
func deadAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// newClient returns a Client of addrs with quick backoffs, closed when the
// test ends.
func newClient(t *testing.T, opts Options, addrs ...string) *Client {
	t.Helper()
	if opts.Backoff == (Backoff{}) {
		opts.Backoff = Backoff{First: time.Millisecond, Max: 4 * time.Millisecond}
	}
	if opts.WatchBackoff == (Backoff{}) {
		opts.WatchBackoff = Backoff{First: time.Millisecond, Max: 4 * time.Millisecond}
	}
	c, err := New(addrs, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// notLeaderErr is what a node that no longer leads answers.
func notLeaderErr() error {
	st, _ := status.New(codes.Unavailable, "leadership changed; retry").
		WithDetails(&errdetails.ErrorInfo{Reason: ReasonNotLeader, Domain: ErrorDomain})
	return st.Err()
}
